// Package shrink searches for the smallest run that still fails the way a failing run
// did: fewer clients, fewer nodes, one nemesis of a composition, fewer faults, a shorter
// time limit, no work or rate, where the failure survives each. Real servers in
// containers never run the same twice, so a smaller spec is kept only when it fails the
// same way (the same checkers invalid) in every one of K fresh runs, each on a new seed;
// the search is greedy, one pass over the spec's dimensions in a fixed order, each trying
// its smallest value first, so its cost is bounded by the number of steps times K.
package shrink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/system"
)

// Trial runs s once and says how it ended: a harness's run in the store, or a test's.
type Trial func(ctx context.Context, s spec.Spec) (Outcome, error)

// Outcome is what one trial run found.
type Outcome struct {
	// Invalid are the checkers that found a violation.
	Invalid []string
	// FirstViolation is when the earliest violation was found, from the run's start; nil
	// when none was.
	FirstViolation *time.Duration
	// Report is the run's report.
	Report string
}

// fails says whether o failed the way target says: every checker of target invalid.
func (o Outcome) fails(target []string) bool {
	for _, c := range target {
		if !slices.Contains(o.Invalid, c) {
			return false
		}
	}
	return true
}

// Options say how hard to look.
type Options struct {
	// Confirm is how many fresh runs in a row a smaller spec must fail in to be kept (K).
	Confirm int
	// Budget bounds the search's wall time; the smallest spec found by then is the answer.
	Budget time.Duration
	// RateRuns is how many fresh runs of the smallest spec measure its failure rate.
	RateRuns int
	// Progress gets a line per step and per run.
	Progress io.Writer
}

// Step is one smaller spec tried.
type Step struct {
	What          string // e.g. "--clients 2"
	Failed, Runs  int
	Kept, Skipped bool // Skipped: the budget ran out before it
}

// Result is the search's answer.
type Result struct {
	Smallest spec.Spec
	Steps    []Step
	// BudgetSpent says the search stopped at the budget, not at its last step.
	BudgetSpent bool
	// Failed of Runs fresh runs of Smallest failed as the original did.
	Failed, Runs int
	// MedianFirst is the median time to the first violation over those that failed.
	MedianFirst time.Duration
	// Report is the report of the last failing run of Smallest.
	Report string
}

// Search shrinks from, a spec whose run found target's checkers invalid, trying each
// smaller spec in K fresh runs (opts.Confirm). Its error is the harness's (no Docker, an
// interrupt): the result then holds what was found so far.
func Search(ctx context.Context, from spec.Spec, target []string, trial Trial, opts Options) (Result, error) {
	s := searcher{trial: trial, target: target, opts: opts, seed: from.Seed + 1000, started: time.Now()}
	s.progress = opts.Progress
	if s.progress == nil {
		s.progress = io.Discard
	}
	res := Result{Smallest: from}
	res.Smallest.StopEarly = true // a run that stops at its first violation takes a fraction of the time
	dims := dimensions()
	for i, dim := range dims {
		for _, step := range dim(res.Smallest) {
			if s.spent() {
				res.BudgetSpent = true
				res.Steps = append(res.Steps, Step{What: step.what, Skipped: true})
				continue
			}
			cand := step.apply(res.Smallest)
			fmt.Fprintf(s.progress, "step %d of %d dimensions: %s%s\n", i+1, len(dims), step.what, s.eta(len(dims)-i))
			failed, runs, last, err := s.confirm(ctx, cand, opts.Confirm)
			kept := failed == runs && runs == opts.Confirm
			res.Steps = append(res.Steps, Step{What: step.what, Failed: failed, Runs: runs, Kept: kept})
			verdict := "not kept"
			if kept {
				res.Smallest, res.Report, verdict = cand, last.Report, "kept"
			}
			fmt.Fprintf(s.progress, "  %d of %d failed as the original: %s\n", failed, runs, verdict)
			if err != nil {
				return res, err
			}
			if kept {
				break // the smallest value that fails: the others are larger
			}
		}
	}
	fmt.Fprintf(s.progress, "failure rate of %s over %d fresh seeds\n", Command(res.Smallest), opts.RateRuns)
	var firsts []time.Duration
	for range opts.RateRuns {
		o, err := s.run(ctx, res.Smallest)
		if err != nil {
			return res, err
		}
		res.Runs++
		if o.fails(target) {
			res.Failed++
			res.Report = o.Report
			if o.FirstViolation != nil {
				firsts = append(firsts, *o.FirstViolation)
			}
		}
	}
	if len(firsts) > 0 {
		slices.Sort(firsts)
		res.MedianFirst = firsts[len(firsts)/2]
	}
	return res, nil
}

type searcher struct {
	trial    Trial
	target   []string
	opts     Options
	seed     int64
	started  time.Time
	runs     int
	progress io.Writer
}

func (s *searcher) spent() bool { return s.opts.Budget > 0 && time.Since(s.started) >= s.opts.Budget }

// eta estimates the rest of the search from the runs so far: a step for each dimension left,
// K runs each, and the rate runs.
func (s *searcher) eta(stepsLeft int) string {
	if s.runs == 0 {
		return ""
	}
	per := time.Since(s.started) / time.Duration(s.runs)
	left := per * time.Duration(stepsLeft*s.opts.Confirm+s.opts.RateRuns)
	return fmt.Sprintf("  (about %s left)", left.Round(time.Second))
}

// confirm runs cand up to k times on fresh seeds, stopping at the first run that does not
// fail as the original did.
func (s *searcher) confirm(ctx context.Context, cand spec.Spec, k int) (failed, runs int, last Outcome, err error) {
	for range k {
		o, err := s.run(ctx, cand)
		if err != nil {
			return failed, runs, last, err
		}
		runs++
		if !o.fails(s.target) {
			return failed, runs, last, nil
		}
		failed, last = failed+1, o
	}
	return failed, runs, last, nil
}

// run runs cand once on the next fresh seed.
func (s *searcher) run(ctx context.Context, cand spec.Spec) (Outcome, error) {
	cand.Seed = s.seed
	s.seed++
	s.runs++
	o, err := s.trial(ctx, cand)
	if err == nil {
		verdict := "no violation"
		switch {
		case o.fails(s.target):
			verdict = "failed: " + strings.Join(o.Invalid, ", ")
		case len(o.Invalid) > 0:
			// Invalid, but not as the original: a different failure, not a pass.
			verdict = "failed otherwise: " + strings.Join(o.Invalid, ", ") + " only"
		}
		fmt.Fprintf(s.progress, "    seed %d: %s\n", cand.Seed, verdict)
	}
	return o, err
}

// step is one smaller spec to try: what it changes, in the words of run's flags.
type step struct {
	what  string
	apply func(spec.Spec) spec.Spec
}

// dimension offers the steps that make one dimension of s smaller, smallest first: the
// first kept is the smallest that still fails, and ends the dimension.
type dimension func(s spec.Spec) []step

// dimensions are tried in this order: the nemesis first (one kind of fault is easier to
// read than several), then the faults, the clients, the time limit, the nodes, and last
// the work and the rate.
func dimensions() []dimension {
	return []dimension{
		func(s spec.Spec) (steps []step) {
			for _, n := range s.Nemesis {
				if len(s.Nemesis) > 1 {
					steps = append(steps, step{"--nemesis " + n, func(c spec.Spec) spec.Spec { c.Nemesis = []string{n}; return c }})
				}
			}
			return steps
		},
		func(s spec.Spec) []step {
			if !history.Injecting(s.Nemesis) {
				return nil // no fault to bound
			}
			return smaller("--faults", []int{1, 2}, func(s *spec.Spec) *int { return &s.Faults }, true)(s)
		},
		smaller("--clients", []int{2, 3}, func(s *spec.Spec) *int { return &s.Clients }, false),
		func(s spec.Spec) (steps []step) {
			for _, d := range []time.Duration{3 * time.Second, 5 * time.Second} {
				// A fault of a set length must still fit in the run (spec.Validate).
				if d < s.TimeLimit.Std() && d >= s.Pause.Std() {
					steps = append(steps, step{"--time-limit " + d.String(), func(c spec.Spec) spec.Spec { c.TimeLimit = spec.Duration(d); return c }})
				}
			}
			return steps
		},
		func(s spec.Spec) []step {
			sys, err := system.Lookup(s.System)
			if err != nil {
				return nil
			}
			if current, err := sys.Check(s.Nodes); err != nil || sys.Sizes.Min >= current {
				return nil
			}
			return []step{{"--nodes " + strconv.Itoa(sys.Sizes.Min), func(c spec.Spec) spec.Spec { c.Nodes = sys.Sizes.Min; return c }}}
		},
		func(s spec.Spec) []step {
			if s.Work == 0 {
				return nil
			}
			return []step{{"--work 0s", func(c spec.Spec) spec.Spec { c.Work = 0; return c }}}
		},
		func(s spec.Spec) []step {
			if s.Rate == 0 {
				return nil
			}
			return []step{{"--rate 0", func(c spec.Spec) spec.Spec { c.Rate = 0; return c }}}
		},
	}
}

// smaller is the dimension of the number field picks, trying values below its current
// one; zeroIsMost says 0 means no bound (--faults), larger than any value.
func smaller(flag string, values []int, field func(*spec.Spec) *int, zeroIsMost bool) dimension {
	return func(s spec.Spec) (steps []step) {
		current := *field(&s)
		for _, n := range values {
			if n < current || zeroIsMost && current == 0 {
				steps = append(steps, step{flag + " " + strconv.Itoa(n), func(c spec.Spec) spec.Spec { *field(&c) = n; return c }})
			}
		}
		return steps
	}
}

// Command is the command that runs s.
func Command(s spec.Spec) string {
	raw, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return spec.ReproduceCommand(raw)
}

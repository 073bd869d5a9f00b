// Package hunt looks for a violation by many short trials, each a run whose fault
// schedule is written (spec.Step) rather than drawn from its seed. With feedback, steps
// are steered by what the lock's clients do (a step waits for its victim in a state near
// the danger, a pause holds on until a takeover), each trial is scored by what it came
// near (Measure: dangers made real, how far a fault on a client in the lock's business
// reached into a lease and beside whom it ended, states of the lock not met before), and
// the next schedule is a mutation of one that came near, never one tried before; without,
// every schedule is drawn blind, as a run's nemesis draws its faults, which is the random
// search it is measured against on equal budgets. It stops at the first violation and makes its
// schedule as small as still fails. The trials themselves are run by the Trial it is
// handed (the CLI's runs the harness), so it links no Docker.
package hunt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Trial runs s once and says what it found.
type Trial func(ctx context.Context, s spec.Spec) (Outcome, error)

// Outcome is one trial's run.
type Outcome struct {
	// Dir is its run directory.
	Dir string
	// Invalid are the checkers that found a violation (lock safety, data safety, fencing).
	Invalid []string
	// Events is its history, which it is scored on.
	Events []history.Event
}

// Options say how to search and for how long (what for, the Space says).
type Options struct {
	// Feedback steers each schedule by what the trials before came near; off, each is drawn afresh.
	Feedback bool
	// Budget bounds the search's wall time, Trials its number of trials (each at least 1).
	Budget time.Duration
	Trials int
	// Seed seeds the schedules drawn and mutated.
	Seed int64
	// Parallel is how many trials run at once, each on a cluster of its own; 0 or 1: one
	// at a time, each schedule steered by every trial before it.
	Parallel int
	// Progress gets a line per trial.
	Progress io.Writer
}

// Record is one trial, as a hunt keeps it: small.
type Record struct {
	N        int           `json:"n"`
	Schedule []spec.Step   `json:"schedule"`
	Parent   int           `json:"parent,omitempty"` // the trial it mutated, from 1; 0: drawn afresh
	Score    Score         `json:"score"`
	Invalid  []string      `json:"invalid,omitempty"`
	Took     time.Duration `json:"took"`
	// At is when it ended, from the hunt's start.
	At time.Duration `json:"at"`
	// Error says why it could not run, which ended the hunt.
	Error string `json:"error,omitempty"`
}

// Result is a hunt's answer.
type Result struct {
	Trials []Record `json:"trials"`
	// Found is the first trial that found a violation, from 1; 0 when none did.
	Found int `json:"found,omitempty"`
	// Smallest is the smallest schedule that still failed once tried again (Shrink), and
	// Spec the whole spec that runs it.
	Smallest []spec.Step `json:"smallest,omitempty"`
	Spec     *spec.Spec  `json:"spec,omitempty"`
	// Spent says the hunt stopped at its budget.
	Spent bool          `json:"spent,omitempty"`
	Took  time.Duration `json:"took"`
}

// FirstFound is the trial that found the violation; false when none did.
func (r Result) FirstFound() (Record, bool) {
	if r.Found == 0 {
		return Record{}, false
	}
	return r.Trials[r.Found-1], true
}

// fresh is how often a feedback search draws a schedule afresh instead of mutating one:
// the corpus of near ones must not shut out what none of them is near.
const fresh = 0.2

// Search runs trials of base over space until one finds a violation or the budget is
// spent, up to opts.Parallel at once. Each trial's spec is base with its schedule and a
// seed of its own (for what the clients draw). A trial started is always awaited and
// kept, even once another found a violation or the budget ran out.
func Search(ctx context.Context, base spec.Spec, space Space, trial Trial, opts Options) (Result, error) {
	began := time.Now()
	s := searcher{space: space, rng: rand.New(rand.NewSource(opts.Seed)), feedback: opts.Feedback, ttl: base.TTL.Std(),
		tried: map[string]bool{}, met: map[string]bool{}, deepened: map[int]bool{}, spent: spentKinds{}, progress: opts.Progress}
	if s.progress == nil {
		s.progress = io.Discard
	}
	done := make(chan ended)
	running, outOfTime := 0, false
	var errs []error
	for {
		for running < max(opts.Parallel, 1) && s.res.Found == 0 && errs == nil && len(s.res.Trials) < opts.Trials {
			if outOfTime = time.Since(began) >= opts.Budget; outOfTime {
				break
			}
			n, ts := s.start(base)
			running++
			go func() {
				start := time.Now()
				out, err := trial(ctx, ts)
				done <- ended{n: n, out: out, err: err, took: time.Since(start), at: time.Since(began)}
			}()
		}
		if running == 0 {
			break
		}
		e := <-done
		running--
		if e.err != nil {
			errs = append(errs, fmt.Errorf("trial %d: %w", e.n, e.err))
			s.res.Trials[e.n-1].Error = e.err.Error()
			continue
		}
		s.end(e)
	}
	s.res.Spent = s.res.Found == 0 && errs == nil && (outOfTime || len(s.res.Trials) >= opts.Trials)
	s.res.Took = time.Since(began)
	return s.res, errors.Join(errs...)
}

// ended is a trial that ran: its number, what it found and when, or why it could not run.
type ended struct {
	n        int
	out      Outcome
	err      error
	took, at time.Duration
}

// searcher is a search's state, kept by Search's own goroutine alone: trials run beside
// it but hand back what they found (ended).
type searcher struct {
	space    Space
	rng      *rand.Rand
	feedback bool
	ttl      time.Duration
	res      Result
	tried    map[string]bool // every schedule started
	met      map[string]bool // every state of the lock a trial met
	corpus   []int           // trials that came near, by index
	deepened map[int]bool    // the corpus's trials already taken past a lease (deepen)
	spent    spentKinds
	progress io.Writer
}

// start makes the next trial: its number (from 1) and its spec. Its record holds its
// schedule and parent until it ends.
func (s *searcher) start(base spec.Spec) (int, spec.Spec) {
	schedule, parent := next(s.space, s.rng, s.feedback, s.res.Trials, s.corpus, s.tried, s.deepened, s.spent)
	s.tried[spec.ScheduleText(schedule)] = true
	n := len(s.res.Trials) + 1
	s.res.Trials = append(s.res.Trials, Record{N: n, Schedule: schedule, Parent: parent})
	ts := base
	ts.Schedule, ts.Seed = schedule, base.Seed+int64(n)
	return n, ts
}

// end scores a trial that ran and learns from it.
func (s *searcher) end(e ended) {
	rec := &s.res.Trials[e.n-1]
	rec.Invalid, rec.Score, rec.Took, rec.At = e.out.Invalid, Measure(e.out.Events, s.ttl, s.space.Aim), e.took, e.at
	for _, st := range rec.Score.States {
		if !s.met[st] {
			s.met[st] = true
			rec.Score.New++
		}
	}
	fmt.Fprintln(s.progress, rec.line())
	if len(rec.Invalid) > 0 {
		if s.res.Found == 0 {
			s.res.Found = e.n
		}
		return
	}
	s.spent.see(rec.Score)
	if better(*rec, s.res.Trials) {
		s.corpus = append(s.corpus, e.n-1)
	}
}

// better says whether a trial joins the corpus that schedules are mutated from: a fault of
// it came near (a hazard, a fault on a client in the lock's business), and nearer than the
// trial it was mutated from, or it met a state no trial had; a child no better than its
// parent would only dilute the corpus, and one that came near nothing is no better a
// parent than a schedule drawn afresh.
func better(rec Record, trials []Record) bool {
	s := rec.Score
	return (s.Hazards > 0 || s.Nearness > 0) && (rec.Parent == 0 || s.New > 0 || s.Value() > trials[rec.Parent-1].Score.Value())
}

// spentKinds counts, by kind of fault (its name and the state its victim met), the trials
// whose nearest fault was of that kind and came as near as the score can say, with no
// violation: there, nearness is evidently not what the danger needs.
type spentKinds map[Nth]int

func (sk spentKinds) see(s Score) {
	if s.Nearness >= 1 {
		sk[Nth{Fault: s.Nearest.Fault, Met: s.Nearest.Met}]++
	}
}

// trust is how much a trial whose nearest fault was of nearest's kind is still worth
// mutating: halved by each trial of that kind that came as near as can be in vain.
func (sk spentKinds) trust(nearest Nth) float64 {
	return math.Pow(0.5, float64(sk[Nth{Fault: nearest.Fault, Met: nearest.Met}]))
}

// next is the next trial's schedule and the trial it mutated (from 1; 0: drawn afresh).
// With feedback, the newest trial that came near and was not yet taken past a lease is
// first (deepen): a lease lock's dangers lie past its lease, so that is the child most
// likely to find one; then mutations of the corpus, each parent mutated only as far as its
// kind of fault is still trusted (spentKinds), and otherwise, and a fifth of the time, a
// schedule drawn afresh: a corpus of one kind that came as near as can be in vain must not
// shut out every other.
func next(space Space, rng *rand.Rand, feedback bool, trials []Record, corpus []int, tried map[string]bool, deepened map[int]bool, spent spentKinds) ([]spec.Step, int) {
	for _, parent := range slices.Backward(corpus) {
		if !feedback || deepened[parent] {
			continue
		}
		deepened[parent] = true
		if s := space.deepen(trials[parent].Schedule, trials[parent].Score, rng); !tried[spec.ScheduleText(s)] {
			return s, parent + 1
		}
	}
	for range 100 {
		if !feedback {
			if s := space.blind(rng); !tried[spec.ScheduleText(s)] {
				return s, 0
			}
			continue
		}
		if len(corpus) == 0 || rng.Float64() < fresh {
			if s := space.fresh(rng); !tried[spec.ScheduleText(s)] {
				return s, 0
			}
			continue
		}
		parent := pick(trials, corpus, rng)
		if rng.Float64() >= spent.trust(trials[parent].Score.Nearest) {
			if s := space.fresh(rng); !tried[spec.ScheduleText(s)] {
				return s, 0
			}
			continue
		}
		if s := space.mutate(trials[parent].Schedule, trials[parent].Score, rng); !tried[spec.ScheduleText(s)] {
			return s, parent + 1
		}
	}
	return space.fresh(rng), 0 // a space that small is spent; a repeat is all there is
}

// pick chooses a parent from the corpus: the best of three drawn at random, so the nearest
// are mutated most without the rest starving.
func pick(trials []Record, corpus []int, rng *rand.Rand) int {
	best := corpus[rng.Intn(len(corpus))]
	for range 2 {
		if c := corpus[rng.Intn(len(corpus))]; trials[c].Score.Value() > trials[best].Score.Value() {
			best = c
		}
	}
	return best
}

// line is a trial's progress line.
func (r Record) line() string {
	verdict := "no violation"
	if len(r.Invalid) > 0 {
		verdict = "VIOLATION: " + strings.Join(r.Invalid, ", ") + " invalid"
	}
	from := "drawn"
	if r.Parent > 0 {
		from = fmt.Sprintf("from %d", r.Parent)
	}
	return fmt.Sprintf("trial %d (%s, %s): hazards %d, nearness %.2f, new states %d: %s  [%s]",
		r.N, from, r.Took.Round(100*time.Millisecond), r.Score.Hazards, r.Score.Nearness, r.Score.New, verdict,
		spec.ScheduleText(r.Schedule))
}

// Shrink makes a failing schedule smaller: each step taken away in turn and kept away when
// a fresh trial without it still finds a violation, so that the command it hands the user
// has only the faults that matter. Real servers never run the same twice, so a step kept
// may not be needed and one taken away may fail less often; the answer is a schedule that
// failed once more as it is.
func Shrink(ctx context.Context, failing spec.Spec, trial Trial, progress io.Writer) ([]spec.Step, error) {
	steps := slices.Clone(failing.Schedule)
	for i := len(steps) - 1; i >= 0 && len(steps) > 1; i-- {
		without := steps[i]
		s := failing
		s.Schedule = slices.Delete(slices.Clone(steps), i, i+1)
		out, err := trial(ctx, s)
		if err != nil {
			return steps, err
		}
		kept := len(out.Invalid) > 0
		if kept {
			steps = s.Schedule
		}
		if progress != nil {
			fmt.Fprintf(progress, "shrink: without %s: %s\n", without, map[bool]string{true: "still fails, taken away", false: "no violation, kept"}[kept])
		}
	}
	return steps, nil
}

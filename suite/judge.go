package suite

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/results"
)

// Status is how a cell, or a whole suite, met its expectations.
type Status string

const (
	// Met: every expectation held (and the expected violation was found often enough).
	Met Status = "met"
	// Failed: an expectation did not hold: a violation where none was expected, a verdict
	// that contradicts the expectation, or a violation found in too few seeds.
	Failed Status = "failed"
	// Unknown: nothing contradicts the expectations, but too little was decided to say
	// they held (a checker unknown, a harness error, a run that did not happen).
	Unknown Status = "unknown"
)

// worse merges statuses: failed beats unknown beats met.
func worse(a, b Status) Status {
	rank := map[Status]int{Met: 0, Unknown: 1, Failed: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// RunResult is what the suite keeps of one run.
type RunResult struct {
	Seed int64 `json:"seed"`
	// Report is the run's report.html, relative to the suite's directory; "" when the run
	// made no directory.
	Report string `json:"report,omitempty"`
	// Command is the `lockbreaker run ...` that runs it again (results.json's); absent
	// from suite.json written before it was kept here.
	Command string `json:"command,omitempty"`
	// Shrink, on an invalid run, is the `lockbreaker shrink ...` that looks for the
	// smallest run failing as it did.
	Shrink string `json:"shrink,omitempty"`
	// Verdict is the run's overall verdict.
	Verdict  checkers.Verdict                   `json:"verdict"`
	Verdicts map[checkers.Name]checkers.Verdict `json:"verdicts"`
	// Summaries are the checkers' one-line summaries, for the reasons a cell gives.
	Summaries map[checkers.Name]string `json:"summaries,omitempty"`
	// FirstViolation is each checker's first violating event, from the run's start.
	FirstViolation map[checkers.Name]Duration `json:"first_violation,omitempty"`
	// Error is a harness error: the run may be partial.
	Error string `json:"error,omitempty"`
	// Elapsed is how long the run took, start to verdict.
	Elapsed Duration `json:"elapsed"`
	// Hazards count the hazards that occurred in the run (results.Summary.Hazards); one
	// its nemeses exist to create that never occurred counts 0.
	Hazards map[history.Hazard]int `json:"hazards,omitempty"`
}

// shrinkText points a reason about a violation at the command that shrinks the run.
func shrinkText(run RunResult, v checkers.Verdict) string {
	if v != checkers.Invalid || run.Shrink == "" {
		return ""
	}
	return " (the smallest run that fails so: " + run.Shrink + ")"
}

// FromSummary keeps what the suite needs of a run's summary; dir is the run's directory.
func FromSummary(seed int64, report, dir string, s results.Summary, err error) RunResult {
	r := RunResult{Seed: seed, Report: report, Command: s.Command, Verdict: s.Verdict, Verdicts: map[checkers.Name]checkers.Verdict{},
		Summaries: map[checkers.Name]string{}, FirstViolation: map[checkers.Name]Duration{}, Error: s.Error}
	if s.Verdict == checkers.Invalid && dir != "" {
		r.Shrink = shellwords.Join([]string{"lockbreaker", "shrink", dir})
	}
	for _, c := range s.Results {
		r.Verdicts[c.Checker], r.Summaries[c.Checker] = c.Verdict, c.Summary
		if c.FirstViolation != nil {
			r.FirstViolation[c.Checker] = Duration(*c.FirstViolation)
		}
	}
	if err != nil && r.Error == "" {
		r.Error = err.Error()
	}
	if r.Verdict == "" {
		r.Verdict = checkers.Unknown
	}
	if !s.Started.IsZero() && s.Finished.After(s.Started) {
		r.Elapsed = Duration(s.Finished.Sub(s.Started))
	}
	if len(s.Hazards) > 0 {
		r.Hazards = map[history.Hazard]int{}
	}
	for _, h := range s.Hazards {
		r.Hazards[h.Hazard] = h.Count
	}
	return r
}

// CellResult is a cell judged on its runs.
type CellResult struct {
	Cell   Cell        `json:"cell"`
	Status Status      `json:"status"`
	Runs   []RunResult `json:"runs"`
	// Checks are the expectations one by one, in checker order.
	Checks []Check `json:"checks"`
	// Reasons say why the cell did not meet its expectations (one line each).
	Reasons []string `json:"reasons,omitempty"`
	// Found counts the runs in which every checker expected invalid said so; it and the
	// times below are kept only for a cell that expects a violation.
	Found *int `json:"found,omitempty"`
	// MedianToViolation and WorstToViolation are over the runs that found it: the time
	// from the run's start to its first violating event.
	MedianToViolation *Duration `json:"median_to_violation,omitempty"`
	WorstToViolation  *Duration `json:"worst_to_violation,omitempty"`
	// Hazards count each hazard over the runs: those the cell requires first, then every
	// other that occurred, by name.
	Hazards []HazardTally `json:"hazards,omitempty"`
}

// HazardTally is how often one hazard occurred over a cell's runs.
type HazardTally struct {
	Hazard history.Hazard `json:"hazard"`
	// Total is over every run, MinPerRun the fewest any one run had.
	Total     int `json:"total"`
	MinPerRun int `json:"min_per_run"`
	// Required is the cell's least number per run (0: none); Short counts the runs below it.
	Required int `json:"required,omitempty"`
	Short    int `json:"runs_short,omitempty"`
}

// Check is one checker's expectation and what the runs said.
type Check struct {
	Checker  checkers.Name            `json:"checker"`
	Expect   Expect                   `json:"expect"`
	Observed map[checkers.Verdict]int `json:"observed"`
	// Status is how this expectation alone fared; for invalid, against the threshold.
	Status Status `json:"status"`
}

// DetectionRate is Found over the runs; false for a cell that expects no violation or
// has no runs.
func (r CellResult) DetectionRate() (float64, bool) {
	if r.Found == nil || len(r.Runs) == 0 {
		return 0, false
	}
	return float64(*r.Found) / float64(len(r.Runs)), true
}

// seedOutcome is what one run says of an expectation.
type seedOutcome int

const (
	found  seedOutcome = iota // it held (for invalid: the violation was found)
	missed                    // a decided verdict contradicts it
	undecided
)

// Judge judges a cell on its runs. It reads the runs' verdicts and hazard counts and
// nothing else.
//
// A run short of a hazard the cell requires (fewer occurrences than Cell.Hazards asks)
// did not test what the cell is about, so it is judged as the checkers judge a run whose
// nemesis never created its hazard (the stats checker): its passes prove nothing, and an
// expected valid is undecided there. Nor is it a detection, found or missed: a violation
// it found did not come through the hazard the cell names, and one it missed was never
// put to it, so it counts among the undecided seeds. A cell whose threshold only such
// runs could still reach therefore could not say (unknown), which is the honest status:
// "failed" would blame the lock for a fault that never landed. A violation where none was
// expected still fails the cell: it needs no hazard to be proven, as an invalid verdict
// stands in checkers.Judge whatever the stats say.
func Judge(c Cell, runs []RunResult) CellResult {
	r := CellResult{Cell: c, Status: Met, Runs: runs}
	if len(runs) == 0 {
		r.Status, r.Reasons = Unknown, []string{"no run"}
		return r
	}
	r.Hazards = tallyHazards(c, runs)
	for _, run := range runs {
		// A harness error may have cut the history short: a pass from it proves nothing,
		// while a violation found in it stands.
		if run.Error != "" {
			r.note(Unknown, "seed %d: harness error: %s", run.Seed, run.Error)
		}
	}
	for _, name := range checkerNames() {
		e := c.Expect[name]
		if e == "" {
			e = ExpectEither
		}
		ch := Check{Checker: name, Expect: e, Observed: map[checkers.Verdict]int{}, Status: Met}
		n, undecidedRuns := 0, 0
		for _, run := range runs {
			v := run.Verdicts[name]
			ch.Observed[v]++
			short := c.shortOf(run) != ""
			// A run whose precondition failed (nothing granted, its hazard never came) proves
			// no pass, and a property it lacks (no tokens where nothing was granted) is no miss.
			partial := run.Error != "" || run.Verdicts[checkers.Stats] == checkers.Unknown
			switch o := holds(e, v, partial, short); {
			case o == found:
				n++
			case o == undecided:
				undecidedRuns++
				if e == ExpectInvalid {
					break
				}
				ch.Status = worse(ch.Status, Unknown)
				// A pass that proves nothing: the run's harness error, or its want of hazards, says why.
				switch {
				case v != checkers.Valid:
					r.note(Unknown, "seed %d: %s expected %s, got %s: %s", run.Seed, name, e, orNone(v), run.Summaries[name])
				case short:
					r.noteShort(run)
				}
			case e != ExpectInvalid:
				ch.Status = Failed
				r.note(Failed, "seed %d: %s expected %s, got %s: %s%s", run.Seed, name, e, v, run.Summaries[name], shrinkText(run, v))
			}
		}
		if e == ExpectInvalid {
			ch.Status = against(n, undecidedRuns, len(runs), c.threshold())
		}
		r.Checks = append(r.Checks, ch)
	}
	if violations := c.expecting(ExpectInvalid); len(violations) > 0 {
		r.judgeDetection(violations)
	}
	return r
}

// holds says what verdict v of one run says of expectation e; partial is a run the
// harness broke or whose precondition failed, whose passes and absent properties prove
// nothing; short a run short of a hazard the cell requires, whose passes prove nothing and
// which is no detection either way (see Judge).
func holds(e Expect, v checkers.Verdict, partial, short bool) seedOutcome {
	want, decides := verdictOf[e]
	switch {
	case !decides:
		return found // either
	case short && e == ExpectInvalid && v != checkers.NotApplicable:
		return undecided
	case v == want && !((partial || short) && v == checkers.Valid):
		return found
	case v != want && (v == checkers.Valid || v == checkers.Invalid || v == checkers.NotApplicable && !partial):
		return missed
	}
	return undecided
}

// verdictOf is the verdict each deciding expectation asks for.
var verdictOf = map[Expect]checkers.Verdict{
	ExpectValid: checkers.Valid, ExpectInvalid: checkers.Invalid, ExpectNotApplicable: checkers.NotApplicable,
}

// shortOf says which hazards the run had fewer of than the cell requires, "1 lost grant,
// fewer than the 3 the cell requires"; "" when it had enough of each.
func (c Cell) shortOf(run RunResult) string {
	var short []string
	for _, h := range slices.Sorted(maps.Keys(c.Hazards)) {
		if n := run.Hazards[h]; n < c.Hazards[h] {
			short = append(short, fmt.Sprintf("%s, fewer than the %d the cell requires", h.Count(n), c.Hazards[h]))
		}
	}
	return strings.Join(short, "; ")
}

// noteShort says once per run that it was short of a hazard the cell requires, which
// leaves the cell unknown at best.
func (r *CellResult) noteShort(run RunResult) {
	why := fmt.Sprintf("seed %d: %s: it did not test what the cell is about, so its passes prove nothing and it is no detection",
		run.Seed, r.Cell.shortOf(run))
	if !slices.Contains(r.Reasons, why) {
		r.note(Unknown, "%s", why)
	}
}

// tallyHazards counts each hazard over the runs: those the cell requires first, then
// every other that occurred, by name.
func tallyHazards(c Cell, runs []RunResult) []HazardTally {
	others := map[history.Hazard]bool{}
	for _, run := range runs {
		for h := range run.Hazards {
			if _, required := c.Hazards[h]; !required {
				others[h] = true
			}
		}
	}
	var tallies []HazardTally
	for _, h := range append(slices.Sorted(maps.Keys(c.Hazards)), slices.Sorted(maps.Keys(others))...) {
		t := HazardTally{Hazard: h, Required: c.Hazards[h], MinPerRun: runs[0].Hazards[h]}
		for _, run := range runs {
			n := run.Hazards[h]
			t.Total, t.MinPerRun = t.Total+n, min(t.MinPerRun, n)
			if n < t.Required {
				t.Short++
			}
		}
		tallies = append(tallies, t)
	}
	return tallies
}

// note adds a reason and lowers the cell's status to s.
func (r *CellResult) note(s Status, format string, args ...any) {
	r.Status = worse(r.Status, s)
	r.Reasons = append(r.Reasons, fmt.Sprintf(format, args...))
}

// against holds n found of runs to the threshold: fewer fails, unless the undecided runs
// could still make it up, which is unknown.
func against(n, undecidedRuns, runs int, threshold float64) Status {
	switch {
	case reaches(n, runs, threshold):
		return Met
	case reaches(n+undecidedRuns, runs, threshold):
		return Unknown
	}
	return Failed
}

// judgeDetection counts the runs that found every expected violation at once, the
// cell's detection rate, and holds it to the cell's threshold.
func (r *CellResult) judgeDetection(violations []checkers.Name) {
	var n, undecidedRuns int
	var times []time.Duration
	var missedSeeds []string
	var short []RunResult
	for _, run := range r.Runs {
		isShort := r.Cell.shortOf(run) != ""
		if isShort {
			short = append(short, run)
		}
		switch outcome(run, violations, isShort) {
		case found:
			n++
			if t, ok := firstViolation(run, violations); ok {
				times = append(times, t)
			}
		case missed:
			missedSeeds = append(missedSeeds, fmt.Sprint(run.Seed))
		case undecided:
			undecidedRuns++
		}
	}
	r.Found = &n
	if len(times) > 0 {
		slices.Sort(times)
		r.MedianToViolation, r.WorstToViolation = durationOf(median(times)), durationOf(times[len(times)-1])
	}
	threshold, runs := r.Cell.threshold(), len(r.Runs)
	what := joinNames(violations, ", ") + " invalid"
	switch against(n, undecidedRuns, runs, threshold) {
	case Unknown:
		r.note(Unknown, "expected %s: found in %d of %d seeds, %d undecided; the threshold is %s", what, n, runs, undecidedRuns, percent(threshold))
		for _, run := range short {
			r.noteShort(run)
		}
	case Failed:
		r.note(Failed, "expected %s: found in %d of %d seeds (%s), below the threshold %s; missed with seed %s",
			what, n, runs, percent(float64(n)/float64(runs)), percent(threshold), strings.Join(missedSeeds, ", "))
	}
}

// outcome says whether a run found every violation expected of it: found when all those
// checkers said invalid, missed when one of them decided otherwise, undecided when the
// rest could not say or the run was short of a hazard the cell requires.
func outcome(run RunResult, violations []checkers.Name, short bool) seedOutcome {
	o := found
	for _, name := range violations {
		switch holds(ExpectInvalid, run.Verdicts[name], false, short) {
		case missed:
			return missed
		case undecided:
			o = undecided
		}
	}
	return o
}

// firstViolation is when the run's first violating event happened: the earliest that any
// of the expected checkers points at. The porcupine searches point at none.
func firstViolation(run RunResult, violations []checkers.Name) (time.Duration, bool) {
	var first time.Duration
	ok := false
	for _, name := range violations {
		if t, has := run.FirstViolation[name]; has && (!ok || t.Std() < first) {
			first, ok = t.Std(), true
		}
	}
	return first, ok
}

// reaches says whether n of runs is at least the threshold share.
func reaches(n, runs int, threshold float64) bool {
	return float64(n) >= threshold*float64(runs)-1e-9
}

// median is the middle of sorted values, or the mean of the middle two.
func median[T time.Duration | float64](sorted []T) T {
	m := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[m]
	}
	return (sorted[m-1] + sorted[m]) / 2
}

func percent(f float64) string { return fmt.Sprintf("%.0f %%", 100*f) }

func orNone(v checkers.Verdict) string {
	if v == "" {
		return "no verdict"
	}
	return string(v)
}

// Result is a suite run: every cell judged, and how the suite fared.
type Result struct {
	Suite string `json:"suite"`
	About string `json:"about,omitempty"`
	Seeds int    `json:"seeds"`
	// SeedOffset is how far every cell's seeds were moved from its spec's (--seed-offset).
	SeedOffset int64 `json:"seed_offset,omitempty"`
	// Shard is the part of the suite these cells are, "1/1" for all of it (and for shards
	// merged into one).
	Shard string `json:"shard"`
	// AllCells names every cell of the whole suite, in order, whichever shard ran: what a
	// merge of shards must cover. Definition identifies the suite's cells as they ran
	// (their specs, expectations and thresholds), so shards of one suite run share it.
	// Both are absent from suite.json written before shards could be merged.
	AllCells   []string `json:"all_cells,omitempty"`
	Definition string   `json:"definition,omitempty"`
	// Merged are the shards a merged result was made of, by shard order.
	Merged   []MergedShard `json:"merged,omitempty"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Status   Status        `json:"status"`
	Cells    []CellResult  `json:"cells"`
	// Error is why the suite stopped before its last cell (an interrupt, a harness error).
	Error string `json:"error,omitempty"`
}

// MergedShard is a shard that went into a merged result: enough to know it again in a
// store (its suite, shard and start), no path.
type MergedShard struct {
	Shard   string    `json:"shard"`
	Started time.Time `json:"started"`
	// ID is the shard's directory name, its start time.
	ID string `json:"id"`
}

// Tally sets the suite's status from its cells': failed beats unknown beats met, and a
// suite that stopped early is at best unknown.
func (r *Result) Tally() {
	r.Status = Met
	for _, c := range r.Cells {
		r.Status = worse(r.Status, c.Status)
	}
	if r.Error != "" {
		r.Status = worse(r.Status, Unknown)
	}
}

// Counts are how many cells have each status.
func (r Result) Counts() map[Status]int {
	n := map[Status]int{}
	for _, c := range r.Cells {
		n[c.Status]++
	}
	return n
}

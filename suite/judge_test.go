package suite

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
)

const (
	valid   = checkers.Valid
	invalid = checkers.Invalid
	unknown = checkers.Unknown
	na      = checkers.NotApplicable
)

// run is a hand-made run: seed, verdicts of mutual-exclusion, data-safety and fencing, and
// when mutual-exclusion first saw two holders (0: it did not).
func run(seed int64, mutex, data, fencing checkers.Verdict, first time.Duration) RunResult {
	r := RunResult{Seed: seed, Verdicts: map[checkers.Name]checkers.Verdict{
		"mutual-exclusion": mutex, "data-safety": data, "fencing": fencing,
	}, Summaries: map[checkers.Name]string{"mutual-exclusion": "summary of seed"}, FirstViolation: map[checkers.Name]Duration{}}
	if first > 0 {
		r.FirstViolation["mutual-exclusion"] = Duration(first)
	}
	return r
}

func broken(r RunResult) RunResult { r.Error = "docker went away"; return r }

// unproven is r with its precondition unknown: nothing granted, say.
func unproven(r RunResult) RunResult { r.Verdicts["stats"] = unknown; return r }

// lost is r with n lost grants.
func lost(n int, r RunResult) RunResult {
	r.Hazards = map[history.Hazard]int{history.GrantLost: n}
	return r
}

var (
	pausedCell = Cell{Name: "paused", Expect: map[checkers.Name]Expect{
		"mutual-exclusion": ExpectInvalid, "data-safety": ExpectValid, "fencing": ExpectValid}}
	safeCell = Cell{Name: "safe", Expect: map[checkers.Name]Expect{
		"mutual-exclusion": ExpectValid, "data-safety": ExpectValid, "fencing": ExpectNotApplicable}}
	// failoverCell requires 3 lost grants a run: the lock broken, fencing keeping the data.
	failoverCell = func() Cell {
		c := pausedCell
		c.Name, c.Hazards = "failover", map[history.Hazard]int{history.GrantLost: 3}
		return c
	}()
	// detectCell requires them too, and expects only the lock to break.
	detectCell = func() Cell {
		c := failoverCell
		c.Expect = map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid}
		return c
	}()
	// heldCell expects the lock to hold through 3 lost grants a run.
	heldCell = func() Cell { c := safeCell; c.Hazards = failoverCell.Hazards; return c }()
)

func TestJudge(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		cell   Cell
		runs   []RunResult
		status Status
		found  int // -1: no detection rate
		median time.Duration
		worst  time.Duration
		reason string // a reason that must be given
	}{
		{"violation found in every seed", pausedCell,
			[]RunResult{run(1, invalid, valid, valid, 3*s), run(2, invalid, valid, valid, s), run(3, invalid, valid, valid, 2*s)},
			Met, 3, 2 * s, 3 * s, ""},
		{"even count: median between the middle two", pausedCell,
			[]RunResult{run(1, invalid, valid, valid, 4*s), run(2, invalid, valid, valid, s)},
			Met, 2, 2500 * time.Millisecond, 4 * s, ""},
		{"9 of 10 reaches the default 90 %", pausedCell,
			append(slices.Repeat([]RunResult{run(1, invalid, valid, valid, s)}, 9), run(10, valid, valid, valid, 0)),
			Met, 9, s, s, ""},
		{"8 of 10 fails and names the seeds that missed", pausedCell,
			append(slices.Repeat([]RunResult{run(1, invalid, valid, valid, s)}, 8), run(9, valid, valid, valid, 0), run(10, valid, valid, valid, 0)),
			Failed, 8, s, s, "found in 8 of 10 seeds (80 %), below the threshold 90 %; missed with seed 9, 10"},
		{"missed seeds that undecided ones could make up: unknown", pausedCell,
			[]RunResult{run(1, invalid, valid, valid, s), run(2, unknown, valid, valid, 0)},
			Unknown, 1, s, s, "found in 1 of 2 seeds, 1 undecided"},
		{"a lower threshold of its own", func() Cell { c := pausedCell; c.Threshold = 0.5; return c }(),
			[]RunResult{run(1, invalid, valid, valid, s), run(2, valid, valid, valid, 0)},
			Met, 1, s, s, ""},
		{"a violation where none was expected fails", pausedCell,
			[]RunResult{run(1, invalid, valid, valid, s), run(2, invalid, invalid, valid, s)},
			Failed, 2, s, s, "seed 2: data-safety expected valid, got invalid"},
		{"safe in every seed", safeCell,
			[]RunResult{run(1, valid, valid, na, 0), run(2, valid, valid, na, 0)},
			Met, -1, 0, 0, ""},
		{"one violation of an expected pass fails", safeCell,
			[]RunResult{run(1, valid, valid, na, 0), run(2, invalid, valid, na, s)},
			Failed, -1, 0, 0, "seed 2: mutual-exclusion expected valid, got invalid: summary of seed"},
		{"a property expected absent that is there fails", safeCell,
			[]RunResult{run(1, valid, valid, valid, 0)},
			Failed, -1, 0, 0, "fencing expected not-applicable, got valid"},
		{"an expected pass left unknown is unknown", safeCell,
			[]RunResult{run(1, valid, unknown, na, 0)},
			Unknown, -1, 0, 0, "seed 1: data-safety expected valid, got unknown"},
		{"a pass from a run the harness broke proves nothing", safeCell,
			[]RunResult{broken(run(1, valid, valid, na, 0))},
			Unknown, -1, 0, 0, "seed 1: harness error: docker went away"},
		{"a violation found in a run the harness broke stands", func() Cell {
			c := pausedCell
			c.Expect = map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid}
			return c
		}(), []RunResult{broken(run(1, invalid, valid, valid, s))},
			Unknown, 1, s, s, "harness error"},
		{"no runs", safeCell, nil, Unknown, -1, 0, 0, "no run"},
		{"a run that granted nothing lacks tokens: no miss of fencing, no pass either", pausedCell,
			[]RunResult{run(1, invalid, valid, valid, s), unproven(run(2, unknown, unknown, na, 0))},
			Unknown, 1, s, s, "seed 2: fencing expected valid, got not-applicable"},
		{"a run that granted and lacks tokens misses fencing", pausedCell,
			[]RunResult{run(1, invalid, valid, valid, s), run(2, invalid, valid, na, s)},
			Failed, 2, s, s, "seed 2: fencing expected valid, got not-applicable"},
		{"every run had the hazards the cell requires", failoverCell,
			[]RunResult{lost(3, run(1, invalid, valid, valid, s)), lost(9, run(2, invalid, valid, valid, 2*s))},
			Met, 2, 1500 * time.Millisecond, 2 * s, ""},
		{"a run short of a hazard is no detection and its passes prove nothing: unknown", failoverCell,
			[]RunResult{lost(3, run(1, invalid, valid, valid, s)), lost(1, run(2, invalid, valid, valid, 2*s))},
			Unknown, 1, s, s, "seed 2: 1 lost grant, fewer than the 3 the cell requires: it did not test what the cell is about"},
		{"a run without any hazard count has none", failoverCell,
			[]RunResult{lost(3, run(1, invalid, valid, valid, s)), run(2, invalid, valid, valid, s)},
			Unknown, 1, s, s, "seed 2: 0 lost grants, fewer than the 3"},
		{"a short run the threshold can do without", detectCell,
			append(slices.Repeat([]RunResult{lost(4, run(1, invalid, valid, valid, s))}, 9), lost(0, run(10, invalid, valid, valid, s))),
			Met, 9, s, s, ""},
		{"a miss in a short run could not say, not failed", detectCell,
			[]RunResult{lost(3, run(1, invalid, valid, valid, s)), lost(2, run(2, valid, valid, valid, 0))},
			Unknown, 1, s, s, "found in 1 of 2 seeds, 1 undecided"},
		{"a miss in a run that had its hazards fails", detectCell,
			[]RunResult{lost(3, run(1, invalid, valid, valid, s)), lost(3, run(2, valid, valid, valid, 0))},
			Failed, 1, s, s, "missed with seed 2"},
		{"a violation where none was expected needs no hazard to fail", heldCell,
			[]RunResult{lost(3, run(1, valid, valid, na, 0)), lost(0, run(2, invalid, valid, na, s))},
			Failed, -1, 0, 0, "seed 2: mutual-exclusion expected valid, got invalid"},
		{"a pass short of the hazards the cell requires proves nothing", heldCell,
			[]RunResult{lost(3, run(1, valid, valid, na, 0)), lost(2, run(2, valid, valid, na, 0))},
			Unknown, -1, 0, 0, "seed 2: 2 lost grants, fewer than the 3 the cell requires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Judge(tt.cell, tt.runs)
			if r.Status != tt.status {
				t.Errorf("status %s, want %s; reasons %q", r.Status, tt.status, r.Reasons)
			}
			if tt.reason != "" && !slices.ContainsFunc(r.Reasons, func(s string) bool { return strings.Contains(s, tt.reason) }) {
				t.Errorf("reasons %q lack %q", r.Reasons, tt.reason)
			}
			if tt.status == Met && len(r.Reasons) > 0 {
				t.Errorf("a cell that met its expectations gives reasons %q", r.Reasons)
			}
			switch {
			case tt.found < 0 && r.Found != nil:
				t.Errorf("detection rate %d for a cell that expects no violation", *r.Found)
			case tt.found >= 0 && (r.Found == nil || *r.Found != tt.found):
				t.Errorf("found %v, want %d", r.Found, tt.found)
			}
			if tt.median > 0 && (r.MedianToViolation == nil || r.MedianToViolation.Std() != tt.median || r.WorstToViolation.Std() != tt.worst) {
				t.Errorf("median %v, worst %v; want %s, %s", r.MedianToViolation, r.WorstToViolation, tt.median, tt.worst)
			}
		})
	}
}

// The hazards are counted over the runs: those the cell requires first, each with the
// runs short of it, then every other that occurred.
func TestHazardsAreTalliedOverTheRuns(t *testing.T) {
	runs := []RunResult{lost(5, run(1, invalid, valid, valid, time.Second)), lost(2, run(2, invalid, valid, valid, time.Second)),
		run(3, invalid, valid, valid, time.Second)}
	runs[0].Hazards[history.LeaseExpiredInPause] = 4
	got := Judge(failoverCell, runs).Hazards
	want := []HazardTally{
		{Hazard: history.GrantLost, Total: 7, MinPerRun: 0, Required: 3, Short: 2},
		{Hazard: history.LeaseExpiredInPause, Total: 4, MinPerRun: 0},
	}
	if !slices.Equal(got, want) {
		t.Errorf("tallies %+v, want %+v", got, want)
	}
	if got := Judge(pausedCell, []RunResult{run(1, invalid, valid, valid, time.Second)}).Hazards; got != nil {
		t.Errorf("a cell whose runs saw no hazard tallies %+v", got)
	}
}

// A run keeps its summary's hazard counts, a wanted one that never occurred as 0.
func TestFromSummaryKeepsHazardCounts(t *testing.T) {
	s := results.Summary{Verdict: unknown, Hazards: []results.HazardCount{
		{Hazard: history.GrantLost, Nemesis: "failover"}, {Hazard: history.LeaseExpiredInPause, Count: 2}}}
	got := FromSummary(1, "", "", s, nil).Hazards
	if len(got) != 2 || got[history.GrantLost] != 0 || got[history.LeaseExpiredInPause] != 2 {
		t.Errorf("hazards %v", got)
	}
	if got := FromSummary(1, "", "", results.Summary{}, nil).Hazards; got != nil {
		t.Errorf("a run without hazards keeps %v", got)
	}
}

// Each expectation is judged on its own too, for the matrix's colours.
func TestChecksAreJudgedOneByOne(t *testing.T) {
	r := Judge(pausedCell, []RunResult{run(1, invalid, invalid, valid, time.Second), run(2, invalid, valid, valid, time.Second)})
	want := map[checkers.Name]Status{"mutual-exclusion": Met, "data-safety": Failed, "fencing": Met, "lost-updates": Met}
	for _, ch := range r.Checks {
		if s, ok := want[ch.Checker]; ok && ch.Status != s {
			t.Errorf("%s: %s, want %s (observed %v)", ch.Checker, ch.Status, s, ch.Observed)
		}
	}
	if got := observed(r.Checks[slices.IndexFunc(r.Checks, func(c Check) bool { return c.Checker == "data-safety" })]); got != "invalid 1, valid 1" {
		t.Errorf("data-safety observed %q", got)
	}
}

func TestSuiteStatusIsTheWorstCell(t *testing.T) {
	tests := []struct {
		cells []Status
		err   string
		want  Status
	}{
		{[]Status{Met, Met}, "", Met},
		{[]Status{Met, Unknown}, "", Unknown},
		{[]Status{Unknown, Failed, Met}, "", Failed},
		{[]Status{Met}, "interrupted", Unknown},
		{nil, "", Met},
	}
	for _, tt := range tests {
		r := Result{Error: tt.err}
		for _, s := range tt.cells {
			r.Cells = append(r.Cells, CellResult{Status: s})
		}
		if r.Tally(); r.Status != tt.want {
			t.Errorf("cells %v, error %q: %s, want %s", tt.cells, tt.err, r.Status, tt.want)
		}
	}
}

// A run that broke what its cell expects to hold points at the command that shrinks it.
func TestAViolationOfWhatMustHoldNamesItsShrink(t *testing.T) {
	s := results.Summary{Verdict: invalid, Results: []checkers.Result{{Checker: "mutual-exclusion", Verdict: invalid, Summary: "1 overlapping hold"}}}
	run := FromSummary(3, "runs/t/1/report.html", "store/suite-x/1/runs/t/1", s, nil)
	cell := Cell{Name: "c", Expect: map[checkers.Name]Expect{"mutual-exclusion": ExpectValid}}
	r := Judge(cell, []RunResult{run})
	if want := "(the smallest run that fails so: lockbreaker shrink store/suite-x/1/runs/t/1)"; r.Status != Failed || !strings.Contains(strings.Join(r.Reasons, "\n"), want) {
		t.Errorf("status %s, reasons %q: want failed and %q", r.Status, r.Reasons, want)
	}
	if FromSummary(3, "", "store/x", results.Summary{Verdict: valid}, nil).Shrink != "" {
		t.Error("a valid run names a shrink")
	}
}

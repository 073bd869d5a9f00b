package suite

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/checkers"
)

// Trends: how a suite's cells fare run after run, and what should make a reader look.
// A run of a suite is compared with the runs of that suite before it, and three things
// are flagged:
//
//   - a regression: a cell that did not meet its expectation, whose last run before that
//     could say (met or not met) met it. A cell that now could not say is shown so, and is
//     not a regression: nothing says it broke.
//   - a flaky safe cell: any violation of a property the cell expects to hold, with the
//     seed and the command that runs it again.
//   - a drift: a detection rate more than DriftMargin below the median of the cell's rates
//     in its last DriftWindow runs before, when at least DriftMinRuns of those measured one.
//
// It reads Results and nothing else, so it is tested on hand-made suite.json files.

const (
	// DriftWindow is how many of a cell's runs before make its recent median detection rate.
	DriftWindow = 5
	// DriftMargin is how far below that median a detection rate must fall to be a drift:
	// 10 percentage points.
	DriftMargin = 0.10
	// DriftMinRuns is how many earlier rates a median needs before a drift is judged.
	DriftMinRuns = 2
)

// FlagKind is what a flag says of a cell.
type FlagKind string

const (
	Regression FlagKind = "regression"
	Flaky      FlagKind = "flaky"
	Drift      FlagKind = "drift"
)

// Flag is something in a suite run a reader should look at.
type Flag struct {
	Kind FlagKind
	Cell string
	// Text says what happened, in one line.
	Text string
	// Seed, Command, Shrink and Report are a flaky cell's violating run: its seed, the
	// `lockbreaker run` command that runs it again, the `lockbreaker shrink` one that looks
	// for the smallest run failing so, and its report, relative to the suite run's directory.
	Seed    int64
	Command string
	Shrink  string
	Report  string
}

// Comparison is a suite run judged against the runs of its suite before it.
type Comparison struct {
	Now Record
	// Before are the runs compared with, newest first.
	Before []Record
	// Cells are the run's cells, in its order.
	Cells []CellChange
	Flags []Flag
}

// CellChange is one cell of a run beside its runs before.
type CellChange struct {
	Now CellResult
	// Previous is the cell in the last run before that could say (met or failed), and
	// PreviousRun that run's ID; nil and "" when none did.
	Previous    *CellResult
	PreviousRun string
	// Recent is the median of the cell's detection rates in its last DriftWindow runs
	// before; HasRecent is false when fewer than DriftMinRuns measured one.
	Recent    float64
	HasRecent bool
}

// History is the runs of one suite, newest first. A shard merged into a run that is also
// among them is left out: its cells are shown once, in the merged run.
func History(runs []Record, suite string) []Record {
	var h []Record
	for i, r := range runs {
		merged := false
		for j, m := range runs {
			merged = merged || (j != i && m.Result.merges(r.Result))
		}
		if r.Result.Suite == suite && !merged {
			h = append(h, r)
		}
	}
	slices.SortStableFunc(h, func(a, b Record) int {
		return cmp.Or(b.Result.Started.Compare(a.Result.Started), cmp.Compare(b.ID, a.ID))
	})
	return h
}

// Suites names the suites the runs are of, sorted.
func Suites(runs []Record) []string {
	var names []string
	for _, r := range runs {
		names = append(names, r.Result.Suite)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Before is now's history among runs: the runs of its suite that started before it,
// newest first.
func Before(now Record, runs []Record) []Record {
	var before []Record
	for _, r := range History(runs, now.Result.Suite) {
		if r.Result.Started.Before(now.Result.Started) {
			before = append(before, r)
		}
	}
	return before
}

// CompareAll compares the newest run of each suite among news with the runs of that suite
// among olds that started before it. A suite with no such run is left out.
func CompareAll(olds, news []Record) []Comparison {
	var all []Comparison
	for _, name := range Suites(news) {
		h := History(news, name)
		if len(h) == 0 { // runs that each claim to have merged the other
			continue
		}
		if before := Before(h[0], olds); len(before) > 0 {
			all = append(all, Compare(h[0], before))
		}
	}
	return all
}

// Compare judges run now against before, the runs of its suite before it, newest first.
func Compare(now Record, before []Record) Comparison {
	c := Comparison{Now: now, Before: before}
	for _, cell := range now.Result.Cells {
		ch := CellChange{Now: cell}
		var rates []float64
		for _, b := range before {
			i := slices.IndexFunc(b.Result.Cells, func(o CellResult) bool { return o.Cell.Name == cell.Cell.Name })
			if i < 0 {
				continue
			}
			old := &b.Result.Cells[i]
			if ch.Previous == nil && old.Status != Unknown {
				ch.Previous, ch.PreviousRun = old, b.ID
			}
			if rate, ok := old.DetectionRate(); ok && len(rates) < DriftWindow {
				rates = append(rates, rate)
			}
		}
		if len(rates) >= DriftMinRuns {
			slices.Sort(rates)
			ch.Recent, ch.HasRecent = median(rates), true
		}
		c.Cells = append(c.Cells, ch)
		c.Flags = append(c.Flags, ch.flags()...)
	}
	return c
}

// flags are what the cell's change says: a regression, then its flaky runs, then a drift.
func (ch CellChange) flags() []Flag {
	var flags []Flag
	name := ch.Now.Cell.Name
	if ch.Now.Status == Failed && ch.Previous != nil && ch.Previous.Status == Met {
		flags = append(flags, Flag{Kind: Regression, Cell: name,
			Text: fmt.Sprintf("met in %s, not met now: %s", ch.PreviousRun, firstLine(ch.Now.Reasons))})
	}
	for _, run := range ch.Now.Runs {
		var broke []string
		for _, checker := range ch.Now.Cell.expecting(ExpectValid) {
			if run.Verdicts[checker] == checkers.Invalid {
				broke = append(broke, fmt.Sprintf("%s: %s", checker, run.Summaries[checker]))
			}
		}
		if len(broke) > 0 {
			flags = append(flags, Flag{Kind: Flaky, Cell: name, Seed: run.Seed, Command: run.Command, Shrink: run.Shrink, Report: run.Report,
				Text: fmt.Sprintf("seed %d violated what the cell expects to hold: %s", run.Seed, strings.Join(broke, "; "))})
		}
	}
	if rate, ok := ch.Now.DetectionRate(); ok && ch.HasRecent && rate < ch.Recent-DriftMargin-1e-9 {
		flags = append(flags, Flag{Kind: Drift, Cell: name,
			Text: fmt.Sprintf("found in %d of %d seeds (%s), %.0f points below the median %s of its last runs",
				*ch.Now.Found, len(ch.Now.Runs), percent(rate), 100*(ch.Recent-rate), percent(ch.Recent))})
	}
	return flags
}

// Regressions are the comparison's regression flags.
func (c Comparison) Regressions() []Flag {
	var r []Flag
	for _, f := range c.Flags {
		if f.Kind == Regression {
			r = append(r, f)
		}
	}
	return r
}

package harness

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/results"
)

// A real-time run under a fault does not bring its danger every time: on a busy machine a
// restarted server may answer after the lease, a promotion may outlast a split. Such a run
// is the product's honest unknown, not a failure; so is a node that did not serve within its
// two minutes, at the cluster's start or after a crash (seen in CI, a machine stalled for
// minutes under the whole suite: ZooKeeper's JVMs printed a line every 200 ms; a node
// that never comes back fails every try all the same). So a test of a targeted fault runs fresh
// seeds until its danger came, at most dangerTries, and asserts what must hold of the run
// that had it; it fails for want of danger only when every try fell short, quoting each
// try's reason. Each try runs longer than the one before (the spec's time limit times the
// try's number): beside make test and two busy processes, every request of three tries in
// a row, a minute and a half, timed out while the machine was at its busiest, and a
// longer run outlasts such a stretch. How often a fault brings its danger is a rate: make test-long logs each
// test's tries ("danger: ... on try N of M") and the suites measure it per cell.

// dangerTries bounds the runs a test tries for its danger.
const dangerTries = 4

// ran is one run of a test: its directory, summary and history.
type ran struct {
	dir     string
	summary results.Summary
	events  []history.Event
}

// danger says why a run fell short of the danger its test is about: "" once it came.
type danger func(ran) string

// untilDanger runs spec, then specs with the next seeds, until came finds its danger in a
// run, and returns that run.
func untilDanger(t *testing.T, spec Spec, came danger) ran {
	t.Helper()
	return untilDangerOn(t, spec, came, runTrialEvents)
}

// untilDangerOn is untilDanger with each try run by run, which says why a run did not
// happen ("" when it did).
func untilDangerOn(t *testing.T, spec Spec, came danger, run func(*testing.T, Spec) (ran, string)) ran {
	t.Helper()
	var short []string
	limit := spec.TimeLimit
	for try := 1; try <= dangerTries; try++ {
		spec.TimeLimit = limit * Duration(try)
		tr, why := run(t, spec)
		if why == "" {
			why = came(tr)
		}
		if why == "" {
			t.Logf("danger: %s came on try %d of %d (seed %d)", t.Name(), try, dangerTries, spec.Seed)
			return tr
		}
		short = append(short, fmt.Sprintf("seed %d: %s", spec.Seed, why))
		t.Logf("try %d of %d (seed %d) fell short of its danger: %s", try, dangerTries, spec.Seed, why)
		spec.Seed++
	}
	t.Fatalf("danger: %s never came in %d tries:\n%s", t.Name(), dangerTries, strings.Join(short, "\n"))
	return ran{}
}

// runTrialEvents runs spec once and reads its history. A node that did not serve in time,
// at the cluster's start (nodes.NotServingError) or after a fault (history.NotServing), is
// no failure of the lock: it is why the run did not happen.
func runTrialEvents(t *testing.T, spec Spec) (tr ran, unserved string) {
	t.Helper()
	dir, s, err := tryTrial(t, spec)
	if ns := (*nodes.NotServingError)(nil); errors.As(err, &ns) {
		return ran{}, err.Error()
	}
	if err != nil {
		t.Fatalf("run %s: %v", spec.Test, err)
	}
	file, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range file.Events {
		if e.Func == history.NotServing {
			return ran{}, e.Message + " after a fault"
		}
	}
	return ran{dir, s, file.Events}, ""
}

// proven is the danger of a run that claims no pass without it: the stats checker says
// whether the nemesis's hazard, and its danger, came, and the clients did enough work
// beside it to mean anything (a machine too busy to let them proves nothing either way).
func proven(tr ran) string {
	if st := verdicts(tr.summary)["stats"]; st.Verdict == checkers.Unknown {
		return st.Summary
	}
	return littleWork(tr.summary)
}

// worked is the danger of a run without faults, or with faults a safe lock shrugs off: load.
// A run whose clients did too little (a slow machine, a cluster still settling) proves
// nothing either way.
func worked(tr ran) string { return littleWork(tr.summary) }

// overlapped is the danger of an unsafe lock: two holders at once, seen in the history.
func overlapped(tr ran) string {
	if me := verdicts(tr.summary)["mutual-exclusion"]; me.Verdict != checkers.Invalid {
		return fmt.Sprintf("no overlap seen: mutual-exclusion %s (%s)", me.Verdict, me.Summary)
	}
	return ""
}

// hazard is the danger of hazard h recorded at least once.
func hazard(h history.Hazard) danger {
	return func(tr ran) string {
		if hazardCount(tr.summary, h) == 0 {
			return fmt.Sprintf("no %s hazard (hazards %v)", h, tr.summary.Hazards)
		}
		return ""
	}
}

// both is the danger of every one of ds.
func both(ds ...danger) danger {
	return func(tr ran) string {
		for _, d := range ds {
			if why := d(tr); why != "" {
				return why
			}
		}
		return ""
	}
}

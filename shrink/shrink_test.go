package shrink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/spec"
)

// failsWhen is a trial that fails (mutual exclusion and data safety invalid) exactly when
// breaks says the spec breaks the lock; it counts its runs.
func failsWhen(breaks func(spec.Spec) bool, runs *int) Trial {
	return func(_ context.Context, s spec.Spec) (Outcome, error) {
		*runs++
		if !breaks(s) {
			return Outcome{Invalid: []string{"herd"}}, nil
		}
		first := time.Duration(s.Seed) * time.Millisecond
		return Outcome{Invalid: []string{"mutual-exclusion", "data-safety"}, FirstViolation: &first, Report: "r" + s.TimeLimit.Std().String()}, nil
	}
}

func original() spec.Spec {
	s := spec.Default()
	s.System, s.Nemesis, s.Clients, s.TimeLimit, s.Nodes = "redlock", []string{"pause-node", "kill-node"}, 5, spec.Duration(30*time.Second), 5
	return s
}

// A lock that breaks with kill-node alone, two faults, two clients and 5 s is shrunk to
// exactly that, on three nodes with no work where the failure does not need them, and
// each step tried in K runs at most.
func TestSearchFindsTheSmallestSpecThatStillFails(t *testing.T) {
	var runs int
	trial := failsWhen(func(s spec.Spec) bool {
		return len(s.Nemesis) == 1 && s.Nemesis[0] == "kill-node" && s.Faults != 1 && s.TimeLimit.Std() >= 5*time.Second
	}, &runs)
	var progress strings.Builder
	res, err := Search(context.Background(), original(), []string{"mutual-exclusion", "data-safety"}, trial,
		Options{Confirm: 3, RateRuns: 10, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Smallest
	if strings.Join(got.Nemesis, ",") != "kill-node" || got.Faults != 2 || got.Clients != 2 || got.TimeLimit.Std() != 5*time.Second ||
		got.Nodes != 3 || got.Work != 0 || got.Rate != 0 || !got.StopEarly {
		t.Errorf("smallest %+v", got)
	}
	if res.Failed != 10 || res.Runs != 10 || res.Report != "r5s" || res.BudgetSpent {
		t.Errorf("rate %d of %d, report %q, budget spent %t", res.Failed, res.Runs, res.Report, res.BudgetSpent)
	}
	for _, st := range res.Steps {
		if st.Runs > 3 || st.Kept && st.Failed != 3 {
			t.Errorf("step %+v", st)
		}
	}
	if want := "step 1 of 7 dimensions: --nemesis pause-node"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress does not say %q:\n%s", want, progress.String())
	}
	if !strings.Contains(Command(got), "--nemesis kill-node") || !strings.Contains(Command(got), "--faults 2") ||
		!strings.Contains(Command(got), "--stop-at-first-violation") {
		t.Errorf("command %q", Command(got))
	}
}

// A run that fails only now and then keeps nothing: every smaller spec needs K of K.
func TestSearchKeepsOnlyWhatFailsEveryTime(t *testing.T) {
	var runs int
	trial := failsWhen(func(s spec.Spec) bool { return s.Clients == 5 || s.Seed%2 == 0 }, &runs)
	res, err := Search(context.Background(), original(), []string{"mutual-exclusion"}, trial, Options{Confirm: 3, RateRuns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Smallest.Clients != 5 {
		t.Errorf("kept --clients %d, which fails only on even seeds", res.Smallest.Clients)
	}
}

// A budget already spent tries nothing and says so; the original is the answer.
func TestSearchStopsAtItsBudget(t *testing.T) {
	var runs int
	trial := failsWhen(func(spec.Spec) bool { return true }, &runs)
	res, err := Search(context.Background(), original(), []string{"mutual-exclusion"}, trial, Options{Confirm: 3, Budget: time.Nanosecond, RateRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.BudgetSpent || res.Smallest.Clients != 5 || runs != 1 {
		t.Errorf("budget spent %t, clients %d, %d runs: want the original and only its rate run", res.BudgetSpent, res.Smallest.Clients, runs)
	}
}

// The harness's error ends the search at once with what it has.
func TestSearchStopsAtAHarnessError(t *testing.T) {
	broken := errors.New("docker is not reachable")
	trial := func(context.Context, spec.Spec) (Outcome, error) { return Outcome{}, broken }
	if _, err := Search(context.Background(), original(), []string{"mutual-exclusion"}, trial, Options{Confirm: 3, RateRuns: 1}); !errors.Is(err, broken) {
		t.Errorf("error %v, want %v", err, broken)
	}
}

// A run with no nemesis (a lock broken on its own) is shrunk without bounding its faults,
// which run refuses when there are none.
func TestSearchBoundsNoFaultsOfNoNemesis(t *testing.T) {
	var runs int
	trial := failsWhen(func(s spec.Spec) bool { return s.Faults == 0 }, &runs)
	from := original()
	from.Nemesis = []string{"none"}
	res, err := Search(context.Background(), from, []string{"mutual-exclusion"}, trial, Options{Confirm: 2, RateRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range res.Steps {
		if strings.HasPrefix(st.What, "--faults") {
			t.Errorf("tried %s with no nemesis", st.What)
		}
	}
	if res.Smallest.Clients != 2 {
		t.Errorf("smallest %+v", res.Smallest)
	}
}

// A run with faults of a set length (--pause) is never shrunk to a time limit they would
// outlast, which run refuses.
func TestSearchKeepsTheTimeLimitAboveThePause(t *testing.T) {
	var runs int
	trial := failsWhen(func(spec.Spec) bool { return true }, &runs)
	from := original()
	from.Pause = spec.Duration(4 * time.Second)
	res, err := Search(context.Background(), from, []string{"mutual-exclusion"}, trial, Options{Confirm: 2, RateRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Smallest.TimeLimit.Std(); got != 5*time.Second {
		t.Errorf("smallest time limit %s, want 5s: the least at or above the pause of 4s", got)
	}
}

// Each trial run is told as it ended: failed as the original, failed otherwise (other
// checkers invalid: not a pass), or no violation at all.
func TestEachRunIsToldAsItEnded(t *testing.T) {
	outcomes := map[int64]Outcome{
		1001: {Invalid: []string{"mutual-exclusion", "data-safety"}},
		1002: {Invalid: []string{"mutual-exclusion"}},
		1003: {},
	}
	trial := func(_ context.Context, s spec.Spec) (Outcome, error) { return outcomes[s.Seed], nil }
	var progress strings.Builder
	s := searcher{trial: trial, target: []string{"mutual-exclusion", "data-safety"}, seed: 1001, progress: &progress}
	for range outcomes {
		if _, err := s.run(context.Background(), spec.Default()); err != nil {
			t.Fatal(err)
		}
	}
	want := "    seed 1001: failed: mutual-exclusion, data-safety\n" +
		"    seed 1002: failed otherwise: mutual-exclusion only\n" +
		"    seed 1003: no violation\n"
	if progress.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", progress.String(), want)
	}
}

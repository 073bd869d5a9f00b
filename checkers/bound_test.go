package checkers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

// searchOnce searches the one key of a whole history as a checker's add does, within bound steps.
func searchOnce(t *testing.T, l linearizability, events []history.Event, bound int64) keySearch {
	t.Helper()
	ops, err := history.Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	p := whole(events, ops)
	var modelled []*history.Op
	for i := range ops {
		if l.models(&ops[i], outcomeOf(&ops[i])) {
			modelled = append(modelled, &ops[i])
		}
	}
	keys, groups := byKey(modelled, func(op *history.Op) string { return op.Invoke.Key })
	if len(keys) != 1 {
		t.Fatalf("%d keys, want 1", len(keys))
	}
	return l.search(t.Context(), bound, l.model(p, keys[0]), keys[0], groups[keys[0]], p.infinity, false)
}

var (
	lockSearch = linearizability{model: func(part, string) porcupine.Model { return strictMutex }, models: isLockOp}
	dataSearch = linearizability{model: storedModel, models: isGuardedOp}
)

// A key's search takes the same steps every time (porcupine searches it in one goroutine,
// in an order the operations fix): a search that takes N steps answers within a bound of
// N, the same answer every time, and stops, unknown, within a bound of N-1. An illegal
// answer is searched again with porcupine's record to be explained; that search takes the
// same steps, so the bound that let the first answer lets the second.
func TestASearchTakesTheSameStepsEveryTime(t *testing.T) {
	for _, c := range []struct {
		name   string
		l      linearizability
		cfg    histgen.Config
		result porcupine.CheckResult
	}{
		{"lock-linearizable, legal", lockSearch, histgen.Config{Ops: 300, Clients: 20, Seed: 1}, porcupine.Ok},
		{"lock-linearizable, illegal", lockSearch, histgen.Config{Ops: 300, Clients: 20, Seed: 0}, porcupine.Illegal},
		{"data-safety, legal", dataSearch, histgen.Config{Ops: 300, Clients: 5, Fencing: true, Seed: 2}, porcupine.Ok},
		{"data-safety, illegal", dataSearch, histgen.Config{Ops: 300, Clients: 5, Seed: 2}, porcupine.Illegal},
	} {
		t.Run(c.name, func(t *testing.T) {
			events := histgen.Generate(c.cfg)
			first := searchOnce(t, c.l, events, DefaultSteps)
			if first.result != c.result || first.bounded || first.stopped || first.steps < 10 {
				t.Fatalf("%v in %d steps (bounded %v, stopped %v), want %v", first.result, first.steps, first.bounded, first.stopped, c.result)
			}
			again := searchOnce(t, c.l, events, first.steps)
			if again.result != first.result || again.steps != first.steps || again.bounded {
				t.Errorf("within a bound of %d: %v in %d steps (bounded %v), want %v in the same steps",
					first.steps, again.result, again.steps, again.bounded, first.result)
			}
			short := searchOnce(t, c.l, events, first.steps-1)
			if short.result != porcupine.Unknown || !short.bounded || short.steps != first.steps-1 {
				t.Errorf("within a bound of %d: %v in %d steps (bounded %v), want unknown, bounded", first.steps-1, short.result, short.steps, short.bounded)
			}
		})
	}
}

// A search stopped by its bound says so, naming the bound, and the same history stopped
// by the same bound gets the same results again, to the byte: the bound is no deadline.
func TestAStepBoundGivesTheSameVerdictTwice(t *testing.T) {
	hard := histgen.Generate(histgen.Config{Ops: 300, Clients: 20, Seed: 1})
	for _, c := range []struct {
		name    string
		steps   int64
		limits  *Limits // judged in pieces; nil: whole
		checker Name
		summary string
	}{
		{"lock-linearizable whole", 1_000, nil, "lock-linearizable", "search stopped on key k after its bound of 1,000 steps"},
		{"data-safety whole", 100_000, nil, "data-safety", "search stopped on key k after its bound of 100,000 steps"},
		{"data-safety in pieces", 5, &tinyPieces, "data-safety", "search stopped on key k after its bound of 5 steps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			judge := func() []Result {
				opts := Options{MaxSteps: c.steps}
				if c.limits == nil {
					return Judge(t.Context(), hard, opts)
				}
				s := NewStream(t.Context(), opts, *c.limits)
				for _, e := range hard {
					s.Add(e)
				}
				return s.Results()
			}
			first, second := judge(), judge()
			if !reflect.DeepEqual(first, second) {
				t.Errorf("judged twice, the results differ:\n%+v\n%+v", first, second)
			}
			for _, r := range first {
				if r.Checker != c.checker {
					continue
				}
				if r.Verdict != Unknown || !strings.HasPrefix(r.Summary, c.summary) {
					t.Errorf("%s (%s), want unknown: %s", r.Verdict, r.Summary, c.summary)
				}
				if !strings.Contains(strings.Join(r.Evidence, "\n"), "key k: no answer within its bound of "+c.summary[len("search stopped on key k after its bound of "):]) {
					t.Errorf("no evidence names the bound: %q", r.Evidence)
				}
			}
		})
	}
}

// busy keeps every CPU busy with goroutines of its own until the returned function is called.
func busy() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			garbage := make([][]byte, 0, 64)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if i%1024 == 0 { // and make the collector work
					garbage = append(garbage[:i/1024%64], make([]byte, 64<<10))
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// The same histories get the same results, to the byte, judged on an idle machine and on
// one whose every CPU is taken by other goroutines, whole and in pieces. Generated
// histories: 20 clients, fencing off, no effects, the searches porcupine finds hardest.
// Within the test's bound, lock-linearizable decides (valid or invalid), data-safety stops
// at its bound on the whole and decides invalid in the pieces of 3,000 operations.
func TestVerdictsDoNotDependOnALoadedMachine(t *testing.T) {
	// A search of DefaultSteps takes 20 s here: the test would take minutes.
	const steps = 100_000
	sizes := []int{300, 3000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, ops := range sizes {
		for _, seed := range []uint64{0, 1} {
			events := histgen.Generate(histgen.Config{Ops: ops, Clients: 20, Seed: seed})
			for _, limits := range []*Limits{nil, &tinyPieces} {
				name := fmt.Sprintf("ops=%d/seed=%d/whole", ops, seed)
				if limits != nil {
					name = fmt.Sprintf("ops=%d/seed=%d/pieces", ops, seed)
				}
				t.Run(name, func(t *testing.T) {
					judge := func() []byte {
						var results []Result
						if limits == nil {
							results = Judge(t.Context(), events, Options{MaxSteps: steps})
						} else {
							s := NewStream(t.Context(), Options{MaxSteps: steps}, *limits)
							for _, e := range events {
								s.Add(e)
							}
							results = s.Results()
						}
						b, err := json.Marshal(results)
						if err != nil {
							t.Fatal(err)
						}
						return b
					}
					idle := judge()
					stop := busy()
					loaded := judge()
					stop()
					if string(idle) != string(loaded) {
						t.Errorf("idle and loaded, the results differ:\n%s\n%s", idle, loaded)
					}
				})
			}
		}
	}
}

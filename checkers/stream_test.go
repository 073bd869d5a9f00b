package checkers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
	"github.com/lockbreaker/lockbreaker/internal/tier"
)

// streamed judges events with a Stream that cuts as often as it can.
func streamed(t *testing.T, events []history.Event, limits Limits) (results []Result, cuts int, s *Stream) {
	t.Helper()
	s = NewStream(t.Context(), Options{}, limits)
	for _, e := range events {
		s.Add(e)
	}
	return s.Results(), s.cuts, s
}

// sameVerdicts requires the streamed results to give every checker the whole history's verdict.
func sameVerdicts(t *testing.T, name string, events []history.Event, limits Limits) int {
	t.Helper()
	whole := Judge(t.Context(), events, Options{})
	pieces, cuts, _ := streamed(t, events, limits)
	for i := range whole {
		if whole[i].Verdict != pieces[i].Verdict {
			t.Errorf("%s, %d cuts: %s: whole %s (%s), in pieces %s (%s)", name, cuts, whole[i].Checker,
				whole[i].Verdict, whole[i].Summary, pieces[i].Verdict, pieces[i].Summary)
		}
	}
	return cuts
}

var tinyPieces = Limits{PieceOps: 20, MaxOps: 1 << 30, LongOps: 1 << 30}

// Cut as often as the rule allows, generated histories of every kind (valid and violated,
// with and without fencing and effects, several seeds and sizes) get the verdicts their
// whole gets. Each kind gets one seed, and several in the long tier (make test-long): the
// wholes' searches take minutes of CPU beside make test's runs.
//
// The whole is searched within DefaultSteps, which no machine's speed changes: the hardest
// here, 300 operations of 20 clients without effects or fencing, seed 1, takes data-safety
// 8,505,015 steps (about 20 s here; its pieces take a few thousand). Should a change to the
// models make it need more, its whole becomes unknown on every machine and this fails:
// then the history is what changes (another seed, fewer clients), not the test's bound,
// since DefaultSteps is what a run gives its searches and the test is about runs' verdicts.
func TestStreamGivesTheWholeHistorysVerdicts(t *testing.T) {
	t.Parallel() // a CPU-bound search: the fast tier runs them side by side
	seeds, workloads := uint64(1), uint64(1)
	if tier.IsLong() && !testing.Short() {
		seeds, workloads = 3, 5
	}
	cuts := 0
	for _, ops := range []int{300, 3000} {
		for _, clients := range []int{1, 2, 5, 20} {
			for _, fencing := range []bool{false, true} {
				for _, effects := range []bool{false, true} {
					if !effects && ops > 300 { // porcupine is slow on the whole of long histories without effects
						continue
					}
					for seed := range seeds {
						cfg := histgen.Config{Ops: ops, Clients: clients, Fencing: fencing, Effects: effects, Seed: seed}
						cuts += sameVerdicts(t, fmt.Sprintf("%+v", cfg), histgen.Generate(cfg), tinyPieces)
					}
				}
			}
		}
	}
	for seed := range workloads {
		w := workload{ops: 4000, keys: 3, clientsPerKey: 3, seed: seed}
		cuts += sameVerdicts(t, fmt.Sprintf("%+v", w), w.generate(), tinyPieces)
	}
	if cuts < 1000 {
		t.Errorf("only %d cuts: the rule is not exercised", cuts)
	}
}

// So do the hand-made histories and the fuzz corpus, where they pair (a Stream takes the
// events history.Scan hands over, which pair).
func TestStreamGivesTheCorpussVerdicts(t *testing.T) {
	var inputs [][]byte
	jsonl, _ := filepath.Glob("testdata/*.jsonl")
	for _, path := range jsonl {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, data)
	}
	for _, dir := range []string{"testdata/fuzz/FuzzCheckers", "../history/testdata/fuzz/FuzzParse"} {
		seeds, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, path := range seeds {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, quoted, _ := strings.Cut(string(data), "[]byte(")
			if unquoted, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(quoted), ")"))); err == nil {
				inputs = append(inputs, []byte(unquoted))
			}
		}
	}
	if len(inputs) < 40 {
		t.Fatalf("only %d inputs found", len(inputs))
	}
	for i, data := range inputs {
		var candidates [][]history.Event
		if file, err := history.Parse(bytes.NewReader(data)); err == nil {
			candidates = append(candidates, file.Events)
		}
		candidates = append(candidates, compactEvents(data))
		for _, events := range candidates {
			if _, err := history.Pair(events); err != nil {
				continue
			}
			sameVerdicts(t, fmt.Sprintf("input %d", i), events, Limits{PieceOps: 1, MaxOps: 1 << 30, LongOps: 1 << 30})
		}
	}
}

// A history in which some client always holds the lock has no place to cut: it is judged
// as one piece and the results say so.
func TestStreamSaysWhereItCouldNotCut(t *testing.T) {
	var events []history.Event
	add := func(typ history.Type, process int, f history.Func, at int64) {
		events = append(events, history.Event{Index: len(events), Type: typ, Process: process, Func: f, Key: "k", Time: at})
	}
	// p0 and p1 hand the lock over with the next grant made before the last release ends.
	at := int64(1e9)
	for i := range 200 {
		p := i % 2
		add(history.Invoke, p, history.Acquire, at)
		add(history.OK, p, history.Acquire, at+10)
		if i > 0 {
			add(history.Invoke, 1-p, history.Release, at+20)
			add(history.OK, 1-p, history.Release, at+30)
		}
		at += 100
	}
	limits := Limits{PieceOps: 10, MaxOps: 1 << 30, LongOps: 100}
	results, cuts, s := streamed(t, events, limits)
	if cuts != 0 || len(s.Notes()) != 0 {
		// Never cut, it is judged whole.
		t.Fatalf("%d cuts, notes %q", cuts, s.Notes())
	}
	// With one place to cut at the start, the rest is a long stretch, noted.
	events = append([]history.Event{
		{Type: history.Invoke, Process: 5, Func: history.Read, Key: "k", Time: 1},
		{Type: history.OK, Process: 5, Func: history.Read, Key: "k", Value: history.Int64(0), Time: 2},
	}, events...)
	for i := range events {
		events[i].Index = i
	}
	results, cuts, s = streamed(t, events, limits)
	if cuts != 1 || len(s.Notes()) != 1 || !strings.Contains(s.Notes()[0], "no safe place to cut the history from t=") {
		t.Fatalf("%d cuts, notes %q", cuts, s.Notes())
	}
	for _, r := range results {
		if r.Checker == "mutual-exclusion" && r.Verdict != Invalid {
			t.Errorf("mutual-exclusion: %s (%s)", r.Verdict, r.Summary)
		}
	}
}

// Past a memory limit, a stream gives up: every verdict not already invalid is unknown
// and says why. Held operations are counted as they come; the heap is looked at before
// each piece is judged, so a heap limit it is already over stops it at once.
func TestStreamPastItsLimitsIsUnknown(t *testing.T) {
	events := histgen.Generate(histgen.Config{Ops: 2000, Clients: 20, Effects: true, Seed: 1})
	for _, c := range []struct {
		name   string
		limits Limits
		why    string
	}{
		{"operations", Limits{PieceOps: 1 << 20, MaxOps: 100, LongOps: 1 << 30}, "more than 100 operations held at once (the memory limit)"},
		{"heap", Limits{PieceOps: 50, MaxOps: 1 << 30, LongOps: 1 << 30, MaxHeap: 1}, "memory limit reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			results, _, _ := streamed(t, events, c.limits)
			unknown := 0
			for _, r := range results {
				switch {
				case r.Property == PropertyMetric || r.Verdict == NotApplicable:
				case r.Verdict != Unknown:
					t.Errorf("%s: %s (%s)", r.Checker, r.Verdict, r.Summary)
				case !strings.Contains(r.Summary, c.why):
					t.Errorf("%s: %s", r.Checker, r.Summary)
				default:
					unknown++
				}
			}
			if unknown == 0 {
				t.Error("no verdict was made unknown")
			}
		})
	}
}

// A search the guard stopped is undecided, and its summary gives the guard's reason.
func TestSearchStoppedByTheGuardSaysWhy(t *testing.T) {
	events := histgen.Generate(histgen.Config{Ops: 200, Clients: 5, Effects: true, Fencing: true, Seed: 1})
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(memoryLimit{limit: 1 << 30})
	for _, c := range []Checker{lockLinearizable, dataSafety} {
		r := c.Check(ctx, events, Options{})
		if r.Verdict != Unknown || !strings.Contains(r.Summary, "memory limit reached: the checkers held more than 1024 MiB") {
			t.Errorf("%s: %s (%s)", r.Checker, r.Verdict, r.Summary)
		}
	}
}

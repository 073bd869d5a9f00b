package checkers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

// events numbers a hand-made history.
func events(es ...history.Event) []history.Event {
	for i := range es {
		es[i].Index = i
	}
	return es
}

func ev(typ history.Type, p int, f history.Func, t int64, change ...func(*history.Event)) history.Event {
	e := history.Event{Type: typ, Process: p, Func: f, Key: "k", Time: t}
	for _, c := range change {
		c(&e)
	}
	return e
}

func effect(from, to int64) func(*history.Event) {
	return func(e *history.Event) { e.EffectFrom, e.EffectTo = from, to }
}

func value(v int64) func(*history.Event) {
	return func(e *history.Event) { e.Value = history.Int64(v) }
}
func token(v int64) func(*history.Event) {
	return func(e *history.Event) { e.Token = history.Int64(v) }
}

// p0 waits for the lock from t=5 to t=100, its last attempt starting at t=40; p1 holds
// it meanwhile and its write, invoked at t=30 and answered at t=120, was applied by the
// storage at t=110, after p0 had the lock. Only what the servers saw shows the write came
// from a holder that had lost the lock: without it, the write may have come first.
func TestNarrowingFindsAStaleWrite(t *testing.T) {
	build := func(narrow bool) []history.Event {
		maybe := func(from, to int64) func(*history.Event) {
			if !narrow {
				return func(*history.Event) {}
			}
			return effect(from, to)
		}
		return events(
			ev(history.Invoke, 0, history.Acquire, 5),
			ev(history.Invoke, 1, history.Acquire, 10),
			ev(history.OK, 1, history.Acquire, 20, maybe(15, 0)),
			ev(history.Invoke, 1, history.Write, 30, value(1)),
			ev(history.OK, 0, history.Acquire, 100, maybe(40, 0)),
			ev(history.OK, 1, history.Write, 120, value(1), maybe(110, 110)),
		)
	}
	onlyNarrowedIsInvalid(t, dataSafety, build)
}

// The storage accepted token 3 at t=50 and then token 2 at t=60, in requests whose
// invocations and answers overlap: only the storage's own times order them.
func TestNarrowingFindsAStaleTokenAccepted(t *testing.T) {
	build := func(narrow bool) []history.Event {
		maybe := func(at int64) func(*history.Event) {
			if !narrow {
				return func(*history.Event) {}
			}
			return effect(at, at)
		}
		return events(
			ev(history.Invoke, 1, history.Write, 40, value(1), token(3)),
			ev(history.Invoke, 0, history.Write, 45, value(2), token(2)),
			ev(history.OK, 1, history.Write, 70, value(1), token(3), maybe(50)),
			ev(history.OK, 0, history.Write, 75, value(2), token(2), maybe(60)),
		)
	}
	onlyNarrowedIsInvalid(t, fencing, build)
}

// onlyNarrowedIsInvalid checks that c passes the history built without the servers'
// times and fails it with them.
func onlyNarrowedIsInvalid(t *testing.T, c Checker, build func(narrow bool) []history.Event) {
	t.Helper()
	for _, tt := range []struct {
		narrow bool
		want   Verdict
	}{{false, Valid}, {true, Invalid}} {
		r := c.Check(t.Context(), build(tt.narrow), Options{})
		if r.Verdict != tt.want {
			t.Errorf("narrowed %v: %s %s (%s), want %s", tt.narrow, c.Name(), r.Verdict, r.Summary, tt.want)
		}
	}
}

// Generated histories get the verdicts their runs deserve, with and without what the
// servers saw: a paused holder breaks the lock, and the data only without fencing. With
// five clients the searches finish either way, and narrowing changes no verdict; with
// twenty, only the narrowed windows let data-safety decide at all (without them, unfenced,
// the search stops at its bound of DefaultSteps, which costs 20 s this does not spend).
func TestGeneratedRunsVerdicts(t *testing.T) {
	for _, c := range []histgen.Config{
		{Ops: 2000, Clients: 5, Seed: 1}, {Ops: 2000, Clients: 5, Fencing: true, Seed: 1},
		{Ops: 2000, Clients: 5, Effects: true, Seed: 1}, {Ops: 2000, Clients: 5, Fencing: true, Effects: true, Seed: 1},
		{Ops: 2000, Clients: 20, Effects: true, Seed: 1}, {Ops: 2000, Clients: 20, Fencing: true, Effects: true, Seed: 1},
	} {
		data := Invalid
		if c.Fencing {
			data = Valid
		}
		want := map[Name]Verdict{"lock-linearizable": Invalid, "mutual-exclusion": Invalid, "lease-safety": Valid, "data-safety": data,
			"lost-updates": data, "fencing": Valid, "herd": NotApplicable, "stats": Valid}
		results := RunAll(t.Context(), All(), histgen.Generate(c), Options{Lease: history.Lease{TTL: histgen.TTL, Kept: history.KeptByKey}})
		if len(results) != len(want) {
			t.Fatalf("%+v: %d results, want one from each of %d checkers", c, len(results), len(want))
		}
		for _, r := range results {
			if v, ok := want[r.Checker]; !ok || r.Verdict != v {
				t.Errorf("%+v: %s %s (%s), want %s", c, r.Checker, r.Verdict, r.Summary, want[r.Checker])
			}
		}
	}
}

// A key with more operations than a page shows is drawn around where the search got
// stuck, and the result says so.
func TestPageOfALongHistoryIsCapped(t *testing.T) {
	dir := t.TempDir()
	r := dataSafety.Check(t.Context(), histgen.Generate(histgen.Config{Ops: 5000, Clients: 5, Effects: true, Seed: 1}), Options{Dir: dir})
	if r.Verdict != Invalid || len(r.Files) != 1 {
		t.Fatalf("%s, files %q: want invalid with one page", r.Verdict, r.Files)
	}
	page, err := os.ReadFile(filepath.Join(dir, r.Files[0]))
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(page, pageDataStart) + len(pageDataStart)
	var data pageData
	if err := json.Unmarshal(page[at:at+bytes.IndexByte(page[at:], '\n')], &data); err != nil {
		t.Fatal(err)
	}
	if n := len(data.Partitions[0].History); n != visualiseLimit {
		t.Errorf("page shows %d operations, want %d", n, visualiseLimit)
	}
	if !slices.ContainsFunc(r.Evidence, func(line string) bool { return strings.Contains(line, "pages are capped at 1000 operations") }) {
		t.Errorf("evidence does not say the page is capped: %q", r.Evidence)
	}
}

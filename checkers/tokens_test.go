package checkers

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
)

// The runs answer "granted before?" as a set of every token would, whatever the order the
// tokens come in, and stay sorted, disjoint and not adjacent.
func TestGrantedTokensRememberEveryToken(t *testing.T) {
	orders := map[string]func(r *rand.Rand, i int) int64{
		"a counter":             func(_ *rand.Rand, i int) int64 { return int64(i) },
		"increasing with gaps":  func(_ *rand.Rand, i int) int64 { return int64(i * 3) },
		"any order, some twice": func(r *rand.Rand, _ int) int64 { return r.Int64N(3000) - 1000 },
		"a counter that goes back now and then": func(r *rand.Rand, i int) int64 {
			if r.IntN(10) == 0 {
				return int64(i - r.IntN(50))
			}
			return int64(i)
		},
	}
	for name, token := range orders {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var k grantedTokens
			set := map[int64]bool{}
			for i := range 5000 {
				tok := token(r, i)
				if got := k.add(tok); got == set[tok] {
					t.Fatalf("token %d (#%d): new %v, but a set says %v", tok, i, got, !set[tok])
				}
				set[tok] = true
			}
			size := 0
			for i, run := range k.runs {
				if run.lo > run.hi || i > 0 && k.runs[i-1].hi+1 >= run.lo {
					t.Fatalf("runs %v: run %d out of order, overlapping or adjacent", k.runs, i)
				}
				size += int(run.hi - run.lo + 1)
			}
			if size != len(set) {
				t.Fatalf("runs hold %d tokens, the set %d", size, len(set))
			}
		})
	}
}

// A counter's tokens make one run; the latest recentGrants keep their grant, which a
// duplicate names, and an older one's duplicate is still found.
func TestGrantedTokensKeepTheRecentGrants(t *testing.T) {
	var k grantedTokens
	n := int64(recentGrants + 10)
	for tok := range n {
		if before, _, _ := k.grant(tok, grantOf{process: int(tok % 5), index: int(tok)}); before {
			t.Fatalf("token %d: granted before", tok)
		}
	}
	if len(k.runs) != 1 || len(k.recent) != recentGrants {
		t.Fatalf("%d runs, %d grants kept; want 1 and %d", len(k.runs), len(k.recent), recentGrants)
	}
	if before, earlier, known := k.grant(n-1, grantOf{}); !before || !known || earlier != (grantOf{process: int((n - 1) % 5), index: int(n - 1)}) {
		t.Errorf("a recent token again: before %v, known %v, earlier %+v", before, known, earlier)
	}
	if before, _, known := k.grant(3, grantOf{}); !before || known {
		t.Errorf("an old token again: before %v, known %v; want true, false", before, known)
	}
}

// A token granted again long after its first grant is still a duplicate, its evidence
// saying the first grant is no longer known.
func TestFencingFindsAnOldDuplicate(t *testing.T) {
	t.Parallel() // a CPU-bound search: the fast tier runs them side by side
	// The events made at once: growing the slice was half the test's time.
	events := make([]history.Event, 0, 4*(recentGrants+6))
	grant := func(process int, token int64) {
		at := int64(len(events)+1) * 1000
		events = append(events,
			history.Event{Index: len(events), Type: history.Invoke, Process: process, Func: history.Acquire, Key: "k", Time: at},
			history.Event{Index: len(events) + 1, Type: history.OK, Process: process, Func: history.Acquire, Key: "k", Time: at + 1, Token: history.Int64(token)},
			history.Event{Index: len(events) + 2, Type: history.Invoke, Process: process, Func: history.Release, Key: "k", Time: at + 2},
			history.Event{Index: len(events) + 3, Type: history.OK, Process: process, Func: history.Release, Key: "k", Time: at + 3})
	}
	for tok := range int64(recentGrants + 5) {
		grant(int(tok%3), tok+1)
	}
	grant(0, 1)
	r := fencing.Check(t.Context(), events, Options{})
	if r.Verdict != Invalid || r.Counts["duplicates"] != 1 || len(r.Evidence) == 0 ||
		!strings.Contains(r.Evidence[len(r.Evidence)-1], "token 1 granted to p0 (#") ||
		!strings.Contains(r.Evidence[len(r.Evidence)-1], "had been granted before, more than 100000 grants earlier") {
		t.Errorf("%s: %s %v", r.Verdict, r.Summary, r.Evidence)
	}
}

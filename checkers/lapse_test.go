package checkers

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

// A hold never released lapses at its holder's last event (issue 35): a grant to another
// client after that event is legal to lock-linearizable, as it is to mutual-exclusion, and
// one before it is not.
func TestHoldLapsesAtItsHoldersLastEvent(t *testing.T) {
	type step struct {
		typ     history.Type
		process int
		f       history.Func
		at      int64 // ms
	}
	killed := func(at int64) []step {
		return []step{{history.Info, history.NemesisProcess, history.Start, at}, {history.Info, history.NemesisProcess, history.Stop, at}}
	}
	tests := []struct {
		name  string
		steps []step
		want  Verdict
	}{
		{"killed as it was granted; p1 granted after", append(append([]step{
			{history.Invoke, 0, history.Acquire, 1}, {history.OK, 0, history.Acquire, 2},
			{history.Invoke, 1, history.Acquire, 3}}, killed(4)...),
			step{history.OK, 1, history.Acquire, 5}, step{history.Invoke, 1, history.Release, 6}, step{history.OK, 1, history.Release, 7}), Valid},
		{"p1's grant returns as p0's last event is recorded", []step{
			{history.Invoke, 0, history.Acquire, 1}, {history.OK, 0, history.Acquire, 2},
			{history.Invoke, 1, history.Acquire, 3}, {history.Invoke, 0, history.Read, 4},
			{history.Info, 0, history.Read, 6}, {history.OK, 1, history.Acquire, 6}}, Valid},
		{"p1 granted before p0's last event", []step{
			{history.Invoke, 0, history.Acquire, 1}, {history.OK, 0, history.Acquire, 2},
			{history.Invoke, 1, history.Acquire, 3}, {history.Invoke, 0, history.Read, 4},
			{history.OK, 1, history.Acquire, 5}, {history.Info, 0, history.Read, 6}}, Invalid},
		{"p0's acquire timed out, then it was granted again: its first life's hold is none", []step{
			{history.Invoke, 0, history.Acquire, 1}, {history.Info, 0, history.Acquire, 2},
			{history.Invoke, 0, history.Acquire, 3}, {history.OK, 0, history.Acquire, 4},
			{history.Invoke, 1, history.Acquire, 5}, {history.Invoke, 0, history.Write, 6},
			{history.Info, 0, history.Write, 7}, {history.OK, 1, history.Acquire, 8}}, Valid},
		{"p0 holding tried again and timed out: its hold, granted to its first life, lapses", []step{
			{history.Invoke, 0, history.Acquire, 1}, {history.OK, 0, history.Acquire, 2},
			{history.Invoke, 0, history.Acquire, 3}, {history.Info, 0, history.Acquire, 4},
			{history.Invoke, 1, history.Acquire, 5}, {history.OK, 1, history.Acquire, 8}}, Valid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []history.Event
			for _, s := range tt.steps {
				e := history.Event{Index: len(events), Type: s.typ, Process: s.process, Func: s.f, Key: "k", Time: 1e9 + s.at*1e6}
				if s.process == history.NemesisProcess {
					e.Key, e.Fault, e.Targets = "", "kill-client", []string{"worker-0"}
				}
				events = append(events, e)
			}
			results := RunAll(t.Context(), []Checker{lockLinearizable, mutualExclusion}, events, Options{})
			for _, r := range results {
				if r.Verdict != tt.want {
					t.Errorf("%s: %s (%s; %q), want %s", r.Checker, r.Verdict, r.Summary, r.Evidence, tt.want)
				}
			}
		})
	}
}

// A hold whose release was rejected (unreachable: it never got there) lapses at that
// release, where mutual-exclusion ends it: the lease then runs out and another client's
// grant is legal. A grant while the holder still acts under its hold is not; nor is a
// release the service accepted from a client after granting another (lock-linearizable
// alone, as mutual-exclusion judges beliefs and p0 had let go). Whole and in pieces.
func TestHoldLapsesAtItsRejectedRelease(t *testing.T) {
	type step struct {
		typ     history.Type
		process int
		f       history.Func
		at      int64 // ms
		err     history.ErrorKind
	}
	held := []step{{history.Invoke, 0, history.Acquire, 1, ""}, {history.OK, 0, history.Acquire, 2, ""}}
	unreachable := []step{{history.Invoke, 0, history.Release, 10, ""}, {history.Fail, 0, history.Release, 11, history.ErrUnreachable}}
	granted := func(p int, at int64) []step { // p's acquire, invoked at 3 ms, granted at at
		return []step{{history.Invoke, p, history.Acquire, 3, ""}, {history.OK, p, history.Acquire, at, ""}}
	}
	released := func(p int, at int64, typ history.Type, err history.ErrorKind) []step {
		return []step{{history.Invoke, p, history.Release, at, ""}, {typ, p, history.Release, at + 1, err}}
	}
	cat := func(parts ...[]step) []step { return slices.Concat(parts...) }
	tests := []struct {
		name    string
		steps   []step
		lin, me Verdict
	}{
		{"p1 granted after the lease", cat(held, unreachable, granted(1, 4000), released(1, 4001, history.OK, "")), Valid, Valid},
		{"p1 granted as p0 invokes its release", cat(held, granted(1, 10), unreachable), Valid, Valid},
		{"p1 granted while p0 held", cat(held, granted(1, 9), unreachable), Invalid, Invalid},
		{"a release with no kind fails", cat(held, []step{{history.Invoke, 0, history.Release, 10, ""}, {history.Fail, 0, history.Release, 11, ""}},
			granted(1, 4000)), Valid, Valid},
		{"p0 acquires again, nobody else", cat(held, unreachable, []step{{history.Invoke, 0, history.Acquire, 20, ""}, {history.OK, 0, history.Acquire, 4000, ""}},
			released(0, 4010, history.OK, "")), Valid, Valid},
		{"p0 acquires again after p1", cat(held, unreachable, granted(1, 4000), released(1, 4001, history.OK, ""),
			[]step{{history.Invoke, 0, history.Acquire, 4003, ""}, {history.OK, 0, history.Acquire, 4004, ""}}, released(0, 4010, history.OK, "")), Valid, Valid},
		{"p0 fails twice, then p1", cat(held, unreachable, released(0, 20, history.Fail, history.ErrUnreachable), granted(1, 4000)), Valid, Valid},
		{"p0 fails, times out acquiring, is granted, fails again; then p1", cat(held, unreachable,
			[]step{{history.Invoke, 0, history.Acquire, 20, ""}, {history.Info, 0, history.Acquire, 30, ""}},
			[]step{{history.Invoke, 0, history.Acquire, 40, ""}, {history.OK, 0, history.Acquire, 4000, ""}},
			released(0, 4010, history.Fail, history.ErrUnreachable), granted(1, 8000)), Valid, Valid},
		{"p0's retry succeeds, nobody else", cat(held, unreachable, released(0, 20, history.OK, "")), Valid, Valid},
		{"p0's retry finds it not held after p1's grant", cat(held, unreachable, granted(1, 4000), released(0, 4002, history.Fail, history.ErrNotHeld)), Valid, Valid},
		{"p0's retry times out after p1's grant", cat(held, unreachable, granted(1, 4000), released(0, 4002, history.Info, "")), Valid, Valid},
		{"p0's retry succeeds after p1's grant", cat(held, unreachable, granted(1, 4000), released(0, 4002, history.OK, "")), Invalid, Valid},
		{"p0's release times out, then p1", cat(held, released(0, 10, history.Info, ""), granted(1, 4000)), Valid, Valid},
		{"p0's release times out, p0 acquires again", cat(held, released(0, 10, history.Info, ""),
			[]step{{history.Invoke, 0, history.Acquire, 20, ""}, {history.OK, 0, history.Acquire, 4000, ""}}), Valid, Valid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slices.SortStableFunc(tt.steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
			var events []history.Event
			for _, s := range tt.steps {
				events = append(events, history.Event{Index: len(events), Type: s.typ, Process: s.process, Func: s.f, Key: "k", Time: 1e9 + s.at*1e6, Error: s.err})
			}
			if _, err := history.Pair(events); err != nil {
				t.Fatal(err)
			}
			want := map[Name]Verdict{"lock-linearizable": tt.lin, "mutual-exclusion": tt.me}
			for _, r := range RunAll(t.Context(), []Checker{lockLinearizable, mutualExclusion}, events, Options{}) {
				if r.Verdict != want[r.Checker] {
					t.Errorf("%s: %s (%s; %q), want %s", r.Checker, r.Verdict, r.Summary, r.Evidence, want[r.Checker])
				}
			}
			sameVerdicts(t, tt.name, events, Limits{PieceOps: 1, MaxOps: 1 << 30, LongOps: 1 << 30})
		})
	}
}

// Over many generated histories, lock-linearizable and mutual-exclusion answer alike: valid
// when no two clients held the lock at once, invalid when two did. Histories with Kills
// (holders killed while holding, the lock passing on when their lease ran out) are valid,
// with releases failing unreachable (Unreachable: the lease runs out too) or not; those
// with pause-holder mostly are not, and failed releases change nothing in that. Judged in
// pieces, the valid ones get the same verdicts.
func TestLockLinearizableAgreesWithMutualExclusion(t *testing.T) {
	seeds := uint64(24)
	if testing.Short() {
		seeds = 8
	}
	killedThenGranted, failedThenGranted, paused := 0, 0, map[Verdict]int{}
	for seed := range seeds {
		for _, v := range []struct{ kills, unreachable bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
			cfg := histgen.Config{Ops: 400, Clients: []int{2, 5, 10}[seed%3], Fencing: seed%2 == 0, Effects: seed%4 != 3,
				Kills: v.kills, Unreachable: v.unreachable, Seed: seed}
			name := fmt.Sprintf("%+v", cfg)
			events := histgen.Generate(cfg)
			results := map[Name]Result{}
			for _, r := range RunAll(t.Context(), []Checker{lockLinearizable, mutualExclusion}, events, Options{}) {
				results[r.Checker] = r
			}
			lin, me := results["lock-linearizable"], results["mutual-exclusion"]
			want := Valid
			if me.Counts["overlaps"] > 0 {
				want = Invalid
			}
			if me.Verdict != want || lin.Verdict != want {
				t.Errorf("%s: mutual-exclusion %s (%s), lock-linearizable %s (%s; %q)", name, me.Verdict, me.Summary, lin.Verdict, lin.Summary, lin.Evidence)
			}
			if v.unreachable {
				failedThenGranted += grantsAfterFailedReleases(events)
			}
			if !v.kills {
				paused[want]++
			}
			if v.kills {
				if want != Valid {
					t.Errorf("%s: a history with kills and no pause has overlapping holds: %q", name, me.Evidence)
				}
				killedThenGranted += grantsAfterKills(events)
				sameVerdicts(t, name, events, tinyPieces)
			}
		}
	}
	t.Logf("%d grants after a holder's kill, %d after a failed release; histories with pauses: %v", killedThenGranted, failedThenGranted, paused)
	if killedThenGranted < int(seeds)*3 {
		t.Errorf("only %d grants after a holder's kill: lapses are not exercised", killedThenGranted)
	}
	if failedThenGranted < int(seeds)*3 {
		t.Errorf("only %d grants after a failed release: its lapses are not exercised", failedThenGranted)
	}
	if paused[Invalid] == 0 {
		t.Errorf("no history with pauses had overlapping holds: invalid agreement is not exercised")
	}
}

// grantsAfterFailedReleases counts the releases that failed unreachable after which the
// next grant was another client's.
func grantsAfterFailedReleases(events []history.Event) int {
	ops, _ := history.Pair(events)
	n := 0
	for i, op := range ops {
		if op.Func() != history.Release || op.Type() != history.Fail || op.Complete.Error != history.ErrUnreachable {
			continue
		}
		for _, next := range ops[i+1:] {
			if next.Func() == history.Acquire && next.Type() == history.OK {
				if next.Process() != op.Process() {
					n++
				}
				break
			}
		}
	}
	return n
}

// grantsAfterKills counts the kills of a holder that held the lock when it died and after
// which another client was granted it.
func grantsAfterKills(events []history.Event) int {
	ops, _ := history.Pair(events)
	n := 0
	for _, f := range history.Faults(events) {
		victim, ok := history.ClientTarget(f.Targets[0])
		if !ok || f.Description != "kill-client" {
			continue
		}
		holding, granted := false, false
		for _, op := range ops {
			switch {
			case op.Process() == victim && op.Func() == history.Acquire && op.Type() == history.OK:
				holding = true
			case op.Process() == victim && op.Func() == history.Release:
				holding = false
			case op.Process() != victim && op.Func() == history.Acquire && op.Type() == history.OK && op.Complete.Time > f.Start:
				granted = true
			}
		}
		if holding && granted {
			n++
		}
	}
	return n
}

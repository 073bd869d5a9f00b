package checkers

import (
	"fmt"
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

// Over many generated histories, lock-linearizable and mutual-exclusion answer alike: valid
// when no two clients held the lock at once, invalid when two did. Histories with Kills
// (holders killed while holding, the lock passing on when their lease ran out) are valid;
// those with pause-holder mostly are not. Judged in pieces, they get the same verdicts.
func TestLockLinearizableAgreesWithMutualExclusion(t *testing.T) {
	seeds := uint64(24)
	if testing.Short() {
		seeds = 8
	}
	killedThenGranted, paused := 0, map[Verdict]int{}
	for seed := range seeds {
		for _, kills := range []bool{true, false} {
			cfg := histgen.Config{Ops: 400, Clients: []int{2, 5, 10}[seed%3], Fencing: seed%2 == 0, Effects: seed%4 != 3, Kills: kills, Seed: seed}
			name := fmt.Sprintf("%+v", cfg)
			events := histgen.Generate(cfg)
			results := map[string]Result{}
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
			if !kills {
				paused[want]++
			}
			if kills {
				if want != Valid {
					t.Errorf("%s: a history with kills and no pause has overlapping holds: %q", name, me.Evidence)
				}
				killedThenGranted += grantsAfterKills(events)
				sameVerdicts(t, name, events, tinyPieces)
			}
		}
	}
	t.Logf("%d grants after a holder's kill; histories with pauses: %v", killedThenGranted, paused)
	if killedThenGranted < int(seeds)*3 {
		t.Errorf("only %d grants after a holder's kill: lapses are not exercised", killedThenGranted)
	}
	if paused[Invalid] == 0 {
		t.Errorf("no history with pauses had overlapping holds: invalid agreement is not exercised")
	}
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

package histgen

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
)

func TestGeneratedHistoriesParse(t *testing.T) {
	for _, cfg := range []Config{
		{Ops: 3000, Clients: 5, Fencing: true, Effects: true, Seed: 1},
		{Ops: 3000, Clients: 20, Fencing: false, Effects: false, Seed: 2},
		{Ops: 3000, Clients: 50, Fencing: true, Effects: false, Seed: 3},
	} {
		events := Generate(cfg)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, e := range events {
			if err := enc.Encode(e); err != nil {
				t.Fatal(err)
			}
		}
		file, err := history.Parse(&buf)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if !reflect.DeepEqual(file.Events, events) {
			t.Fatalf("%+v: history reads back differently", cfg)
		}
		for i, e := range events {
			if e.Index != i || i > 0 && e.Time < events[i-1].Time {
				t.Fatalf("%+v: event %d (index %d, time %d) out of order", cfg, i, e.Index, e.Time)
			}
		}
		ops, err := history.Pair(events)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[history.Type]int{}
		effects := 0
		for _, op := range ops {
			counts[op.Type()]++
			if op.Complete != nil && op.Complete.EffectFrom != 0 {
				effects++
			}
		}
		info := float64(counts[history.Info]) / float64(len(ops))
		t.Logf("%+v: %d events, %d ops, %v, info %.3f, effects %d, faults %d", cfg, len(events), len(ops), counts, info, effects, len(history.Faults(events)))
		if info < 0.05 || info > 0.09 {
			t.Errorf("%+v: %.3f of the operations are info, want 5-9 %%", cfg, info)
		}
		if (effects > 0) != cfg.Effects {
			t.Errorf("%+v: %d completions carry effects", cfg, effects)
		}
		if len(history.Faults(events)) == 0 {
			t.Errorf("%+v: no pause", cfg)
		}
	}
}

// With Kills the holder is killed now and then, never paused: the dead one's process never
// acts again but for the read the kill cut short, its hold is never released, and the lock
// passes to another client once the lease has run out.
func TestKillsLeaveHoldsUnreleased(t *testing.T) {
	for seed := range uint64(5) {
		cfg := Config{Ops: 1000, Clients: 5, Fencing: seed%2 == 0, Effects: seed%3 != 0, Kills: true, Seed: seed}
		events := Generate(cfg)
		ops, err := history.Pair(events)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		kills := 0
		for _, f := range history.Faults(events) {
			if f.Description != "kill-client" {
				t.Fatalf("%+v: a %s fault; want kill-client only", cfg, f.Description)
			}
			kills++
			victim, ok := history.ClientTarget(f.Targets[0])
			if !ok {
				t.Fatalf("%+v: kill of %v names no client", cfg, f.Targets)
			}
			// What the victim recorded: at most the info of its read after the kill, no release.
			var granted *history.Op
			for i, op := range ops {
				switch {
				case op.Process() != victim:
				case op.Func() == history.Acquire && op.Type() == history.OK:
					granted = &ops[i]
				case op.Func() == history.Release:
					granted = nil
				}
				if op.Process() == victim && op.Complete != nil && op.Complete.Time > f.Start &&
					(op.Func() != history.Read || op.Type() != history.Info || op.Invoke.Time > f.Start) {
					t.Errorf("%+v: worker-%d killed at %d acted after: %+v", cfg, victim, f.Start, op)
				}
			}
			if granted == nil {
				t.Errorf("%+v: worker-%d was killed holding no lock", cfg, victim)
				continue
			}
			next := -1
			for _, op := range ops {
				if op.Process() != victim && op.Func() == history.Acquire && op.Type() == history.OK && op.Complete.Time > f.Start {
					next = op.Process()
					break
				}
			}
			if next < 0 && f.Start < events[len(events)-1].Time-int64(2*ttl) {
				t.Errorf("%+v: nobody was granted the lock after worker-%d's kill", cfg, victim)
			}
		}
		t.Logf("%+v: %d events, %d kills", cfg, len(events), kills)
		if kills < 3 {
			t.Errorf("%+v: %d kills, want a few", cfg, kills)
		}
	}
}

// With Unreachable some releases fail unreachable, and the lock passes on after them, to
// another client now and then.
func TestUnreachableReleasesLetTheLeaseRunOut(t *testing.T) {
	for seed := range uint64(3) {
		cfg := Config{Ops: 1000, Clients: 5, Fencing: seed%2 == 0, Effects: seed%3 != 0, Unreachable: true, Kills: seed == 2, Seed: seed}
		ops, err := history.Pair(Generate(cfg))
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		failed, passed := 0, 0
		for i, op := range ops {
			if op.Func() != history.Release || op.Type() != history.Fail || op.Complete.Error != history.ErrUnreachable {
				continue
			}
			failed++
			for _, next := range ops[i+1:] {
				if next.Func() == history.Acquire && next.Type() == history.OK && next.Complete.Time > op.Invoke.Time {
					if next.Process() != op.Process() {
						passed++
					}
					break
				}
			}
		}
		t.Logf("%+v: %d releases failed unreachable, %d followed by another client's grant", cfg, failed, passed)
		if failed < 3 || passed == 0 {
			t.Errorf("%+v: %d releases failed unreachable, %d followed by another client's grant; want a few", cfg, failed, passed)
		}
	}
}

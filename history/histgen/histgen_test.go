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

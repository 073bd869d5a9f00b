package results

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

func TestSummaryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := Summary{
		Test:     "redis-pause-fencing",
		RunID:    "20261130T081530Z",
		Spec:     json.RawMessage(`{"system":"redis","clients":3,"fencing":true}`),
		Started:  time.Date(2026, 11, 30, 8, 15, 30, 0, time.UTC),
		Finished: time.Date(2026, 11, 30, 8, 16, 0, 0, time.UTC),
		Results:  pauseFencingResults(),
		Notes:    []string{"note"},
		Ops:      map[string]int{"ok": 3, "acquire:ok": 3},
		Faults:   2,
		Error:    "worker 2 lost",
	}
	if err := WriteSummary(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	want.Verdict = checkers.Invalid
	var spec any
	if err := json.Unmarshal(got.Spec, &spec); err != nil || !reflect.DeepEqual(spec, map[string]any{"system": "redis", "clients": 3.0, "fencing": true}) {
		t.Errorf("spec read back as %s (%v)", got.Spec, err)
	}
	got.Spec, want.Spec = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
	if _, err := ReadSummary(t.TempDir()); err == nil {
		t.Error("ReadSummary of an empty directory succeeded")
	}
}

func TestOverall(t *testing.T) {
	valid := checkers.Result{Checker: "a", Verdict: checkers.Valid}
	invalid := checkers.Result{Checker: "b", Verdict: checkers.Invalid}
	unknown := checkers.Result{Checker: "c", Verdict: checkers.Unknown}
	tests := []struct {
		name string
		s    Summary
		want checkers.Verdict
	}{
		{"all valid", Summary{Results: []checkers.Result{valid, valid}}, checkers.Valid},
		{"invalid beats unknown", Summary{Results: []checkers.Result{valid, unknown, invalid}}, checkers.Invalid},
		{"unknown beats valid", Summary{Results: []checkers.Result{valid, unknown}}, checkers.Unknown},
		{"no checker proves nothing", Summary{}, checkers.Unknown},
		{"harness error is never a pass", Summary{Results: []checkers.Result{valid}, Error: "boom"}, checkers.Unknown},
		{"harness error keeps invalid", Summary{Results: []checkers.Result{invalid}, Error: "boom"}, checkers.Invalid},
		{"stored verdict only worsens", Summary{Verdict: checkers.Invalid, Results: []checkers.Result{valid}}, checkers.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Overall(); got != tt.want {
				t.Errorf("Overall() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestTally(t *testing.T) {
	tests := []struct {
		name   string
		events []history.Event
		want   map[string]int
	}{
		{"empty", nil, map[string]int{}},
		{"outcomes, nemesis excluded, unfinished is info", pauseHistory(), map[string]int{
			"ok": 5, "fail": 1, "info": 1,
			"acquire:ok": 2, "write:ok": 1, "write:fail": 1, "write:info": 1, "release:ok": 1, "final-read:ok": 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tally(tt.events); !maps.Equal(got, tt.want) {
				t.Errorf("Tally = %v, want %v", got, tt.want)
			}
		})
	}
}

// pauseHistory: client 0 acquires, is paused past its TTL, client 1 acquires and writes, and
// client 0's stale write is rejected by fencing; client 1's second write never completes.
func pauseHistory() []history.Event {
	const s = int64(time.Second)
	base := 1000 * s
	evs := []history.Event{
		{Type: history.Invoke, Process: 0, Func: history.Acquire, Key: "k", Time: base},
		{Type: history.OK, Process: 0, Func: history.Acquire, Key: "k", Token: history.Int64(1), Time: base + s/10},
		{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Fault: "pause", Nodes: []string{"0"}, Time: base + s},
		{Type: history.Invoke, Process: 1, Func: history.Acquire, Key: "k", Time: base + 11*s},
		{Type: history.OK, Process: 1, Func: history.Acquire, Key: "k", Token: history.Int64(2), Time: base + 11*s + s/10},
		{Type: history.Invoke, Process: 1, Func: history.Write, Key: "k", Value: history.Int64(1), Token: history.Int64(2), Time: base + 12*s},
		{Type: history.OK, Process: 1, Func: history.Write, Key: "k", Time: base + 12*s + s/10},
		{Type: history.Info, Process: history.NemesisProcess, Func: history.Stop, Fault: "pause", Nodes: []string{"0"}, Time: base + 13*s},
		{Type: history.Invoke, Process: 0, Func: history.Write, Key: "k", Value: history.Int64(2), Token: history.Int64(1), Time: base + 13*s + s/10},
		{Type: history.Fail, Process: 0, Func: history.Write, Key: "k", Error: history.ErrStaleToken, Time: base + 13*s + s/5},
		{Type: history.Invoke, Process: 0, Func: history.Release, Key: "k", Time: base + 14*s},
		{Type: history.OK, Process: 0, Func: history.Release, Key: "k", Time: base + 14*s + s/10},
		{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Fault: "partition <script>", Nodes: []string{"n1", "n2"}, Time: base + 15*s},
		{Type: history.Invoke, Process: 1, Func: history.Write, Key: "k", Value: history.Int64(3), Token: history.Int64(2), Time: base + 16*s},
		{Type: history.Invoke, Process: history.HarnessProcess, Func: history.FinalRead, Key: "k", Time: base + 20*s},
		{Type: history.OK, Process: history.HarnessProcess, Func: history.FinalRead, Key: "k", Value: history.Int64(1), Time: base + 20*s + s/10},
	}
	for i := range evs {
		evs[i].Index = i
	}
	return evs
}

// pauseFencingResults is the teachable outcome: the lock broke, the data did not.
func pauseFencingResults() []checkers.Result {
	return []checkers.Result{
		{Checker: "lock-linearizable", Property: checkers.PropertyLockSafety, Verdict: checkers.Invalid, Summary: "history is not linearizable",
			Evidence: []string{"#4 ok p1 acquire k token=2 while p0 holds k"}, Files: []string{"lock-linearizable.html"}},
		{Checker: "mutual-exclusion", Property: checkers.PropertyLockSafety, Verdict: checkers.Invalid, Summary: "1 overlapping hold",
			Counts: map[string]int{"overlaps": 1}},
		{Checker: "data-safety", Property: checkers.PropertyDataSafety, Verdict: checkers.Valid, Summary: "every accepted request came from the holder"},
		{Checker: "lost-updates", Property: checkers.PropertyDataSafety, Verdict: checkers.Valid, Summary: "final read holds the last accepted write"},
		{Checker: "fencing", Property: checkers.PropertyFencing, Verdict: checkers.Valid, Summary: "3 stale requests rejected",
			Counts: map[string]int{"stale-rejected": 3}},
	}
}

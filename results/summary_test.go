package results

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
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
		Verdict:  checkers.Invalid,
		Results:  pauseFencingResults(),
		Notes:    []string{"note"},
		Ops:      OpCounts{history.Acquire: {OK: 3, Fail: 1}, history.Write: {Info: 2}},
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

// results.json holds op counts by function, then outcome: no key to split again.
func TestOpCountsJSON(t *testing.T) {
	b, err := json.Marshal(Summary{Ops: OpCounts{history.Acquire: {OK: 3, Fail: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"ops":{"acquire":{"ok":3,"fail":1,"info":0}}`; !strings.Contains(string(b), want) {
		t.Errorf("encoded %s, want it to hold %s", b, want)
	}
}

func TestOpCountsTotal(t *testing.T) {
	tests := []struct {
		name string
		ops  OpCounts
		want Outcomes
	}{
		{"none", nil, Outcomes{}},
		{"one function", OpCounts{history.Write: {OK: 1, Fail: 2, Info: 3}}, Outcomes{OK: 1, Fail: 2, Info: 3}},
		{"functions add up", OpCounts{history.Acquire: {OK: 2, Info: 1}, history.Write: {OK: 1, Fail: 1}},
			Outcomes{OK: 3, Fail: 1, Info: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.ops.Total()
			if got != tt.want || got.Total() != tt.want.OK+tt.want.Fail+tt.want.Info {
				t.Errorf("Total() = %+v (%d), want %+v", got, got.Total(), tt.want)
			}
		})
	}
}

func TestCount(t *testing.T) {
	neverCompleted := []history.Event{
		{Index: 0, Type: history.Invoke, Process: 0, Func: history.Acquire, Key: "k", Time: 1},
		{Index: 1, Type: history.OK, Process: 0, Func: history.Acquire, Key: "k", Time: 2},
		{Index: 2, Type: history.Invoke, Process: 0, Func: history.Write, Key: "k", Value: history.Int64(1), Time: 3},
	}
	tests := []struct {
		name   string
		events []history.Event
		want   OpCounts
	}{
		{name: "empty", want: OpCounts{}},
		{name: "never completed is info", events: neverCompleted,
			want: OpCounts{history.Acquire: {OK: 1}, history.Write: {Info: 1}}},
		{name: "outcomes, nemesis excluded", events: pauseHistory(), want: OpCounts{
			history.Acquire: {OK: 2}, history.Write: {OK: 1, Fail: 1, Info: 1}, history.Release: {OK: 1}, history.FinalRead: {OK: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := history.Pair(tt.events)
			if err != nil {
				t.Fatal(err)
			}
			if got := Count(ops); !maps.Equal(got, tt.want) {
				t.Errorf("Count = %v; want %v", got, tt.want)
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
		{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Fault: "pause", Targets: []string{"0"}, Time: base + s},
		{Type: history.Invoke, Process: 1, Func: history.Acquire, Key: "k", Time: base + 11*s},
		{Type: history.OK, Process: 1, Func: history.Acquire, Key: "k", Token: history.Int64(2), Time: base + 11*s + s/10},
		{Type: history.Invoke, Process: 1, Func: history.Write, Key: "k", Value: history.Int64(1), Token: history.Int64(2), Time: base + 12*s},
		{Type: history.OK, Process: 1, Func: history.Write, Key: "k", Time: base + 12*s + s/10},
		{Type: history.Info, Process: history.NemesisProcess, Func: history.Stop, Fault: "pause", Targets: []string{"0"}, Time: base + 13*s},
		{Type: history.Invoke, Process: 0, Func: history.Write, Key: "k", Value: history.Int64(2), Token: history.Int64(1), Time: base + 13*s + s/10},
		{Type: history.Fail, Process: 0, Func: history.Write, Key: "k", Error: history.ErrStaleToken, Time: base + 13*s + s/5},
		{Type: history.Invoke, Process: 0, Func: history.Release, Key: "k", Time: base + 14*s},
		{Type: history.OK, Process: 0, Func: history.Release, Key: "k", Time: base + 14*s + s/10},
		{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Fault: "partition <script>", Targets: []string{"n1", "n2"}, Time: base + 15*s},
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
	story := []checkers.Sentence{{Text: "p0 was granted the lock (token 1) at 0.00 s.", Event: 1},
		{Text: "p1 was granted the lock (token 2) at 0.00 s, while p0 still held it.", Event: 4},
		{Text: "p0 wrote 1 with token 1 at 0.01 s, and the storage refused it as stale.", Event: 99}}
	return []checkers.Result{
		{Checker: "lock-linearizable", Property: checkers.PropertyLockSafety, Verdict: checkers.Invalid, Summary: "history is not linearizable",
			Evidence: []string{"#4 ok p1 acquire k token=2 while p0 holds k"}, Files: []string{"lock-linearizable.html"}, Story: story},
		{Checker: "mutual-exclusion", Property: checkers.PropertyLockSafety, Verdict: checkers.Invalid, Summary: "1 overlapping hold",
			Counts: map[string]int{"overlaps": 1}, Story: story},
		{Checker: "data-safety", Property: checkers.PropertyDataSafety, Verdict: checkers.Valid, Summary: "every accepted request came from the holder"},
		{Checker: "lost-updates", Property: checkers.PropertyDataSafety, Verdict: checkers.Valid, Summary: "final read holds the last accepted write"},
		{Checker: "fencing", Property: checkers.PropertyFencing, Verdict: checkers.Valid, Summary: "3 stale requests rejected",
			Counts: map[string]int{checkers.CountStaleRejected: 3}},
	}
}

func TestCountHazardsListsTheWantedFirstEvenWhenAbsent(t *testing.T) {
	hazard := func(h history.Hazard) history.Event {
		return history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.HazardFunc, Hazard: h, Time: 1}
	}
	events := []history.Event{hazard(history.LeaseExpiredInPause), hazard(history.GrantedInPause), hazard(history.LeaseExpiredInPause)}
	got := CountHazards(events, map[string]history.Hazard{"pause-holder": history.GrantedInPause, "failover": history.GrantLost})
	want := []HazardCount{
		{Hazard: history.GrantLost, Count: 0, Nemesis: "failover"},
		{Hazard: history.GrantedInPause, Count: 1, Nemesis: "pause-holder"},
		{Hazard: history.LeaseExpiredInPause, Count: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CountHazards = %+v, want %+v", got, want)
	}
}

// A results.json of another version or tool loses only the fields this version cannot
// decode; the rest is read as written.
func TestReadSummaryLenientSetsAsideOnlyWhatItCannotRead(t *testing.T) {
	started := time.Date(2026, 11, 30, 8, 15, 30, 0, time.UTC)
	tests := []struct {
		name, saved string
		want        Summary
		setAside    []string
	}{
		{"this version's", `{"test": "t", "started": "2026-11-30T08:15:30Z", "faults": 2}`,
			Summary{Test: "t", Started: started, Faults: 2}, nil},
		{"fields of other types", `{"test": "t", "started": "2026-11-30T08:15:30Z", "ops": "x", "faults": "2", "notes": ["n"]}`,
			Summary{Test: "t", Started: started, Notes: []string{"n"}}, []string{"ops", "faults"}},
		{"a time that is not one", `{"test": "t", "started": "yesterday"}`, Summary{Test: "t"}, []string{"started"}},
		{"not JSON", `test: t`, Summary{}, []string{"all of it (not a JSON object)"}},
		{"not an object", `["t"]`, Summary{}, []string{"all of it (not a JSON object)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte(tt.saved), 0o644); err != nil {
				t.Fatal(err)
			}
			got, setAside, err := ReadSummaryLenient(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) || !slices.Equal(setAside, tt.setAside) {
				t.Errorf("read\n%+v, set aside %q\nwant\n%+v, set aside %q", got, setAside, tt.want, tt.setAside)
			}
		})
	}
	if _, _, err := ReadSummaryLenient(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a run without results.json: %v, want it does not exist", err)
	}
}

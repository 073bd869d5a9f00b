package checkers

import (
	"reflect"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// mutual-exclusion keeps overlaps as typed data up to overlapLimit, and counts them all,
// while its evidence lines stop at evidenceLimit.
func TestMutualExclusionKeepsOverlapsUpToItsLimit(t *testing.T) {
	tests := []struct {
		name   string
		events []history.Event
		want   []Overlap
		count  int
		kept   int
	}{
		{
			name:   "three holders",
			events: readHistory(t, "three-holders.jsonl"),
			want: []Overlap{
				{Key: "k", Earlier: Holding{Process: 0, Asked: 0, Granted: 1, Until: 11}, Later: Holding{Process: 1, Asked: 2, Granted: 3, Until: 6, Released: true}, Length: 9 * time.Millisecond},
				{Key: "k", Earlier: Holding{Process: 0, Asked: 0, Granted: 1, Until: 11}, Later: Holding{Process: 2, Asked: 4, Granted: 5, Until: 8, Released: true}, Length: 9 * time.Millisecond},
				{Key: "k", Earlier: Holding{Process: 1, Asked: 2, Granted: 3, Until: 6, Released: true}, Later: Holding{Process: 2, Asked: 4, Granted: 5, Until: 8, Released: true}, Length: 7 * time.Millisecond},
			},
			count: 3, kept: 3,
		},
		{name: "more than the evidence shows", events: holderNeverLeaves(evidenceLimit + 10), count: evidenceLimit + 10, kept: evidenceLimit + 10},
		{name: "more than are kept", events: holderNeverLeaves(overlapLimit + 10), count: overlapLimit + 10, kept: overlapLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mutualExclusion.Check(t.Context(), tt.events, Options{})
			if len(r.Overlaps) != tt.kept || r.Counts["overlaps"] != tt.count || r.Verdict != Invalid {
				t.Fatalf("%s, %d overlaps kept, count %d, want %d kept of %d", r.Verdict, len(r.Overlaps), r.Counts["overlaps"], tt.kept, tt.count)
			}
			if tt.want != nil && !reflect.DeepEqual(r.Overlaps, tt.want) {
				t.Errorf("overlaps\n%+v\nwant\n%+v", r.Overlaps, tt.want)
			}
		})
	}
}

// holderNeverLeaves is p0 holding k to the end while n other clients acquire and release it.
func holderNeverLeaves(n int) []history.Event {
	at := int64(1e9)
	event := func(typ history.Type, process int, f history.Func) history.Event {
		at += 1e6
		return history.Event{Type: typ, Process: process, Func: f, Key: "k", Time: at}
	}
	events := []history.Event{event(history.Invoke, 0, history.Acquire), event(history.OK, 0, history.Acquire)}
	for p := 1; p <= n; p++ {
		events = append(events,
			event(history.Invoke, p, history.Acquire), event(history.OK, p, history.Acquire),
			event(history.Invoke, p, history.Release), event(history.OK, p, history.Release))
	}
	events = append(events, event(history.Invoke, 0, history.Release), event(history.OK, 0, history.Release))
	for i := range events {
		events[i].Index = i
	}
	return events
}

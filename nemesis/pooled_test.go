package nemesis

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
)

// pooledHistory numbers and times hand-made events in order.
func pooledHistory(events ...history.Event) []history.Event {
	for i := range events {
		events[i].Index, events[i].Time = i, int64(i+1)*1e6
	}
	return events
}

// op is process p's event; a grant names the server backend it was made in when backend
// is not "".
func op(p int, f history.Func, typ history.Type, backend string) history.Event {
	e := history.Event{Type: typ, Process: p, Func: f, Key: "lock"}
	if backend != "" {
		e.Detail = map[string]string{history.BackendDetail: backend}
	}
	return e
}

func TestPooledSessionIsASecondGrantInTheSessionOfOneStillHeld(t *testing.T) {
	acq, rel := history.Acquire, history.Release
	inv, ok, fail := history.Invoke, history.OK, history.Fail
	tests := []struct {
		name   string
		events []history.Event
		want   []string // "holder / granted (backend)"
	}{
		{"one session per client: none", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(1, acq, inv, ""), op(1, acq, ok, "102"),
		), nil},
		{"the same session after the release: none", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(0, rel, inv, ""), op(0, rel, ok, ""),
			op(1, acq, inv, ""), op(1, acq, ok, "101"),
		), nil},
		{"released as the other is granted: none (the release began first)", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(1, acq, inv, ""),
			op(0, rel, inv, ""),
			op(1, acq, ok, "101"),
			op(0, rel, fail, ""),
		), nil},
		{"grants that name no session: none", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, ""),
			op(1, acq, inv, ""), op(1, acq, ok, ""),
		), nil},
		{"the same client again in its own session: none", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
		), nil},
		{"a second grant in the holder's session", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(1, acq, inv, ""), op(1, acq, ok, "101"),
		), []string{"worker-0 #1 / worker-1 #3 (101)"}},
		{"a third client too: each grant once, naming the earliest holder", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(1, acq, inv, ""), op(1, acq, ok, "101"),
			op(2, acq, inv, ""), op(2, acq, ok, "101"),
			op(3, acq, inv, ""), op(3, acq, ok, "102"),
		), []string{"worker-0 #1 / worker-1 #3 (101)", "worker-0 #1 / worker-2 #5 (101)"}},
		{"a busy answer in the session is no grant: none", pooledHistory(
			op(0, acq, inv, ""), op(0, acq, ok, "101"),
			op(1, acq, inv, ""), op(1, acq, fail, "101"),
		), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewPooledSessions("pgbouncer-transaction")
			var got []string
			for _, e := range tt.events {
				h, found := s.Follow(e)
				if !found {
					continue
				}
				if h.Hazard != history.PooledSession || h.Fault != "pgbouncer-transaction" || h.Process != history.NemesisProcess ||
					h.Func != history.HazardFunc || h.Time != e.Time || len(h.Targets) != 2 {
					t.Errorf("hazard event %+v for %+v", h, e)
				}
				got = append(got, fmt.Sprintf("%s / %s (%s)", h.Detail["holder"], h.Detail["granted"], h.Detail[history.BackendDetail]))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("hazards %q, want %q", got, tt.want)
			}
		})
	}
}

// The watch records what it finds, also the events delivered before it was told to stop.
func TestWatchPooledSessionsRecordsUntilTheLastEventDelivered(t *testing.T) {
	events := make(chan history.Event, 16)
	for _, e := range pooledHistory(
		op(0, history.Acquire, history.Invoke, ""), op(0, history.Acquire, history.OK, "7"),
		op(1, history.Acquire, history.Invoke, ""), op(1, history.Acquire, history.OK, "7"),
	) {
		events <- e
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var recorded []history.Event
	WatchPooledSessions(ctx, events, func(e history.Event) { recorded = append(recorded, e) }, "pgbouncer-transaction")
	if len(recorded) != 1 || recorded[0].Hazard != history.PooledSession ||
		!slices.Equal(recorded[0].Targets, []string{"worker-0", "worker-1"}) {
		t.Errorf("recorded %+v, want one pooled-session of worker-0 and worker-1", recorded)
	}
}

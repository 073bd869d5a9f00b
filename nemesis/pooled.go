package nemesis

import (
	"context"
	"maps"
	"slices"

	"github.com/lockbreaker/lockbreaker/history"
)

// PooledSessions recognises, in a history as it is recorded, the hazard a connection pooler
// in transaction mode makes with no fault at all (history.PooledSession): a lock that lives
// in a server session (a PostgreSQL session-level advisory lock) taken by one client, and
// then another client's lock statement run by the pooler in that same session while the
// first still holds the lock by its own account. The session is the one each grant names
// (detail backend, the pg_backend_pid of the statement that took it); a grant that names
// none (a lock that does not live in a session, as pg-lease's row does not) is never part
// of one. It reads nothing but the events, so a hand-made history tests it; the harness
// runs it during a run (WatchPooledSessions) and records what it finds in the history, where
// `lockbreaker check` finds it again.
type PooledSessions struct {
	// pooler names the pooler, as the hazard's fault.
	pooler string
	// holding are the grants of the processes that have not begun to release, by process.
	holding map[int]history.Event
}

// NewPooledSessions recognises the hazard made by the pooler named pooler.
func NewPooledSessions(pooler string) *PooledSessions {
	return &PooledSessions{pooler: pooler, holding: map[int]history.Event{}}
}

// Follow takes the next event of the history and returns the hazard event it makes, if
// any: one per grant, naming the holder whose session the grant was made in (the earliest
// granted, when several were).
func (s *PooledSessions) Follow(e history.Event) (history.Event, bool) {
	switch {
	case e.Func == history.Release && e.Type == history.Invoke:
		delete(s.holding, e.Process)
	case e.Func == history.Acquire && e.Type == history.OK:
		defer func() { s.holding[e.Process] = e }()
		backend := e.Detail[history.BackendDetail]
		if backend == "" {
			return history.Event{}, false
		}
		for _, p := range s.holders() {
			held := s.holding[p]
			if p == e.Process || held.Detail[history.BackendDetail] != backend {
				continue
			}
			return history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.HazardFunc,
				Time: e.Time, Fault: s.pooler, Hazard: history.PooledSession,
				Targets: []string{history.TargetOfClient(p), history.TargetOfClient(e.Process)},
				Detail:  map[string]string{"holder": grantText(held), "granted": grantText(e), history.BackendDetail: backend}}, true
		}
	}
	return history.Event{}, false
}

// holders are the holding processes, earliest grant first.
func (s *PooledSessions) holders() []int {
	return slices.SortedFunc(maps.Keys(s.holding), func(a, b int) int { return s.holding[a].Index - s.holding[b].Index })
}

// WatchPooledSessions records the pooled-session hazards of the pooler named pooler
// (PooledSessions) in the history, following events until ctx ends and then every event
// already delivered, so that it sees the grants of a run's last moments too: cancel ctx
// once the clients have stopped.
func WatchPooledSessions(ctx context.Context, events <-chan history.Event, record func(history.Event), pooler string) {
	s := NewPooledSessions(pooler)
	follow := func(e history.Event) {
		if h, ok := s.Follow(e); ok {
			record(h)
		}
	}
	for {
		select {
		case e := <-events:
			follow(e)
		case <-ctx.Done():
			for {
				select {
				case e := <-events:
					follow(e)
				default:
					return
				}
			}
		}
	}
}

package checkers

import (
	"context"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

// leaseHistory writes a history by hand in milliseconds: each client's operations, and
// faults on clients (worker-N) or nodes.
type leaseHistory struct{ events []history.Event }

func (h *leaseHistory) add(e history.Event, ms int64) *leaseHistory {
	e.Index, e.Time = len(h.events), 1e9+ms*1e6
	if e.Process != history.NemesisProcess {
		e.Key = "k"
	}
	h.events = append(h.events, e)
	return h
}

func (h *leaseHistory) op(p int, f history.Func, invoke, complete int64, outcome history.Type) *leaseHistory {
	h.add(history.Event{Type: history.Invoke, Process: p, Func: f}, invoke)
	return h.add(history.Event{Type: outcome, Process: p, Func: f}, complete)
}

// said marks the first grant as saying what keeps it alive, as an exec program's do.
func (h *leaseHistory) said(kept history.Keeping) *leaseHistory {
	for i, e := range h.events {
		if e.Func == history.Acquire && e.Type == history.OK {
			h.events[i].Detail = map[string]string{history.KeptDetail: string(kept)}
			break
		}
	}
	return h
}

// hold is a grant (asked at invoke, told at granted) and a release at released.
func (h *leaseHistory) hold(p int, invoke, granted, released int64) *leaseHistory {
	return h.op(p, history.Acquire, invoke, granted, history.OK).op(p, history.Release, released, released+1, history.OK)
}

func (h *leaseHistory) fault(kind history.FaultKind, target string, from, to int64) *leaseHistory {
	h.add(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Fault: kind.Name, Targets: []string{target}}, from)
	return h.add(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Stop, Fault: kind.Name, Targets: []string{target}}, to)
}

// sorted is the history in the order of its times, as a recorder writes it.
func (h *leaseHistory) sorted() []history.Event {
	events := append([]history.Event(nil), h.events...)
	for i := 1; i < len(events); i++ {
		for j := i; j > 0 && events[j].Time < events[j-1].Time; j-- {
			events[j], events[j-1] = events[j-1], events[j]
		}
	}
	for i := range events {
		events[i].Index = i
	}
	return events
}

func TestLeaseSafety(t *testing.T) {
	const ttl = time.Second
	byKey := history.Lease{TTL: ttl, Kept: history.KeptByKey}
	bySession := history.Lease{TTL: ttl, Kept: history.KeptBySession}
	unknown := history.Lease{TTL: ttl}
	h := func() *leaseHistory { return &leaseHistory{} }
	// p1 granted while p0 holds, within p0's TTL; and long after it, p0 still holding.
	withinTTL := func() *leaseHistory { return h().hold(0, 5, 10, 500).hold(1, 200, 300, 400) }
	pastTTL := func() *leaseHistory { return h().hold(0, 5, 10, 2000).hold(1, 1200, 1500, 1600) }
	tests := []struct {
		name    string
		history *leaseHistory
		lease   history.Lease
		want    Verdict
	}{
		{"Kleppmann's pause: the holder paused past its lease, the next granted after it: the lease's limit, not the lock's fault",
			h().hold(0, 5, 10, 2100).fault(history.PauseClient, "worker-0", 100, 2000).hold(1, 1300, 1500, 1600), byKey, Valid},
		{"a key the service forgot: the next granted within the holder's TTL, nothing paused",
			withinTTL(), byKey, Invalid},
		{"a session: the next granted while the holder and the service were untouched",
			withinTTL(), bySession, Invalid},
		{"a session: the holder was cut off, so its session may have run out",
			h().hold(0, 5, 10, 500).fault(history.PartitionClient, "worker-0", 100, 200).hold(1, 200, 300, 400), bySession, Valid},
		{"a session: a node was paused, so any session may have run out",
			h().hold(0, 5, 10, 500).fault(history.PauseNode, "n1", 100, 200).hold(1, 200, 300, 400), bySession, Valid},
		{"a fault on a third client touches neither grant",
			h().hold(0, 5, 10, 500).fault(history.PauseClient, "worker-2", 100, 200).hold(1, 200, 300, 400), bySession, Invalid},
		{"a key held past its TTL: its lease ran out, the next grant is the lock doing right",
			pastTTL(), byKey, Valid},
		{"a session held past the TTL, untouched: still running",
			pastTTL(), bySession, Invalid},
		{"unknown keeping needs both: a key's TTL run out proves nothing",
			pastTTL(), unknown, Valid},
		{"unknown keeping: within the TTL and untouched",
			withinTTL(), unknown, Invalid},
		{"etcd 3.4's thawed waiter: frozen while another surely held the lock, told after it went on while a third held it",
			h().hold(2, 0, 10, 400).op(0, history.Acquire, 50, 1501, history.OK).fault(history.PauseWaiter, "worker-0", 100, 1500).
				op(0, history.Release, 1600, 1601, history.OK).hold(1, 60, 1200, 1700), bySession, Invalid},
		{"a waiter stopped just as it was told, with nobody holding: it may have been told before its stop",
			h().op(0, history.Acquire, 50, 1501, history.OK).fault(history.PauseClient, "worker-0", 100, 1500).
				op(0, history.Release, 1600, 1601, history.OK).hold(1, 60, 1200, 1700), bySession, Valid},
		{"a starved client may have been told at any moment: never blamed",
			h().hold(2, 0, 10, 400).op(0, history.Acquire, 50, 1501, history.OK).fault(history.ThrottleHolder, "worker-0", 100, 1500).
				op(0, history.Release, 1600, 1601, history.OK).hold(1, 60, 1200, 1700), bySession, Valid},
		{"redsync 4.3's late extend: yes, after another was granted the lock since",
			h().op(0, history.Acquire, 5, 10, history.OK).op(0, history.Extend, 300, 1600, history.OK).
				op(0, history.Release, 1700, 1701, history.OK).hold(1, 1300, 1400, 1500), byKey, Invalid},
		{"an extend that said no: the holder was told nothing",
			h().op(0, history.Acquire, 5, 10, history.OK).op(0, history.Extend, 300, 1600, history.Fail).
				op(0, history.Release, 1700, 1701, history.OK).hold(1, 1300, 1400, 1500), byKey, Valid},
		{"an extend stopped as it was told: yes may have come before the other's grant",
			h().op(0, history.Acquire, 5, 10, history.OK).op(0, history.Extend, 300, 1601, history.OK).
				fault(history.PauseClient, "worker-0", 310, 1600).op(0, history.Release, 1700, 1701, history.OK).hold(1, 1300, 1400, 1500), byKey, Valid},
		{"extends in time keep the key's lease running: a grant then is the lock's fault",
			h().op(0, history.Acquire, 5, 10, history.OK).op(0, history.Extend, 800, 810, history.OK).
				op(0, history.Release, 1700, 1701, history.OK).hold(1, 1000, 1400, 1500), byKey, Invalid},
		{"a grant that says it is a session's stands over the run's unknown: held past the TTL, untouched, still running",
			h().hold(0, 5, 10, 2000).said(history.KeptBySession).hold(1, 1200, 1500, 1600), unknown, Invalid},
		{"no lease stated: not judged", withinTTL(), history.Lease{}, NotApplicable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := leaseSafety.Check(context.Background(), tt.history.sorted(), Options{Lease: tt.lease})
			if r.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %s %q", r.Verdict, tt.want, r.Summary, r.Evidence)
			}
			if r.Verdict == Invalid && (len(r.Evidence) == 0 || r.FirstViolation == nil) {
				t.Errorf("invalid without evidence or first violation: %+v", r)
			}
		})
	}
}

// histgen simulates a correct lease lock: its holders paused, killed or cut off from their
// releases outlive their leases, and the lock never grants within one.
func TestACorrectLeaseLockKeepsItsLeases(t *testing.T) {
	lease := history.Lease{TTL: histgen.TTL, Kept: history.KeptByKey}
	for _, c := range []histgen.Config{
		{Ops: 5000, Clients: 5, Effects: true, Seed: 2}, {Ops: 5000, Clients: 20, Fencing: true, Seed: 3},
		{Ops: 5000, Clients: 5, Kills: true, Effects: true, Seed: 4}, {Ops: 5000, Clients: 5, Unreachable: true, Seed: 5},
	} {
		if r := leaseSafety.Check(t.Context(), histgen.Generate(c), Options{Lease: lease}); r.Verdict != Valid {
			t.Errorf("%+v: %s: %s %q", c, r.Verdict, r.Summary, r.Evidence)
		}
	}
}

package harness

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

func ev(p int, f history.Func, typ history.Type) history.Event {
	return history.Event{Process: p, Func: f, Type: typ, Key: "k"}
}

// at is e at time t.
func at(t int64, e history.Event) history.Event {
	e.Time = t
	return e
}

// An overlap is seen only once the earlier holder shows its hold reached past another's
// grant, by the events' times and whatever the order they were recorded in; a holder that
// released first, or whose next event is a new acquire (a new life after a kill),
// confirms none.
func TestOverlapSeenOnlyWhenTheEarlierHolderActsAfterTheRivalsGrant(t *testing.T) {
	grant := func(p int, t int64) []history.Event {
		return []history.Event{at(t, ev(p, history.Acquire, history.Invoke)), at(t+1, ev(p, history.Acquire, history.OK))}
	}
	for _, tt := range []struct {
		name   string
		events []history.Event // in the order recorded
		want   int             // index of the confirming event, -1: none
	}{
		{"the paused holder writes after the rival's grant",
			slices.Concat(grant(1, 1), grant(2, 3), []history.Event{at(5, ev(1, history.Write, history.Invoke))}), 4},
		{"the holder released before the rival's grant",
			slices.Concat(grant(1, 1), []history.Event{at(3, ev(1, history.Release, history.Invoke)), at(4, ev(1, history.Release, history.OK))}, grant(2, 5),
				[]history.Event{at(7, ev(1, history.Read, history.Invoke))}), -1},
		{"the holder released before the rival's grant, recorded after it (a busy host)",
			slices.Concat(grant(1, 1), grant(2, 4), []history.Event{at(3, ev(1, history.Release, history.Invoke)), at(6, ev(1, history.Release, history.OK))}), -1},
		{"the rival's grant recorded after the holder released past it",
			slices.Concat(grant(1, 1), []history.Event{at(3, ev(2, history.Acquire, history.Invoke)), at(6, ev(1, history.Release, history.Invoke)),
				at(4, ev(2, history.Acquire, history.OK))}), 4},
		{"the holder's next event is a new acquire",
			slices.Concat(grant(1, 1), grant(2, 3), grant(1, 5)), -1},
		{"the rival acts, not the holder",
			slices.Concat(grant(1, 1), grant(2, 3), []history.Event{at(5, ev(2, history.Write, history.Invoke))}), -1},
		{"the nemesis's events are no holder's",
			slices.Concat(grant(1, 1), grant(2, 3), []history.Event{{Process: history.NemesisProcess, Func: history.Start, Time: 5}}), -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen, got := newOverlapSeen(), -1
			for i, e := range tt.events {
				if seen.add(e) && got < 0 {
					got = i
				}
			}
			if got != tt.want {
				t.Errorf("confirmed at event %d, want %d", got, tt.want)
			}
		})
	}
}

// The nemesis is stopped once its n faults have begun and every fault on has ended, not
// while one is on; helper faults (pause-in-lease) keep it waiting but are not counted, and
// a fault recorded with what it cut (a partition's grudge) is counted as its kind.
func TestStopAfterFaultsWaitsForTheRoundToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fault := func(f history.Func, name string) history.Event {
			return history.Event{Process: history.NemesisProcess, Func: f, Fault: name}
		}
		events := make(chan history.Event, 10)
		stopped := false
		go stopAfterFaults(t.Context(), events, 1, func() { stopped = true })
		for _, e := range []history.Event{fault(history.Start, "pause-in-lease"), fault(history.Start, "partition-holder worker-0|n1"),
			fault(history.Stop, "partition-holder worker-0|n1"), fault(history.Roles, ""), fault(history.HazardFunc, "partition-holder")} {
			events <- e
		}
		synctest.Wait()
		if stopped {
			t.Fatal("the nemesis was stopped while its victim was still paused")
		}
		events <- fault(history.Stop, "pause-in-lease")
		synctest.Wait()
		if !stopped {
			t.Fatal("the nemesis was not stopped once its one fault and the pause had ended")
		}
	})
}

// A broken lock's run with --stop-at-first-violation ends a grace after its first overlap,
// long before its time limit, says so, and is judged on its whole history.
func TestStopAtFirstViolationEndsTheRunEarly(t *testing.T) {
	inLane(t, laneLocal)
	spec := localSpec("local-broken", []string{"none"}, false)
	spec.TimeLimit, spec.StopEarly = Duration(10*time.Minute), true
	s, events := runEvents(t, spec)
	expect(t, s, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid})
	if span := time.Duration(history.Span(events) - events[0].Time); span > spec.TimeLimit.Std()/2 {
		t.Errorf("the run went on for %s of its %s", span, spec.TimeLimit.Std())
	}
	if !slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "stopped early") }) {
		t.Errorf("notes %q do not say the run stopped early", s.Notes)
	}
}

// --faults 1 lets the nemesis begin one fault and no more, while the clients run on.
func TestFaultsBoundsTheNemesis(t *testing.T) {
	inMakeTest(t, "TestStopAtFirstViolationEndsTheRunEarly, the other early end")
	inLane(t, laneLocal)
	spec := localSpec("local", []string{"pause-holder"}, false)
	spec.Faults = 1
	s, events := runEvents(t, spec)
	if n := len(nemesisEvents(events, history.Start, "pause-holder")); n != 1 {
		t.Errorf("%d pause-holder faults began, want 1", n)
	}
	if !slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "--faults") }) {
		t.Errorf("notes %q do not say the nemesis stopped", s.Notes)
	}
}

// The time limit waits for every client to be at work: the wait ends once each has had an
// operation answered (the nemesis's events and an operation only begun count for nothing),
// or at once when a client broke or the bound has passed.
func TestClientsAtWorkWaitsForEveryClientsFirstOperation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		events := make(chan history.Event, 8)
		for _, e := range []history.Event{
			{Process: 0, Type: history.Invoke, Func: history.Acquire},
			{Process: history.NemesisProcess, Type: history.Info, Func: history.Start},
			{Process: 0, Type: history.OK, Func: history.Acquire},
			{Process: 1, Type: history.Invoke, Func: history.Acquire},
		} {
			events <- e
		}
		var waited time.Duration
		done := make(chan struct{})
		go func() {
			waited = clientsAtWork(context.Background(), events, 2, time.Hour, never)
			close(done)
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("returned with one client at work")
		default:
		}
		events <- history.Event{Process: 1, Type: history.Fail, Func: history.Acquire}
		<-done
		if waited != time.Minute {
			t.Errorf("waited %s, want the minute until the second client was answered", waited)
		}

		broke := make(chan struct{})
		close(broke)
		if waited := clientsAtWork(context.Background(), make(chan history.Event), 2, time.Hour, broke); waited != 0 {
			t.Errorf("a broken client: waited %s", waited)
		}
		if waited := clientsAtWork(context.Background(), make(chan history.Event), 2, 10*time.Second, never); waited != 10*time.Second {
			t.Errorf("no client at work: waited %s, want the bound", waited)
		}
	})
}

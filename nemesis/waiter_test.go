package nemesis

import (
	"context"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// pause-waiter freezes the client that waits behind another's grant, and lets it go on once
// another client was granted the lock after the waiter's lease ran out (its hazard), or
// after five leases without that. The lease is the longest the grants state, else the TTL:
// here 1 s. In a synctest bubble: the five leases the fault waits for the grant pass only
// once every goroutine waits, so no delay of a busy machine cuts them short, and none is
// spent waiting.
func TestPauseWaiterFreezesAWaiterPastItsLease(t *testing.T) {
	tests := []struct {
		name string
		// grantAfter is when after the freeze (as recorded) another client is granted the
		// lock: far from the end of the lease of 1 s either way, whatever the machine.
		grantAfter time.Duration
		hazards    map[history.Hazard]int
	}{
		{"granted after the waiter's lease ran out", 3 * time.Second, map[history.Hazard]int{history.WaiterLapsed: 1}},
		{"granted within the waiter's lease", 0, map[history.Hazard]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(3, 1)
				env := f.env()
				env.TTL = 10 * time.Millisecond // the grants state a lease of 1 s: that one counts
				env.Interval = time.Hour        // one freeze: the waiter, still waiting after it, is not frozen again
				stop := running(t, pauseWaiter{}, env)
				now := history.Now()
				f.events <- history.Event{Index: 1, Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now - int64(time.Second)}
				f.events <- history.Event{Index: 2, Type: history.OK, Process: 0, Func: history.Acquire, Time: now - int64(time.Second),
					Detail: map[string]string{history.LeaseTTL: "1s"}}
				f.events <- history.Event{Index: 3, Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now - int64(time.Second)}
				waitFor(t, "the freeze", func() bool { return len(f.faults()) > 0 })
				frozen := f.faults()[0].Start
				f.events <- history.Event{Index: 4, Type: history.Invoke, Process: 0, Func: history.Release, Time: frozen}
				f.events <- history.Event{Index: 5, Type: history.OK, Process: 2, Func: history.Acquire, Time: frozen + tt.grantAfter.Nanoseconds()}
				waitFor(t, "the thaw", func() bool { return len(f.faults()) > 0 && f.faults()[0].Healed })
				stop()
				if got, want := f.did(), []string{"worker-1 STOPPED (SIGNAL)", "worker-1 CONTINUED"}; !slices.Equal(got, want) {
					t.Fatalf("actions %q, want %q", got, want)
				}
				if fl := f.faults()[0]; fl.Description != history.PauseWaiter.Name || !slices.Equal(fl.Targets, []string{"worker-1"}) {
					t.Errorf("fault %+v, want pause-waiter on worker-1", fl)
				}
				f.mu.Lock()
				hazards := history.CountHazards(f.recorded)
				f.mu.Unlock()
				if !maps.Equal(hazards, tt.hazards) {
					t.Fatalf("hazards %v, want %v", hazards, tt.hazards)
				}
				if len(tt.hazards) > 0 {
					h := f.hazards()[0]
					if h.Detail[history.LeaseDetail] != "1s" || h.Detail["granted"] != "worker-2 #5" ||
						!slices.Equal(h.Targets, []string{"worker-1", "worker-2"}) {
						t.Errorf("hazard %+v: want worker-1's lease of 1s, worker-2's grant #5", h)
					}
				}
			})
		})
	}
}

// A waiter is a client whose acquire is under way while another client holds the lock: the
// one that has waited longest, never the holder itself, never one alone.
func TestLongestWaiterWaitsBehindAnotherClient(t *testing.T) {
	acquire := func(typ history.Type, p int, at int64) history.Event {
		return history.Event{Type: typ, Process: p, Func: history.Acquire, Time: at}
	}
	tests := []struct {
		name   string
		events []history.Event
		want   int // -1: none
	}{
		{"nobody holds", []history.Event{acquire(history.Invoke, 1, 10), acquire(history.Invoke, 2, 20)}, -1},
		{"the holder asks again", []history.Event{acquire(history.Invoke, 1, 10), acquire(history.OK, 1, 11),
			acquire(history.Invoke, 1, 20)}, -1},
		{"the first of two waiters", []history.Event{acquire(history.Invoke, 1, 10), acquire(history.OK, 1, 11),
			acquire(history.Invoke, 3, 30), acquire(history.Invoke, 2, 20)}, 2},
		{"a waiter that was answered waits no more", []history.Event{acquire(history.Invoke, 1, 10), acquire(history.OK, 1, 11),
			acquire(history.Invoke, 2, 20), acquire(history.Fail, 2, 25), acquire(history.Invoke, 3, 30)}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := watch(nil)
			for i, e := range tt.events {
				e.Index = i
				w.follow(e)
			}
			p, _, ok := w.longestWaiter()
			if !ok {
				p = -1
			}
			if p != tt.want {
				t.Errorf("waiter %d, want %d", p, tt.want)
			}
		})
	}
}

// A waiter whose acquire came back as it was stopped is let go at once, with no hazard.
func TestPauseWaiterLetsGoOfAWaiterAnsweredMeanwhile(t *testing.T) {
	f := newFake(2, 1)
	env := f.env()
	w := watch(f.events)
	now := history.Now()
	w.follow(history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: now})
	w.follow(history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now})
	f.events <- history.Event{Type: history.Fail, Process: 1, Func: history.Acquire, Time: now} // heard of late
	if err := w.freezeWaiter(context.Background(), env, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := f.did(), []string{"worker-1 STOPPED (SIGNAL)", "worker-1 CONTINUED"}; !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	if h := f.hazards(); len(h) > 0 {
		t.Errorf("hazards %v, want none", h)
	}
}

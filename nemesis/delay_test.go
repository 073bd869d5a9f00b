package nemesis

import (
	"context"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// fakeLinks records what a fault does to the clients' links; each armed hold is handed to
// the test, which says what it caught.
type fakeLinks struct {
	*fake
	holds chan *fakeHold
}

type fakeHold struct {
	caught   chan HeldWrite
	released chan struct{}
}

func (h *fakeHold) Caught() <-chan HeldWrite { return h.caught }
func (h *fakeHold) Release() {
	select {
	case <-h.released:
	default:
		close(h.released)
	}
}

func (l fakeLinks) Strike(p int, f LinkFault) error {
	return l.act("%s %s", history.TargetOfClient(p), f)
}
func (l fakeLinks) HoldNextWrite() (WriteHold, error) {
	h := &fakeHold{caught: make(chan HeldWrite, 1), released: make(chan struct{})}
	l.holds <- h
	return h, l.act("hold armed")
}
func (l fakeLinks) HealLinks() { l.act("heal links") }

func (f *fake) linkedEnv() (Env, fakeLinks) {
	env := f.env()
	l := fakeLinks{fake: f, holds: make(chan *fakeHold, 8)}
	env.Links = l
	return env, l
}

func TestDelaySlowsOneClientAndHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2, 1)
		env, _ := f.linkedEnv()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := (delayClient{}).Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		got := f.did()
		if len(got) < 2 || !strings.Contains(got[0], "slowed 30ms") || got[1] != "heal links" {
			t.Errorf("actions %q", got)
		}
		for _, fl := range f.faults() {
			if !fl.Healed || !strings.HasPrefix(fl.Targets[0], "worker-") {
				t.Errorf("fault %+v", fl)
			}
		}
	})
}

// delay-holder keeps a holder's write, sent within its lease, in the network until the
// lease has run out and another client's write was accepted; that late delivery is its
// hazard. A write nobody overtakes is held to the bound and let go with no hazard; one
// sent after its lease is let go at once, and no fault is recorded.
func TestDelayHolderHoldsAWriteUntilAnotherClientWrote(t *testing.T) {
	const ttl = 10 * time.Millisecond
	// The grant lies a second in the past, so its lease has run out by the time the test
	// sends the other client's write, however slow the machine.
	granted := history.Now() - int64(time.Second)
	tests := []struct {
		name string
		// sentAfter is when the write was caught, after the grant.
		sentAfter time.Duration
		// unseen: the grant came before the watch began.
		unseen    bool
		overtaken bool
		faults    int
		hazards   int
	}{
		{"overtaken", time.Millisecond, false, true, 1, 1},
		{"nobody wrote", time.Millisecond, false, false, 1, 0},
		{"sent after its lease", 2 * ttl, false, true, 0, 0},
		{"granted before the watch", time.Millisecond, true, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2, 1)
			env, l := f.linkedEnv()
			env.TTL, env.Interval = ttl, time.Hour
			stop := running(t, delayHolder{}, env)
			hold := <-l.holds
			events := []history.Event{
				{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: granted},
				{Type: history.OK, Process: 1, Func: history.Acquire, Time: granted},
				{Type: history.OK, Process: 1, Func: history.Read, Time: granted, Value: history.Int64(4)},
				{Type: history.Invoke, Process: 1, Func: history.Write, Time: granted, Value: history.Int64(5)},
			}
			if tt.unseen {
				events = events[2:]
			}
			for _, e := range events {
				f.events <- e
			}
			hold.caught <- HeldWrite{Process: 1, Value: 5, At: granted + tt.sentAfter.Nanoseconds()}
			if tt.overtaken {
				now := history.Now()
				f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: now}
				f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Write, Time: now, Value: history.Int64(5)}
			}
			<-hold.released
			stop()
			faults := f.faults()
			if len(faults) != tt.faults {
				t.Fatalf("faults %+v, want %d", faults, tt.faults)
			}
			for _, fl := range faults {
				if fl.Description != history.DelayHolder.Name || !fl.Healed || !slices.Equal(fl.Targets, []string{"worker-1"}) {
					t.Errorf("fault %+v", fl)
				}
			}
			var hazards []history.Event
			for _, e := range f.recorded {
				if e.Func == history.HazardFunc {
					hazards = append(hazards, e)
				}
			}
			if len(hazards) != tt.hazards {
				t.Fatalf("hazards %+v, want %d", hazards, tt.hazards)
			}
			for _, h := range hazards {
				if h.Hazard != history.LateWrite || !slices.Equal(h.Targets, []string{"worker-1", "worker-0"}) ||
					h.Detail["written"] != "worker-0 wrote 5" {
					t.Errorf("hazard %+v", h)
				}
			}
		})
	}
}

// A fault on the links and a cut of single clients by address cannot run together.
func TestLinksAndClientCutsAreRefusedTogether(t *testing.T) {
	redis, _ := system.Lookup("redis")
	n, _ := New([]string{"delay-holder", "partition-holder"})
	if err := n.Available(redis, 1); err == nil || !strings.Contains(err.Error(), "run them apart") {
		t.Errorf("delay-holder with partition-holder: %v", err)
	}
	n, _ = New([]string{"delay-holder", "pause-node"})
	if err := n.Available(redis, 1); err != nil {
		t.Errorf("delay-holder with pause-node: %v", err)
	}
}

// A window's latency lies between a sixteenth of the TTL and twice the TTL, its jitter half that.
func TestSlownessSpansWhatALeaseRidesOutAndWhatEatsIt(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 1000 {
		latency, jitter := slowness(time.Second, rng)
		if latency < time.Second/16 || latency > 2*time.Second || jitter != latency/2 {
			t.Fatalf("latency %s, jitter %s", latency, jitter)
		}
	}
}

// slow-network slows every client; a holder's write the storage applied after its lease
// is its hazard, one within the lease is not.
func TestSlowNetworkSeesWritesAfterTheirLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2, 1)
		env, _ := f.linkedEnv()
		env.TTL, env.Pause = 100*time.Millisecond, time.Hour // the window ends with the test
		stop := running(t, slowNetwork{}, env)
		waitFor(t, "both clients slowed", func() bool { return len(f.did()) == 2 })
		granted := history.Now() - int64(time.Second) // both leases ran out long ago
		for _, e := range []history.Event{
			{Type: history.OK, Process: 0, Func: history.Acquire, Time: granted, Detail: map[string]string{"validity": "1h"}},
			{Type: history.OK, Process: 0, Func: history.Write, Time: history.Now(), EffectFrom: history.Now(), Value: history.Int64(1)},
			{Type: history.OK, Process: 1, Func: history.Acquire, Time: granted},
			{Type: history.OK, Process: 1, Func: history.Write, Time: history.Now(), EffectFrom: history.Now(), Value: history.Int64(2)},
		} {
			f.events <- e
		}
		hazards := func() (n int) {
			for _, e := range f.hazards() {
				if e.Hazard == history.SlowPastLease && slices.Equal(e.Targets, []string{"worker-1"}) {
					n++
				}
			}
			return n
		}
		waitFor(t, "worker-1's late write", func() bool { return hazards() > 0 })
		stop()
		got := f.did()
		if len(got) != 3 || !strings.HasPrefix(got[0], "worker-0 slowed ") || got[1] != strings.Replace(got[0], "worker-0", "worker-1", 1) ||
			got[2] != "heal links" {
			t.Errorf("actions %q, want both clients slowed alike, then healed", got)
		}
		if n := hazards(); n != 1 {
			t.Errorf("%d hazards about worker-1, want 1 (worker-0's write was within its stated validity)", n)
		}
		if faults := f.faults(); len(faults) != 1 || !faults[0].Healed || faults[0].Targets[0] != Clients {
			t.Errorf("faults %+v", faults)
		}
	})
}

// delay's hazard is a late write of the client it delays, and of no other.
func TestDelaySeesTheDelayedClientsLateWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2, 1)
		env, _ := f.linkedEnv()
		env.TTL, env.Pause = 100*time.Millisecond, time.Hour // the window ends with the test
		stop := running(t, delayClient{}, env)
		waitFor(t, "a client delayed", func() bool { return len(f.did()) > 0 })
		struck := 0
		if strings.HasPrefix(f.did()[0], "worker-1 ") {
			struck = 1
		}
		granted := history.Now() - int64(time.Second) // both leases ran out long ago
		for _, p := range []int{1 - struck, struck} {
			f.events <- history.Event{Type: history.OK, Process: p, Func: history.Acquire, Time: granted}
			f.events <- history.Event{Type: history.OK, Process: p, Func: history.Write, Time: history.Now(), EffectFrom: history.Now(),
				Value: history.Int64(int64(p))}
		}
		waitFor(t, "the delayed client's late write", func() bool { return len(f.hazards()) > 0 })
		stop()
		if got := f.hazards(); len(got) != 1 || got[0].Hazard != history.SlowPastLease || got[0].Fault != history.Delay.Name ||
			!slices.Equal(got[0].Targets, []string{history.TargetOfClient(struck)}) {
			t.Errorf("hazards %+v, want one %s for %s", got, history.SlowPastLease, history.TargetOfClient(struck))
		}
	})
}

// slow-network's and delay's windows begin as a client is granted the lock: with no grant
// they would wait two TTLs (two hours here) before slowing anyone. delay slows the client
// granted. Fifty schedule moments pass with events that are not grants and nobody slowed;
// a window that began at its moment would have slowed someone by then. In a synctest
// bubble a sleep ends only once the nemesis waits too, so every moment has come and gone.
func TestSlowWindowsBeginAtAGrant(t *testing.T) {
	for _, tt := range []struct {
		nemesis kind
		first   string // the first action's start
	}{
		{slowNetwork{}, "worker-0 slowed "},
		{delayClient{}, "worker-1 slowed "},
	} {
		t.Run(tt.nemesis.Kind().Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(2, 1)
				env, _ := f.linkedEnv()
				env.TTL, env.Pause, env.Interval = time.Hour, time.Hour, time.Millisecond
				stop := running(t, tt.nemesis, env)
				for range 50 {
					f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
					time.Sleep(2 * env.Interval)
				}
				if got := f.did(); len(got) != 0 {
					t.Fatalf("actions %q before any grant", got)
				}
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
				waitFor(t, "a window after the grant", func() bool { return len(f.did()) > 0 })
				stop()
				if got := f.did(); !strings.HasPrefix(got[0], tt.first) {
					t.Errorf("actions %q, want %q... after the grant", got, tt.first)
				}
			})
		})
	}
}

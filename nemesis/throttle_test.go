package nemesis

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// throttling is the recording fake's workers, able to stop themselves when armed, and to
// be throttled.
type throttling struct{ selfStopping }

func (t throttling) Throttle(p int) error { return t.act("throttle %s", history.TargetOfClient(p)) }
func (t throttling) Unthrottle() error    { return t.act("unthrottle") }

// Tighten goes through three shares, then says the least was reached.
func (t throttling) Tighten() (string, bool, error) {
	shares := []string{"0.4% of a CPU", "0.2% of a CPU", "0.1% of a CPU"}
	n := 0
	for _, a := range t.did() {
		if a == "tighten" {
			n++
		}
	}
	if n == len(shares) {
		return shares[n-1], false, nil
	}
	return shares[n], true, t.act("tighten")
}

// A holder that keeps the lock while throttled has its share lowered each lease, down to
// the least, and the throttle's stop says the share it had reached. In a synctest bubble,
// so that the leases pass only once every goroutine waits: here four, one lowering more
// than the shares go.
func TestThrottleHolderLowersTheShareEachLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(3, 1)
		env := f.env()
		workers := throttling{selfStopping{f, make(chan SelfStop)}}
		env.Workers, env.TTL = workers, time.Second
		stop := running(t, throttleHolder{}, env)
		f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
		f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: history.Now()}
		workers.stopped <- SelfStop{Process: 1, At: history.Now()}
		synctest.Wait()
		time.Sleep(4*env.TTL + env.TTL/2)
		f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Acquire, Time: history.Now()}
		f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Read, Time: history.Now()}
		waitFor(t, "the throttle to be healed", func() bool { return len(f.faults()) > 0 && f.faults()[0].Healed })
		stop()
		want := []string{"arm", "disarm", "throttle worker-1", "worker-1 CONTINUED", "tighten", "tighten", "tighten", "unthrottle"}
		if got := f.did(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("actions %q, want first %q", got, want)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, e := range f.recorded {
			if e.Func == history.Stop && e.Fault == history.ThrottleHolder.Name && e.Detail[shareDetail] != "0.1% of a CPU" {
				t.Errorf("the throttle's stop says the share %q, want the least, 0.1%% of a CPU", e.Detail[shareDetail])
			}
		}
	})
}

// throttle-holder throttles the client that just read under the lock and continues it, so
// that it runs starved, until another client has taken the lock over (been granted it and
// used the storage); the grant meanwhile is its hazard. Directed, it takes the client that
// stopped itself after its read, throttled before it is continued, recorded from when it
// stopped; undirected, it throttles the reader the history shows, running.
func TestThrottleHolderStarvesTheClientThatJustReadUntilTakenOver(t *testing.T) {
	tests := []struct {
		name     string
		directed bool
		want     []string
	}{
		{"directed", true, []string{"arm", "disarm", "throttle worker-1", "worker-1 CONTINUED", "unthrottle"}},
		{"undirected", false, []string{"throttle worker-1", "unthrottle"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(3, 1)
			env := f.env()
			workers := throttling{selfStopping{f, make(chan SelfStop)}}
			env.Workers, env.TTL, env.Undirected = workers, time.Hour, !tt.directed // only the takeover ends it
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error)
			go func() { done <- throttleHolder{}.Run(ctx, env) }()
			f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: history.Now()}
			stoppedAt := history.Now()
			if tt.directed {
				workers.stopped <- SelfStop{Process: 1, At: stoppedAt}
			}
			waitFor(t, "the throttle", func() bool { return len(f.faults()) > 0 })
			f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Read, Time: history.Now()}
			waitFor(t, "the throttle to be healed", func() bool { return f.faults()[0].Healed })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := f.did(); len(got) < len(tt.want) || !slices.Equal(got[:len(tt.want)], tt.want) {
				t.Fatalf("actions %q, want first %q", got, tt.want)
			}
			fl := f.faults()[0]
			if fl.Description != history.ThrottleHolder.Name || fl.Targets[0] != "worker-1" || tt.directed && fl.Start != stoppedAt {
				t.Errorf("fault %+v: want worker-1 throttled (directed: from when it stopped itself, %d)", fl, stoppedAt)
			}
			f.mu.Lock()
			hazards := history.CountHazards(f.recorded)
			f.mu.Unlock()
			if want := map[history.Hazard]int{history.GrantedInThrottle: 1}; !maps.Equal(hazards, want) {
				t.Errorf("hazards %v, want %v", hazards, want)
			}
		})
	}
}

// A throttle that cannot be made ends the run's nemesis with the reason, the client that
// stopped itself continued; heal gives every client its CPU back and continues them all.
func TestThrottleThatFailsLetsGoAndHealUnthrottles(t *testing.T) {
	f := newFake(2, 1)
	env := f.env()
	env.Workers = failing{throttling{selfStopping{f, make(chan SelfStop)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error)
	go func() { done <- throttleHolder{}.Run(ctx, env) }()
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: history.Now()}
	env.Workers.(failing).stopped <- SelfStop{Process: 1, At: history.Now()}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "no cgroup") {
		t.Fatalf("a failed throttle: %v", err)
	}
	if got := f.did(); !slices.Contains(got, "worker-1 CONTINUED") || len(f.faults()) != 0 {
		t.Errorf("actions %q, faults %+v: want worker-1 continued and no fault recorded", got, f.faults())
	}
	if err := (throttleHolder{}).Heal(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got := f.did(); !slices.Contains(got, "unthrottle") || !slices.Contains(got, "worker-0 CONTINUED") {
		t.Errorf("heal did %q: want unthrottle and every worker continued", got)
	}
}

// failing are workers whose throttle fails.
type failing struct{ throttling }

func (failing) Throttle(int) error { return errors.New("no cgroup") }

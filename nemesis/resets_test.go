package nemesis

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// reset-client and timeout-client break one client's links at a time, on their schedule,
// for --pause each, and heal them after each window; a window the run's end cuts short is
// healed too. Each fault is recorded as its kind, aimed at the worker it broke.
func TestBreaksReachOneClientAtATimeAndHeal(t *testing.T) {
	for _, tt := range []struct {
		nemesis kind
		broken  string // what the lever is told, after "worker-N broken: "
		detail  map[string]string
	}{
		{resetClient{}, "reset", nil},
		{timeoutClient{}, "silent, closed after 15ms", map[string]string{closedAfterDetail: "15ms"}},
	} {
		k := tt.nemesis.Kind()
		t.Run(k.Name, func(t *testing.T) {
			if !tt.nemesis.Needs().Links {
				t.Fatal("breaks a client's links without asking for them")
			}
			f := newFake(3, 1)
			env, _ := f.linkedEnv()
			env.TTL = 2 * time.Second // the window (30ms) is the shorter: connections close after half of it
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			if err := tt.nemesis.Run(ctx, env); err != nil {
				t.Fatal(err)
			}
			got := f.did()
			if len(got) < 2 || len(got)%2 != 0 {
				t.Fatalf("actions %q, want breaks each followed by a heal", got)
			}
			for i := 0; i < len(got); i += 2 {
				target, broken, _ := strings.Cut(got[i], " broken: ")
				if broken != tt.broken || !slices.Contains([]string{"worker-0", "worker-1", "worker-2"}, target) || got[i+1] != "heal links" {
					t.Errorf("actions %q, %q: want a running worker's links broken (%s), then healed", got[i], got[i+1], tt.broken)
				}
			}
			faults := f.faults()
			if len(faults) != len(got)/2 {
				t.Errorf("%d faults recorded for %d breaks", len(faults), len(got)/2)
			}
			for i, fl := range faults {
				last := i == len(faults)-1 // the run's end may cut the last window short
				if fl.Description != k.Name || !fl.Healed || len(fl.Targets) != 1 || !strings.HasPrefix(got[2*i], fl.Targets[0]+" ") ||
					!last && time.Duration(fl.Stop-fl.Start) < env.Pause {
					t.Errorf("fault %+v, want %s on the worker broken (%q), healed after %s", fl, k.Name, got[2*i], env.Pause)
				}
			}
			for _, e := range f.recorded {
				if e.Func == history.Start && !maps.Equal(e.Detail, tt.detail) {
					t.Errorf("start %+v, want detail %v", e, tt.detail)
				}
			}
		})
	}
}

// A window the run's end cuts short is healed before Run returns: the break is taken back
// and its stop recorded.
func TestABreakCutShortIsHealed(t *testing.T) {
	f := newFake(2, 1)
	env, _ := f.linkedEnv()
	env.Pause = time.Hour
	stop := running(t, resetClient{}, env)
	waitFor(t, "a client's links broken", func() bool { return len(f.did()) > 0 })
	stop()
	if got := f.did(); len(got) != 2 || got[1] != "heal links" {
		t.Errorf("actions %q, want one break and its heal", got)
	}
	if faults := f.faults(); len(faults) != 1 || !faults[0].Healed {
		t.Errorf("faults %+v, want the one break, healed", faults)
	}
}

// timeout-client closes a silenced connection after half the lease or half the window,
// whichever is shorter, and never after less than a millisecond.
func TestSilenceEndsWithinTheLeaseAndTheWindow(t *testing.T) {
	for _, tt := range []struct{ ttl, window, want time.Duration }{
		{2 * time.Second, 4 * time.Second, time.Second},
		{2 * time.Second, time.Second, 500 * time.Millisecond},
		{time.Millisecond, time.Second, time.Millisecond},
	} {
		if got := silence(tt.ttl, tt.window); got != tt.want {
			t.Errorf("silence(ttl %s, window %s) = %s, want %s", tt.ttl, tt.window, got, tt.want)
		}
	}
}

// An operation of the client whose links are broken that ends indeterminate is the
// breaks' hazard; another client's, or one that got its answer, is not.
func TestABrokenClientsIndeterminateOperationIsTheHazard(t *testing.T) {
	f := newFake(2, 1)
	env, _ := f.linkedEnv()
	env.Pause = time.Hour // the window ends with the test
	stop := running(t, resetClient{}, env)
	waitFor(t, "a client's links broken", func() bool { return len(f.did()) > 0 })
	target, _, _ := strings.Cut(f.did()[0], " broken: ")
	struck := 0
	if target == "worker-1" {
		struck = 1
	}
	for _, e := range []history.Event{
		{Type: history.Info, Process: 1 - struck, Func: history.Write, Time: history.Now()},
		{Type: history.OK, Process: struck, Func: history.Read, Time: history.Now()},
		{Type: history.Info, Process: struck, Func: history.Acquire, Time: history.Now()},
	} {
		f.events <- e
	}
	waitFor(t, "the struck client's acquire cut off", func() bool { return len(f.hazards()) > 0 })
	stop()
	got := f.hazards()
	if len(got) != 1 || got[0].Hazard != history.OutcomeUnknown || !slices.Equal(got[0].Targets, []string{target}) ||
		got[0].Detail["operation"] != string(history.Acquire) || got[0].Fault != history.ResetClient.Name {
		t.Errorf("hazards %+v, want one %s for %s's acquire", got, history.OutcomeUnknown, target)
	}
}

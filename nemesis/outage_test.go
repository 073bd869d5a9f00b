package nemesis

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// outage kills every node once a client holds the lock and another waits, keeps them down
// for --pause, starts them all again, and counts each grant within two leases of their
// return (here of 1 s) as its hazard, but only when they were down longer than a lease. In
// a synctest bubble: the time down and the two leases pass only once every goroutine
// waits, so no busy machine stretches or cuts them.
func TestOutageTakesEveryNodeDownAndCountsTheGrantsAfterIt(t *testing.T) {
	tests := []struct {
		name    string
		pause   time.Duration
		hazards int
	}{
		{"down past the lease", 3 * time.Second, 1},
		{"down within the lease", 500 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(3, 3)
				env, _ := f.crashEnv()
				env.TTL, env.Pause, env.Interval = time.Second, tt.pause, time.Hour // one outage
				stop := running(t, outage{}, env)
				now := history.Now() - int64(time.Second) // the waiter has waited a tenth of a TTL already
				f.events <- history.Event{Index: 1, Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now}
				f.events <- history.Event{Index: 2, Type: history.OK, Process: 0, Func: history.Acquire, Time: now}
				f.events <- history.Event{Index: 3, Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now}
				waitFor(t, "the return", func() bool { return len(f.faults()) > 0 && f.faults()[0].Healed })
				f.events <- history.Event{Index: 4, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
				synctest.Wait()
				time.Sleep(3 * time.Second) // past the two leases: a grant then is no hazard
				f.events <- history.Event{Index: 5, Type: history.OK, Process: 2, Func: history.Acquire, Time: history.Now()}
				synctest.Wait()
				stop()

				did := f.did()
				if kills, restarts := slices.Sorted(slices.Values(did[:3])), slices.Sorted(slices.Values(did[3:])); len(did) != 6 ||
					!slices.Equal(kills, []string{"kill n1", "kill n2", "kill n3"}) ||
					!slices.Equal(restarts, []string{"restart n1", "restart n2", "restart n3"}) {
					t.Fatalf("actions %q, want every node killed, then every node restarted", did)
				}
				if fl := f.faults(); len(fl) != 1 || fl[0].Description != history.Outage.Name || !slices.Equal(fl[0].Targets, f.nodes) {
					t.Errorf("faults %+v, want one outage of every node", fl)
				}
				hazards := f.hazards()
				if len(hazards) != tt.hazards {
					t.Fatalf("hazards %+v, want %d", hazards, tt.hazards)
				}
				if tt.hazards > 0 {
					h := hazards[0]
					if h.Hazard != history.GrantedAfterOutage || h.Detail["granted"] != "worker-1 #4" || h.Detail[history.LeaseDetail] != "1s" ||
						h.Detail[history.DownForDetail] != "3s" || !slices.Equal(h.Targets, []string{"worker-1"}) {
						t.Errorf("hazard %+v: want worker-1's grant #4, 3s down, a lease of 1s", h)
					}
				}
			})
		})
	}
}

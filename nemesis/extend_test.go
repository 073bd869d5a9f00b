package nemesis

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// delay-extend slows the holder's answers from the lock's nodes, never the storage's, and
// counts another client's grant as its hazard only while an extend asked within the
// holder's lease waits: one asked after the lease ran out renewed nothing.
func TestDelayExtendCountsOnlyAnExtendAskedWithinTheLease(t *testing.T) {
	const ttl = time.Second
	for _, tt := range []struct {
		name    string
		askedAt time.Duration // after the grant
		hazards int
	}{
		{"asked within the lease", ttl / 3, 1},
		{"asked after the lease", 3 * ttl / 2, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(2, 1)
				env, _ := f.linkedEnv()
				env.TTL, env.Pause = ttl, 2*ttl
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- (delayExtend{}).Run(ctx, env) }()
				time.Sleep(10 * env.Interval) // past the first draw's moment: it awaits a grant
				synctest.Wait()
				const granted = int64(1e12)
				at := func(d time.Duration) int64 { return granted + d.Nanoseconds() }
				f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: granted}
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: granted}
				synctest.Wait()
				if did := f.did(); len(did) == 0 || !strings.Contains(did[0], "worker-1 slowed") || !strings.Contains(did[0], "the lock's links, answers") {
					t.Fatalf("actions %q, want worker-1's answers from the lock's links slowed", did)
				}
				f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Extend, Time: at(tt.askedAt)}
				f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: at(ttl + tt.askedAt)}
				f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: at(ttl + tt.askedAt)}
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Extend, Time: at(2 * ttl)}
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := len(f.hazards()); got != tt.hazards {
					t.Errorf("hazards %+v, want %d", f.hazards(), tt.hazards)
				}
			})
		})
	}
}

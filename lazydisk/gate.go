package lazydisk

import (
	"context"
	"sync"
	"syscall"
	"time"
)

// gate holds every sync back for the delay in force, so the disk seems slow to flush
// while everything else answers at once. A sync never waits longer than the delay in
// force now: changing the delay wakes the waiting syncs to measure again from their start.
type gate struct {
	mu      sync.Mutex
	delay   time.Duration
	wake    chan struct{} // closed, and replaced, when waiting syncs must look again
	drops   uint64        // Drops so far: a sync that waited across one fails
	closed  bool          // unmounting: nothing waits any more
	waiting int64
}

func newGate() *gate { return &gate{wake: make(chan struct{})} }

// wait holds a sync back for the delay. It fails with EIO when a Drop came while it
// waited (what it was to make durable may be gone), and with EINTR when the caller gave
// up (ctx is the request's, cancelled by the kernel's interrupt).
func (g *gate) wait(ctx context.Context) syscall.Errno {
	start := time.Now()
	g.mu.Lock()
	drops := g.drops
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	for {
		g.mu.Lock()
		left, wake, closed, dropped := g.delay-time.Since(start), g.wake, g.closed, g.drops != drops
		g.mu.Unlock()
		switch {
		case dropped:
			return syscall.EIO
		case closed || left <= 0:
			return 0
		}
		timer := time.NewTimer(left)
		select {
		case <-timer.C:
		case <-wake:
		case <-ctx.Done():
			timer.Stop()
			return syscall.EINTR
		}
		timer.Stop()
	}
}

// set makes d the delay, for syncs waiting now as well as later ones.
func (g *gate) set(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.delay = d
	g.wakeLocked()
}

// dropped fails the syncs waiting now.
func (g *gate) dropped() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drops++
	g.wakeLocked()
}

// close lets every sync through, now and from now on.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.wakeLocked()
}

func (g *gate) wakeLocked() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// held says how many syncs are waiting now.
func (g *gate) held() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// delayNow is the delay in force.
func (g *gate) delayNow() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.delay
}

package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// watcher follows the history as it is recorded, so targeted faults act on what the
// clients do instead of on guessed lengths of time, and see their hazards occur. Whoever
// holds a watcher keeps following it (next, wait, await...) while it acts on what it saw:
// a subscription that is not read drops events.
type watcher struct {
	events <-chan history.Event
	// holding are the grants of the processes that have not started to release the lock,
	// and began when each of those grants' last attempt began.
	holding map[int]history.Event
	began   map[int]int64
	// last is the last grant seen, and lastBegan when its last attempt began.
	last      history.Event
	lastBegan int64
	// acquiring are the open acquires' invocation times, by process.
	acquiring map[int]int64
	// latest is the index of each process's last event followed.
	latest map[int]int
	// granted, when set, sees every grant as it is followed: how a fault sees its hazard.
	granted func(grant history.Event)
}

func watch(events <-chan history.Event) *watcher {
	return &watcher{events: events, holding: map[int]history.Event{}, began: map[int]int64{}, acquiring: map[int]int64{},
		latest: map[int]int{}}
}

// holds reports whether process p holds the lock by its own account.
func (w *watcher) holds(p int) bool {
	_, ok := w.holding[p]
	return ok
}

// next returns the next event; false once ctx ends or deadline fires (nil: never).
func (w *watcher) next(ctx context.Context, deadline <-chan time.Time) (history.Event, bool) {
	select {
	case <-ctx.Done():
		return history.Event{}, false
	case <-deadline:
		return history.Event{}, false
	case e := <-w.events:
		w.follow(e)
		return e, true
	}
}

// follow takes e into the watcher's account of the clients.
func (w *watcher) follow(e history.Event) {
	w.latest[e.Process] = e.Index
	switch {
	case e.Func == history.Acquire && e.Type == history.Invoke:
		w.acquiring[e.Process] = e.Time
	case e.Func == history.Acquire && e.Type == history.OK:
		// The last attempt's start, when the client knows it: earlier attempts wrote nothing.
		// 0 for an acquire invoked before the watch began.
		began := max(w.acquiring[e.Process], e.EffectFrom)
		w.holding[e.Process], w.began[e.Process], w.last, w.lastBegan = e, began, e, began
		if w.granted != nil {
			w.granted(e)
		}
	case e.Func == history.Release && e.Type == history.Invoke:
		delete(w.holding, e.Process)
		delete(w.began, e.Process)
	}
}

// catchUp follows every event recorded so far and not yet followed, so that what the
// watcher says of the clients is how they are now: a fault aimed at the holder of an event
// read from the channel finds that it has released since.
func (w *watcher) catchUp() {
	for {
		select {
		case e := <-w.events:
			w.follow(e)
		default:
			return
		}
	}
}

// wait follows the history for d; false when ctx ended first.
func (w *watcher) wait(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if _, ok := w.next(ctx, timer.C); !ok {
			return ctx.Err() == nil
		}
	}
}

// schedule calls inject at seeded random moments, on average env.Interval apart, until
// ctx ends, following the history meanwhile. inject gets the schedule's random source.
func (w *watcher) schedule(ctx context.Context, env Env, inject func(*rand.Rand) error) error {
	rng := rand.New(rand.NewSource(env.Seed))
	for w.wait(ctx, scheduleWait(env, rng)) {
		if err := inject(rng); err != nil {
			return err
		}
	}
	return nil
}

// leaseEnd is when process p's lease ends at the earliest, on CLOCK_MONOTONIC: the
// validity its grant states (Redlock clients state it) from the grant on, else a TTL from
// when its granted attempt began, since every server that granted it set its lease after
// that (or from the grant, for an acquire invoked before the watch began). 0 when p holds
// nothing.
func (w *watcher) leaseEnd(p int, ttl time.Duration) int64 {
	grant, ok := w.holding[p]
	if !ok {
		return 0
	}
	if validity, err := time.ParseDuration(grant.Detail[validityDetail]); err == nil {
		return grant.Time + validity.Nanoseconds()
	}
	began := w.began[p]
	if began == 0 {
		began = grant.Time
	}
	return began + ttl.Nanoseconds()
}

// pauseInLease keeps holder p inside its critical section (pause-in-lease) while fault does
// its work, then until another client has taken the lock over or only what p needs to
// finish is left of its lease (its work, and a twentieth of the lease for its last requests),
// whichever comes first; a fault that reports it could not do its work ends the pause at
// once. A correct lock lets nobody in within the lease, so a second holder meanwhile is the
// fault's doing; a holder that overruns its lease after the thaw would be a pause's.
func (w *watcher) pauseInLease(ctx context.Context, env Env, p int, fault func() bool) error {
	thaw := w.leaseEnd(p, env.TTL) - (env.Work + env.TTL/20).Nanoseconds()
	return pauseWorker(ctx, env, leasePause, p, func() {
		if fault() {
			w.awaitTakeover(ctx, p, untilTime(thaw))
		}
	})
}

// untilTime is how long from now until t (CLOCK_MONOTONIC), or 0 when it has passed.
func untilTime(t int64) time.Duration { return max(0, time.Duration(t-history.Now())) }

// awaitTakeover waits until a process other than p has been granted the lock and has then
// completed a storage request, so the storage has seen the new holder (and its token, which
// is what makes fencing reject p's stale write); or until limit has passed. It says whether
// the takeover happened.
func (w *watcher) awaitTakeover(ctx context.Context, p int, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	granted := map[int]bool{}
	for {
		e, ok := w.next(ctx, timer.C)
		if !ok {
			return false
		}
		if e.Process == p || e.Type != history.OK {
			continue
		}
		switch e.Func {
		case history.Acquire:
			granted[e.Process] = true
		case history.Read, history.Write:
			if granted[e.Process] {
				return true
			}
		}
	}
}

// awaitGrant waits for an acquire by process p (any when p < 0) that succeeded at or after
// notBefore.
func (w *watcher) awaitGrant(ctx context.Context, p int, notBefore int64) (history.Event, bool) {
	for {
		e, ok := w.next(ctx, nil)
		if !ok || e.Func == history.Acquire && e.Type == history.OK && e.Time >= notBefore && (p < 0 || e.Process == p) {
			return e, ok
		}
	}
}

// awaitRelease waits until process p starts releasing the lock, or until limit has passed.
func (w *watcher) awaitRelease(ctx context.Context, p int, limit time.Duration) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for w.holds(p) {
		if _, ok := w.next(ctx, timer.C); !ok {
			return
		}
	}
}

// grantBegunAfter waits up to within for a grant whose acquire began at or after t and
// whose holder still holds the lock once every event recorded so far is followed, unless
// the last grant already seen is one.
func (w *watcher) grantBegunAfter(ctx context.Context, t int64, within time.Duration) (history.Event, bool) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		w.catchUp()
		if w.last.Time != 0 && w.lastBegan >= t && w.holds(w.last.Process) && w.holding[w.last.Process].Index == w.last.Index {
			return w.last, true
		}
		if _, ok := w.next(ctx, timer.C); !ok {
			return history.Event{}, false
		}
	}
}

// seeTakeovers records hazard h, seen by fault, each time a client other than p is
// granted the lock while p still holds it by its own account, until stop is called.
func (w *watcher) seeTakeovers(env Env, fault string, h history.Hazard, p int) (stop func()) {
	w.granted = func(grant history.Event) {
		held, ok := w.holding[p]
		if grant.Process == p || !ok {
			return
		}
		recordHazard(env, fault, h, grant.Time, map[string]string{"holder": grantText(held), "granted": grantText(grant)},
			workerName(p), workerName(grant.Process))
	}
	return func() { w.granted = nil }
}

// grantText names a grant for a hazard's detail: "worker-2 #41 token 7".
func grantText(grant history.Event) string {
	s := fmt.Sprintf("%s #%d", workerName(grant.Process), grant.Index)
	if grant.Token != nil {
		s += fmt.Sprintf(" token %d", *grant.Token)
	}
	return s
}

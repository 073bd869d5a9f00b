package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Pauses freeze a process with SIGSTOP and thaw it with SIGCONT: the process keeps its
// connections and its belief that it holds the lock, exactly like a long GC pause.
// A pause ends early when the run ends, and SIGCONT is sent even then.

// pauseWorker stops lock client p, records the pause, holds it for as long as hold takes,
// and thaws it however hold ended.
func pauseWorker(ctx context.Context, env Env, fault string, p int, hold func()) error {
	target := workerName(p)
	if err := env.Workers.Signal(p, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", target, err)
	}
	record(env, history.Start, fault, target)
	hold()
	err := env.Workers.Signal(p, syscall.SIGCONT)
	record(env, history.Stop, fault, target)
	return err
}

// forPause holds a pause for env.Pause.
func forPause(ctx context.Context, env Env) func() { return func() { sleep(ctx, env.Pause) } }

// takeoverLeases bounds a pause that waits for another client to take the lock, in
// leases: a lock that has let nobody in after five of them is not going to.
const takeoverLeases = 5

// watcher follows the history as it is recorded, so targeted faults act on what the
// clients do instead of on guessed lengths of time.
type watcher struct {
	events <-chan history.Event
	// holding are the grants of the processes that have not started to release the lock.
	holding map[int]history.Event
	// last is the last grant seen, and lastBegan when its acquire began.
	last      history.Event
	lastBegan int64
	// acquiring are the open acquires' invocation times, by process.
	acquiring map[int]int64
}

func watch(events <-chan history.Event) *watcher {
	return &watcher{events: events, holding: map[int]history.Event{}, acquiring: map[int]int64{}}
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
		switch {
		case e.Func == history.Acquire && e.Type == history.Invoke:
			w.acquiring[e.Process] = e.Time
		case e.Func == history.Acquire && e.Type == history.OK:
			w.holding[e.Process], w.last = e, e
			// The last attempt's start, when the client knows it: earlier attempts wrote nothing.
			w.lastBegan = max(w.acquiring[e.Process], e.EffectFrom)
		case e.Func == history.Release && e.Type == history.Invoke:
			delete(w.holding, e.Process)
		}
		return e, true
	}
}

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

// anywhere is embedded by the nemeses that pull no lever of the nodes but signals, which
// every cluster takes: they apply to every system.
type anywhere struct{}

func (anywhere) Needs() Needs                       { return Needs{} }
func (anywhere) Available(system.System, int) error { return nil }

// workerName is how a lock client is named as a fault target.
func workerName(p int) string { return fmt.Sprintf("worker-%d", p) }

func resumeAllWorkers(env Env) error {
	if env.Workers == nil { // healed after a failed Arm, before any worker started
		return nil
	}
	var errs []error
	for _, p := range env.Workers.Processes() {
		errs = append(errs, env.Workers.Signal(p, syscall.SIGCONT))
	}
	return errors.Join(errs...)
}

// pauseHolder is Kleppmann's GC pause: it waits until a client holds the lock and has
// read the register, then freezes it until its lease has expired and another client has
// taken the lock and used the storage, so the frozen one wakes up to write what it read.
// How long that takes is the lock's business (a lease, a session timeout and its expiry
// check, a waiter's wake-up and reconnect), so the pause waits for the takeover in the
// history rather than guessing a length: at most five leases. A --pause given by the user
// is a fixed length instead.
type pauseHolder struct{ anywhere }

func (pauseHolder) Name() string { return "pause-holder" }

func (pauseHolder) Run(ctx context.Context, env Env) error {
	return afterHolderReads(ctx, env, func(p int, hold func()) error {
		return pauseWorker(ctx, env, "pause-holder", p, hold)
	})
}

// afterHolderReads calls fault whenever a client that holds the lock has read the
// register, with how long to hold the fault: until another client has taken the lock over
// (at most five leases), or env.Pause when the user chose it.
func afterHolderReads(ctx context.Context, env Env, fault func(holder int, hold func()) error) error {
	w := watch(env.Subscribe())
	var quietUntil int64 // events before this time are stale: they arrived during a fault
	for {
		e, ok := w.next(ctx, nil)
		if !ok {
			return nil
		}
		if e.Func != history.Read || e.Type != history.OK || !w.holds(e.Process) || e.Time < quietUntil {
			continue
		}
		hold := forPause(ctx, env)
		if !env.PauseFixed {
			hold = func() { w.awaitTakeover(ctx, e.Process, takeoverLeases*env.TTL) }
		}
		if err := fault(e.Process, hold); err != nil {
			return err
		}
		// Let the released client finish and others make progress before the next fault.
		sleep(ctx, env.Interval)
		quietUntil = history.Now()
	}
}

func (pauseHolder) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// pauseClient freezes a random lock client on a seeded schedule, holder or not.
type pauseClient struct{ anywhere }

func (pauseClient) Name() string { return "pause-client" }

func (pauseClient) Run(ctx context.Context, env Env) error {
	return schedule(ctx, env, func(rng *rand.Rand) error {
		running := env.Workers.Processes()
		return pauseWorker(ctx, env, "pause-client", running[rng.Intn(len(running))], forPause(ctx, env))
	})
}

func (pauseClient) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// pauseNode freezes a random lock-service node's server from outside its container (PID 1
// ignores SIGSTOP sent from inside its own namespace).
type pauseNode struct{ anywhere }

func (pauseNode) Name() string { return "pause-node" }

func (pauseNode) Run(ctx context.Context, env Env) error {
	nodes := env.Nodes.Names()
	return schedule(ctx, env, func(rng *rand.Rand) error {
		node := nodes[rng.Intn(len(nodes))]
		if err := env.Nodes.Signal(ctx, node, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("pause node %s: %w", node, err)
		}
		record(env, history.Start, "pause-node", node)
		sleep(ctx, env.Pause)
		// The run's context may be over; the node must be thawed regardless.
		err := env.Nodes.Signal(context.WithoutCancel(ctx), node, syscall.SIGCONT)
		record(env, history.Stop, "pause-node", node)
		return err
	})
}

func (pauseNode) Heal(ctx context.Context, env Env) error {
	var errs []error
	for _, node := range env.Nodes.Names() {
		errs = append(errs, env.Nodes.Signal(ctx, node, syscall.SIGCONT))
	}
	return errors.Join(errs...)
}

func (pauseHolder) Hazard() history.Hazard { return history.GrantedInPause }
func (pauseClient) Hazard() history.Hazard { return history.GrantedInPause }

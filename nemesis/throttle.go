package nemesis

import (
	"context"
	"errors"
	"syscall"

	"github.com/lockbreaker/lockbreaker/history"
)

// throttleHolder is a slow holder, not a stopped one (issue 37): where pause-holder freezes
// a holder, this one starves it, right after its read, to 1% of a CPU (cpucap.Quota per
// cpucap.Period) and lets it run. Its keepalive goroutine or heartbeat thread still runs,
// but late, as on an overloaded host or in a container with a tiny CPU limit; so does its
// critical section. It stays throttled as long as pause-holder would keep it stopped
// (afterHolderReads: until another client has taken the lock over, at most five leases, or
// a --pause the user gave). Its hazard is the takeover: another client granted the lock
// while the throttled one still held it.
//
// A quota starves only a process that wants more CPU than it gets, so the holders of its
// runs work busily (Needs.BusyHolders): their work is CPU work that allocates, on one
// processor. Asleep through its work, an etcd holder kept its lease on 1% of a CPU in every
// run; busy, its collector's mark assists hold back the keepalive (docs/measurements.md).
type throttleHolder struct{ anywhere }

func init() { register(func() kind { return throttleHolder{} }) }

func (throttleHolder) Kind() history.FaultKind { return history.ThrottleHolder }

func (throttleHolder) Needs() Needs { return Needs{BusyHolders: true, CPUCaps: true} }

func (throttleHolder) Run(ctx context.Context, env Env) error {
	t, ok := env.Workers.(Throttler)
	if !ok {
		return errors.New("the lock clients cannot be throttled")
	}
	return afterHolderReads(ctx, env, func(w *watcher, p int, hold func()) error {
		stop := w.seeTakeovers(env, history.ThrottleHolder.Name, history.GrantedInThrottle, p)
		defer stop()
		return w.throttleWorker(env, t, p, hold)
	})
}

// throttleWorker throttles lock client p and records it, continues p if it stopped itself
// for the watcher (nextReader: the throttle is recorded from when it stopped), holds the
// throttle for as long as hold takes, and gives p its CPU back however hold ended.
func (w *watcher) throttleWorker(env Env, t Throttler, p int, hold func()) (err error) {
	if err := t.Throttle(p); err != nil {
		return err // a p that stopped itself is let go by the caller
	}
	defer func() {
		err = errors.Join(err, t.Unthrottle())
		record(env, history.Stop, history.ThrottleHolder.Name, history.TargetOfClient(p))
	}()
	if w.take(env, history.ThrottleHolder, p) {
		if err := env.Workers.Signal(p, syscall.SIGCONT); err != nil {
			return err
		}
	}
	hold()
	return nil
}

// Heal gives every client its CPU back and continues any that stopped itself for a fault.
func (throttleHolder) Heal(_ context.Context, env Env) error {
	t, ok := env.Workers.(Throttler)
	if !ok {
		return nil
	}
	return errors.Join(t.Unthrottle(), resumeAllWorkers(env))
}

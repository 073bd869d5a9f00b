package nemesis

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// throttleHolder is a slow holder, not a stopped one (issue 37): where pause-holder freezes
// a holder, this one starves it, right after its read, to 1% of a CPU and lets it run. Its
// keepalive goroutine or heartbeat thread still runs, but late, as on an overloaded host or
// in a container with a tiny CPU limit; so does its critical section. Each lease the
// holder keeps the lock meanwhile, its share is lowered a step (Throttler.Tighten, down to
// 0.1%), so that starving it is a property of the holder, not of how fast the CPU is: a
// fast machine's holder that rides out 1% meets less. It stays throttled as long as
// pause-holder would keep it stopped (afterHolderReads: until another client has taken the
// lock over, at most five leases, or a --pause the user gave), and the fault's stop says
// the share it had reached. Its hazard is the takeover: another client granted the lock
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
	share := firstShare
	defer func() {
		err = errors.Join(err, t.Unthrottle())
		recordDetail(env, history.Stop, history.ThrottleHolder.Name, map[string]string{shareDetail: share}, history.TargetOfClient(p))
	}()
	if w.take(env, history.ThrottleHolder, p) {
		if err := env.Workers.Signal(p, syscall.SIGCONT); err != nil {
			return err
		}
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		hold()
	}()
	tick := time.NewTicker(env.TTL)
	defer tick.Stop()
	for {
		select {
		case <-held:
			return nil
		case <-tick.C:
			now, tightened, err := t.Tighten()
			if err != nil {
				<-held
				return err
			}
			if tightened {
				share = now
			}
		}
	}
}

// firstShare is the share a throttled holder starts at; shareDetail the detail of a
// throttle's stop that says the share it had reached.
const (
	firstShare  = "1% of a CPU"
	shareDetail = "share"
)

// Heal gives every client its CPU back and continues any that stopped itself for a fault.
func (throttleHolder) Heal(_ context.Context, env Env) error {
	t, ok := env.Workers.(Throttler)
	if !ok {
		return nil
	}
	return errors.Join(t.Unthrottle(), resumeAllWorkers(env))
}

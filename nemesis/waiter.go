package nemesis

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// pauseWaiter freezes a client in its acquire: one that has waited behind another client's
// grant for a tenth of a TTL (by then its request is in line at the service: a key, a
// sequential node) is stopped with SIGSTOP, and kept stopped until its lease has run out and
// another client has been granted the lock after that, at most five leases; then it goes on.
// Its lease is the one its client keeps alive while it waits: the TTL, or the lease the grants
// state they hold (history.LeaseTTL: etcd's count whole seconds and have a minimum), whichever
// is longer; the frozen client renewed it last before it was stopped, so it has run out that
// long after. That grant is its hazard (waiter-lapsed), recorded with how long the waiter had
// been frozen and its lease. A correct lock refuses the thawed waiter, or lets it wait its turn
// again; etcd 3.4's lock, whose waiter only waits for the keys before its own to go and never
// looks whether its own went with its lease, tells it that it holds the lock (Jepsen's etcd
// 3.4.3 analysis, etcd#11456): two holders.
type pauseWaiter struct{ anywhere }

func init() { register(func() kind { return pauseWaiter{} }) }

func (pauseWaiter) Kind() history.FaultKind { return history.PauseWaiter }

func (pauseWaiter) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	for {
		p, ok := w.nextWaiter(ctx, env.TTL/10)
		if !ok {
			return nil
		}
		if err := w.freezeWaiter(ctx, env, p); err != nil {
			return err
		}
		if !w.wait(ctx, env.Interval) {
			return nil
		}
	}
}

func (pauseWaiter) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// nextWaiter waits until a client has waited for the lock for settle while another client
// holds it, and returns the one that has waited longest; false once ctx ends.
func (w *watcher) nextWaiter(ctx context.Context, settle time.Duration) (int, bool) {
	for {
		p, since, ok := w.longestWaiter()
		if !ok {
			if _, ok := w.next(ctx, nil); !ok {
				return 0, false
			}
			continue
		}
		left := untilTime(since + settle.Nanoseconds())
		if left <= 0 {
			return p, true
		}
		timer := time.NewTimer(left)
		_, ok = w.next(ctx, timer.C)
		timer.Stop()
		if !ok && ctx.Err() != nil {
			return 0, false
		}
	}
}

// longestWaiter is the client whose acquire, still under way while another client holds the
// lock, was invoked first, and when.
func (w *watcher) longestWaiter() (p int, since int64, ok bool) {
	behind := maps.Clone(w.waiting)
	maps.DeleteFunc(behind, func(q int, _ int64) bool {
		others := len(w.holding)
		if w.holds(q) {
			others--
		}
		return others == 0
	})
	p, ok = longestWaiting(behind)
	return p, behind[p], ok
}

// freezeWaiter stops waiter p until its lease has run out and another client has been
// granted the lock after that (its hazard), at most five leases, and lets it go on. One
// whose acquire came back as it was stopped is let go at once.
func (w *watcher) freezeWaiter(ctx context.Context, env Env, p int) error {
	lease := w.waiterLease(env.TTL)
	thaw, err := w.stopWorker(env, history.PauseWaiter, p)
	if err != nil {
		return err
	}
	frozen := history.Now()
	w.catchUp()
	if _, waiting := w.waiting[p]; !waiting {
		return thaw()
	}
	lapsed := frozen + lease.Nanoseconds()
	grantedAfter := func() bool { return w.last.Process != p && w.last.Time >= lapsed }
	if w.waitUntil(ctx, takeoverLeases*lease, grantedAfter) {
		recordHazard(env, history.PauseWaiter.Name, history.WaiterLapsed, w.last.Time,
			map[string]string{"granted": grantText(w.last), history.FrozenForDetail: history.Duration(frozen, w.last.Time).String(),
				history.LeaseDetail: lease.String()},
			history.TargetOfClient(p), history.TargetOfClient(w.last.Process))
	}
	return thaw()
}

// waiterLease is the lease a waiting client keeps alive: ttl, or the longest lease a grant
// seen so far states (history.LeaseTTL), whichever is longer.
func (w *watcher) waiterLease(ttl time.Duration) time.Duration {
	lease := ttl
	for _, g := range append(slices.Collect(maps.Values(w.holding)), w.last) {
		if d, err := time.ParseDuration(g.Detail[history.LeaseTTL]); err == nil {
			lease = max(lease, d)
		}
	}
	return lease
}

package nemesis

import (
	"context"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// delayExtend slows the answers to a holder's extend (--extend-every), the slow path of
// redsync v4.3.0's bug: from a grant on, what the holder receives (from every node, or
// from --link-node's alone; never the storage's, which would hold the holder back from
// asking in time) is delayed by env.Pause until its next extend has been answered, so an
// extend that renews the lease for a TTL is heard of a delay later. Its hazard is that
// danger made real: another client was granted the lock while the holder waited for the
// answer to an extend it asked within its lease. A correct extend then says the lease ran out, or cannot say, and
// the holder does not write; a broken one says yes. On a written schedule, a step's moment
// is when it waits for the next grant from, and its length the delay; its target is that
// grant's holder, whatever the step's.
type delayExtend struct{ onLinks }

func init() { register(func() kind { return delayExtend{} }) }

func (delayExtend) Kind() history.FaultKind { return history.DelayExtend }
func (delayExtend) reaches()                {}
func (delayExtend) onExtends()              {}
func (delayExtend) scripting() Scripting    { return Scripting{} }

func (delayExtend) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	reach := LinkReach{Node: env.Reach.Node, Answers: true, LockOnly: true} // the requests go out at once: the renewal is made
	return w.schedule(ctx, env, func(d draw) error {
		f := LinkFault{Effect: Slow, Latency: d.length, Reach: reach}
		detail := map[string]string{delayDetail: d.length.String(), linkDetail: reach.String()}
		grant, ok := w.awaitAnyGrant(ctx, 2*env.TTL)
		if !ok || grant.Type != history.OK || !w.holds(grant.Process) {
			return nil // nobody granted within two leases, or the holder is done: the next window
		}
		return oneClient(env, grant.Process, history.DelayExtend, detail,
			func(p int) error { return env.Links.Strike(p, f) },
			func(p int) { w.seeGrantsInExtend(ctx, env, p, d.length) })
	})
}

// seeGrantsInExtend follows the history until holder p's next extend has been answered or
// p releases, at most two leases and the delay, twice over, and records the hazard of
// delay-extend for each other client granted the lock while that extend waited, if it was
// asked within p's lease: one asked later renewed nothing, and is rightly refused.
func (w *watcher) seeGrantsInExtend(ctx context.Context, env Env, p int, delay time.Duration) {
	stop := func() {}
	defer func() { stop() }()
	timer := time.NewTimer(2 * (2*env.TTL + delay))
	defer timer.Stop()
	for {
		e, ok := w.next(ctx, timer.C)
		switch {
		case !ok:
			return
		case e.Process != p:
		case e.Func == history.Extend && e.Type == history.Invoke:
			if e.Time >= w.leaseEnd(p, env.TTL) {
				return
			}
			stop = w.seeTakeovers(env, history.DelayExtend.Name, history.GrantedInExtend, p)
		case e.Func == history.Extend, e.Func == history.Release:
			return
		}
	}
}

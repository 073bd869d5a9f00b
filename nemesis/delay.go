package nemesis

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// onLinks is embedded by the faults made on the clients' links: they apply to every
// system, since the proxies are the harness's.
type onLinks struct{}

func (onLinks) Needs() Needs { return Needs{Links: true} }

func (onLinks) Heal(_ context.Context, env Env) error {
	if env.Links != nil {
		env.Links.HealLinks()
	}
	return nil
}

// delayClient delays everything one lock client sends by env.Pause, on a seeded schedule,
// for twice that: a slow network between one client and the rest. The client is the one
// just granted the lock, so that its writes meet the delay within its lease (a random one
// when nobody is granted within two TTLs). On a written schedule, it is the step's target,
// delayed by the step's length at the step's moment.
type delayClient struct{ onLinks }

func init() { register(func() kind { return delayClient{} }) }

func (delayClient) Kind() history.FaultKind { return history.Delay }
func (delayClient) reaches()                {}
func (delayClient) scripting() Scripting    { return Scripting{Clients: true} }

// delayDetail is the detail saying how long a delay is.
const delayDetail = "delay"

// Its hazard is slow-network's: a write of the delayed client that reached the storage after
// its lease had run out.
func (delayClient) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(d draw) error {
		p, found := 0, false
		if d.target < 0 {
			grant, ok := w.awaitAnyGrant(ctx, 2*env.TTL)
			if !ok {
				return nil
			}
			p, found = grant.Process, grant.Type == history.OK && slices.Contains(env.Workers.Processes(), grant.Process)
		}
		if !found {
			if p, found = randomClient(env, d); !found {
				return nil // no client running now: the next window may find one
			}
		}
		return oneClient(env, p, history.Delay, reachDetail(env, map[string]string{delayDetail: d.length.String()}),
			func(p int) error {
				return env.Links.Strike(p, LinkFault{Effect: Slow, Latency: d.length, Reach: env.Reach})
			},
			func(p int) { w.seeOverruns(ctx, env, history.Delay, 2*d.length, func(q int) bool { return q == p }) })
	})
}

// linkDetail is the detail saying where a link fault struck, when not on every link.
const linkDetail = "link"

// reachDetail is detail with where env's link faults strike, when that is narrowed.
func reachDetail(env Env, detail map[string]string) map[string]string {
	if where := env.Reach.String(); where != "" {
		detail = maps.Clone(detail)
		if detail == nil {
			detail = map[string]string{}
		}
		detail[linkDetail] = where
	}
	return detail
}

// randomClient picks a running client, the draw's target or at random; false when none runs.
func randomClient(env Env, d draw) (int, bool) {
	running := env.Workers.Processes()
	if d.victims != nil {
		running = slices.DeleteFunc(slices.Clone(d.victims), func(p int) bool { return !slices.Contains(running, p) })
	}
	if len(running) == 0 {
		return 0, false
	}
	return running[d.pick(len(running))], true
}

// oneClient does to process p's links what act does, records the start of a fault of kind
// k with detail, and once during returns, heals the links and records the stop.
func oneClient(env Env, p int, k history.FaultKind, detail map[string]string, act func(p int) error, during func(p int)) error {
	target := history.TargetOfClient(p)
	if err := act(p); err != nil {
		env.Links.HealLinks()
		return fmt.Errorf("%s %s: %w", k.Name, target, err)
	}
	recordDetail(env, history.Start, k.Name, detail, target)
	defer func() {
		env.Links.HealLinks()
		recordDetail(env, history.Stop, k.Name, detail, target)
	}()
	during(p)
	return nil
}

// delayHolder is Kleppmann's delayed packet, the network's version of the holder's GC pause:
// a holder's next storage write, sent within its lease, is held in the network until that
// lease has run out and another client has written, and then delivered. Unfenced, the
// storage takes it over the newer write; fenced, it refuses its stale token. Like
// pause-holder it waits in the history for the takeover (at most five leases), not for a
// guessed length of time; its hazard is the late delivery itself.
type delayHolder struct{ onLinks }

func init() { register(func() kind { return delayHolder{} }) }

func (delayHolder) Kind() history.FaultKind { return history.DelayHolder }

// HoldBound is the longest delay-holder holds a write in the network: a storage client's
// timeout must outlast it, or the write it sent is given up before it is delivered.
func HoldBound(ttl time.Duration) time.Duration { return takeoverLeases * ttl }

func (delayHolder) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	for {
		hold, err := env.Links.HoldNextWrite()
		if err != nil {
			return fmt.Errorf("hold a write: %w", err)
		}
		held, ok := w.awaitHeld(ctx, hold)
		if ok {
			w.delayWrite(ctx, env, held)
		}
		hold.Release()
		if !ok || !w.wait(ctx, env.Interval) {
			return nil
		}
	}
}

// awaitHeld follows the history until hold caught a write; false once ctx ended.
func (w *watcher) awaitHeld(ctx context.Context, hold WriteHold) (HeldWrite, bool) {
	for {
		select {
		case <-ctx.Done():
			return HeldWrite{}, false
		case held := <-hold.Caught():
			return held, true
		case e := <-w.events:
			w.follow(e)
		}
	}
}

// delayWrite keeps a caught write held, when its client sent it within a lease the watcher
// saw granted, until that lease has run out and another client's write was accepted, and
// records the fault and, once both happened, its hazard; the caller then lets it go. The
// write's invocation may reach the history after the write reached the proxy: it is
// waited for, at most a lease.
func (w *watcher) delayWrite(ctx context.Context, env Env, held HeldWrite) {
	p := held.Process
	// A holder granted before the watch began is not one it can judge: let it go at once.
	if !w.waitUntil(ctx, env.TTL, func() bool { return w.writing[p] }) || !w.holds(p) {
		return
	}
	grant, end := w.holding[p], w.leaseEnd(p, env.TTL)
	if held.At >= end {
		return // sent after its lease: not the delayed write
	}
	target := history.TargetOfClient(p)
	detail := map[string]string{"write": fmt.Sprint(held.Value), "holder": grantText(grant)}
	env.Record(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Time: held.At,
		Fault: history.DelayHolder.Name, Targets: []string{target}, Detail: detail})
	defer recordDetail(env, history.Stop, history.DelayHolder.Name, detail, target)
	var other history.Event
	overtaken := func() bool {
		if history.Now() < end {
			return false
		}
		other = w.lastWrite
		return other.Value != nil && other.Process != p && other.Time > held.At
	}
	if !w.waitUntil(ctx, HoldBound(env.TTL), overtaken) {
		return
	}
	recordHazard(env, history.DelayHolder.Name, history.LateWrite, history.Now(),
		map[string]string{"holder": grantText(grant), "held": history.Duration(held.At, history.Now()).String(),
			"written": fmt.Sprintf("%s wrote %d", history.TargetOfClient(other.Process), *other.Value)},
		target, history.TargetOfClient(other.Process))
}

// slowNetwork slows everything every client sends for env.Pause on its schedule: a
// congested network, not a broken one. Each window begins as a client is granted the lock
// (or, when none is within two TTLs, then), so that a holder meets the slowness between
// its grant and its write, and draws its latency, seeded, between a sixteenth of the TTL
// and twice the TTL, with half as much jitter, so that a run meets both slowness a lock rides out
// and slowness that eats a lease. Its hazard is the danger slowness makes: a holder's write
// reaching the storage after its lease (the validity its client stated, else the TTL from
// its grant) had run out, while the network was slow.
type slowNetwork struct{ onLinks }

func init() { register(func() kind { return slowNetwork{} }) }

func (slowNetwork) Kind() history.FaultKind { return history.SlowNetwork }
func (slowNetwork) reaches()                {}

// slowness is a window's latency and the jitter around it.
func slowness(ttl time.Duration, rng *rand.Rand) (latency, jitter time.Duration) {
	latency = ttl/16 + time.Duration(rng.Int63n(int64(2*ttl-ttl/16)+1))
	return latency, latency / 2
}

func (slowNetwork) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(rng draw) error {
		latency, jitter := slowness(env.TTL, rng.Rand)
		if _, ok := w.awaitAnyGrant(ctx, 2*env.TTL); !ok {
			return nil
		}
		for _, p := range env.Workers.Processes() {
			if err := env.Links.Strike(p, LinkFault{Effect: Slow, Latency: latency, Jitter: jitter, Reach: env.Reach}); err != nil {
				env.Links.HealLinks()
				return fmt.Errorf("slow %s: %w", history.TargetOfClient(p), err)
			}
		}
		detail := reachDetail(env, map[string]string{delayDetail: latency.String(), "jitter": jitter.String()})
		recordDetail(env, history.Start, history.SlowNetwork.Name, detail, Clients)
		w.seeOverruns(ctx, env, history.SlowNetwork, env.Pause, func(int) bool { return true })
		env.Links.HealLinks()
		recordDetail(env, history.Stop, history.SlowNetwork.Name, detail, Clients)
		return nil
	})
}

// awaitAnyGrant follows the history until a client is granted the lock, at most within,
// and returns its grant (none when within passed first); false only once ctx ended.
func (w *watcher) awaitAnyGrant(ctx context.Context, within time.Duration) (history.Event, bool) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		e, ok := w.next(ctx, timer.C)
		if !ok {
			return history.Event{}, ctx.Err() == nil
		}
		if e.Func == history.Acquire && e.Type == history.OK {
			return e, true
		}
	}
}

// seeOverruns follows the history for d and records the hazard of k, which slowed the
// clients slowed says, for each write of theirs the storage applied after its holder's
// lease had run out.
func (w *watcher) seeOverruns(ctx context.Context, env Env, k history.FaultKind, d time.Duration, slowed func(p int) bool) {
	w.each(ctx, d, func(e history.Event) {
		if e.Func != history.Write || !e.IsCompletion() || e.EffectFrom == 0 || !w.holds(e.Process) || !slowed(e.Process) {
			return
		}
		if end := w.leaseEnd(e.Process, env.TTL); e.EffectFrom > end {
			recordHazard(env, k.Name, k.Hazard, e.EffectFrom,
				map[string]string{"holder": grantText(w.holding[e.Process]), "late": history.Duration(end, e.EffectFrom).String()},
				history.TargetOfClient(e.Process))
		}
	})
}

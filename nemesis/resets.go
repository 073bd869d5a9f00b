package nemesis

import (
	"context"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// The connections that break instead of slowing: one client's links, on the schedule,
// reset what it sends (reset-client) or let nothing through and then close (timeout-client),
// for env.Pause. Neither delivers what it broke: a request caught is dropped, and the client
// reads an error where its answer should be, an operation whose outcome it cannot know.
// That is what they exist for: the checkers must judge such operations as indeterminate,
// as they judge a killed worker's.

// resetClient resets one client's connections as soon as it sends on them.
type resetClient struct{ onLinks }

func init() { register(func() kind { return resetClient{} }) }

func (resetClient) Kind() history.FaultKind { return history.ResetClient }
func (resetClient) reaches()                {}

func (resetClient) Run(ctx context.Context, env Env) error {
	return breakOneClient(ctx, env, history.ResetClient, nil, LinkFault{Effect: Reset})
}

// timeoutClient silences one client's connections, which the proxies close after a while
// (silence).
type timeoutClient struct{ onLinks }

func init() { register(func() kind { return timeoutClient{} }) }

func (timeoutClient) Kind() history.FaultKind { return history.TimeoutClient }
func (timeoutClient) reaches()                {}

// closedAfterDetail is the detail saying how long a silenced connection stays open.
const closedAfterDetail = "closed after"

func (timeoutClient) Run(ctx context.Context, env Env) error {
	after := silence(env.TTL, env.Pause)
	return breakOneClient(ctx, env, history.TimeoutClient, map[string]string{closedAfterDetail: after.String()}, LinkFault{Effect: Silence, CloseAfter: after})
}

// silence is how long timeout-client's proxies leave a connection unanswered before they
// close it: half the lease or half the window, whichever is shorter, and at least the
// millisecond the proxies count in (under it, a connection would stay silent until the
// heal). Within the lease, so that a holder whose request went into the silence hears of
// it while it still holds the lock: the fault makes operations of unknown outcome, not
// leases run out (delay's business). Within the window, so that the proxies close
// connections on their own timer, as a firewall drops a flow it gave up on, and not only
// at the heal.
func silence(ttl, window time.Duration) time.Duration {
	return max(min(ttl, window)/2, time.Millisecond)
}

// breakOneClient breaks one client's links at a time as b says, for env.Pause each, and
// records its hazard for each operation of that client that ended indeterminate meanwhile.
func breakOneClient(ctx context.Context, env Env, k history.FaultKind, detail map[string]string, f LinkFault) error {
	w := watch(env.Subscribe())
	f.Reach, detail = env.Reach, reachDetail(env, detail)
	return w.schedule(ctx, env, func(rng draw) error {
		p, ok := randomClient(env, rng)
		if !ok {
			return nil // no client running now: the next window may find one
		}
		return oneClient(env, p, k, detail, func(p int) error { return env.Links.Strike(p, f) },
			func(p int) { w.seeUnknownOutcomes(ctx, env, k, p, env.Pause) })
	})
}

// seeUnknownOutcomes follows the history for d and records k's hazard for each operation of
// process p that ended indeterminate. One that ends after the heal is not counted: the
// hazard is what the broken links did, not a timeout that came later.
func (w *watcher) seeUnknownOutcomes(ctx context.Context, env Env, k history.FaultKind, p int, d time.Duration) {
	w.each(ctx, d, func(e history.Event) {
		if e.Process == p && e.Type == history.Info && e.IsCompletion() {
			recordHazard(env, k.Name, history.OutcomeUnknown, e.Time, map[string]string{"operation": string(e.Func)},
				history.TargetOfClient(p))
		}
	})
}

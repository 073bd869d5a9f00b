package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// outage takes the whole lock service down, as a power cut of its racks would: once a
// client holds the lock and another has waited behind it for a tenth of a TTL (both then
// have their sessions and lock nodes at the service), it kills every node's server, keeps
// them down for env.Pause, and starts them again on what their disks kept. Down past the
// lease, the clients see their sessions run out on their side and open new ones, while the
// servers, started again, restore the old sessions from disk with a fresh timeout: for one
// more lease the old sessions' lock nodes stand beside the new ones. A correct lock then
// grants only on a node of its client's live session; Curator 5.4's LeaderLatch leads on
// the node of its lost session, and once the server expires that session another client
// leads too (CURATOR-696).
//
// Its hazard (granted-after-outage) is that moment made real: the nodes were down longer
// than the lease, and the service granted the lock within a lease of the first node's
// return (the servers restore the sessions as soon as a quorum serves, and expire them a
// lease later); each such grant is one.
type outage struct{}

func init() { register(func() kind { return outage{} }) }

func (outage) Kind() history.FaultKind { return history.Outage }

func (outage) Needs() Needs { return Needs{Restarts: true} }

func (o outage) Run(ctx context.Context, env Env) error {
	r, err := restarterOf(env)
	if err != nil {
		return err
	}
	w := watch(env.Subscribe())
	for {
		if _, ok := w.nextWaiter(ctx, env.TTL/10); !ok {
			return nil
		}
		if err := o.strike(ctx, env, w, r); err != nil {
			return err
		}
		if !w.wait(ctx, env.Interval) {
			return nil
		}
	}
}

// strike kills every node, keeps them down for env.Pause (past the run's end too: only an
// interrupt cuts it short), starts them again, and records the hazard for each grant within
// a lease of the first node's return after the nodes were down longer than a lease.
func (outage) strike(ctx context.Context, env Env, w *watcher, r Restarter) error {
	bg := context.WithoutCancel(ctx)
	nodes := env.Nodes.Names()
	lease := w.waiterLease(env.TTL)
	if err := eachNode(nodes, func(node string) error { return r.Kill(bg, node) }); err != nil {
		return err // Heal starts again the nodes it killed
	}
	down := time.Now() // durations on Go's clock, which a test's bubble fakes; event times on the history's
	recordDetail(env, history.Start, history.Outage.Name, map[string]string{history.DownForDetail: env.Pause.String()}, nodes...)
	if !w.wait(ctx, env.Pause) {
		stayDown(env, env.Pause-time.Since(down))
	}
	// The first node serving again is a quorum's return (one that serves alone serves at
	// once): from then the restored sessions' lease runs.
	var first sync.Once
	var back int64
	var downFor time.Duration
	err := eachNode(nodes, func(node string) error {
		err := r.Restart(bg, node)
		if err == nil {
			first.Do(func() { back, downFor = history.Now(), time.Since(down) })
		}
		return err
	})
	if err != nil {
		return err // a node never served again: the outage never healed
	}
	record(env, history.Stop, history.Outage.Name, nodes...)
	if downFor <= lease {
		return nil
	}
	// Every grant while the restored sessions may stand. Followed past the run's end too,
	// while its last clients finish: a lease at most.
	w.each(bg, lease-(time.Since(down)-downFor), func(e history.Event) {
		if e.Func == history.Acquire && e.Type == history.OK && e.Time >= back {
			recordHazard(env, history.Outage.Name, history.GrantedAfterOutage, e.Time,
				map[string]string{"granted": grantText(e), history.DownForDetail: downFor.Round(time.Millisecond).String(),
					history.SinceBackDetail: history.Duration(back, e.Time).String(), history.LeaseDetail: lease.String()},
				history.TargetOfClient(e.Process))
		}
	})
	return nil
}

// eachNode calls do for every node at once (a service down or back as a whole, not node by
// node: a quorum restarted one server at a time would never serve) and joins their errors.
func eachNode(nodes []string, do func(node string) error) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Go(func() {
			if err := do(node); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", node, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (outage) Heal(ctx context.Context, env Env) error { return restartKilled(ctx, env) }

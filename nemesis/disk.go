package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Faults on the nodes' disks, which hold what a server wrote until it syncs it (Disks): a
// killed server's writes survive in its disk's cache as they do in a machine's page cache,
// so only a power loss drops them; and a disk can sync slowly while it reads and writes at
// once, as a disk stuck in its flushes does.

// powerLoss is kill-node where the nodes lose their power rather than their server alone:
// aimed, held and told as kill-node's crashes are, but every write a node's disk held
// unsynced is gone when it starts again. A Redis that syncs its log once a second
// (aof-everysec) then comes back without a grant it made within the second, and a Redlock
// whose majority lost it grants the lock again; one that syncs before it answers
// (aof-always) keeps it. Its hazard is kill-node's (restart-served), and each power cut's
// start says what its node lost.
type powerLoss struct{}

func init() { register(func() kind { return powerLoss{} }) }

func (powerLoss) Kind() history.FaultKind { return history.PowerLoss }

func (powerLoss) Needs() Needs { return Needs{Restarts: true, Disks: true} }

func (powerLoss) Run(ctx context.Context, env Env) error {
	disks, err := disksOf(env)
	if err != nil {
		return err
	}
	return killNode{}.run(ctx, env, downing{kind: history.PowerLoss,
		down: func(ctx context.Context, env Env, _ Restarter, node string) (map[string]string, error) {
			off := disks.PowerOff
			if env.RestartAfter == 0 {
				off = disks.PowerCycle // back at once, as fast as the system can restart it
			}
			lost, err := off(ctx, node)
			return map[string]string{history.LostDetail: lost}, err
		}})
}

func (powerLoss) Heal(ctx context.Context, env Env) error { return restartKilled(ctx, env) }

// slowDisk stalls every sync on one node's disk while a client holds the lock, for
// env.Pause (twice the TTL by default, past the lease): the leader's, where the system has
// one, else the primary's, else a node that granted the lock. Reads and writes answer at
// once, so the node looks alive to its peers and its clients while nothing it must make
// durable (a log entry, a lease's renewal) is. Its hazard (sync-stalled-past-lease) is a
// held lease running out while the node's syncs stalled: a lock that depends on the node
// must then hand it on only once the holder's lease is over, or keep it.
type slowDisk struct{}

func init() { register(func() kind { return slowDisk{} }) }

func (slowDisk) Kind() history.FaultKind { return history.SlowDisk }

func (slowDisk) Needs() Needs { return Needs{Disks: true} }

func (slowDisk) Run(ctx context.Context, env Env) error {
	disks, err := disksOf(env)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(env.Seed))
	w := watch(env.Subscribe())
	for {
		if !w.waitUntil(ctx, time.Duration(1<<62), func() bool { return len(w.holding) > 0 }) {
			return nil
		}
		holder := slices.Sorted(maps.Keys(w.holding))[0]
		grant, end := w.holding[holder], w.leaseEnd(holder, env.TTL)
		node := stalledNode(ctx, env, grant, rng)
		if err := disks.SlowSync(context.WithoutCancel(ctx), node, env.Pause); err != nil {
			return fmt.Errorf("slow the disk of node %s: %w", node, err)
		}
		recordDetail(env, history.Start, history.SlowDisk.Name, map[string]string{"sync": env.Pause.String(), "holder": grantText(grant)}, node)
		stalled, released := history.Now(), int64(0)
		// A release that waits for the stalled disk has not let the lock go yet.
		w.each(ctx, env.Pause, func(e history.Event) {
			if e.Process == holder && e.Func == history.Release && e.IsCompletion() && released == 0 {
				released = e.Time
			}
		})
		healErr := disks.SlowSync(context.WithoutCancel(ctx), node, 0)
		record(env, history.Stop, history.SlowDisk.Name, node)
		if termEndedInStall(end, stalled, history.Now(), released) {
			recordHazard(env, history.SlowDisk.Name, history.SyncStalledPastLease, end,
				map[string]string{"grant": grantText(grant), "stalled": history.Duration(stalled, end).Round(time.Millisecond).String()},
				node, history.TargetOfClient(holder))
		}
		if healErr != nil {
			return healErr
		}
		if !w.wait(ctx, env.Interval) {
			return nil
		}
	}
}

func (slowDisk) Heal(ctx context.Context, env Env) error {
	disks, err := disksOf(env)
	if err != nil {
		return nil // nothing could have been slowed
	}
	return eachNode(env.Nodes.Names(), func(node string) error { return disks.SlowSync(ctx, node, 0) })
}

// termEndedInStall says whether a lease's term that ends at end ended within a stall from
// stalled to healed while its holder, whose release of it completed at released (0: not
// yet), still held it: the hazard of slow-disk.
func termEndedInStall(end, stalled, healed, released int64) bool {
	return stalled < end && end <= healed && (released == 0 || released > end)
}

// stalledNode is the node whose disk a slow-disk fault stalls: the leader, else the
// primary, else a node that granted the held grant (any, when it names none).
func stalledNode(ctx context.Context, env Env, grant history.Event, rng *rand.Rand) string {
	if l, ok := env.Nodes.(Leaders); ok {
		if leader, err := l.Leader(ctx); err == nil && leader != "" {
			return leader
		}
	}
	if r, err := rolesOf(env); err == nil {
		if roles, err := r.Roles(ctx); err == nil {
			if primary := system.OnePrimary(roles); primary != "" {
				return primary
			}
		}
	}
	nodes := env.Nodes.Names()
	if granted := grantedBy(grant, nodes, false); len(granted) > 0 {
		nodes = granted
	}
	return nodes[rng.Intn(len(nodes))]
}

func disksOf(env Env) (Disks, error) {
	d, ok := env.Nodes.(Disks)
	if !ok {
		return nil, errors.New("this cluster's nodes keep their data on no disk a fault can reach")
	}
	return d, nil
}

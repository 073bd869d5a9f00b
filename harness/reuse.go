package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/system"
)

// Clusters keeps a started cluster of containers for the next run on the same nodes, so
// that a suite of runs on one system starts its containers once (Runner.Clusters). Reuse
// is sound only when nothing of one run can reach the next:
//   - the same system and the same nodes: size, TTL (ZooKeeper sizes its session timeouts
//     by it) and every other setting the nodes were started with;
//   - started with every lever the next run's nemesis pulls (NewClusters learns them from
//     the specs to come, so the first run starts the cluster with all of them);
//   - healed without error after the run before (clocks reset, partitions removed,
//     nodes continued and started again), and serving again before the next one starts;
//   - a lock key no run on it has used: keys left by the last run (a lease, a fencing
//     counter, a znode) are not flushed but never read again.
//
// A cluster that is not reused is stopped. At most Keep clusters are kept at a time (one
// per run going side by side), and Close stops them: until Close, a kept cluster outlives
// the Run that started it (a killed process leaves it to the next start's sweep, as any
// run does). Systems the harness serves itself start in no time and are never kept.
type Clusters struct {
	// Keep is how many idle clusters are kept; 0 or 1: one.
	Keep int

	mu sync.Mutex
	// faults are the nemeses the runs of each shape will ask for.
	faults map[shape][]string
	// idle are the clusters no run holds, the most recently given back last.
	idle []*kept
}

// shape groups the runs that may share a cluster, for planning its levers; whether they
// can is sameNodes's to say.
type shape struct {
	system string
	nodes  int
	ttl    time.Duration
}

// NewClusters makes a pool for runs of the given specs; runs of other specs may use it
// too, and get a cluster with the levers their own nemesis needs.
func NewClusters(specs ...Spec) *Clusters {
	cs := &Clusters{faults: map[shape][]string{}}
	for _, s := range specs {
		if sh, err := shapeOf(s); err == nil {
			cs.faults[sh] = append(cs.faults[sh], s.Nemesis...)
		}
	}
	return cs
}

// shapeOf is the shape of a spec's cluster.
func shapeOf(s Spec) (shape, error) {
	sys, err := system.Lookup(s.System)
	if err != nil {
		return shape{}, err
	}
	nodes, err := sys.Check(s.Nodes)
	return shape{system: s.System, nodes: nodes, ttl: s.TTL.Std()}, err
}

// needs are the levers that the nemeses named pull on a cluster, all together.
func needs(faults ...[]string) nemesis.Needs {
	nem, err := nemesis.New(slices.Concat(faults...))
	if err != nil { // names a spec already refused
		return nemesis.Needs{}
	}
	return nem.Needs().OfCluster()
}

// kept is a cluster of containers lent to one run at a time.
type kept struct {
	*containers.Cluster
	pool   *Clusters
	system string
	setup  clusterSetup
	faults []string // the nemeses it was started for
	keys   []string // every lock key a run on it has used
	broken bool     // a heal failed, or a node did not serve again: what the last run did may still be in force
}

// Heal heals the cluster and remembers whether that worked.
func (k *kept) Heal(ctx context.Context) error {
	err := k.Cluster.Heal(ctx)
	if err != nil || len(k.Gone()) > 0 {
		k.broken = true
	}
	return err
}

// Stop gives the cluster back to the pool, or stops it when it cannot be reused.
func (k *kept) Stop(ctx context.Context) error {
	if k.broken {
		return k.Cluster.Stop(ctx)
	}
	k.pool.mu.Lock()
	defer k.pool.mu.Unlock()
	if len(k.pool.idle) >= max(k.pool.Keep, 1) { // more runs overlapped than are kept
		return k.Cluster.Stop(ctx)
	}
	k.pool.idle = append(k.pool.idle, k)
	return nil
}

// start lends a run a cluster of sys: the kept one when it is sound to reuse, else a new
// one. A nil pool starts a cluster for the run alone.
func (cs *Clusters) start(ctx context.Context, sys system.System, spec Spec, setup clusterSetup) (Cluster, error) {
	if cs == nil || !setup.place.keeps() {
		return setup.place.start(ctx, sys, setup)
	}
	sh, err := shapeOf(spec)
	if err != nil {
		return nil, err
	}
	setup.nodes = sh.nodes
	cs.mu.Lock()
	idle := cs.take(func(k *kept) bool { return k.unfit(sys.Name, setup, spec.Nemesis, spec.Key) == "" })
	faults := slices.Concat(spec.Nemesis, cs.faults[sh])
	cs.mu.Unlock()

	if idle != nil {
		if reason := idle.unfit(sys.Name, setup, spec.Nemesis, spec.Key); reason != "" {
			fmt.Fprintf(setup.progress, "stopping the %s cluster kept from the last run: %s\n", idle.system, reason)
			if err := idle.Cluster.Stop(context.WithoutCancel(ctx)); err != nil {
				return nil, err
			}
		} else if err := idle.serving(ctx, sys); err != nil {
			fmt.Fprintf(setup.progress, "stopping the %s cluster kept from the last run: %v\n", idle.system, err)
			if err := idle.Cluster.Stop(context.WithoutCancel(ctx)); err != nil {
				return nil, err
			}
		} else {
			fmt.Fprintf(setup.progress, "reusing the %s cluster of the last run (key %s is new to it)\n", sys.Name, spec.Key)
			idle.keys = append(idle.keys, spec.Key)
			return idle, nil
		}
	}
	setup.needs = needs(faults)
	c, err := setup.place.start(ctx, sys, setup)
	if err != nil {
		return nil, err
	}
	cc, ok := c.(*containers.Cluster)
	if !ok { // not a cluster of containers after all: the run keeps it to itself
		return c, nil
	}
	return &kept{Cluster: cc, pool: cs, system: sys.Name, setup: setup, faults: faults, keys: []string{spec.Key}}, nil
}

// take takes an idle cluster out of the pool: the last one given back that fits the run;
// else, when the pool is full, the oldest, which the run stops to make room; else nil.
// With mu held.
func (cs *Clusters) take(fits func(*kept) bool) *kept {
	i := -1
	for j, k := range cs.idle {
		if fits(k) {
			i = j
		}
	}
	if i < 0 {
		if len(cs.idle) < max(cs.Keep, 1) {
			return nil
		}
		i = 0
	}
	k := cs.idle[i]
	cs.idle = slices.Delete(cs.idle, i, i+1)
	return k
}

// unfit says why the cluster cannot serve a run of system set up so, with the nemeses
// faults and the lock key key; "" when it can.
func (k *kept) unfit(system string, setup clusterSetup, faults []string, key string) string {
	if k.system != system {
		return "the next run wants another system"
	}
	return k.unfitFor(setup, faults, key)
}

// unfitFor is unfit on the cluster's own system.
func (k *kept) unfitFor(setup clusterSetup, faults []string, key string) string {
	switch {
	case !sameNodes(k.setup, setup):
		return "the next run wants nodes of another size, TTL or settings"
	case needs(k.faults, faults) != needs(k.faults):
		return "the next run's nemesis pulls a lever it was started without"
	case slices.Contains(k.keys, key):
		return fmt.Sprintf("a run on it already used the lock key %s", key)
	}
	return ""
}

// sameNodes says whether clusters set up as a and b run the same nodes: every setting
// but the run's name, its logs and the levers it needs. Clusters on machines are never
// kept (Clusters.start).
func sameNodes(a, b clusterSetup) bool {
	return a.nodes == b.nodes && a.ttl == b.ttl && a.servers == b.servers
}

// serving waits until every node answers again, as after a start: a ZooKeeper ensemble
// healed from a partition may still be electing its leader. A replicated cluster must
// also have one primary again: an old primary started after a failover serves as a
// second one until the monitors turn it into a replica, and a run begun then would see
// the last run's failover still settling (and the monitors refusing another one).
func (k *kept) serving(ctx context.Context, sys system.System) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if sys.Replicated {
		if err := k.onePrimary(ctx); err != nil {
			return err
		}
	}
	return k.WaitNodes(ctx)
}

// onePrimary waits until exactly one node is primary and every other a replica.
func (k *kept) onePrimary(ctx context.Context) error {
	for {
		roles, err := k.Roles(ctx)
		if err == nil && system.OnePrimary(roles) != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no single primary again after the last run (roles %v, %v)", roles, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops the kept clusters.
func (cs *Clusters) Close(ctx context.Context) error {
	cs.mu.Lock()
	idle := cs.idle
	cs.idle = nil
	cs.mu.Unlock()
	var errs []error
	for _, k := range idle {
		errs = append(errs, k.Cluster.Stop(ctx))
	}
	return errors.Join(errs...)
}

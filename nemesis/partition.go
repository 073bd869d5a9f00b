package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Partitions drop packets with iptables inside the nodes, and inside the lock clients'
// own network namespaces when each client has an address of its own (Env.Clients): then a
// grudge can name single clients ("worker-3") beside nodes, and cut a client off the
// storage, whose path from the client does not cross the cluster network. Without those
// addresses every client reaches the nodes from one (the network's gateway), a cut between
// clients and nodes applies to every client at once, and the faults that name single
// clients are refused.

// partition cuts the network on a seeded schedule, in one shape (the kind of its faults: a
// shape's, or the leader's), or a mix of the shapes (history.Partition).
type partition struct{ shape history.FaultKind }

func init() {
	register(func() kind { return partition{history.Partition} })
	register(func() kind { return partition{history.PartitionLeader} })
	for k := range shapes {
		register(func() kind { return partition{k} })
	}
}

func (p partition) Kind() history.FaultKind { return p.shape }

func (p partition) Needs() Needs { return Needs{Network: true, ClientAddrs: clientShapes[p.shape]} }

func (p partition) conditions(sys system.System, nodes int) error {
	switch {
	case p.shape == history.PartitionLeader && !sys.Leader:
		return fmt.Errorf("a %s cluster has no leader to isolate", sys.Name)
	case nodes < 2 && p.shape != history.PartitionClientsFrom && p.shape != history.PartitionClient && p.shape != history.Partition:
		return errors.New("needs at least two nodes to cut apart")
	}
	return nil
}

func (p partition) Run(ctx context.Context, env Env) error {
	net, err := networkOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	leaders, canLead := env.Nodes.(Leaders)
	if p.shape == history.PartitionLeader && !canLead {
		return errors.New("this cluster has no leader to isolate")
	}
	if clientShapes[p.shape] && env.Clients == nil {
		return errSharedAddress
	}
	return schedule(ctx, env, func(rng draw) error {
		shape := p.shape
		if shape == history.Partition {
			kinds := shapeKinds(env.Clients != nil)
			shape = kinds[rng.Intn(len(kinds))]
		}
		if shape != history.PartitionLeader {
			return partitionFor(ctx, env, net, shape, shapes[shape](nodes, clientNames(env), rng.Rand))
		}
		leader, ok := awaitLeader(ctx, leaders, env.Pause)
		if !ok {
			return nil // an election for a whole pause (a heal can set one off): no fault this time
		}
		i := slices.Index(nodes, leader)
		return partitionFor(ctx, env, net, history.PartitionLeader, complete([]string{leader}, without(nodes, i)))
	})
}

// awaitLeader asks for the leader until one answers, for up to d; false when none did.
func awaitLeader(ctx context.Context, leaders Leaders, d time.Duration) (string, bool) {
	deadline := time.Now().Add(d)
	for {
		if leader, err := leaders.Leader(ctx); err == nil {
			return leader, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", false
		}
		sleep(ctx, rolePoll)
	}
}

// partitionFor holds grudge g, a fault of kind k, for env.Pause (or until ctx ends) and
// heals it.
func partitionFor(ctx context.Context, env Env, net Network, k history.FaultKind, g grudge) error {
	if len(g) == 0 {
		return nil // this shape cuts nothing at this cluster size: not a fault
	}
	return cutFor(ctx, env, net, k, g, func() { sleep(ctx, env.Pause) })
}

// cutFor holds grudge g, recorded as a fault of kind k, for as long as hold takes, and
// heals it however hold ended.
func cutFor(ctx context.Context, env Env, net Network, k history.FaultKind, g grudge, hold func()) error {
	fault := k.With(g.String())
	err := cutGrudge(context.WithoutCancel(ctx), env, net, g)
	record(env, history.Start, fault, g.targets()...)
	if err == nil {
		hold()
	}
	err = errors.Join(err, healNetwork(context.WithoutCancel(ctx), env, net))
	record(env, history.Stop, fault, g.targets()...)
	return err
}

func (partition) Heal(ctx context.Context, env Env) error {
	net, err := networkOf(env)
	if err != nil {
		return nil // nothing could have been cut
	}
	return healNetwork(ctx, env, net)
}

func networkOf(env Env) (Network, error) {
	net, ok := env.Nodes.(Network)
	if !ok {
		return nil, errors.New("this cluster cannot partition its nodes")
	}
	return net, nil
}

// partitionHolder cuts the client that has just read the register under the lock off
// every node of the lock service but not off the storage (fromStorage: off the storage
// but not the nodes), until another client has taken the lock and used the storage (at
// most five leases; --pause makes it a fixed length). A holder cut off the lock service
// whose lease or session runs out meanwhile goes on working and writes what it read: the
// case fencing tokens exist for. A holder cut off the storage cannot write at all.
//
// Its hazard is another client's grant while the cut holder is still in its critical
// section. A holder's section (100 ms of work by default) is over long before a lease
// runs out, so, directed (the default), the cut holder is also kept inside it with a
// SIGSTOP (recorded as pause-in-section), as a GC pause would, until the lock has passed
// on; thawed, it finishes its section still cut off, and the cut is healed once it has
// begun to release. The SIGSTOP comes first: a cut is a docker exec in every node, which
// takes longer (200 ms for three etcd members) than the section it must catch. Undirected,
// the cut alone holds, and the hazard occurs only when the holder happens to be slower
// than its lease.
type partitionHolder struct{ fromStorage bool }

func init() {
	register(func() kind { return partitionHolder{} })
	register(func() kind { return partitionHolder{fromStorage: true} })
}

func (p partitionHolder) Kind() history.FaultKind {
	if p.fromStorage {
		return history.PartitionHolderStorage
	}
	return history.PartitionHolder
}

func (p partitionHolder) Needs() Needs { return Needs{Network: !p.fromStorage, ClientAddrs: true} }

func (p partitionHolder) Run(ctx context.Context, env Env) error {
	net, err := clientNetworkOf(env)
	if err != nil {
		return err
	}
	return afterHolderReads(ctx, env, func(w *watcher, holder int, hold func()) error {
		g := complete([]string{history.TargetOfClient(holder)}, env.Nodes.Names())
		if p.fromStorage {
			g = grudge{history.TargetOfClient(holder): {Storage}}
		}
		if env.Undirected {
			return cutFor(ctx, env, net, p.Kind(), g, func() {
				stop := w.seeTakeovers(env, p.Kind().Name, history.GrantedInCut, holder)
				defer stop()
				hold()
			})
		}
		thaw, err := w.stopWorker(env, history.PauseInSection, holder)
		if err != nil {
			return err
		}
		thawed := false
		var thawErr error
		err = cutFor(ctx, env, net, p.Kind(), g, func() {
			stop := w.seeTakeovers(env, p.Kind().Name, history.GrantedInCut, holder)
			defer stop()
			hold()
			thawed, thawErr = true, thaw()
			w.awaitRelease(ctx, holder, takeoverLeases*env.TTL)
		})
		if !thawed { // the cut failed
			thawErr = thaw()
		}
		return errors.Join(err, thawErr)
	})
}

// clientNetworkOf is the network of a cluster whose clients have addresses of their own.
func clientNetworkOf(env Env) (Network, error) {
	if env.Clients == nil {
		return nil, errSharedAddress
	}
	return networkOf(env)
}

func (partitionHolder) Heal(ctx context.Context, env Env) error { return partition{}.Heal(ctx, env) }

// primarySplit puts the primary and a minority of the lock clients on one side, and the
// replicas, the monitors and the other clients on the other, for env.Pause: the monitors
// promote a replica while the old primary goes on granting to the clients on its side
// (split brain), whose grants the old primary forgets when it rejoins as a replica.
//
// Its hazard is two primaries' grants held at once: a client on one side granted the lock
// while a client on the other side held it (two-primaries). It needs no victim kept in its
// critical section: once the monitors have promoted a replica and the clients on its side
// have found it, both sides are granted over and over by their own primary, so the hazard
// comes with any split that outlasts the promotion (a second or two with Sentinel, which
// finds the cut primary down itself: told to promote at once, it takes longer to tell its
// clients; on a busy machine longer still). So a split lasts until two primaries' grants
// were seen held at once, at most five leases; a --pause the user chose, exactly that.
type primarySplit struct{}

func init() { register(func() kind { return primarySplit{} }) }

func (primarySplit) Kind() history.FaultKind { return history.PartitionPrimary }

func (primarySplit) Needs() Needs { return Needs{Network: true, ClientAddrs: true} }

func (primarySplit) suits(sys system.System, nodes int) error {
	if !sys.Replicated || nodes < 2 {
		return fmt.Errorf("a %s cluster of %d nodes has no primary and replica to split", sys.Name, nodes)
	}
	return nil
}

func (p primarySplit) Run(ctx context.Context, env Env) error {
	net, err := clientNetworkOf(env)
	if err != nil {
		return err
	}
	roles, err := rolesOf(env)
	if err != nil {
		return err
	}
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(rng draw) error {
		now, err := roles.Roles(ctx)
		primary := system.OnePrimary(now)
		if err != nil || primary == "" {
			return nil // no answer now, or between primaries (a failover): no split to make now
		}
		g, side := p.grudge(env, primary, rng.Rand)
		return cutFor(ctx, env, net, p.Kind(), g, func() {
			seen := false
			stop := w.seeSplitGrants(env, p.Kind().Name, side, func() { seen = true })
			defer stop()
			if env.PauseFixed {
				w.wait(ctx, env.Pause)
				return
			}
			w.waitUntil(ctx, takeoverLeases*env.TTL, func() bool { return seen })
		})
	})
}

// grudge splits primary and a minority of the clients from the other nodes, the monitors
// and the other clients. side are the processes on the primary's side. The monitors are
// cut off on the primary's side only: the node heals reach the lock nodes, and a
// connection dropped at one end is cut.
func (primarySplit) grudge(env Env, primary string, rng *rand.Rand) (grudge, map[int]bool) {
	var monitors []string
	if m, ok := env.Nodes.(Monitors); ok {
		monitors = m.MonitorNames()
	}
	clients := shuffle(clientNames(env), rng)
	k := minority(len(clients))
	others := slices.DeleteFunc(slices.Clone(env.Nodes.Names()), func(n string) bool { return n == primary })
	g := complete(append([]string{primary}, clients[:k]...), slices.Concat(others, monitors, clients[k:]))
	for _, m := range monitors {
		delete(g, m)
	}
	side := map[int]bool{}
	for _, c := range clients[:k] {
		if p, ok := clientProcess(c); ok {
			side[p] = true
		}
	}
	return g, side
}

// seeSplitGrants records two-primaries, seen by fault, each time a client on one side of a
// split (side: the processes on the old primary's side) is granted the lock while a client
// on the other side holds it, and calls seen, until stop is called.
func (w *watcher) seeSplitGrants(env Env, fault string, side map[int]bool, seen func()) (stop func()) {
	w.granted = func(grant history.Event) {
		for p, held := range w.holding {
			if p != grant.Process && side[p] != side[grant.Process] {
				recordHazard(env, fault, history.TwoPrimaries, grant.Time,
					map[string]string{"holder": grantText(held), "granted": grantText(grant)},
					history.TargetOfClient(p), history.TargetOfClient(grant.Process))
				seen()
				return
			}
		}
	}
	return func() { w.granted = nil }
}

func (primarySplit) Heal(ctx context.Context, env Env) error { return partition{}.Heal(ctx, env) }

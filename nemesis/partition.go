package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
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

// Network cuts nodes off each other and off the clients.
type Network interface {
	// IP is a node's address on the cluster network.
	IP(node string) string
	// Gateway is the address the lock clients' traffic comes from.
	Gateway() string
	DropFrom(ctx context.Context, node string, sources ...string) error
	HealNetwork(ctx context.Context) error
}

// ClientNetwork reaches single lock clients on the cluster network, by process number. A
// client that replaces a dead one has its address.
type ClientNetwork interface {
	// ClientIP is process p's address on the cluster network; an error for a process the
	// run never had.
	ClientIP(p int) (string, error)
	// ClientDropFrom makes process p drop every packet from the sources (addresses, or
	// Storage: its path to the storage).
	ClientDropFrom(ctx context.Context, p int, sources ...string) error
	// DelayClient delays every packet process p sends by d.
	DelayClient(ctx context.Context, p int, d time.Duration) error
	// HealClients removes every cut and delay from every running client.
	HealClients(ctx context.Context) error
}

// Leaders finds the node that leads a consensus cluster (ZooKeeper).
type Leaders interface {
	Leader(ctx context.Context) (string, error)
}

// Names in grudges besides the nodes' and the clients' (workerName): every lock client,
// and the storage.
const (
	Clients = "clients"
	Storage = "storage"
)

// A grudge says, for each node or lock client, whom it no longer hears from.
type grudge map[string][]string

// A shape builds a grudge over the node names and, when they have addresses of their own,
// the lock clients' (nil otherwise).
type shape func(nodes, clients []string, rng *rand.Rand) grudge

// shapes build grudges, Jepsen-style.
var shapes = map[string]shape{
	// isolate-one: one node cut off from every other node.
	"isolate-one": func(nodes, _ []string, rng *rand.Rand) grudge {
		i := rng.Intn(len(nodes))
		return complete([]string{nodes[i]}, without(nodes, i))
	},
	// halves: two sides that cannot talk, the first the smaller.
	"halves": func(nodes, _ []string, rng *rand.Rand) grudge {
		shuffled := shuffle(nodes, rng)
		return complete(shuffled[:len(nodes)/2], shuffled[len(nodes)/2:])
	},
	// majorities-ring: nodes on a ring each hear only their nearest neighbours, enough for
	// a majority, but no two nodes see the same majority (with 3 nodes nothing is cut).
	"majorities-ring": func(nodes, _ []string, rng *rand.Rand) grudge {
		ring := shuffle(nodes, rng)
		g := grudge{}
		n := len(ring)
		reach := (n/2 + 1) / 2
		for i, node := range ring {
			for j, other := range ring {
				if d := min((i-j+n)%n, (j-i+n)%n); d > reach {
					g[node] = append(g[node], other)
				}
			}
		}
		return g
	},
	// bridge: two halves that cannot talk, joined by one node that sees both.
	"bridge": func(nodes, _ []string, rng *rand.Rand) grudge {
		shuffled := shuffle(nodes, rng)
		half := len(nodes) / 2
		return complete(shuffled[:half], shuffled[half+1:])
	},
	// clients-from: a minority of nodes that the clients cannot reach.
	"clients-from": func(nodes, _ []string, rng *rand.Rand) grudge {
		g := grudge{}
		for _, node := range shuffle(nodes, rng)[:max(1, (len(nodes)-1)/2)] {
			g[node] = []string{Clients}
		}
		return g
	},
	// client: one lock client cut off every node (not off the storage).
	"client": func(nodes, clients []string, rng *rand.Rand) grudge {
		return complete([]string{clients[rng.Intn(len(clients))]}, nodes)
	},
	// client-minority: one lock client and a minority of the nodes apart from the rest, as
	// client 1 and D, E in Kleppmann's example are from client 2 and A, B, C.
	"client-minority": func(nodes, clients []string, rng *rand.Rand) grudge {
		c := rng.Intn(len(clients))
		shuffled := shuffle(nodes, rng)
		k := minority(len(nodes))
		return complete(append([]string{clients[c]}, shuffled[:k]...), append(without(clients, c), shuffled[k:]...))
	},
}

// clientShapes name single clients: they need clients with addresses of their own.
var clientShapes = map[string]bool{"client": true, "client-minority": true}

// minority is how many of n nodes make a minority, at least one.
func minority(n int) int { return max(1, (n-1)/2) }

// shapeNames are the shapes; without clients of their own addresses, only those that name
// no single client.
func shapeNames(clientAddrs bool) []string {
	var names []string
	for name := range shapes {
		if clientAddrs || !clientShapes[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// leaderShape isolates whichever node leads at the time: a shape that needs to ask the
// cluster, so it is not in shapes (and not in the random mix).
const leaderShape = "leader"

// complete cuts every member of a off every member of b, both ways. Clients never talk to
// each other, so no cut is made between two of them.
func complete(a, b []string) grudge {
	g := grudge{}
	for _, x := range a {
		for _, y := range b {
			if isClient(x) && isClient(y) {
				continue
			}
			g[x] = append(g[x], y)
			g[y] = append(g[y], x)
		}
	}
	return g
}

func without(nodes []string, i int) []string {
	return slices.Delete(slices.Clone(nodes), i, i+1)
}

func shuffle(nodes []string, rng *rand.Rand) []string {
	s := slices.Clone(nodes)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// String describes a grudge for the history: "n1<-n2,n3 n4<-clients worker-2<-n1".
func (g grudge) String() string {
	var parts []string
	for _, target := range g.targets() {
		parts = append(parts, target+"<-"+strings.Join(g[target], ","))
	}
	return strings.Join(parts, " ")
}

// targets are the nodes and clients that hear from someone no longer, sorted.
func (g grudge) targets() []string {
	var targets []string
	for target := range g {
		targets = append(targets, target)
	}
	sort.Strings(targets)
	return targets
}

// clientProcess is the process number of a client named in a grudge ("worker-3").
func clientProcess(name string) (int, bool) { return history.ClientTarget(name) }

func isClient(name string) bool {
	_, ok := clientProcess(name)
	return ok
}

// clientNames are the running clients as grudges name them, or nil when they have no
// addresses of their own.
func clientNames(env Env) []string {
	if env.Clients == nil {
		return nil
	}
	var names []string
	for _, p := range env.Workers.Processes() {
		names = append(names, workerName(p))
	}
	return names
}

var errSharedAddress = errors.New("the lock clients share one network address here: no single client can be cut off")

// cut applies a grudge between nodes, and between nodes and every client at once.
func cut(ctx context.Context, net Network, g grudge) error { return cutGrudge(ctx, Env{}, net, g) }

// cutGrudge applies a grudge: a node's part inside the node, a client's inside its
// namespace.
func cutGrudge(ctx context.Context, env Env, net Network, g grudge) error {
	for _, target := range g.targets() {
		sources, err := addrsOf(env, net, g[target])
		if p, ok := clientProcess(target); err == nil && ok {
			if env.Clients == nil {
				err = errSharedAddress
			} else {
				err = env.Clients.ClientDropFrom(ctx, p, sources...)
			}
		} else if err == nil {
			err = net.DropFrom(ctx, target, sources...)
		}
		if err != nil {
			return fmt.Errorf("cut %s: %w", target, err)
		}
	}
	return nil
}

// addrsOf are the addresses of the names in a grudge; Storage stays as it is.
func addrsOf(env Env, net Network, names []string) ([]string, error) {
	var addrs []string
	for _, name := range names {
		p, client := clientProcess(name)
		switch {
		case name == Storage:
			addrs = append(addrs, Storage)
		case name == Clients && env.Clients == nil:
			addrs = append(addrs, net.Gateway())
		case name == Clients:
			for _, p := range env.Workers.Processes() {
				ip, err := env.Clients.ClientIP(p)
				if err != nil {
					return nil, err
				}
				addrs = append(addrs, ip)
			}
		case client && env.Clients == nil:
			return nil, errSharedAddress
		case client:
			ip, err := env.Clients.ClientIP(p)
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, ip)
		default:
			addrs = append(addrs, net.IP(name))
		}
	}
	return addrs, nil
}

// healNetwork removes every cut from the nodes and the clients.
func healNetwork(ctx context.Context, env Env, net Network) error {
	err := net.HealNetwork(ctx)
	if env.Clients != nil {
		err = errors.Join(err, env.Clients.HealClients(ctx))
	}
	return err
}

// partition cuts the network on a seeded schedule, in one shape or ("" shape) a mix.
type partition struct{ shape string }

func (p partition) Name() string {
	if p.shape == "" {
		return "partition"
	}
	return "partition-" + p.shape
}

func (p partition) Needs() Needs { return Needs{Network: true, ClientAddrs: clientShapes[p.shape]} }

func (p partition) conditions(sys system.System, nodes int) error {
	switch {
	case p.shape == leaderShape && !sys.Leader:
		return fmt.Errorf("a %s cluster has no leader to isolate", sys.Name)
	case nodes < 2 && p.shape != "clients-from" && p.shape != "client" && p.shape != "":
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
	if p.shape == leaderShape && !canLead {
		return errors.New("this cluster has no leader to isolate")
	}
	if clientShapes[p.shape] && env.Clients == nil {
		return errSharedAddress
	}
	return schedule(ctx, env, func(rng *rand.Rand) error {
		shape := p.shape
		if shape == "" {
			names := shapeNames(env.Clients != nil)
			shape = names[rng.Intn(len(names))]
		}
		if shape != leaderShape {
			return partitionFor(ctx, env, net, "partition-"+shape, shapes[shape](nodes, clientNames(env), rng))
		}
		leader, ok := awaitLeader(ctx, leaders, env.Pause)
		if !ok {
			return nil // an election for a whole pause (a heal can set one off): no fault this time
		}
		i := slices.Index(nodes, leader)
		return partitionFor(ctx, env, net, "partition-leader", complete([]string{leader}, without(nodes, i)))
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

// partitionFor holds grudge g for env.Pause (or until ctx ends) and heals it.
func partitionFor(ctx context.Context, env Env, net Network, name string, g grudge) error {
	if len(g) == 0 {
		return nil // this shape cuts nothing at this cluster size: not a fault
	}
	return cutFor(ctx, env, net, name, g, func() { sleep(ctx, env.Pause) })
}

// cutFor holds grudge g, recorded as fault name, for as long as hold takes, and heals it
// however hold ended.
func cutFor(ctx context.Context, env Env, net Network, name string, g grudge, hold func()) error {
	fault := name + " " + g.String()
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

func (p partitionHolder) Name() string {
	if p.fromStorage {
		return "partition-holder-storage"
	}
	return "partition-holder"
}

func (p partitionHolder) Needs() Needs { return Needs{Network: !p.fromStorage, ClientAddrs: true} }

// sectionPause names the SIGSTOP that keeps a cut-off holder inside its critical section
// until the lock has passed on.
const sectionPause = "pause-in-section"

func (p partitionHolder) Run(ctx context.Context, env Env) error {
	net, err := clientNetworkOf(env)
	if err != nil {
		return err
	}
	return afterHolderReads(ctx, env, func(w *watcher, holder int, hold func()) error {
		g := complete([]string{workerName(holder)}, env.Nodes.Names())
		if p.fromStorage {
			g = grudge{workerName(holder): {Storage}}
		}
		if env.Undirected {
			return cutFor(ctx, env, net, p.Name(), g, func() {
				stop := w.seeTakeovers(env, p.Name(), history.GrantedInCut, holder)
				defer stop()
				hold()
			})
		}
		thaw, err := w.stopWorker(env, sectionPause, holder)
		if err != nil {
			return err
		}
		thawed := false
		var thawErr error
		err = cutFor(ctx, env, net, p.Name(), g, func() {
			stop := w.seeTakeovers(env, p.Name(), history.GrantedInCut, holder)
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
// clients). The default --pause, twice the TTL, does.
type primarySplit struct{}

func (primarySplit) Name() string { return "partition-primary" }

func (primarySplit) Needs() Needs { return Needs{Network: true, ClientAddrs: true} }

func (primarySplit) suits(sys system.System, nodes int) error {
	if !sys.Replicated || nodes < 2 {
		return fmt.Errorf("a %s cluster of %d nodes has no primary and replica to split", sys.Name, nodes)
	}
	return nil
}

// Monitors names the monitors beside the nodes (Sentinels), which a split puts on the
// replicas' side.
type Monitors interface {
	MonitorNames() []string
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
	return w.schedule(ctx, env, func(rng *rand.Rand) error {
		now, err := roles.Roles(ctx)
		primary := system.OnePrimary(now)
		if err != nil || primary == "" {
			return nil // no answer now, or between primaries (a failover): no split to make now
		}
		g, side := p.grudge(env, primary, rng)
		return cutFor(ctx, env, net, p.Name(), g, func() {
			stop := w.seeSplitGrants(env, p.Name(), side)
			defer stop()
			w.wait(ctx, env.Pause)
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
// on the other side holds it, until stop is called.
func (w *watcher) seeSplitGrants(env Env, fault string, side map[int]bool) (stop func()) {
	w.granted = func(grant history.Event) {
		for p, held := range w.holding {
			if p != grant.Process && side[p] != side[grant.Process] {
				recordHazard(env, fault, history.TwoPrimaries, grant.Time,
					map[string]string{"holder": grantText(held), "granted": grantText(grant)},
					workerName(p), workerName(grant.Process))
				return
			}
		}
	}
	return func() { w.granted = nil }
}

func (primarySplit) Heal(ctx context.Context, env Env) error { return partition{}.Heal(ctx, env) }

func (partitionHolder) Hazard() history.Hazard { return history.GrantedInCut }
func (primarySplit) Hazard() history.Hazard    { return history.TwoPrimaries }

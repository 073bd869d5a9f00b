package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"

	"github.com/lockbreaker/lockbreaker/history"
)

// Names in grudges besides the nodes' and the clients' (history.TargetOfClient): every lock client,
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

// shapes build grudges, Jepsen-style, one for each partition kind (each registered as a
// nemesis by partition.go) but the mix and the leader's: partition-leader isolates whichever
// node leads at the time, a shape that needs to ask the cluster, so it is not here (and not
// in the random mix).
var shapes = map[history.FaultKind]shape{
	// isolate-one: one node cut off from every other node.
	history.PartitionIsolateOne: func(nodes, _ []string, rng *rand.Rand) grudge {
		i := rng.Intn(len(nodes))
		return complete([]string{nodes[i]}, without(nodes, i))
	},
	// halves: two sides that cannot talk, the first the smaller.
	history.PartitionHalves: func(nodes, _ []string, rng *rand.Rand) grudge {
		shuffled := shuffle(nodes, rng)
		return complete(shuffled[:len(nodes)/2], shuffled[len(nodes)/2:])
	},
	// majorities-ring: nodes on a ring each hear only their nearest neighbours, enough for
	// a majority, but no two nodes see the same majority (with 3 nodes nothing is cut).
	history.PartitionMajoritiesRing: func(nodes, _ []string, rng *rand.Rand) grudge {
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
	history.PartitionBridge: func(nodes, _ []string, rng *rand.Rand) grudge {
		shuffled := shuffle(nodes, rng)
		half := len(nodes) / 2
		return complete(shuffled[:half], shuffled[half+1:])
	},
	// clients-from: a minority of nodes that the clients cannot reach.
	history.PartitionClientsFrom: func(nodes, _ []string, rng *rand.Rand) grudge {
		g := grudge{}
		for _, node := range shuffle(nodes, rng)[:max(1, (len(nodes)-1)/2)] {
			g[node] = []string{Clients}
		}
		return g
	},
	// client: one lock client cut off every node (not off the storage).
	history.PartitionClient: func(nodes, clients []string, rng *rand.Rand) grudge {
		return complete([]string{clients[rng.Intn(len(clients))]}, nodes)
	},
	// client-minority: one lock client and a minority of the nodes apart from the rest, as
	// client 1 and D, E in Kleppmann's example are from client 2 and A, B, C.
	history.PartitionClientMinority: func(nodes, clients []string, rng *rand.Rand) grudge {
		c := rng.Intn(len(clients))
		shuffled := shuffle(nodes, rng)
		k := minority(len(nodes))
		return complete(append([]string{clients[c]}, shuffled[:k]...), append(without(clients, c), shuffled[k:]...))
	},
}

// clientShapes name single clients: they need clients with addresses of their own.
var clientShapes = map[history.FaultKind]bool{history.PartitionClient: true, history.PartitionClientMinority: true}

// minority is how many of n nodes make a minority, at least one.
func minority(n int) int { return max(1, (n-1)/2) }

// shapeKinds are the shapes, by name; without clients of their own addresses, only those
// that name no single client.
func shapeKinds(clientAddrs bool) []history.FaultKind {
	var kinds []history.FaultKind
	for k := range shapes {
		if clientAddrs || !clientShapes[k] {
			kinds = append(kinds, k)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].Name < kinds[j].Name })
	return kinds
}

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
		names = append(names, history.TargetOfClient(p))
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
		} else if err == nil && len(sources) > 0 {
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
		case name == Clients && (env.Clients == nil || env.Clients.Routed()):
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
		case client && env.Clients.Routed():
			// The nodes cannot tell it from the others: the client cuts itself off (cutGrudge).
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

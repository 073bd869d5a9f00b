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
	"github.com/lockbreaker/lockbreaker/system"
)

// Partitions drop packets with iptables inside the nodes. The lock clients are host
// processes that all reach the nodes from one address (the network's gateway), so a cut
// between clients and nodes applies to every client at once; scenarios that need clients
// to see different nodes express it over time (see kleppmann-clock).

// Network cuts nodes off each other and off the clients.
type Network interface {
	// IP is a node's address on the cluster network.
	IP(node string) string
	// Gateway is the address the lock clients' traffic comes from.
	Gateway() string
	DropFrom(ctx context.Context, node string, sources ...string) error
	HealNetwork(ctx context.Context) error
}

// Leaders finds the node that leads a consensus cluster (ZooKeeper).
type Leaders interface {
	Leader(ctx context.Context) (string, error)
}

// Clients names the lock clients in a grudge.
const Clients = "clients"

// A grudge says, for each node, whom it no longer hears from (node names or Clients).
type grudge map[string][]string

// shapes build grudges over the node names, Jepsen-style.
var shapes = map[string]func(nodes []string, rng *rand.Rand) grudge{
	// isolate-one: one node cut off from every other node.
	"isolate-one": func(nodes []string, rng *rand.Rand) grudge {
		i := rng.Intn(len(nodes))
		return complete([]string{nodes[i]}, without(nodes, i))
	},
	// halves: two sides that cannot talk, the first the smaller.
	"halves": func(nodes []string, rng *rand.Rand) grudge {
		shuffled := shuffle(nodes, rng)
		return complete(shuffled[:len(nodes)/2], shuffled[len(nodes)/2:])
	},
	// majorities-ring: nodes on a ring each hear only their nearest neighbours, enough for
	// a majority, but no two nodes see the same majority (with 3 nodes nothing is cut).
	"majorities-ring": func(nodes []string, rng *rand.Rand) grudge {
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
	"bridge": func(nodes []string, rng *rand.Rand) grudge {
		shuffled := shuffle(nodes, rng)
		half := len(nodes) / 2
		return complete(shuffled[:half], shuffled[half+1:])
	},
	// clients-from: a minority of nodes that the clients cannot reach.
	"clients-from": func(nodes []string, rng *rand.Rand) grudge {
		g := grudge{}
		for _, node := range shuffle(nodes, rng)[:max(1, (len(nodes)-1)/2)] {
			g[node] = []string{Clients}
		}
		return g
	},
}

func shapeNames() []string {
	var names []string
	for name := range shapes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// leaderShape isolates whichever node leads at the time: a shape that needs to ask the
// cluster, so it is not in shapes (and not in the random mix).
const leaderShape = "leader"

// complete cuts every node of a off every node of b, both ways.
func complete(a, b []string) grudge {
	g := grudge{}
	for _, x := range a {
		for _, y := range b {
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

// String describes a grudge for the history: "n1<-n2,n3 n4<-clients".
func (g grudge) String() string {
	var parts []string
	for _, node := range g.nodes() {
		parts = append(parts, node+"<-"+strings.Join(g[node], ","))
	}
	return strings.Join(parts, " ")
}

func (g grudge) nodes() []string {
	var nodes []string
	for node := range g {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	return nodes
}

// cut applies a grudge.
func cut(ctx context.Context, net Network, g grudge) error {
	for _, node := range g.nodes() {
		var sources []string
		for _, from := range g[node] {
			if from == Clients {
				sources = append(sources, net.Gateway())
			} else {
				sources = append(sources, net.IP(from))
			}
		}
		if err := net.DropFrom(ctx, node, sources...); err != nil {
			return fmt.Errorf("cut %s: %w", node, err)
		}
	}
	return nil
}

// partition cuts the network on a seeded schedule, in one shape or ("" shape) a mix.
type partition struct{ shape string }

func (p partition) Name() string {
	if p.shape == "" {
		return "partition"
	}
	return "partition-" + p.shape
}

func (partition) Needs() Needs { return Needs{Network: true} }

func (p partition) Available(sys system.System, nodes int) error {
	if err := p.Needs().available(sys); err != nil {
		return err
	}
	switch {
	case p.shape == leaderShape && !sys.Leader:
		return fmt.Errorf("a %s cluster has no leader to isolate", sys.Name)
	case nodes < 2 && p.shape != "clients-from" && p.shape != "":
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
	return schedule(ctx, env, func(rng *rand.Rand) error {
		shape := p.shape
		if shape == "" {
			names := shapeNames()
			shape = names[rng.Intn(len(names))]
		}
		if shape != leaderShape {
			return partitionFor(ctx, env, net, "partition-"+shape, shapes[shape](nodes, rng))
		}
		leader, err := leaders.Leader(ctx)
		if err != nil {
			return fmt.Errorf("find the leader to isolate: %w", err)
		}
		i := slices.Index(nodes, leader)
		return partitionFor(ctx, env, net, "partition-leader", complete([]string{leader}, without(nodes, i)))
	})
}

// partitionFor holds grudge g for env.Pause (or until ctx ends) and heals it.
func partitionFor(ctx context.Context, env Env, net Network, name string, g grudge) error {
	if len(g) == 0 {
		return nil // this shape cuts nothing at this cluster size: not a fault
	}
	fault := name + " " + g.String()
	err := cut(context.WithoutCancel(ctx), net, g)
	record(env, history.Start, fault, g.nodes()...)
	if err == nil {
		sleep(ctx, env.Pause)
	}
	err = errors.Join(err, net.HealNetwork(context.WithoutCancel(ctx)))
	record(env, history.Stop, fault, g.nodes()...)
	return err
}

func (partition) Heal(ctx context.Context, env Env) error {
	net, err := networkOf(env)
	if err != nil {
		return nil // nothing could have been cut
	}
	return net.HealNetwork(ctx)
}

func networkOf(env Env) (Network, error) {
	net, ok := env.Nodes.(Network)
	if !ok {
		return nil, errors.New("this cluster cannot partition its nodes")
	}
	return net, nil
}

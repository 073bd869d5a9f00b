package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// The systems a cluster can run.
const (
	SystemRedis     = "redis"     // one Redis server
	SystemRedlock   = "redlock"   // independent Redis masters (default 5)
	SystemZooKeeper = "zookeeper" // a ZooKeeper ensemble (default 3)
)

// Spec describes a cluster. It is plain data.
type Spec struct {
	RunID  string // names and labels everything created; [a-zA-Z0-9][a-zA-Z0-9_.-]*
	Image  string // the node image, from EnsureImage
	System string // SystemRedis, SystemRedlock or SystemZooKeeper
	Nodes  int    // 0 means the system's default: 1, 5, 3
	// Faketime runs every server under libfaketime so SetClock can move its
	// wall clock. Monotonic clocks are never faked.
	Faketime bool
	// Partitions gives the nodes NET_ADMIN so DropFrom can install iptables rules; nodes
	// run without it otherwise (least privilege).
	Partitions bool
	// ZKSessionTimeout is the session timeout ZooKeeper clients will ask for.
	// The servers accept 1 s to 60 s; a value outside widens that range.
	ZKSessionTimeout time.Duration
}

// Node is one server of a cluster.
type Node struct {
	Name        string // n1..nN, also its host name and alias on the cluster network
	ContainerID string
	IP          string // on the cluster network
	Port        int    // the server's client port
}

// Addr is the address host processes (the lock clients) dial: the node's IP
// on the cluster network with the server's own port. Such traffic reaches the
// node from the network's gateway address (see Cluster.Gateway).
func (n Node) Addr() string { return net.JoinHostPort(n.IP, strconv.Itoa(n.Port)) }

// Cluster is a running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	spec    Spec
	network string // lockbreaker-<run id>
	gateway string
	nodes   []Node
}

const (
	redisPort     = 6379
	zookeeperPort = 2181
	// readyTimeout bounds the wait for a started cluster to serve.
	readyTimeout = 2 * time.Minute
)

var runIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Size checks a cluster size for a system and resolves 0 to the system's default, so a
// bad size is refused before anything is started.
func Size(system string, nodes int) (int, error) {
	defaults := map[string]int{SystemRedis: 1, SystemRedlock: 5, SystemZooKeeper: 3}
	def, ok := defaults[system]
	if !ok {
		return 0, fmt.Errorf("unknown system %q (want %s, %s or %s)", system, SystemRedis, SystemRedlock, SystemZooKeeper)
	}
	if nodes == 0 {
		nodes = def
	}
	switch {
	case nodes < 0 || nodes > 9:
		return nodes, fmt.Errorf("%s: %d nodes (want 1 to 9)", system, nodes)
	case system == SystemRedis && nodes != 1:
		return nodes, fmt.Errorf("redis: %d nodes (a single Redis has 1)", nodes)
	case system == SystemRedlock && (nodes < 3 || nodes%2 == 0):
		return nodes, fmt.Errorf("redlock: %d nodes (want an odd number, at least 3)", nodes)
	case system == SystemZooKeeper && nodes%2 == 0:
		return nodes, fmt.Errorf("zookeeper: %d nodes (want an odd number)", nodes)
	}
	return nodes, nil
}

// withDefaults checks spec and fills in the default node count.
func (s Spec) withDefaults() (Spec, error) {
	if !runIDPattern.MatchString(s.RunID) {
		return s, fmt.Errorf("run id %q: want letters, digits, '_', '.', '-'", s.RunID)
	}
	if s.Image == "" {
		return s, errors.New("no node image: call EnsureImage first")
	}
	nodes, err := Size(s.System, s.Nodes)
	s.Nodes = nodes
	if err != nil {
		return s, err
	}
	return s, nil
}

// Start creates the network lockbreaker-<run id>, starts the nodes on it and
// waits until each serves: Redis answers PING, every ZooKeeper server reports
// a leader or follower mode (a quorum formed). On any error, a cancelled ctx
// (an interrupt) included, it removes whatever it had created and returns a nil
// cluster.
func Start(ctx context.Context, spec Spec) (*Cluster, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	if err := Ping(ctx); err != nil {
		return nil, err
	}
	c := &Cluster{spec: spec, network: "lockbreaker-" + spec.RunID}
	if err := c.start(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("start %s cluster: %w", spec.System, err), c.Stop(stopCtx))
	}
	return c, nil
}

// startHook, when set (by tests), is called as Start passes each stage: "network",
// "node n1".."node nN" (each node started), "nodes", "ready".
var startHook func(stage string)

func (c *Cluster) reached(stage string) {
	if startHook != nil {
		startHook(stage)
	}
}

// createTimeout bounds the requests that create a cluster's network and containers.
const createTimeout = time.Minute

// start brings the cluster up. Requests that create something run to completion even
// when ctx is cancelled: an abandoned request may still create its container or
// network in the engine after Stop has swept, and leak it. Cancellation is checked
// between them instead, and cuts the wait for the nodes to serve short.
func (c *Cluster) start(ctx context.Context) error {
	labels := ownerLabels(c.spec.RunID)
	cli, _ := docker()
	create, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	created, err := cli.NetworkCreate(create, c.network, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		return fmt.Errorf("create network %s: %w", c.network, err)
	}
	c.reached("network")
	if err := ctx.Err(); err != nil {
		return err
	}
	inspected, err := cli.NetworkInspect(ctx, created.ID, client.NetworkInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect network %s: %w", c.network, err)
	}
	for _, cfg := range inspected.Network.IPAM.Config {
		if cfg.Gateway.Is4() {
			c.gateway = cfg.Gateway.String()
		}
	}
	if c.gateway == "" {
		return fmt.Errorf("network %s has no IPv4 gateway", c.network)
	}

	// Start the nodes together: ZooKeeper servers look each other up by name. A node
	// not yet begun when ctx is cancelled is not started at all.
	nodes := make([]Node, c.spec.Nodes)
	errs := make([]error, c.spec.Nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			if errs[i] = ctx.Err(); errs[i] != nil {
				return
			}
			nodes[i], errs[i] = c.startNode(create, i+1, labels)
			if errs[i] == nil {
				c.reached("node " + nodes[i].Name)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.nodes = nodes
	c.reached("nodes")

	readyCtx, cancelReady := context.WithTimeout(ctx, readyTimeout)
	defer cancelReady()
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = c.waitReady(readyCtx, n) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.reached("ready")
	return ctx.Err()
}

// startNode creates and starts node n<id> and returns it with its IP.
func (c *Cluster) startNode(ctx context.Context, id int, labels map[string]string) (Node, error) {
	name := "n" + strconv.Itoa(id)
	labels = maps.Clone(labels)
	labels[LabelNode] = name
	env := map[string]string{}
	if c.spec.Faketime {
		env["LOCKBREAKER_FAKETIME"] = "1"
	}
	req := testcontainers.ContainerRequest{
		Image:          c.spec.Image,
		Name:           c.network + "-" + name,
		Env:            env,
		Labels:         labels,
		Networks:       []string{c.network},
		NetworkAliases: map[string][]string{c.network: {name}},
		ConfigModifier: func(cfg *container.Config) { cfg.Hostname = name },
	}
	if c.spec.Partitions {
		// NET_ADMIN lets DropFrom install iptables rules inside the node. It must be
		// added here: once a HostConfigModifier is set, CapAdd is ignored.
		req.HostConfigModifier = func(hc *container.HostConfig) { hc.CapAdd = append(hc.CapAdd, "NET_ADMIN") }
	}
	port := redisPort
	if c.spec.System == SystemZooKeeper {
		port = zookeeperPort
		req.Cmd = zookeeperCmd
		req.Files = zookeeperFiles(c.spec, id)
	} else {
		req.Cmd = redisCmd
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
	})
	if err != nil {
		return Node{}, fmt.Errorf("start %s node %s: %w", c.spec.System, name, err)
	}
	node := Node{Name: name, ContainerID: ctr.GetContainerID(), Port: port}
	cli, _ := docker()
	info, err := cli.ContainerInspect(ctx, node.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		return node, fmt.Errorf("start %s node %s: inspect: %w", c.spec.System, name, err)
	}
	if ns := info.Container.NetworkSettings; ns != nil && ns.Networks[c.network] != nil {
		node.IP = ns.Networks[c.network].IPAddress.String()
	}
	if net.ParseIP(node.IP) == nil {
		return node, fmt.Errorf("start %s node %s: no IP on network %s", c.spec.System, name, c.network)
	}
	return node, nil
}

// waitReady polls node n from this host until it serves, fails fast when its
// container exits, and reports the end of its log when it gives up.
func (c *Cluster) waitReady(ctx context.Context, n Node) error {
	probe := pingRedis
	if c.spec.System == SystemZooKeeper {
		probe = zookeeperServing
	}
	cli, _ := docker()
	var last error
	for attempt := 0; ; attempt++ {
		if last = probe(ctx, n.Addr()); last == nil {
			return nil
		}
		if attempt%10 == 9 {
			info, err := cli.ContainerInspect(ctx, n.ContainerID, client.ContainerInspectOptions{})
			if err == nil && info.Container.State != nil && !info.Container.State.Running {
				return fmt.Errorf("node %s exited (%s); log ends:\n%s", n.Name, info.Container.State.Status, c.logTail(n))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s (%s) not serving: %w (%v); log ends:\n%s", n.Name, n.Addr(), ctx.Err(), last, c.logTail(n))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Nodes returns the cluster's nodes, n1 first.
func (c *Cluster) Nodes() []Node { return append([]Node(nil), c.nodes...) }

// Spec returns the cluster's spec, with defaults filled in.
func (c *Cluster) Spec() Spec { return c.spec }

// Gateway is the cluster network's gateway IP: the source address of every
// host process's traffic to the nodes. DropFrom(node, c.Gateway()) cuts the
// lock clients off that node.
func (c *Cluster) Gateway() string { return c.gateway }

// Stop removes the cluster's containers and network, whatever their state
// (paused, partitioned). It is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	if _, err := Clean(ctx, c.spec.RunID); err != nil {
		return fmt.Errorf("stop %s cluster %s: %w", c.spec.System, c.spec.RunID, err)
	}
	return nil
}

// node returns the node called name.
// Names are the nodes' names, n1..nN.
func (c *Cluster) Names() []string {
	var names []string
	for _, n := range c.nodes {
		names = append(names, n.Name)
	}
	return names
}

// Addrs are the addresses the lock clients dial, in node order.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.Addr())
	}
	return addrs
}

// IP is node name's address on the cluster network, or "" if there is no such node.
func (c *Cluster) IP(name string) string {
	n, _ := c.node(name)
	return n.IP
}

func (c *Cluster) node(name string) (Node, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("no node %q in %s cluster %s", name, c.spec.System, c.spec.RunID)
}

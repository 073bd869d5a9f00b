package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/system"
)

// Spec describes a cluster. It is plain data.
type Spec struct {
	RunID  string // names and labels everything created; [a-zA-Z0-9][a-zA-Z0-9_.-]*
	Image  string // the node image, from EnsureImage
	System string // a system (package system) that runs in containers
	Nodes  int    // 0 means the system's default
	// Faketime runs every server under libfaketime so SetClock can move its
	// wall clock. Monotonic clocks are never faked.
	Faketime bool
	// Partitions gives the nodes NET_ADMIN so DropFrom can install iptables rules; nodes
	// run without it otherwise (least privilege).
	Partitions bool
	// TTL is the lock's lease; systems with sessions size their timeouts by it.
	TTL time.Duration
	// Persistence is what the nodes keep on disk and when they sync it, one of the
	// system's; "": its default.
	Persistence system.Persistence
	// Disks puts each node's data directory on a disk that can lose its unsynced writes
	// or sync slowly (nodes.Disk), served on this host: lockbreaker must run as root here,
	// with /dev/fuse, and see the engine's processes.
	Disks bool
	// MinReplicas and MinReplicasMaxLag make a replicated system's primary refuse writes
	// that too few replicas acknowledged (see system.Cluster).
	MinReplicas       int
	MinReplicasMaxLag time.Duration
	// Pooler names a pooler mode the nodes run in front of their server (system.Pooler);
	// the nodes' Port is then the pooler's, which the clients dial and readiness is asked
	// through. "" runs none.
	Pooler string
}

// Node is one server of a cluster: a lock node or a monitor beside the nodes.
type Node struct {
	Name        string // n1..nN (s1..sM for monitors), also its host name and alias on the cluster network
	ContainerID string
	IP          string // on the cluster network
	Port        int    // the server's client port
}

// Addr is the address host processes (the lock clients) dial: the node's IP
// on the cluster network with the server's own port. Such traffic reaches the
// node from the network's gateway address (see nodes.Cluster.Gateway).
func (n Node) Addr() string { return net.JoinHostPort(n.IP, strconv.Itoa(n.Port)) }

// Cluster is a running cluster of containers: its nodes and every fault on them are
// nodes.Cluster's, reached through the engine (engineNode). Its methods are safe for
// concurrent use.
type Cluster struct {
	*nodes.Cluster
	spec     Spec
	recipe   *system.Container
	network  string // lockbreaker-<run id>
	gateway  string
	bridge   Bridge
	nodes    []Node
	monitors []Node

	hostOnce  sync.Once
	hostProcs bool // this host reaches into the nodes' processes (sharesProcesses)

	disks map[string]*nodes.Disk // by node name, when the spec asks for disks
	// fuse lets the containers mount FUSE filesystems (/dev/fuse, CAP_SYS_ADMIN): stand-in
	// machines, which serve their nodes' disks inside.
	fuse bool
}

var runIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// withDefaults checks spec, fills in the default node count and returns the system's
// container recipe.
func (s Spec) withDefaults() (Spec, *system.Container, error) {
	if !runIDPattern.MatchString(s.RunID) {
		return s, nil, fmt.Errorf("run id %s: want letters, digits, '_', '.', '-'", quote.Short(s.RunID))
	}
	if s.Image == "" {
		return s, nil, errors.New("no node image: call EnsureImage first")
	}
	sys, err := system.Lookup(s.System)
	if err != nil {
		return s, nil, err
	}
	if sys.Container == nil {
		return s, nil, fmt.Errorf("system %s does not run in containers", s.System)
	}
	if s.Persistence, err = sys.Persistence(s.Persistence); err != nil {
		return s, nil, err
	}
	if s.Disks && sys.Container.Data == "" {
		return s, nil, fmt.Errorf("system %s keeps no data directory lockbreaker knows, for a disk to stand under", s.System)
	}
	switch {
	case s.MinReplicas > 0 && !sys.Replicated:
		return s, nil, fmt.Errorf("system %s has no replicas", s.System)
	case s.Pooler != "" && (sys.Container.Pooler == nil || !slices.Contains(sys.Container.Pooler.Modes, s.Pooler)):
		return s, nil, fmt.Errorf("system %s runs no pooler %s", s.System, quote.Short(s.Pooler))
	}
	s.Nodes, err = sys.Check(s.Nodes)
	return s, sys.Container, err
}

// Start creates the network lockbreaker-<run id>, starts the nodes on it and
// waits until each serves: Redis answers PING (a replica has its link to the
// primary up), every ZooKeeper server reports a leader or follower mode (a quorum
// formed). Monitors (Sentinels) start after the nodes serve, and Start waits until
// they know every node and each other. On any error, a cancelled ctx (an
// interrupt) included, it removes whatever it had created and returns a nil
// cluster.
func Start(ctx context.Context, spec Spec) (*Cluster, error) {
	spec, recipe, err := spec.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	if err := Ping(ctx); err != nil {
		return nil, err
	}
	c := &Cluster{spec: spec, recipe: recipe, network: "lockbreaker-" + spec.RunID}
	if err := c.start(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("start %s cluster: %w", spec.System, err), c.Stop(stopCtx))
	}
	return c, nil
}

// startHook, when set (by tests), is called as Start passes each stage: "network",
// "node n1".."node nN" (each node started), "nodes", "ready", and with monitors
// "node s1".."node sM", "monitors".
var startHook func(stage string)

func (c *Cluster) reached(stage string) {
	if startHook != nil {
		startHook(stage)
	}
}

// createTimeout bounds each request that creates a cluster's network or one of its
// containers, on its own: an engine starting many containers at once (a busy CI runner)
// answers each late, and one that has not answered by then is stuck, not busy.
const createTimeout = 3 * time.Minute

// creating is ctx's values with createTimeout from now, and without ctx's end: a request
// that creates something runs to completion (see start).
func creating(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
}

// start brings the cluster up. Requests that create something run to completion even
// when ctx is cancelled: an abandoned request may still create its container or
// network in the engine after Stop has swept, and leak it. Cancellation is checked
// between them instead, and cuts the wait for the nodes to serve short.
func (c *Cluster) start(ctx context.Context) error {
	labels := ownerLabels(c.spec.RunID)
	if err := c.createNetwork(ctx, labels); err != nil {
		return err
	}
	c.reached("network")
	if err := ctx.Err(); err != nil {
		return err
	}

	if c.spec.Disks {
		if err := c.startDisks(ctx); err != nil {
			return err
		}
	}
	// Start the nodes together: ZooKeeper servers look each other up by name.
	cluster := c.setupCluster()
	started, err := c.startAll(ctx, labels, "n", 0, c.spec.Nodes, c.recipe.ClientPort(c.spec.Pooler), func(id int) system.NodeSetup {
		return c.recipe.Node(cluster, id)
	})
	if err != nil {
		return err
	}
	c.nodes = started
	for _, n := range c.nodes {
		if err := c.checkDiskBound(ctx, n); err != nil {
			return err
		}
	}
	c.reached("nodes")
	cfg := nodes.Config{System: c.spec.System, Recipe: c.recipe, Partitions: c.spec.Partitions}
	if c.spec.Faketime {
		cfg.Clocks = nodes.Faketime
	}
	c.Cluster = nodes.New(cfg, c.remotes(c.nodes), nil)
	if err := c.WaitNodes(ctx); err != nil {
		return err
	}
	c.reached("ready")

	m := c.recipe.Monitors
	if m == nil {
		return ctx.Err()
	}
	// Monitors find the nodes by name, so they start once the nodes serve.
	c.monitors, err = c.startAll(ctx, labels, m.Prefix, c.spec.Nodes, m.Count, m.Port, func(id int) system.NodeSetup {
		return m.Node(cluster, id)
	})
	if err != nil {
		return err
	}
	c.Cluster = nodes.New(cfg, c.remotes(c.nodes), c.remotes(c.monitors))
	if err := c.WaitMonitors(ctx, cluster); err != nil {
		return err
	}
	c.reached("monitors")
	return ctx.Err()
}

// createNetwork creates the cluster's network on a subnet of its own, given to the engine
// as the user's, so that every container can have a fixed address (nodeAddr): a node
// killed and started again must come back where the clients and monitors look for it, and
// the engine gives a restarted container the lowest free address unless told otherwise
// (several nodes restarted at once trade addresses). The engine picks the subnet on a
// first creation, which is removed and made again with that subnet; another network may
// take it meanwhile, and then the engine picks again.
func (c *Cluster) createNetwork(ctx context.Context, labels map[string]string) error {
	create, cancel := creating(ctx)
	defer cancel()
	cli, _ := docker()
	const attempts = 5
	var err error
	for range attempts {
		var picked client.NetworkCreateResult
		if picked, err = cli.NetworkCreate(create, c.network, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
			return fmt.Errorf("create network %s: %w", c.network, err)
		}
		inspected, inspectErr := cli.NetworkInspect(create, picked.ID, client.NetworkInspectOptions{})
		_, removeErr := cli.NetworkRemove(create, picked.ID, client.NetworkRemoveOptions{})
		if err = errors.Join(inspectErr, removeErr); err != nil {
			return fmt.Errorf("create network %s: %w", c.network, err)
		}
		ipam := &network.IPAM{}
		for _, cfg := range inspected.Network.IPAM.Config {
			if cfg.Gateway.Is4() {
				ipam.Config = append(ipam.Config, network.IPAMConfig{Subnet: cfg.Subnet, Gateway: cfg.Gateway})
			}
		}
		if len(ipam.Config) == 0 {
			return fmt.Errorf("network %s has no IPv4 gateway", c.network)
		}
		var created client.NetworkCreateResult
		created, err = cli.NetworkCreate(create, c.network, client.NetworkCreateOptions{Driver: "bridge", Labels: labels, IPAM: ipam})
		if err == nil {
			cfg := ipam.Config[0]
			c.gateway = cfg.Gateway.String()
			c.bridge = Bridge{Name: bridgeName(created.ID, inspected.Network.Options), Subnet: cfg.Subnet, Gateway: cfg.Gateway}
			return nil
		}
	}
	return fmt.Errorf("create network %s on a subnet of its own (%d attempts): %w", c.network, attempts, err)
}

// nodeAddr is the fixed address of the container at offset i on the cluster network: the
// nodes n1..nN at offsets 0..N-1 after the gateway, the monitors after them.
func (c *Cluster) nodeAddr(i int) netip.Addr {
	addr := c.bridge.Gateway
	for range i + 1 {
		addr = addr.Next()
	}
	return addr
}

// setupCluster is what the system's recipe is told about the cluster.
func (c *Cluster) setupCluster() system.Cluster {
	return system.Cluster{Nodes: c.spec.Nodes, TTL: c.spec.TTL, Persistence: c.spec.Persistence,
		MinReplicas: c.spec.MinReplicas, MinReplicasMaxLag: c.spec.MinReplicasMaxLag, Pooler: c.spec.Pooler}
}

// startAll starts count containers named <prefix>1.. at once, from the setup of each id,
// at the fixed addresses from offset first on (nodeAddr).
// A container not yet begun when ctx is cancelled is not started at all; Stop removes
// those that were, by label.
func (c *Cluster) startAll(ctx context.Context, labels map[string]string, prefix string, first, count, port int,
	setup func(id int) system.NodeSetup) ([]Node, error) {
	nodes := make([]Node, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			if errs[i] = ctx.Err(); errs[i] != nil {
				return
			}
			name := prefix + strconv.Itoa(i+1)
			create, cancel := creating(ctx)
			defer cancel()
			nodes[i], errs[i] = c.startNode(create, name, c.nodeAddr(first+i), port, setup(i+1), labels)
			if errs[i] == nil {
				c.reached("node " + name)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nodes, errors.Join(errs...)
}

// startNode creates and starts the container of node name at address addr and returns it.
func (c *Cluster) startNode(ctx context.Context, name string, addr netip.Addr, port int, setup system.NodeSetup, labels map[string]string) (_ Node, err error) {
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
		EndpointSettingsModifier: func(endpoints map[string]*network.EndpointSettings) {
			if e := endpoints[c.network]; e != nil {
				e.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: addr}
			}
		},
	}
	disk := c.disks[name]
	// NET_ADMIN lets DropFrom install iptables rules inside the node. It must be added
	// here: once a HostConfigModifier is set, CapAdd is ignored.
	req.HostConfigModifier = func(hc *container.HostConfig) {
		if c.spec.Partitions {
			hc.CapAdd = append(hc.CapAdd, "NET_ADMIN")
		}
		if disk != nil {
			hc.Binds = append(hc.Binds, disk.Mount()+":"+c.recipe.Data)
		}
		if c.fuse {
			hc.CapAdd = append(hc.CapAdd, "SYS_ADMIN")
			hc.Devices = append(hc.Devices, container.DeviceMapping{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"})
		}
	}
	req.Cmd = setup.Cmd
	if c.local() { // an image of a system file's, run as it is (own.go)
		var extra []system.File
		if req.Entrypoint, extra, err = c.localSetup(ctx, setup.Cmd, env); err != nil {
			return Node{}, fmt.Errorf("start %s node %s: %w", c.spec.System, name, err)
		}
		req.Cmd, setup.Files = nil, append(slices.Clone(setup.Files), extra...)
	}
	for _, f := range setup.Files {
		req.Files = append(req.Files, testcontainers.ContainerFile{
			Reader: strings.NewReader(f.Content), ContainerFilePath: f.Path, FileMode: 0o644})
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
	})
	if err != nil {
		return Node{}, fmt.Errorf("start %s node %s: %w", c.spec.System, name, err)
	}
	node := Node{Name: name, ContainerID: ctr.GetContainerID(), Port: port}
	node.IP, err = c.containerIP(ctx, node)
	return node, err
}

// containerIP asks the engine for node n's address on the cluster network.
func (c *Cluster) containerIP(ctx context.Context, n Node) (string, error) {
	cli, _ := docker()
	info, err := cli.ContainerInspect(ctx, n.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("%s node %s: inspect: %w", c.spec.System, n.Name, err)
	}
	var ip string
	if ns := info.Container.NetworkSettings; ns != nil && ns.Networks[c.network] != nil {
		ip = ns.Networks[c.network].IPAddress.String()
	}
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("%s node %s: no IP on network %s", c.spec.System, n.Name, c.network)
	}
	return ip, nil
}

// Nodes returns the cluster's nodes, n1 first.
func (c *Cluster) Nodes() []Node { return append([]Node(nil), c.nodes...) }

// Monitors returns the monitors beside the nodes (Sentinels), s1 first; none for most
// systems.
func (c *Cluster) Monitors() []Node { return append([]Node(nil), c.monitors...) }

// Spec returns the cluster's spec, with defaults filled in.
func (c *Cluster) Spec() Spec { return c.spec }

// Bridge is the host's side of a cluster network: the Linux bridge its containers are
// plugged into, its subnet and gateway. Host processes can join it (package clientnet).
type Bridge struct {
	Name    string
	Subnet  netip.Prefix
	Gateway netip.Addr
}

// bridgeName is the Linux bridge of a network: the one its options name, else Docker's
// default, "br-" and the first 12 characters of its ID.
func bridgeName(id string, options map[string]string) string {
	if name := options["com.docker.network.bridge.name"]; name != "" {
		return name
	}
	return "br-" + shortID(id)
}

// Bridge is the cluster network's bridge on the host.
func (c *Cluster) Bridge() Bridge { return c.bridge }

// Stop removes the cluster's containers and network, whatever their state
// (paused, partitioned). It is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	if err := errors.Join(removeRun(ctx, c.spec.RunID), c.stopDisks()); err != nil {
		return fmt.Errorf("stop %s cluster %s: %w", c.spec.System, c.spec.RunID, err)
	}
	return nil
}

// node finds a node or a monitor by name.
func (c *Cluster) node(name string) (Node, error) {
	for _, n := range slices.Concat(c.nodes, c.monitors) {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("no node %q in %s cluster %s", name, c.spec.System, c.spec.RunID)
}

// remotes are ns as the engine reaches them.
func (c *Cluster) remotes(ns []Node) []nodes.Remote {
	rs := make([]nodes.Remote, len(ns))
	for i, n := range ns {
		rs[i] = engineNode{Node: n, c: c}
	}
	return rs
}

package nodes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
)

// Clocks is how a cluster's faults move its nodes' clocks.
type Clocks string

const (
	// FixedClocks: no fault moves a clock; the servers run as they are.
	FixedClocks Clocks = ""
	// Faketime: every server runs under libfaketime and reads its wall clock as real time
	// plus its node's offset (Info.ClockFile); the host's own clock is left alone.
	Faketime Clocks = "faketime"
	// SystemClock: the node's system clock is moved (Info.ClockProgram): for dedicated
	// machines, where a service reads time in ways libfaketime does not reach.
	SystemClock Clocks = "system"
)

// Config is what a Cluster is made of besides its nodes.
type Config struct {
	// System names the lock service, for errors.
	System string
	// Recipe is the system's recipe: its probes, its in-place crash and its monitors.
	Recipe *system.Container
	// Clocks is how the faults move the nodes' clocks.
	Clocks Clocks
	// Partitions says the nodes can take iptables rules; DropFrom is refused otherwise.
	Partitions bool
}

// Cluster is a system's nodes, n1 first, and its monitors (Sentinels), reached through
// their Remotes, with every node fault written once over them. Its methods are safe for
// concurrent use. A fault's heal is not cut by ctx's end: the Remotes keep deadlines of
// their own.
type Cluster struct {
	cfg      Config
	nodes    []Remote
	monitors []Remote

	mu   sync.Mutex
	down map[string]downBy // nodes crashed and not serving again (yet)
}

// downBy is how a node that is down went down.
type downBy int

const (
	up      downBy = iota // its server runs, or is paused
	killed                // its server was killed: Restart starts it
	inPlace               // its server restarts itself: Restart waits for it
	gone                  // started again, it did not serve (NotServingError): nothing heals it
)

// New is a cluster of nodes and monitors, each started already; Start waits until they
// serve.
func New(cfg Config, nodes, monitors []Remote) *Cluster {
	return &Cluster{cfg: cfg, nodes: nodes, monitors: monitors, down: map[string]downBy{}}
}

// readyTimeout bounds the wait for a node to serve.
const readyTimeout = 2 * time.Minute

// aliveEvery is how often a node that does not serve yet is asked whether its server still
// runs.
const aliveEvery = 2 * time.Second

// readyPoll is how often a node that does not serve yet is asked again: often, since a
// node killed under a held lock must serve again within the lease to matter.
const readyPoll = 50 * time.Millisecond

// WaitNodes waits until every node serves, within readyTimeout.
// Then it makes what they wrote on their disks while starting durable.
func (c *Cluster) WaitNodes(ctx context.Context) error {
	if err := c.waitAll(ctx, c.nodes, c.ready); err != nil {
		return err
	}
	return c.syncDisks(ctx)
}

// WaitMonitors waits until every monitor knows every node and the others, within
// readyTimeout; setup is what the monitors were started with.
func (c *Cluster) WaitMonitors(ctx context.Context, setup system.Cluster) error {
	return c.waitAll(ctx, c.monitors, func(ctx context.Context, _ Remote, addr string) error {
		return c.cfg.Recipe.Monitors.Ready(ctx, setup, addr)
	})
}

func (c *Cluster) waitAll(ctx context.Context, rs []Remote, ready func(context.Context, Remote, string) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return Each(rs, func(r Remote) error { return c.waitReady(ctx, r, ready) })
}

// ready asks node r at addr whether it serves: the recipe's probe, or its command run on
// the node (a system file's ready: {command: ...}) within a few seconds.
func (c *Cluster) ready(ctx context.Context, r Remote, addr string) error {
	if len(c.cfg.Recipe.ReadyIn) == 0 {
		return c.cfg.Recipe.Ready(ctx, addr)
	}
	_, err := probe(ctx, r, c.cfg.Recipe.ReadyIn)
	return err
}

// probe runs a probe command (readiness, role) on node r within a few seconds.
func probe(ctx context.Context, r Remote, cmd []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return r.Run(ctx, slices.Clone(cmd)...)
}

// waitReady polls node r until ready says it serves, fails fast when its server has
// exited, and reports the end of its log when it gives up (NotServingError): a server that
// exited or never came up, or a machine too busy to let it within ctx.
func (c *Cluster) waitReady(ctx context.Context, r Remote, ready func(context.Context, Remote, string) error) error {
	info := r.Info()
	var last error
	for asked := time.Now(); ; {
		if last = ready(ctx, r, info.Addr); last == nil {
			return nil
		}
		// A probe of a server that is gone may take its whole second to fail: a server that
		// exited is told by asking where it runs, every few seconds.
		if time.Since(asked) >= aliveEvery && ctx.Err() == nil {
			asked = time.Now()
			if err := exited(ctx, r); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return &NotServingError{Node: info.Name, Why: fmt.Sprintf("(%s) not serving: %v (%v)", info.Addr, ctx.Err(), last),
				Log: logTail(r), Err: ctx.Err()}
		case <-time.After(readyPoll):
		}
	}
}

// exited is a NotServingError when node r's server has exited, another error when its place
// could not tell, and nil while it runs.
func exited(ctx context.Context, r Remote) error {
	var exit *ExitedError
	switch err := r.Alive(ctx); {
	case errors.As(err, &exit):
		return &NotServingError{Node: r.Info().Name, Why: exit.Error(), Log: logTail(r)}
	case err != nil:
		return fmt.Errorf("node %s: whether its server runs: %w", r.Info().Name, err)
	}
	return nil
}

// logTail is the last lines of node r's log, for error messages.
func logTail(r Remote) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if err := r.Log(ctx, &b, 15); err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return b.String()
}

// Names are the nodes' names, n1..nN.
func (c *Cluster) Names() []string { return names(c.nodes) }

// Addrs are the addresses the lock clients dial, in node order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, r := range c.nodes {
		addrs[i] = r.Info().Addr
	}
	return addrs
}

// MonitorAddrs are the addresses lock clients dial to find the nodes through the
// monitors; none for most systems.
func (c *Cluster) MonitorAddrs() []string { return c.watchers().Addrs() }

// MonitorNames are the monitors' names, s1 first.
func (c *Cluster) MonitorNames() []string { return c.watchers().Names() }

// IP is node (or monitor) name's address as the other nodes reach it, or "" if there is
// no such node.
func (c *Cluster) IP(name string) string {
	r, err := c.find(slices.Concat(c.nodes, c.monitors), name)
	if err != nil {
		return ""
	}
	return r.Info().IP
}

// Gateway is the address every lock client's traffic to the nodes comes from, as the
// first node sees it: DropFrom(node, Gateway()) cuts the clients off that node.
func (c *Cluster) Gateway() string { return c.nodes[0].Info().Control }

// Remotes are the nodes, n1 first, then the monitors.
func (c *Cluster) Remotes() []Remote { return slices.Concat(c.nodes, c.monitors) }

// Signal sends sig (SIGSTOP, SIGCONT, SIGKILL...) to the server of node name. A gone
// node's has nothing to continue.
func (c *Cluster) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	r, err := c.find(slices.Concat(c.nodes, c.monitors), name)
	if err != nil || sig == syscall.SIGCONT && c.downBy(name) == gone {
		return err
	}
	if err := r.Signal(ctx, sig); err != nil {
		return fmt.Errorf("signal node %s: %w", name, err)
	}
	return nil
}

// Kill crashes node name's server with SIGKILL, as a crash would, and returns once it has
// gone; until Restart its role is system.Down. A node whose place never answered is taken
// as killed, since it may be: Restart copes either way.
func (c *Cluster) Kill(ctx context.Context, name string) error {
	r, err := c.find(c.nodes, name)
	if err != nil {
		return err
	}
	was := c.downBy(name)
	c.setDown(name, killed)
	if err := r.Kill(ctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			c.setDown(name, was) // the place said no: it is as it was
		}
		return fmt.Errorf("kill node %s: %w", name, err)
	}
	return nil
}

// Crash crashes node name's server as Kill does and returns once it has gone, to start
// again at once: in place when the system can crash its server so (its address and disk
// kept, connections refused until it serves again), and otherwise by Kill, which Restart
// undoes. A node that cannot be told to crash (paused, or cut off this host) is killed.
func (c *Cluster) Crash(ctx context.Context, name string) error {
	r, err := c.find(c.nodes, name)
	if err != nil {
		return err
	}
	if c.cfg.Recipe.Crash == nil {
		return c.Kill(ctx, name)
	}
	was := c.downBy(name)
	c.setDown(name, inPlace)
	switch err := c.cfg.Recipe.Crash(ctx, r.Info().Addr); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH):
		c.setDown(name, was)
		return c.Kill(ctx, name)
	default:
		c.setDown(name, was)
		return fmt.Errorf("crash node %s: %w", name, err)
	}
}

// Restart starts node name's crashed server again, with whatever its disk kept, and
// returns once it serves. It is a heal: ctx's end does not cut it; the wait for the node
// to serve has readyTimeout.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	r, err := c.find(c.nodes, name)
	if err != nil {
		return err
	}
	if c.downBy(name) != inPlace {
		if err := r.Start(ctx); err != nil {
			// A server that exits at once may be gone before its place has seen it run.
			if ns := (*NotServingError)(nil); errors.As(exited(ctx, r), &ns) {
				err = ns
			}
			return c.goneIf(name, fmt.Errorf("restart node %s: %w", name, err))
		}
	}
	c.setDown(name, up)
	ready, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	return c.goneIf(name, c.waitReady(ready, r, c.ready))
}

// goneIf marks node name gone when err says it did not serve, and returns err.
func (c *Cluster) goneIf(name string, err error) error {
	if ns := (*NotServingError)(nil); errors.As(err, &ns) {
		c.setDown(name, gone)
	}
	return err
}

// Gone are the nodes that did not serve again after they were started again.
func (c *Cluster) Gone() []string { return names(c.byDown(gone)) }

// RestartKilled starts every node that was killed and not started again.
func (c *Cluster) RestartKilled(ctx context.Context) error {
	return Each(c.byDown(killed, inPlace), func(r Remote) error { return c.Restart(ctx, r.Info().Name) })
}

// SetClock moves the wall clock of node name's server to real time plus offset; the
// server reads it on its next time call.
func (c *Cluster) SetClock(ctx context.Context, name string, offset time.Duration) error {
	r, err := c.find(c.nodes, name)
	if err != nil {
		return err
	}
	switch c.cfg.Clocks {
	case Faketime:
		// libfaketime reads signed seconds ("+500ms" would be 500 minutes).
		err = r.Put(ctx, r.Info().ClockFile, fmt.Appendf(nil, "%+.3f", offset.Seconds()))
	case SystemClock:
		_, err = r.Run(ctx, r.Info().ClockProgram, fmt.Sprintf("%+.6f", offset.Seconds()))
	default:
		err = errors.New("the run's faults move no clocks")
	}
	if err != nil {
		return fmt.Errorf("set clock of node %s: %w", name, err)
	}
	return nil
}

// ResetClocks puts every running node's clock back to real time; nothing when no fault
// moves them.
func (c *Cluster) ResetClocks(ctx context.Context) error {
	if c.cfg.Clocks == FixedClocks {
		return nil
	}
	return Each(c.byDown(up), func(r Remote) error { return c.SetClock(ctx, r.Info().Name, 0) })
}

// Chain is lockbreaker's iptables chain in a node's network namespace, jumped to first
// from INPUT: a heal flushes it alone, and a place's end removes it, so a machine's own
// rules are never touched.
const Chain = "lockbreaker"

// DropFrom makes node name drop every packet from the sources (other nodes' IPs, or
// Gateway: the lock clients and this host), but those to its KeepPort.
func (c *Cluster) DropFrom(ctx context.Context, name string, sources ...string) error {
	if !c.cfg.Partitions {
		return fmt.Errorf("drop traffic to node %s: the cluster runs without partitions", name)
	}
	r, err := c.find(c.nodes, name)
	if err != nil {
		return err
	}
	info := r.Info()
	script := []string{"set -e",
		fmt.Sprintf("iptables -w -N %s 2>/dev/null || true", Chain),
		fmt.Sprintf("iptables -w -C INPUT -j %[1]s 2>/dev/null || iptables -w -I INPUT 1 -j %[1]s", Chain)}
	if info.KeepPort != 0 {
		script = append(script, fmt.Sprintf("iptables -w -C %[1]s -p tcp --dport %[2]d -j RETURN 2>/dev/null || iptables -w -I %[1]s 1 -p tcp --dport %[2]d -j RETURN",
			Chain, info.KeepPort))
	}
	for _, src := range sources {
		if src == c.Gateway() {
			src = info.Control
		}
		ip, err := netip.ParseAddr(src)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("drop traffic to node %s: %s is not an IPv4 address", name, quote.Short(src))
		}
		script = append(script, fmt.Sprintf("iptables -w -A %s -s %s -j DROP", Chain, ip))
	}
	if err := r.NetRun(ctx, strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("cut node %s off %s: %w", name, strings.Join(sources, ", "), err)
	}
	return nil
}

// RemoveChain is a shell script that removes Chain and its jump where iptables and the
// chain exist: a place's end and its clean after a killed run.
const RemoveChain = `if command -v iptables >/dev/null; then
	while iptables -w -D INPUT -j ` + Chain + ` 2>/dev/null; do :; done
	iptables -w -F ` + Chain + ` 2>/dev/null; iptables -w -X ` + Chain + ` 2>/dev/null
fi
true`

// HealNetwork removes every cut DropFrom made, on every node: a node killed where its cuts
// outlive its server (a machine) would otherwise not be seen serving again when started;
// one whose cuts went with it (a container) cannot be asked, and need not be. Nothing when
// the cluster runs without partitions.
func (c *Cluster) HealNetwork(ctx context.Context) error {
	if !c.cfg.Partitions {
		return nil
	}
	return Each(c.nodes, func(r Remote) error {
		name := r.Info().Name
		if err := r.NetRun(ctx, fmt.Sprintf("iptables -w -F %s 2>/dev/null || true", Chain)); err != nil && c.downBy(name) == up {
			return fmt.Errorf("heal node %s's network: %w", name, err)
		}
		return nil
	})
}

// Heal undoes every fault this package can make, the same wherever the nodes live: it
// removes every cut, makes every disk fast again, starts every killed node again,
// continues every node (SIGCONT) and puts every clock back. A gone node is left as it is.
// Run it in a defer.
func (c *Cluster) Heal(ctx context.Context) error {
	network := c.HealNetwork(ctx)
	disks := c.healDisks(ctx)
	restart := c.RestartKilled(ctx)
	cont := Each(c.byDown(up), func(r Remote) error { return c.Signal(ctx, r.Info().Name, syscall.SIGCONT) })
	return errors.Join(network, disks, restart, cont, c.ResetClocks(ctx))
}

// Roles asks every node for its part in the cluster now: system.Down for a node killed
// and not started again (or gone), system.Unknown for one that does not say (paused, cut off from
// this host, between roles).
func (c *Cluster) Roles(ctx context.Context) (map[string]system.Role, error) {
	if c.cfg.Recipe.Role == nil && len(c.cfg.Recipe.RoleIn) == 0 {
		return nil, fmt.Errorf("the nodes of a %s cluster have no roles", c.cfg.System)
	}
	var mu sync.Mutex
	roles := map[string]system.Role{}
	for _, r := range c.byDown(killed, inPlace, gone) {
		roles[r.Info().Name] = system.Down
	}
	err := Each(c.byDown(up), func(r Remote) error {
		role, err := c.role(ctx, r)
		if err != nil || role == "" {
			role = system.Unknown
		}
		mu.Lock()
		roles[r.Info().Name] = role
		mu.Unlock()
		return nil
	})
	return roles, err
}

// role asks node r for its role: the recipe's probe, or its command run on the node (a
// system file's role: {command: ...}).
func (c *Cluster) role(ctx context.Context, r Remote) (system.Role, error) {
	if len(c.cfg.Recipe.RoleIn) == 0 {
		return c.cfg.Recipe.Role(ctx, r.Info().Addr)
	}
	out, err := probe(ctx, r, c.cfg.Recipe.RoleIn)
	if err != nil {
		return "", err
	}
	return system.ParseRole(out)
}

// Leader returns the name of the node that leads the cluster now.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	if c.cfg.Recipe.Role == nil && len(c.cfg.Recipe.RoleIn) == 0 {
		return "", fmt.Errorf("a %s cluster has no leader", c.cfg.System)
	}
	for _, r := range c.byDown(up) {
		if role, err := c.role(ctx, r); err == nil && role == system.Leader {
			return r.Info().Name, nil
		}
	}
	return "", fmt.Errorf("no %s node says it leads", c.cfg.System)
}

// Promote makes the monitors promote a replica now (SENTINEL FAILOVER), asking each in
// turn until one agrees.
func (c *Cluster) Promote(ctx context.Context) error {
	return c.cfg.Recipe.Monitors.PromoteAny(ctx, c.cfg.System, c.watchers())
}

// Announced is the node every monitor now gives clients as the primary; "" when they do
// not all name the same node (a failover under way), or when one cannot be asked.
func (c *Cluster) Announced(ctx context.Context) (string, error) {
	i, err := c.cfg.Recipe.Monitors.Announced(ctx, c.cfg.System, c.watchers(), c.Addrs())
	if err != nil || i < 0 {
		return "", err
	}
	return c.nodes[i].Info().Name, nil
}

// watchers are the monitors as the system's recipe asks them.
func (c *Cluster) watchers() system.Watchers {
	ws := make(system.Watchers, len(c.monitors))
	for i, r := range c.monitors {
		ws[i] = system.Watcher{Name: r.Info().Name, Addr: r.Info().Addr}
	}
	return ws
}

// CollectLogs writes each node's and monitor's log to dir/<name>.log.
func (c *Cluster) CollectLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("collect node logs: %w", err)
	}
	return Each(c.Remotes(), func(r Remote) error {
		name := r.Info().Name
		f, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return fmt.Errorf("collect log of node %s: %w", name, err)
		}
		err = errors.Join(r.Log(ctx, f, 0), f.Close())
		if err != nil {
			return fmt.Errorf("collect log of node %s: %w", name, err)
		}
		return nil
	})
}

// setDown notes how node name went down, or that it serves again (up).
func (c *Cluster) setDown(name string, by downBy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if by != up {
		c.down[name] = by
	} else {
		delete(c.down, name)
	}
}

func (c *Cluster) downBy(name string) downBy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down[name]
}

// byDown are the nodes that are down (or up) as one of bys says.
func (c *Cluster) byDown(bys ...downBy) []Remote {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rs []Remote
	for _, r := range c.nodes {
		if slices.Contains(bys, c.down[r.Info().Name]) {
			rs = append(rs, r)
		}
	}
	return rs
}

func (c *Cluster) find(rs []Remote, name string) (Remote, error) {
	for _, r := range rs {
		if r.Info().Name == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no node %q in the %s cluster", name, c.cfg.System)
}

func names(rs []Remote) []string {
	ns := make([]string, len(rs))
	for i, r := range rs {
		ns[i] = r.Info().Name
	}
	return ns
}

// Each runs f on every one of rs at once and joins the errors: a heal must take effect on
// all nodes together, not one after another.
func Each(rs []Remote, f func(Remote) error) error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { errs[i] = f(r) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

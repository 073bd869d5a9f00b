package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
)

// Signal sends sig (SIGSTOP, SIGCONT, SIGKILL...) to the server of node name. It is sent
// from outside through the engine: PID 1 of a container ignores SIGSTOP sent from inside
// its own namespace. A busy engine is asked again (engineCall): a signal sent twice does
// what it does once.
func (c *Cluster) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	cli, _ := docker()
	signal := unix.SignalName(sig)
	return engineCall(ctx, fmt.Sprintf("send %s to node %s", signal, name), func(ctx context.Context, again bool) error {
		_, err := cli.ContainerKill(ctx, n.ContainerID, client.ContainerKillOptions{Signal: signal})
		if sig == syscall.SIGKILL && again && notRunning(err) {
			return nil // the SIGKILL that went unanswered
		}
		return err
	})
}

// Leader returns the name of the node that leads the cluster now.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	if c.recipe.Role == nil && len(c.recipe.RoleIn) == 0 {
		return "", fmt.Errorf("a %s cluster has no leader", c.spec.System)
	}
	for _, n := range c.running() {
		if role, err := c.role(ctx, n); err == nil && role == system.Leader {
			return n.Name, nil
		}
	}
	return "", fmt.Errorf("no %s node says it leads", c.spec.System)
}

// Promote makes the monitors promote a replica now (SENTINEL FAILOVER), asking each in
// turn until one agrees.
func (c *Cluster) Promote(ctx context.Context) error {
	return c.recipe.Monitors.PromoteAny(ctx, c.spec.System, c.watchers())
}

// Announced is the node every monitor now gives clients as the primary; "" when they do
// not all name the same node (a failover under way), or when one cannot be asked.
func (c *Cluster) Announced(ctx context.Context) (string, error) {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	i, err := c.recipe.Monitors.Announced(ctx, c.spec.System, c.watchers(), addrs)
	if err != nil || i < 0 {
		return "", err
	}
	return c.nodes[i].Name, nil
}

// watchers are the monitors as the system's recipe asks them.
func (c *Cluster) watchers() system.Watchers {
	ws := make(system.Watchers, len(c.monitors))
	for i, n := range c.monitors {
		ws[i] = system.Watcher{Name: n.Name, Addr: n.Addr()}
	}
	return ws
}

// Exec runs cmd in node name and returns its combined output. A non-zero exit
// status is an error carrying the output. The faults' commands (iptables, the clock file)
// run through it, so a busy engine is asked again (engineCall): cmd must be safe to run
// twice, since a try that went unanswered may have run it.
func (c *Cluster) Exec(ctx context.Context, name string, cmd ...string) (output string, err error) {
	n, err := c.node(name)
	if err != nil {
		return "", err
	}
	err = engineCall(ctx, fmt.Sprintf("exec %q in node %s", strings.Join(cmd, " "), name), func(ctx context.Context, _ bool) error {
		output, err = execIn(ctx, n.ContainerID, cmd)
		return err
	})
	return output, err
}

// execIn runs cmd in a container, once, within ctx: its output stream too, which the
// engine's client does not tie to ctx once attached.
func execIn(ctx context.Context, containerID string, cmd []string) (string, error) {
	cli, _ := docker()
	created, err := cli.ExecCreate(ctx, containerID, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	attached, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer attached.Close()
	stop := context.AfterFunc(ctx, attached.Close)
	defer stop()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, attached.Reader); err != nil {
		return out.String(), err
	}
	res, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		return out.String(), err
	}
	if res.ExitCode != 0 {
		return out.String(), fmt.Errorf("exit status %d: %s", res.ExitCode, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// SetClock moves the wall clock of node name's server to real time plus offset. The
// server reads it on its next time call. The cluster must have been started with
// Spec.Faketime.
func (c *Cluster) SetClock(ctx context.Context, name string, offset time.Duration) error {
	if !c.spec.Faketime {
		return fmt.Errorf("set clock of node %s: the cluster runs without faketime", name)
	}
	// libfaketime reads seconds, with an optional m/h/d/y suffix ("+500ms" would be 500
	// minutes), so the offset is written as signed seconds: "+0.500".
	seconds := fmt.Sprintf("%+.3f", offset.Seconds())
	if c.sharesProcesses(ctx) {
		// Written from this host: a docker exec takes a second on a busy machine, longer
		// than a clock fault that must land within a lease can wait. A local image may have
		// no shell to write it with either (own.go).
		n, err := c.node(name)
		if err != nil {
			return err
		}
		path := nodeClockFile
		if c.local() {
			path = faketimeDir + "/offset"
		}
		return c.setClockFromHost(ctx, n, path, seconds)
	}
	return c.setClockInNode(ctx, name, seconds)
}

// setClockInNode writes node name's clock offset file by a shell in the node, where this
// host cannot reach into it: a new file (of this shell's own, so two settings at once do
// not rename each other's away) renamed over the old one, since the server reads the file
// on every time call and must never see it half written.
func (c *Cluster) setClockInNode(ctx context.Context, name, seconds string) error {
	_, err := c.Exec(ctx, name, "sh", "-c", `printf '%s' "$1" > "$2.new.$$" && mv -f "$2.new.$$" "$2"`, "sh", seconds, nodeClockFile)
	return err
}

// nodeClockFile is the node image's clock offset file, which libfaketime reads
// (FAKETIME_TIMESTAMP_FILE, set by the image's entry point).
const nodeClockFile = "/lockbreaker/faketime"

// ResetClocks puts every node's clock back to real time. It does nothing when
// the cluster runs without faketime.
func (c *Cluster) ResetClocks(ctx context.Context) error {
	if !c.spec.Faketime {
		return nil
	}
	return c.each(c.running(), func(n Node) error { return c.SetClock(ctx, n.Name, 0) })
}

// DropFrom makes node name drop every packet coming from the given source
// IPs (iptables INPUT rules in the node's network namespace: made from this host with
// its own nsenter and iptables when it can, so the node needs neither, else by iptables
// run inside the node). Dropping Gateway() cuts the
// host's lock clients off the node; dropping other nodes' IPs partitions the
// cluster. HealNetwork removes the rules.
func (c *Cluster) DropFrom(ctx context.Context, name string, sources ...string) error {
	if !c.spec.Partitions {
		return fmt.Errorf("drop traffic to node %s: the cluster runs without partitions (Spec.Partitions)", name)
	}
	args := []string{"sh", "-c", `for ip; do iptables -w -I INPUT -s "$ip" -j DROP || exit 1; done`, "sh"}
	for _, s := range sources {
		ip, err := netip.ParseAddr(s)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("drop traffic to node %s: %s is not an IPv4 address", name, quote.Short(s))
		}
		args = append(args, ip.String())
	}
	if c.fromHost(ctx) { // the same rules, made from this host: the node needs no iptables (own.go)
		n, err := c.node(name)
		if err != nil {
			return err
		}
		for _, ip := range args[4:] {
			if err := c.inNetns(ctx, n, "-I", "INPUT", "-s", ip, "-j", "DROP"); err != nil {
				return fmt.Errorf("drop traffic to node %s: %w", name, err)
			}
		}
		return nil
	}
	_, err := c.Exec(ctx, name, args...)
	return err
}

// HealNetwork removes every rule DropFrom added, on every node. It does nothing when
// the cluster runs without partitions.
func (c *Cluster) HealNetwork(ctx context.Context) error {
	if !c.spec.Partitions {
		return nil
	}
	return c.each(c.running(), func(n Node) error {
		if c.fromHost(ctx) {
			return c.inNetns(ctx, n, "-F", "INPUT")
		}
		_, err := c.Exec(ctx, n.Name, "iptables", "-w", "-F", "INPUT")
		return err
	})
}

// Heal undoes every fault this package can inject: it starts every killed node again,
// continues every node (SIGCONT), removes the partitions and resets the clocks. Run it
// in a defer. Like every heal here it is not cut by ctx's end: its calls into the engine
// have deadlines of their own and are tried again (engineCall).
func (c *Cluster) Heal(ctx context.Context) error {
	restart := c.RestartKilled(ctx)
	cont := c.each(c.running(), func(n Node) error { return c.Signal(ctx, n.Name, syscall.SIGCONT) })
	return errors.Join(restart, cont, c.HealNetwork(ctx), c.ResetClocks(ctx))
}

// RestartKilled starts every node that was killed and not started again.
func (c *Cluster) RestartKilled(ctx context.Context) error {
	return c.each(c.killed(), func(n Node) error { return c.Restart(ctx, n.Name) })
}

// Kill crashes node name's server with SIGKILL, as a crash would, and returns once its
// container has stopped. The container keeps its disk, which Restart starts the server
// on again; until then the node's role is system.Down. A busy engine is asked again
// (engineCall); a node the engine never answered for is taken as killed, since it may
// be: Restart copes either way (the engine takes the start of a running container as
// done).
func (c *Cluster) Kill(ctx context.Context, name string) error {
	n, err := c.lockNode(name)
	if err != nil {
		return err
	}
	cli, _ := docker()
	c.setDown(name, killed)
	err = engineCall(ctx, "kill node "+name, func(ctx context.Context, again bool) error {
		// Waiting for "not running" returns at once for a container already stopped, so asking
		// before the kill cannot miss it.
		stopped := cli.ContainerWait(ctx, n.ContainerID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		if _, err := cli.ContainerKill(ctx, n.ContainerID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil &&
			!(again && notRunning(err)) { // stopped by the SIGKILL that went unanswered
			return err
		}
		select {
		case <-stopped.Result:
			return nil
		case err := <-stopped.Error:
			return fmt.Errorf("wait for it to stop: %w", err)
		}
	})
	if err != nil && !errors.As(err, new(*SlowEngineError)) {
		c.setDown(name, 0) // the engine said no: it runs as it did
	}
	return err
}

// Crash crashes node name's server as Kill does and returns once it has gone, to start
// again at once: in place when the system can crash its server so (the container, its
// address and its disk kept, connections refused until the server serves again, as under
// a supervisor that restarts it), and otherwise by killing the container, which Restart
// then starts. Restart returns once the node serves again, either way. A node that cannot
// be told to crash (paused, or cut off this host) has its container killed.
func (c *Cluster) Crash(ctx context.Context, name string) error {
	n, err := c.lockNode(name)
	if err != nil {
		return err
	}
	if c.recipe.Crash == nil {
		return c.Kill(ctx, name)
	}
	c.setDown(name, inPlace)
	switch err := c.recipe.Crash(ctx, n.Addr()); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH):
		return c.Kill(ctx, name)
	default:
		c.setDown(name, 0)
		return fmt.Errorf("crash node %s: %w", name, err)
	}
}

// Restart starts node name's crashed server again, with whatever its disk kept, and returns
// once it serves. A node that came back at another address is an error: the lock clients
// and the monitors know it by its address. It is a heal: neither ctx's end nor its
// deadline cuts it; its engine calls have deadlines of their own (engineCall), and the
// wait for the node to serve readyTimeout.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	n, err := c.lockNode(name)
	if err != nil {
		return err
	}
	if c.downBy(name) != inPlace {
		if err := c.startAgain(ctx, n); err != nil {
			return err
		}
	}
	c.setDown(name, 0)
	ready, cancelReady := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancelReady()
	return c.waitReady(ready, n, c.ready)
}

// Roles asks every node for its part in the cluster now: system.Down for a node killed
// and not started again, system.Unknown for one that does not say (paused, cut off from
// this host, between roles).
func (c *Cluster) Roles(ctx context.Context) (map[string]system.Role, error) {
	if c.recipe.Role == nil && len(c.recipe.RoleIn) == 0 {
		return nil, fmt.Errorf("the nodes of a %s cluster have no roles", c.spec.System)
	}
	var mu sync.Mutex
	roles := map[string]system.Role{}
	for _, n := range c.killed() {
		roles[n.Name] = system.Down
	}
	err := c.each(c.running(), func(n Node) error {
		role, err := c.role(ctx, n)
		if err != nil || role == "" {
			role = system.Unknown
		}
		mu.Lock()
		roles[n.Name] = role
		mu.Unlock()
		return nil
	})
	return roles, err
}

// role asks node n for its role: the recipe's probe, or its command run in the node (a
// system file's role: {command: ...}).
func (c *Cluster) role(ctx context.Context, n Node) (system.Role, error) {
	if len(c.recipe.RoleIn) == 0 {
		return c.recipe.Role(ctx, n.Addr())
	}
	out, err := probeIn(ctx, n, c.recipe.RoleIn)
	if err != nil {
		return "", err
	}
	return system.ParseRole(out)
}

// startAgain starts the stopped container of n and checks it kept its address. A busy
// engine is asked again (engineCall), after a look at the container: the start that went
// unanswered may have happened, and a container running already is not started twice.
func (c *Cluster) startAgain(ctx context.Context, n Node) error {
	cli, _ := docker()
	return engineCall(ctx, "restart node "+n.Name, func(ctx context.Context, again bool) error {
		start := true
		if again {
			info, err := cli.ContainerInspect(ctx, n.ContainerID, client.ContainerInspectOptions{})
			if err != nil {
				return err
			}
			start = info.Container.State == nil || !info.Container.State.Running
		}
		if start {
			if _, err := cli.ContainerStart(ctx, n.ContainerID, client.ContainerStartOptions{}); err != nil {
				return err
			}
		}
		switch ip, err := c.containerIP(ctx, n); {
		case err != nil:
			return err
		case ip != n.IP:
			return fmt.Errorf("it came back at %s, not %s, where the clients look for it", ip, n.IP)
		}
		return nil
	})
}

// setDown notes how node name went down; 0: it serves again.
func (c *Cluster) setDown(name string, by downBy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if by != 0 {
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

// running are the nodes whose servers run (or are paused); killed those that were killed
// and not started again.
func (c *Cluster) running() []Node { return c.byDown(false) }
func (c *Cluster) killed() []Node  { return c.byDown(true) }

func (c *Cluster) byDown(down bool) []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var nodes []Node
	for _, n := range c.nodes {
		if (c.down[n.Name] != 0) == down {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// each runs f on every one of nodes at once and joins the errors: a heal must take effect
// on all nodes together, not one docker exec after another.
func (c *Cluster) each(nodes []Node, f func(Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CollectLogs writes each node's (and monitor's) container log (stdout and stderr, each line
// prefixed with the engine's real-time timestamp, since the server's own
// timestamps may be faked) to dir/<node>.log.
func (c *Cluster) CollectLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("collect node logs: %w", err)
	}
	return c.each(slices.Concat(c.nodes, c.monitors), func(n Node) error {
		f, err := os.Create(filepath.Join(dir, n.Name+".log"))
		if err != nil {
			return fmt.Errorf("collect log of node %s: %w", n.Name, err)
		}
		err = writeLog(ctx, n.ContainerID, f, "")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("collect log of node %s: %w", n.Name, err)
		}
		return nil
	})
}

// writeLog copies a container's log to w: the last tail lines, or all when
// tail is "".
func writeLog(ctx context.Context, containerID string, w io.Writer, tail string) error {
	cli, _ := docker()
	logs, err := cli.ContainerLogs(ctx, containerID, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Timestamps: tail == "", Tail: tail,
	})
	if err != nil {
		return err
	}
	defer logs.Close()
	_, err = stdcopy.StdCopy(w, w, logs)
	return err
}

// logTail returns the last lines of node n's log, for error messages.
func (c *Cluster) logTail(n Node) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b bytes.Buffer
	if err := writeLog(ctx, n.ContainerID, &b, "15"); err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return b.String()
}

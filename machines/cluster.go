package machines

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/system"
)

// Dir is lockbreaker's own directory on a machine: node n's server keeps its files, its
// log and its pidfile under Dir/n, and nothing of lockbreaker's is anywhere else.
const Dir = "/var/lib/lockbreaker"

// nodeRoot is where a node's setup keeps its files in a container (system.NodeSetup's
// paths start with it); on a machine they move under Dir/<node>.
const nodeRoot = "/lockbreaker/"

// Systems are the systems whose nodes run on machines so far: their servers start from a
// command line and files alone, with no script of the node image's.
var Systems = []string{"redis", "redlock"}

// Tools are the commands sys's nodes run, which a machine must have to serve as one.
func Tools(sys system.System, setup system.Cluster) []string {
	return []string{path.Base(sys.Container.Node(setup, 1).Cmd[0])}
}

// Cluster is a system's nodes on machines, node i on the i-th machine, each server started
// from the setup its container would run, in the background with a pidfile: every fault
// aims at that process id, never at a name.
type Cluster struct {
	sys   system.System
	nodes []node

	stopped sync.Once
	stopErr error
}

// node is one node of a Cluster.
type node struct {
	name string
	m    *Machine
	addr string // host:port its clients dial
}

func (n node) dir() string     { return Dir + "/" + n.name }
func (n node) pidfile() string { return n.dir() + "/pid" }
func (n node) log() string     { return n.dir() + "/server.log" }

// StartCluster starts sys's nodes on the first machines of ms, one each, as setup says,
// and waits until each serves. Whatever an earlier run left under Dir on them is stopped
// and removed first. On an error nothing is left.
func StartCluster(ctx context.Context, ms []*Machine, sys system.System, setup system.Cluster, progress io.Writer) (*Cluster, error) {
	if sys.Container == nil || !slices.Contains(Systems, sys.Name) {
		return nil, fmt.Errorf("%s does not run on machines yet (those that do: %s)", sys.Name, strings.Join(Systems, ", "))
	}
	if len(ms) < setup.Nodes {
		return nil, fmt.Errorf("%s needs %d machines, and the machines file names %d", sys.Name, setup.Nodes, len(ms))
	}
	c := &Cluster{sys: sys}
	for i := range setup.Nodes {
		host := ms[i].addr.Host
		c.nodes = append(c.nodes, node{name: "n" + strconv.Itoa(i+1), m: ms[i], addr: net.JoinHostPort(host, strconv.Itoa(sys.Container.Port))})
	}
	fmt.Fprintf(progress, "starting %s on %d machines (%s)\n", sys.Name, setup.Nodes, c.machineNames())
	err := c.each(func(i int, n node) error {
		if err := n.stop(ctx); err != nil {
			return err
		}
		return n.start(ctx, relocated(sys.Container.Node(setup, i+1), n.dir()+"/"))
	})
	if err == nil {
		err = c.each(func(_ int, n node) error { return n.waitReady(ctx, sys.Container.Ready) })
	}
	if err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	return c, nil
}

// machineNames names the cluster's machines, in node order.
func (c *Cluster) machineNames() string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.m.Name()
	}
	return strings.Join(names, ", ")
}

// each does f to every node at once, and joins their errors.
func (c *Cluster) each(f func(i int, n node) error) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = f(i, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// relocated is setup with every path under nodeRoot moved under root, in its command
// line, its files' paths and their contents.
func relocated(setup system.NodeSetup, root string) system.NodeSetup {
	move := func(s string) string { return strings.ReplaceAll(s, nodeRoot, root) }
	out := system.NodeSetup{}
	for _, w := range setup.Cmd {
		out.Cmd = append(out.Cmd, move(w))
	}
	for _, f := range setup.Files {
		out.Files = append(out.Files, system.File{Path: move(f.Path), Content: move(f.Content)})
	}
	return out
}

// start writes the node's files and starts its server in a session of its own, its pid
// in the pidfile, its output in its log.
func (n node) start(ctx context.Context, setup system.NodeSetup) error {
	var script []string
	dirs := map[string]bool{n.dir(): true}
	for _, f := range setup.Files {
		dirs[path.Dir(f.Path)] = true
	}
	for d := range dirs {
		script = append(script, "mkdir -p "+shellwords.Quote(d))
	}
	for _, f := range setup.Files {
		script = append(script, fmt.Sprintf("echo %s | base64 -d > %s", base64.StdEncoding.EncodeToString([]byte(f.Content)), shellwords.Quote(f.Path)))
	}
	// The server itself is what goes into the background, so $! is its pid (setsid execs
	// it), and it holds none of the session's descriptors, which would keep it open.
	script = append(script, "cd "+shellwords.Quote(n.dir()), fmt.Sprintf("setsid %s > %s 2>&1 < /dev/null & echo $! > %s",
		shellwords.Join(setup.Cmd), shellwords.Quote(n.log()), shellwords.Quote(n.pidfile())))
	if _, err := n.m.Sudo(ctx, "set -e\n"+strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("start node %s: %w", n.name, err)
	}
	return nil
}

// waitReady polls ready from here until the node serves, within two minutes.
func (n node) waitReady(ctx context.Context, ready func(context.Context, string) error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err := ready(ctx, n.addr)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s on %s (%s) not serving: %w (%v); log ends: %s", n.name, n.m.Name(), n.addr, ctx.Err(), err, n.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail is the last lines of the node's log, or why it cannot be read.
func (n node) logTail() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := n.m.Sudo(ctx, "tail -n 5 "+shellwords.Quote(n.log()))
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(r.Stdout))
}

// signal sends sig to the node's server, named by its pidfile.
func (n node) signal(ctx context.Context, sig syscall.Signal) error {
	_, err := n.m.Sudo(ctx, fmt.Sprintf("kill -%d \"$(cat %s)\"", int(sig), shellwords.Quote(n.pidfile())))
	if err != nil {
		return fmt.Errorf("signal node %s: %w", n.name, err)
	}
	return nil
}

// stop kills the node's server, if its pidfile names one, and removes its directory, and
// Dir once it is empty.
func (n node) stop(ctx context.Context) error {
	pidfile := shellwords.Quote(n.pidfile())
	_, err := n.m.Sudo(ctx, fmt.Sprintf("if [ -f %s ]; then kill -KILL \"$(cat %s)\" 2>/dev/null; fi; rm -rf %s; rmdir %s 2>/dev/null; true",
		pidfile, pidfile, shellwords.Quote(n.dir()), shellwords.Quote(Dir)))
	if err != nil {
		return fmt.Errorf("stop node %s: %w", n.name, err)
	}
	return nil
}

// Names are the nodes, n1 first.
func (c *Cluster) Names() []string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.name
	}
	return names
}

// Addrs are the addresses the lock clients dial, in node order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// Signal sends sig to node name's server.
func (c *Cluster) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	for _, n := range c.nodes {
		if n.name == name {
			return n.signal(ctx, sig)
		}
	}
	return fmt.Errorf("no node %s", name)
}

// Heal lets every paused server run again.
func (c *Cluster) Heal(ctx context.Context) error {
	return c.each(func(_ int, n node) error { return n.signal(ctx, syscall.SIGCONT) })
}

// CollectLogs brings each node's log into dir as <node>.log.
func (c *Cluster) CollectLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return c.each(func(_ int, n node) error {
		r, err := n.m.Sudo(ctx, "cat "+shellwords.Quote(n.log()))
		if err != nil {
			return fmt.Errorf("log of node %s: %w", n.name, err)
		}
		return os.WriteFile(filepath.Join(dir, n.name+".log"), r.Stdout, 0o644)
	})
}

// Stop kills every node's server and removes lockbreaker's directory from the machines.
// It is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopped.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c.stopErr = c.each(func(_ int, n node) error { return n.stop(ctx) })
	})
	return c.stopErr
}

// Clean kills every server a run left on m (the pidfiles under Dir name them) and removes
// Dir: what a run killed with SIGKILL leaves. It returns how many servers it killed.
func Clean(ctx context.Context, m *Machine) (int, error) {
	r, err := m.Sudo(ctx, fmt.Sprintf(`n=0
for p in %s/*/pid; do
	[ -f "$p" ] || continue
	kill -KILL "$(cat "$p")" 2>/dev/null && n=$((n+1))
done
rm -rf %s
echo $n`, shellwords.Quote(Dir), shellwords.Quote(Dir)))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
}

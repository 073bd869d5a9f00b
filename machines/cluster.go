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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/system"
)

// Dir is lockbreaker's own directory on a machine: node n's server keeps its files, its
// log and its pidfile under Dir/n, and nothing of lockbreaker's is anywhere else.
const Dir = "/var/lib/lockbreaker"

// nodeRoot is where a node's setup keeps its files in a container (system.NodeSetup's
// paths start with it); on a machine they move under Dir/<node>.
const nodeRoot = "/lockbreaker/"

// Systems are the built-in systems whose nodes run on machines: their servers start from
// a command line, files and their image's preparation alone. A system's monitors
// (Sentinel's) run on machines of their own, after the nodes' in the machines file. A
// system described in a file runs there when its file says how (system.OnMachine).
var Systems = []string{"redis", "redlock", "sentinel", "zookeeper", "etcd", "postgres"}

// Runs says why sys's nodes cannot run on machines; nil when they can.
func Runs(sys system.System) error {
	switch {
	case sys.Container != nil && (slices.Contains(Systems, sys.Name) || sys.Container.OnMachine != nil):
		return nil
	case sys.Container != nil && !system.BuiltIn(sys.Name):
		return fmt.Errorf("the system file of %s says nothing of machines: give it a machine key (docs/systems.md)", sys.Name)
	}
	return fmt.Errorf("%s does not run on machines (those that do: %s, and a system file's with a machine key)",
		sys.Name, strings.Join(Systems, ", "))
}

// Packages are the Debian packages a machine needs for sys's nodes: a built-in system's,
// as its node image has them (system.System.Packages), or a system file's own and those
// the faults use on a node.
func Packages(sys system.System) []string {
	if system.BuiltIn(sys.Name) {
		return sys.Packages()
	}
	pkgs := []string{"libfaketime", "iptables"}
	if img := sys.Container.Image; img != nil {
		pkgs = append(pkgs, img.Packages...)
	}
	return pkgs
}

// nodeSetup is the command and files of node id of sys on a machine, before they are moved
// under its directory.
func nodeSetup(sys system.System, setup system.Cluster, id int) system.NodeSetup {
	ns := sys.Container.Node(setup, id)
	if m := sys.Container.OnMachine; m != nil && m.Cmd != nil {
		ns.Cmd = m.Cmd(setup, id)
	}
	return ns
}

// Tools are what sys's nodes (and monitors) run, which a machine must have to serve as one:
// the command, and every other program or file its words name by their paths (a shell's
// script, the jars of a class path), but those the run puts there itself.
func Tools(sys system.System, setup system.Cluster) []string {
	ns := nodeSetup(sys, setup, 1)
	tools := commandTools(ns.Cmd, ownPaths(sys, ns))
	if m := sys.Container.Monitors; m != nil {
		for _, t := range commandTools(m.Node(setup, 1).Cmd, nil) {
			if !slices.Contains(tools, t) {
				tools = append(tools, t)
			}
		}
	}
	return tools
}

// commandTools are what cmd runs: its program, and the programs and files its words name by
// their paths, but the node's own and those of own.
func commandTools(cmd, own []string) []string {
	ours := func(p string) bool { return strings.HasPrefix(p+"/", nodeRoot) || slices.Contains(own, p) }
	var tools []string
	if c := path.Base(cmd[0]); c != "sh" && !ours(cmd[0]) {
		tools = append(tools, c)
	}
	for _, w := range cmd[1:] {
		if strings.Contains(w, "://") {
			continue // a URL
		}
		for _, p := range strings.Split(w, ":") {
			if path.IsAbs(p) && !ours(p) && !slices.Contains(tools, p) {
				tools = append(tools, p)
			}
		}
	}
	return tools
}

// ownPaths are the paths outside nodeRoot that a node of sys writes before it starts (a
// system file's files and copied programs), which move under its directory on a machine.
func ownPaths(sys system.System, ns system.NodeSetup) []string {
	var own []string
	for _, f := range ns.Files {
		if !strings.HasPrefix(f.Path, nodeRoot) {
			own = append(own, f.Path)
		}
	}
	if img := sys.Container.Image; img != nil {
		for _, c := range img.Copy {
			own = append(own, c.To)
		}
	}
	return own
}

// Cluster is a system's nodes on machines, node i on the i-th machine, each server started
// from the setup its container would run, in the background with a pidfile: every fault
// aims at that process id, never at a name. The faults are nodes.Cluster's, reached over
// SSH (node).
type Cluster struct {
	*nodes.Cluster
	servers []node // the nodes, then the monitors (Sentinels) on the machines after theirs

	stopped sync.Once
	stopErr error
}

// node is one server of a Cluster as a nodes.Remote.
type node struct {
	name  string
	m     *Machine
	addr  string           // host:port its clients dial
	setup system.NodeSetup // relocated under its directory
	// move moves the paths of the node's container recipe under its directory.
	move func(string) string
	// ip is the machine's address as this host reaches it, control this host's as the
	// machine sees it: what partitions cut.
	ip, control string
	// prepare is what the system's node image does once, when it is built (make a data
	// directory, initdb), or a system file's machine preparation, relocated too: a fresh
	// start does it first, in the node's directory, once copies are in place.
	prepare string
	// copies are a system file's programs copied from this host, relocated.
	copies []system.CopyFile
	clocks nodes.Clocks
	// disk, when set, is the disk its data directory is served on (disk.go).
	disk *nodes.Disk
}

func (n node) dir() string     { return Dir + "/" + n.name }
func (n node) pidfile() string { return n.dir() + "/pid" }
func (n node) log() string     { return n.dir() + "/server.log" }

// clockFile is the offset libfaketime reads the server's wall clock from, on every time
// call (FAKETIME_TIMESTAMP_FILE), when the servers run under it, as its container names it.
const clockFile = nodeRoot + "faketime"

// StartCluster starts sys's nodes on the first machines of ms, one each, as setup says,
// and waits until each serves; clocks says how SetClock moves their wall clocks (under
// libfaketime, every server is started under it); with disks each node's data directory
// is served on a disk that can lose power (disk.go). Whatever an earlier run left under
// Dir on them is stopped and removed first. On an error nothing is left.
func StartCluster(ctx context.Context, ms []*Machine, sys system.System, setup system.Cluster, clocks nodes.Clocks, disks bool, progress io.Writer) (*Cluster, error) {
	if err := Runs(sys); err != nil {
		return nil, err
	}
	mons := sys.Container.Monitors
	monitors := 0
	if mons != nil {
		monitors = mons.Count
	}
	if len(ms) < setup.Nodes+monitors {
		return nil, fmt.Errorf("%s needs %d machines, and the machines file names %d", sys.Name, setup.Nodes+monitors, len(ms))
	}
	setup.Hosts = nil
	for i := range setup.Nodes {
		setup.Hosts = append(setup.Hosts, ms[i].addr.Host)
	}
	c := &Cluster{}
	for i := range setup.Nodes + monitors {
		// The clients dial the pooler in front of the server when the run has one.
		name, port, ns := "n"+strconv.Itoa(i+1), sys.Container.ClientPort(setup.Pooler), nodeSetup(sys, setup, i+1)
		if i >= setup.Nodes {
			id := i - setup.Nodes + 1
			name, port, ns = mons.Prefix+strconv.Itoa(id), mons.Port, mons.Node(setup, id)
		}
		n, err := newNode(ctx, ms[i], sys, name, port, ns, clocks)
		if err != nil {
			return nil, err
		}
		if disks && i < setup.Nodes {
			n = n.withDisk(sys.Container.Data)
		}
		c.servers = append(c.servers, n)
	}
	fmt.Fprintf(progress, "starting %s on %d machines (%s)\n", sys.Name, setup.Nodes+monitors, c.machineNames())
	fresh := func(ns []node) error {
		return eachOf(ns, func(_ int, n node) error {
			if err := n.stop(ctx); err != nil {
				return err
			}
			return n.start(ctx, true)
		})
	}
	cfg := nodes.Config{System: sys.Name, Recipe: sys.Container, Clocks: clocks, Partitions: true}
	ns, mns := c.servers[:setup.Nodes], c.servers[setup.Nodes:]
	c.Cluster = nodes.New(cfg, remotes(ns), nil)
	err := fresh(ns)
	if err == nil {
		err = c.WaitNodes(ctx)
	}
	if err == nil && monitors > 0 { // once the nodes serve, as in containers
		c.Cluster = nodes.New(cfg, remotes(ns), remotes(mns))
		if err = fresh(mns); err == nil {
			err = c.WaitMonitors(ctx, setup)
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	return c, nil
}

func remotes(ns []node) []nodes.Remote {
	rs := make([]nodes.Remote, len(ns))
	for i, n := range ns {
		rs[i] = n
	}
	return rs
}

// newNode is server name on machine m, its clients dialing it at port, started as setup
// says, relocated under its directory.
func newNode(ctx context.Context, m *Machine, sys system.System, name string, port int, setup system.NodeSetup, clocks nodes.Clocks) (node, error) {
	ip, control, err := m.addresses(ctx)
	if err != nil {
		return node{}, err
	}
	n := node{name: name, m: m, addr: net.JoinHostPort(m.addr.Host, strconv.Itoa(port)), ip: ip, control: control, clocks: clocks}
	n.move = mover(n.dir(), ownPaths(sys, setup))
	n.setup = relocated(setup, n.move)
	img, on := sys.Container.Image, sys.Container.OnMachine
	switch {
	case on != nil:
		n.prepare = n.move(on.Prepare)
	case img != nil:
		n.prepare = n.move(img.Prepare)
	}
	if img != nil {
		for _, c := range img.Copy {
			n.copies = append(n.copies, system.CopyFile{From: c.From, To: n.move(c.To), Mode: c.Mode})
		}
	}
	return n, nil
}

// machineNames names the cluster's machines, the nodes' in order, then the monitors'.
func (c *Cluster) machineNames() string {
	var names []string
	for _, n := range c.servers {
		names = append(names, n.m.Name())
	}
	return strings.Join(names, ", ")
}

// eachOf does f to every one of ns at once, and joins their errors.
func eachOf(ns []node, f func(i int, n node) error) error {
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = f(i, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// inDir is a command that runs shell script with directory dir as its $1.
func inDir(script, dir string) string {
	return "sh -c " + shellwords.Quote(script) + " sh " + shellwords.Quote(dir)
}

// mover moves every path under nodeRoot, and each of own, under the node directory dir,
// wherever a text names it.
func mover(dir string, own []string) func(string) string {
	pairs := []string{nodeRoot, dir + "/"}
	// The longest first, so that a path is moved whole before a shorter one in it is.
	slices.SortFunc(own, func(a, b string) int { return len(b) - len(a) })
	for _, p := range own {
		pairs = append(pairs, p, dir+p)
	}
	return strings.NewReplacer(pairs...).Replace
}

// relocated is setup with move applied to its command line, its files' paths and their
// contents.
func relocated(setup system.NodeSetup, move func(string) string) system.NodeSetup {
	out := system.NodeSetup{}
	for _, w := range setup.Cmd {
		out.Cmd = append(out.Cmd, move(w))
	}
	for _, f := range setup.Files {
		out.Files = append(out.Files, system.File{Path: move(f.Path), Content: move(f.Content)})
	}
	return out
}

// start starts the node's server in a session of its own, its pid in the pidfile, its
// output appended to its log; first writes its files when fresh (a restart starts on what
// the disk kept, a configuration the server rewrote included).
func (n node) start(ctx context.Context, fresh bool) error {
	var script []string
	if fresh {
		for _, c := range n.copies {
			data, err := os.ReadFile(c.From)
			if err != nil {
				return fmt.Errorf("start node %s: copy: %w", n.name, err)
			}
			if err := n.m.SudoWrite(ctx, c.To, data, os.FileMode(c.Mode)); err != nil {
				return fmt.Errorf("start node %s: copy %s: %w", n.name, c.From, err)
			}
		}
		script = append(script, "mkdir -p "+shellwords.Quote(n.dir()))
		if n.prepare != "" {
			script = append(script, "(cd "+shellwords.Quote(n.dir())+"\n"+n.prepare+"\n)")
		}
		dirs := map[string]bool{}
		for _, f := range n.setup.Files {
			dirs[path.Dir(f.Path)] = true
		}
		for d := range dirs {
			script = append(script, "mkdir -p "+shellwords.Quote(d))
		}
		for _, f := range n.setup.Files {
			script = append(script, fmt.Sprintf("echo %s | base64 -d > %s", base64.StdEncoding.EncodeToString([]byte(f.Content)), shellwords.Quote(f.Path)))
		}
	}
	if fresh && n.clocks == nodes.SystemClock {
		script = append(script, fmt.Sprintf("echo %s | base64 -d > %s", base64.StdEncoding.EncodeToString([]byte(systemClockProgram)),
			shellwords.Quote(n.move(clockProgram))), inDir(takeClock, n.dir()))
	}
	if fresh && n.disk != nil {
		// The disk is served over what the preparation and the files made.
		if _, err := n.m.Sudo(ctx, "set -e\n"+strings.Join(script, "\n")); err != nil {
			return fmt.Errorf("start node %s: %w", n.name, err)
		}
		if err := n.serveDisk(ctx); err != nil {
			return fmt.Errorf("start node %s: %w", n.name, err)
		}
		script = nil
	}
	env := ""
	if n.clocks == nodes.Faketime {
		if fresh {
			script = append(script, "printf +0 > "+shellwords.Quote(n.move(clockFile)))
		}
		script = append(script, faketimePreload)
		env = "env LD_PRELOAD=\"$preload\" FAKETIME_TIMESTAMP_FILE=" + shellwords.Quote(n.move(clockFile)) + " " + faketimeEnv + " "
	}
	// The server itself is what goes into the background, so $! is its pid (setsid execs
	// it), and it holds none of the session's descriptors, which would keep it open.
	script = append(script, "cd "+shellwords.Quote(n.dir()), fmt.Sprintf("setsid %s%s >> %s 2>&1 < /dev/null & echo $! > %s",
		env, shellwords.Join(n.setup.Cmd), shellwords.Quote(n.log()), shellwords.Quote(n.pidfile())))
	if _, err := n.m.Sudo(ctx, "set -e\n"+strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("start node %s: %w", n.name, err)
	}
	return nil
}

func (n node) Info() nodes.Info {
	return nodes.Info{Name: n.name, Addr: n.addr, IP: n.ip, Control: n.control, KeepPort: n.m.addr.port(),
		ClockFile: clockFile, ClockProgram: clockProgram}
}

// Run runs cmd as root on the node's machine, in its directory, its words moved there.
func (n node) Run(ctx context.Context, cmd ...string) (string, error) {
	moved := make([]string, len(cmd))
	for i, w := range cmd {
		moved[i] = n.move(w)
	}
	r, err := n.m.Sudo(ctx, "cd "+shellwords.Quote(n.dir())+" && "+shellwords.Join(moved))
	return string(r.Stdout), err
}

// NetRun runs script as root on the machine: its network is the node's.
func (n node) NetRun(ctx context.Context, script string) error {
	_, err := n.m.Sudo(ctx, script)
	return err
}

// Put writes a file of this shell's own and renames it over path, moved under the node's
// directory.
func (n node) Put(ctx context.Context, path string, data []byte) error {
	file := shellwords.Quote(n.move(path))
	_, err := n.m.Sudo(ctx, fmt.Sprintf(`echo %s | base64 -d > %s.new.$$ && mv -f %s.new.$$ %s`,
		base64.StdEncoding.EncodeToString(data), file, file, file))
	return err
}

// Signal sends sig to the node's server, named by its pidfile.
func (n node) Signal(ctx context.Context, sig syscall.Signal) error {
	_, err := n.m.Sudo(ctx, fmt.Sprintf("kill -%d \"$(cat %s)\"", int(sig), shellwords.Quote(n.pidfile())))
	return err
}

// Kill sends SIGKILL to the server with its process group (what its command started beside
// it goes too, as PgBouncer beside PostgreSQL: a crashed container's whole content), and
// returns once it has gone, or is a zombie its new parent has yet to reap; its pidfile goes
// with it, so that no later kill finds its number given to another process.
func (n node) Kill(ctx context.Context) error {
	_, err := n.m.Sudo(ctx, fmt.Sprintf(`[ -f %[1]s ] || exit 0
pid="$(cat %[1]s)"; kill -KILL -- -"$pid" 2>/dev/null
for i in $(seq 100); do
	kill -0 "$pid" 2>/dev/null && [ "$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f1)" != Z ] || { rm -f %[1]s; exit 0; }
	sleep 0.05
done
echo "pid $pid still runs 5 s after SIGKILL" >&2; exit 1`, shellwords.Quote(n.pidfile())))
	return err
}

// Start starts the server again on what its disk kept.
func (n node) Start(ctx context.Context) error { return n.start(ctx, false) }

func (n node) Alive(ctx context.Context) error {
	_, err := n.m.Sudo(ctx, fmt.Sprintf("kill -0 \"$(cat %s)\"", shellwords.Quote(n.pidfile())))
	if exit := (*ExitError)(nil); errors.As(err, &exit) { // the machine answered: no such process
		return &nodes.ExitedError{How: "its process is gone"}
	}
	return err
}

func (n node) Log(ctx context.Context, w io.Writer, tail int) error {
	cmd := "cat "
	if tail > 0 {
		cmd = fmt.Sprintf("tail -n %d ", tail)
	}
	r, err := n.m.Sudo(ctx, cmd+shellwords.Quote(n.log()))
	if err == nil {
		_, err = w.Write(r.Stdout)
	}
	return err
}

// stop kills the node's server and its process group, if its pidfile names one, gives the
// system clock back where a run moved it, removes its directory, Dir once it is empty, and
// lockbreaker's iptables chain.
func (n node) stop(ctx context.Context) error {
	pidfile := shellwords.Quote(n.pidfile())
	_, err := n.m.Sudo(ctx, fmt.Sprintf("if [ -f %s ]; then kill -KILL -- -\"$(cat %s)\" 2>/dev/null; fi\n%s\n%s\nrm -rf %s; rmdir %s 2>/dev/null\n%s\ntrue",
		pidfile, pidfile, inDir(giveClockBack, n.dir()), inDir(releaseDisk, n.dir()), shellwords.Quote(n.dir()), shellwords.Quote(Dir), nodes.RemoveChain))
	if err != nil {
		return fmt.Errorf("stop node %s: %w", n.name, err)
	}
	return nil
}

// Stop kills every node's and monitor's server and removes lockbreaker's directory from
// the machines.
// It is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopped.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c.stopErr = eachOf(c.servers, func(_ int, n node) error { return n.stop(ctx) })
	})
	return c.stopErr
}

// Clean kills every server a run left on m (the pidfiles under Dir name them), gives back
// a system clock a run moved, and removes Dir and lockbreaker's iptables chain: what a run
// killed with SIGKILL leaves. It returns how many servers it killed.
func Clean(ctx context.Context, m *Machine) (int, error) {
	r, err := m.Sudo(ctx, fmt.Sprintf(`n=0
for p in %s/*/pid; do
	[ -f "$p" ] || continue
	kill -KILL -- -"$(cat "$p")" 2>/dev/null && n=$((n+1))
done
for d in %s/*/; do
	[ -d "$d" ] && sh -c %s sh "${d%%/}" && sh -c %s sh "${d%%/}"
done
rm -rf %s
%s
echo $n`, shellwords.Quote(Dir), shellwords.Quote(Dir), shellwords.Quote(giveClockBack), shellwords.Quote(releaseDisk), shellwords.Quote(Dir), nodes.RemoveChain))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
}

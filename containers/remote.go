package containers

// Reaching a node through the engine (nodes.Remote): signals, kills and starts are the
// engine's, commands run in the container. Where this host reaches into the nodes'
// processes, their network namespaces (nsenter, the host's iptables) and files
// (/proc/<pid>/root) are reached from here instead, so that an image with nothing in it
// (no shell, no iptables) takes the same faults as the node image.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/lockbreaker/lockbreaker/internal/hostcmd"
	"github.com/lockbreaker/lockbreaker/internal/hosttools"
	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/system"
)

// engineNode is one container of a cluster as a nodes.Remote. Every call into the engine
// that a fault or its heal depends on is asked again when the engine is busy (engineCall).
type engineNode struct {
	Node
	c *Cluster
}

// nodeClockFile is the node image's clock offset file, which libfaketime reads
// (FAKETIME_TIMESTAMP_FILE, set by the image's entry point).
const nodeClockFile = "/lockbreaker/faketime"

func (n engineNode) Info() nodes.Info {
	clock := nodeClockFile
	if n.c.local() {
		clock = faketimeDir + "/offset"
	}
	return nodes.Info{Name: n.Name, Addr: n.Addr(), IP: n.IP, Control: n.c.gateway, ClockFile: clock}
}

// Run runs cmd in the container. cmd must be safe to run twice: a try the engine left
// unanswered may have run it.
func (n engineNode) Run(ctx context.Context, cmd ...string) (output string, err error) {
	err = engineCall(ctx, fmt.Sprintf("exec %q in node %s", strings.Join(cmd, " "), n.Name), func(ctx context.Context, _ bool) error {
		output, err = execIn(ctx, n.ContainerID, cmd)
		return err
	})
	return output, err
}

// NetRun runs script with this host's tools in the node's network namespace when this
// host reaches into it (the node then needs no iptables), else in the node.
func (n engineNode) NetRun(ctx context.Context, script string) error {
	if !n.c.fromHost(ctx) {
		_, err := n.Run(ctx, "sh", "-c", script)
		return err
	}
	pid, err := n.c.nodePID(ctx, n.Node)
	if err != nil {
		return err
	}
	_, err = hostRun(ctx, "nsenter", "-t", strconv.Itoa(pid), "-n", "sh", "-c", script)
	return err
}

// Put writes the file from this host through the node's root directory when this host
// reaches into it: a docker exec takes a second on a busy machine, longer than a clock
// fault that must land within a lease can wait, and a local image may have no shell.
// Either way a new file of this call's own is renamed over the old one.
func (n engineNode) Put(ctx context.Context, path string, data []byte) error {
	if !n.c.sharesProcesses(ctx) {
		return n.putInNode(ctx, path, data)
	}
	pid, err := n.c.nodePID(ctx, n.Node)
	if err != nil {
		return err
	}
	file := fmt.Sprintf("/proc/%d/root%s", pid, path)
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".new.*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err = errors.Join(err, tmp.Chmod(0o644), tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// putInNode writes the file by a shell in the node, where this host cannot reach into it.
func (n engineNode) putInNode(ctx context.Context, path string, data []byte) error {
	_, err := n.Run(ctx, "sh", "-c", `printf '%s' "$1" > "$2.new.$$" && mv -f "$2.new.$$" "$2"`, "sh", string(data), path)
	return err
}

// Signal is sent from outside through the engine: PID 1 of a container ignores SIGSTOP sent
// from inside its own namespace. A signal sent twice does what it does once.
func (n engineNode) Signal(ctx context.Context, sig syscall.Signal) error {
	cli, _ := docker()
	signal := unix.SignalName(sig)
	return engineCall(ctx, fmt.Sprintf("send %s to node %s", signal, n.Name), func(ctx context.Context, again bool) error {
		_, err := cli.ContainerKill(ctx, n.ContainerID, client.ContainerKillOptions{Signal: signal})
		if sig == syscall.SIGKILL && again && notRunning(err) {
			return nil // the SIGKILL that went unanswered
		}
		return err
	})
}

// Kill kills the container and returns once it has stopped; it keeps its disk.
func (n engineNode) Kill(ctx context.Context) error {
	cli, _ := docker()
	return engineCall(ctx, "kill node "+n.Name, func(ctx context.Context, again bool) error {
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
}

// Start starts the stopped container and checks it kept its address, where the clients and
// the monitors look for it. A try after one that went unanswered looks first: a container
// running already is not started twice.
func (n engineNode) Start(ctx context.Context) error {
	cli, _ := docker()
	return engineCall(ctx, "restart node "+n.Name, func(ctx context.Context, again bool) error {
		if !again || n.Alive(ctx) != nil {
			if _, err := cli.ContainerStart(ctx, n.ContainerID, client.ContainerStartOptions{}); err != nil {
				return err
			}
		}
		switch ip, err := n.c.containerIP(ctx, n.Node); {
		case err != nil:
			return err
		case ip != n.IP:
			return fmt.Errorf("it came back at %s, not %s, where the clients look for it", ip, n.IP)
		}
		return nil
	})
}

func (n engineNode) Alive(ctx context.Context) error {
	cli, _ := docker()
	info, err := cli.ContainerInspect(ctx, n.ContainerID, client.ContainerInspectOptions{})
	switch {
	case err != nil:
		return err
	case info.Container.State == nil || info.Container.State.Running:
		return nil
	case info.Container.State.Status == "exited":
		return &nodes.ExitedError{How: fmt.Sprintf("exit code %d", info.Container.State.ExitCode)}
	}
	return errors.New(string(info.Container.State.Status))
}

func (n engineNode) Disk() *nodes.Disk { return n.c.disks[n.Name] }

// Log copies the container's log (stdout and stderr), each line of a whole log prefixed
// with the engine's real-time timestamp, since the server's own timestamps may be faked.
func (n engineNode) Log(ctx context.Context, w io.Writer, tail int) error {
	cli, _ := docker()
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: tail == 0}
	if tail > 0 {
		opts.Tail = strconv.Itoa(tail)
	}
	logs, err := cli.ContainerLogs(ctx, n.ContainerID, opts)
	if err != nil {
		return err
	}
	defer logs.Close()
	_, err = stdcopy.StdCopy(w, w, logs)
	return err
}

// Exec runs cmd in node name and returns its combined output; a non-zero exit status is
// an error carrying the output.
func (c *Cluster) Exec(ctx context.Context, name string, cmd ...string) (string, error) {
	n, err := c.node(name)
	if err != nil {
		return "", err
	}
	return engineNode{Node: n, c: c}.Run(ctx, cmd...)
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

// local reports whether the cluster runs a local image of its own rather than the node
// image or a layer on it.
func (c *Cluster) local() bool {
	img := c.recipe.Image
	return img != nil && img.Local != "" && !system.BuiltIn(c.spec.System)
}

// hostNetwork says why this host cannot reach into a node's network namespace; nil when
// it can (root, nsenter and iptables, what faults made from outside a node run here).
var hostNetwork = hosttools.Lack(func(root bool, missing []string) error {
	if !root {
		return errors.New("that needs lockbreaker to run as root")
	}
	return fmt.Errorf("that needs %s on this host", missing[0])
}, "nsenter", "iptables")

// nodePID is the host's process id of node n's first process, checked to be that node's:
// the engine's process ids are this host's only when lockbreaker shares the engine's
// process namespace, and a node's host name (its own /etc/hostname) tells.
func (c *Cluster) nodePID(ctx context.Context, n Node) (int, error) {
	cli, _ := docker()
	var info client.ContainerInspectResult
	err := engineCall(ctx, "inspect node "+n.Name, func(ctx context.Context, _ bool) (err error) {
		info, err = cli.ContainerInspect(ctx, n.ContainerID, client.ContainerInspectOptions{})
		return err
	})
	if err != nil {
		return 0, err
	}
	st := info.Container.State
	if st == nil || st.Pid == 0 {
		return 0, fmt.Errorf("node %s is not running", n.Name)
	}
	host, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/hostname", st.Pid))
	if err != nil || strings.TrimSpace(string(host)) != n.Name {
		return 0, fmt.Errorf("node %s: process %d is not this host's (lockbreaker and the engine do not share processes): %v", n.Name, st.Pid, err)
	}
	return st.Pid, nil
}

// hostRun runs a command on this host and returns its output. It makes or heals a fault,
// so it has a deadline of its own, engineTimeout, which ctx's end does not cut
// (ownDeadline); it is not the engine's, so it is not tried again.
func hostRun(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := ownDeadline(ctx)
	defer cancel()
	return hostcmd.Output(ctx, name, args...)
}

// fromHost reports whether this cluster's partitions are made from this host: when it
// has the tools (hostNetwork) and reaches into the nodes' processes (sharesProcesses). A
// local image of a system file always is (CheckSystem refused it otherwise): it may have
// no iptables of its own.
func (c *Cluster) fromHost(ctx context.Context) bool {
	return c.local() || hostNetwork() == nil && c.sharesProcesses(ctx)
}

// sharesProcesses reports whether this host reaches into the nodes' processes, their
// files and namespaces (/proc/PID): when lockbreaker runs as root and the engine's
// processes are this host's, decided once, on the first running node. A local image's nodes
// always are reached so (CheckSystem refused it otherwise).
func (c *Cluster) sharesProcesses(ctx context.Context) bool {
	if c.local() {
		return true
	}
	c.hostOnce.Do(func() {
		if os.Geteuid() != 0 {
			return
		}
		for _, n := range c.nodes {
			if (engineNode{Node: n, c: c}).Alive(ctx) == nil {
				_, err := c.nodePID(ctx, n)
				c.hostProcs = err == nil
				return
			}
		}
	})
	return c.hostProcs
}

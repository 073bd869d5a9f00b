package containers

// Reaching into a node from this host: its server's process id, its network namespace
// (nsenter, the host's iptables) and its files (/proc/<pid>/root), so that an image with
// nothing in it (no shell, no iptables) takes the same faults as the node image.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/lockbreaker/lockbreaker/internal/hosttools"
	"github.com/lockbreaker/lockbreaker/system"
)

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
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
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
// processes are this host's, decided once, on the first running node. A local image's
// nodes always are reached so (CheckSystem refused it otherwise).
func (c *Cluster) sharesProcesses(ctx context.Context) bool {
	if c.local() {
		return true
	}
	c.hostOnce.Do(func() {
		if os.Geteuid() != 0 {
			return
		}
		for _, n := range c.running() {
			_, err := c.nodePID(ctx, n)
			c.hostProcs = err == nil
			return
		}
	})
	return c.hostProcs
}

// inNetns runs an iptables command in node n's network namespace, from this host.
func (c *Cluster) inNetns(ctx context.Context, n Node, args ...string) error {
	pid, err := c.nodePID(ctx, n)
	if err != nil {
		return err
	}
	_, err = hostRun(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w"}, args...)...)
	return err
}

// setClockFromHost writes node n's clock offset file, at path in the node, from this
// host, through the node's root directory as the host sees it: a new file renamed over the
// old one, so the server never reads it half written.
func (c *Cluster) setClockFromHost(ctx context.Context, n Node, path, seconds string) error {
	pid, err := c.nodePID(ctx, n)
	if err != nil {
		return err
	}
	file := fmt.Sprintf("/proc/%d/root%s", pid, path)
	// A temporary file of this call's own: two settings at once must not rename each
	// other's away.
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".new.*")
	if err != nil {
		return fmt.Errorf("set clock of node %s: %w", n.Name, err)
	}
	_, err = tmp.WriteString(seconds)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("set clock of node %s: %w", n.Name, err)
	}
	return nil
}

// probeIn runs a probe command in node n (readiness, role) within a few seconds.
func probeIn(ctx context.Context, n Node, cmd []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return execIn(ctx, n.ContainerID, slices.Clone(cmd))
}

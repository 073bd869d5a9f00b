package containers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/system"
)

// Stand-in machines: containers that play the machines a team would name in a machines
// file (package machines), so that runs on machines can be tried and tested on one host.
// Each runs sshd, letting root in with one key, from the image of a system's nodes with
// openssh-server on it, so the system's packages are already installed. They get
// NET_ADMIN, for iptables, and no clock rights: containers share the host's clock. They
// outlive the process that started them (CleanStale leaves them) until StopStandIns, or
// clean --all or --run removes them.

// LabelStandIn marks a stand-in machine and its network.
const LabelStandIn = "org.lockbreaker.standin"

// standInLayer puts sshd on a system's node image: root logs in with a key only.
var standInLayer = &system.Image{
	Packages: []string{"openssh-server"},
	Prepare: "mkdir -p /run/sshd /root/.ssh; chmod 700 /root/.ssh; ssh-keygen -A; " +
		"printf 'PermitRootLogin prohibit-password\\nPasswordAuthentication no\\nMaxSessions 10\\n' > /etc/ssh/sshd_config.d/lockbreaker.conf",
}

// standInCmd runs sshd in the foreground, logging to stderr.
var standInCmd = []string{"/usr/sbin/sshd", "-D", "-e"}

// StandIn is one stand-in machine: its name and the address its sshd listens on.
type StandIn struct {
	Name, IP string
}

// EnsureStandInImage makes sure the stand-in image of system name exists: the system's
// node image with sshd on it, built only when missing.
func EnsureStandInImage(ctx context.Context, name string, progress io.Writer) (string, error) {
	base, err := EnsureSystemImage(ctx, name, progress)
	if err != nil {
		return "", err
	}
	// Named by its content: systems whose nodes run one image (redis, redlock) share it.
	ref := nodeRepo + "-machine:" + layerHash(base, standInLayer)
	ensureMu.Lock()
	defer ensureMu.Unlock()
	cli, _ := docker()
	if ok, err := imageExists(ctx, cli, ref); err != nil || ok {
		return ref, err
	}
	fmt.Fprintf(progress, "building the %s stand-in machine image %s (once per image version)\n", name, ref)
	if err := buildLayer(ctx, cli, ref, base, standInLayer, progress); err != nil {
		return "", fmt.Errorf("build the %s stand-in machine image: %w", name, err)
	}
	return ref, nil
}

// StartStandIns starts n stand-in machines for system sysName, named id-m1.., on a network
// of their own, letting root in with authorizedKey (a line of authorized_keys), and waits
// until each one's sshd answers. On an error nothing is left.
func StartStandIns(ctx context.Context, id, sysName string, n int, authorizedKey string, progress io.Writer) ([]StandIn, error) {
	if err := Ping(ctx); err != nil {
		return nil, err
	}
	image, err := EnsureStandInImage(ctx, sysName, progress)
	if err != nil {
		return nil, err
	}
	c := &Cluster{spec: Spec{RunID: id, Image: image, System: sysName, Nodes: n, Partitions: true},
		recipe: &system.Container{Ready: sshReady}, network: "lockbreaker-" + id, fuse: true}
	labels := ownerLabels(id)
	labels[LabelStandIn] = "1"
	err = c.createNetwork(ctx, labels)
	if err == nil {
		c.nodes, err = c.startAll(ctx, labels, "m", 0, n, 22, func(int) system.NodeSetup {
			return system.NodeSetup{Cmd: standInCmd, Files: []system.File{{Path: "/root/.ssh/authorized_keys", Content: authorizedKey}}}
		})
	}
	if err == nil {
		err = nodes.New(nodes.Config{System: sysName, Recipe: c.recipe}, c.remotes(c.nodes), nil).WaitNodes(ctx)
	}
	if err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("start stand-in machines: %w", err), c.Stop(stopCtx))
	}
	ms := make([]StandIn, n)
	for i, node := range c.nodes {
		ms[i] = StandIn{Name: node.Name, IP: node.IP}
	}
	return ms, nil
}

// StopStandIns removes the stand-in machines started as id, and their network.
func StopStandIns(ctx context.Context, id string) error {
	if err := Ping(ctx); err != nil {
		return err
	}
	_, err := Clean(ctx, id)
	return err
}

// sshReady says whether an SSH server answers at addr with its banner.
func sshReady(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	banner, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(banner, "SSH-") {
		return fmt.Errorf("port 22 answered %q, not SSH", strings.TrimSpace(banner))
	}
	return nil
}

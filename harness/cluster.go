package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nemesis"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads/locksvc"
)

// Cluster is a running lock service as a trial needs it: the addresses its clients dial,
// the levers the nemesis pulls (nemesis.Nodes, and whichever of nemesis.Clocks, Network
// and Leaders it offers), and its end. A cluster of containers is one; the lock service
// the harness serves itself (system.InProcess) is another, so whole trials run without
// Docker.
type Cluster interface {
	nemesis.Nodes
	// Addrs are the addresses the lock clients dial, in node order.
	Addrs() []string
	// Heal undoes every fault the nemesis can inject. Run it in a defer.
	Heal(ctx context.Context) error
	// CollectLogs puts the nodes' logs into dir.
	CollectLogs(ctx context.Context, dir string) error
	// Stop ends the cluster and removes all it made. It is idempotent.
	Stop(ctx context.Context) error
}

// clusterSetup is what starting a cluster takes besides the system.
type clusterSetup struct {
	runID string
	nodes int
	ttl   time.Duration
	needs nemesis.Needs
	// servers is what the nodes keep on disk and how many replicas must acknowledge a
	// write, for the systems that take them.
	servers serverSettings
	// logs is where the nodes' logs go (the run's nodes/ directory).
	logs     string
	progress io.Writer
	// machines, when there are any, are where the nodes run instead of containers, and
	// machineClocks how the faults move their clocks.
	machines      []*machines.Machine
	machineClocks machines.Clocks
}

// machineClocks is how a run's faults move the clocks of machines: not at all when none
// of its faults needs, else as its spec says.
func machineClocks(s Spec, needs nemesis.Needs) machines.Clocks {
	switch {
	case !needs.Clocks:
		return machines.FixedClocks
	case s.MachineClock == runspec.MachineSystemClock:
		return machines.SystemClock
	}
	return machines.Faketime
}

// serverSettings are the spec's settings of the nodes' servers.
type serverSettings struct {
	persistence system.Persistence
	minReplicas int
	maxLag      time.Duration
	// pooler is the pooler mode in front of the servers (system.Pooler); "" for none.
	pooler string
}

// cluster is what a system's recipe is told of a cluster of nodes with these settings.
func (s serverSettings) cluster(nodes int, ttl time.Duration) system.Cluster {
	return system.Cluster{Nodes: nodes, TTL: ttl, Persistence: s.persistence, MinReplicas: s.minReplicas,
		MinReplicasMaxLag: s.maxLag, Pooler: s.pooler}
}

// serverSettingsOf are a spec's settings of its nodes' servers.
func serverSettingsOf(s Spec) serverSettings {
	return serverSettings{system.Persistence(s.Persistence), s.MinReplicas, s.MinReplicasMaxLag.Std(), s.Pooler}
}

// monitorAddrs are the addresses of the cluster's monitors (Sentinels), through which
// lock clients find the primary; none for most systems.
func monitorAddrs(c Cluster) []string {
	if m, ok := c.(interface{ MonitorAddrs() []string }); ok {
		return m.MonitorAddrs()
	}
	return nil
}

// isMachines says whether c runs on machines.
func isMachines(c Cluster) bool {
	_, ok := c.(*machines.Cluster)
	return ok
}

// clientNetwork puts the lock clients of a cluster on addresses of their own on its
// network, or says why it cannot (the cluster is served by the harness, or this host
// lacks root or tools). Clients of machines get a routed network of this host's only when
// a fault must reach single clients (needs), as it changes this host's rules; Close
// removes it.
func clientNetwork(ctx context.Context, c Cluster, needs nemesis.Needs) (*clientnet.Network, error) {
	if isMachines(c) {
		if !needs.ClientAddrs {
			return nil, errors.New("the nodes run on machines, reached from this host's own address")
		}
		return clientnet.Route(ctx)
	}
	b, ok := c.(interface{ Bridge() containers.Bridge })
	if !ok {
		return nil, errors.New("the lock service runs inside the harness")
	}
	br := b.Bridge()
	return clientnet.New(br.Name, br.Subnet, br.Gateway)
}

// preflight refuses a run whose system cannot start here, before anything is created: no
// Docker, or a system described in a file that cannot take the faults asked for here (its
// image missing, a clock libfaketime cannot move), which is bad input.
func preflight(ctx context.Context, sys system.System, needs nemesis.Needs) error {
	if sys.Container == nil {
		return nil
	}
	if err := containers.Ping(ctx); err != nil {
		return err
	}
	err := containers.CheckSystem(ctx, sys, needs.Clocks, needs.Network)
	if unfit := (*containers.UnfitError)(nil); errors.As(err, &unfit) {
		return &SpecError{Reason: unfit.Reason}
	}
	return err
}

// CheckMachines asks the machines of spec's nodes file, logged in to with login, whether
// they can serve it as they are (preflightMachines, installing nothing), changing nothing
// on them; nil for a spec without a nodes file. A refusal is a *SpecError.
func CheckMachines(ctx context.Context, spec Spec, login machines.Login) error {
	c, err := CheckSpec(spec)
	if err != nil || len(c.machines) == 0 {
		return err
	}
	ms, err := preflightMachines(ctx, c, login, false)
	for _, m := range ms {
		m.Close()
	}
	return err
}

// preflightMachines asks the machines of a checked spec with a nodes file, one for each of
// its nodes, whether they can serve (machines.Preflight), changing nothing on them but the
// system's packages, installed where missing when install says so; a machine that cannot
// serve is the user's input.
func preflightMachines(ctx context.Context, c Checked, login machines.Login, install bool) ([]*machines.Machine, error) {
	tools := machines.Tools(c.sys, serverSettingsOf(c.spec).cluster(c.nodes, c.spec.TTL.Std()))
	if c.nemesis.Needs().Network {
		tools = append(tools, "iptables")
	}
	clocks := machineClocks(c.spec, c.nemesis.Needs())
	if clocks == machines.Faketime {
		tools = append(tools, machines.FaketimeLib)
	}
	needs := machines.Needs{Tools: tools, MaxClockOffset: time.Second, SetClock: clocks == machines.SystemClock}
	if install {
		needs.Install = machines.Packages(c.sys)
	}
	ms, err := machines.Preflight(ctx, c.machines, login, needs)
	if err != nil {
		return nil, &SpecError{Reason: strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	return ms, nil
}

// startCluster brings sys up and waits until it serves. On error nothing is left behind.
func startCluster(ctx context.Context, sys system.System, setup clusterSetup) (Cluster, error) {
	if sys.InProcess != nil {
		return startLocal(sys, setup)
	}
	if len(setup.machines) > 0 {
		nodes, err := sys.Check(setup.nodes)
		if err != nil {
			return nil, err
		}
		return machines.StartCluster(ctx, setup.machines, sys, setup.servers.cluster(nodes, setup.ttl), setup.machineClocks, setup.progress)
	}
	if n, err := containers.CleanStale(ctx); err != nil {
		fmt.Fprintf(setup.progress, "could not sweep containers left by killed runs: %v\n", err)
	} else if n > 0 {
		fmt.Fprintf(setup.progress, "removed %d containers/networks left by an earlier killed run\n", n)
	}
	image, err := containers.EnsureSystemImage(ctx, sys.Name, setup.progress)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(setup.progress, "starting %s cluster (run %s)\n", sys.Name, setup.runID)
	c, err := containers.Start(ctx, containers.Spec{RunID: setup.runID, Image: image, System: sys.Name,
		Nodes: setup.nodes, Faketime: setup.needs.Clocks, Partitions: setup.needs.Network, TTL: setup.ttl,
		Persistence: setup.servers.persistence, MinReplicas: setup.servers.minReplicas, MinReplicasMaxLag: setup.servers.maxLag,
		Pooler: setup.servers.pooler})
	if err != nil {
		return nil, err // Start has removed whatever it created
	}
	return c, nil
}

// localNode is the one node of an in-process cluster.
const localNode = "n1"

// localCluster is a lease lock service the harness serves itself. Its node pauses as a
// SIGSTOPped server does (it stops answering; requests wait) and its clock moves as a
// faked one does, so pause-node and the clock faults apply to it; partitions do not.
type localCluster struct {
	srv     *locksvc.Server
	log     *os.File
	stopped sync.Once
	stopErr error
}

func startLocal(sys system.System, setup clusterSetup) (*localCluster, error) {
	fmt.Fprintf(setup.progress, "starting %s lock service in the harness\n", sys.Name)
	if err := os.MkdirAll(setup.logs, 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", sys.Name, err)
	}
	log, err := os.Create(filepath.Join(setup.logs, localNode+".jsonl"))
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", sys.Name, err)
	}
	srv, err := locksvc.Listen("127.0.0.1:0", locksvc.Options{Broken: sys.InProcess.Broken}, log)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", sys.Name, err)
	}
	return &localCluster{srv: srv, log: log}, nil
}

func (c *localCluster) Names() []string { return []string{localNode} }
func (c *localCluster) Addrs() []string { return []string{c.srv.Addr()} }
func (c *localCluster) Heal(context.Context) error {
	c.srv.Resume()
	c.srv.SetClockOffset(0)
	return nil
}

// Signal pauses (SIGSTOP) and resumes (SIGCONT) the service.
func (c *localCluster) Signal(_ context.Context, node string, sig syscall.Signal) error {
	if node != localNode {
		return fmt.Errorf("no node %s", node)
	}
	switch sig {
	case syscall.SIGSTOP:
		c.srv.Pause()
	case syscall.SIGCONT:
		c.srv.Resume()
	default:
		return fmt.Errorf("node %s runs inside the harness: it takes SIGSTOP and SIGCONT, not %v", node, sig)
	}
	return nil
}

func (c *localCluster) SetClock(ctx context.Context, node string, offset time.Duration) error {
	if node != localNode {
		return fmt.Errorf("no node %s", node)
	}
	c.srv.SetClockOffset(offset)
	return nil
}

func (c *localCluster) ResetClocks(ctx context.Context) error { return c.SetClock(ctx, localNode, 0) }

// CollectLogs has nothing to do: the service logs into the run's nodes/ as it serves.
func (c *localCluster) CollectLogs(context.Context, string) error { return nil }

func (c *localCluster) Stop(context.Context) error {
	c.stopped.Do(func() { c.stopErr = errors.Join(c.srv.Close(), c.log.Close()) })
	return c.stopErr
}

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/nodes"
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
	// MonitorAddrs are the addresses of the monitors (Sentinels) through which lock
	// clients find the primary; none for most systems.
	MonitorAddrs() []string
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
	// place is where the nodes live, and clocks how the faults move a machine's clocks.
	place  place
	clocks nodes.Clocks
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

// CheckMachines asks the machines of spec's nodes file, logged in to with login, whether
// they can serve it as they are (machinePlace.preflight, installing nothing), changing nothing
// on them; nil for a spec without a nodes file. A refusal is a *SpecError.
func CheckMachines(ctx context.Context, spec Spec, login machines.Login) error {
	c, err := CheckSpec(spec)
	if err != nil || len(c.machines) == 0 {
		return err
	}
	p := &machinePlace{login: login}
	defer p.close()
	return p.preflight(ctx, c)
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

func (c *localCluster) Names() []string        { return []string{localNode} }
func (c *localCluster) Addrs() []string        { return []string{c.srv.Addr()} }
func (c *localCluster) MonitorAddrs() []string { return nil }
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

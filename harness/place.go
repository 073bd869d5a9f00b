package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/nodes"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/system"
)

// place is where a run's nodes live: containers of this host's engine, a team's machines
// over SSH, or the harness itself (the in-process lock). The cluster a place starts heals,
// collects its logs and stops itself (Cluster), each with the same meaning everywhere, its
// node faults written once (package nodes); what a killed run left, `lockbreaker clean`
// removes through each place's package (containers.Clean, machines.Clean). The harness
// asks a place and never where the nodes live: a new place (Kubernetes pods, say) is one
// more implementation, chosen in placeOf.
type place interface {
	// preflight refuses, before anything of the run exists, a run the place cannot serve:
	// a *SpecError when the user's input is at fault.
	preflight(ctx context.Context, c Checked) error
	// start brings the system up and waits until it serves; on an error nothing is left.
	start(ctx context.Context, sys system.System, setup clusterSetup) (Cluster, error)
	// clientNetwork puts the lock clients on addresses of their own toward the cluster c,
	// or says why it cannot; Close removes it.
	clientNetwork(ctx context.Context, c Cluster, needs nemesis.Needs) (*clientnet.Network, error)
	// keeps says whether a cluster of this place may serve the next run (Clusters).
	keeps() bool
	// close lets go of what preflight took.
	close()
}

// placeOf is where the nodes of a checked spec live, asked whether it can serve the run.
// install says to install a machine's missing packages.
func placeOf(ctx context.Context, c Checked, login machines.Login, install bool) (place, error) {
	var p place = containerPlace{}
	switch {
	case c.sys.InProcess != nil:
		p = harnessPlace{}
	case len(c.machines) > 0:
		p = &machinePlace{login: login, install: install}
	}
	if err := p.preflight(ctx, c); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// harnessPlace is the lock service the harness serves itself.
type harnessPlace struct{}

func (harnessPlace) preflight(context.Context, Checked) error { return nil }
func (harnessPlace) start(_ context.Context, sys system.System, setup clusterSetup) (Cluster, error) {
	return startLocal(sys, setup)
}
func (harnessPlace) clientNetwork(context.Context, Cluster, nemesis.Needs) (*clientnet.Network, error) {
	return nil, errors.New("the lock service runs inside the harness")
}
func (harnessPlace) keeps() bool { return false }
func (harnessPlace) close()      {}

// containerPlace is containers of this host's Docker engine, on a network of their own.
type containerPlace struct{}

// preflight refuses no Docker, or a system described in a file that cannot take the
// faults asked for here (its image missing, a clock libfaketime cannot move), which is
// bad input.
func (containerPlace) preflight(ctx context.Context, c Checked) error {
	if err := containers.Ping(ctx); err != nil {
		return err
	}
	needs := c.nemesis.Needs()
	err := containers.CheckSystem(ctx, c.sys, needs.Clocks, needs.Network)
	if err == nil && needs.Disks {
		err = containers.CheckDisks()
	}
	if unfit := (*containers.UnfitError)(nil); errors.As(err, &unfit) {
		return &SpecError{Reason: unfit.Reason}
	}
	return err
}

func (containerPlace) start(ctx context.Context, sys system.System, setup clusterSetup) (Cluster, error) {
	if n, err := containers.CleanStale(ctx); err != nil {
		fmt.Fprintf(setup.progress, "could not sweep containers left by killed runs: %v\n", err)
	} else if n > 0 {
		fmt.Fprintf(setup.progress, "removed %d containers, networks and disks left by an earlier killed run\n", n)
	}
	image, err := containers.EnsureSystemImage(ctx, sys.Name, setup.progress)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(setup.progress, "starting %s cluster (run %s)\n", sys.Name, setup.runID)
	c, err := containers.Start(ctx, containers.Spec{RunID: setup.runID, Image: image, System: sys.Name,
		Nodes: setup.nodes, Faketime: setup.needs.Clocks, Partitions: setup.needs.Network, TTL: setup.ttl,
		Persistence: setup.servers.persistence, MinReplicas: setup.servers.minReplicas, MinReplicasMaxLag: setup.servers.maxLag,
		Pooler: setup.servers.pooler, Disks: setup.needs.Disks})
	if err != nil {
		return nil, err // Start has removed whatever it created
	}
	return c, nil
}

// clientNetwork plugs the clients into the cluster network's bridge.
func (containerPlace) clientNetwork(_ context.Context, c Cluster, _ nemesis.Needs) (*clientnet.Network, error) {
	br := c.(interface{ Bridge() containers.Bridge }).Bridge() // a cluster of containers, kept or not
	return clientnet.New(br.Name, br.Subnet, br.Gateway)
}

func (containerPlace) keeps() bool { return true }
func (containerPlace) close()      {}

// machinePlace is a team's machines, reached over SSH, one node each.
type machinePlace struct {
	login   machines.Login
	install bool
	ms      []*machines.Machine // logged in to by preflight
}

// preflight asks the machines of a checked spec, one for each of its nodes, whether they
// can serve (machines.Preflight), the ports its servers take free included, changing
// nothing on them but the system's packages, installed where missing when install says
// so; a machine that cannot serve is the user's input.
func (p *machinePlace) preflight(ctx context.Context, c Checked) error {
	setup := serverSettingsOf(c.spec).cluster(c.nodes, c.spec.TTL.Std())
	tools := machines.Tools(c.sys, setup)
	if c.nemesis.Needs().Network {
		tools = append(tools, "iptables")
	}
	clocks := machineClocks(c.spec, c.nemesis.Needs())
	if clocks == nodes.Faketime {
		tools = append(tools, machines.FaketimeLib)
	}
	needs := machines.Needs{Tools: tools, MaxClockOffset: time.Second, SetClock: clocks == nodes.SystemClock, FUSE: c.nemesis.Needs().Disks,
		Ports: machines.ServerPorts(c.sys, setup)}
	if p.install {
		needs.Install = machines.Packages(c.sys)
	}
	ms, err := machines.Preflight(ctx, c.machines, p.login, needs)
	if err != nil {
		return &SpecError{Reason: strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	p.ms = ms
	return nil
}

func (p *machinePlace) start(ctx context.Context, sys system.System, setup clusterSetup) (Cluster, error) {
	n, err := sys.Check(setup.nodes)
	if err != nil {
		return nil, err
	}
	return machines.StartCluster(ctx, p.ms, sys, setup.servers.cluster(n, setup.ttl), setup.clocks, setup.needs.Disks, setup.progress)
}

// clientNetwork routes the clients out through a bridge of this host's, only when a fault
// must reach single clients, as it changes this host's rules.
func (p *machinePlace) clientNetwork(ctx context.Context, _ Cluster, needs nemesis.Needs) (*clientnet.Network, error) {
	if !needs.ClientAddrs {
		return nil, errors.New("the nodes run on machines, reached from this host's own address")
	}
	return clientnet.Route(ctx)
}

func (p *machinePlace) keeps() bool { return false }

func (p *machinePlace) close() {
	for _, m := range p.ms {
		m.Close()
	}
}

// machineClocks is how a run's faults move the clocks of machines: not at all when none
// of its faults needs, else as its spec says.
func machineClocks(s Spec, needs nemesis.Needs) nodes.Clocks {
	switch {
	case !needs.Clocks:
		return nodes.FixedClocks
	case s.MachineClock == runspec.MachineSystemClock:
		return nodes.SystemClock
	}
	return nodes.Faketime
}

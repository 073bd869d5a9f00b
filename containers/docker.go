package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/lockbreaker/lockbreaker/internal/owner"
	"github.com/moby/moby/client"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

func init() {
	// testcontainers reads its configuration once, at its first call. Ryuk (its
	// reaper container) cannot be pulled where lockbreaker runs, so it must be
	// off; this package labels and removes what it creates itself. When this
	// process runs in a container, testcontainers would guess the Docker host
	// is the default gateway, an address outside this machine: pin it to
	// loopback. Nodes are dialled at their own network IPs anyway (Node.Addr).
	setenvDefault("TESTCONTAINERS_RYUK_DISABLED", "true")
	setenvDefault("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	// testcontainers logs to stderr through a global logger (its provider
	// ignores per-container loggers); this package prints nothing.
	tclog.SetDefault(tclog.NewNoopLogger())
}

func setenvDefault(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		_ = os.Setenv(key, value)
	}
}

// Labels put on everything this package creates.
const (
	LabelProject = "org.lockbreaker.project" // always "1"
	LabelRun     = "org.lockbreaker.run"     // the run id
	LabelNode    = "org.lockbreaker.node"    // n1..nN, containers only
	// The owner process: its host name, pid and the pid's start time (clock
	// ticks since boot, from /proc/<pid>/stat) so a reused pid is not mistaken
	// for the owner. CleanStale removes runs whose owner is gone.
	LabelOwnerHost  = "org.lockbreaker.host"
	LabelOwnerPID   = "org.lockbreaker.pid"
	LabelOwnerStart = "org.lockbreaker.pidstart"
	LabelCreated    = "org.lockbreaker.created" // RFC 3339, for people
)

var (
	dockerOnce   sync.Once
	dockerClient *client.Client
	dockerErr    error
)

// docker returns the process-wide Docker client (DOCKER_HOST and friends are
// honoured; the API version is negotiated with the engine).
func docker() (*client.Client, error) {
	dockerOnce.Do(func() {
		dockerClient, dockerErr = client.New(client.FromEnv)
	})
	return dockerClient, dockerErr
}

// Ping reports whether the Docker engine answers, with an error starting
// "docker is not reachable" when it does not.
func Ping(ctx context.Context) error {
	cli, err := docker()
	if err != nil {
		return fmt.Errorf("docker is not reachable: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker is not reachable: %w", err)
	}
	return nil
}

// ownerLabels are the labels of everything a run creates.
func ownerLabels(runID string) map[string]string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return map[string]string{
		LabelProject:    "1",
		LabelRun:        runID,
		LabelOwnerHost:  host,
		LabelOwnerPID:   strconv.Itoa(pid),
		LabelOwnerStart: owner.Start(pid),
		LabelCreated:    time.Now().UTC().Format(time.RFC3339),
	}
}

// ownerGone reports whether the process that created a resource with these
// labels has exited. Resources of another host (another machine or container
// sharing this engine) are never considered gone: their owner cannot be seen.
func ownerGone(labels map[string]string) bool {
	if labels[LabelStandIn] == "1" { // stand-in machines outlive their starter (standin.go)
		return false
	}
	host, _ := os.Hostname()
	if labels[LabelOwnerHost] != host {
		return false
	}
	pid, err := strconv.Atoi(labels[LabelOwnerPID])
	if err != nil || pid <= 0 {
		return true
	}
	return owner.Gone(pid, labels[LabelOwnerStart])
}

// Clean removes the containers and networks carrying the project label, and the disks
// served for them (disk.go): those
// of run runID, or all of them when runID is "" (whether or not their run is
// still alive). Images are kept. It returns how many resources it removed.
// It always looks twice, settle apart: a run killed while the engine created its
// network or a container has that creation complete after it died, and after a
// first look that found nothing.
func Clean(ctx context.Context, runID string) (removed int, err error) {
	removed, err = sweep(ctx, runID, 2, func(map[string]string) bool { return true })
	disks, disksErr := cleanDisks(runID, false)
	return removed + disks, errors.Join(err, disksErr)
}

// CleanStale removes the containers, networks and disks of runs whose owner process
// on this host has exited (a crash, kill -9). Live runs, and runs started from
// another host, are left alone.
func CleanStale(ctx context.Context) (removed int, err error) {
	removed, err = sweep(ctx, "", 1, ownerGone)
	disks, disksErr := cleanDisks("", true)
	return removed + disks, errors.Join(err, disksErr)
}

// removeRun removes what this process created for run runID: nothing of it is in flight.
func removeRun(ctx context.Context, runID string) error {
	_, err := sweep(ctx, runID, 1, func(map[string]string) bool { return true })
	return err
}

// Sweeps that removed another process's resources, or could not remove a network yet, look
// again after settle, up to sweepPasses times: a run killed while it created a network or a
// container leaves the request in flight, and the engine completes it after the killed
// client has gone (within 100 ms, seen here), after the first sweep.
const (
	settle      = time.Second
	sweepPasses = 5
)

// sweep removes the labelled containers, then networks, of run runID (all
// runs when "") for which doomed returns true, in at least minPasses passes. A
// network still in use after the last pass is an error: clean never reports
// success over what it left.
func sweep(ctx context.Context, runID string, minPasses int, doomed func(labels map[string]string) bool) (int, error) {
	total := 0
	for pass := 1; ; pass++ {
		removed, p, err := sweepOnce(ctx, runID, doomed)
		total += removed
		switch {
		case err != nil:
			return total, err
		case len(p.busy) > 0 && pass == sweepPasses:
			return total, fmt.Errorf("clean: networks %s still have endpoints after %d passes", strings.Join(p.busy, ", "), pass)
		case (!p.again() && pass >= minPasses) || pass == sweepPasses:
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, fmt.Errorf("clean: %w", ctx.Err())
		case <-time.After(settle):
		}
	}
}

// pass is what one pass of sweep saw that calls for another.
type pass struct {
	foreign  bool     // it removed something another process created
	inFlight bool     // a container the engine was removing already (its network is in use till then)
	busy     []string // networks it could not remove: something was still attached
}

func (p pass) again() bool { return p.foreign || p.inFlight || len(p.busy) > 0 }

// sweepOnce is one pass of sweep.
func sweepOnce(ctx context.Context, runID string, doomed func(labels map[string]string) bool) (removed int, p pass, err error) {
	cli, err := docker()
	if err != nil {
		return 0, p, fmt.Errorf("clean: docker is not reachable: %w", err)
	}
	self := ownerLabels("")
	ours := func(labels map[string]string) bool {
		return labels[LabelOwnerHost] == self[LabelOwnerHost] && labels[LabelOwnerPID] == self[LabelOwnerPID] &&
			labels[LabelOwnerStart] == self[LabelOwnerStart]
	}
	filters := make(client.Filters).Add("label", LabelProject+"=1")
	if runID != "" {
		filters.Add("label", LabelRun+"="+runID)
	}
	var errs []error

	ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return 0, p, fmt.Errorf("clean: list containers: %w", err)
	}
	for _, c := range ctrs.Items {
		if !doomed(c.Labels) {
			continue
		}
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
			p.inFlight = true
			continue
		case err != nil && !cerrdefs.IsNotFound(err):
			errs = append(errs, fmt.Errorf("remove container %s: %w", shortID(c.ID), err))
			continue
		}
		removed++
		p.foreign = p.foreign || !ours(c.Labels)
	}
	if p.inFlight && len(errs) == 0 {
		// Its network is in use until the engine is done: the networks go on the next pass.
		return removed, p, nil
	}

	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: filters})
	if err != nil {
		return removed, p, fmt.Errorf("clean: list networks: %w", err)
	}
	for _, n := range nets.Items {
		if !doomed(n.Labels) {
			continue
		}
		_, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		if err != nil && strings.Contains(err.Error(), "has active endpoints") {
			// A container created after the list above (a request a killed run left in
			// flight), or an endpoint the engine kept of a removed container: detach what
			// is attached; the next pass removes the container, then the network.
			detachAll(ctx, cli, n.ID)
			p.busy = append(p.busy, n.Name)
			continue
		}
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			continue
		}
		removed++
		p.foreign = p.foreign || !ours(n.Labels)
	}
	if len(errs) > 0 {
		return removed, p, fmt.Errorf("clean: %w", errors.Join(errs...))
	}
	return removed, p, nil
}

// detachAll force-disconnects every endpoint of network id, stale ones included. Errors are
// left to the network's removal on the next pass to report.
func detachAll(ctx context.Context, cli *client.Client, id string) {
	n, err := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	if err != nil {
		return
	}
	for ctr, ep := range n.Network.Containers {
		// A stale endpoint is keyed "ep-<endpoint>" and found by its container's name.
		if _, err := cli.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: ctr, Force: true}); err != nil && ep.Name != "" {
			_, _ = cli.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: ep.Name, Force: true})
		}
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

package containers

// Disks that lose power: each node's data directory is bound to a disk served on this host
// (package lazydisk, through lockbreaker's own `disk` commands), which starts with what the
// image holds there and keeps the server's unsynced writes apart until it syncs them.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/lockbreaker/lockbreaker/internal/owner"
	"github.com/lockbreaker/lockbreaker/lazydisk"
	"github.com/lockbreaker/lockbreaker/nodes"
)

// disksRoot holds the disks of this host's runs: a directory a run, named by its id and
// by the process that made it (runDisks), one a node.
const disksRoot = "/var/lib/lockbreaker/disks"

// runDisks is the directory of run runID's disks made by this process:
// "<run>@<pid>-<start>", run the start of the sha256 of runID (a unix socket's path is
// short: 108 bytes), so that a clean tells a dead run's from a live one's by its name
// alone, from the moment it exists.
func runDisks(runID string) string {
	pid := os.Getpid()
	return filepath.Join(disksRoot, fmt.Sprintf("%s@%d-%s", runKey(runID), pid, owner.Start(pid)))
}

// runKey is what names run runID's disks.
func runKey(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return hex.EncodeToString(sum[:6])
}

// CheckDisks says why this host cannot serve the nodes' disks (an UnfitError); nil when
// it can: lockbreaker runs as root and mounts a disk of its own (FUSE).
func CheckDisks() error {
	if os.Geteuid() != 0 {
		return unfit("faults on the nodes' disks serve each node's data directory from this host, and that needs lockbreaker to run as root")
	}
	if err := lazydisk.Check(); err != nil {
		return unfit("faults on the nodes' disks serve each node's data directory from this host, and %v", err)
	}
	return nil
}

// startDisks serves a disk for each of the cluster's nodes, holding what the image holds
// in the recipe's data directory.
func (c *Cluster) startDisks(ctx context.Context) error {
	run := runDisks(c.spec.RunID)
	seed := filepath.Join(run, "seed")
	if err := c.copyImageData(ctx, seed); err != nil {
		return fmt.Errorf("disks: the image's %s: %w", c.recipe.Data, err)
	}
	c.disks = map[string]*nodes.Disk{}
	for i := range c.spec.Nodes {
		name := "n" + strconv.Itoa(i+1)
		d := &nodes.Disk{Do: nodes.LocalDisk, Dir: filepath.Join(run, name)}
		c.disks[name] = d
		if err := os.MkdirAll(d.Mount(), 0o755); err != nil {
			return fmt.Errorf("disks: %w", err)
		}
		// The directory itself with its owner and mode: a server may insist on them
		// (PostgreSQL's, its own and 0700).
		if _, err := hostRun(ctx, "cp", "-a", seed, d.Backing()); err != nil {
			return fmt.Errorf("disks: node %s: %w", name, err)
		}
		if err := d.Serve(ctx); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	return os.RemoveAll(seed)
}

// copyImageData copies the image's data directory of the recipe to dir, with what it
// holds, owners and modes kept (PostgreSQL's database, made when its image was built),
// from a container of the image that never runs; an empty directory of root's where the
// image has none.
func (c *Cluster) copyImageData(ctx context.Context, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	cli, _ := docker()
	create, cancel := creating(ctx)
	defer cancel()
	ctr, err := cli.ContainerCreate(create, client.ContainerCreateOptions{
		Config: &container.Config{Image: c.spec.Image, Labels: ownerLabels(c.spec.RunID)}})
	if err != nil {
		return err
	}
	defer cli.ContainerRemove(create, ctr.ID, client.ContainerRemoveOptions{Force: true})
	copied, err := cli.CopyFromContainer(create, ctr.ID, client.CopyFromContainerOptions{SourcePath: c.recipe.Data})
	switch {
	case cerrdefs.IsNotFound(err):
		return os.Mkdir(dir, 0o755) // the server fills it
	case err != nil:
		return err
	}
	defer copied.Content.Close()
	// The archive's top entry is the directory, by its own name: extracted beside dir,
	// then renamed to it.
	into, err := os.MkdirTemp(filepath.Dir(dir), "image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(into)
	untar := exec.CommandContext(create, "tar", "-x", "--same-owner", "-p", "-C", into)
	untar.Stdin = copied.Content
	if out, err := untar.CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return os.Rename(filepath.Join(into, filepath.Base(c.recipe.Data)), dir)
}

// checkDiskBound makes sure node n's data directory is its disk, as the engine bound it:
// an engine that does not see this host's mounts binds the directory under the disk
// instead, and a power loss would then lose nothing.
func (c *Cluster) checkDiskBound(ctx context.Context, n Node) error {
	d := c.disks[n.Name]
	if d == nil {
		return nil
	}
	pid, err := c.nodePID(ctx, n)
	if err != nil {
		return fmt.Errorf("node %s's disk: %w", n.Name, err)
	}
	var inNode, served syscall.Stat_t
	err = errors.Join(syscall.Stat(fmt.Sprintf("/proc/%d/root%s", pid, c.recipe.Data), &inNode), syscall.Stat(d.Mount(), &served))
	if err == nil && inNode.Dev != served.Dev {
		err = errors.New("the engine bound the directory under the disk, not the disk: it does not see this host's mounts")
	}
	if err != nil {
		return fmt.Errorf("node %s's disk: %w", n.Name, err)
	}
	return nil
}

// stopDisks stops the run's disks and removes them, once its containers are gone.
func (c *Cluster) stopDisks() error {
	if !c.spec.Disks {
		return nil
	}
	return removeDisks(runDisks(c.spec.RunID))
}

// removeDisks stops the daemons of a run's disks, unmounts them and removes the run's
// directory.
func removeDisks(run string) error {
	dirs, _ := filepath.Glob(filepath.Join(run, "n*"))
	var errs []error
	for _, dir := range dirs {
		d := nodes.Disk{Dir: dir}
		errs = append(errs, lazydisk.Clean(d.Socket(), d.Pidfile(), d.Mount()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("disks of %s: %w", filepath.Base(run), err)
	}
	return os.RemoveAll(run)
}

// cleanDisks removes the disks of run runID (every run's when ""), or, with onlyDead, of
// the runs whose process has exited.
func cleanDisks(runID string, onlyDead bool) (removed int, err error) {
	runs, _ := filepath.Glob(filepath.Join(disksRoot, "*@*"))
	var errs []error
	for _, run := range runs {
		id, made, _ := strings.Cut(filepath.Base(run), "@")
		pid, start, _ := strings.Cut(made, "-")
		n, _ := strconv.Atoi(pid)
		if runID != "" && id != runKey(runID) || onlyDead && !owner.Gone(n, start) {
			continue
		}
		if err := removeDisks(run); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

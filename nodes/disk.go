package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/lazydisk"
)

// Disk is a node's data directory on a disk that keeps unsynced writes apart so that a
// power loss can drop them (package lazydisk), served by a daemon of lockbreaker's own
// where the node's place runs it: on this host for a container, into which its mount is
// bound; on the machine itself for a machine. Its commands are lazydisk.Main's, run there.
type Disk struct {
	// Do runs a disk command (lazydisk.Main's arguments) where the daemon runs, as root,
	// and returns its output: in this process for a disk on this host (LocalDisk), which
	// a power loss must strike within a second of a grant, however busy the host; by a
	// copy of lockbreaker on a machine.
	Do func(ctx context.Context, args ...string) (string, error)
	// Dir is the disk's directory there: the durable copy (backing), and the daemon's
	// socket, pidfile and log.
	Dir string
	// At is where the disk is served: the server's data directory itself; "" serves it at
	// Dir/mount, for a place that binds it there.
	At string
}

// Backing is the directory that holds what the disk made durable.
func (d *Disk) Backing() string { return d.Dir + "/backing" }

// Mount is where the disk is served.
func (d *Disk) Mount() string {
	if d.At != "" {
		return d.At
	}
	return d.Dir + "/mount"
}

// Socket is where the daemon answers its commands; Pidfile names its process.
func (d *Disk) Socket() string  { return d.Dir + "/disk.sock" }
func (d *Disk) Pidfile() string { return d.Dir + "/disk.pid" }

// Serve starts the disk's daemon over Backing, which holds what the server's data
// directory held, and returns once Mount serves.
func (d *Disk) Serve(ctx context.Context) error {
	_, err := d.do(ctx, "serve", "--detach", "--backing", d.Backing(), "--mount", d.Mount(),
		"--pidfile", d.Pidfile(), "--log", d.Dir+"/disk.log")
	return err
}

// Drop drops every write the disk holds unsynced, as a power loss does, and says what was
// lost.
func (d *Disk) Drop(ctx context.Context) (lazydisk.Lost, error) {
	var lost lazydisk.Lost
	out, err := d.do(ctx, "drop")
	if err == nil {
		err = json.Unmarshal([]byte(out), &lost)
	}
	return lost, err
}

// HoldOpens makes every open of a file on the disk wait until ReleaseOpens.
func (d *Disk) HoldOpens(ctx context.Context) error {
	_, err := d.do(ctx, "hold")
	return err
}

// ReleaseOpens lets the held opens go on.
func (d *Disk) ReleaseOpens(ctx context.Context) error {
	_, err := d.do(ctx, "release")
	return err
}

// Sync makes every write the disk holds durable, as a clean shutdown does.
func (d *Disk) Sync(ctx context.Context) error {
	_, err := d.do(ctx, "sync")
	return err
}

// SlowSync makes every sync on the disk take delay; 0 makes them as fast as the disk
// below, and wakes those waiting.
func (d *Disk) SlowSync(ctx context.Context, delay time.Duration) error {
	_, err := d.do(ctx, "slow", "--delay", delay.String())
	return err
}

// Counters reads the disk's counters: its syncs, those waiting, the delay in force.
func (d *Disk) Counters(ctx context.Context) (lazydisk.Stats, error) {
	var stats lazydisk.Stats
	out, err := d.do(ctx, "counters")
	if err == nil {
		err = json.Unmarshal([]byte(out), &stats)
	}
	return stats, err
}

func (d *Disk) do(ctx context.Context, command string, args ...string) (string, error) {
	out, err := d.Do(ctx, append([]string{command, "--socket", d.Socket()}, args...)...)
	if err != nil {
		return "", fmt.Errorf("disk %s: %w", command, err)
	}
	return out, nil
}

// LocalDisk runs disk commands in this process: a disk served on this host.
func LocalDisk(_ context.Context, args ...string) (string, error) {
	var out, errs strings.Builder
	if code := lazydisk.Main(args, &out, &errs); code != 0 {
		return out.String(), fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(errs.String()))
	}
	return out.String(), nil
}

// PowerOff cuts node name's power: its server is killed and its disk drops every write it
// held unsynced; Restart starts it again on what the disk kept. It says in words what was
// lost.
func (c *Cluster) PowerOff(ctx context.Context, name string) (lost string, err error) {
	return c.losePower(ctx, name, c.Kill)
}

// PowerCycle cuts node name's power and has it start again at once, as Crash does (in
// place where the system can): the server, starting again however soon, opens nothing on
// its disk before the disk has dropped what it held unsynced. Restart waits until it
// serves. It says in words what was lost.
func (c *Cluster) PowerCycle(ctx context.Context, name string) (lost string, err error) {
	return c.losePower(ctx, name, c.Crash)
}

// losePower takes node name down by down and drops what its disk held unsynced, every
// open on the disk held meanwhile.
func (c *Cluster) losePower(ctx context.Context, name string, down func(context.Context, string) error) (lost string, err error) {
	r, err := c.find(c.nodes, name)
	if err != nil {
		return "", err
	}
	disk := r.Disk()
	if disk == nil {
		return "", fmt.Errorf("node %s keeps its data on no disk that can lose power", name)
	}
	if err := disk.HoldOpens(ctx); err != nil {
		return "", fmt.Errorf("power off node %s: %w", name, err)
	}
	defer func() {
		if releaseErr := disk.ReleaseOpens(ctx); releaseErr != nil {
			err = errors.Join(err, fmt.Errorf("power off node %s: %w", name, releaseErr))
		}
	}()
	if err := down(ctx, name); err != nil {
		return "", err
	}
	dropped, err := disk.Drop(ctx)
	if err != nil {
		return "", fmt.Errorf("power off node %s: %w", name, err)
	}
	return dropped.String(), nil
}

// SlowSync makes every sync on node name's disk take delay (0: as fast as it can).
func (c *Cluster) SlowSync(ctx context.Context, name string, delay time.Duration) error {
	r, err := c.find(c.nodes, name)
	if err != nil {
		return err
	}
	if r.Disk() == nil {
		return fmt.Errorf("node %s keeps its data on no disk that can be slowed", name)
	}
	if err := r.Disk().SlowSync(ctx, delay); err != nil {
		return fmt.Errorf("slow the disk of node %s: %w", name, err)
	}
	return nil
}

// withDisks runs f on the disk of every node that has one.
func (c *Cluster) withDisks(f func(name string, d *Disk) error) error {
	return Each(c.nodes, func(r Remote) error {
		if d := r.Disk(); d != nil {
			return f(r.Info().Name, d)
		}
		return nil
	})
}

// syncDisks makes what the nodes wrote while they started durable, as on machines
// that booted cleanly: their files, their first snapshots.
func (c *Cluster) syncDisks(ctx context.Context) error {
	return c.withDisks(func(name string, d *Disk) error {
		if err := d.Sync(ctx); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		return nil
	})
}

// healDisks makes every disk as fast as it can be again.
func (c *Cluster) healDisks(ctx context.Context) error {
	return c.withDisks(func(name string, d *Disk) error {
		if err := d.SlowSync(ctx, 0); err != nil {
			return fmt.Errorf("heal the disk of node %s: %w", name, err)
		}
		return nil
	})
}

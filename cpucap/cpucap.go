// Package cpucap starves processes of CPU without stopping them, for the throttle-holder
// fault: a cgroup of their own whose CFS quota is a small share of one CPU (Quota per
// Period), made in the CPU controller of cgroup v1 (cpu.cfs_quota_us) or, where there is
// none, of cgroup v2 (cpu.max). A capped process runs, but late: its timers fire, its
// keepalives and heartbeats are sent, each when its share of the CPU next comes round.
// A cap is released by moving its processes back to the cgroup it was made in and removing
// it, so nothing of it outlives the fault.
package cpucap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Root is where the cgroup hierarchies are mounted on a Linux host.
const Root = "/sys/fs/cgroup"

// A capped process gets Quota of CPU time in each Period: 1% of one CPU, the smallest
// quota the kernel takes (1 ms) at its default period. Everything the process does (the
// runtime's timers, scheduler and garbage collector, a client library's goroutines or
// threads) then queues for that millisecond, as on an overloaded host or in a container
// with a tiny CPU limit. A quota starves only a process that wants more than it: measured
// on etcd, an idle holder's keepalive still fits, which is why throttle-holder's holders
// work busily (docs/measurements.md). Where 1% is still enough on a fast machine, a cap is
// tightened (Cap.Tighten) through Steps.
const (
	Quota  = time.Millisecond
	Period = 100 * time.Millisecond
)

// Share is a CPU quota per period.
type Share struct{ Quota, Period time.Duration }

// String says s as a share of one CPU: "1% of a CPU", "0.1% of a CPU".
func (s Share) String() string {
	return strconv.FormatFloat(100*float64(s.Quota)/float64(s.Period), 'g', 2, 64) + "% of a CPU"
}

// Steps are the shares a cap goes through as it is tightened: the kernel's least quota at
// ever longer periods, down to the longest period it takes (1 s). A longer period stalls
// the process for longer at a stretch too, as a host overloaded for longer would.
var Steps = []Share{{Quota, Period}, {Quota, 250 * time.Millisecond}, {Quota, 500 * time.Millisecond}, {Quota, time.Second}}

// Controller is the CPU controller of one cgroup hierarchy: the cgroup caps are made in.
type Controller struct {
	dir string
	v2  bool
}

// Find finds the CPU controller under root (Root on a host): cgroup v1's cpu hierarchy
// (root/cpu), else cgroup v2's unified one (root itself, or root/unified beside v1's)
// with the cpu controller enabled for its children. It says why there is none that this
// process can make cgroups in.
func Find(root string) (Controller, error) {
	v1 := filepath.Join(root, "cpu")
	v1Err := writable(v1, "cpu.cfs_quota_us")
	if v1Err == nil {
		return Controller{dir: v1}, nil
	}
	var v2Err error
	for _, dir := range []string{root, filepath.Join(root, "unified")} {
		if v2Err = cpuEnabled(dir); v2Err == nil {
			return Controller{dir: dir, v2: true}, nil
		}
		if !errors.Is(v2Err, os.ErrNotExist) {
			break
		}
	}
	return Controller{}, fmt.Errorf("no CPU controller to throttle with under %s: cgroup v1 %v; cgroup v2 %v", root, v1Err, v2Err)
}

// writable says why file in cgroup dir cannot be written, nor a cgroup made beside it.
func writable(dir, file string) error {
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		return fmt.Errorf("has no %s (%w)", file, os.ErrNotExist)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("%s cannot be written: %w", dir, err)
	}
	return nil
}

// cpuEnabled says why dir is not a cgroup v2 hierarchy whose children have cpu.max: one
// whose cgroup.subtree_control names cpu, and which can be written.
func cpuEnabled(dir string) error {
	subtree, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("has no cgroup.subtree_control (%w)", os.ErrNotExist)
	}
	if !slices.Contains(strings.Fields(string(subtree)), "cpu") {
		return fmt.Errorf("%s does not give its children the cpu controller (no cpu.max)", dir)
	}
	return writable(dir, "cgroup.procs")
}

// Cap is a cgroup of the caller's with a CPU quota, holding the processes moved into it.
type Cap struct {
	c   Controller
	dir string
	// step is the index in Steps of the share it holds its processes to.
	step int
}

// Prefix starts the name of every cap, so that Sweep finds those a killed run left.
const Prefix = "lockbreaker-"

// Cap makes cgroup Prefix+name in c with Steps' first share and moves pids into it, each with
// all its threads. One that has exited meanwhile is no error. On an error nothing is left.
func (c Controller) Cap(name string, pids []int) (*Cap, error) {
	dir := filepath.Join(c.dir, Prefix+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	g := &Cap{c: c, dir: dir}
	err := g.limit()
	for _, pid := range pids {
		if err == nil {
			err = move(dir, pid)
		}
	}
	if err != nil {
		return nil, errors.Join(err, g.Release())
	}
	return g, nil
}

// limit writes the step's share: cpu.max in v2, the period and then the quota in v1.
func (g *Cap) limit() error {
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
	share := Steps[g.step]
	if g.c.v2 {
		return write(g.dir, "cpu.max", us(share.Quota)+" "+us(share.Period))
	}
	return errors.Join(write(g.dir, "cpu.cfs_period_us", us(share.Period)), write(g.dir, "cpu.cfs_quota_us", us(share.Quota)))
}

// Share is the share the cap holds its processes to.
func (g *Cap) Share() Share { return Steps[g.step] }

// Tighten takes the cap to the next of Steps; false when it is at the last already.
func (g *Cap) Tighten() (bool, error) {
	if g.step == len(Steps)-1 {
		return false, nil
	}
	g.step++
	return true, g.limit()
}

// Release moves every process in the cap back to the cgroup it was made in and removes
// the cap. It is idempotent.
func (g *Cap) Release() error {
	// A process the cap held may have forked as it was emptied: its child is in the cap.
	for range 10 {
		procs, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(procs)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("cgroup.procs of %s: %q", g.dir, f)
			}
			if err := move(g.c.dir, pid); err != nil {
				return err
			}
		}
		if err := rmdir(g.dir); !errors.Is(err, syscall.EBUSY) {
			return err
		}
	}
	return fmt.Errorf("cgroup %s keeps having processes", g.dir)
}

// Sweep removes the caps under root (Root on a host) that hold no process and were made
// over sweepAge ago: what a run killed with SIGKILL left, its workers gone with it. A cap
// being filled, or holding a live run's worker, is left alone. With no CPU controller there
// is nothing to sweep. It says how many it removed.
func Sweep(root string) (removed int, err error) {
	c, err := Find(root)
	if err != nil {
		return 0, nil
	}
	caps, err := filepath.Glob(filepath.Join(c.dir, Prefix+"*"))
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, dir := range caps {
		info, err := os.Stat(dir)
		if err != nil || !info.IsDir() || time.Since(info.ModTime()) < sweepAge {
			continue
		}
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || len(strings.Fields(string(procs))) > 0 {
			continue
		}
		if err := rmdir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// sweepAge is how old an empty cap must be for Sweep: one just made is empty until its
// processes are moved in, microseconds later.
const sweepAge = time.Minute

// rmdir removes a cgroup, which its directory allows with its control files in it (a
// variable: a test's plain directory does not).
var rmdir = os.Remove

// move moves process pid, all its threads, into cgroup dir; one that has exited is no error.
func move(dir string, pid int) error {
	err := write(dir, "cgroup.procs", strconv.Itoa(pid))
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// ProcessGroup lists the processes of process group pgid (from /proc): a worker and its
// exec client's program; none once they have all exited.
func ProcessGroup(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...: the command is in parentheses and may hold anything.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		if fields := strings.Fields(string(stat[i+1:])); len(fields) > 2 && fields[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

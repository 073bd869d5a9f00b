package cpucap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests lay out a plain directory as the kernel lays out /sys/fs/cgroup, which takes
// rmdir of a directory with files in it: a cgroup's are its control files.
func init() { rmdir = os.RemoveAll }

// fakeRoot is a directory laid out as root's cgroup hierarchies: a v1 cpu controller when
// v1, and a unified v2 hierarchy at unified with subtree (its cgroup.subtree_control).
func fakeRoot(t *testing.T, v1 bool, subtree string) string {
	t.Helper()
	root := t.TempDir()
	if v1 {
		put(t, filepath.Join(root, "cpu"), "cpu.cfs_quota_us", "-1")
		put(t, filepath.Join(root, "cpu"), "cpu.cfs_period_us", "100000")
		put(t, filepath.Join(root, "cpu"), "cgroup.procs", "1\n")
	}
	if subtree != "" {
		put(t, filepath.Join(root, "unified"), "cgroup.subtree_control", subtree)
		put(t, filepath.Join(root, "unified"), "cgroup.procs", "1\n")
	}
	return root
}

func put(t *testing.T, dir, file, value string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A cap is a cgroup of its own with 1 ms per 100 ms, in v1's cpu controller where there is
// one, else in v2's unified hierarchy; released, its processes are back where it was made
// and it is gone.
func TestCapLimitsAndReleaseMovesBackAndRemoves(t *testing.T) {
	tests := []struct {
		name              string
		v1                bool
		dir               string
		limits, tightened map[string]string // at the first step, at the last
	}{
		{"v1", true, "cpu", map[string]string{"cpu.cfs_quota_us": "1000", "cpu.cfs_period_us": "100000"},
			map[string]string{"cpu.cfs_quota_us": "1000", "cpu.cfs_period_us": "1000000"}},
		{"v2", false, "unified", map[string]string{"cpu.max": "1000 100000"}, map[string]string{"cpu.max": "1000 1000000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeRoot(t, tt.v1, "memory cpu io")
			c, err := Find(root)
			if err != nil {
				t.Fatal(err)
			}
			g, err := c.Cap("run-1", []int{41, 42})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, tt.dir, "lockbreaker-run-1")
			for file, want := range tt.limits {
				if got := read(t, filepath.Join(dir, file)); got != want {
					t.Errorf("%s = %q, want %q", file, got, want)
				}
			}
			for range len(Steps) - 1 {
				if ok, err := g.Tighten(); !ok || err != nil {
					t.Fatalf("tighten from %s: %v, %v", g.Share(), ok, err)
				}
			}
			if ok, err := g.Tighten(); ok || err != nil || g.Share().String() != "0.1% of a CPU" {
				t.Errorf("tighten at %s, the last step: %v, %v; want false", g.Share(), ok, err)
			}
			for file, want := range tt.tightened {
				if got := read(t, filepath.Join(dir, file)); got != want {
					t.Errorf("tightened, %s = %q, want %q", file, got, want)
				}
			}
			// The fake's cgroup.procs keeps the last pid written: the kernel's lists them all.
			if got := read(t, filepath.Join(dir, "cgroup.procs")); got != "42" {
				t.Errorf("cgroup.procs = %q, want 42 written last", got)
			}
			if err := g.Release(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the cap is still there: %v", err)
			}
			if got := read(t, filepath.Join(root, tt.dir, "cgroup.procs")); got != "42" {
				t.Errorf("parent's cgroup.procs = %q, want 42 moved back", got)
			}
			if err := g.Release(); err != nil {
				t.Errorf("a second release: %v", err)
			}
		})
	}
}

// Where neither v1's quota nor v2's cpu.max can be written, Find says why, in one line.
func TestFindSaysWhyThereIsNoController(t *testing.T) {
	tests := []struct {
		name    string
		v1      bool
		subtree string
		want    string
	}{
		{"nothing", false, "", "cgroup v1 has no cpu.cfs_quota_us"},
		{"v2 without cpu for its children", false, "memory io", "does not give its children the cpu controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Find(fakeRoot(t, tt.v1, tt.subtree))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Find: %v, want one line with %q", err, tt.want)
			}
		})
	}
}

// The test's own process group holds the test.
func TestProcessGroupListsTheGroup(t *testing.T) {
	pids, err := ProcessGroup(syscall.Getpgrp())
	if err != nil || !slices.Contains(pids, os.Getpid()) {
		t.Errorf("ProcessGroup of the test's group = %v, %v; want it to hold %d", pids, err, os.Getpid())
	}
}

// On a host with a CPU controller, a capped busy loop gets about its 1% of a CPU, and once
// released all it can take again; nothing of the cap is left.
func TestCapStarvesABusyProcess(t *testing.T) {
	c, err := Find(Root)
	if testing.Short() || err != nil {
		t.Skipf("short, or no CPU controller here: %v", err)
	}
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { busy.Process.Kill(); busy.Wait() }()
	g, err := c.Cap(fmt.Sprintf("test-%d", os.Getpid()), []int{busy.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	capped := cpuTime(t, busy.Process.Pid, time.Second)
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	free := cpuTime(t, busy.Process.Pid, time.Second)
	t.Logf("CPU in a second: %s capped, %s released", capped, free)
	if capped > 50*time.Millisecond || free < 2*capped {
		t.Errorf("CPU in a second: %s capped, %s released: want about 10 ms capped and far more released", capped, free)
	}
	if _, err := os.Stat(g.dir); !os.IsNotExist(err) {
		t.Errorf("the cap is still there: %v", err)
	}
}

// cpuTime is how much CPU process pid used in the next d (user and system, from /proc).
func cpuTime(t *testing.T, pid int, d time.Duration) time.Duration {
	t.Helper()
	used := func() time.Duration {
		stat := read(t, fmt.Sprintf("/proc/%d/stat", pid))
		fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		utime, _ := strconv.Atoi(fields[11])
		stime, _ := strconv.Atoi(fields[12])
		return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
	}
	before := used()
	time.Sleep(d)
	return used() - before
}

// Sweep removes the empty caps a killed run left, and none that holds a process, is being
// filled, or is not a cap.
func TestSweepRemovesEmptyCapsLeft(t *testing.T) {
	root := fakeRoot(t, true, "")
	cpu := filepath.Join(root, "cpu")
	old := time.Now().Add(-time.Hour)
	for name, procs := range map[string]string{"lockbreaker-dead-worker-1": "", "lockbreaker-live-worker-2": "42\n",
		"lockbreaker-new-worker-3": "", "someone-else": ""} {
		put(t, filepath.Join(cpu, name), "cgroup.procs", procs)
		if name != "lockbreaker-new-worker-3" {
			if err := os.Chtimes(filepath.Join(cpu, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := Sweep(root)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the dead run's cap removed", n, err)
	}
	left, _ := filepath.Glob(filepath.Join(cpu, "*-*"))
	want := []string{"lockbreaker-live-worker-2", "lockbreaker-new-worker-3", "someone-else"}
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}

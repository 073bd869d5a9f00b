package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/cpucap"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/tier"
)

// throttle-holder on etcd (issue 37), fenced by the lock key's create revision: the holder,
// busy through its work, throttled to 1% of a CPU right after its read, sends its keepalive
// too late, so its lease runs out and another client is granted the lock
// (granted-in-throttle) while it still works; given its CPU back, it writes on, and the
// storage rejects its stale token. Measured at the defaults it came in most throttles, some
// seconds into them (docs/measurements.md).
func TestEtcdThrottledHolder(t *testing.T) {
	throttledHolder(t, "etcd", laneEtcd)
}

// The same on a single Redis, whose lease no keepalive extends: the throttled holder's
// work outlasts it.
func TestRedisThrottledHolder(t *testing.T) {
	tier.Long(t)
	throttledHolder(t, "redis", laneRedis)
}

// throttledHolder runs throttle-holder fenced on system with its own client until another
// client was granted the lock while a throttled one held it, then asserts what must hold:
// two holders, the storage safe, every throttle of a client and healed, no cgroup of the
// run's left.
func throttledHolder(t *testing.T, system, lane string) {
	if _, err := cpucap.Find(cpucap.Root); err != nil {
		t.Skip(err)
	}
	inLane(t, lane)
	// The takeover comes a few seconds into a throttle, in most of them: run until it came,
	// at most 20 s.
	spec := shortSpec(system, system, history.ThrottleHolder.Name, true, 20*time.Second)
	spec.StopEarly = true
	tr := untilDanger(t, spec, both(hazard(history.GrantedInThrottle), overlapped))
	expectLockBrokenDataSafe(t, tr.summary)
	for _, f := range history.Faults(tr.events) {
		if _, ok := history.ClientTarget(f.Targets[0]); f.Description != history.ThrottleHolder.Name || !ok || !f.Healed {
			t.Errorf("fault %+v: want throttle-holder on a client, healed", f)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cpucap.Root, "*", cpucap.Prefix+tr.summary.RunID+"-*")); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

// A throttle of an exec client caps its whole process group: the worker and its program
// are in the run's cgroup for the worker, together held to 1% of a CPU, and the program's
// own thread (its heartbeat) goes on, late, rather than stopping. Unthrottled, both are back
// where they were and the cgroup is gone.
func TestThrottleCapsTheExecProgramToo(t *testing.T) {
	if _, err := cpucap.Find(cpucap.Root); err != nil {
		t.Skip(err)
	}
	inLane(t, laneLocal)
	workers, logged := startHeartbeat(t)
	defer workers.stop(5 * time.Second)
	worker := workers.slots[0].cmd.Process.Pid
	group := []int{worker, childOf(t, worker)}
	slices.Sort(group)

	if err := workers.Throttle(0); err != nil {
		t.Fatal(err)
	}
	capped, _ := filepath.Glob(filepath.Join(cpucap.Root, "*", cpucap.Prefix+workers.slots[0].cfg.Run+"-worker-0"))
	if len(capped) != 1 {
		t.Fatalf("cgroups of the throttle: %v, want one", capped)
	}
	if procs := pidsIn(t, capped[0]); !slices.Equal(procs, group) {
		t.Errorf("the throttle's cgroup holds %v, want the worker and its program %v", procs, group)
	}
	beats := strings.Count(logged(), "beat ")
	used := groupCPU(t, group, time.Second)
	beats = strings.Count(logged(), "beat ") - beats
	if err := workers.Unthrottle(); err != nil {
		t.Fatal(err)
	}
	t.Logf("throttled for a second: %s of CPU, %d heartbeats", used, beats)
	if used > 50*time.Millisecond || beats == 0 {
		t.Errorf("throttled for a second: %s of CPU and %d heartbeats, want about 10 ms and some", used, beats)
	}
	if _, err := os.Stat(capped[0]); !os.IsNotExist(err) {
		t.Errorf("the throttle's cgroup is still there after Unthrottle: %v", err)
	}
	if back := pidsIn(t, filepath.Dir(capped[0])); !slices.Contains(back, group[0]) || !slices.Contains(back, group[1]) {
		t.Errorf("the worker and its program %v are not back in %s", group, filepath.Dir(capped[0]))
	}
}

// pidsIn lists the processes in cgroup dir, in order.
func pidsIn(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// groupCPU is how much CPU the processes used together in the next d (user and system).
func groupCPU(t *testing.T, pids []int, d time.Duration) time.Duration {
	t.Helper()
	used := func() (total time.Duration) {
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				t.Fatal(err)
			}
			fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			utime, _ := strconv.Atoi(fields[11])
			stime, _ := strconv.Atoi(fields[12])
			total += time.Duration(utime+stime) * time.Second / 100 // USER_HZ
		}
		return total
	}
	before := used()
	time.Sleep(d)
	return used() - before
}

// Only a run whose fault starves a holder of CPU makes its holders work busily: every other
// run's holders sleep through their work, as five clients spinning would eat the machine.
func TestOnlyAThrottleMakesHoldersBusy(t *testing.T) {
	cases := map[string]bool{history.PauseHolder.Name: false, "none": false}
	if _, err := cpucap.Find(cpucap.Root); err == nil { // elsewhere throttle-holder is refused before the run
		cases[history.ThrottleHolder.Name] = true
	}
	for nem, want := range cases {
		tr := &trial{Checked: checked(t, func(s *Spec) { s.Nemesis = []string{nem} })}
		for _, c := range tr.workerConfigs("r", []string{"n1:1"}, nil, "s:1") {
			if c.BusyWork != want {
				t.Errorf("%s: worker %d busy %v, want %v", nem, c.Process, c.BusyWork, want)
			}
		}
	}
}

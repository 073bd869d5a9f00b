package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/tier"
	"github.com/lockbreaker/lockbreaker/lazydisk"
)

// A run with Docker unreachable fails before it creates anything: no run directory, no
// latest link.
func TestDockerUnreachableCreatesNothing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "results")
	code, _, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "run", "--results", root)
	if code != 255 || !strings.Contains(stderr, "docker is not reachable") {
		t.Errorf("exit %d, stderr %q: want 255 and 'docker is not reachable'", code, stderr)
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(root)
		t.Errorf("results directory created (%v), holding %v", err, entries)
	}
}

// A run whose output's reader goes away before its first line (lockbreaker run | head -0)
// stops at that line as on Ctrl-C, in one line saying why, instead of dying of SIGPIPE and
// leaving what it made. The in-process lock service needs no Docker; the real-container
// runs are ended this way in TestKilledRunsLeaveNothing.
func TestClosedOutputStopsARun(t *testing.T) {
	cmd := exec.Command(binary, "run", "--system", "local", "--time-limit", "1m", "--results", t.TempDir())
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent/docker.sock")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 255 || strings.TrimSpace(errOut.String()) != "lockbreaker: interrupted (its output was closed)" {
		t.Errorf("%v, stderr %q: want exit 255 and one line saying the output was closed", err, errOut.String())
	}
}

// killMoment is a point of a run, found by what the run prints or does, never by a timer.
type killMoment struct {
	phase  string
	name   string
	system string
	line   string // kill when a stdout line contains it; "" and !paused: right after exec
	paused bool   // kill when a worker is stopped (SIGSTOPped by pause-holder)
}

// kill is a run ended from outside at one of its moments.
type kill struct {
	m  killMoment
	by ending
}

// ending is how a run is ended from outside: by a signal, or by none, the reader of its
// output going away (lockbreaker run | head).
type ending syscall.Signal

const outputClosed ending = 0

func (e ending) String() string {
	if e == outputClosed {
		return "output closed"
	}
	return syscall.Signal(e).String()
}

// end ends the run of cmd, whose output is read from stdout.
func (e ending) end(cmd *exec.Cmd, stdout io.Closer) {
	if e == outputClosed {
		stdout.Close()
		return
	}
	cmd.Process.Signal(syscall.Signal(e))
}

// Runs killed at moments spread over bring-up, mid-run and teardown, by SIGINT, SIGTERM,
// SIGKILL or their output's reader going away, leave nothing behind: no container or
// network once the harness has exited (after `lockbreaker clean --run` for SIGKILL, which
// cannot be handled), no worker process, stopped or not, and a history that
// `lockbreaker check` reads.
func TestKilledRunsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	moments := []killMoment{
		{phase: "bring-up", name: "right after exec", system: "redis"},
		{phase: "bring-up", name: "cluster starting", system: "redis", line: "starting redis cluster"},
		{phase: "mid-run", name: "clients started", system: "redis", line: "clients running"},
		{phase: "mid-run", name: "holder paused", system: "redis", paused: true},
		{phase: "teardown", name: "clients stopped", system: "redis", line: "all faults healed, clients stopped"},
	}
	// The reported bug: a Redlock cluster interrupted while its five nodes start. Killed
	// then, it leaves container creations in flight that `clean` must still catch.
	moments = append(moments, killMoment{phase: "bring-up", name: "redlock cluster starting", system: "redlock", line: "starting redlock cluster"})
	killRuns(t, killsOf(moments), nil)
}

// A run whose nodes keep their data on disks served from this host (power-loss), killed
// while its holder is paused within its lease and the holder's node loses its power, leaves
// no disk either: no mount, no daemon, no directory (after clean --run for SIGKILL).
func TestKilledPowerLossRunsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	killRuns(t, killsOf([]killMoment{{phase: "mid-run", name: "powered-off holder's node", system: "redis", paused: true}}), nil,
		"--nemesis", "power-loss", "--persistence", "aof-everysec")
}

// A shrink killed while one of its trial runs holds a worker paused, in any of those ways,
// leaves nothing either: its trials are runs like any other.
func TestKilledShrinkLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	// The run to shrink must have failed: on a busy machine a few seconds may see no pause
	// (unknown, exit 2), and a fresh seed is tried.
	var root string
	for seed := 7; ; seed++ {
		root = t.TempDir()
		code, stdout, stderr := lockbreaker(t, nil, "run", "--system", "redis", "--nemesis", "pause-holder", "--clients", "3",
			"--ttl", "1s", "--time-limit", "4s", "--seed", fmt.Sprint(seed), "--stop-at-first-violation", "--results", root)
		if code == 1 {
			break
		}
		if code != 2 || seed == 9 {
			t.Fatalf("the run to shrink: exit %d, want 1 (invalid)\n%s%s", code, stdout, stderr)
		}
	}
	failing := filepath.Join(root, "latest")
	for _, k := range killsOf([]killMoment{{phase: "mid-run", name: "trial holder paused", system: "redis", paused: true}}) {
		t.Run(k.by.String(), func(t *testing.T) {
			code, pid, printed, stderr := killRun(t, k.m, k.by, "shrink", "--results", t.TempDir(), failing)
			t.Logf("exit %d, stderr %q", code, strings.TrimSpace(stderr))
			checkExit(t, k, code, stderr)
			leftBehind(t, k.by, pid, printed, nil)
		})
	}
}

// Runs of exec clients (redis-py's Lock, a Python program per client) killed mid-run, with
// the holder's program stopped or not, and in teardown, leave no program behind either:
// programs die with their workers, which die with the harness.
func TestKilledExecRunsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import redis").Run(); err != nil {
		t.Fatalf("/usr/bin/python3 has no redis-py (make deps installs python3-redis): %v", err)
	}
	// A copy of its own, as killable is: the examples' tests run the same program beside these.
	program, err := copyFile("../examples/python/redispy_lock.py", filepath.Join(t.TempDir(), "redispy_lock.py"))
	if err != nil {
		t.Fatal(err)
	}
	kills := killsOf([]killMoment{
		{phase: "mid-run", name: "exec clients started", system: "redis", line: "clients running"},
		{phase: "mid-run", name: "exec holder paused", system: "redis", paused: true},
	})
	kills = append(kills, kill{killMoment{phase: "teardown", name: "exec clients stopped", system: "redis",
		line: "all faults healed, clients stopped"}, ending(syscall.SIGKILL)})
	killRuns(t, kills, []string{program}, "--client", "exec", "--client-cmd", program)
}

// endings are the ways a run is killed: signals handled (SIGINT, SIGTERM) and not
// (SIGKILL), and its output closed, which the harness handles as an interrupt.
var endings = []ending{ending(syscall.SIGINT), ending(syscall.SIGTERM), outputClosed, ending(syscall.SIGKILL)}

// killsOf are the kills of moments: in make test each moment once, in the endings taken in
// turn (SIGKILL first, which leaves the most to clean); in the long tier in every one.
func killsOf(moments []killMoment) []kill {
	var kills []kill
	for i, m := range moments {
		if !tier.IsLong() {
			kills = append(kills, kill{m, endings[(len(endings)-1+i)%len(endings)]})
			continue
		}
		for _, e := range endings {
			kills = append(kills, kill{m, e})
		}
	}
	return kills
}

// killRuns runs each kill (a run of pause-holder with args, killed at its moment) and checks
// that it left nothing: no container or network of its own (removed by clean --run after
// SIGKILL), no process of the binary and none whose command line holds one of programs.
func killRuns(t *testing.T, kills []kill, programs []string, args ...string) {
	counts := map[string]int{}
	leftovers, checked, torn := 0, 0, 0
	for _, k := range kills {
		name := fmt.Sprintf("%s/%s/%s", k.m.phase, k.m.name, k.by)
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			// A run killed before its teardown lasts until its moment, whatever its time
			// limit: beside make test and two busy processes, exec clients' first pause came
			// after 4 s. A run killed in its teardown must get there.
			limit := "1m"
			if k.m.phase == "teardown" {
				limit = "4s"
			}
			code, pid, printed, stderr := killRun(t, k.m, k.by, append([]string{"run", "--system", k.m.system, "--nemesis", "pause-holder",
				"--clients", "3", "--ttl", "1s", "--time-limit", limit, "--seed", "7", "--results", root}, args...)...)
			counts[fmt.Sprintf("%s %s", k.m.phase, k.by)]++
			t.Logf("exit %d, stderr %q", code, strings.TrimSpace(stderr))
			checkExit(t, k, code, stderr)

			leftovers += leftBehind(t, k.by, pid, printed, programs)

			dir := filepath.Join(root, "latest")
			data, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
			if err != nil {
				return // killed before the run had a history
			}
			checked++
			code, stdout, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "check", dir)
			isTorn := len(data) > 0 && data[len(data)-1] != '\n'
			switch {
			case code <= 2:
			case code == 254 && isTorn:
				torn++
				t.Logf("check refuses the torn last line of the history (exit 254): %s", stderr)
			default:
				t.Errorf("check of the killed run: exit %d, want 0, 1 or 2\n%s%s", code, stdout, stderr)
			}
		})
	}
	var summary []string
	for _, m := range []string{"bring-up", "mid-run", "teardown"} {
		for _, e := range endings {
			if n := counts[fmt.Sprintf("%s %s", m, e)]; n > 0 {
				summary = append(summary, fmt.Sprintf("%s %s: %d", m, e, n))
			}
		}
	}
	t.Logf("%d kills (%s); %d histories checked, %d with a torn last line; leftovers found: %d",
		len(kills), strings.Join(summary, ", "), checked, torn, leftovers)
}

// leftBehind checks that the harness of pid, ended by e, left nothing: no container or
// network of its own (removed by clean --run after SIGKILL), no process of the binary and
// none whose command line holds one of programs. It removes what it finds and counts it.
func leftBehind(t *testing.T, e ending, pid int, printed, programs []string) (leftovers int) {
	t.Helper()
	// Only this run's: other tests and other people's runs may share the engine. The
	// run's id as it printed it, too: a network or container it was creating when
	// killed may not exist yet, and clean must catch it when the engine is done.
	if e == ending(syscall.SIGKILL) {
		for _, run := range runsOf(t, pid, printed) {
			if code, _, stderr := lockbreaker(t, nil, "clean", "--run", run); code != 0 {
				t.Fatalf("clean --run %s: exit %d: %s", run, code, stderr)
			}
		}
	}
	if disks := disksOf(t, pid); len(disks) > 0 {
		leftovers += len(disks)
		t.Errorf("left disks %v", disks)
	}
	if c, n := ownedBy(t, "container", pid), ownedBy(t, "network", pid); len(c)+len(n) > 0 {
		leftovers += len(c) + len(n)
		t.Errorf("left containers %v networks %v", c, n)
		for _, run := range runsOf(t, pid, printed) {
			lockbreaker(t, nil, "clean", "--run", run)
		}
	}
	// Handled signals: the harness reaped its workers before exiting. SIGKILL: the
	// kernel kills them (Pdeathsig) as the harness dies, and their programs as they
	// die; give it a moment.
	wait := time.Duration(0)
	if e == ending(syscall.SIGKILL) {
		wait = 5 * time.Second
	}
	if procs := ownProcesses(t, wait, programs); len(procs) > 0 {
		leftovers += len(procs)
		t.Errorf("processes of the binary or its programs outlived the run: %v", procs)
		for _, p := range procs {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	return leftovers
}

// killRun runs the binary with args and ends it by e at moment m, then waits for it to exit
// and returns its exit code (-1 when a signal ended it), its pid, stdout's lines and stderr.
func killRun(t *testing.T, m killMoment, e ending, args ...string) (int, int, []string, string) {
	t.Helper()
	cmd := exec.Command(killable, args...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		in := bufio.NewScanner(stdout)
		for in.Scan() {
			lines <- in.Text()
		}
	}()
	fired := m.line == "" && !m.paused
	if fired {
		e.end(cmd, stdout)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var seen []string
	for open := true; open; {
		select {
		case line, ok := <-lines:
			if !ok {
				open = false
				continue
			}
			seen = append(seen, line)
			if !fired && m.line != "" && strings.Contains(line, m.line) {
				fired = true
				e.end(cmd, stdout)
			}
		case <-tick.C:
			if !fired && m.paused && anyStopped(t) {
				fired = true
				e.end(cmd, stdout)
			}
		}
	}
	err = cmd.Wait()
	if !fired {
		t.Fatalf("the run ended before the moment %q; it printed:\n%s", m.name, strings.Join(seen, "\n"))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, cmd.Process.Pid, seen, errOut.String()
}

// disksOf lists the disks' directories the harness of pid made on this host, and the
// disks still mounted anywhere under them.
func disksOf(t *testing.T, pid int) []string {
	t.Helper()
	dirs, _ := filepath.Glob(fmt.Sprintf("/var/lib/lockbreaker/disks/*@%d-*", pid))
	mounts, err := lazydisk.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		for _, d := range dirs {
			if strings.HasPrefix(m, d+"/") {
				dirs = append(dirs, m)
			}
		}
	}
	return dirs
}

// ownedBy lists the labelled containers or networks ("container", "network") that the
// harness of pid created.
func ownedBy(t *testing.T, what string, pid int) []string {
	t.Helper()
	return dockerList(t, what, "{{.ID}}", ownerFilter(pid))
}

// ownerFilter is a docker filter for what the harness of pid created.
func ownerFilter(pid int) string { return fmt.Sprintf("label=org.lockbreaker.pid=%d", pid) }

// printedRun finds a run's id in what it printed ("starting redis cluster (run ID)").
var printedRun = regexp.MustCompile(`\(run ([^)\s]+)\)`)

// runsOf lists the run ids of what the harness of pid created, and those it printed.
func runsOf(t *testing.T, pid int, printed []string) []string {
	t.Helper()
	runs := map[string]bool{}
	for _, line := range printed {
		if m := printedRun.FindStringSubmatch(line); m != nil {
			runs[m[1]] = true
		}
	}
	for _, what := range []string{"container", "network"} {
		for _, run := range dockerList(t, what, `{{.Label "org.lockbreaker.run"}}`, ownerFilter(pid)) {
			runs[run] = true
		}
	}
	return slices.Sorted(maps.Keys(runs))
}

// checkExit checks how a killed run ended: a handled signal gives exit 255 and one line
// saying it was interrupted; only a signal sent before the handlers exist, or SIGKILL, ends
// the process by the signal itself. A run that reached its time limit is not cut short by a
// signal during teardown: it reports its verdict. A closed output is seen at the next
// write, which may come only once the verdict is known; it never kills the process.
func checkExit(t *testing.T, k kill, code int, stderr string) {
	t.Helper()
	switch {
	case k.by == outputClosed:
		if code == 255 {
			if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "its output was closed") {
				t.Errorf("stderr %q: want one line saying the output was closed", stderr)
			}
		} else if code < 0 || code > 2 || stderr != "" {
			t.Errorf("exit %d, stderr %q: want 255 (stopped) or the verdict", code, stderr)
		}
	case k.by == ending(syscall.SIGKILL) || (code == -1 && k.m.line == "" && !k.m.paused):
		if code != -1 && code != 255 {
			t.Errorf("exit %d after %s", code, k.by)
		}
	case k.m.phase == "teardown":
		if code < 0 || code > 2 || stderr != "" {
			t.Errorf("exit %d, stderr %q: want the verdict (0, 1 or 2)", code, stderr)
		}
	case code != 255:
		t.Errorf("exit %d, stderr %q: want 255 and 'interrupted'", code, stderr)
	default:
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "interrupted") {
			t.Errorf("stderr %q: want one line saying the run was interrupted", stderr)
		}
	}
}

type process struct {
	pid   int
	ppid  int
	state string
	cmd   string
	args  string // its command line, words joined by spaces
}

func (p process) String() string { return fmt.Sprintf("%d (%s) %s", p.pid, p.state, p.args) }

// ownProcesses returns the live processes running the killed runs' binary (killable;
// workers are the binary re-executed) or one of programs (an exec client's, named in its
// command line), waiting up to wait for them to go. Zombies are not counted: they run nothing, and reaping orphans
// is the init process's job.
func ownProcesses(t *testing.T, wait time.Duration, programs []string) []process {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		var procs []process
		for _, p := range processes(t) {
			if p.state != "Z" && (p.cmd == killable || slices.ContainsFunc(programs, func(prog string) bool {
				return strings.Contains(p.args, prog)
			})) {
				procs = append(procs, p)
			}
		}
		if len(procs) == 0 || time.Now().After(deadline) {
			return procs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// anyStopped reports whether a process of the killed runs' binary is stopped (state T): a paused worker.
func anyStopped(t *testing.T) bool {
	for _, p := range processes(t) {
		if p.cmd == killable && p.state == "T" {
			return true
		}
	}
	return false
}

// processes lists this machine's processes with their state and executable path.
func processes(t *testing.T) []process {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var procs []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		// The command name (field 2) is in parentheses and may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		ppid, _ := strconv.Atoi(fields[1])
		procs = append(procs, process{pid: pid, ppid: ppid, state: fields[0], cmd: strings.TrimSuffix(exe, " (deleted)"),
			args: strings.ReplaceAll(string(bytes.TrimRight(args, "\x00")), "\x00", " ")})
	}
	return procs
}

package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/execlock"
)

// Exec clients: programs that speak the protocol (docs/protocol.md), driven by the same
// worker loop as the Go clients. The programs here are this test binary again: serving a
// Go lock (execlock.MaybeServe), or behaving as testProgramEnv says.

// testProgramEnv makes this test binary a program of its own (runTestProgram).
const testProgramEnv = "HARNESS_TEST_PROGRAM"

// runTestProgram runs the program behaviour names, when it names one:
//
//   - heartbeat: says on stderr, every 10 ms, "beat" and the time (CLOCK_MONOTONIC), and
//     answers every acquire with busy after 100 ms, as a lock library retrying would;
//   - garbage: answers its first acquire with a line that is no JSON;
//   - exits: exits at once, saying why on stderr, as a program missing its library does;
//   - dies-after-reading: reads its configuration, then exits, saying why on stderr, as a
//     program that cannot connect does.
func runTestProgram(behaviour string) {
	switch behaviour {
	case "heartbeat":
		go func() {
			for {
				fmt.Fprintf(os.Stderr, "beat %d\n", history.Now())
				time.Sleep(10 * time.Millisecond)
			}
		}()
		execlock.Serve(os.Stdin, os.Stdout, func(workloads.Config) (workloads.Lock, error) { return slowBusyLock{}, nil })
	case "garbage":
		in := bufio.NewScanner(os.Stdin)
		in.Scan()
		fmt.Println(`{"result":"ready"}`)
		in.Scan()
		fmt.Println("OK, got it")
	case "exits":
		fmt.Fprintln(os.Stderr, "ModuleNotFoundError: No module named 'kazoo'")
		os.Exit(1)
	case "dies-after-reading":
		bufio.NewScanner(os.Stdin).Scan()
		fmt.Fprintln(os.Stderr, "kazoo.handlers.threading.KazooTimeoutError: Connection time-out")
		os.Exit(1)
	default:
		return
	}
	os.Exit(0)
}

// slowBusyLock finds the lock busy, after 100 ms.
type slowBusyLock struct{}

func (slowBusyLock) Acquire(context.Context) (workloads.Grant, error) {
	time.Sleep(100 * time.Millisecond)
	return workloads.Grant{}, workloads.ErrBusy
}
func (slowBusyLock) Release(context.Context) error { return workloads.ErrNotHeld }
func (slowBusyLock) Close() error                  { return nil }

// testProgram is the command line of this test binary as the program behaviour names.
func testProgram(t *testing.T, behaviour string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if behaviour == "" {
		return []string{"env", execlock.ServeEnv + "=local", exe}
	}
	return []string{"env", testProgramEnv + "=" + behaviour, exe}
}

// startHeartbeat starts one worker whose exec program beats from a thread of its own
// (testProgram "heartbeat"), and returns once it has beaten five times; logged is the
// workers' log so far.
func startHeartbeat(t *testing.T) (*pool, func() string) {
	t.Helper()
	rec, logs, logged := poolRecords(t)
	exe, _ := os.Executable()
	cfg := WorkerConfig{Process: 0, Run: fmt.Sprintf("test-%d", os.Getpid()), Client: execlock.Name,
		AcquireTimeout: 300 * time.Millisecond, OpTimeout: time.Second,
		Lock: workloads.Config{System: "local", Key: "lock", TTL: time.Second, OpTimeout: 100 * time.Millisecond,
			Retry: 20 * time.Millisecond, Owner: "w0", Program: testProgram(t, "heartbeat")}}
	workers, err := startPool([]string{exe}, []WorkerConfig{cfg}, rec, logs)
	if err != nil {
		t.Fatal(err)
	}
	for strings.Count(logged(), "beat ") < 5 {
		time.Sleep(10 * time.Millisecond)
	}
	return workers, logged
}

// A pause of an exec client stops its whole process group: the program's own threads
// (its heartbeat here) stop with the worker and go on after SIGCONT. The request the
// program was answering when it stopped is not held against it: a pause far longer than
// the request's bound and its grace loses no client.
func TestPauseStopsTheExecProgram(t *testing.T) {
	inMakeTest(t, "TestThrottleCapsTheExecProgramToo, a fault on the program's whole process group")
	inLane(t, laneLocal)
	workers, logged := startHeartbeat(t)
	defer workers.stop(5 * time.Second)
	worker := workers.slots[0].cmd.Process.Pid
	program := childOf(t, worker)

	const pause = 3 * time.Second // the acquire's 300 ms and execlock's 2 s grace, and more
	if err := workers.Signal(0, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := history.Now()
	time.Sleep(100 * time.Millisecond)
	for _, pid := range []int{worker, program} {
		if s := procState(t, pid); s != "T" {
			t.Errorf("process %d is %s during the pause, want T (stopped)", pid, s)
		}
	}
	time.Sleep(pause - 100*time.Millisecond)
	resumed := history.Now()
	if err := workers.Signal(0, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	workers.stop(5 * time.Second)

	var during, after int
	for _, line := range strings.Split(logged(), "\n") {
		at, ok := strings.CutPrefix(line, "worker-0: program: beat ")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			t.Fatalf("heartbeat %q", line)
		}
		switch {
		case ns > stopped+int64(50*time.Millisecond) && ns < resumed:
			during++
		case ns > resumed:
			after++
		}
	}
	if during > 0 || after == 0 {
		t.Errorf("%d heartbeats during the pause, %d after it; want none during, some after", during, after)
	}
	if note := workers.lostNote(); note != "" || workers.clientErr() != nil {
		t.Errorf("the pause lost the client: %s %v", note, workers.clientErr())
	}
	if n := started(workers); n != 1 {
		t.Errorf("%d workers started; the pause replaced the client", n)
	}
	t.Logf("%d heartbeats after the pause", after)
}

// childOf is the one child of process pid (started by any of its threads).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var children []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) != 1 {
		t.Fatalf("process %d has children %q, want its program alone", pid, children)
	}
	child, _ := strconv.Atoi(children[0])
	return child
}

// procState is a process's state (R, S, T, Z...), or "" when it is gone.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return fields[0]
}

// localExecSpec is localSpec with each lock client the local lock served by a program.
func localExecSpec(t *testing.T, nemesis []string, fencing bool, behaviour string) Spec {
	s := localSpec("local", nemesis, fencing)
	s.Client, s.ClientCmd = execlock.Name, testProgram(t, behaviour)
	return s
}

// Whole trials through the exec path give the verdicts the same lock gives in Go: a
// paused holder breaks the lock, fencing keeps the data, and a killed client's program
// dies with it and a new one takes its place.
func TestExecClientTrials(t *testing.T) {
	if testing.Short() {
		t.Skip("runs of exec clients on the in-process lock, 8 s: make test has them, the fast tier does not")
	}
	inLane(t, laneLocal)
	t.Run("paused holder, fenced", func(t *testing.T) {
		s := runScenario(t, localExecSpec(t, []string{"pause-holder"}, true, ""))
		expectLockBrokenDataSafe(t, s)
		if !slices.ContainsFunc(s.Notes, func(n string) bool {
			return strings.HasPrefix(n, "each lock client runs the program env "+execlock.ServeEnv+"=local")
		}) {
			t.Errorf("notes %q do not name the program", s.Notes)
		}
	})
	t.Run("paused holder, unfenced", func(t *testing.T) {
		expect(t, runScenario(t, localExecSpec(t, []string{"pause-holder"}, false, "")), map[checkers.Name]checkers.Verdict{
			"mutual-exclusion": checkers.Invalid,
			"data-safety":      checkers.Invalid,
		})
	})
	t.Run("killed clients", func(t *testing.T) {
		spec := localExecSpec(t, []string{"kill-client"}, true, "")
		tr := untilDanger(t, spec, worked)
		expectAllValid(t, tr.summary)
		replaced := false
		for _, e := range tr.events {
			replaced = replaced || e.Process >= spec.Clients
		}
		if !replaced {
			t.Error("no client was replaced")
		}
	})
}

// Two lock clients share the slots on one lock: slot 0 the Go client, slot 1 a program
// serving the same lock over the exec protocol, slot 2 the Go client again. Their grants are
// checked together: a paused holder of one and a holder of the other overlap, and the story
// says which client each holder used.
func TestMixedClientsShareOneLock(t *testing.T) {
	inLane(t, laneLocal)
	s := localSpec("local", []string{history.PauseHolder.Name}, false)
	s.Client, s.ClientCmd = "local,"+execlock.Name, testProgram(t, "")
	tr := untilDanger(t, s, overlapped)
	for _, e := range tr.events {
		if e.Func != history.Acquire || e.Type != history.OK {
			continue
		}
		if want := []string{"local", execlock.Name}[e.Process%2]; e.Process < s.Clients && e.Detail[history.ClientDetail] != want {
			t.Errorf("#%d: process %d's grant names client %q, want %q", e.Index, e.Process, e.Detail[history.ClientDetail], want)
		}
	}
	story := checkers.StoryText(verdicts(tr.summary)["mutual-exclusion"].Story)
	grants := regexp.MustCompile(`p(\d+) was granted the lock( \(token \d+\))?( through (\S+))? at`).FindAllStringSubmatch(story, -1)
	for _, g := range grants {
		p, _ := strconv.Atoi(g[1])
		if want := []string{"local", execlock.Name}[p%2]; p < s.Clients && g[4] != want {
			t.Errorf("the story says p%d was granted through %q, want %q:\n%s", p, g[4], want, story)
		}
	}
	if len(grants) < 2 {
		t.Errorf("the story tells %d grants, want both holders':\n%s", len(grants), story)
	}
}

// A program that cannot start here (its library missing: it ends before reading its
// configuration) is refused as bad input, quoting its last words, before a run directory,
// a cluster or a worker exists.
func TestExecProgramThatCannotStartIsRefused(t *testing.T) {
	inLane(t, laneLocal)
	spec := localExecSpec(t, []string{"none"}, false, "exits")
	root := t.TempDir()
	r := Runner{ResultsRoot: root}
	dir, _, err := r.Run(context.Background(), spec)
	var specErr *SpecError
	if !errors.As(err, &specErr) || !strings.Contains(err.Error(), "before it read its configuration: ModuleNotFoundError: No module named 'kazoo'") {
		t.Fatalf("run: %v; want bad input quoting the program's stderr", err)
	}
	if entries, _ := os.ReadDir(root); dir != "" || len(entries) > 0 {
		t.Errorf("the refused run made %q and %d entries in its store", dir, len(entries))
	}
}

// A program that breaks the protocol, or cannot run, ends the run with a harness error
// naming it, long before its hour is up: the run judges the client, not the lock.
func TestBrokenExecClientEndsTheRun(t *testing.T) {
	inMakeTest(t, "execlock's TestProtocolAbuse, each broken program's error")
	inLane(t, laneLocal)
	cases := []struct {
		behaviour string
		says      string
	}{
		{"garbage", `lock client broke: program "env ` + testProgramEnv + `=garbage`},
		{"dies-after-reading", "lock client broke: lost 3 times in a row before it was ready; the last time, worker-"},
	}
	for _, c := range cases {
		t.Run(c.behaviour, func(t *testing.T) {
			spec := localExecSpec(t, []string{"none"}, false, c.behaviour)
			spec.TimeLimit = Duration(time.Hour)
			exe, _ := os.Executable()
			r := Runner{ResultsRoot: t.TempDir(), Worker: []string{exe}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, summary, err := r.Run(ctx, spec)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("run: %v; want an error saying %q", err, c.says)
			}
			if summary.Verdict == checkers.Valid || summary.Error == "" {
				t.Errorf("verdict %s, error %q: want no pass and the error in the summary", summary.Verdict, summary.Error)
			}
			expectNothingLeft(t, system.System{}, summary.RunID, false)
			if c.behaviour == "dies-after-reading" && !strings.Contains(err.Error(), "its stderr ended: kazoo.handlers.threading.KazooTimeoutError") {
				t.Errorf("the error does not quote the program's stderr: %v", err)
			}
			t.Logf("%v", err)
		})
	}
}

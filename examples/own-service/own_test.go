// Package own_test puts the system files beside it under lockbreaker as a team would put
// its own lock service: the example lease server from an image that holds nothing but its
// static binary (partitions, pauses and kills reach it from outside; clock faults are
// refused before the run), the team's Redis image against the built-in redis on the same
// seeds, and the lease server's suite. The images are built with make (Makefile), from
// the node image; no registry is contacted.
//
// LOCKBREAKER_LONG=1 (make test-long) adds the slower comparisons and cells (none,
// kill-node and partition-holder on both Redis systems, redislock under pause-holder; the
// lease suite's no-fault and unfenced cells).
package own_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/examples/internal/exampletest"
	"github.com/lockbreaker/lockbreaker/internal/testbin"
	"github.com/lockbreaker/lockbreaker/sysfile"
	"github.com/lockbreaker/lockbreaker/system"
)

var (
	buildOnce sync.Once
	binDir    string
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// build finds the lockbreaker binary (make test's) or builds it, once for all the tests,
// and returns its path.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "own-service-"); buildErr != nil {
			return
		}
		builtBin, buildErr = testbin.Path(binDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var (
	imagesMu sync.Mutex
	images   = map[string]error{} // target -> how its make ended
)

// makeImage runs a target of the example's Makefile, once for all the tests: they run side
// by side, and two builds of one image at once would race for its tag.
func makeImage(t *testing.T, bin, target string) {
	t.Helper()
	imagesMu.Lock()
	defer imagesMu.Unlock()
	err, made := images[target]
	if !made {
		out, runErr := exec.Command("make", "-s", target, "LOCKBREAKER="+bin).CombinedOutput()
		if runErr != nil {
			err = fmt.Errorf("make %s: %v\n%s", target, runErr, out)
		}
		images[target] = err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ping asks the lease server at addr for PONG within half a second.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\n")); err != nil {
		return err
	}
	b := make([]byte, 5)
	if _, err := conn.Read(b); err != nil {
		return err
	}
	if string(b) != "PONG\n" {
		return fmt.Errorf("answered %q", b)
	}
	return nil
}

// eventually waits up to 10 s for ping to give want (nil or not).
func eventually(t *testing.T, what, addr string, serving bool) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = ping(addr); (err == nil) == serving {
			return
		}
	}
	t.Fatalf("%s: ping %v, want serving %v", what, err, serving)
}

// An image with no shell, no libc, no iptables and no libfaketime: the example lease
// server's static binary alone. A cut made from the host in its network namespace stops
// the host's packets and its heal lets them through; SIGSTOP and SIGCONT from the engine
// pause and resume it; a kill stops it and a restart brings it back serving at the same
// address. Clock faults are refused, with the reason, before any container starts.
func TestAnImageWithNothingInItTakesFaultsFromOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	t.Parallel() // each its own containers, run ids and stores
	makeImage(t, "", "lease-image")
	l := registered(t, "lease-image.yaml")
	ctx := context.Background()
	err := containers.CheckSystem(ctx, l.System, true, false)
	var unfit *containers.UnfitError
	if !errors.As(err, &unfit) || !strings.Contains(err.Error(), "/leased is a Go program, which reads the time without libc") {
		t.Errorf("clock faults on it: %v, want them refused because it is a Go program", err)
	}
	if err := containers.CheckSystem(ctx, l.System, false, true); err != nil {
		t.Fatalf("partitions on it: %v", err)
	}
	c, err := containers.Start(ctx, containers.Spec{RunID: fmt.Sprintf("own-nothing-%d", os.Getpid()),
		Image: "lockbreaker-example-lease:1", System: l.System.Name, Partitions: true, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.WithoutCancel(ctx))
	addr := c.Addrs()[0]
	eventually(t, "started", addr, true)
	if _, err := c.Exec(ctx, "n1", "sh", "-c", "true"); err == nil {
		t.Error("the image has a shell; this test is about one without")
	}

	if err := c.DropFrom(ctx, "n1", c.Gateway()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cut off the host", addr, false)
	if err := c.HealNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healed", addr, true)

	if err := c.Signal(ctx, "n1", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "paused", addr, false)
	if err := c.Signal(ctx, "n1", syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, "resumed", addr, true)

	if err := c.Kill(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "killed", addr, false)
	if err := c.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "restarted", addr, true)
	if err := c.DropFrom(ctx, "n1", c.Gateway()); err != nil {
		t.Fatalf("a cut after the restart (a new process id): %v", err)
	}
	eventually(t, "cut off after the restart", addr, false)
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healed after the restart", addr, true)
}

// Clock faults on the lease server are refused before anything starts, with the reason,
// exit 254: from the copied binary's own file (a Go program), and from the image by
// looking into it; so is an image the engine does not have, which is never pulled.
func TestClockFaultsOnAGoServerAreRefusedBeforeTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	t.Parallel() // each its own containers, run ids and stores
	bin := build(t)
	makeImage(t, bin, "lease-image")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	b, err := os.ReadFile("lease-image.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(strings.Replace(string(b), "image: lockbreaker-example-lease:1", "image: lockbreaker-example-missing:0", 1),
		"name: leased-image", "name: leased-missing", 1))
	if err := os.WriteFile(missing, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, nemesis, want string }{
		{"lease.yaml", "clock-bump", "/usr/local/bin/leased is a Go program"},
		{"lease-image.yaml", "clock-bump", "/leased is a Go program"},
		{missing, "pause-holder", `image "lockbreaker-example-missing:0" is not in the engine`},
	} {
		file := c.file
		results := filepath.Join(t.TempDir(), "results")
		cmd := exec.Command(bin, "run", "--system-file", file, "--client-cmd", "./lease/lease_client.py", "--nemesis", c.nemesis,
			"--results", results)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if !errors.As(err, &exit) || exit.ExitCode() != 254 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s: %v, stderr %q; want exit 254 and one line saying %q", file, err, stderr.String(), c.want)
		}
		if _, err := os.Stat(results); !os.IsNotExist(err) {
			t.Errorf("%s: the refused run made %s", file, results)
		}
	}
}

// lockVerdicts runs lockbreaker on seed 7, then on the next seeds until a run was decided
// (exit 0 or 1: its danger came, or with no faults it worked), at most five runs, and
// returns the verdict of each checker that speaks for the lock. The data checkers' verdicts
// are left out: once two clients held the lock at once, whether their writes interleaved
// into a lost update depends on the moment each was sent, not on the lock.
func lockVerdicts(t *testing.T, bin string, args ...string) map[string]string {
	t.Helper()
	for seed := 7; seed < 7+5; seed++ {
		results := t.TempDir()
		cmd := exec.Command(bin, append(append([]string{"run"}, args...), "--seed", fmt.Sprint(seed), "--results", results)...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() <= 2) {
			t.Fatalf("run %v: %v\n%s", args, err, out)
		}
		var summary struct {
			Results []struct{ Checker, Property, Verdict string }
		}
		b, err := os.ReadFile(filepath.Join(results, "latest", "results.json"))
		if err == nil {
			err = json.Unmarshal(b, &summary)
		}
		if err != nil {
			t.Fatalf("run %v: results: %v\n%s", args, err, out)
		}
		if cmd.ProcessState.ExitCode() == 2 {
			t.Logf("run %v on seed %d was undecided, trying the next seed:\n%s", args, seed, out)
			continue
		}
		got := map[string]string{}
		for _, r := range summary.Results {
			if r.Property != string(checkers.PropertyDataSafety) {
				got[r.Checker] = r.Verdict
			}
		}
		return got
	}
	t.Fatalf("run %v: undecided on each of five seeds", args)
	return nil
}

// The team's Redis (redis.yaml: its own image, its own configuration) and the built-in
// redis give every checker of the lock the same verdict under a paused holder, through the
// built-in redis client (with LOCKBREAKER_LONG=1 also with no faults, kill-node and
// partition-holder, and through bsm/redislock's), each on the first seed its danger came.
func TestFileRedisGivesTheBuiltInRedisVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	t.Parallel() // each its own containers, run ids and stores
	bin := build(t)
	makeImage(t, bin, "redis-image")
	scenarios := [][2]string{{"redis", "pause-holder"}}
	if exampletest.Long() {
		scenarios = append(scenarios, [2]string{"redis", "none"}, [2]string{"redis", "kill-node"}, [2]string{"redis", "partition-holder"},
			[2]string{"redislock", "pause-holder"})
	}
	for _, scenario := range scenarios {
		t.Run(scenario[0]+"-"+scenario[1], func(t *testing.T) {
			common := []string{"--time-limit", "5s", "--client", scenario[0], "--nemesis", scenario[1]}
			file := lockVerdicts(t, bin, append([]string{"--system-file", "redis.yaml"}, common...)...)
			builtIn := lockVerdicts(t, bin, append([]string{"--system", "redis"}, common...)...)
			if len(file) == 0 || fmt.Sprint(file) != fmt.Sprint(builtIn) {
				t.Errorf("system file: %v\nbuilt-in:    %v", file, builtIn)
			}
			t.Logf("both: %v", file)
		})
	}
}

// The lease server's suite, one cell per run (--shard, a run without its danger tried again
// on the next seed): fenced, safe under a paused holder
// (make test); safe with no faults, broken unfenced under a paused or a cut-off holder
// (LOCKBREAKER_LONG=1).
func TestLeaseSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	t.Parallel() // each its own containers, run ids and stores
	bin := build(t)
	makeImage(t, bin, "lease-image")
	exampletest.MeetCells(t, bin, "lease-suite.yaml", func(cell string) bool {
		return exampletest.Long() || cell == "lease-paused-holder-fenced"
	})
}

// A system file with no image of its own runs on the node image, with its readiness and
// role asked by commands run in each node and its configuration written from a file with
// placeholders: two independent Redis servers, each its own primary.
func TestReadyAndRoleCommandsRunInTheNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	t.Parallel() // each its own containers, run ids and stores
	file := filepath.Join(t.TempDir(), "pair.yaml")
	err := os.WriteFile(file, []byte(`name: own-test-pair
nodes: {default: 2, min: 1, max: 3}
port: 6379
command: [redis-server, "/etc/pair/{{name}}.conf"]
files:
  - {path: "/etc/pair/{{name}}.conf", content: "port {{port}}\nprotected-mode no\nsave \"\"\n# {{name}} of {{count}}: {{peers}}\n"}
ready: {command: [redis-cli, ping]}
role: {command: [sh, -c, "redis-cli role | head -n 1"]}
clients: [redis]
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	l := registered(t, file)
	ctx := context.Background()
	image, err := containers.EnsureSystemImage(ctx, l.System.Name, nil)
	if err != nil || image != containers.ImageRef() {
		t.Fatalf("image %q, %v; want the node image", image, err)
	}
	c, err := containers.Start(ctx, containers.Spec{RunID: fmt.Sprintf("own-pair-%d", os.Getpid()), Image: image,
		System: l.System.Name, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.WithoutCancel(ctx))
	// A role probe has seconds to answer: on a busy machine one may not, and says unknown.
	roles, err := c.Roles(ctx)
	for deadline := time.Now().Add(time.Minute); err != nil || slices.Contains(slices.Collect(maps.Values(roles)), system.Unknown); {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
		roles, err = c.Roles(ctx)
	}
	if err != nil || fmt.Sprint(roles) != "map[n1:primary n2:primary]" {
		t.Errorf("roles %v, %v; want two primaries", roles, err)
	}
	conf, err := c.Exec(ctx, "n2", "cat", "/etc/pair/n2.conf")
	if err != nil || !strings.Contains(conf, "# n2 of 2: n1:6379") {
		t.Errorf("n2's configuration %q, %v", conf, err)
	}
}

// registered reads a system file and registers its system, as a run's harness.CheckSpec
// does: these tests drive containers of it directly, with no run.
func registered(t *testing.T, file string) sysfile.Loaded {
	t.Helper()
	l, err := sysfile.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := system.Register(l.System); err != nil {
		t.Fatal(err)
	}
	return l
}

// Package java_test runs the Java lock client beside it (Apache Curator's InterProcessMutex,
// driven over the exec protocol by ./curator_lock) as a user would: the lockbreaker binary,
// the suite file, real containers. It needs Debian's JDK and Curator jars, which make deps
// installs.
package java_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/examples/internal/exampletest"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// needJDK compiles the program (as its first use would), and fails the test when it
// cannot: no JDK or no Curator jars (skips it under -short, where make deps has not run).
func needJDK(t *testing.T) {
	t.Helper()
	out, err := exec.Command("./curator_lock", "--build").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("./curator_lock --build (make deps installs openjdk-17-jdk-headless and Debian's Curator): %v\n%s", err, out)
	if testing.Short() {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// The program speaks the protocol without a server to talk to: it refuses a system other
// than ZooKeeper, and extends of a lock without a lease (only leadership is checked
// when asked to extend), and an acquire that cannot reach the ensemble is unknown, neither busy,
// nor a broken client, nor a lost one. Curator says so in one of two words, whichever of its
// timeouts runs out first on the machine's speed: its connection's (ConnectionLoss) or the
// session's, which it counts from SUSPENDED and then declares expired (SessionExpired).
func TestCuratorProgramSpeaksTheProtocol(t *testing.T) {
	needJDK(t)
	cfg := workloads.Config{System: "zookeeper", Nodes: []string{"127.0.0.1:1"}, Key: "lock", TTL: 2 * time.Second,
		OpTimeout: 200 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "w0", Program: []string{"./curator_lock"}, Fencing: true}
	redis := cfg
	redis.System = "redis"
	exampletest.ConfigRefused(t, redis, "Curator's locks run on ZooKeeper, not on redis")
	extend := cfg
	extend.Extend = true
	exampletest.ConfigRefused(t, extend, "Curator's mutex has no lease to extend")
	exampletest.AcquireIsUnknown(t, cfg, 6*time.Second, "ConnectionLoss", "SessionExpired")
}

// With no java on PATH, a run of the program is refused in one line that says what to
// install, with exit 254, before it has made anything: no run directory, no container.
func TestMissingJavaIsOneLineAnd254(t *testing.T) {
	bin := exampletest.Lockbreaker(t)
	results := filepath.Join(t.TempDir(), "results")
	run := exec.Command(bin, "run", "--system", "zookeeper", "--client", "exec", "--client-cmd", "./curator_lock", "--results", results)
	run.Env = append(os.Environ(), "PATH="+t.TempDir())
	var stdout, stderr strings.Builder
	run.Stdout, run.Stderr = &stdout, &stderr
	err := run.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 254 {
		t.Errorf("run: %v, want exit 254", err)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "curator_lock: no java on PATH: install openjdk-17-jdk-headless") {
		t.Errorf("stderr %q: want one line naming what to install", stderr.String())
	}
	if _, err := os.Stat(results); !os.IsNotExist(err) {
		t.Errorf("the refused run made %s (stat: %v)", results, err)
	}
	t.Logf("%s%s", stdout.String(), stderr.String())
}

// The suite's fenced paused holder, one run, met: Curator's mutex broken by a paused
// holder, whose write its token fences off. With LOCKBREAKER_LONG=1 every cell (safe
// without faults, its tokens increasing; broken unfenced, paused or cut off).
func TestCuratorSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a real ZooKeeper ensemble")
	}
	needJDK(t)
	bin := exampletest.Lockbreaker(t)
	exampletest.MeetCells(t, bin, "curator.yaml", func(cell string) bool {
		return exampletest.Long() || cell == "curator-paused-holder-fenced"
	})
}

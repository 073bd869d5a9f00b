// Package knownbugs_test runs the known bugs' corpus (suites/known-bugs.yaml) as a user
// would: the lockbreaker binary, the suite file, real containers; and the lock programs it
// drives, such as etcd 3.4's own lock through Debian's etcdctl. The corpus runs in the long
// tier (make test-long) and the nightly job; make test runs the programs' protocol tests.
package knownbugs_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/examples/internal/exampletest"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// etcdctl's program with no etcd to talk to: an acquire is unknown (etcdctl ended before
// it was granted), neither busy nor a broken client.
func TestEtcdctlProgramSpeaksTheProtocol(t *testing.T) {
	if _, err := exec.LookPath("etcdctl"); err != nil {
		if testing.Short() {
			t.Skip("no etcdctl (make deps installs Debian's etcd-client)")
		}
		t.Fatal("no etcdctl on PATH: make deps installs Debian's etcd-client")
	}
	cfg := workloads.Config{System: "etcd", Nodes: []string{"127.0.0.1:1"}, Key: "lock", TTL: 2 * time.Second,
		OpTimeout: 200 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "w0", Program: []string{"./etcdctl_lock.py"}}
	exampletest.AcquireIsUnknown(t, cfg, 3*time.Second, "before the lock was granted")
}

// redsync's old versions, each built by its launcher, with no Redis to talk to: an acquire
// is unknown (no node answered), neither busy nor a broken client.
func TestRedsyncProgramsSpeakTheProtocol(t *testing.T) {
	buildRedsyncs(t)
	mods, err := filepath.Glob("redsync/go.v*.mod")
	if err != nil || len(mods) == 0 {
		t.Fatalf("no redsync/go.vXYZ.mod: %v", err)
	}
	for _, mod := range mods {
		digits := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(mod), "go.v"), ".mod")
		version := "v" + strings.Join(strings.Split(digits, ""), ".")
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			cfg := workloads.Config{System: "redlock", Nodes: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, Key: "lock",
				TTL: 2 * time.Second, OpTimeout: 200 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "w0", Extend: true,
				Program: []string{"./redsync_lock", version}}
			exampletest.AcquireIsUnknown(t, cfg, 3*time.Second, "connection refused")
		})
	}
}

// buildRedsyncs builds every version of redsync (redsync/go.vXYZ.mod), so that no lock
// client of a run waits on a build.
func buildRedsyncs(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("./redsync_lock", "--build").CombinedOutput(); err != nil {
		t.Fatalf("build redsync's versions: %v\n%s", err, out)
	}
}

// Every cell of the corpus meets what the suite file says: each bug shown on the version
// that has it, and its fixed version or control valid with its danger made real.
func TestKnownBugs(t *testing.T) {
	if !exampletest.Long() {
		t.Skip("the known bugs' corpus runs in the long tier (make test-long) and nightly (make known-bugs)")
	}
	buildRedsyncs(t)
	exampletest.MeetCells(t, exampletest.Lockbreaker(t), "../../suites/known-bugs.yaml", func(string) bool { return true })
}

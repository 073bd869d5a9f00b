// Package knownbugs_test runs the known bugs' corpus (suites/known-bugs.yaml) as a user
// would: the lockbreaker binary, the suite file, real containers; and the lock programs it
// drives, such as etcd 3.4's own lock through Debian's etcdctl. The corpus runs in the long
// tier (make test-long) and the nightly job; make test runs the programs' protocol tests.
package knownbugs_test

import (
	"os/exec"
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

// Every cell of the corpus meets what the suite file says: each bug shown on the version
// that has it, and its fixed version or control valid with its danger made real.
func TestKnownBugs(t *testing.T) {
	if !exampletest.Long() {
		t.Skip("the known bugs' corpus runs in the long tier (make test-long) and nightly (make known-bugs)")
	}
	exampletest.MeetCells(t, exampletest.Lockbreaker(t), "../../suites/known-bugs.yaml", func(string) bool { return true })
}

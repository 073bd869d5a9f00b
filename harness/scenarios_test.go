package harness

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/containers/containerstest"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/tier"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/system"
)

// The test binary doubles as the worker: the runner starts it again with WorkerEnv set.
// The container tests run in lanes side by side (lanes_test.go): those on systems slow to
// start (ZooKeeper's three JVMs take a core to start, etcd's members elect) one after
// another in their system's lane; every run on containers shares kept clusters
// (sharedClusters). A process one left is told by its run (expectNothingLeft); one left
// unreaped, which tells nobody its run, and a container or network of any run once the
// shared clusters are stopped, fail the package when all have ended.
func TestMain(m *testing.M) {
	MaybeRunWorker()
	runTestProgram(os.Getenv(testProgramEnv))
	flag.Parse()
	tier.FastParallel(fastLocalWidth)
	code := m.Run()
	if err := sharedClusters.Close(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the shared clusters: %v\n", err)
		code = 1
	}
	if left := children(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "the tests left processes: %v\n", left)
		code = 1
	}
	if left, err := containerstest.Left(""); !testing.Short() && (err != nil || len(left) > 0) {
		fmt.Fprintf(os.Stderr, "the tests left %q (%v)\n", left, err)
		code = 1
	}
	os.Exit(code)
}

// sharedClusters lends the runs of the container tests a cluster kept from the test
// before, as a suite's runs share theirs (Clusters says when that is sound), each started
// with the levers of every nemesis the tests of its shape pull.
var sharedClusters = func() *Clusters {
	zk := zkSpec([]string{"pause-holder", "partition-leader", "partition-isolate-one", "partition-halves",
		"pause-node", "clock-strobe", "kill-node", "kill-client"}, true, time.Second)
	zkCut := holderCutSpec("zookeeper", "partition-holder", true)
	zkCut.Nemesis = append(zkCut.Nemesis, "partition-holder-storage")
	etcd := shortSpec("etcd", "etcd", "pause-holder", true, time.Second)
	etcd.Nemesis = append(etcd.Nemesis, "kill-node")
	pg := shortSpec("postgres", "pg-advisory", "partition-holder", true, time.Second)
	pg.Nemesis = append(pg.Nemesis, "pause-holder")
	// The Redis family's runs at their two leases, with moved clocks and dropped packets.
	var redisFamily []Spec
	for _, s := range []Spec{spec("redis", "", []string{"clock-bump", "partition-client"}, false, time.Second),
		spec("redlock", "", []string{"kleppmann-clock"}, false, time.Second)} {
		for _, ttl := range []time.Duration{time.Second, 2 * time.Second} {
			s.TTL = Duration(ttl)
			redisFamily = append(redisFamily, s)
		}
	}
	cs := NewClusters(append(redisFamily, zk, zkCut, etcd, pg, sentinelSpec([]string{"partition-primary"}, time.Second))...)
	cs.Keep = 16 // a cluster of each shape and settings the lanes run
	return cs
}()

// runScenario runs spec to its end and logs the verdicts.
func runScenario(t *testing.T, spec Spec) results.Summary {
	t.Helper()
	_, summary := runTrial(t, spec)
	return summary
}

// runTrial runs spec and returns its run directory too, on a cluster kept from an earlier
// run where one fits (sharedClusters). A system in containers needs Docker and is skipped
// under -short; one the harness serves itself always runs.
func runTrial(t *testing.T, spec Spec) (string, results.Summary) {
	t.Helper()
	dir, summary, err := tryTrial(t, spec)
	if err != nil {
		t.Fatalf("run %s: %v", spec.Test, err)
	}
	return dir, summary
}

// tryTrial is runTrial that returns the run's error rather than fail t with it.
func tryTrial(t *testing.T, spec Spec) (string, results.Summary, error) {
	t.Helper()
	sys, err := system.Lookup(spec.System)
	if err == nil && sys.Container != nil && testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := Runner{ResultsRoot: testStore(t), Progress: testWriter{t}, Worker: []string{exe}}
	if sys.Container != nil {
		// Every run on containers shares kept clusters: starting containers is what a busy
		// engine is slowest at. A key of its own: a kept cluster never shows a run the
		// state another left.
		r.Clusters, spec.Key = sharedClusters, fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), spec.Seed)
	}
	dir, summary, err := r.Run(ctx, spec)
	if err != nil {
		return "", results.Summary{}, err
	}
	expectNothingLeft(t, sys, summary.RunID, r.Clusters != nil)
	t.Logf("results in %s", dir)
	for _, res := range summary.Results {
		t.Logf("%-18s %-8s %s", res.Checker, res.Verdict, res.Summary)
	}
	return dir, summary, nil
}

// testStore is where a test's runs go: LOCKBREAKER_TEST_STORE when set, kept to look at
// afterwards, else a directory removed with the test.
func testStore(t *testing.T) string {
	if root := os.Getenv("LOCKBREAKER_TEST_STORE"); root != "" {
		return root
	}
	return t.TempDir()
}

// expectNothingLeft fails t when run runID left a process it started (a worker, or the
// program of an exec client, both told by their environment) or, on a system in
// containers whose cluster was not kept for the next run, a container or network.
func expectNothingLeft(t *testing.T, sys system.System, runID string, kept bool) {
	t.Helper()
	if sys.Container != nil && !kept {
		containerstest.NothingLeft(t, runID)
	}
	for _, p := range processes(func(pid, state, ppid string) bool { return state != "Z" }) {
		environ, _ := os.ReadFile(filepath.Join("/proc", p.pid, "environ"))
		if slices.Contains(strings.Split(string(environ), "\x00"), RunEnv+"="+runID) {
			t.Errorf("the run left process %s (state %s)", p.pid, p.state)
		}
	}
}

// proc is a process of this machine.
type proc struct{ pid, state string }

// processes lists this machine's processes for which keep holds.
func processes(keep func(pid, state, ppid string) bool) []proc {
	var found []proc
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command name, which is in parentheses: state, ppid...
		pid := filepath.Base(filepath.Dir(path))
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && keep(pid, fields[0], fields[1]) {
			found = append(found, proc{pid, fields[0]})
		}
	}
	return found
}

// children lists this process's children, running or unreaped.
func children() []proc {
	self := strconv.Itoa(os.Getpid())
	return processes(func(_, _, ppid string) bool { return ppid == self })
}

// kleppmannSpec is a short version of the default scenario: leases of 1s, holders paused
// for 2.5s right after reading the register, so the lease always expires mid-work.
func kleppmannSpec(fencing bool) Spec {
	s := DefaultSpec()
	s.TTL = Duration(time.Second)
	s.Pause = Duration(2500 * time.Millisecond)
	s.TimeLimit = Duration(12 * time.Second)
	s.Fencing = fencing
	return s
}

func verdicts(s results.Summary) map[checkers.Name]checkers.Result {
	m := map[checkers.Name]checkers.Result{}
	for _, r := range s.Results {
		m[r.Checker] = r
	}
	return m
}

func expect(t *testing.T, s results.Summary, want map[checkers.Name]checkers.Verdict) {
	t.Helper()
	got := verdicts(s)
	for name, v := range want {
		if got[name].Verdict != v {
			t.Errorf("%s: got %s (%s), want %s", name, got[name].Verdict, got[name].Summary, v)
		}
	}
}

func TestRedisPausedHolderWithoutFencingCorruptsStorage(t *testing.T) {
	inLane(t, laneRedis)
	s := untilDanger(t, kleppmannSpec(false), overlapped).summary
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
		"data-safety":       checkers.Invalid,
		"lost-updates":      checkers.Invalid,
	})
	if lost := verdicts(s)["lost-updates"].Counts["lost"]; lost < 1 {
		t.Errorf("lost-updates counted %d lost increments, want at least 1", lost)
	}
	if s.Faults < 1 || s.Verdict != checkers.Invalid {
		t.Errorf("faults %d, overall %s: want at least one pause and an invalid run", s.Faults, s.Verdict)
	}
}

func TestRedisPausedHolderWithFencingKeepsStorageSafe(t *testing.T) {
	inLane(t, laneRedis)
	expectLockBrokenDataSafe(t, untilDanger(t, kleppmannSpec(true), overlapped).summary)
}

// expectLockBrokenDataSafe is the teachable outcome of fencing: two clients held the lock
// at once, yet the storage rejected the stale one and lost nothing.
func expectLockBrokenDataSafe(t *testing.T, s results.Summary) {
	t.Helper()
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
		"data-safety":       checkers.Valid,
		"lost-updates":      checkers.Valid,
		"fencing":           checkers.Valid,
	})
	if stale := verdicts(s)["fencing"].Counts["stale-rejected"]; stale < 1 {
		t.Errorf("storage rejected %d stale requests, want at least 1", stale)
	}
}

func TestRedisWithoutFaultsIsSafe(t *testing.T) {
	tier.Long(t) // make test's fenced clients whose connections break keep every property
	inLane(t, laneRedis)
	spec := kleppmannSpec(true)
	spec.Nemesis = []string{"none"}
	spec.TimeLimit = Duration(6 * time.Second)
	expectAllValid(t, untilDanger(t, spec, worked).summary)
}

// expectLockKept fails t unless the lock held: no two holders at once, a history legal for
// a mutex, and storage whose every accepted request a correct lock explains.
func expectLockKept(t *testing.T, s results.Summary) {
	t.Helper()
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"lock-linearizable": checkers.Valid,
		"mutual-exclusion":  checkers.Valid,
		"data-safety":       checkers.Valid,
	})
}

// expectFaults fails t when the nemesis injected fewer than n faults: a safe verdict
// from a run that was hardly faulted proves little.
func expectFaults(t *testing.T, s results.Summary, n int) {
	t.Helper()
	expectWork(t, s)
	if s.Faults < n {
		t.Errorf("only %d faults injected, want at least %d: the run proves little", s.Faults, n)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// expectAllValid fails t for every checker that is not valid; a property the run does not
// have (fencing without tokens, herd on a lock that is not a queue) is not applicable.
func expectAllValid(t *testing.T, s results.Summary) {
	t.Helper()
	for _, r := range s.Results {
		if r.Verdict != checkers.Valid && r.Verdict != checkers.NotApplicable {
			t.Errorf("%s: %s (%s), want valid", r.Checker, r.Verdict, r.Summary)
		}
	}
	expectWork(t, s)
}

// expectWork fails t when the clients did too little for a safe verdict to mean anything.
func expectWork(t *testing.T, s results.Summary) {
	t.Helper()
	if why := littleWork(s); why != "" {
		t.Error(why)
	}
}

// littleWork says why the clients did too little for a safe verdict to mean anything: ""
// when they did enough.
func littleWork(s results.Summary) string {
	if s.Ops["acquire"].OK < 3 || s.Ops["write"].OK < 3 {
		return fmt.Sprintf("too little work to mean anything: %v", s.Ops)
	}
	return ""
}

func spec(system, client string, nemesis []string, fencing bool, limit time.Duration) Spec {
	s := kleppmannSpec(fencing)
	s.System, s.Client, s.Nemesis, s.TimeLimit = system, client, nemesis, Duration(limit)
	return s
}

var none = []string{"none"}

// Redlock: five independent masters.

func TestRedlockClientsWithoutFaultsAreSafe(t *testing.T) {
	tier.Long(t) // make test's minority partition keeps the lock (redsync's own test in workloads runs it on a real cluster)
	inLane(t, laneRedis)
	for _, client := range []string{"redlock", "redsync"} {
		t.Run(client, func(t *testing.T) {
			s := untilDanger(t, spec("redlock", client, none, false, 6*time.Second), worked).summary
			expectAllValid(t, s)
			expectNoTokenNote(t, s)
		})
	}
}

// expectNoTokenNote fails t unless a Redlock run's report says it has no fencing token.
func expectNoTokenNote(t *testing.T, s results.Summary) {
	t.Helper()
	if len(s.Notes) == 0 || !strings.Contains(s.Notes[0], "no fencing token") {
		t.Errorf("the report must say Redlock has no fencing token: notes %q", s.Notes)
	}
}

// A pause after the grant is invisible to both clients: redsync checks validity with Go's
// monotonic clock, but only while acquiring.
func TestRedlockPausedHolderCorruptsStorage(t *testing.T) {
	inLane(t, laneRedis)
	for _, client := range []string{"redlock", "redsync"} {
		t.Run(client, func(t *testing.T) {
			if client == "redsync" {
				tier.Long(t) // one Redlock client shows the pause in make test
			}
			s := untilDanger(t, spec("redlock", client, []string{"pause-holder"}, false, 12*time.Second), overlapped).summary
			expect(t, s, map[checkers.Name]checkers.Verdict{
				"mutual-exclusion": checkers.Invalid,
				"data-safety":      checkers.Invalid,
			})
		})
	}
}

// Kleppmann's A..E example: client 1 holds A, B, C while D and E are cut off; C's clock
// jumps past the TTL; client 2 gets C, D, E. Found from the history alone, with run's
// default TTL and work: the nemesis keeps client 1 in its critical section, within its
// lease, for as long as staging the rest takes. A round takes seconds (a cut, a grant, a
// lease, the release): a busy machine fits only one or two in 10 s.
func TestRedlockKleppmannClockJumpGivesTwoHolders(t *testing.T) {
	inLane(t, laneRedis)
	s := DefaultSpec()
	s.System, s.Nemesis, s.TimeLimit = "redlock", []string{"kleppmann-clock"}, Duration(15*time.Second)
	tr := untilDanger(t, s, both(overlapped, hazard(history.TwoMajorities)))
	expect(t, tr.summary, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid})
	expectFaults(t, tr.summary, 2)
	// Client 2's grant came from C, D and E: the clock's doing, not a lapsed lease.
	if !slices.ContainsFunc(tr.events, func(e history.Event) bool {
		return e.Func == history.Acquire && e.Type == history.OK && e.Detail["nodes"] == "n3,n4,n5"
	}) {
		t.Error("no grant by C, D and E alone")
	}
}

func TestRedlockMinorityPartitionKeepsMutualExclusion(t *testing.T) {
	inLane(t, laneRedis)
	s := untilDanger(t, spec("redlock", "redlock", []string{"partition-clients-from"}, false, 12*time.Second), proven).summary
	expectLockKept(t, s)
	expectFaults(t, s, 2)
	expectNoTokenNote(t, s)
}

func TestFencingIsRefusedForRedlock(t *testing.T) {
	_, err := CheckSpec(spec("redlock", "redlock", none, true, 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "no monotonic fencing token") {
		t.Fatalf("got %v, want a refusal that says why", err)
	}
}

// ZooKeeper: the lease is the session.

func zkSpec(nemesis []string, fencing bool, limit time.Duration) Spec {
	s := spec("zookeeper", "", nemesis, fencing, limit)
	s.TTL = Duration(2 * time.Second) // the session timeout
	s.Pause = Duration(5 * time.Second)
	return s
}

func TestZooKeeperWithoutFaultsIsSafeWithGrowingTokens(t *testing.T) {
	tier.Long(t) // make test's ZooKeeper under clock jumps keeps every property, its tokens growing
	inLane(t, laneZooKeeper)
	for _, client := range []string{"zookeeper", "zk-recipe-lib"} {
		t.Run(client, func(t *testing.T) {
			s := zkSpec(none, true, 8*time.Second)
			s.Client = client
			summary := untilDanger(t, s, worked).summary
			expectAllValid(t, summary)
			expectTokens(t, summary)
		})
	}
}

// expectTokens fails t unless a fenced run's grants carried tokens: five at least.
func expectTokens(t *testing.T, s results.Summary) {
	t.Helper()
	if n := verdicts(s)["fencing"].Counts["grants-with-token"]; n < 5 {
		t.Errorf("only %d grants carried a token", n)
	}
}

// A holder paused for 5 s, past its 2 s session: 12 s see two pauses.
func TestZooKeeperHolderPausedPastItsSessionCorruptsStorage(t *testing.T) {
	inLane(t, laneZooKeeper)
	s := untilDanger(t, zkSpec([]string{"pause-holder"}, false, 12*time.Second), overlapped).summary
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"mutual-exclusion": checkers.Invalid,
		"data-safety":      checkers.Invalid,
	})
}

func TestZooKeeperFencingKeepsStorageSafe(t *testing.T) {
	tier.Long(t) // fencing is shown in make test on Redis and etcd
	inLane(t, laneZooKeeper)
	expectLockBrokenDataSafe(t, untilDanger(t, zkSpec([]string{"pause-holder"}, true, 12*time.Second), overlapped).summary)
}

func TestZooKeeperMinorityPartitionsKeepMutualExclusion(t *testing.T) {
	tier.Long(t) // make test's partition of ZooKeeper cuts its holder from the ensemble
	inLane(t, laneZooKeeper)
	for _, shape := range []string{"partition-leader", "partition-isolate-one", "partition-halves"} {
		t.Run(shape, func(t *testing.T) {
			s := untilDanger(t, zkSpec([]string{shape}, true, 15*time.Second), proven).summary
			expectLockKept(t, s)
			expectFaults(t, s, 2)
		})
	}
}

// Pausing a ZooKeeper server for longer than the session timeout can expire the sessions of
// clients connected to it, the holder's included: the lock then passes on while the holder
// still believes in it (seen here). Fencing keeps the storage safe all the same.
func TestZooKeeperPausedServerWithFencingKeepsStorageSafe(t *testing.T) {
	tier.Long(t) // ZooKeeper's sessions under a fault are in make test with pause-holder and kill-node
	inLane(t, laneZooKeeper)
	s := untilDanger(t, zkSpec([]string{"pause-node"}, true, 15*time.Second), proven).summary
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"data-safety":  checkers.Valid,
		"lost-updates": checkers.Valid,
		"fencing":      checkers.Valid,
	})
	expectFaults(t, s, 2)
}

// The recipe watches only its predecessor: one handoff wakes one waiter.
func TestZooKeeperRecipeWakesOneWaiterPerRelease(t *testing.T) {
	tier.Long(t) // the herd checker is tested on histories in checkers
	inLane(t, laneZooKeeper)
	s := zkSpec(none, false, 8*time.Second)
	s.Clients = 6 // five waiting behind the holder
	summary := runScenario(t, s)
	herd := verdicts(summary)["herd"]
	if herd.Verdict != checkers.Valid || herd.Counts["notifications"] < 5 || herd.Counts["handoffs"] < 5 {
		t.Fatalf("herd: %s (%s) %v: want about one notification per handoff", herd.Verdict, herd.Summary, herd.Counts)
	}
	t.Logf("herd metric: %s", herd.Summary)
}

// Clocks. Redis expires keys by wall clock: a node whose clock jumps forward past the TTL
// drops the holder's key and grants the lock again. With seed 7 the schedule jumps forward
// while a client holds the lock (and the reset after a backward jump is a forward jump too).
func TestRedisClockJumpBreaksTheLock(t *testing.T) {
	inLane(t, laneRedis)
	s := untilDanger(t, spec("redis", "redis", []string{"clock-bump"}, false, 12*time.Second), overlapped).summary
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
	})
}

// ZooKeeper's session expiry runs on the monotonic clock: wall-clock jumps on its nodes
// change nothing.
// clock-strobe jumps a node's clock forward past every lease it holds, ten times a
// second, so the clock faults' hazard surely occurs; a bump may go back, and a clock run
// faster moves past no lease held for a holder's 100 ms.
func TestZooKeeperIgnoresClockJumps(t *testing.T) {
	inLane(t, laneZooKeeper)
	s := untilDanger(t, zkSpec([]string{"clock-strobe"}, true, 10*time.Second), hazard(history.ClockServed)).summary
	expectAllValid(t, s)
	expectTokens(t, s)
}

package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/tier"
	"github.com/lockbreaker/lockbreaker/system"
)

// etcd and PostgreSQL on real nodes, at run's defaults (TTL 2 s, 100 ms of work) but for
// a short time limit and a fixed seed: each fault makes its hazard happen within a few
// seconds, so a few seconds of run show what the kleppmann suite's cells expect.

// shortSpec is run's default spec on system with client, the nemesis, fencing, a fixed
// seed and a time limit of its own.
func shortSpec(system, client, nemesis string, fencing bool, limit time.Duration) Spec {
	s := DefaultSpec()
	s.System, s.Client, s.Nemesis, s.Fencing = system, client, []string{nemesis}, fencing
	s.Seed, s.TimeLimit = 11, Duration(limit)
	return s
}

// brokenThenFenced runs nemesis against client on system unfenced, which must break the
// lock and corrupt the storage, and fenced, which must break the lock and keep the
// storage safe; in both the nemesis's hazard must occur.
func brokenThenFenced(t *testing.T, system, client, nemesis string, h history.Hazard) {
	t.Run("unfenced", func(t *testing.T) {
		s := untilDanger(t, shortSpec(system, client, nemesis, false, 7*time.Second), both(hazard(h), overlapped)).summary
		expect(t, s, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid, "data-safety": checkers.Invalid})
	})
	t.Run("fenced", func(t *testing.T) {
		expectLockBrokenDataSafe(t, untilDanger(t, shortSpec(system, client, nemesis, true, 7*time.Second), both(hazard(h), overlapped)).summary)
	})
}

// Jepsen's etcd finding: a holder paused past its lease wakes up believing it holds the
// lock another client was given. Unfenced the storage is corrupted; fenced by the lock
// key's create revision it is not.
func TestEtcdPausedHolder(t *testing.T) {
	inLane(t, laneEtcd)
	brokenThenFenced(t, "etcd", "etcd", "pause-holder", history.GrantedInPause)
}

// Five members, no faults: the lock holds.
func TestEtcdFiveMembersWithoutFaultsAreSafe(t *testing.T) {
	tier.Long(t) // etcd's three members are in make test
	inLane(t, laneEtcd)
	spec := shortSpec("etcd", "etcd", "none", true, 5*time.Second)
	spec.Nodes = 5
	expectAllValid(t, untilDanger(t, spec, worked).summary)
}

// A member killed under a held lock (the holder kept inside its lease meanwhile) and
// started again on its log: Raft keeps the lock, and no second client is let in.
func TestEtcdKilledMemberKeepsTheLock(t *testing.T) {
	inLane(t, laneEtcd)
	s := untilDanger(t, shortSpec("etcd", "etcd", "kill-node", true, 8*time.Second), hazard(history.CrashUnderGrant)).summary
	// A member crashed under the held lock must cost nothing; the run claims the pass only
	// when another client was answered by the cluster within the lease (restart-served), and
	// a run where none was says unknown, which is no violation either.
	expectNoViolation(t, s)
	if hazardCount(s, history.RestartServed) > 0 {
		expectLockKept(t, s)
	}
}

// A Postgres advisory lock's holder cut off the database, not the storage: the server's
// keepalives end its session, another client takes the lock, and the cut holder writes.
func TestPostgresAdvisoryHolderCutFromTheDatabase(t *testing.T) {
	inLane(t, lanePostgres)
	needClientAddrs(t)
	brokenThenFenced(t, "postgres", "pg-advisory", "partition-holder", history.GrantedInCut)
}

// A lease row's holder paused past the TTL stops renewing it, a waiter takes it over, and
// the paused holder writes: corruption unfenced, none fenced by the record version number.
func TestPostgresLeasePausedHolder(t *testing.T) {
	tier.Long(t) // make test pauses holders of Redis, etcd and ZooKeeper, and cuts PostgreSQL's
	inLane(t, lanePostgres)
	brokenThenFenced(t, "postgres", "pg-lease", "pause-holder", history.GrantedInPause)
}

// Both Postgres locks hold without faults.
func TestPostgresWithoutFaultsIsSafe(t *testing.T) {
	inLane(t, lanePostgres)
	for _, client := range []string{"pg-advisory", "pg-lease"} {
		t.Run(client, func(t *testing.T) {
			expectAllValid(t, untilDanger(t, shortSpec("postgres", client, "none", true, 4*time.Second), worked).summary)
		})
	}
}

// PgBouncer in front of the server (--pooler). In transaction pooling a session's advisory
// lock stays on the server connection the pooler then hands to another client, whose
// pg_try_advisory_lock the server grants again: two holders with no fault at all, the
// hazard recorded as the pooler's and the story naming it. In session pooling a server
// connection is one client's for its whole session: safe. 8 s: in make test's busiest
// minute no client through the pooler had an answer for 6 s, three tries running.
func TestPostgresAdvisoryThroughPgBouncer(t *testing.T) {
	inLane(t, lanePostgres)
	t.Run("transaction pooling", func(t *testing.T) {
		spec := shortSpec("postgres", "pg-advisory", "none", false, 8*time.Second)
		spec.Pooler = system.PgBouncerTransaction
		s := untilDanger(t, spec, both(hazard(history.PooledSession), overlapped)).summary
		expect(t, s, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid, "lock-linearizable": checkers.Invalid,
			"data-safety": checkers.Invalid, "stats": checkers.Valid})
		expectHazard(t, s, history.PooledSession)
		story := ""
		for _, r := range s.Results {
			story += checkers.StoryText(r.Story)
		}
		if !strings.Contains(story, "which pgbouncer-transaction then handed to") {
			t.Errorf("the story does not name the pooled session as the cause: %q", story)
		}
	})
	t.Run("session pooling", func(t *testing.T) {
		spec := shortSpec("postgres", "pg-advisory", "none", true, 8*time.Second)
		spec.Pooler = system.PgBouncerSession
		s := untilDanger(t, spec, worked).summary
		expectAllValid(t, s)
		if n := hazardCount(s, history.PooledSession); n != 0 {
			t.Errorf("%d pooled sessions in session pooling", n)
		}
	})
}

package suite

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/system"
)

// The built-in suites are the expected outcomes of each scenario on each lock service, as
// data (docs/suites.md). "Violation" there is lock safety (lock-linearizable,
// mutual-exclusion), "corruption" data safety (data-safety, lost-updates).

// tableRow is one row of the table: what a scenario does to lock and data safety.
type tableRow struct {
	lock, data Expect
	why        string
	// fencing, when set, is what the row says of fencing itself; otherwise it holds
	// wherever the storage checks tokens (see expect).
	fencing Expect
	// lease is what the row says of lease-safety: invalid where the lock itself broke a
	// lease it granted (a forgotten key, a clock, a second primary), valid where a holder
	// only outlived its lease (paused, cut off, its write late), as Kleppmann's pause does.
	lease Expect
}

var (
	safe = tableRow{ExpectValid, ExpectValid, "no faults: safe", "", ExpectValid}
	// Kleppmann's GC pause: the lease expires under a frozen holder, who then writes.
	pausedUnfenced = tableRow{ExpectInvalid, ExpectInvalid, "holder paused past its lease, no fencing: violation and corruption", "", ExpectValid}
	pausedFenced   = tableRow{ExpectInvalid, ExpectValid, "holder paused past its lease, fencing: violation, no corruption", "", ExpectValid}
	clockJump      = tableRow{ExpectInvalid, ExpectEither, "a lock node's clock jumps past the TTL: violation", "", ExpectInvalid}
	kleppmannClock = tableRow{ExpectInvalid, ExpectEither, "Kleppmann's A..E example: clock jump combined with a partition: violation", "", ExpectInvalid}
	clockIgnored   = tableRow{ExpectValid, ExpectValid, "clock jumps: no effect (session expiry is monotonic)", "", ExpectValid}
	minority       = tableRow{ExpectValid, ExpectValid, "partition of a minority of lock nodes: safe", "", ExpectValid}
	brokenLock     = tableRow{ExpectInvalid, ExpectEither, "a lock that grants a held lock: violation", "", ExpectInvalid}
	// Replication's failure: a replica promoted without the lock key grants it again
	// and counts tokens from where its copy stopped.
	failover         = tableRow{ExpectInvalid, ExpectEither, "the primary fails before replicating the lock key: violation; its tokens regress: detect", ExpectInvalid, ExpectInvalid}
	failoverUnfenced = tableRow{ExpectInvalid, ExpectInvalid, "the primary fails before replicating the lock key, no fencing: violation and corruption", "", ExpectInvalid}
	// Split brain: the old primary, cut off with some clients, and the promoted replica both grant.
	splitBrain = tableRow{ExpectInvalid, ExpectInvalid, "the primary and a minority of the clients cut off, a replica promoted: two primaries grant, no fencing: violation and corruption", "", ExpectInvalid}
	// A node that granted the lock crashes and comes back without it while the holder works.
	crashForgets = tableRow{ExpectInvalid, ExpectInvalid, "the holder's nodes crash and come back without the lock within its lease, no persistence: violation and corruption", "", ExpectInvalid}
	crashDelayed = tableRow{ExpectValid, ExpectValid, "the holder's masters crash and stay down for a TTL (antirez's delayed restart): another client asks within the lease and is refused: safe", "", ExpectValid}
	crashKept    = tableRow{ExpectValid, ExpectValid, "a node crashes under a held lock and comes back with what its log kept: safe", "", ExpectValid}
	// The holder cut off the lock service, still in its critical section.
	cutUnfenced = tableRow{ExpectInvalid, ExpectInvalid, "holder cut from the lock service, still in its critical section, no fencing: violation and corruption", "", ExpectValid}
	cutFenced   = tableRow{ExpectInvalid, ExpectValid, "holder cut from the lock service, still in its critical section, fencing: violation, no corruption", "", ExpectValid}
	// Kleppmann's delayed packet: the network holds a holder's write past its lease and past
	// the next holder's write.
	delayedWrite      = tableRow{ExpectInvalid, ExpectInvalid, "holder's write held in the network past its lease and the next holder's write, no fencing: violation and corruption", "", ExpectValid}
	delayedWriteFence = tableRow{ExpectInvalid, ExpectValid, "holder's write held in the network past its lease and the next holder's write, fencing: violation, the stale write refused", "", ExpectValid}
	// Slowness everywhere: every client's network slowed from a grant on, often past the
	// lease, so the holder's write lands after it; everyone else's acquires are slowed too.
	// Mostly nobody else gets a majority meanwhile, but a write still in the network when
	// the slowness ends can land after the next grant (1 run in 60, docs/measurements.md).
	slowedRedlock = tableRow{ExpectEither, ExpectEither, "every client's network slowed from a grant on: the holder's write lands after its lease; " +
		"a node slower than the client's per-node timeout counts as refusing, so mostly nobody else gets a majority meanwhile, " +
		"but a write still in the network when the slowness ends can land after the next holder's grant: a violation at times", "", ExpectEither}
	// etcd's lease is kept alive by the client: Jepsen's 2020 finding is the GC pause.
	etcdPaused      = tableRow{ExpectInvalid, ExpectInvalid, "holder paused past its lease, no fencing: violation and corruption (Jepsen, etcd 3.4.3, 2020)", "", ExpectValid}
	etcdPausedFence = tableRow{ExpectInvalid, ExpectValid, "holder paused past its lease, fenced by the lock key's create revision: violation, no corruption", "", ExpectValid}
	// A starved holder, not a stopped one: busy in its critical section and throttled to 1%
	// of a CPU, its keepalive goroutine runs too late to keep the lease.
	etcdThrottled      = tableRow{ExpectInvalid, ExpectInvalid, "holder busy in its critical section and throttled to a sliver of a CPU: its keepalive starves and its lease runs out while it works, no fencing: violation and corruption", "", ExpectValid}
	etcdThrottledFence = tableRow{ExpectInvalid, ExpectValid, "holder busy in its critical section and throttled to a sliver of a CPU, fenced by the lock key's create revision: violation, no corruption", "", ExpectValid}
	raftCrash          = tableRow{ExpectValid, ExpectValid, "a member crashes under a held lock and comes back with what its log kept; a new leader keeps the leases: safe", "", ExpectValid}
	// A Postgres advisory lock is the session's: it ends when the server drops the session.
	sessionCut      = tableRow{ExpectInvalid, ExpectInvalid, "holder cut from the database, still in its critical section: the server ends its session and another client takes the lock, no fencing: violation and corruption", "", ExpectValid}
	sessionCutFence = tableRow{ExpectInvalid, ExpectValid, "holder cut from the database, still in its critical section, fenced by a sequence: violation, no corruption", "", ExpectValid}
	leaseClockFree  = tableRow{ExpectValid, ExpectValid, "the database's clock jumps: no effect (a lease row expires by the waiters' monotonic clocks, not the server's)", "", ExpectValid}
	// A pooler in the path: PgBouncer hands server connections, and the sessions on them,
	// from client to client.
	pooledSessionLock = tableRow{ExpectInvalid, ExpectInvalid, "advisory locks through PgBouncer in transaction pooling, no faults: the pooler runs " +
		"another client's pg_try_advisory_lock in the server session that holds the lock, which grants it again: violation and corruption", "", ExpectInvalid}
	pooledSessionKept = tableRow{ExpectValid, ExpectValid, "advisory locks through PgBouncer in session pooling, no faults: a server connection " +
		"is one client's for its whole session, and DISCARD ALL ends its locks before another gets it: safe", "", ExpectValid}
	pooledLeaseRow = tableRow{ExpectValid, ExpectValid, "a lease row through PgBouncer in transaction pooling, no faults: each statement " +
		"stands alone and the lock lives in a table, not in a session: safe", "", ExpectValid}
)

// noTokens are the table's clients whose grants carry no fencing token (workloads.Client
// Tokens, which the table names rather than links; TestNoTokensAreTheClientsWithout holds
// the two together): fencing is not applicable to their cells.
var noTokens = []string{"redislock", "redlock", "redlock-parallel", "redsync"}

// expect is the checkers' expectations for a row on a client, one for every checker
// (TestBuiltinCellsExpectEveryChecker): fencing holds when the storage checks tokens, is
// not applicable to a client without them, and is not decided otherwise (some clients take
// a token only when asked to fence); herd, a metric, decides nothing; the stats
// precondition must pass for a pass to mean anything.
func (row tableRow) expect(client string, fenced bool) map[checkers.Name]Expect {
	fencing := ExpectEither
	if slices.Contains(noTokens, client) {
		fencing = ExpectNotApplicable
	} else if row.fencing != "" {
		fencing = row.fencing
	} else if fenced {
		fencing = ExpectValid
	}
	return map[checkers.Name]Expect{
		checkers.LockLinearizable: row.lock,
		checkers.MutualExclusion:  row.lock,
		checkers.LeaseSafety:      row.lease,
		checkers.DataSafety:       row.data,
		checkers.LostUpdates:      row.data,
		checkers.Fencing:          fencing,
		checkers.Herd:             ExpectEither,
		checkers.Stats:            ExpectValid,
	}
}

// noFaults is nemesis none in a cell: no fault at all.
var noFaults = history.FaultKind{Name: history.NoFaults}

// cell makes a built-in cell: run's defaults with a 10 s time limit (every targeted fault
// strikes within a few seconds), then the scenario, whose faults are of kind nemesis.
func cell(system, client string, nemesis history.FaultKind, fencing bool, row tableRow, tune ...func(*spec.Spec)) Cell {
	s := spec.Default()
	s.System, s.Client, s.Nemesis, s.Fencing = system, client, []string{nemesis.Name}, fencing
	s.TimeLimit = spec.Duration(10 * time.Second)
	for _, t := range tune {
		t(&s)
	}
	return Cell{Spec: s, Expect: row.expect(client, fencing), Why: row.why}
}

// alone marks a cell whose runs go with none beside them (suite --parallel): its servers
// must serve again, or its clients learn of a new primary, within a lease, which a busy
// machine makes them miss (measured: with three runs at once, Redlock's kill-node found
// its violation in 1 of 15 runs; Sentinel's unfenced failover in 4 of 5).
func alone(c Cell) Cell {
	c.Alone = true
	return c
}

func timeLimit(d time.Duration) func(*spec.Spec) {
	return func(s *spec.Spec) { s.TimeLimit = spec.Duration(d) }
}

// pooled puts the pooler p in front of the servers (spec.Spec.Pooler).
func pooled(p string) func(*spec.Spec) {
	return func(s *spec.Spec) { s.Pooler = p }
}

// requires makes a cell require at least n occurrences of hazard h in each run.
func requires(c Cell, h history.Hazard, n int) Cell {
	c.Hazards = map[history.Hazard]int{h: n}
	return c
}

// delayedRestart keeps killed nodes down for a TTL, in a cell of its own name.
func delayedRestart(s *spec.Spec) {
	s.RestartDelayTTL, s.Test = true, s.System+"-"+s.Client+"-kill-node-delayed-nofence"
}

// persistence is what the nodes keep on disk, in a cell of its own name.
func persistence(p string) func(*spec.Spec) {
	return func(s *spec.Spec) {
		s.Persistence, s.Test = p, s.System+"-"+s.Client+"-"+history.KillNode.Name+"-"+p+"-nofence"
	}
}

// kleppmann is the whole table: every system and client, the faults that matter for it,
// fencing off and on where the client has tokens. Cells of one system come together, so
// they share a cluster. Every cell runs at run's defaults but for its time limit and what
// its scenario is (fencing, persistence, antirez's delayed restart): the targeted faults
// make their hazards happen themselves (history.FaultKind.Hazard), with no hand-tuned lease or work.
func kleppmann() Suite {
	var cells []Cell
	// Single Redis: our lock (tokens) and bsm/redislock (none).
	for _, client := range []string{"redis", "redislock"} {
		cells = append(cells,
			cell("redis", client, noFaults, false, safe, timeLimit(6*time.Second)),
			cell("redis", client, history.PauseHolder, false, pausedUnfenced),
		)
		if client == "redis" {
			cells = append(cells, cell("redis", client, history.PauseHolder, true, pausedFenced))
		}
		cells = append(cells, cell("redis", client, history.ClockBump, false, clockJump))
	}
	cells = append(cells,
		cell("redis", "redis", history.KillNode, false, crashForgets),
		cell("redis", "redis", history.KillNode, false, crashKept, persistence("aof-always")),
		cell("redis", "redis", history.PartitionHolder, false, cutUnfenced),
		cell("redis", "redis", history.PartitionHolder, true, cutFenced),
		cell("redis", "redis", history.DelayHolder, false, delayedWrite),
		cell("redis", "redis", history.DelayHolder, true, delayedWriteFence),
	)
	// Redlock: no tokens, so no fenced cells ("no token available").
	for _, client := range []string{"redlock", "redlock-parallel", "redsync"} {
		cells = append(cells,
			cell("redlock", client, noFaults, false, safe, timeLimit(6*time.Second)),
			cell("redlock", client, history.PauseHolder, false, pausedUnfenced),
			cell("redlock", client, history.KleppmannClock, false, kleppmannClock),
			cell("redlock", client, history.PartitionClientsFrom, false, minority),
			alone(cell("redlock", client, history.KillNode, false, crashForgets)),
			// At run's 30 s, where the danger came in 55 of 60 runs quiet and 28 of 30 busy.
			cell("redlock", client, history.SlowNetwork, false, slowedRedlock, timeLimit(30*time.Second)),
		)
	}
	// antirez's delayed restart (--restart-delay-ttl): the crashed masters stay down through
	// the lease, so another client's attempts within it, the danger, are refused.
	cells = append(cells, alone(cell("redlock", "redlock", history.KillNode, false, crashDelayed, delayedRestart)))
	// Sentinel: a primary that serves like a single Redis, until it fails or is cut off.
	cells = append(cells,
		cell("sentinel", "redis", noFaults, false, safe, timeLimit(6*time.Second)),
		cell("sentinel", "redis", history.PauseHolder, false, pausedUnfenced),
		cell("sentinel", "redis", history.PauseHolder, true, pausedFenced),
		alone(cell("sentinel", "redis", history.Failover, false, failoverUnfenced)),
		alone(cell("sentinel", "redis", history.Failover, true, failover)),
		cell("sentinel", "redis", history.PartitionPrimary, false, splitBrain),
	)
	// ZooKeeper: the lease is the session.
	for _, client := range []string{"zookeeper", "zk-recipe-lib"} {
		cells = append(cells,
			cell("zookeeper", client, noFaults, true, safe, timeLimit(6*time.Second)),
			cell("zookeeper", client, history.PauseHolder, false, pausedUnfenced),
			cell("zookeeper", client, history.PauseHolder, true, pausedFenced),
			cell("zookeeper", client, history.ClockStrobe, true, clockIgnored),
			cell("zookeeper", client, history.PartitionIsolateOne, true, minority),
			cell("zookeeper", client, history.PartitionHolder, false, cutUnfenced),
			cell("zookeeper", client, history.PartitionHolder, true, cutFenced),
		)
	}
	// etcd: the lease is kept alive by the client, the token is a Raft revision.
	cells = append(cells,
		cell("etcd", "etcd", noFaults, true, safe, timeLimit(6*time.Second)),
		cell("etcd", "etcd", history.PauseHolder, false, etcdPaused),
		cell("etcd", "etcd", history.PauseHolder, true, etcdPausedFence),
		cell("etcd", "etcd", history.PartitionHolder, false, cutUnfenced),
		cell("etcd", "etcd", history.PartitionHolder, true, cutFenced),
		cell("etcd", "etcd", history.KillNode, true, raftCrash),
		// At run's 30 s a throttled holder's lease ran out in 19 of 20 seeds and 20 of 20 beside
		// busy processes; at 20 s in 3 of 6 (docs/measurements.md): a throttle of an etcd
		// holder leads to a takeover two times in three, after 2 to 10 s.
		cell("etcd", "etcd", history.ThrottleHolder, false, etcdThrottled, timeLimit(30*time.Second)),
		cell("etcd", "etcd", history.ThrottleHolder, true, etcdThrottledFence, timeLimit(30*time.Second)),
	)
	// PostgreSQL: an advisory lock lives as long as its session; a lease row as long as its
	// holder renews it.
	cells = append(cells,
		cell("postgres", "pg-advisory", noFaults, true, safe, timeLimit(6*time.Second)),
		cell("postgres", "pg-advisory", history.PartitionHolder, false, sessionCut),
		cell("postgres", "pg-advisory", history.PartitionHolder, true, sessionCutFence),
		cell("postgres", "pg-lease", noFaults, true, safe, timeLimit(6*time.Second)),
		cell("postgres", "pg-lease", history.PauseHolder, false, pausedUnfenced),
		cell("postgres", "pg-lease", history.PauseHolder, true, pausedFenced),
		cell("postgres", "pg-lease", history.ClockBump, true, leaseClockFree),
	)
	// PgBouncer in front of PostgreSQL: in transaction pooling a session's advisory lock
	// stays on a server connection the pooler hands to the next client, which needs no
	// fault; the hazard is the pooler's doing (a grant in the session of one still held).
	cells = append(cells,
		requires(cell("postgres", "pg-advisory", noFaults, false, pooledSessionLock, pooled(system.PgBouncerTransaction), timeLimit(6*time.Second)),
			history.PooledSession, 1),
		cell("postgres", "pg-advisory", noFaults, true, pooledSessionKept, pooled(system.PgBouncerSession), timeLimit(6*time.Second)),
		cell("postgres", "pg-lease", noFaults, true, pooledLeaseRow, pooled(system.PgBouncerTransaction), timeLimit(6*time.Second)),
	)
	// The lock the harness serves itself: no Docker.
	cells = append(cells, localCells()...)
	return Suite{Name: "kleppmann", About: "the expected-outcome table: every system and client, the faults that matter for it, fencing off and on", Cells: cells}
}

func localCells() []Cell {
	short := func(s *spec.Spec) {
		s.TTL, s.Interval = spec.Duration(500*time.Millisecond), spec.Duration(500*time.Millisecond)
		s.TimeLimit = spec.Duration(4 * time.Second)
	}
	return []Cell{
		cell("local", "local", noFaults, true, safe, short),
		cell("local", "local", history.PauseHolder, false, pausedUnfenced, short),
		cell("local", "local", history.PauseHolder, true, pausedFenced, short),
		cell("local-broken", "local-broken", noFaults, false, brokenLock, short),
	}
}

// smoke is a few fast cells: the local lock without Docker, Kleppmann's pause on a single
// Redis with and without fencing, and one cell each of etcd and PostgreSQL, fenced.
func smoke() Suite {
	fast := timeLimit(5 * time.Second)
	cells := localCells()
	cells = append(cells,
		cell("redis", "redis", noFaults, true, safe, fast),
		cell("redis", "redis", history.PauseHolder, false, pausedUnfenced, fast),
		cell("redis", "redis", history.PauseHolder, true, pausedFenced, fast),
		cell("etcd", "etcd", history.PauseHolder, true, etcdPausedFence, fast),
		cell("postgres", "pg-advisory", history.PartitionHolder, true, sessionCutFence, fast),
	)
	return Suite{Name: "smoke", About: "a few fast cells: the in-process lock, a paused holder on one Redis with and without fencing " +
		"and on etcd with it, and a Postgres advisory lock's holder cut from the database, fenced", Cells: cells}
}

var builtins = map[string]func() Suite{"kleppmann": kleppmann, "smoke": smoke}

// BuiltinNames lists the built-in suites.
func BuiltinNames() []string { return slices.Sorted(maps.Keys(builtins)) }

// Builtin returns a built-in suite, checked (Check) with check.
func Builtin(name string, check SpecCheck) (Suite, bool, error) {
	make, ok := builtins[name]
	if !ok {
		return Suite{}, false, nil
	}
	s := make()
	return s, true, s.Check(check)
}

// Describe lists a suite's cells, one line each, for help and dry runs.
func Describe(s Suite) string {
	var b strings.Builder
	for i, c := range s.Cells {
		var expects []string
		for _, e := range []Expect{ExpectInvalid, ExpectValid, ExpectNotApplicable} {
			if names := c.expecting(e); len(names) > 0 {
				expects = append(expects, string(e)+": "+joinNames(names, ","))
			}
		}
		for _, h := range slices.Sorted(maps.Keys(c.Hazards)) {
			expects = append(expects, fmt.Sprintf("at least %d %s a run", c.Hazards[h], h))
		}
		if c.Alone {
			expects = append(expects, "runs alone")
		}
		fmt.Fprintf(&b, "%3d  %-50s %s\n", i+1, c.Name, strings.Join(expects, "; "))
	}
	return b.String()
}

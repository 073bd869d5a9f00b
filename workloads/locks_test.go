package workloads

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/containers/containerstest"
)

// Every lock client against its real system: it is a mutex, a release by a client that no
// longer holds the lock is refused, tokens grow, and a Redis lease runs out by itself.

// TestLockClientsAgainstRealClusters starts one cluster per system and runs every client
// of that system, and the system's own checks, against it. Each cluster is the smallest
// the system accepts: these tests are of the clients, and the harness's and containers'
// tests break full-sized clusters (make test starts two ZooKeeper JVMs fewer, and three
// Redis servers).
func TestLockClientsAgainstRealClusters(t *testing.T) {
	systemTests := map[string]map[string]func(*testing.T, Config){
		"redis": {
			"redis/lease-expires":     leaseExpiresUnderTheHolder("redis"),
			"redislock/lease-expires": leaseExpiresUnderTheHolder("redislock"),
		},
		"sentinel": {
			"redis/lease-expires": leaseExpiresUnderTheHolder("redis"),
		},
		"redlock": {
			"redlock/lease-expires":           leaseExpiresUnderTheHolder("redlock"),
			"redsync/lease-expires":           leaseExpiresUnderTheHolder("redsync"),
			"redlock/clock-jump-during-grant": redlockRefusesASlowGrant,
		},
		"etcd": {
			"etcd/lease-expires": etcdLeaseExpiresUnderAPausedHolder,
		},
		"postgres": {
			"pg-advisory/session-ends": advisoryLockDiesWithItsSession,
			"pg-lease/lease-expires":   pgLeaseIsTakenOverWhenNotRenewed,
		},
	}
	smallest := map[string]int{"redlock": 3, "sentinel": 2, "zookeeper": 1} // the others: their default is their least
	for _, system := range []string{"redis", "redlock", "sentinel", "zookeeper", "etcd", "postgres"} {
		t.Run(system, func(t *testing.T) {
			cluster := containerstest.Start(t, containers.Spec{System: system, TTL: 4 * time.Second, Nodes: smallest[system]})
			target := Config{Nodes: cluster.Addrs(), Sentinels: cluster.MonitorAddrs()}
			for _, client := range ForSystem(system) {
				t.Run(client.Name, func(t *testing.T) { isAMutex(t, client, target) })
			}
			for name, test := range systemTests[system] {
				t.Run(name, func(t *testing.T) { test(t, target) })
			}
		})
	}
}

// newLock makes a lock of client on target (its nodes and any Sentinels).
func newLock(t *testing.T, client Client, target Config, owner string, ttl time.Duration) Lock {
	t.Helper()
	cfg := target
	cfg.Key, cfg.TTL, cfg.Fencing, cfg.Owner = "k-"+client.Name, ttl, client.Tokens, owner
	// A request answered late on a busy machine is no failure of the lock: the tests are
	// about what the answer says. Beside make test's containers and two busy processes,
	// etcd once took over a second to delete a waiter's key.
	cfg.OpTimeout, cfg.Retry = 5*time.Second, 10*time.Millisecond
	l, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func acquire(l Lock, within time.Duration) (Grant, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return l.Acquire(ctx)
}

// grant is acquire of a lock that should be granted. A Redlock client rightly refuses a
// grant whose attempt outlasted its TTL (SpentError), which a busy machine can make
// happen: such an attempt is made again, three at most, each within its own window.
func grant(l Lock, within time.Duration) (g Grant, err error) {
	for range 3 {
		var spent *SpentError
		if g, err = acquire(l, within); !errors.As(err, &spent) {
			break
		}
	}
	return g, err
}

func isAMutex(t *testing.T, client Client, target Config) {
	ttl := 2 * time.Second
	if client.RunsOn("zookeeper") {
		ttl = 4 * time.Second // the session timeout
	}
	a := newLock(t, client, target, client.Name+"-a", ttl)
	b := newLock(t, client, target, client.Name+"-b", ttl)

	ga, err := grant(a, 5*time.Second)
	if err != nil {
		t.Fatalf("a: acquire a free lock: %v", err)
	}
	if client.Tokens != ga.HasToken {
		t.Errorf("grant has a token: %v; client claims tokens: %v", ga.HasToken, client.Tokens)
	}
	if _, err := acquire(b, 300*time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("b: acquire a held lock: got %v, want ErrBusy", err)
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatalf("a: release: %v", err)
	}
	gb, err := grant(b, 5*time.Second)
	if err != nil {
		t.Fatalf("b: acquire after a released: %v", err)
	}
	if client.Tokens && gb.Token <= ga.Token {
		t.Errorf("tokens did not grow: a got %d, then b got %d", ga.Token, gb.Token)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Fatalf("b: release: %v", err)
	}
	if err := b.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Errorf("b: second release: got %v, want ErrNotHeld", err)
	}
}

// A Redis lease runs out on its own: the holder is not asked. This is the root of every
// violation the harness reproduces. The lease is long enough for a grant: a Redlock client
// refuses one that took longer than its TTL (grant tries again), and an attempt on five
// masters beside make test's containers and two busy processes took 592 ms.
func leaseExpiresUnderTheHolder(name string) func(*testing.T, Config) {
	return func(t *testing.T, target Config) {
		const ttl = 2 * time.Second
		client, _ := LookupClient(name)
		a := newLock(t, client, target, name+"-lease-a", ttl)
		b := newLock(t, client, target, name+"-lease-b", ttl)
		if _, err := grant(a, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl + 100*time.Millisecond) // past a's lease, which the servers end
		if _, err := grant(b, time.Second); err != nil {
			t.Fatalf("b could not take an expired lease: %v", err)
		}
		if err := a.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
			t.Errorf("a released b's lock? got %v, want ErrNotHeld", err)
		}
		if err := b.Release(context.Background()); err != nil {
			t.Errorf("b: %v", err)
		}
	}
}

// Our Redlock reads time from an injectable clock: a client whose clock jumps past the
// TTL while it acquires must not believe it holds the lock, and must give back what it got.
func redlockRefusesASlowGrant(t *testing.T, target Config) {
	nodes := target.Nodes
	calls := 0
	jumpy := func() time.Time {
		calls++
		return time.Now().Add(time.Duration(calls) * 10 * time.Second)
	}
	l, err := NewRedlock(Config{Nodes: nodes, Key: "k-jumpy", TTL: 5 * time.Second, OpTimeout: 200 * time.Millisecond,
		Retry: 10 * time.Millisecond, Owner: "jumpy"}, false, jumpy)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var spent *SpentError
	if _, err := acquire(l, 200*time.Millisecond); !errors.Is(err, ErrBusy) || !errors.As(err, &spent) || spent.Took < 5*time.Second {
		t.Fatalf("got %v, want a SpentError (a definite refusal): the elapsed time exceeded the TTL", err)
	}
	other, err := NewRedlock(Config{Nodes: nodes, Key: "k-jumpy", TTL: 5 * time.Second, OpTimeout: 200 * time.Millisecond,
		Retry: 10 * time.Millisecond, Owner: "other"}, false, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := acquire(other, time.Second); err != nil {
		t.Fatalf("the refused client left the lock held: %v", err)
	}
	other.Release(context.Background())
}

// An etcd lease no longer kept alive (the holder paused) runs out on the server: its key
// goes, the next waiter holds the lock, and the holder's release is refused.
func etcdLeaseExpiresUnderAPausedHolder(t *testing.T, target Config) {
	client, _ := LookupClient("etcd")
	a := newLock(t, client, target, "etcd-lease-a", time.Second)
	b := newLock(t, client, target, "etcd-lease-b", time.Second)
	ga, err := acquire(a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := time.ParseDuration(ga.Detail["validity"]); ga.Detail["lease_ttl"] != "2s" || err != nil || v > 2*time.Second || v < time.Second {
		t.Errorf("a 1 s TTL is a 2 s lease on etcd (its minimum), and the grant should say so: %v", ga.Detail)
	}
	a.(*etcdLock).session.Orphan() // as a SIGSTOP would: no more keep-alives
	gb, err := acquire(b, 5*time.Second)
	if err != nil {
		t.Fatalf("b could not take an expired lease: %v", err)
	}
	if gb.Token <= ga.Token {
		t.Errorf("create revisions did not grow: a %d, b %d", ga.Token, gb.Token)
	}
	if err := a.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Errorf("a released b's lock? got %v, want ErrNotHeld", err)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Errorf("b: %v", err)
	}
}

// An advisory lock is the session's: once the server ends the session, another client
// takes the lock, and the first learns of it only at its next query.
func advisoryLockDiesWithItsSession(t *testing.T, target Config) {
	client, _ := LookupClient("pg-advisory")
	a := newLock(t, client, target, "adv-a", 2*time.Second)
	b := newLock(t, client, target, "adv-b", 2*time.Second)
	// A free lock is granted at a's first try, but that try connects first: beside make
	// test's containers and two busy processes, a fresh server process can take seconds.
	if _, err := acquire(a, 5*time.Second); err != nil {
		t.Fatalf("a: acquire a free lock: %v; the server's advisory locks: %s", err, advisoryHolders(target))
	}
	var pid int32
	a.(*pgAdvisory).db.conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid)
	killer := newLock(t, client, target, "adv-killer", 2*time.Second).(*pgAdvisory)
	conn, err := killer.db.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(b, 5*time.Second); err != nil { // the ended backend exits in its own time
		t.Fatalf("b could not take the lock of an ended session: %v", err)
	}
	if err := a.Release(context.Background()); err == nil || errors.Is(err, ErrNotHeld) {
		t.Errorf("a's release on its ended session: got %v, want an unknown outcome", err)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Errorf("b: %v", err)
	}
}

// advisoryHolders names the sessions holding advisory locks on target's server, for a test
// that found a free lock busy.
func advisoryHolders(target Config) string {
	s := pgSession{cfg: Config{Nodes: target.Nodes, Owner: "holders", OpTimeout: 5 * time.Second}}
	defer s.drop()
	var holders []string
	err := s.do(context.Background(), func(ctx context.Context, conn *pgx.Conn) (err error) {
		rows, _ := conn.Query(ctx, `SELECT format('%s (backend %s, %s since %s)', a.application_name, a.pid, a.state, a.state_change)
			FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted`)
		holders, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	return fmt.Sprint(holders)
}

// A lease row its holder stops renewing (a pause) is taken over once a waiter has seen it
// unchanged for a TTL, with a higher record version number; the holder's release is
// refused.
func pgLeaseIsTakenOverWhenNotRenewed(t *testing.T, target Config) {
	client, _ := LookupClient("pg-lease")
	a := newLock(t, client, target, "lease-a", 500*time.Millisecond)
	b := newLock(t, client, target, "lease-b", 500*time.Millisecond)
	ga, err := acquire(a, 5*time.Second) // its first try connects, as advisoryLockDiesWithItsSession's
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(b, 300*time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("b took a lease that is renewed: %v", err)
	}
	a.(*pgLease).stopRenewing()
	a.(*pgLease).stopRenewing = func() {}
	gb, err := acquire(b, 2*time.Second)
	if err != nil {
		t.Fatalf("b could not take a lease nobody renews: %v", err)
	}
	if gb.Token <= ga.Token || gb.Detail["took_over"] == "" {
		t.Errorf("b's grant: token %d after a's %d, detail %v", gb.Token, ga.Token, gb.Detail)
	}
	if err := a.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Errorf("a released b's lock? got %v, want ErrNotHeld", err)
	}
	if err := b.Release(context.Background()); err != nil {
		t.Errorf("b: %v", err)
	}
}

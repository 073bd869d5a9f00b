package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker/internal/tier"
	"github.com/lockbreaker/lockbreaker/system"
)

// A Redis server killed (its container stopped) or crashed in place (its container kept)
// comes back at the same address with what its persistence kept: everything with an AOF,
// nothing without. One server of each persistence takes both crashes, one after the other.
func TestCrashedRedisRemembersWhatItsPersistenceKept(t *testing.T) {
	for _, tt := range []struct {
		persistence system.Persistence
		kept        bool
	}{
		{system.PersistNone, false},
		{system.PersistAOFAlways, true},
	} {
		t.Run(string(tt.persistence), func(t *testing.T) {
			c := startCluster(t, Spec{System: "redis", Persistence: tt.persistence})
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: c.Nodes()[0].Addr(), MaxRetries: -1})
			defer rdb.Close()
			for _, inPlace := range []bool{false, true} {
				crash, how := c.Kill, "killed"
				if inPlace {
					crash, how = c.Crash, "crashed in place"
				}
				if err := rdb.Set(ctx, "lock", how, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				started := startedAt(t, c, "n1")
				if err := crash(ctx, "n1"); err != nil {
					t.Fatal(err)
				}
				if roles, err := c.Roles(ctx); err == nil || roles != nil {
					t.Errorf("a single Redis has no roles, got %v, %v", roles, err)
				}
				if err := c.Restart(ctx, "n1"); err != nil {
					t.Fatal(err)
				}
				if same := startedAt(t, c, "n1") == started; same != inPlace {
					t.Errorf("%s: the container kept running: %t, want %t", how, same, inPlace)
				}
				got, err := rdb.Get(ctx, "lock").Result()
				switch {
				case tt.kept && (err != nil || got != how):
					t.Errorf("%s: after the restart the lock is %q, %v; want it kept", how, got, err)
				case !tt.kept && !errors.Is(err, redis.Nil):
					t.Errorf("%s: after the restart the lock is %q, %v; want it forgotten", how, got, err)
				}
			}
		})
	}
}

// startedAt is when node's container last started.
func startedAt(t *testing.T, c *Cluster, node string) string {
	t.Helper()
	n, err := c.node(node)
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := docker()
	info, err := cli.ContainerInspect(context.Background(), n.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return info.Container.State.StartedAt
}

// Nodes killed together and started again in another order, at once, each come back at
// its own address: the engine would otherwise hand the first to start the lowest free one.
func TestNodesRestartedTogetherKeepTheirAddresses(t *testing.T) {
	c := startCluster(t, Spec{System: "redlock", Nodes: 3})
	ctx := context.Background()
	before := map[string]string{}
	for _, n := range c.Nodes() {
		before[n.Name] = n.IP
	}
	// The node with the higher address asks first, so the lowest free one is not its own.
	nodes := c.Nodes()
	slices.SortFunc(nodes, func(a, b Node) int { return -netip.MustParseAddr(a.IP).Compare(netip.MustParseAddr(b.IP)) })
	for _, n := range nodes[:2] {
		if err := c.Kill(ctx, n.Name); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	for _, n := range nodes[:2] {
		go func() { errs <- c.Restart(ctx, n.Name) }()
		time.Sleep(50 * time.Millisecond)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes() {
		ip, err := c.containerIP(ctx, n)
		if err != nil || ip != before[n.Name] {
			t.Errorf("%s is at %s (%v), want %s", n.Name, ip, err, before[n.Name])
		}
	}
}

// Sentinels promote a replica when the primary is killed; the old primary, started again,
// is made a replica of the new one. Roles follow every step.
func TestSentinelPromotesAReplicaWhenThePrimaryIsKilled(t *testing.T) {
	tier.Long(t) // make test's Sentinel failover (harness) sees the promotion, and its kept cluster the old primary a replica
	c := startCluster(t, Spec{System: "sentinel"})
	ctx := context.Background()
	if got := len(c.Monitors()); got != 3 {
		t.Fatalf("%d Sentinels, want 3", got)
	}
	want := map[string]system.Role{"n1": system.Primary, "n2": system.Replica, "n3": system.Replica}
	if roles, err := c.Roles(ctx); err != nil || !maps.Equal(roles, want) {
		t.Fatalf("roles %v, %v; want %v", roles, err, want)
	}
	if err := c.Kill(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	var promoted string
	eventually(t, "a replica promoted", func() error {
		roles, err := c.Roles(ctx)
		if err != nil {
			return err
		}
		if roles["n1"] != system.Down {
			return fmt.Errorf("killed n1 is %s", roles["n1"])
		}
		for _, n := range []string{"n2", "n3"} {
			if roles[n] == system.Primary {
				promoted = n
				return nil
			}
		}
		return fmt.Errorf("roles %v", roles)
	})
	if err := c.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	// Sentinel turns a primary that comes back into a replica once it has looked sane for
	// 8 s (SENTINEL_PUBLISH_PERIOD*4); until then there are two primaries.
	eventuallyWithin(t, 30*time.Second, "n1 a replica of "+promoted, func() error {
		roles, err := c.Roles(ctx)
		if err == nil && roles["n1"] != system.Replica {
			err = fmt.Errorf("roles %v", roles)
		}
		return err
	})
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
}

package containers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/system"
)

// An etcd cluster comes up with one leader within a few seconds, and a leader killed and
// started again on its data directory rejoins while another member leads.
func TestEtcdClusterElectsAndRejoins(t *testing.T) {
	c := startCluster(t, Spec{System: "etcd", TTL: 2 * time.Second}) // logs the bring-up's time
	ctx := context.Background()
	leader, err := c.Leader(ctx)
	if err != nil || !strings.HasPrefix(leader, "n") {
		t.Fatalf("leader: %q, %v", leader, err)
	}
	roles, err := c.Roles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	count := map[system.Role]int{}
	for _, r := range roles {
		count[r]++
	}
	if count[system.Leader] != 1 || count[system.Follower] != 2 {
		t.Errorf("roles %v: want one leader and two followers", roles)
	}

	if err := c.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	etcd, _ := system.Lookup("etcd")
	for _, n := range c.Nodes() {
		if n.Name != leader {
			eventually(t, n.Name+" serving without "+leader, func() error { return etcd.Container.Ready(ctx, n.Addr()) })
		}
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a leader again", func() error { _, err := c.Leader(ctx); return err })
}

// A PostgreSQL node serves within a couple of seconds, and one killed and started again
// recovers and serves again.
func TestPostgresServesAndRecovers(t *testing.T) {
	c := startCluster(t, Spec{System: "postgres", TTL: 2 * time.Second})
	ctx := context.Background()
	pg, _ := system.Lookup("postgres")
	n := c.Nodes()[0]
	if err := c.Kill(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if err := pg.Container.Ready(ctx, n.Addr()); err == nil {
		t.Fatal("a killed server still lets clients in")
	}
	restarted := time.Now()
	if err := c.Restart(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres serving again %s after its restart", time.Since(restarted).Round(time.Millisecond))
}

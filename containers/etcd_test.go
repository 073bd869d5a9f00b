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
	start := time.Now()
	c := startCluster(t, Spec{System: "etcd", TTL: 2 * time.Second})
	t.Logf("3 etcd members serving %s after Start was called (image included)", time.Since(start).Round(time.Millisecond))
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

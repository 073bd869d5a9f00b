package containers

import (
	"context"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/system"
)

// A PostgreSQL node serves within a couple of seconds, and one killed and started again
// recovers and serves again.
func TestPostgresServesAndRecovers(t *testing.T) {
	start := time.Now()
	c := startCluster(t, Spec{System: "postgres", TTL: 2 * time.Second})
	t.Logf("postgres serving %s after Start was called (image included)", time.Since(start).Round(time.Millisecond))
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

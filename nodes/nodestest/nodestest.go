// Package nodestest holds every place to one contract in tests: whatever faults struck a
// cluster's nodes, Heal undoes them all at once, the same wherever the nodes live.
package nodestest

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/nodes"
)

// HealContract strikes a running cluster, started with partitions, faked clocks and
// disks, with every node fault at once: node victim's clock moved, its disk slowed, victim
// cut off the lock clients and paused, and node killed killed (victim itself when they are
// the same: a server killed while cut, paused, off its clock and on a slow disk). After
// one Heal every node must serve again from this host, cut by no rule, its clock at real
// time, its disk's syncs as fast as they can be and none of them waiting.
func HealContract(t *testing.T, c *nodes.Cluster, victim, killed string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	strike := []func() error{
		func() error { return c.SetClock(ctx, victim, 5*time.Second) },
		func() error { return c.SlowSync(ctx, victim, time.Hour) },
		func() error { return c.DropFrom(ctx, victim, c.Gateway()) },
		func() error { return c.Signal(ctx, victim, syscall.SIGSTOP) },
		func() error { return c.Kill(ctx, killed) },
	}
	for _, f := range strike {
		if err := f(); err != nil {
			t.Fatalf("strike: %v", err)
		}
	}
	if err := c.Heal(ctx); err != nil {
		t.Fatalf("heal: %v", err)
	}
	// A node still paused or cut never serves: the wait fails only when the heal did.
	if err := c.WaitNodes(ctx); err != nil {
		t.Errorf("after heal: %v", err)
	}
	for _, r := range c.Remotes()[:len(c.Names())] {
		name := r.Info().Name
		if err := r.NetRun(ctx, "! iptables -w -S "+nodes.Chain+" 2>/dev/null | grep -q -- '-j DROP'"); err != nil {
			t.Errorf("after heal node %s is still cut: %v", name, err)
		}
		if got, err := r.Run(ctx, "cat", r.Info().ClockFile); err != nil || strings.TrimSpace(got) != "+0.000" {
			t.Errorf("after heal node %s's clock offset is %q (%v), want +0.000", name, got, err)
		}
		if r.Disk() == nil {
			t.Errorf("node %s has no disk: the contract's cluster is started with disks", name)
		} else if stats, err := r.Disk().Counters(ctx); err != nil || stats.SyncDelay != 0 || stats.SyncsWaiting != 0 {
			t.Errorf("after heal node %s's disk: %+v (%v), want no sync delay and none waiting", name, stats, err)
		}
	}
}

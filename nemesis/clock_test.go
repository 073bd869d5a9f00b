package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Two parts' offsets on one node add up, and each part's reset takes back only its own.
func TestClockOffsetsOfTwoFaultsAddUp(t *testing.T) {
	f := newFake(1, 2)
	sums := newClockSums(f, 2)
	bump, rate := partClocks{sums, 0}, partClocks{sums, 1}
	ctx := context.Background()
	steps := []func() error{
		func() error { return bump.SetClock(ctx, "n1", 4*time.Second) },
		func() error { return rate.SetClock(ctx, "n1", 200*time.Millisecond) },
		func() error { return rate.SetClock(ctx, "n2", -time.Second) },
		func() error { return bump.ResetClocks(ctx) },
		func() error { return rate.ResetClocks(ctx) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"clock n1 +4.000", "clock n1 +4.200", "clock n2 -1.000", "clock n1 +0.200", "clock n1 +0.000", "clock n2 +0.000"}
	if got := f.did(); !slices.Equal(got, want) {
		t.Errorf("clocks set:\n got %q\nwant %q", got, want)
	}
}

// overlapping is a cluster's clocks that note a call made while another is still under way
// on the same node: the cluster writes one offset file per node, so two at once would race.
type overlapping struct {
	*fake
	busy     sync.Map // node -> *atomic.Bool
	overlaps atomic.Int64
}

func (o *overlapping) SetClock(ctx context.Context, node string, offset time.Duration) error {
	b, _ := o.busy.LoadOrStore(node, new(atomic.Bool))
	if !b.(*atomic.Bool).CompareAndSwap(false, true) {
		o.overlaps.Add(1)
		return nil
	}
	defer b.(*atomic.Bool).Store(false)
	time.Sleep(time.Millisecond) // as a write into a node takes a while
	return o.fake.SetClock(ctx, node, offset)
}

// clock-bump and clock-rate striking one node at once, composed: the node's clock is set
// one call at a time, at some moment reads both faults' offsets together (the bump's 4 s and
// the rate's run ahead), and is back on real time at the end.
func TestComposedClockFaultsStrikeOneNodeAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(1, 1)
		o := &overlapping{fake: f}
		env := f.env()
		env.Nodes, env.Undirected = nodesWithClocks{fakeNodes{f}, o}, true
		env.Pause, env.Interval = 2*time.Second, 100*time.Millisecond
		n, err := New([]string{history.ClockBump.Name, history.ClockRate.Name})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		if n := o.overlaps.Load(); n > 0 {
			t.Errorf("%d clock settings overlapped on one node", n)
		}
		got := f.did()
		both := slices.ContainsFunc(got, func(a string) bool {
			var d float64
			_, err := fmt.Sscanf(a, "clock n1 %f", &d)
			return err == nil && d > 4 // the bump's +4 s and the rate's run ahead of it
		})
		if !both {
			t.Errorf("the node's clock never read both offsets at once: %s", strings.Join(got, "; "))
		}
		if last := got[len(got)-1]; last != "clock n1 +0.000" {
			t.Errorf("the clock ends at %q, not on real time", last)
		}
	})
}

// nodesWithClocks is the fake's nodes with clocks of another's.
type nodesWithClocks struct {
	fakeNodes
	clocks Clocks
}

func (n nodesWithClocks) SetClock(ctx context.Context, node string, offset time.Duration) error {
	return n.clocks.SetClock(ctx, node, offset)
}
func (n nodesWithClocks) ResetClocks(ctx context.Context) error { return n.clocks.ResetClocks(ctx) }

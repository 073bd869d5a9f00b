package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/containers/containerstest"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/nemesis"
)

// Every node fault against real containers: while a fault is on, the node really is
// paused, cut off, skewed or killed; once the nemesis is healed, no paused or killed
// server, iptables rule or faked clock remains in the containers, which a later test
// could reuse.

type observedFault struct {
	event history.Event
	seen  string
}

// runNemesis runs the named nemesis on a real cluster for d, calling observe at each fault
// start (while the fault is on), then heals. There are no clients, so no holder for a
// targeted fault to wait for: it fires undirected.
func runNemesis(t *testing.T, c *containers.Cluster, name string, d time.Duration, observe func(history.Event) string) []observedFault {
	t.Helper()
	n, err := nemesis.New([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []observedFault
	env := nemesis.Env{
		Workers:   noWorkers{},
		Nodes:     c,
		Subscribe: func() <-chan history.Event { return make(chan history.Event) },
		Record: func(e history.Event) {
			if e.Func != history.Start {
				return
			}
			what := observe(e)
			mu.Lock()
			seen = append(seen, observedFault{e, what})
			mu.Unlock()
		},
		Seed: 3, Pause: 1500 * time.Millisecond, Interval: 300 * time.Millisecond,
		ClockOffset: 30 * time.Second, ClockRate: 2, TTL: time.Second, RestartAfter: 500 * time.Millisecond,
		Undirected: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := n.Run(ctx, env); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := n.Heal(context.Background(), env); err != nil {
		t.Fatalf("heal %s: %v", name, err)
	}
	if len(seen) == 0 {
		t.Fatalf("%s injected nothing in %s", name, d)
	}
	return seen
}

type noWorkers struct{}

func (noWorkers) Processes() []int                 { return nil }
func (noWorkers) Signal(int, syscall.Signal) error { return nil }

func inNode(t *testing.T, c *containers.Cluster, node string, cmd ...string) string {
	t.Helper()
	out, err := c.Exec(context.Background(), node, cmd...)
	if err != nil {
		t.Fatalf("%s: %v: %v", node, cmd, err)
	}
	return out
}

// assertHealed fails t if any node still has a DROP rule, a faked clock, or a stopped server.
func assertHealed(t *testing.T, c *containers.Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		if rules := inNode(t, c, n.Name, "iptables", "-S"); strings.Contains(rules, "DROP") {
			t.Errorf("%s still drops packets: %s", n.Name, rules)
		}
		if offset := inNode(t, c, n.Name, "cat", "/lockbreaker/faketime"); strings.TrimSpace(offset) != "+0" && strings.TrimSpace(offset) != "+0.000" {
			t.Errorf("%s clock still offset: %q", n.Name, offset)
		}
		if state := inNode(t, c, n.Name, "sh", "-c", "ps -o stat= -p 1"); strings.HasPrefix(strings.TrimSpace(state), "T") {
			t.Errorf("%s server still stopped (%s)", n.Name, state)
		}
	}
}

func TestNemesesOnRealNodesAreHealed(t *testing.T) {
	inLane(t, laneRedis)
	c := containerstest.Start(t, containers.Spec{System: "redlock", Faketime: true, Partitions: true})
	ctx := context.Background()

	t.Run("partition", func(t *testing.T) {
		for _, f := range runNemesis(t, c, "partition", 2*time.Second, func(e history.Event) string {
			return inNode(t, c, e.Targets[0], "iptables", "-S")
		}) {
			if !strings.Contains(f.seen, "-j DROP") {
				t.Errorf("%s: no DROP rule on %s while it was on: %q", f.event.Fault, f.event.Targets[0], f.seen)
			}
		}
		assertHealed(t, c)
	})
	t.Run("clock", func(t *testing.T) {
		for _, f := range runNemesis(t, c, "clock-bump", 2*time.Second, func(e history.Event) string {
			return inNode(t, c, e.Targets[0], "cat", "/lockbreaker/faketime")
		}) {
			if got := strings.TrimSpace(f.seen); got != "+30.000" && got != "-30.000" {
				t.Errorf("%s: %s's clock file said %q while it was on", f.event.Fault, f.event.Targets[0], got)
			}
		}
		assertHealed(t, c)
	})
	t.Run("pause-node", func(t *testing.T) {
		for _, f := range runNemesis(t, c, "pause-node", 2*time.Second, func(e history.Event) string {
			return inNode(t, c, e.Targets[0], "sh", "-c", "ps -o stat= -p 1")
		}) {
			if !strings.HasPrefix(strings.TrimSpace(f.seen), "T") {
				t.Errorf("%s: %s's server was %q while paused, want stopped (T)", f.event.Fault, f.event.Targets[0], f.seen)
			}
		}
		assertHealed(t, c)
	})
	t.Run("kill-node", func(t *testing.T) {
		for _, f := range runNemesis(t, c, "kill-node", 2*time.Second, func(e history.Event) string {
			_, err := c.Exec(ctx, e.Targets[0], "true")
			return fmt.Sprint(err)
		}) {
			if !strings.Contains(f.seen, "is not running") {
				t.Errorf("%s: %s answered %q while killed, want a container that is not running", f.event.Fault, f.event.Targets[0], f.seen)
			}
		}
		assertHealed(t, c)
	})
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
}

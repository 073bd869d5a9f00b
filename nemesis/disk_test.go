package nemesis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// powerable is the crashable fake whose nodes have disks: a power cut is recorded as one
// action, what it lost is said by node, and a slowed disk records its delay.
type powerable struct {
	*crashable
	leader string
}

func (p powerable) PowerOff(ctx context.Context, node string) (string, error) {
	if err := p.Kill(ctx, node); err != nil {
		return "", err
	}
	return "12 bytes of " + node + "/log", p.act("drop %s", node)
}

func (p powerable) PowerCycle(ctx context.Context, node string) (string, error) {
	return p.PowerOff(ctx, node)
}

func (p powerable) SlowSync(_ context.Context, node string, d time.Duration) error {
	return p.act("slow %s %s", node, d)
}

func (p powerable) Leader(context.Context) (string, error) { return p.leader, nil }

// A power loss strikes as kill-node does, the holder's nodes within its lease, but each
// node's disk drops what it held unsynced, and its start says what.
func TestPowerLossDropsTheHoldersNodesUnsyncedWrites(t *testing.T) {
	f := newFake(2, 3)
	env, c := f.crashEnv()
	env.Nodes, env.TTL, env.IndependentMajority = powerable{crashable: c}, time.Hour, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- powerLoss{}.Run(ctx, env) }()
	now := history.Now()
	f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now}
	f.events <- history.Event{Index: 4, Type: history.OK, Process: 0, Func: history.Acquire, Time: now,
		Detail: map[string]string{"nodes": "n1,n2,n3"}}
	f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Read, Time: now}
	waitFor(t, "two nodes back", func() bool { return len(restarted(f.did())) == 2 })
	f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 9, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now(),
		Detail: map[string]string{"nodes": strings.Join(killedNodes(f.did()), ",")}}
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Write, Time: history.Now()}
	waitFor(t, "the holder thawed", func() bool { return slices.Contains(f.did(), "worker-0 CONTINUED") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, node := range killedNodes(f.did()) {
		if !slices.Contains(f.did(), "drop "+node) {
			t.Errorf("actions %q: %s killed but its disk's writes not dropped", f.did(), node)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := history.CountHazards(f.recorded)
	if counts[history.CrashUnderGrant] != 2 || counts[history.RestartServed] != 1 {
		t.Errorf("hazards %v, want 2 crashes under the grant and the answer of a restarted node", counts)
	}
	for _, e := range f.recorded {
		if e.Func == history.Start && e.Fault != history.PauseInLease.Name &&
			(e.Fault != history.PowerLoss.Name || e.Detail[history.LostDetail] != "12 bytes of "+e.Targets[0]+"/log") {
			t.Errorf("start %+v: want a power-loss saying what its node lost", e)
		}
		if e.Hazard != "" && e.Fault != history.PowerLoss.Name {
			t.Errorf("hazard %+v: want it power-loss's", e)
		}
	}
}

// restarted are the nodes actions restarted.
func restarted(actions []string) []string {
	var nodes []string
	for _, a := range actions {
		if node, ok := strings.CutPrefix(a, "restart "); ok {
			nodes = append(nodes, node)
		}
	}
	return nodes
}

// slow-disk slows the leader's disk for --pause once a client holds the lock, and makes it
// fast again when the run ends; its heal makes every disk fast.
func TestSlowDiskStallsTheLeadersSyncsWhileALockIsHeld(t *testing.T) {
	f := newFake(2, 3)
	env, c := f.crashEnv()
	env.Nodes, env.Pause = powerable{crashable: c, leader: "n2"}, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- slowDisk{}.Run(ctx, env) }()
	f.events <- history.Event{Index: 3, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	waitFor(t, "the slowed disk", func() bool { return slices.Contains(f.did(), "slow n2 1h0m0s") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.did(); !slices.Equal(got, []string{"slow n2 1h0m0s", "slow n2 0s"}) {
		t.Errorf("actions %q: want the leader's disk slowed for the pause, then made fast again", got)
	}
	if err := (slowDisk{}).Heal(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got := f.did()[2:]; len(got) != 3 || !slices.Contains(got, "slow n1 0s") {
		t.Errorf("heal did %q: want every disk made fast", got)
	}
}

func TestALeaseTermEndsInAStallOnlyWhileHeld(t *testing.T) {
	tests := []struct {
		end, stalled, healed, released int64
		want                           bool
	}{
		{end: 5, stalled: 1, healed: 9, want: true},
		{end: 5, stalled: 1, healed: 9, released: 7, want: true}, // released after its term
		{end: 5, stalled: 1, healed: 9, released: 3},             // released before its term ended
		{end: 5, stalled: 6, healed: 9},                          // ended before the stall
		{end: 10, stalled: 1, healed: 9},                         // ended after the heal
	}
	for _, tt := range tests {
		if got := termEndedInStall(tt.end, tt.stalled, tt.healed, tt.released); got != tt.want {
			t.Errorf("%+v: %v, want %v", tt, got, tt.want)
		}
	}
}

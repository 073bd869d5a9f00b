package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// fake is a cluster and a set of workers that only remember what was done to them.
type fake struct {
	mu       sync.Mutex
	workers  int
	nodes    []string
	actions  []string
	recorded []history.Event
	events   chan history.Event
}

func newFake(workers, nodes int) *fake {
	f := &fake{workers: workers, events: make(chan history.Event, 64)}
	for i := 1; i <= nodes; i++ {
		f.nodes = append(f.nodes, fmt.Sprintf("n%d", i))
	}
	return f
}

func (f *fake) act(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, fmt.Sprintf(format, args...))
	return nil
}

func (f *fake) did() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.actions)
}

func (f *fake) Processes() []int {
	var running []int
	for p := range f.workers {
		running = append(running, p)
	}
	return running
}
func (f *fake) Signal(p int, sig syscall.Signal) error {
	return f.act("worker-%d %s", p, strings.ToUpper(sig.String()))
}
func (f *fake) Names() []string { return f.nodes }
func (f *fake) SignalNode(node string, sig syscall.Signal) error {
	return f.act("%s %s", node, unix.SignalName(sig))
}
func (f *fake) SetClock(_ context.Context, node string, offset time.Duration) error {
	return f.act("clock %s %s", node, offsetText(offset))
}
func (f *fake) ResetClocks(context.Context) error { return f.act("reset clocks") }
func (f *fake) IP(node string) string             { return "ip-" + node }
func (f *fake) Gateway() string                   { return "gw" }
func (f *fake) HealNetwork(context.Context) error { return f.act("heal network") }
func (f *fake) DropFrom(_ context.Context, node string, sources ...string) error {
	return f.act("%s drops %s", node, strings.Join(sources, ","))
}

// fakeNodes gives the node signal its interface's name without clashing with Workers.
type fakeNodes struct{ *fake }

func (n fakeNodes) Signal(_ context.Context, node string, sig syscall.Signal) error {
	return n.SignalNode(node, sig)
}

func (f *fake) env() Env {
	return Env{
		Workers:     f,
		Nodes:       fakeNodes{f},
		Subscribe:   func() <-chan history.Event { return f.events },
		Record:      func(e history.Event) { f.mu.Lock(); f.recorded = append(f.recorded, e); f.mu.Unlock() },
		Seed:        42,
		Pause:       30 * time.Millisecond,
		Interval:    10 * time.Millisecond,
		ClockOffset: 4 * time.Second,
		ClockRate:   2,
		TTL:         time.Millisecond,
	}
}

func (f *fake) faults() []history.Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return history.Faults(f.recorded)
}

// running runs n on env until the stop it returns, which ends it and fails t on its error;
// a test that ends before stop ends n too.
func running(t *testing.T, n kind, env Env) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, env) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// hazards are the hazard events recorded so far.
func (f *fake) hazards() []history.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var got []history.Event
	for _, e := range f.recorded {
		if e.Hazard != "" {
			got = append(got, e)
		}
	}
	return got
}

func TestNewKnowsEveryNemesisAndRejectsOthers(t *testing.T) {
	for _, name := range Names() {
		if n, err := New([]string{name}); err != nil || n.Name() != name {
			t.Errorf("New(%q) = %v, %v", name, n, err)
		}
	}
	if n, err := New([]string{"none"}); err != nil || n.Name() != "none" {
		t.Errorf("none: %v %v", n, err)
	}
	if _, err := New([]string{"pause-holder", "meteor"}); err == nil || !strings.Contains(err.Error(), `unknown nemesis "meteor"`) {
		t.Errorf("meteor: %v", err)
	}
}

// The nemeses that can be chosen are the fault kinds history declares, but those only ever
// recorded as a part of another's faults: a kind declared with no nemesis to make it, or a
// nemesis whose kind is not declared, is caught here. Each is registered under its kind's
// name, and targets the hazard its kind declares.
func TestEveryChosenFaultKindHasItsNemesis(t *testing.T) {
	var want []string
	for _, k := range history.FaultKinds() {
		if !k.Part {
			want = append(want, k.Name)
		}
	}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("nemeses %q, want one for each chosen fault kind: %q", got, want)
	}
	for name, make := range kinds {
		if k := make().Kind(); k.Name != name {
			t.Errorf("kinds[%q] makes faults of kind %s", name, k.Name)
		}
	}
	hazards := history.Targets(Names())
	for _, k := range history.FaultKinds() {
		if h, ok := hazards[k.Name]; h != k.Hazard || ok != (k.Hazard != "") {
			t.Errorf("%s targets %q, its kind %q", k.Name, h, k.Hazard)
		}
	}
	for _, shape := range shapeKinds(true) {
		if !strings.HasPrefix(shape.Name, history.Partition.Name+"-") {
			t.Errorf("shape %s is not named as a partition", shape.Name)
		}
	}
}

func TestNeedsAreTheLeversRunPulls(t *testing.T) {
	tests := []struct {
		names []string
		want  Needs
	}{
		{[]string{"none"}, Needs{}},
		{[]string{"pause-holder", "pause-node"}, Needs{}},
		{[]string{"pause-holder", "clock-bump"}, Needs{Clocks: true}},
		{[]string{"partition-halves"}, Needs{Network: true}},
		{[]string{"kleppmann-clock"}, Needs{Clocks: true, Network: true}},
		{[]string{"clock", "partition"}, Needs{Clocks: true, Network: true}},
		{[]string{"throttle-holder", "pause-node"}, Needs{BusyHolders: true, CPUCaps: true}},
	}
	for _, tt := range tests {
		n, err := New(tt.names)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Needs(); got != tt.want {
			t.Errorf("%v needs %+v, want %+v", tt.names, got, tt.want)
		}
	}
}

// A nemesis that cannot apply to a system says why before anything starts.
func TestAvailableSaysWhyANemesisCannotApply(t *testing.T) {
	tests := []struct {
		names  []string
		system string
		nodes  int
		want   string // "" when available
	}{
		{[]string{"pause-holder"}, "local", 1, ""},
		{[]string{"clock-bump"}, "local", 1, ""},
		{[]string{"partition-halves"}, "local", 1, "runs inside the harness"},
		{[]string{"partition-leader"}, "redlock", 5, "has no leader to isolate"},
		{[]string{"partition-leader"}, "zookeeper", 3, ""},
		{[]string{"partition-halves"}, "redis", 1, "needs at least two nodes"},
		{[]string{"partition-clients-from"}, "redis", 1, ""},
		{[]string{"kleppmann-clock"}, "zookeeper", 3, "needs --system redlock"},
		{[]string{"kleppmann-clock"}, "redlock", 5, ""},
		{[]string{"clock-bump"}, "etcd", 3, "etcd is a Go program"},
		{[]string{"partition-leader"}, "etcd", 3, ""},
		{[]string{"clock-strobe"}, "postgres", 1, ""},
		{[]string{"partition-leader"}, "postgres", 1, "has no leader to isolate"},
		// Where both fail, the systems a kind is meant for come before its levers, and its
		// further conditions after them.
		{[]string{"failover"}, "local", 1, "has no primary and replicas (try --system sentinel)"},
		{[]string{"kleppmann-clock"}, "local", 1, "needs --system redlock"},
		{[]string{"partition-primary"}, "local", 1, "has no primary and replica to split"},
		{[]string{"partition-leader"}, "local", 1, "cuts packets between containers, and local runs inside the harness"},
		// The faults on the clients' links need no kernel and no container.
		{[]string{"delay"}, "local", 1, ""},
		{[]string{"delay-holder"}, "local", 1, ""},
		{[]string{"pause-client", "kleppmann-clock", "partition-leader"}, "redis", 1,
			"nemesis kleppmann-clock: stages Kleppmann's example"},
	}
	for _, tt := range tests {
		checkAvailable(t, tt.names, tt.system, tt.nodes, tt.want)
	}
}

// checkAvailable builds the named nemeses and fails t unless they say of the system, at
// that size (0: its default), what want says: available when it is "", else a refusal
// that contains it. It returns the nemesis.
func checkAvailable(t *testing.T, names []string, sysName string, nodes int, want string) Nemesis {
	t.Helper()
	n, err := New(names)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := system.Lookup(sysName)
	if err != nil {
		t.Fatal(err)
	}
	if nodes == 0 {
		nodes = sys.Sizes.Default
	}
	err = n.Available(sys, nodes)
	switch {
	case want == "" && err != nil:
		t.Errorf("%v on %s: %v, want available", names, sysName, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%v on %s: %v, want %q", names, sysName, err, want)
	}
	return n
}

// pause-holder freezes the client that just read under the lock. A --pause the user gave
// is its length; otherwise the client is thawed once another has taken the lock over (been
// granted it and used the storage), however long that took.
func TestPauseHolderFreezesTheClientThatJustReadAndThawsIt(t *testing.T) {
	tests := []struct {
		name  string
		fixed bool
		// takeover are the events that end a pause that waits for one.
		takeover []history.Event
		// hazards: the lease ran out in a fixed pause; a takeover is a grant.
		hazards map[history.Hazard]int
	}{
		{"fixed length", true, nil, map[history.Hazard]int{history.LeaseExpiredInPause: 1}},
		{"until taken over", false, []history.Event{
			{Type: history.OK, Process: 1, Func: history.Write},   // the paused client's own
			{Type: history.OK, Process: 0, Func: history.Read},    // not granted since the pause
			{Type: history.OK, Process: 2, Func: history.Acquire}, // the new holder...
			{Type: history.OK, Process: 2, Func: history.Read},    // ...has used the storage
		}, map[history.Hazard]int{history.GrantedInPause: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(3, 1)
			env := f.env()
			env.PauseFixed = tt.fixed
			if tt.fixed {
				// The lease, granted as the test sends the grant, runs out within the pause
				// however late on a busy machine the pause begins, up to a lease.
				env.Pause, env.TTL = 100*time.Millisecond, 100*time.Millisecond
			} else {
				env.TTL = time.Hour // only the takeover can end the pause
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error)
			go func() { done <- pauseHolder{}.Run(ctx, env) }()
			now := history.Now()
			f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Read, Time: now} // not a holder
			f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: now}
			f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: now}
			waitFor(t, "the pause", func() bool { return len(f.did()) > 0 })
			for _, e := range tt.takeover {
				f.events <- e
			}
			waitFor(t, "the pause to be healed", func() bool { return len(f.faults()) > 0 && f.faults()[0].Healed })
			cancel()
			<-done
			want := []string{"worker-1 STOPPED (SIGNAL)", "worker-1 CONTINUED"}
			if got := f.did(); !slices.Equal(got, want) {
				t.Fatalf("actions %q, want %q", got, want)
			}
			fl := f.faults()[0]
			if fl.Targets[0] != "worker-1" || tt.fixed && fl.Stop-fl.Start < int64(env.Pause) {
				t.Fatalf("fault %+v: want worker-1 paused for at least %s", fl, env.Pause)
			}
			f.mu.Lock()
			hazards := history.CountHazards(f.recorded)
			f.mu.Unlock()
			if !maps.Equal(hazards, tt.hazards) {
				t.Errorf("hazards %v, want %v", hazards, tt.hazards)
			}
		})
	}
}

func TestHealResumesEveryWorkerAndNode(t *testing.T) {
	f := newFake(2, 3)
	n, _ := New([]string{"pause-client", "pause-node", "partition", "clock"})
	if err := n.Heal(context.Background(), f.env()); err != nil {
		t.Fatal(err)
	}
	got := f.did()
	for _, want := range []string{"worker-0 CONT", "worker-1 CONT", "n1 SIGCONT", "n3 SIGCONT", "heal network", "reset clocks"} {
		if !slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, want) }) {
			t.Errorf("heal did not %q: %q", want, got)
		}
	}
}

// slowEngine is a cluster whose engine answers a SIGSTOP only after the run has ended, as a
// busy one did in issue 35, and refuses a signal on a context that has ended, as a call
// cut short does.
type slowEngine struct {
	fakeNodes
	endRun context.CancelFunc
}

func (n slowEngine) Signal(ctx context.Context, node string, sig syscall.Signal) error {
	if sig == syscall.SIGSTOP {
		n.endRun()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("send %s to node %s: %w", unix.SignalName(sig), node, err)
	}
	return n.SignalNode(node, sig)
}

// Issue 35: a pause-node whose SIGSTOP the engine answered after the run's time was up
// gave up and failed its run. The signal is sent whole, and the node thawed at once.
func TestPauseNodeFinishesASignalTheRunsEndMeets(t *testing.T) {
	f := newFake(1, 3)
	env := f.env()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env.Nodes = slowEngine{fakeNodes{f}, cancel}
	if err := (pauseNode{}).Run(ctx, env); err != nil {
		t.Fatalf("a pause whose signal met the run's end: %v", err)
	}
	got := f.did()
	if len(got) != 2 || !strings.HasSuffix(got[0], " SIGSTOP") || got[1] != strings.TrimSuffix(got[0], "STOP")+"CONT" {
		t.Errorf("actions %q, want one node stopped and continued", got)
	}
	if faults := f.faults(); len(faults) != 1 || !faults[0].Healed {
		t.Errorf("faults %+v, want one, healed", faults)
	}
}

func TestSchedulesAreSeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func() []string {
			f := newFake(5, 5)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			pauseNode{}.Run(ctx, f.env())
			var targets []string
			for _, fl := range f.faults() {
				targets = append(targets, fl.Targets...)
			}
			return targets[:min(3, len(targets))]
		}
		a, b := run(), run()
		if len(a) < 3 || !slices.Equal(a, b) {
			t.Fatalf("same seed, different schedules: %q vs %q", a, b)
		}
	})
}

func TestPartitionShapes(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	rng := rand.New(rand.NewSource(1))
	heard := func(g grudge, node string) int { return len(nodes) - len(g[node]) }
	g := shapes[history.PartitionIsolateOne](nodes, nil, rng)
	if len(g) != 5 || !slices.ContainsFunc(nodes, func(n string) bool { return len(g[n]) == 4 }) {
		t.Errorf("isolate-one %s", g)
	}
	g = shapes[history.PartitionHalves](nodes, nil, rng)
	if small := slices.IndexFunc(nodes, func(n string) bool { return len(g[n]) == 3 }); small < 0 {
		t.Errorf("halves %s", g)
	}
	g = shapes[history.PartitionMajoritiesRing](nodes, nil, rng)
	for _, n := range nodes {
		if heard(g, n) != 3 {
			t.Errorf("majorities-ring: %s hears %d nodes (itself included), want 3: %s", n, heard(g, n), g)
		}
	}
	g = shapes[history.PartitionBridge](nodes, nil, rng)
	if bridges := slices.IndexFunc(nodes, func(n string) bool { return len(g[n]) == 0 }); bridges < 0 || len(g) != 4 {
		t.Errorf("bridge %s", g)
	}
	g = shapes[history.PartitionClientsFrom](nodes, nil, rng)
	if len(g) != 2 || g[g.targets()[0]][0] != Clients {
		t.Errorf("clients-from must cut a minority off the clients: %s", g)
	}
}

// kill-client kills the client that has waited longest for the lock, and records the
// crash as a moment.
func TestKillClientKillsTheLongestWaiter(t *testing.T) {
	f := newFake(3, 1)
	env := f.env()
	env.Interval = time.Hour // no kill until the events are in
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- killClient{}.Run(ctx, env) }()
	events := []history.Event{
		{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: 10},
		{Type: history.Invoke, Process: 2, Func: history.Acquire, Time: 5},
		{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: 1},
		{Type: history.OK, Process: 1, Func: history.Acquire, Time: 12},
	}
	w := watch(nil) // the watcher's account, which kill-client aims by
	for _, e := range events {
		f.events <- e
		w.follow(e)
	}
	if victim, ok := longestWaiting(w.waiting); !ok || victim != 2 {
		t.Fatalf("longest waiter %d, %v; want 2", victim, ok)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	env.Interval = time.Millisecond
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- killClient{}.Run(ctx, env) }()
	f.events <- history.Event{Type: history.Invoke, Process: 2, Func: history.Acquire, Time: 5}
	waitFor(t, "a kill", func() bool { return len(f.faults()) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fl := f.faults()[0]
	if fl.Description != "kill-client" || !fl.Healed || fl.Stop < fl.Start {
		t.Errorf("fault %+v: want a healed kill-client", fl)
	}
	if got := f.did(); !strings.HasSuffix(got[0], "KILLED") {
		t.Errorf("actions %q: want a SIGKILL first", got)
	}
}

func TestPartitionCutsAndHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(1, 3)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := (partition{history.PartitionClientsFrom}).Run(ctx, f.env()); err != nil {
			t.Fatal(err)
		}
		got := f.did()
		if len(got) < 2 || !strings.HasSuffix(got[0], "drops gw") || got[1] != "heal network" || got[len(got)-1] != "heal network" {
			t.Fatalf("actions %q", got)
		}
		for _, fl := range f.faults() {
			if !fl.Healed {
				t.Errorf("fault %+v not healed", fl)
			}
		}
	})
}

// A clock moved forward past the end of a held lease that the node granted is the clock
// faults' hazard; a lease the move leaves time to, a move back, or a grant by other nodes
// is not.
func TestClockFaultRecordsAJumpPastAHeldLease(t *testing.T) {
	tests := []struct {
		name   string
		ttl    time.Duration
		offset time.Duration
		nodes  string // the grant's nodes
		want   int
	}{
		{"a jump past the lease", 2 * time.Second, 4 * time.Second, "", 1},
		{"a jump past the lease of a grant naming the node", 2 * time.Second, 4 * time.Second, "n1,n2,n3", 1},
		{"a jump within the lease", time.Hour, 4 * time.Second, "", 0},
		{"a jump back", 2 * time.Second, -4 * time.Second, "", 0},
		{"a grant by other nodes", 2 * time.Second, 4 * time.Second, "n1,n3,n4", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(1, 5)
			env := f.env()
			env.TTL, env.Pause = tt.ttl, time.Millisecond
			w := watch(f.events)
			now := history.Now()
			f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now}
			f.events <- history.Event{Index: 3, Type: history.OK, Process: 0, Func: history.Acquire, Time: now,
				Detail: map[string]string{"nodes": tt.nodes}}
			w.next(context.Background(), nil)
			w.next(context.Background(), nil)
			if err := skewClock(context.Background(), env, w, f, history.ClockBump, "n2", tt.offset); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			hazards := history.Hazards(f.recorded)
			f.mu.Unlock()
			if len(hazards) != tt.want {
				t.Fatalf("hazards %+v, want %d", hazards, tt.want)
			}
			if tt.want > 0 && (hazards[0].Hazard != history.ClockPastLease || hazards[0].Detail["grant"] != "worker-0 #3" ||
				hazards[0].Detail["moved"] != "+4.000" || !slices.Equal(hazards[0].Targets, []string{"n2", "worker-0"})) {
				t.Errorf("hazard %+v: want n2 moved 4s past worker-0's grant #3", hazards[0])
			}
		})
	}
}

func TestClockFaultsMoveOneClockAndPutItBack(t *testing.T) {
	for _, mode := range clockModes {
		t.Run(mode.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(1, 3)
				env := f.env()
				env.Pause = 350 * time.Millisecond
				if err := skewClock(context.Background(), env, watch(f.events), f, mode, "n2", 4*time.Second); err != nil {
					t.Fatal(err)
				}
				f.mu.Lock()
				start, stop := f.recorded[0], f.recorded[len(f.recorded)-1]
				f.mu.Unlock()
				if stop.Detail["offset"] != "+0.000" || stop.Detail["furthest"] == "+0.000" || start.Detail["offset"] == "" {
					t.Errorf("history does not keep the offsets: start %v stop %v", start.Detail, stop.Detail)
				}
				got := f.did()
				if got[len(got)-1] != "clock n2 +0.000" {
					t.Fatalf("clock not put back: %q", got)
				}
				switch mode {
				case history.ClockBump:
					if got[0] != "clock n2 +4.000" || len(got) != 2 {
						t.Errorf("bump: %q", got)
					}
				case history.ClockStrobe:
					if !slices.Contains(got[1:], "clock n2 +0.000") || !slices.Contains(got[1:], "clock n2 +4.000") {
						t.Errorf("strobe never flipped: %q", got)
					}
				case history.ClockRate:
					if !slices.Contains(got, "clock n2 +0.200") {
						t.Errorf("rate x2 never got 0.2s ahead: %q", got)
					}
				}
			})
		})
	}
}

// Client 1 (p0) is granted the lock by the majority while D and E are cut off; it is kept
// in its critical section while C's clock jumps and the cut heals, until client 2 (p1) has
// taken the lock and used the storage, or its lease ends.
func TestKleppmannClockStagesTheScenario(t *testing.T) {
	tests := []struct {
		name     string
		validity string // what client 1's grant says of its lease
		takeover bool
	}{
		{"thawed when client 2 has the lock", "1h", true},
		{"thawed when client 1's lease ends", "1ms", false},
		{"a grant that states no lease holds a TTL from its attempt", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2, 5)
			env := f.env()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error)
			go func() { done <- kleppmannClock{}.Run(ctx, env) }()
			// Wait for the cut, then let client 1 be granted the lock by the majority alone.
			waitFor(t, "the cut", func() bool { return slices.Contains(f.did(), "n5 drops gw") })
			time.Sleep(5 * time.Millisecond) // past the cut plus the (1ms) TTL
			grant := history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: history.Now()}
			if tt.validity != "" {
				grant.Detail = map[string]string{history.Validity: tt.validity}
			}
			f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: history.Now()}
			f.events <- grant
			waitFor(t, "the heal", func() bool { return slices.Contains(f.did(), "heal network") })
			if tt.takeover {
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Write, Time: history.Now()}
			}
			waitFor(t, "client 1 thawed", func() bool { return slices.Contains(f.did(), "worker-0 CONTINUED") })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// The clock jump and the heal happen together, in either order.
			got := f.did()
			if len(got) == 7 && got[3] == "heal network" {
				got[3], got[4] = got[4], got[3]
			}
			want := []string{"n4 drops gw", "n5 drops gw", "worker-0 STOPPED (SIGNAL)", "clock n3 +4.000", "heal network",
				"worker-0 CONTINUED", "clock n3 +0.000"}
			if !slices.Equal(got, want) {
				t.Fatalf("actions %q, want %q", got, want)
			}
			for _, fl := range f.faults() {
				if !fl.Healed {
					t.Errorf("fault %+v not healed", fl)
				}
			}
		})
	}
}

func TestComposedNemesesRunSideBySide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(2, 3)
		n, err := New([]string{"pause-node", "partition-clients-from"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := n.Run(ctx, f.env()); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for _, fl := range f.faults() {
			kinds[strings.Fields(fl.Description)[0]] = true
			if !fl.Healed {
				t.Errorf("fault %+v not healed", fl)
			}
		}
		if !kinds["pause-node"] || !kinds["partition-clients-from"] {
			t.Fatalf("faults by kind %v: want both nemeses to act", kinds)
		}
	})
}

func TestAFailingNemesisStopsTheOthers(t *testing.T) {
	f := newFake(2, 3)
	env := f.env()
	env.Nodes = nodesOnly{f} // no clocks: the clock nemesis fails at once
	n, _ := New([]string{"pause-client", "clock"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := n.Run(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "cannot move its nodes' clocks") {
		t.Fatalf("got %v, want the clock nemesis's error", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Run ended with its context: the failure did not stop pause-client")
	}
}

// nodesOnly is a cluster with no capabilities beyond naming and signalling its nodes.
type nodesOnly struct{ f *fake }

func (n nodesOnly) Names() []string { return n.f.nodes }
func (n nodesOnly) Signal(_ context.Context, node string, sig syscall.Signal) error {
	return n.f.SignalNode(node, sig)
}

// waitFor polls cond and fails t if it never holds; the deadline only matters when
// something is broken.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// electing is a cluster between leaders: no node leads until the election ends.
type electing struct {
	fakeNodes
	mu       sync.Mutex
	asked    int
	electIn  int // how many askings the election lasts; -1: forever
	isLeader string
}

func (e *electing) Leader(context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked++
	if e.electIn < 0 || e.asked <= e.electIn {
		return "", errors.New("no node says it leads")
	}
	return e.isLeader, nil
}

// partition-leader waits out an election for the node it isolates, and injects nothing,
// without failing the run, while no leader answers.
func TestPartitionLeaderWaitsOutAnElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, electIn := range []int{3, -1} {
			f := newFake(1, 3)
			env := f.env()
			env.Pause = time.Second // the election is over in 3 askings, well within a pause
			env.Nodes = &electing{fakeNodes: fakeNodes{f}, electIn: electIn, isLeader: "n2"}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- partition{history.PartitionLeader}.Run(ctx, env) }()
			if electIn > 0 {
				waitFor(t, "the leader cut off", func() bool { return slices.Contains(f.did(), "n2 drops ip-n1,ip-n3") })
			} else {
				waitFor(t, "a few askings", func() bool {
					e := env.Nodes.(*electing)
					e.mu.Lock()
					defer e.mu.Unlock()
					return e.asked > 5
				})
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("election lasting %d askings: %v, want no error", electIn, err)
			}
			if electIn < 0 && len(f.did()) > 0 {
				t.Errorf("with no leader: actions %q, want none", f.did())
			}
		}
	})
}

// A run whose arming failed is healed before any worker started: every nemesis's Heal
// copes with an env that has no workers yet.
func TestHealBeforeTheWorkersStart(t *testing.T) {
	f := newFake(2, 3)
	env := f.env()
	env.Workers = nil
	nem, err := New(Names())
	if err != nil {
		t.Fatal(err)
	}
	if err := nem.Heal(t.Context(), env); err != nil {
		t.Logf("heal: %v", err) // levers the fake lacks; what matters is that nothing panics
	}
	if !slices.Contains(f.did(), "heal network") {
		t.Errorf("actions %q: want the network healed all the same", f.did())
	}
}

// The clock faults' danger made real (clock-served) is an answer to another client by the
// node whose clock is past a held lease, while that lease still runs: a grant naming the
// node (any grant, when grants do not name their nodes), a busy answer whose attempt lies in
// the move, or, on a queue lock, an acquire kept waiting through the move until the holder
// released. An answer by other nodes, after the clock was put back, or after the lease is
// none, and so is a polling client's wait (its attempts may have gone unanswered).
func TestClockServedIsAnAnswerByTheMovedNodeWithinTheLease(t *testing.T) {
	type step struct {
		reset  bool // put the clock back first
		events func(now int64) []history.Event
	}
	busy := func(now int64) []history.Event {
		return []history.Event{{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now},
			{Type: history.Fail, Process: 1, Func: history.Acquire, Error: history.ErrLockBusy, Time: now + 2, EffectFrom: now + 1, EffectTo: now + 2}}
	}
	grantBy := func(nodes string) func(now int64) []history.Event {
		return func(now int64) []history.Event {
			return []history.Event{{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now},
				{Index: 9, Type: history.OK, Process: 1, Func: history.Acquire, Time: now + 1, Detail: map[string]string{"nodes": nodes}}}
		}
	}
	waiter := []history.Event{{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}}
	releaseStep := step{events: func(now int64) []history.Event {
		return []history.Event{{Type: history.Invoke, Process: 0, Func: history.Release, Time: now}}
	}}
	tests := []struct {
		name    string
		nodes   string        // the held grant's nodes
		granted time.Duration // how long ago the held grant was made
		before  []history.Event
		then    step
		want    string // the served hazard's answer; "" for none
	}{
		{"refused as busy", "", 0, nil, step{events: busy}, "refused it as busy"},
		{"granted again by the node", "n1,n2,n3", 0, nil, step{events: grantBy("n2,n4,n5")}, "granted worker-1 #9"},
		{"granted by other nodes", "n1,n2,n3", 0, nil, step{events: grantBy("n1,n4,n5")}, ""},
		{"answered after the clock was put back", "", 0, nil, step{reset: true, events: busy}, ""},
		{"answered after the lease", "", 3 * time.Second, nil, step{events: busy}, ""},
		{"refused as busy, heard of after the release", "", 0, nil, step{events: func(now int64) []history.Event {
			return []history.Event{{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now},
				{Type: history.Invoke, Process: 0, Func: history.Release, Time: now + 5},
				{Type: history.Fail, Process: 1, Func: history.Acquire, Error: history.ErrLockBusy, Time: now + 10, EffectFrom: now + 1, EffectTo: now + 2}}
		}}, "refused it as busy"},
		{"refused as busy after the release", "", 0, nil, step{events: func(now int64) []history.Event {
			return []history.Event{{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now},
				{Type: history.Invoke, Process: 0, Func: history.Release, Time: now + 5},
				{Type: history.Fail, Process: 1, Func: history.Acquire, Error: history.ErrLockBusy, Time: now + 10, EffectFrom: now + 6, EffectTo: now + 7}}
		}}, ""},
		{"a run of busy answers through the move", "", 0, waiter, step{events: func(now int64) []history.Event {
			return []history.Event{{Type: history.Fail, Process: 1, Func: history.Acquire, Error: history.ErrLockBusy, Time: now + 4e6,
				EffectFrom: now - 1e9, EffectTo: now + 3e6, Detail: map[string]string{history.BusyEvery: "1ms"}}}
		}}, "refused it as busy"},
		{"a run of busy answers that ends as the move begins", "", 0, waiter, step{events: func(now int64) []history.Event {
			return []history.Event{{Type: history.Fail, Process: 1, Func: history.Acquire, Error: history.ErrLockBusy, Time: now + 4e6,
				EffectFrom: now - 1e9, EffectTo: now, Detail: map[string]string{history.BusyEvery: "1s"}}}
		}}, ""},
		{"granted after the release, refused as busy before it", "", 0, waiter, step{events: func(now int64) []history.Event {
			return []history.Event{{Type: history.Invoke, Process: 0, Func: history.Release, Time: now + 2e6},
				{Index: 9, Type: history.OK, Process: 1, Func: history.Acquire, Time: now + 5e6,
					EffectFrom: now + 4e6, Detail: map[string]string{history.BusyEvery: "500us"}}}
		}}, "refused it as busy"},
		{"kept waiting in the queue until the release", "", 0, waiter, releaseStep, "kept it waiting"},
		{"a polling client waiting until the release", "", 0, waiter, releaseStep, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2, 5)
			env := f.env()
			env.TTL = 2 * time.Second
			env.QueueLock = strings.Contains(tt.name, "queue")
			w := watch(f.events)
			follow := func(events []history.Event) {
				for _, e := range events {
					f.events <- e
					w.next(context.Background(), nil)
				}
			}
			granted := history.Now() - tt.granted.Nanoseconds()
			follow(append(slices.Clone(tt.before),
				history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: granted},
				history.Event{Index: 3, Type: history.OK, Process: 0, Func: history.Acquire, Time: granted, Detail: map[string]string{"nodes": tt.nodes}}))
			m := clockMoves{node: "n2"}
			m.set(env, w, "clock-bump +4s", 4*time.Second)
			if tt.then.reset {
				m.set(env, w, "clock-bump +4s", 0)
			}
			follow(tt.then.events(history.Now()))
			f.mu.Lock()
			var served []history.Occurrence
			for _, h := range history.Hazards(f.recorded) {
				if h.Hazard == history.ClockServed {
					served = append(served, h)
				}
			}
			f.mu.Unlock()
			switch {
			case tt.want == "" && len(served) > 0:
				t.Errorf("served %+v: want none", served)
			case tt.want != "" && (len(served) != 1 || served[0].Detail["answer"] != tt.want ||
				!slices.Equal(served[0].Targets, []string{"n2", "worker-0", "worker-1"})):
				t.Errorf("served %+v: want n2 answered worker-1 %q while worker-0 held", served, tt.want)
			}
		})
	}
}

// selfStopping is the fake's workers, able to stop themselves when armed (SelfStoppers):
// the test stops one by sending it on stopped.
type selfStopping struct {
	*fake
	stopped chan SelfStop
}

func (s selfStopping) ArmStop() (<-chan SelfStop, func()) {
	s.act("arm")
	return s.stopped, func() { s.act("disarm") }
}

// Directed faults arm the workers and take the first to stop itself after its read as it
// is: no SIGSTOP of their own, the pause recorded from when it stopped, and thawed as any.
// A worker that stopped itself without holding the lock (by the history) is let go and the
// workers armed again.
func TestADirectedPauseTakesTheWorkerThatStoppedItself(t *testing.T) {
	f := newFake(3, 1)
	env := f.env()
	workers := selfStopping{f, make(chan SelfStop)}
	env.Workers, env.TTL = workers, time.Hour // only the takeover ends the pause
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error)
	go func() { done <- pauseHolder{}.Run(ctx, env) }()
	waitFor(t, "the arming", func() bool { return slices.Contains(f.did(), "arm") })
	workers.stopped <- SelfStop{Process: 2, At: history.Now()} // holds nothing
	waitFor(t, "the second arming", func() bool { return len(f.did()) >= 3 })
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: history.Now()}
	stoppedAt := history.Now()
	workers.stopped <- SelfStop{Process: 1, At: stoppedAt}
	waitFor(t, "the pause", func() bool { return len(f.faults()) > 0 })
	f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Read, Time: history.Now()}
	waitFor(t, "the pause to be healed", func() bool { return f.faults()[0].Healed })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"arm", "worker-2 CONTINUED", "disarm", "arm", "disarm", "worker-1 CONTINUED"}
	if got := f.did(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("actions %q, want first %q", got, want)
	}
	if fl := f.faults()[0]; fl.Targets[0] != "worker-1" || fl.Start != stoppedAt {
		t.Errorf("fault %+v: want worker-1's pause from when it stopped itself (%d)", fl, stoppedAt)
	}
}

// Directed, clock-bump keeps the holder inside its lease while the node that granted it
// jumps past that lease, lets the holder go once another client has taken the lock over
// and used the storage, and puts the clock back; the node's grant meanwhile is the hazard
// made real (clock-served).
func TestDirectedClockBumpJumpsTheHoldersNodeWithinItsLease(t *testing.T) {
	f := newFake(2, 1)
	env := f.env()
	env.TTL, env.ClockOffset = time.Hour, 2*time.Hour // only the takeover ends the pause
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- clockFault{history.ClockBump}.Run(ctx, env) }()
	now := history.Now()
	f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now}
	f.events <- history.Event{Index: 1, Type: history.OK, Process: 0, Func: history.Acquire, Time: now}
	f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Read, Time: now}
	waitFor(t, "the clock moved", func() bool { return slices.Contains(f.did(), "clock n1 +7200.000") })
	f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 5, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Write, Time: history.Now()}
	waitFor(t, "the holder let go", func() bool { return slices.Contains(f.did(), "worker-0 CONTINUED") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"worker-0 STOPPED (SIGNAL)", "clock n1 +7200.000", "worker-0 CONTINUED", "clock n1 +0.000"}
	if got := f.did(); !slices.Equal(got[:min(len(got), len(want))], want) {
		t.Errorf("actions %q, want %q first", got, want)
	}
	f.mu.Lock()
	counts := history.CountHazards(f.recorded)
	f.mu.Unlock()
	if counts[history.ClockPastLease] != 1 || counts[history.ClockServed] != 1 {
		t.Errorf("hazards %v: want the lease outrun and then served", counts)
	}
}

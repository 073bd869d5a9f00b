package nemesis

import (
	"context"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// crashable is the recording fake with servers that can be killed and restarted, and
// roles: n1 is the primary; when the primary is killed, the lowest-named live replica is
// promoted, and a node started again comes back a replica.
type crashable struct {
	fakeNodes
	mu    sync.Mutex
	roles map[string]system.Role
}

func newCrashable(f *fake) *crashable {
	c := &crashable{fakeNodes: fakeNodes{f}, roles: map[string]system.Role{}}
	for i, n := range f.nodes {
		c.roles[n] = system.Replica
		if i == 0 {
			c.roles[n] = system.Primary
		}
	}
	return c
}

func (c *crashable) Kill(_ context.Context, node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	wasPrimary := c.roles[node] == system.Primary
	c.roles[node] = system.Down
	for _, n := range c.nodes {
		if wasPrimary && c.roles[n] == system.Replica {
			c.roles[n], wasPrimary = system.Primary, false
		}
	}
	return c.act("kill %s", node)
}

func (c *crashable) Restart(_ context.Context, node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roles[node] = system.Replica
	return c.act("restart %s", node)
}

func (c *crashable) RestartKilled(ctx context.Context) error {
	for _, n := range c.nodes {
		if c.role(n) == system.Down {
			c.Restart(ctx, n)
		}
	}
	return nil
}

func (c *crashable) Roles(context.Context) (map[string]system.Role, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.roles), nil
}

func (c *crashable) role(node string) system.Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roles[node]
}

func (f *fake) crashEnv() (Env, *crashable) {
	env := f.env()
	c := newCrashable(f)
	env.Nodes, env.RestartAfter = c, 20*time.Millisecond
	return env, c
}

func TestCrashFaultsSayWhereTheyApply(t *testing.T) {
	tests := []struct {
		names  []string
		system string
		needs  Needs
		want   string // "" when available
	}{
		{[]string{"kill-node"}, "redlock", Needs{Restarts: true}, ""},
		{[]string{"kill-node"}, "zookeeper", Needs{Restarts: true}, ""},
		{[]string{"kill-node"}, "local", Needs{Restarts: true}, "served by the harness itself"},
		{[]string{"failover"}, "sentinel", Needs{Network: true, Restarts: true}, ""},
		{[]string{"failover"}, "redis", Needs{Network: true, Restarts: true}, "has no primary and replicas (try --system sentinel)"},
		{[]string{"partition-primary"}, "sentinel", Needs{Network: true, ClientAddrs: true}, ""},
		{[]string{"partition-primary"}, "zookeeper", Needs{Network: true, ClientAddrs: true}, "has no primary"},
	}
	for _, tt := range tests {
		n, err := New(tt.names)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Needs(); got != tt.needs {
			t.Errorf("%v needs %+v, want %+v", tt.names, got, tt.needs)
		}
		sys, _ := system.Lookup(tt.system)
		err = n.Available(sys, sys.Sizes.Default)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v on %s: %v, want available", tt.names, tt.system, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v on %s: %v, want %q", tt.names, tt.system, err, tt.want)
		}
	}
}

// A crash records the node's role, and the node is started again.
func TestCrashKillsRecordsAndRestarts(t *testing.T) {
	f := newFake(1, 3)
	env, c := f.crashEnv()
	if err := crash(context.Background(), env, c, "n1", nil, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := f.did(), []string{"kill n1", "restart n1"}; !slices.Equal(got, want) {
		t.Fatalf("actions %q, want %q", got, want)
	}
	f.mu.Lock()
	start := f.recorded[0]
	f.mu.Unlock()
	if start.Fault != "kill-node" || start.Detail["role"] != "primary" || start.Detail["restart-after"] != "20ms" {
		t.Errorf("start %+v: want kill-node of the primary, restarted after 20ms", start)
	}
	if fl := f.faults(); len(fl) != 1 || !fl[0].Healed || fl[0].Targets[0] != "n1" {
		t.Errorf("faults %+v: want one healed kill of n1", fl)
	}
}

// A killed node stays down for its whole time, past the end of the run (a cancelled
// context), until an interrupt (Halt).
func TestCrashStaysDownPastTheRunButNotPastAnInterrupt(t *testing.T) {
	f := newFake(1, 3)
	env, c := f.crashEnv()
	env.RestartAfter = time.Hour
	halt := make(chan struct{})
	env.Halt = halt
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error)
	go func() { done <- crash(ended, env, c, "n2", nil, 0) }()
	waitFor(t, "the kill", func() bool { return len(f.faults()) == 1 })
	if got := f.did(); !slices.Equal(got, []string{"kill n2"}) {
		t.Fatalf("actions %q: want n2 still down when the run has ended", got)
	}
	close(halt)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.did(); !slices.Equal(got, []string{"kill n2", "restart n2"}) {
		t.Errorf("actions %q: want n2 started again on the interrupt", got)
	}
}

// While a client holds a lock granted by named nodes, kill-node aims at one of them that
// still has the key: not killed since the grant.
func TestKillNodeAimsAtTheHoldersNodes(t *testing.T) {
	events := make(chan history.Event, 4)
	w := watch(events)
	next := func(e history.Event) {
		events <- e
		w.next(context.Background(), nil)
	}
	killed := map[string]int64{"n4": 3, "n1": 5}
	next(history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: 2, Detail: map[string]string{"nodes": "n1,n2,n3"}})
	next(history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: 4, Detail: map[string]string{"nodes": "n3,n4,n5"}})
	if grant, got := w.holderNodes(killed); !slices.Equal(got, []string{"n3", "n4", "n5"}) || grant.Process != 1 {
		t.Errorf("holder's nodes %q, want the latest grant's (n4 was killed before it)", got)
	}
	next(history.Event{Type: history.Invoke, Process: 1, Func: history.Release, Time: 5})
	if _, got := w.holderNodes(killed); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Errorf("holder's nodes %q after process 1 released, want process 0's but n1, killed since", got)
	}
	next(history.Event{Type: history.Invoke, Process: 0, Func: history.Release, Time: 6})
	if grant, got := w.holderNodes(killed); got != nil || grant.Time != 0 {
		t.Errorf("holder's nodes %q with nobody holding, want none", got)
	}
}

func TestUndirectedKillNodeKillsOnAScheduleAndHealRestarts(t *testing.T) {
	f := newFake(1, 3)
	env, c := f.crashEnv()
	env.Undirected = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- killNode{}.Run(ctx, env) }()
	waitFor(t, "two crashes", func() bool { return len(f.faults()) >= 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, fl := range f.faults() {
		if !fl.Healed || !strings.HasPrefix(fl.Description, "kill-node") {
			t.Errorf("fault %+v: want a healed kill-node", fl)
		}
	}
	if err := c.Kill(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	if err := (killNode{}).Heal(context.Background(), env); err != nil || c.role("n2") == system.Down {
		t.Errorf("heal: %v, n2 %s; want it started again", err, c.role("n2"))
	}
}

// Directed, kill-node waits for a holder that has read, keeps it in its critical section
// within its lease, and meanwhile kills and restarts as many of its grant's nodes as another
// client needs for a majority; the crashes under the held grant are its hazard, and so is
// each node back while the lease still runs. The pause ends when another client has taken
// the lock over.
func TestDirectedKillNodeCrashesTheHoldersMajorityInItsLease(t *testing.T) {
	f := newFake(2, 5)
	env, _ := f.crashEnv()
	env.TTL = time.Hour // only the takeover ends the pause
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- killNode{}.Run(ctx, env) }()
	now := history.Now()
	f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now}
	f.events <- history.Event{Index: 7, Type: history.OK, Process: 0, Func: history.Acquire, Time: now,
		Detail: map[string]string{"nodes": "n1,n2,n3,n4"}}
	f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Read, Time: now}
	waitFor(t, "two nodes back", func() bool { return len(f.did()) >= 5 })
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Write, Time: history.Now()}
	waitFor(t, "the holder thawed", func() bool { return slices.Contains(f.did(), "worker-0 CONTINUED") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := f.did()
	if got[0] != "worker-0 STOPPED (SIGNAL)" || got[len(got)-1] != "worker-0 CONTINUED" {
		t.Fatalf("actions %q: want the holder stopped first and thawed last", got)
	}
	var killed []string
	for _, a := range got {
		if node, ok := strings.CutPrefix(a, "kill "); ok {
			killed = append(killed, node)
			if !slices.Contains(got, "restart "+node) || !slices.Contains([]string{"n1", "n2", "n3", "n4"}, node) {
				t.Errorf("killed %s: want a node of the grant, restarted", node)
			}
		}
	}
	// A majority of 5 is 3; the grant left n5 free, so two of its nodes must go.
	if len(killed) != 2 {
		t.Errorf("killed %q, want 2 of the grant's nodes", killed)
	}
	f.mu.Lock()
	counts := history.CountHazards(f.recorded)
	var crashed history.Event
	for _, e := range f.recorded {
		if e.Hazard == history.CrashUnderGrant {
			crashed = e
		}
	}
	f.mu.Unlock()
	if counts[history.CrashUnderGrant] != 2 || counts[history.RestartInLease] != 2 {
		t.Errorf("hazards %v, want 2 crashes under the grant and 2 restarts within its lease", counts)
	}
	if crashed.Detail["grant"] != "worker-0 #7" || crashed.Targets[1] != "worker-0" {
		t.Errorf("crash hazard %+v: want it to name worker-0's grant #7", crashed)
	}
}

func TestVictimsAreAsManyAsAnotherMajorityNeeds(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	tests := []struct {
		granted string
		want    int
	}{
		{"n1,n2,n3,n4,n5", 3},
		{"n1,n2,n3", 1},
		{"n2,n3,n4,n5", 2},
		{"", 1}, // a grant that does not name its nodes: one node
	}
	for _, tt := range tests {
		grant := history.Event{Detail: map[string]string{"nodes": tt.granted}}
		got := victims(grant, nodes, rng)
		if len(got) != tt.want {
			t.Errorf("grant by %q: victims %q, want %d", tt.granted, got, tt.want)
		}
		for _, v := range got {
			if tt.granted != "" && !strings.Contains(tt.granted, v) {
				t.Errorf("grant by %q: victim %s did not grant it", tt.granted, v)
			}
		}
	}
}

// promoting is a crashable cluster whose monitors can be told to promote a replica.
type promoting struct{ *crashable }

func (p promoting) Promote(context.Context) error { return p.act("promote") }

// recordedOf is the first recorded event of f (start, stop, hazard) by fault, or the zero
// event.
func (f *fake) recordedOf(fn history.Func, fault string) history.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.recorded {
		if e.Func == fn && e.Fault == fault {
			return e
		}
	}
	return history.Event{}
}

// The failover cuts replication both ways, kills the primary right after a grant whose
// acquire began after the cut, heals the cut once a replica is promoted, and starts the old
// primary again; its stop names the new primary and the client whose grant was lost, and
// the grant still held at the promotion is its hazard. Directed, the holder is kept in its
// critical section from the crash until another client has taken the lock over, and the
// monitors are told to promote at once.
func TestFailoverCutsKillsPromotesAndHeals(t *testing.T) {
	cut := []string{"n1 drops ip-n2,ip-n3", "n2 drops ip-n1", "n3 drops ip-n1"}
	tests := []struct {
		name       string
		undirected bool
		want       []string
	}{
		{"undirected", true, slices.Concat(cut, []string{"kill n1", "heal network", "restart n1"})},
		{"directed", false, slices.Concat(cut, []string{"worker-1 STOPPED (SIGNAL)", "kill n1", "promote", "worker-1 CONTINUED",
			"heal network", "restart n1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2, 3)
			env, c := f.crashEnv()
			env.Nodes, env.Undirected = promoting{c}, tt.undirected
			env.TTL = time.Minute // the grant below arrives whenever the test gets to send it
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- (&failover{}).Run(ctx, env) }()
			waitFor(t, "the cut", func() bool { return len(f.faults()) > 0 })
			// Process 2's acquire began before the cut: its key may have reached the replicas,
			// and losing it is not what this fault stages. Process 1's began after it.
			f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Type: history.Invoke, Process: 2, Func: history.Release, Time: history.Now()}
			f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Index: 4, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
			if !tt.undirected {
				waitFor(t, "the promotion", func() bool { return slices.Contains(f.did(), "promote") })
				f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: history.Now()}
				f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Read, Time: history.Now()}
			}
			waitFor(t, "the failover to end", func() bool { return f.recordedOf(history.Stop, "failover").Time != 0 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := f.did(); len(got) < len(tt.want) || !slices.Equal(got[:len(tt.want)], tt.want) {
				t.Fatalf("actions %q, want first %q", got, tt.want)
			}
			start, stop, hazard := f.recordedOf(history.Start, "failover"), f.recordedOf(history.Stop, "failover"), f.recordedOf(history.HazardFunc, "failover")
			if start.Detail["primary"] != "n1" || stop.Detail["primary"] != "n2" || stop.Detail["grant"] != "worker-1" {
				t.Errorf("start %v, stop %v: want primary n1 then n2, the grant lost worker-1's", start.Detail, stop.Detail)
			}
			if hazard.Hazard != history.GrantLost || hazard.Detail["grant"] != "worker-1 #4" || hazard.Detail["new primary"] != "n2" {
				t.Errorf("hazard %+v: want worker-1's grant #4 lost to n2", hazard)
			}
		})
	}
}

// Armed, the failover cuts replication before the clients start, and the first grant the
// clients then get is the one lost: also when it came before Run, between the two.
func TestArmedFailoverLosesTheFirstGrant(t *testing.T) {
	f := newFake(2, 3)
	env, _ := f.crashEnv()
	env.TTL, env.Undirected = time.Minute, true // the grant below arrives whenever the test gets to send it
	nem, err := New([]string{"failover"})
	if err != nil {
		t.Fatal(err)
	}
	if err := nem.(Armer).Arm(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got, want := f.did(), []string{"n1 drops ip-n2,ip-n3", "n2 drops ip-n1", "n3 drops ip-n1"}; !slices.Equal(got, want) {
		t.Fatalf("armed: actions %q, want only the cut %q", got, want)
	}
	f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- nem.Run(ctx, env) }()
	waitFor(t, "the failover to end", func() bool { return f.faults()[0].Healed })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.did(); len(got) < 5 || !slices.Equal(got[3:5], []string{"kill n1", "heal network"}) {
		t.Fatalf("actions %q: want the cut once, then n1 killed", got)
	}
	if stop := f.recordedOf(history.Stop, "failover"); stop.Detail["grant"] != "worker-1" {
		t.Errorf("stop %v: want worker-1's grant, the first, lost", stop.Detail)
	}
}

// Without a grant (a primary that refuses writes its replicas have not acknowledged), the
// primary is killed all the same, and the stop says no grant was lost.
func TestFailoverWithoutAGrantStillFailsOver(t *testing.T) {
	f := newFake(2, 3)
	env, _ := f.crashEnv()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- (&failover{}).Run(ctx, env) }()
	waitFor(t, "the failover to end", func() bool { fl := f.faults(); return len(fl) > 0 && fl[0].Healed })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stop := f.recordedOf(history.Stop, "failover")
	if stop.Detail["grant"] != "none" || stop.Detail["primary"] != "n2" {
		t.Errorf("stop %v: want no grant lost and n2 promoted", stop.Detail)
	}
}

// Roles are recorded when the watch starts and when they change, not otherwise.
func TestWatchRolesRecordsChangesOnly(t *testing.T) {
	f := newFake(1, 3)
	env, c := f.crashEnv()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { WatchRoles(ctx, env, time.Millisecond); close(done) }()
	roles := func() []history.Event {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Clone(f.recorded)
	}
	waitFor(t, "the first roles", func() bool { return len(roles()) == 1 })
	c.Kill(ctx, "n1")
	waitFor(t, "the change", func() bool { return len(roles()) == 2 })
	cancel()
	<-done
	got := roles()
	if len(got) != 2 {
		t.Fatalf("%d roles events, want 2: %+v", len(got), got)
	}
	first, second := got[0], got[1]
	if first.Func != history.Roles || first.Process != history.NemesisProcess || first.Detail["n1"] != "primary" || len(first.Targets) != 3 {
		t.Errorf("first %+v: want every node's role, n1 primary", first)
	}
	if !slices.Equal(second.Targets, []string{"n1", "n2"}) || second.Detail["n1"] != "down" || second.Detail["n2"] != "primary" {
		t.Errorf("second %+v: want n1 down and n2 promoted, named as changed", second)
	}
}

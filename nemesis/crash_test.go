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

func (c *crashable) Crash(ctx context.Context, node string) error { return c.Kill(ctx, node) }

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
		n := checkAvailable(t, tt.names, tt.system, 0, tt.want)
		if got := n.Needs(); got != tt.needs {
			t.Errorf("%v needs %+v, want %+v", tt.names, got, tt.needs)
		}
	}
}

// A crash records the node's role, and the node is started again.
func TestCrashKillsRecordsAndRestarts(t *testing.T) {
	f := newFake(1, 3)
	env, c := f.crashEnv()
	if err := crash(context.Background(), env, c, killing, "n1", nil, 0, nil); err != nil {
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
	go func() { done <- crash(ended, env, c, killing, "n2", nil, 0, nil) }()
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
	// Process 2 asked before the nodes came back: its answer may predate them, no hazard.
	f.events <- history.Event{Type: history.Invoke, Process: 2, Func: history.Acquire, Time: history.Now()}
	waitFor(t, "two nodes back", func() bool { return len(f.did()) >= 5 })
	f.events <- history.Event{Type: history.Fail, Process: 2, Func: history.Acquire, Error: history.ErrLockBusy, Time: history.Now()}
	f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 12, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now(),
		Detail: map[string]string{"nodes": "n5," + strings.Join(killedNodes(f.did()), ",")}}
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
	var crashed, served history.Event
	for _, e := range f.recorded {
		switch e.Hazard {
		case history.CrashUnderGrant:
			crashed = e
		case history.RestartServed:
			served = e
		}
	}
	f.mu.Unlock()
	if counts[history.CrashUnderGrant] != 2 || counts[history.RestartInLease] != 2 || counts[history.RestartServed] != 1 {
		t.Errorf("hazards %v, want 2 crashes under the grant, 2 restarts within its lease, 1 answer by a restarted node", counts)
	}
	if crashed.Detail["grant"] != "worker-0 #7" || crashed.Targets[1] != "worker-0" {
		t.Errorf("crash hazard %+v: want it to name worker-0's grant #7", crashed)
	}
	if served.Detail["answer"] != "granted worker-1 #12" || !slices.Equal(served.Targets[1:], []string{"worker-0", "worker-1"}) {
		t.Errorf("served hazard %+v: want worker-1's grant #12 while worker-0 held", served)
	}
}

// killedNodes are the nodes actions killed, in order.
func killedNodes(actions []string) []string {
	var killed []string
	for _, a := range actions {
		if node, ok := strings.CutPrefix(a, "kill "); ok {
			killed = append(killed, node)
		}
	}
	return killed
}

func TestVictimsAreAsManyAsAnotherMajorityNeeds(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	tests := []struct {
		granted  string
		majority bool // the nodes are independent, a grant a majority's (Redlock)
		want     int
	}{
		{"n1,n2,n3,n4,n5", true, 3},
		{"n1,n2,n3", true, 1},
		{"n2,n3,n4,n5", true, 2},
		{"", true, 3},  // a majority's grant that does not name its nodes (redsync): as if all had granted
		{"", false, 1}, // a grant that does not name its nodes, of one node or a replicated cluster: one node
	}
	for _, tt := range tests {
		grant := history.Event{Detail: map[string]string{"nodes": tt.granted}}
		got := victims(grant, nodes, tt.majority, rng)
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

// Undirected, the failover cuts replication both ways, kills the primary right after a
// grant whose acquire began after the cut, heals the cut once a replica is promoted, and
// starts the old primary again; its stop names the new primary and the client whose grant
// was lost, and the grant still held at the promotion is counted (grant-lost).
func TestFailoverCutsKillsPromotesAndHeals(t *testing.T) {
	cut := []string{"n1 drops ip-n2,ip-n3", "n2 drops ip-n1", "n3 drops ip-n1"}
	f := newFake(2, 3)
	env, c := f.crashEnv()
	env.Nodes, env.Undirected = promoting{c}, true
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
	waitFor(t, "the failover to end", func() bool { return f.recordedOf(history.Stop, "failover").Time != 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := f.did(), slices.Concat(cut, []string{"kill n1", "heal network", "restart n1"}); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("actions %q, want first %q", got, want)
	}
	start, stop, hazard := f.recordedOf(history.Start, "failover"), f.recordedOf(history.Stop, "failover"), f.recordedOf(history.HazardFunc, "failover")
	if start.Detail["primary"] != "n1" || stop.Detail["primary"] != "n2" || stop.Detail["grant"] != "worker-1" {
		t.Errorf("start %v, stop %v: want primary n1 then n2, the grant lost worker-1's", start.Detail, stop.Detail)
	}
	if hazard.Hazard != history.GrantLost || hazard.Detail["grant"] != "worker-1 #4" || hazard.Detail["new primary"] != "n2" {
		t.Errorf("hazard %+v: want worker-1's grant #4 lost to n2", hazard)
	}
}

// Directed, the failover has the monitors promote a replica once the clients are at work,
// loses the first grant begun after that, whose holder reads while the monitors still name
// the old primary, kills that primary and keeps the holder in its critical section until another client has
// taken the lock over. The danger made real (lost-grant-served) is another client's answer
// within the lost grant's lease: a grant heard after the crash (the old primary, which had
// the lost grant, would have refused it), or a busy answer from attempts begun after the
// crash; one begun before it may have been the old primary's, and is not.
func TestDirectedFailoverPromotesFirstAndSeesTheLostGrantServed(t *testing.T) {
	tests := []struct {
		name   string
		answer func(now int64) history.Event // process 2's answer, after its invocation
		asked  string                        // when process 2 asked: "before" or "after" the crash
		served string                        // the served hazard's answer; "" for none
	}{
		{"granted again", func(now int64) history.Event {
			return history.Event{Index: 20, Type: history.OK, Process: 2, Func: history.Acquire, Time: now}
		}, "after", "granted worker-2 #20"},
		{"refused as busy", func(now int64) history.Event {
			return history.Event{Type: history.Fail, Process: 2, Func: history.Acquire, Error: history.ErrLockBusy, Time: now,
				EffectFrom: now - 1, EffectTo: now}
		}, "after", "refused it as busy"},
		{"granted, asked before the crash", func(now int64) history.Event {
			return history.Event{Index: 20, Type: history.OK, Process: 2, Func: history.Acquire, Time: now}
		}, "before", "granted worker-2 #20"},
		{"refused as busy, asked before the crash", func(now int64) history.Event {
			return history.Event{Type: history.Fail, Process: 2, Func: history.Acquire, Error: history.ErrLockBusy, Time: now}
		}, "before", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(3, 3)
			env, c := f.crashEnv()
			env.Nodes = promoting{c}
			env.TTL = time.Minute // only the takeover ends the pause
			if tt.served == "" {
				env.TTL = 500 * time.Millisecond // no takeover: the lease's end does
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- (&failover{}).Run(ctx, env) }()
			waitFor(t, "the cut", func() bool { return len(f.faults()) > 0 })
			// The clients at work: process 1 is granted and releases; then the promotion.
			f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Index: 4, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
			waitFor(t, "the promotion", func() bool { return slices.Contains(f.did(), "promote") })
			f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Release, Time: history.Now()}
			if tt.asked == "before" {
				f.events <- history.Event{Type: history.Invoke, Process: 2, Func: history.Acquire, Time: history.Now()}
			}
			f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Index: 8, Type: history.OK, Process: 0, Func: history.Acquire, Time: history.Now()}
			f.events <- history.Event{Index: 9, Type: history.OK, Process: 0, Func: history.Read, Time: history.Now()}
			waitFor(t, "the crash", func() bool { return slices.Contains(f.did(), "kill n1") })
			if tt.asked == "after" {
				f.events <- history.Event{Type: history.Invoke, Process: 2, Func: history.Acquire, Time: history.Now()}
			}
			f.events <- tt.answer(history.Now())
			if tt.served != "" { // the takeover that ends the pause: process 1 granted again, and its read
				f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
				f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: history.Now()}
			}
			waitFor(t, "the failover to end", func() bool { return f.recordedOf(history.Stop, "failover").Time != 0 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := []string{"n1 drops ip-n2,ip-n3", "n2 drops ip-n1", "n3 drops ip-n1", "promote", "worker-0 STOPPED (SIGNAL)",
				"kill n1", "worker-0 CONTINUED", "heal network", "restart n1"}
			if got := f.did(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
				t.Fatalf("actions %q, want first %q", got, want)
			}
			f.mu.Lock()
			hazards := history.Hazards(f.recorded)
			f.mu.Unlock()
			var lost, served []history.Occurrence
			for _, h := range hazards {
				switch h.Hazard {
				case history.GrantLost:
					lost = append(lost, h)
				case history.LostGrantServed:
					served = append(served, h)
				}
			}
			if len(lost) != 1 || lost[0].Detail["grant"] != "worker-0 #8" {
				t.Errorf("lost grants %+v: want worker-0's grant #8", lost)
			}
			switch {
			case tt.served == "" && len(served) > 0:
				t.Errorf("served %+v: want none", served)
			case tt.served != "" && (len(served) != 1 || served[0].Detail["answer"] != tt.served ||
				!slices.Equal(served[0].Targets, []string{"worker-0", "worker-2"})):
				t.Errorf("served %+v: want worker-2 answered %q while worker-0 held", served, tt.served)
			}
		})
	}
}

// The promoted replica may grant before the old primary is down: that second grant, while
// the lost grant is held within its lease, is the danger made real too.
func TestFailoverSeesAGrantOfThePromotedReplicaBeforeTheCrash(t *testing.T) {
	f := newFake(3, 3)
	env, c := f.crashEnv()
	killing := make(chan struct{})
	env.Nodes = slowKill{promoting{c}, killing}
	env.TTL = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- (&failover{}).Run(ctx, env) }()
	waitFor(t, "the cut", func() bool { return len(f.faults()) > 0 })
	f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 4, Type: history.OK, Process: 1, Func: history.Acquire, Time: history.Now()}
	waitFor(t, "the promotion", func() bool { return slices.Contains(f.did(), "promote") })
	f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Release, Time: history.Now()}
	f.events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 8, Type: history.OK, Process: 0, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 9, Type: history.OK, Process: 0, Func: history.Read, Time: history.Now()}
	<-killing // the kill has begun and has not returned
	f.events <- history.Event{Type: history.Invoke, Process: 2, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Index: 20, Type: history.OK, Process: 2, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 2, Func: history.Read, Time: history.Now()}
	close(killing) // the watcher hears of the grant once the kill has returned
	waitFor(t, "the failover to end", func() bool { return f.recordedOf(history.Stop, "failover").Time != 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !f.served() {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Errorf("hazards %v: want the promoted replica's grant while worker-0 held seen (lost-grant-served)", history.CountHazards(f.recorded))
	}
}

// served says whether a lost-grant-served hazard was recorded.
func (f *fake) served() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return history.CountHazards(f.recorded)[history.LostGrantServed] == 1
}

// slowKill is a promoting fake whose kill tells killing it has begun and returns only once
// killing is closed.
type slowKill struct {
	promoting
	killing chan struct{}
}

func (s slowKill) Kill(ctx context.Context, node string) error {
	s.killing <- struct{}{}
	<-s.killing
	return s.promoting.Kill(ctx, node)
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

// Announced names the primary as the monitors would before they hear of a promotion.
func (p promoting) Announced(context.Context) (string, error) {
	roles, _ := p.Roles(context.Background())
	return system.OnePrimary(roles), nil
}

// A grant is forgotten only when as many of its nodes as another client needs have
// forgotten it: before that, the others hold the grant and no second grant can be the
// crash's doing; once the third of five is back, a second grant is its danger made real.
// On a majority of independent nodes a busy answer says nothing by itself (it may be split
// votes): the attempt counts, and only once the majority forgot.
func TestAGrantIsForgottenWhenEnoughOfItsNodesForgotIt(t *testing.T) {
	f := newFake(2, 5)
	env := f.env()
	env.TTL, env.IndependentMajority = time.Hour, true
	w := watch(f.events)
	follow := func(events ...history.Event) {
		for _, e := range events {
			f.events <- e
			w.next(context.Background(), nil)
		}
	}
	answer := func(i int) {
		now := history.Now()
		follow(history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now},
			history.Event{Type: history.Fail, Process: 1, Func: history.Acquire, Error: history.ErrLockBusy, Time: now + 2, EffectFrom: now + 1, EffectTo: now + 2,
				Detail: map[string]string{history.BusyEvery: "1ns"}})
		if i == 2 { // a grant while the victim holds, and while it held: too soon before
			follow(history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: now + 3},
				history.Event{Index: 40, Type: history.OK, Process: 1, Func: history.Acquire, Time: now + 4})
		}
	}
	served := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return history.CountHazards(f.recorded)[history.RestartServed]
	}
	now := history.Now()
	follow(history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now},
		history.Event{Index: 1, Type: history.OK, Process: 0, Func: history.Acquire, Time: now}) // names no nodes: all five's
	forgot := w.watchForgotten(env, history.KillNode.Name, w.holding[0], f.nodes)
	if forgot.need != 3 {
		t.Fatalf("need %d, want 3 of 5", forgot.need)
	}
	for i, node := range []string{"n1", "n2", "n3"} {
		forgot.forgot(node, history.Now())
		answer(i)
		if want := min(1, max(0, i-1)); served() != want {
			t.Fatalf("%d nodes forgot: %d served, want %d", i+1, served(), want)
		}
	}
}

// antirez's delayed restart: the killed majority stays down past the lease, so another
// client's attempt within the lease is refused, unanswered or busy. Each is the danger
// the delay guards against, once enough nodes forgot the grant, and never after the
// holder's lease.
func TestAnAttemptWhileAMajorityForgotIsTheDangerOnIndependentNodes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  history.Event
		forgot  int
		late    bool
		counted bool
	}{
		{"refused by nodes down", history.Event{Type: history.Fail, Error: history.ErrUnreachable}, 3, false, true},
		{"no answer", history.Event{Type: history.Info}, 3, false, true},
		{"busy", history.Event{Type: history.Fail, Error: history.ErrLockBusy}, 3, false, true},
		{"before a majority forgot", history.Event{Type: history.Fail, Error: history.ErrUnreachable}, 2, false, false},
		{"after the lease", history.Event{Type: history.Fail, Error: history.ErrUnreachable}, 3, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2, 5)
			env := f.env()
			env.TTL, env.IndependentMajority = time.Hour, true
			w := watch(f.events)
			follow := func(e history.Event) {
				f.events <- e
				w.next(context.Background(), nil)
			}
			now := history.Now()
			follow(history.Event{Type: history.Invoke, Process: 0, Func: history.Acquire, Time: now})
			follow(history.Event{Index: 1, Type: history.OK, Process: 0, Func: history.Acquire, Time: now})
			forgot := w.watchForgotten(env, history.KillNode.Name, w.holding[0], f.nodes)
			for _, node := range f.nodes[:tt.forgot] {
				forgot.forgot(node, now+1)
			}
			at := now + 2
			if tt.late {
				at = now + 2 + env.TTL.Nanoseconds()
			}
			follow(history.Event{Type: history.Invoke, Process: 1, Func: history.Acquire, Time: at})
			a := tt.answer
			a.Process, a.Func, a.Time = 1, history.Acquire, at+1
			follow(a)
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := history.CountHazards(f.recorded)[history.RestartServed] == 1; got != tt.counted {
				t.Errorf("restart-served recorded: %v, want %v (%+v)", got, tt.counted, f.recorded)
			}
		})
	}
}

// A crash aims at the holder's nodes by default, or at a minority, a majority or all of
// the nodes, the holder's first.
func TestCrashesAimAsVictimsSay(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	grant := history.Event{Detail: map[string]string{grantNodes: "n2,n3,n4"}}
	for which, want := range map[string]int{"": 1, "holder": 1, "minority": 2, "majority": 3, "all": 5} { // the grant left two free: one more is another majority
		got := aimed(which, grant, nodes, true, rand.New(rand.NewSource(1)))
		if len(got) != want {
			t.Errorf("%q: %q, want %d nodes", which, got, want)
		}
		for _, node := range got[:min(len(got), 3)] {
			if !slices.Contains([]string{"n2", "n3", "n4"}, node) {
				t.Errorf("%q: %q, want the holder's nodes first", which, got)
			}
		}
	}
}

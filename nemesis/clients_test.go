package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// addressed is the recording fake whose clients have addresses of their own.
type addressed struct{ *fake }

func (a addressed) ClientIP(p int) (string, error) { return "ip-" + history.TargetOfClient(p), nil }
func (a addressed) Routed() bool                   { return false }
func (a addressed) ClientDropFrom(_ context.Context, p int, sources ...string) error {
	return a.act("%s drops %s", history.TargetOfClient(p), strings.Join(sources, ","))
}
func (a addressed) HealClients(context.Context) error { return a.act("heal clients") }

// routed is the recording fake whose clients have addresses of their own that the nodes
// do not see: they all come from the gateway.
type routed struct{ addressed }

func (routed) Routed() bool { return true }

func (f *fake) addressedEnv() Env {
	env := f.env()
	env.Clients = addressed{f}
	return env
}

func TestClientShapesNameSingleClients(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	clients := []string{"worker-0", "worker-1", "worker-2"}
	rng := rand.New(rand.NewSource(1))
	g := shapes[history.PartitionClient](nodes, clients, rng)
	var cut []string
	for _, target := range g.targets() {
		if isClient(target) {
			cut = append(cut, target)
		}
	}
	if len(cut) != 1 || !slices.Equal(g[cut[0]], nodes) || len(g) != 6 {
		t.Errorf("client must cut one client off every node: %s", g)
	}
	g = shapes[history.PartitionClientMinority](nodes, clients, rng)
	// One client and two nodes on one side: that client hears 3 nodes no longer, the other
	// clients 2, and no client is cut off another.
	var heard []int
	for _, c := range clients {
		heard = append(heard, len(g[c]))
		if slices.ContainsFunc(g[c], isClient) {
			t.Errorf("clients cut off each other: %s", g)
		}
	}
	slices.Sort(heard)
	if !slices.Equal(heard, []int{2, 2, 3}) {
		t.Errorf("client-minority: clients cut off %v nodes, want [2 2 3]: %s", heard, g)
	}
}

// A grudge naming a client is applied inside that client, and to the nodes against its own
// address; the storage is cut off in the client only.
func TestGrudgesReachSingleClients(t *testing.T) {
	f := newFake(3, 3)
	env := f.addressedEnv()
	g := complete([]string{"worker-1"}, []string{"n1"})
	g["worker-2"] = []string{Storage}
	g["n2"] = []string{Clients}
	if err := cutGrudge(context.Background(), env, fakeNodes{f}.fake, g); err != nil {
		t.Fatal(err)
	}
	want := []string{"n1 drops ip-worker-1", "n2 drops ip-worker-0,ip-worker-1,ip-worker-2", "worker-1 drops ip-n1", "worker-2 drops storage"}
	if got := f.did(); !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	// Without addresses of their own, clients are the gateway and none can be named.
	f = newFake(3, 3)
	if err := cutGrudge(context.Background(), f.env(), f, grudge{"n2": {Clients}}); err != nil || !slices.Equal(f.did(), []string{"n2 drops gw"}) {
		t.Errorf("shared address: %v %q", err, f.did())
	}
	if err := cutGrudge(context.Background(), f.env(), f, g); !errors.Is(err, errSharedAddress) {
		t.Errorf("a client named without addresses: %v", err)
	}
}

// Clients routed out to the nodes through this host are cut off one at a time in their own
// namespaces alone (the nodes see them all at the gateway), and all at once at the
// gateway.
func TestGrudgesOfRoutedClients(t *testing.T) {
	f := newFake(3, 3)
	env := f.env()
	env.Clients = routed{addressed{f}}
	g := complete([]string{"worker-1"}, []string{"n1"})
	g["n2"] = []string{Clients}
	if err := cutGrudge(context.Background(), env, f, g); err != nil {
		t.Fatal(err)
	}
	want := []string{"n2 drops gw", "worker-1 drops ip-n1"}
	if got := f.did(); !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
}

func TestClientFaultsSayWhereTheyApply(t *testing.T) {
	redlock, _ := system.Lookup("redlock")
	local, _ := system.Lookup("local")
	for _, name := range []string{"partition-client", "partition-client-minority", "partition-holder", "partition-holder-storage"} {
		n, _ := New([]string{name})
		if !n.Needs().ClientAddrs {
			t.Errorf("%s does not say it needs clients with addresses of their own", name)
		}
		if err := n.Available(redlock, 5); err != nil {
			t.Errorf("%s on redlock: %v", name, err)
		}
		if err := n.Available(local, 1); err == nil {
			t.Errorf("%s on local: available, want a refusal", name)
		}
	}
}

// partition-holder cuts the client that read under the lock off every node until another
// client has taken the lock and used the storage. Directed, it also keeps the cut holder in
// its critical section until then, and heals once the thawed holder begins to release;
// the other client's grant meanwhile is its hazard. Undirected, the cut alone holds, and a
// grant after the holder began to release is no hazard.
func TestPartitionHolderCutsTheHolderOffTheNodesOnly(t *testing.T) {
	cut := []string{"n1 drops ip-worker-1", "n2 drops ip-worker-1", "worker-1 drops ip-n1,ip-n2"}
	healed := []string{"heal network", "heal clients"}
	tests := []struct {
		name       string
		undirected bool
		// releaseFirst: the holder begins to release before the other client's grant.
		releaseFirst bool
		want         []string
		hazards      int
	}{
		{"directed", false, false, slices.Concat([]string{"worker-1 STOPPED (SIGNAL)"}, cut, []string{"worker-1 CONTINUED"}, healed), 1},
		{"undirected, granted while the holder worked", true, false, slices.Concat(cut, healed), 1},
		{"undirected, granted after the holder's section", true, true, slices.Concat(cut, healed), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2, 2)
			env := f.addressedEnv()
			env.Interval, env.TTL, env.Undirected = time.Hour, time.Hour, tt.undirected
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error)
			go func() { done <- partitionHolder{}.Run(ctx, env) }()
			now := history.Now
			f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Acquire, Time: now()}
			f.events <- history.Event{Type: history.OK, Process: 1, Func: history.Read, Time: now()}
			waitFor(t, "the cut", func() bool { return slices.Contains(f.did(), "worker-1 drops ip-n1,ip-n2") })
			if tt.releaseFirst {
				f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Release, Time: now()}
			}
			f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: now()}
			f.events <- history.Event{Type: history.OK, Process: 0, Func: history.Write, Time: now()}
			if !tt.undirected {
				waitFor(t, "the thaw", func() bool { return slices.Contains(f.did(), "worker-1 CONTINUED") })
				if slices.Contains(f.did(), "heal clients") {
					t.Fatal("healed before the thawed holder began to release")
				}
				f.events <- history.Event{Type: history.Invoke, Process: 1, Func: history.Release, Time: now()}
			}
			waitFor(t, "the heal", func() bool { return slices.Contains(f.did(), "heal clients") })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := f.did(); !slices.Equal(got, tt.want) {
				t.Errorf("actions %q, want %q", got, tt.want)
			}
			var cuts []history.Fault
			for _, fl := range f.faults() {
				if strings.HasPrefix(fl.Description, "partition-holder ") && fl.Healed {
					cuts = append(cuts, fl)
				}
			}
			if len(cuts) != 1 {
				t.Errorf("faults %+v, want one healed partition-holder cut", f.faults())
			}
			f.mu.Lock()
			hazards := history.Hazards(f.recorded)
			f.mu.Unlock()
			if len(hazards) != tt.hazards {
				t.Fatalf("hazards %+v, want %d", hazards, tt.hazards)
			}
			if tt.hazards > 0 && (hazards[0].Hazard != history.GrantedInCut || !slices.Equal(hazards[0].Targets, []string{"worker-1", "worker-0"})) {
				t.Errorf("hazard %+v: want worker-0 granted while worker-1 was cut", hazards[0])
			}
		})
	}
}

// partition-primary puts the primary (n1) and a minority of the clients apart from the
// replicas and the other clients.
func TestPartitionPrimaryKeepsSomeClientsWithTheOldPrimary(t *testing.T) {
	f := newFake(3, 3)
	env, _ := f.crashEnv()
	env.Clients = addressed{f}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error)
	go func() { done <- primarySplit{}.Run(ctx, env) }()
	waitFor(t, "the heal", func() bool { return slices.Contains(f.did(), "heal clients") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fl := f.faults()[0]
	var clients []string
	for _, target := range fl.Targets {
		if isClient(target) {
			clients = append(clients, target)
		}
	}
	// Every client is cut off one side; n1's side holds one of the three.
	if len(clients) != 3 || !strings.Contains(fl.Description, "n1<-n2,n3,") || strings.Count(fl.Description, "<-n1") != 4 {
		t.Errorf("split %q", fl.Description)
	}
}

// While the split lasts, a client on one side granted the lock while a client on the other
// holds it is partition-primary's hazard; a grant on the same side is not. The split lasts
// until that hazard, not for a pause of its own (an hour here, with leases of an hour).
func TestPartitionPrimaryRecordsGrantsUnderTwoPrimaries(t *testing.T) {
	f := newFake(3, 3)
	env, _ := f.crashEnv()
	env.Clients, env.Pause, env.PauseFixed, env.TTL, env.Interval = addressed{f}, time.Hour, false, time.Hour, time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error)
	go func() { done <- primarySplit{}.Run(ctx, env) }()
	waitFor(t, "the split", func() bool { return len(f.faults()) > 0 })
	fl := f.faults()[0]
	oldSide := -1
	for p := range 3 {
		if strings.Contains(fl.Description, fmt.Sprintf("worker-%d<-n2,n3", p)) {
			oldSide = p
		}
	}
	if oldSide < 0 {
		t.Fatalf("split %q: no client on n1's side", fl.Description)
	}
	newSide := (oldSide + 1) % 3
	now := history.Now
	f.events <- history.Event{Index: 1, Type: history.OK, Process: oldSide, Func: history.Acquire, Time: now()}
	f.events <- history.Event{Index: 2, Type: history.OK, Process: newSide, Func: history.Acquire, Time: now()}
	waitFor(t, "the hazard", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(history.Hazards(f.recorded)) > 0
	})
	waitFor(t, "the heal once the hazard came", func() bool { return slices.Contains(f.did(), "heal clients") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	hazards := history.Hazards(f.recorded)
	f.mu.Unlock()
	want := []string{history.TargetOfClient(oldSide), history.TargetOfClient(newSide)}
	if len(hazards) != 1 || hazards[0].Hazard != history.TwoPrimaries || !slices.Equal(hazards[0].Targets, want) {
		t.Errorf("hazards %+v: want one, worker-%d granted while worker-%d held the lock", hazards, newSide, oldSide)
	}
}

// Kleppmann's example with every client live: client 1 (seeded) and D, E cannot reach
// each other from the start; C's clock jumps once client 1 is granted; nothing else heals
// until client 2 has taken the lock.
func TestKleppmannClockRunsLiveWithAddressedClients(t *testing.T) {
	f := newFake(2, 5)
	env := f.addressedEnv()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error)
	go func() { done <- kleppmannClock{}.Run(ctx, env) }()
	waitFor(t, "the cut", func() bool { return len(f.did()) == 3 })
	client1 := strings.Fields(f.did()[2])[0] // "worker-N drops ip-n4,ip-n5"
	p, _ := clientProcess(client1)
	time.Sleep(5 * time.Millisecond) // past the cut plus the (1ms) TTL
	f.events <- history.Event{Type: history.OK, Process: 1 - p, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: p, Func: history.Acquire, Time: history.Now(),
		Detail: map[string]string{history.Validity: "1h"}}
	waitFor(t, "the clock jump", func() bool { return slices.Contains(f.did(), "clock n3 +4.000") })
	f.events <- history.Event{Type: history.OK, Process: 1 - p, Func: history.Acquire, Time: history.Now()}
	f.events <- history.Event{Type: history.OK, Process: 1 - p, Func: history.Write, Time: history.Now()}
	waitFor(t, "client 1 thawed", func() bool { return slices.Contains(f.did(), client1+" CONTINUED") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"n4 drops ip-" + client1, "n5 drops ip-" + client1, client1 + " drops ip-n4,ip-n5",
		client1 + " STOPPED (SIGNAL)", "clock n3 +4.000", client1 + " CONTINUED", "heal network", "heal clients", "clock n3 +0.000"}
	if got := f.did(); !slices.Equal(got, want) {
		t.Fatalf("actions %q, want %q", got, want)
	}
	for _, fl := range f.faults() {
		if !fl.Healed {
			t.Errorf("fault %+v not healed", fl)
		}
	}
}

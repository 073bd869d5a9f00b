package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Crashes kill a node's server with SIGKILL, as a power cut or an OOM kill would, and
// start it again later on whatever its disk kept (--persistence). Unlike a pause, a crash
// loses what the server held only in memory: a Redis master without persistence comes back
// having forgotten every lock it granted (antirez's acknowledged weakness of Redlock), and
// a primary that crashes before replicating a key hands its role to a replica that never
// saw it (the failover's failure).

// killNode crashes the nodes that granted the lock while their grant is held, as a power
// cut would, and starts them again env.RestartAfter later (at once by default) on what
// their disks kept. Directed (the default), it waits until a client holds the lock and has
// read the register, keeps that client inside its critical section (SIGSTOP, recorded as
// pause-in-lease) until another client has taken the lock over or the holder's lease ends,
// whichever comes first, and meanwhile kills as many nodes of the holder's grant as another
// client needs to win a majority without it: the one node of a single Redis; of a Redlock
// grant that names its nodes, a majority less the nodes the grant left free; one node
// otherwise. A lock that forgets its grants in a crash then grants the lock a second time
// within the first holder's lease, which no correct lock does; with --restart-delay-ttl the
// nodes come back only after the lease, and the holder finishes unharmed. Undirected, it
// kills on a seeded schedule, preferring a node of the latest held grant not yet killed
// since that grant, and hopes a holder is still at work.
//
// Its hazard is the crash made real (restart-served): a node killed under a held grant,
// serving again, answered another client (a grant naming it, or any grant or busy answer
// when answers do not name their nodes) while that grant was still held within its lease;
// on a majority of independent nodes (Redlock), where only a grant speaks, another client's
// attempt of any answer while enough of the grant's nodes had forgotten it (so a lock kept
// down past the lease, as antirez's delayed restart, passes by refusing it). The conditions on the way are counted too: the crash under the grant (crash-under-grant)
// and the node serving again within its lease (restart-in-lease).
type killNode struct{}

func init() { register(func() kind { return killNode{} }) }

func (killNode) Kind() history.FaultKind { return history.KillNode }

func (killNode) Needs() Needs { return Needs{Restarts: true} }

func (k killNode) Run(ctx context.Context, env Env) error { return k.run(ctx, env, killing) }

// downing is how a crash takes a node down: its kind, and down, which takes the node down
// and says what the history records of it beside its role.
type downing struct {
	kind history.FaultKind
	down func(ctx context.Context, env Env, r Restarter, node string) (map[string]string, error)
}

// killing kills the node's server, in place when it comes back at once, as fast as the
// system can restart it.
var killing = downing{kind: history.KillNode, down: func(ctx context.Context, env Env, r Restarter, node string) (map[string]string, error) {
	if env.RestartAfter == 0 {
		return nil, r.Crash(ctx, node)
	}
	return nil, r.Kill(ctx, node)
}}

// run is kill-node's, taking nodes down as how says.
func (k killNode) run(ctx context.Context, env Env, how downing) error {
	r, err := restarterOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	rng := rand.New(rand.NewSource(env.Seed))
	if env.Undirected {
		return k.undirected(ctx, env, r, how, nodes, rng)
	}
	return afterHolderReads(ctx, env, func(w *watcher, holder int, _ func()) error {
		grant, end := w.holding[holder], w.leaseEnd(holder, env.TTL)
		forgot := w.watchForgotten(env, how.kind.Name, grant, nodes)
		var mu sync.Mutex
		var crashErr error
		var crashes sync.WaitGroup
		pauseErr := w.pauseInLease(ctx, env, holder, func() bool {
			for _, node := range aimed(env.Victims, grant, nodes, env.IndependentMajority, rng) {
				crashes.Go(func() {
					err := crash(ctx, env, r, how, node, &grant, end, forgot)
					mu.Lock()
					crashErr = errors.Join(crashErr, err)
					mu.Unlock()
				})
			}
			return true
		})
		crashes.Wait()
		return errors.Join(pauseErr, crashErr)
	})
}

// undirected kills a node on a seeded schedule, as kill-node did before it was directed.
func (killNode) undirected(ctx context.Context, env Env, r Restarter, how downing, nodes []string, rng *rand.Rand) error {
	w := watch(env.Subscribe())
	killed := map[string]int64{}       // node -> when it was last killed
	forgetting := map[int]*forgotten{} // grant index -> its nodes that forgot it
	for w.wait(ctx, scheduleWait(env, rng)) {
		grant, candidates := w.holderNodes(killed)
		if len(candidates) == 0 {
			candidates = nodes
		}
		victim := candidates[rng.Intn(len(candidates))]
		killed[victim] = history.Now()
		var held *history.Event
		var end int64
		var forgot *forgotten
		if grant.Time != 0 && (grant.Detail[grantNodes] == "" || slices.Contains(candidates, victim)) {
			held, end = &grant, w.leaseEnd(grant.Process, env.TTL)
			if forgetting[grant.Index] == nil {
				forgetting[grant.Index] = w.watchForgotten(env, how.kind.Name, grant, nodes)
			}
			forgot = forgetting[grant.Index]
		}
		if err := crash(ctx, env, r, how, victim, held, end, forgot); err != nil {
			return err
		}
	}
	return nil
}

// aimed are the nodes a crash under grant strikes, as victims says: the holder's
// (victims), or a minority, a majority or all of the nodes, those that granted it first.
func aimed(which string, grant history.Event, nodes []string, majority bool, rng *rand.Rand) []string {
	n := map[string]int{"minority": minority(len(nodes)), "majority": system.Majority(len(nodes)), "all": len(nodes)}[which]
	if n == 0 {
		return victims(grant, nodes, majority, rng)
	}
	first := grantedBy(grant, nodes, majority)
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	rest := slices.DeleteFunc(slices.Clone(nodes), func(node string) bool { return slices.Contains(first, node) })
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return slices.Concat(first, rest)[:n]
}

// victims are the nodes of grant to kill so that another client can win the lock without
// them (forgetNeed of them, drawn by rng from those that granted it), or one node of all
// when the grant is one node's or a replicated cluster's.
func victims(grant history.Event, nodes []string, majority bool, rng *rand.Rand) []string {
	granted := grantedBy(grant, nodes, majority)
	if len(granted) == 0 {
		return []string{nodes[rng.Intn(len(nodes))]}
	}
	rng.Shuffle(len(granted), func(i, j int) { granted[i], granted[j] = granted[j], granted[i] })
	return granted[:forgetNeed(grant, nodes, majority)]
}

// grantedBy are the nodes that granted grant: those it names; every node for a majority's
// grant that names none (redsync's), as if all had granted it; none otherwise (a grant of
// one node, or of a replicated cluster).
func grantedBy(grant history.Event, nodes []string, majority bool) []string {
	granted := slices.DeleteFunc(strings.Split(grant.Detail[grantNodes], ","), func(n string) bool { return n == "" })
	if len(granted) == 0 && majority {
		granted = slices.Clone(nodes)
	}
	return granted
}

// forgetNeed is how many of grant's nodes must forget it before another client can be
// granted the lock without the others: a majority less the nodes the grant left free;
// one node when the grant does not say.
func forgetNeed(grant history.Event, nodes []string, majority bool) int {
	granted := grantedBy(grant, nodes, majority)
	if len(granted) == 0 {
		return 1
	}
	free := len(nodes) - len(granted)
	return min(len(granted), max(1, system.Majority(len(nodes))-free))
}

// forgotten follows the nodes of one held grant that crashes made forget it: from its
// kill on, a node can answer only as a server started again without the grant. Only once
// they are as many as another client needs (forgetNeed) can the lock service answer
// without the grant, so the grant's served watch takes answers (restart-served) from then
// on, and not before: one Redlock node of three crashed is no danger while the other two
// still hold the grant.
type forgotten struct {
	served *served
	need   int
	mu     sync.Mutex
	nodes  []string
}

func (w *watcher) watchForgotten(env Env, fault string, grant history.Event, nodes []string) *forgotten {
	return &forgotten{served: w.watchServed(env, fault, history.RestartServed, grant),
		need: forgetNeed(grant, nodes, env.IndependentMajority)}
}

// forgot notes that node forgot the grant at t; nil-safe (a crash under no grant).
func (f *forgotten) forgot(node string, t int64) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, node)
	switch {
	case len(f.nodes) == f.need:
		for _, n := range f.nodes {
			f.served.begin(n, t)
		}
	case len(f.nodes) > f.need:
		f.served.begin(node, t)
	}
}

// grantNodes is the grant detail naming the nodes that granted it ("n1,n2,n3").
const grantNodes = "nodes"

// crash takes node down as how says, records the crash with the role the node had, and
// starts it again env.RestartAfter later. held is the grant the node is killed under (nil: none),
// whose lease ends at leaseEnd: the crash is then crash-under-grant, and the node serving
// again before leaseEnd restart-in-lease; it has forgotten the grant from the crash on.
func crash(ctx context.Context, env Env, r Restarter, how downing, node string, held *history.Event, leaseEnd int64, forgot *forgotten) (err error) {
	bg := context.WithoutCancel(ctx)
	fault := how.kind.Name
	role := roleOf(bg, env, node)
	detail, err := how.down(bg, env, r, node)
	if err != nil {
		return fmt.Errorf("%s of node %s: %w", fault, node, err)
	}
	if detail == nil {
		detail = map[string]string{}
	}
	detail["restart-after"] = env.RestartAfter.String()
	if role != "" {
		detail["role"] = string(role)
	}
	recordDetail(env, history.Start, fault, detail, node)
	// From the crash on, whatever this node answers comes from a server started again
	// without what it held in memory: a server crashed in place may answer before Restart
	// has seen it serve, and one kept down past the lease (antirez's delayed restart)
	// must not answer at all.
	forgot.forgot(node, history.Now())
	if held != nil {
		recordHazard(env, fault, history.CrashUnderGrant, history.Now(), map[string]string{"grant": grantText(*held)},
			node, history.TargetOfClient(held.Process))
	}
	defer func() {
		restartErr := r.Restart(bg, node)
		err = errors.Join(err, restartErr)
		if restartErr != nil {
			return // the node never served again: the fault never healed
		}
		record(env, history.Stop, fault, node)
		if now := history.Now(); held != nil && now < leaseEnd {
			recordHazard(env, fault, history.RestartInLease, now,
				map[string]string{"grant": grantText(*held), "lease left": history.Duration(now, leaseEnd).Round(time.Millisecond).String()},
				node, history.TargetOfClient(held.Process))
		}
	}()
	stayDown(env, env.RestartAfter)
	return nil
}

// stayDown waits d, the rest of a killed node's time down, even when the run's time is up:
// a node back early, while the clients finish, would break what --restart-after (and
// --restart-delay-ttl) promise. Only an interrupt cuts it short.
func stayDown(env Env, d time.Duration) {
	select {
	case <-env.Halt:
	case <-time.After(d):
	}
}

func (killNode) Heal(ctx context.Context, env Env) error { return restartKilled(ctx, env) }

// restartKilled starts every node still killed again.
func restartKilled(ctx context.Context, env Env) error {
	r, err := restarterOf(env)
	if err != nil {
		return nil // nothing could have been killed
	}
	return r.RestartKilled(ctx)
}

func restarterOf(env Env) (Restarter, error) {
	r, ok := env.Nodes.(Restarter)
	if !ok {
		return nil, errors.New("this cluster cannot kill and restart its nodes")
	}
	return r, nil
}

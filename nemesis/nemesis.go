// Package nemesis injects faults into a running test: process pauses (SIGSTOP), crashes
// (SIGKILL, of a lock client or of a node's server, which starts again on what its disk
// kept), wall-clock jumps (libfaketime), network partitions (iptables) between nodes and
// single lock clients, a client's traffic slowed, its connections reset or silenced or its
// write held in the network (through proxies on its links), a holder throttled to a sliver
// of a CPU (a cgroup's quota) and a primary's failover.
// Each kind of fault is declared once in history (history.FaultKind: its name, its words, its
// hazard) and made by one kind here, which its file registers in its init; New composes the
// chosen kinds into one Nemesis. It also
// records the nodes' roles as they change (WatchRoles). Like etcd's failpoints, a nemesis
// states what it needs from the cluster (Needs: movable clocks, a cuttable network,
// restartable servers, clients with addresses of their own), from which the cluster is
// started, and whether it applies to a system at all (Available), so a fault that cannot
// apply says so before anything starts. The levers themselves (Clocks, Network,
// ClientNetwork, Throttler, Leaders, Restarter, Roles) are small interfaces a cluster or
// the worker pool implements.
//
// A nemesis records every fault it injects as a start event and every heal as a stop
// event in the history, so checkers and reports can see what was broken when. Every fault
// is healed by the nemesis that made it before Run returns, and Heal undoes anything that
// might still be there (it is called after Run, also when the run failed), so no paused
// process, killed server, iptables rule or faked clock survives a run. Schedules are seeded: the same
// seed gives the same faults.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
)

// Env is everything a nemesis may act on.
type Env struct {
	// Workers are the lock clients; nil while arming (Armer), before they start.
	Workers Workers
	Nodes   Nodes
	// Links slows and holds what single lock clients send; nil unless Needs asked for it.
	Links Links
	// Clients cuts single lock clients off; nil when they all share one address,
	// and while arming.
	Clients ClientNetwork
	// Subscribe returns a channel of every history event recorded from now on, for
	// nemeses that target whoever holds the lock.
	Subscribe func() <-chan history.Event
	// Record writes a nemesis event to the history.
	Record func(history.Event)
	Seed   int64
	// Pause is how long a paused process stays stopped.
	Pause time.Duration
	// PauseFixed says the user chose Pause. Otherwise pause-holder ends its pause when
	// another client has taken the lock over, whatever that takes.
	PauseFixed bool
	// Interval is the mean time between scheduled faults.
	Interval time.Duration
	// ClockOffset is how far clock faults move a clock; ClockRate how fast clock-rate runs it.
	ClockOffset time.Duration
	ClockRate   float64
	// TTL is the lock's lease, for faults staged around it.
	TTL time.Duration
	// Work is how long a holder works between reading and writing the register: a fault
	// that keeps a holder within its lease thaws it that long (and a little) before the
	// lease ends, so that it can finish in time.
	Work time.Duration
	// RestartAfter is how long a killed node stays down.
	RestartAfter time.Duration
	// IndependentMajority: a grant is a majority of independent nodes' (Redlock), so a
	// fault that must make a grant forgotten and cannot tell which nodes made it acts on a
	// majority of them.
	IndependentMajority bool
	// QueueLock: the lock's waiters queue at the service, so a waiter not yet granted
	// was refused for as long as it waited (workloads.Client.Queues).
	QueueLock bool
	// ReplicaLag: a replicated primary refuses writes once its replicas' acknowledgements
	// are older than this (min-replicas-max-lag); 0 when it never refuses.
	ReplicaLag time.Duration
	// Victims says which nodes a crash under a held lock strikes (kill-node, power-loss):
	// "" or "holder", as many of the holder's nodes as another client needs; "minority",
	// "majority" or "all" of the nodes, the holder's first.
	Victims string
	// Undirected makes the targeted faults fire on their schedule and hope, as they did
	// before they were directed: no victim is kept inside its critical section, a failover
	// waits for the monitors to notice the crash instead of promoting at once.
	Undirected bool
	// Reach narrows the faults on the clients' links that take it (reaching) to one node's
	// link, or to the answers (--link-node, --link-answers).
	Reach LinkReach
	// Halt closes when the run is interrupted (nil: never). A killed node stays down for
	// RestartAfter even past the run's time limit, but not past an interrupt.
	Halt <-chan struct{}

	// Script is a written schedule for each nemesis named, followed instead of the seeded
	// one by the kinds that can (Scripted).
	Script map[string][]Shot

	// clocks is this part's share of the nodes' clocks in a composition (clockSums); nil:
	// Nodes's own.
	clocks Clocks
	// script is this part's own of Script: none when Script names it not.
	script []Shot
}

// Nemesis injects the faults of the kinds chosen (New).
type Nemesis interface {
	// Name is the chosen kinds' names, comma-separated, or none.
	Name() string
	// Needs says which levers Run pulls, so the cluster is started with them.
	Needs() Needs
	// Run injects faults until ctx ends. Every fault it injected is healed before it returns.
	Run(ctx context.Context, env Env) error
	// Heal undoes whatever this nemesis may have left behind. It is idempotent.
	Heal(ctx context.Context, env Env) error
	// Available says why this nemesis cannot apply to sys at that size; nil when it can.
	Available(sys system.System, nodes int) error
	// Fits says why this nemesis cannot run with the run's settings; nil when it can.
	Fits(s Settings) error
}

// Settings are the run's settings some kinds need or take.
type Settings struct {
	// Nodes is the cluster's size.
	Nodes int
	// Extends says the holders extend their leases (--extend-every).
	Extends bool
	// Reach is where the link faults strike (Env.Reach).
	Reach LinkReach
}

// reaching is a kind whose faults on the clients' links strike where Env.Reach says.
type reaching interface{ reaches() }

// extending is a kind that acts on the holders' extends, which a run must make.
type extending interface{ onExtends() }

// kind injects the faults of one history.FaultKind, the declaration of its name, its words
// and its hazard; each registers itself (register) in its file's init. Whether it applies
// to a system is asked once, by the composition (composed.Available): of the levers it
// needs (Needs) for every kind, and of the systems it is meant for (suited) and its
// further conditions (conditional) for the kinds that have them.
type kind interface {
	// Kind is the fault kind it makes, declared in history.
	Kind() history.FaultKind
	// Needs says which levers Run pulls, so the cluster is started with them.
	Needs() Needs
	// Run injects faults until ctx ends. Every fault it injected is healed before it returns.
	Run(ctx context.Context, env Env) error
	// Heal undoes whatever this nemesis may have left behind. It is idempotent.
	Heal(ctx context.Context, env Env) error
}

// suited is a kind meant for some systems only (a replicated primary, independent
// majorities): suits says why sys at that size is not one of them. It is asked before the
// levers, so a kind meant for other systems says that first.
type suited interface {
	suits(sys system.System, nodes int) error
}

// conditional is a kind with conditions of its own that matter once its levers are there
// (a leader to isolate, two nodes to cut apart): conditions says why
// they do not hold. It is asked after the levers.
type conditional interface {
	conditions(sys system.System, nodes int) error
}

// available says why kind k cannot apply to sys at that size: the systems it is meant for,
// then the levers it needs, then its further conditions.
func available(k kind, sys system.System, nodes int) error {
	if s, ok := k.(suited); ok {
		if err := s.suits(sys, nodes); err != nil {
			return err
		}
	}
	if err := k.Needs().available(sys); err != nil {
		return err
	}
	if c, ok := k.(conditional); ok {
		return c.conditions(sys, nodes)
	}
	return nil
}

// Armer is a nemesis whose first fault belongs in place before the clients' first
// request, so that the run's first operations already meet it: a failover then loses the
// run's first grant instead of waiting out a whole holding for the next. Arm runs before
// the clients start, so env has no Workers or Clients yet; Run finds the fault in place,
// and Heal undoes it like any other.
type Armer interface {
	Arm(ctx context.Context, env Env) error
}

// kinds are the nemeses that can be chosen, by their kind's name; each file registers its
// own in its init.
var kinds = map[string]func() kind{}

// register makes a nemesis choosable by its kind's name. A kind that is only a part of
// another's faults, or one registered twice, is a programming error.
func register(make func() kind) {
	k := make().Kind()
	if _, ok := kinds[k.Name]; ok || k.Part {
		panic(fmt.Sprintf("nemesis: fault kind %s registered twice, or a part registered as a nemesis", k.Name))
	}
	kinds[k.Name] = make
}

// Names lists the nemeses that can be chosen.
func Names() []string {
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the nemesis for a list of names; history.NoFaults or an empty list gives one that does
// nothing, several names give them all at once.
func New(names []string) (Nemesis, error) {
	var all composed
	for _, name := range names {
		if name == history.NoFaults || name == "" {
			continue
		}
		make, ok := kinds[name]
		if !ok {
			return nil, fmt.Errorf("unknown nemesis %s (known: none, %s)", quote.Short(name), strings.Join(Names(), ", "))
		}
		all = append(all, make())
	}
	return all, nil
}

// composed runs several nemeses side by side, each on its own seeded schedule.
type composed []kind

func (c composed) Needs() Needs {
	var all Needs
	for _, n := range c {
		all = all.or(n.Needs())
	}
	return all
}

// Available joins every part's reason, each named, and says when two parts cannot run
// together.
func (c composed) Available(sys system.System, nodes int) error {
	var errs []error
	var cutters, linkers []string
	for _, n := range c {
		if err := available(n, sys, nodes); err != nil {
			errs = append(errs, fmt.Errorf("nemesis %s: %w", n.Kind().Name, err))
		}
		if n.Needs().ClientAddrs {
			cutters = append(cutters, n.Kind().Name)
		}
		if n.Needs().Links {
			linkers = append(linkers, n.Kind().Name)
		}
	}
	if len(cutters) > 0 && len(linkers) > 0 {
		// A client behind proxies sends to them, not to the servers' addresses a cut drops.
		errs = append(errs, fmt.Errorf("nemesis %s puts proxies on the clients' links, which hide the servers' addresses "+
			"that %s cuts a client off: run them apart", strings.Join(linkers, ","), strings.Join(cutters, ",")))
	}
	return errors.Join(errs...)
}

// Fits refuses a reach no chosen kind takes or beyond the cluster, and a kind that acts
// on extends in a run whose holders make none.
func (c composed) Fits(s Settings) error {
	reached := false
	for _, n := range c {
		if _, ok := n.(extending); ok && !s.Extends {
			return fmt.Errorf("nemesis %s acts on the holders' extends: it needs --extend-every", n.Kind().Name)
		}
		_, ok := n.(reaching)
		reached = reached || ok
	}
	switch {
	case s.Reach == LinkReach{}:
	case !reached:
		return fmt.Errorf("--link-node and --link-answers narrow the faults on the clients' links (%s), not %s",
			strings.Join(reachingNames(), ", "), c.Name())
	case s.Reach.Node > s.Nodes:
		return fmt.Errorf("--link-node n%d: the cluster has %d nodes (n1 to n%d)", s.Reach.Node, s.Nodes, s.Nodes)
	}
	return nil
}

// reachingNames are the kinds that take a reach, sorted.
func reachingNames() []string {
	var names []string
	for _, name := range Names() {
		if _, ok := kinds[name]().(reaching); ok {
			names = append(names, name)
		}
	}
	return names
}

func (c composed) Name() string {
	names := make([]string, len(c))
	for i, n := range c {
		names[i] = n.Kind().Name
	}
	return history.NemesisText(names, ",")
}

// Run runs every nemesis until ctx ends or one of them fails, which stops the others
// too: a run that cannot inject the faults it was asked for proves nothing.
func (c composed) Run(ctx context.Context, env Env) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var sums *clockSums
	if clocks, ok := env.Nodes.(Clocks); ok {
		sums = newClockSums(clocks, len(c))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c))
	for i, n := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := c.own(env, i)
			if sums != nil {
				env.clocks = partClocks{sums, i}
			}
			if err := n.Run(ctx, env); err != nil {
				errs[i] = fmt.Errorf("nemesis %s: %w", n.Kind().Name, err)
				stop()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// own is part i's env: its schedule has a seed of its own, and its written schedule is its own.
func (c composed) own(env Env, i int) Env {
	env.Seed += int64(i) * 7919
	env.script = env.Script[c[i].Kind().Name]
	return env
}

// Arm arms every part that is an Armer, one after another, and stops at the first that
// fails (Heal undoes what the others did).
func (c composed) Arm(ctx context.Context, env Env) error {
	for i, n := range c {
		if a, ok := n.(Armer); ok {
			if err := a.Arm(ctx, c.own(env, i)); err != nil {
				return fmt.Errorf("nemesis %s: %w", n.Kind().Name, err)
			}
		}
	}
	return nil
}

func (c composed) Heal(ctx context.Context, env Env) error {
	var errs []error
	for _, n := range c {
		if err := n.Heal(ctx, env); err != nil {
			errs = append(errs, fmt.Errorf("heal %s: %w", n.Kind().Name, err))
		}
	}
	return errors.Join(errs...)
}

// record writes a nemesis start or stop event.
func record(env Env, f history.Func, fault string, targets ...string) {
	recordDetail(env, f, fault, nil, targets...)
}

// recordDetail writes a nemesis event with details, e.g. a clock's offset.
func recordDetail(env Env, f history.Func, fault string, detail map[string]string, targets ...string) {
	env.Record(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: f,
		Time: history.Now(), Fault: fault, Targets: targets, Detail: detail})
}

// Shot is one fault of a written schedule (a hunt's, `run --schedule`): when it begins,
// from the moment Run began (once the fault before it ended, if that is later), on which of
// the targets the fault chooses from (an index modulo their number), and for how long.
type Shot struct {
	At     time.Duration
	Target int
	For    time.Duration
	// When, if set, holds the shot back from At until a client is in that state, and Target
	// then picks among the clients in it (kinds that strike a client: Scripting.Clients).
	When history.ClientState
	// HoldOn keeps the fault on past For until another client has taken the lock over, at
	// most takeoverLeases leases (kinds that can: Scripting.HoldsOn).
	HoldOn bool
}

// Scripting says what of a written schedule's step a kind follows besides its moment,
// target and length.
type Scripting struct {
	// Clients: its victim is a lock client, so a step may name the state it must be in.
	Clients bool
	// HoldsOn: its fault can last past its length until another client takes the lock over.
	HoldsOn bool
}

// scripted is a kind that follows a written schedule whole: its moments, its targets and
// its lengths (Shot), and what more its Scripting says.
type scripted interface{ scripting() Scripting }

// Scripted lists the nemeses that follow a written schedule (Env.Script).
func Scripted() []string {
	var names []string
	for _, name := range Names() {
		if _, ok := ScriptingOf(name); ok {
			names = append(names, name)
		}
	}
	return names
}

// ScriptingOf says what of a written step the nemesis name follows; false when it follows
// no written schedule, or there is no such nemesis.
func ScriptingOf(name string) (Scripting, bool) {
	k, ok := kinds[name]
	if !ok {
		return Scripting{}, false
	}
	s, ok := k().(scripted)
	if !ok {
		return Scripting{}, false
	}
	return s.scripting(), true
}

// draw is one fault's share of its schedule: the schedule's seeded random source, and,
// when the schedule is written, the fault's target and length, the clients in the state
// it waited for, and whether it holds on until a takeover.
type draw struct {
	*rand.Rand
	target int // -1: drawn
	length time.Duration
	// victims, when the shot waited for a state, are the clients in it; nil: any.
	victims []int
	holdOn  bool
}

// pick is the index of the fault's target among n.
func (d draw) pick(n int) int {
	if d.target >= 0 {
		return d.target % n
	}
	return d.Intn(n)
}

// schedule calls inject at seeded random moments, on average env.Interval apart, until
// ctx ends, or at the moments of env's written schedule until it is done. inject gets the
// schedule's random source, and its target and length. It follows no client, so its
// kinds take no shot's state (Scripting.Clients).
func schedule(ctx context.Context, env Env, inject func(draw) error) error {
	return shots(env, func(d time.Duration) bool { sleep(ctx, d); return ctx.Err() == nil }, nil, inject)
}

// shots calls inject after each wait the schedule asks for, until wait says to stop. A
// written shot with a state waits on for a client in it (find: false to stop).
func shots(env Env, wait func(time.Duration) bool, find func(history.ClientState) ([]int, bool), inject func(draw) error) error {
	rng := rand.New(rand.NewSource(env.Seed))
	if env.Script == nil {
		for wait(scheduleWait(env, rng)) {
			if err := inject(draw{Rand: rng, target: -1, length: env.Pause}); err != nil {
				return err
			}
		}
		return nil
	}
	began := time.Now()
	for _, shot := range env.script {
		if !wait(max(0, shot.At-time.Since(began))) {
			return nil
		}
		d := draw{Rand: rng, target: shot.Target, length: shot.For, holdOn: shot.HoldOn}
		if shot.When != "" && find != nil {
			var ok bool
			if d.victims, ok = find(shot.When); !ok {
				return nil
			}
		}
		if err := inject(d); err != nil {
			return err
		}
	}
	return nil
}

// scheduleWait is the seeded time to the next fault: on average env.Interval.
func scheduleWait(env Env, rng *rand.Rand) time.Duration {
	return env.Interval/2 + time.Duration(rng.Int63n(int64(env.Interval)+1))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// recordHazard writes a hazard event: h occurred at time t (seen by fault), involving
// targets, made so by what detail says.
func recordHazard(env Env, fault string, h history.Hazard, t int64, detail map[string]string, targets ...string) {
	env.Record(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.HazardFunc,
		Time: t, Fault: fault, Hazard: h, Targets: targets, Detail: detail})
}

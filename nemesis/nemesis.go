// Package nemesis injects faults into a running test: process pauses (SIGSTOP), wall-clock
// jumps (libfaketime) and network partitions (iptables). Each kind is a Nemesis; several
// compose into one. Capabilities a cluster may lack (Clocks, Network, Leaders) are small
// interfaces of their own, checked when a nemesis starts, so a fault that cannot apply
// says so up front.
//
// A nemesis records every fault it injects as a start event and every heal as a stop
// event in the history, so checkers and reports can see what was broken when. Every fault
// is healed by the nemesis that made it before Run returns, and Heal undoes anything that
// might still be there (it is called after Run, also when the run failed), so no paused
// process, iptables rule or faked clock survives a run. Schedules are seeded: the same
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
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Workers reaches the lock clients, which are host processes numbered 0..Count()-1.
type Workers interface {
	Count() int
	Signal(process int, sig syscall.Signal) error
}

// Nodes reaches the lock service's nodes (containers).
type Nodes interface {
	Names() []string
	// Signal sends sig (e.g. "SIGSTOP") to the node's server from outside its container.
	Signal(ctx context.Context, node, sig string) error
}

// Env is everything a nemesis may act on.
type Env struct {
	Workers Workers
	Nodes   Nodes
	// Subscribe returns a channel of every history event recorded from now on, for
	// nemeses that target whoever holds the lock.
	Subscribe func() <-chan history.Event
	// Record writes a nemesis event to the history.
	Record func(history.Event)
	Seed   int64
	// Pause is how long a paused process stays stopped.
	Pause time.Duration
	// Interval is the mean time between scheduled faults.
	Interval time.Duration
	// ClockOffset is how far clock faults move a clock; ClockRate how fast clock-rate runs it.
	ClockOffset time.Duration
	ClockRate   float64
	// TTL is the lock's lease, for faults staged around it.
	TTL time.Duration
}

// Nemesis injects one kind of fault.
type Nemesis interface {
	Name() string
	// Run injects faults until ctx ends. Every fault it injected is healed before it returns.
	Run(ctx context.Context, env Env) error
	// Heal undoes whatever this nemesis may have left behind. It is idempotent.
	Heal(ctx context.Context, env Env) error
}

// Availability is implemented by nemeses that apply only to some clusters; like etcd's
// failpoints they say so before the run starts rather than failing halfway.
type Availability interface {
	Available(system string, nodes int) error
}

// Available reports why the named nemeses cannot run against a cluster, if they cannot.
func Available(names []string, system string, nodes int) error {
	n, err := New(names)
	if err != nil {
		return err
	}
	var errs []error
	for _, one := range n.(composed) {
		if a, ok := one.(Availability); ok {
			if err := a.Available(system, nodes); err != nil {
				errs = append(errs, fmt.Errorf("nemesis %s: %w", one.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

var kinds = map[string]func() Nemesis{
	"pause-holder":    func() Nemesis { return pauseHolder{} },
	"pause-client":    func() Nemesis { return pauseClient{} },
	"pause-node":      func() Nemesis { return pauseNode{} },
	"clock":           func() Nemesis { return clockFault{} },
	"clock-bump":      func() Nemesis { return clockFault{mode: "bump"} },
	"clock-strobe":    func() Nemesis { return clockFault{mode: "strobe"} },
	"clock-rate":      func() Nemesis { return clockFault{mode: "rate"} },
	"partition":       func() Nemesis { return partition{} },
	"kleppmann-clock": func() Nemesis { return kleppmannClock{} },
}

func init() {
	kinds["partition-"+leaderShape] = func() Nemesis { return partition{shape: leaderShape} }
	for _, shape := range shapeNames() {
		kinds["partition-"+shape] = func() Nemesis { return partition{shape: shape} }
	}
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

// New builds the nemesis for a list of names; "none" or an empty list gives one that does
// nothing, several names give them all at once.
func New(names []string) (Nemesis, error) {
	var all composed
	for _, name := range names {
		if name == "none" || name == "" {
			continue
		}
		make, ok := kinds[name]
		if !ok {
			return nil, fmt.Errorf("unknown nemesis %q (known: none, %s)", name, strings.Join(Names(), ", "))
		}
		all = append(all, make())
	}
	return all, nil
}

// composed runs several nemeses side by side, each on its own seeded schedule.
type composed []Nemesis

func (c composed) Name() string {
	if len(c) == 0 {
		return "none"
	}
	names := make([]string, len(c))
	for i, n := range c {
		names[i] = n.Name()
	}
	return strings.Join(names, ",")
}

// Run runs every nemesis until ctx ends or one of them fails, which stops the others
// too: a run that cannot inject the faults it was asked for proves nothing.
func (c composed) Run(ctx context.Context, env Env) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, len(c))
	for i, n := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := env
			own.Seed = env.Seed + int64(i)*7919
			if err := n.Run(ctx, own); err != nil {
				errs[i] = fmt.Errorf("nemesis %s: %w", n.Name(), err)
				stop()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c composed) Heal(ctx context.Context, env Env) error {
	var errs []error
	for _, n := range c {
		if err := n.Heal(ctx, env); err != nil {
			errs = append(errs, fmt.Errorf("heal %s: %w", n.Name(), err))
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
		Time: history.Now(), Fault: fault, Nodes: targets, Detail: detail})
}

// schedule calls inject at seeded random moments, on average env.Interval apart, until
// ctx ends. inject gets the schedule's own random source.
func schedule(ctx context.Context, env Env, inject func(*rand.Rand) error) error {
	rng := rand.New(rand.NewSource(env.Seed))
	for {
		wait := env.Interval/2 + time.Duration(rng.Int63n(int64(env.Interval)+1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if err := inject(rng); err != nil {
			return err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// NeedsNetwork reports whether any of the named nemeses cuts the network, so the nodes
// need the right to change their packet filters.
func NeedsNetwork(names []string) bool {
	for _, name := range names {
		if strings.HasPrefix(name, "partition") || name == "kleppmann-clock" {
			return true
		}
	}
	return false
}

// NeedsClocks reports whether any of the named nemeses moves clocks, so the cluster must
// run its servers under libfaketime.
func NeedsClocks(names []string) bool {
	for _, name := range names {
		if strings.HasPrefix(name, "clock") || name == "kleppmann-clock" {
			return true
		}
	}
	return false
}

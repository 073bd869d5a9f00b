package nemesis

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Pauses freeze a process with SIGSTOP and thaw it with SIGCONT: the process keeps its
// connections and its belief that it holds the lock, exactly like a long GC pause.
// A pause ends early when the run ends, and SIGCONT is sent even then.

// pauseWorker stops lock client p, records the pause as a fault of kind fault, holds it for
// as long as hold takes, and thaws it however hold ended.
func (w *watcher) pauseWorker(ctx context.Context, env Env, fault history.FaultKind, p int, hold func()) error {
	thaw, err := w.stopWorker(env, fault, p)
	if err != nil {
		return err
	}
	hold()
	return thaw()
}

// stopWorker stops lock client p and records the pause; thaw continues it and records
// the pause's end. A client that stopped itself for the watcher (nextReader) is taken as it
// is, its pause recorded from when it stopped.
func (w *watcher) stopWorker(env Env, fault history.FaultKind, p int) (thaw func() error, err error) {
	target := history.TargetOfClient(p)
	if _, stopped := w.selfStopped[p]; !stopped {
		if err := env.Workers.Signal(p, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("pause %s: %w", target, err)
		}
	}
	w.take(env, fault, p)
	return func() error {
		err := env.Workers.Signal(p, syscall.SIGCONT)
		record(env, history.Stop, fault.Name, target)
		return err
	}, nil
}

// take records the start of fault on lock client p: from when p stopped itself for the
// watcher (nextReader), if it did, else from now. It says whether p did; the watcher lets go
// of it either way, and the fault continues it.
func (w *watcher) take(env Env, fault history.FaultKind, p int) (stopped bool) {
	at, stopped := w.selfStopped[p]
	delete(w.selfStopped, p)
	if !stopped {
		at = history.Now()
	}
	env.Record(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Time: at,
		Fault: fault.Name, Targets: []string{history.TargetOfClient(p)}})
	return stopped
}

// letGo continues p if it stopped itself for the watcher and no fault took it.
func (w *watcher) letGo(env Env, p int) error {
	if _, stopped := w.selfStopped[p]; !stopped {
		return nil
	}
	delete(w.selfStopped, p)
	return env.Workers.Signal(p, syscall.SIGCONT)
}

// pauseHolding pauses p, as pauseWorker does, and records the hazards of a paused holder
// when p held the lock: each grant to another client while it was stopped, and its lease
// running out before it was thawed.
func pauseHolding(ctx context.Context, env Env, w *watcher, fault history.FaultKind, p int, hold func()) error {
	end := w.leaseEnd(p, env.TTL)
	stop := w.seeTakeovers(env, fault.Name, history.GrantedInPause, p)
	defer stop()
	paused := history.Now()
	err := w.pauseWorker(ctx, env, fault, p, hold)
	if thawed := history.Now(); w.holds(p) && paused < end && end < thawed {
		recordHazard(env, fault.Name, history.LeaseExpiredInPause, end,
			map[string]string{"holder": grantText(w.holding[p]), "thawed": history.Duration(end, thawed).String() + " later"},
			history.TargetOfClient(p))
	}
	return err
}

// takeoverLeases bounds a pause that waits for another client to take the lock, in
// leases: a lock that has let nobody in after five of them is not going to.
const takeoverLeases = 5

// anywhere is embedded by the nemeses that pull no lever of the nodes but signals, which
// every cluster takes: they apply to every system.
type anywhere struct{}

func (anywhere) Needs() Needs { return Needs{} }

func resumeAllWorkers(env Env) error {
	if env.Workers == nil { // healed after a failed Arm, before any worker started
		return nil
	}
	var errs []error
	for _, p := range env.Workers.Processes() {
		errs = append(errs, env.Workers.Signal(p, syscall.SIGCONT))
	}
	return errors.Join(errs...)
}

// pauseHolder is Kleppmann's GC pause: it waits until a client holds the lock and has
// read the register, then freezes it until its lease has expired and another client has
// taken the lock and used the storage, so the frozen one wakes up to write what it read.
// How long that takes is the lock's business (a lease, a session timeout and its expiry
// check, a waiter's wake-up and reconnect), so the pause waits for the takeover in the
// history rather than guessing a length: at most five leases. A --pause given by the user
// is a fixed length instead. Its hazard is the takeover: another client granted the lock
// while the paused one still held it.
type pauseHolder struct{ anywhere }

func init() { register(func() kind { return pauseHolder{} }) }

func (pauseHolder) Kind() history.FaultKind { return history.PauseHolder }

func (pauseHolder) Run(ctx context.Context, env Env) error {
	return afterHolderReads(ctx, env, func(w *watcher, p int, hold func()) error {
		return pauseHolding(ctx, env, w, history.PauseHolder, p, hold)
	})
}

// afterHolderReads calls fault whenever a client that holds the lock has read the
// register, with the watcher that saw it and how long to hold the fault: until another
// client has taken the lock over (at most five leases), or env.Pause when the user chose
// it. Directed, the client has stopped itself right after its read (nextReader), and the
// fault's pause takes it as it is. Between faults it lets the released client finish and
// others make progress for env.Interval.
func afterHolderReads(ctx context.Context, env Env, fault func(w *watcher, holder int, hold func()) error) error {
	w := watch(env.Subscribe())
	for {
		p, ok := w.nextReader(ctx, env, nil)
		if !ok {
			return nil
		}
		hold := func() { w.wait(ctx, env.Pause) }
		if !env.PauseFixed {
			hold = func() { w.awaitTakeover(ctx, p, takeoverLeases*env.TTL) }
		}
		err := fault(w, p, hold)
		if err := errors.Join(err, w.letGo(env, p)); err != nil {
			return err
		}
		if !w.wait(ctx, env.Interval) {
			return nil
		}
	}
}

// nextReader waits for the next client to read the register while it holds the lock and
// returns it; false once ctx ends or deadline fires (nil: never). Workers that can stop themselves (SelfStoppers) are armed
// to, unless the fault is undirected: the one returned has then stopped right after its
// read, before its write, whenever the watcher hears of it. Otherwise the watcher follows
// the history and takes a holder's read, if the holder has not written or released since:
// a fault aimed at it then would find it out of the situation it is after.
func (w *watcher) nextReader(ctx context.Context, env Env, deadline <-chan time.Time) (int, bool) {
	if s, ok := env.Workers.(SelfStoppers); ok && !env.Undirected {
		stopped, disarm := s.ArmStop()
		defer func() { disarm() }()
		for {
			select {
			case <-ctx.Done():
				return 0, false
			case <-deadline:
				return 0, false
			case e := <-w.events:
				w.follow(e)
			case stop := <-stopped:
				w.catchUp() // its read came before it stopped
				w.selfStopped[stop.Process] = stop.At
				if w.holds(stop.Process) {
					return stop.Process, true
				}
				if err := w.letGo(env, stop.Process); err != nil {
					return 0, false
				}
				disarm()
				stopped, disarm = s.ArmStop()
			}
		}
	}
	for {
		e, ok := w.next(ctx, deadline)
		if !ok {
			return 0, false
		}
		if e.Func != history.Read || e.Type != history.OK || !w.holds(e.Process) {
			continue
		}
		if w.catchUp(); w.holds(e.Process) && w.latest[e.Process] == e.Index {
			return e.Process, true
		}
	}
}

func (pauseHolder) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// pauseClient freezes a random lock client on a seeded schedule, holder or not, for
// env.Pause: the undirected pause. On a written schedule it freezes the step's target at
// the step's moment (among the clients in the step's state, once one is) for the step's
// length, and on until another client has taken the lock over if the step says so. Its hazard, as pause-holder's, occurs only when the
// client it froze held the lock and another was granted it meanwhile.
type pauseClient struct{ anywhere }

func init() { register(func() kind { return pauseClient{} }) }

func (pauseClient) Kind() history.FaultKind { return history.PauseClient }
func (pauseClient) scripting() Scripting    { return Scripting{Clients: true, HoldsOn: true} }

func (pauseClient) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(d draw) error {
		p, ok := randomClient(env, d)
		if !ok {
			return nil // no client running now
		}
		return pauseHolding(ctx, env, w, history.PauseClient, p, func() {
			if w.wait(ctx, d.length) && d.holdOn {
				w.awaitTakeover(ctx, p, takeoverLeases*env.TTL)
			}
		})
	})
}

func (pauseClient) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// pauseNode freezes a random lock-service node's server from outside its container (PID 1
// ignores SIGSTOP sent from inside its own namespace); on a written schedule, the step's
// target for its length.
type pauseNode struct{ anywhere }

func init() { register(func() kind { return pauseNode{} }) }

func (pauseNode) Kind() history.FaultKind { return history.PauseNode }
func (pauseNode) scripting() Scripting    { return Scripting{} }

func (pauseNode) Run(ctx context.Context, env Env) error {
	nodes := env.Nodes.Names()
	return schedule(ctx, env, func(d draw) error {
		node := nodes[d.pick(len(nodes))]
		// The signal is sent whole even when the run ends meanwhile, as every fault is made
		// (cutFor, crash): one cut short may have landed all the same, and a run whose time
		// ran out while a busy engine took its time is no failure (issue 35). The pause then
		// ends at once.
		if err := env.Nodes.Signal(context.WithoutCancel(ctx), node, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("pause node %s: %w", node, err)
		}
		record(env, history.Start, history.PauseNode.Name, node)
		sleep(ctx, d.length)
		// The run's context may be over; the node must be thawed regardless.
		err := env.Nodes.Signal(context.WithoutCancel(ctx), node, syscall.SIGCONT)
		record(env, history.Stop, history.PauseNode.Name, node)
		return err
	})
}

func (pauseNode) Heal(ctx context.Context, env Env) error {
	var errs []error
	for _, node := range env.Nodes.Names() {
		errs = append(errs, env.Nodes.Signal(ctx, node, syscall.SIGCONT))
	}
	return errors.Join(errs...)
}

package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"syscall"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Pauses freeze a process with SIGSTOP and thaw it with SIGCONT: the process keeps its
// connections and its belief that it holds the lock, exactly like a long GC pause.
// A pause ends early when the run ends, and SIGCONT is sent even then.

// pauseWorker stops lock client p for env.Pause.
func pauseWorker(ctx context.Context, env Env, fault string, p int) error {
	target := workerName(p)
	if err := env.Workers.Signal(p, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", target, err)
	}
	record(env, history.Start, fault, target)
	sleep(ctx, env.Pause)
	err := env.Workers.Signal(p, syscall.SIGCONT)
	record(env, history.Stop, fault, target)
	return err
}

// anywhere is embedded by the nemeses that pull no lever of the nodes but signals, which
// every cluster takes: they apply to every system.
type anywhere struct{}

func (anywhere) Needs() Needs                       { return Needs{} }
func (anywhere) Available(system.System, int) error { return nil }

// workerName is how a lock client is named as a fault target.
func workerName(p int) string { return fmt.Sprintf("worker-%d", p) }

func resumeAllWorkers(env Env) error {
	var errs []error
	for _, p := range env.Workers.Processes() {
		errs = append(errs, env.Workers.Signal(p, syscall.SIGCONT))
	}
	return errors.Join(errs...)
}

// pauseHolder is Kleppmann's GC pause: it waits until a client holds the lock and has
// read the register, then freezes it for longer than the lease, so the lease expires,
// another client takes the lock, and the frozen one wakes up to write what it read.
type pauseHolder struct{ anywhere }

func (pauseHolder) Name() string { return "pause-holder" }

func (pauseHolder) Run(ctx context.Context, env Env) error {
	events := env.Subscribe()
	holding := map[int]bool{}
	var quietUntil int64 // events before this time are stale: they arrived during a pause
	for {
		var e history.Event
		select {
		case <-ctx.Done():
			return nil
		case e = <-events:
		}
		switch {
		case e.Func == history.Acquire && e.Type == history.OK:
			holding[e.Process] = true
		case e.Func == history.Release && e.Type == history.Invoke:
			holding[e.Process] = false
		case e.Func == history.Read && e.Type == history.OK && holding[e.Process] && e.Time >= quietUntil:
			if err := pauseWorker(ctx, env, "pause-holder", e.Process); err != nil {
				return err
			}
			// Let the woken client finish and others make progress before the next pause.
			sleep(ctx, env.Interval)
			quietUntil = history.Now()
		}
	}
}

func (pauseHolder) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// pauseClient freezes a random lock client on a seeded schedule, holder or not.
type pauseClient struct{ anywhere }

func (pauseClient) Name() string { return "pause-client" }

func (pauseClient) Run(ctx context.Context, env Env) error {
	return schedule(ctx, env, func(rng *rand.Rand) error {
		running := env.Workers.Processes()
		return pauseWorker(ctx, env, "pause-client", running[rng.Intn(len(running))])
	})
}

func (pauseClient) Heal(_ context.Context, env Env) error { return resumeAllWorkers(env) }

// pauseNode freezes a random lock-service node's server from outside its container (PID 1
// ignores SIGSTOP sent from inside its own namespace).
type pauseNode struct{ anywhere }

func (pauseNode) Name() string { return "pause-node" }

func (pauseNode) Run(ctx context.Context, env Env) error {
	nodes := env.Nodes.Names()
	return schedule(ctx, env, func(rng *rand.Rand) error {
		node := nodes[rng.Intn(len(nodes))]
		if err := env.Nodes.Signal(ctx, node, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("pause node %s: %w", node, err)
		}
		record(env, history.Start, "pause-node", node)
		sleep(ctx, env.Pause)
		// The run's context may be over; the node must be thawed regardless.
		err := env.Nodes.Signal(context.WithoutCancel(ctx), node, syscall.SIGCONT)
		record(env, history.Stop, "pause-node", node)
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

package nemesis

import (
	"context"
	"fmt"
	"syscall"

	"github.com/lockbreaker/lockbreaker/history"
)

// killClient crashes a lock client as a real crash would, with SIGKILL, on a seeded
// schedule. It aims at the client that has waited longest for the lock, so the crash
// lands mid-operation: that acquire becomes indeterminate, and a new worker takes the
// slot under a new process number. A lock the dead client held is freed only by its
// lease or session running out; the seed claims ZooKeeper frees it safely, and this shows
// whether it does. With no client waiting it kills one at random. On a written schedule it
// kills the step's target at the step's moment.
type killClient struct{ anywhere }

func init() { register(func() kind { return killClient{} }) }

func (killClient) Kind() history.FaultKind { return history.KillClient }
func (killClient) scripting() Scripting    { return Scripting{Clients: true} }

func (killClient) Run(ctx context.Context, env Env) error {
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(d draw) error {
		victim, ok := 0, false
		if d.target < 0 {
			victim, ok = longestWaiting(w.waiting)
		}
		if !ok {
			if victim, ok = randomClient(env, d); !ok {
				return nil // no client running now
			}
		}
		target := history.TargetOfClient(victim)
		if err := env.Workers.Signal(victim, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s: %w", target, err)
		}
		// A crash is a moment, not a window: it starts and ends at once.
		record(env, history.Start, history.KillClient.Name, target)
		record(env, history.Stop, history.KillClient.Name, target)
		delete(w.waiting, victim)
		return nil
	})
}

// longestWaiting is the process whose acquire has been open longest.
func longestWaiting(waiting map[int]int64) (int, bool) {
	victim, since, found := 0, int64(0), false
	for p, t := range waiting {
		if !found || t < since || t == since && p < victim {
			victim, since, found = p, t, true
		}
	}
	return victim, found
}

// Heal has nothing to undo: the dead stay dead, and their places are taken.
func (killClient) Heal(context.Context, Env) error { return nil }

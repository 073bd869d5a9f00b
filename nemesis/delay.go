package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"

	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// delayClient delays every packet one lock client sends by env.Pause (tc netem in its
// network namespace), on a seeded schedule, for twice that: the network's version of the
// GC pause in Kleppmann's post, a holder whose write reaches the storage after its lease.
type delayClient struct{}

func init() { register(func() kind { return delayClient{} }) }

func (delayClient) Kind() history.FaultKind { return history.Delay }

func (delayClient) Needs() Needs { return Needs{ClientAddrs: true} }

// netem says why packets cannot be delayed here (a variable, so tests need no root).
var netem = clientnet.Netem

func (delayClient) conditions(system.System, int) error { return netem(context.Background()) }

func (delayClient) Run(ctx context.Context, env Env) error {
	if env.Clients == nil {
		return errSharedAddress
	}
	return schedule(ctx, env, func(rng *rand.Rand) error {
		running := env.Workers.Processes()
		p := running[rng.Intn(len(running))]
		target := workerName(p)
		if err := env.Clients.DelayClient(context.WithoutCancel(ctx), p, env.Pause); err != nil {
			return errors.Join(fmt.Errorf("delay %s: %w", target, err), env.Clients.HealClients(context.WithoutCancel(ctx)))
		}
		detail := map[string]string{"delay": env.Pause.String()}
		recordDetail(env, history.Start, history.Delay.Name, detail, target)
		sleep(ctx, 2*env.Pause)
		err := env.Clients.HealClients(context.WithoutCancel(ctx))
		recordDetail(env, history.Stop, history.Delay.Name, detail, target)
		return err
	})
}

func (delayClient) Heal(ctx context.Context, env Env) error {
	if env.Clients == nil {
		return nil
	}
	return env.Clients.HealClients(ctx)
}

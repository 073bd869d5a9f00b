package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// kleppmannClock stages the clock scenario of Kleppmann's "How to do distributed locking"
// against Redlock: with nodes A..E, D and E are unreachable from client 1; client 1 locks
// A, B and C; C's clock jumps forward past the TTL, so C forgets the lock; client 2 locks
// C, D and E; both clients believe they hold the lock.
//
// The clients share one network address here, so "unreachable from client 1" is staged in
// time: the minority (D, E) is cut off from every client until some client ("client 1")
// has been granted the lock by the majority alone, then healed, so the next client to try
// ("client 2") reaches C, D and E. Grants made within a TTL of the cut are ignored: a key
// set on D or E before the cut may still be alive then, while a grant made later came from
// an attempt that started after the cut (an attempt takes less than the TTL, or it does
// not grant), so D and E never saw it. Each round moves C's clock a further
// env.ClockOffset; the clock is put back when the run ends.
type kleppmannClock struct{}

func (kleppmannClock) Name() string { return "kleppmann-clock" }

func (kleppmannClock) Needs() Needs { return Needs{Clocks: true, Network: true} }

func (k kleppmannClock) Available(sys system.System, nodes int) error {
	if !sys.IndependentMajority || nodes < 3 {
		return errors.New("stages Kleppmann's example against a majority of independent nodes: needs --system redlock")
	}
	return k.Needs().available(sys)
}

func (kleppmannClock) Run(ctx context.Context, env Env) (err error) {
	net, err := networkOf(env)
	if err != nil {
		return err
	}
	clocks, err := clocksOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	if len(nodes) < 3 {
		return fmt.Errorf("kleppmann-clock needs at least 3 nodes, got %d", len(nodes))
	}
	majority := system.Majority(len(nodes))
	c, minority := nodes[majority-1], nodes[majority:]
	events := env.Subscribe()
	var bumped time.Duration
	defer func() {
		if bumped != 0 {
			err = errors.Join(err, clocks.SetClock(context.WithoutCancel(ctx), c, 0))
			recordDetail(env, history.Stop, "clock-bump", map[string]string{"offset": offsetText(0), "furthest": offsetText(bumped)}, c)
		}
	}()
	for round := 1; ; round++ {
		sleep(ctx, env.Interval)
		if ctx.Err() != nil {
			return nil
		}
		g := grudge{}
		for _, node := range minority {
			g[node] = []string{Clients}
		}
		fault := "partition-clients-from " + g.String()
		if err := cut(context.WithoutCancel(ctx), net, g); err != nil {
			return errors.Join(err, net.HealNetwork(context.WithoutCancel(ctx)))
		}
		record(env, history.Start, fault, minority...)
		cutAt := history.Now()
		client1, ok := awaitGrant(ctx, events, cutAt+env.TTL.Nanoseconds())
		// Client 1 holds the lock only for as long as it works: jump C's clock and let the
		// clients reach D and E again at the same moment.
		var clockErr error
		var wg sync.WaitGroup
		if ok {
			if bumped == 0 {
				recordDetail(env, history.Start, "clock-bump", map[string]string{"offset": offsetText(env.ClockOffset)}, c)
			}
			bumped += env.ClockOffset
			wg.Add(1)
			go func() {
				defer wg.Done()
				clockErr = clocks.SetClock(context.WithoutCancel(ctx), c, bumped)
			}()
		}
		err = net.HealNetwork(context.WithoutCancel(ctx))
		wg.Wait()
		err = errors.Join(err, clockErr)
		record(env, history.Stop, fault, minority...)
		if err != nil || !ok {
			return err
		}
		awaitRelease(ctx, events, client1)
	}
}

// awaitGrant waits for an acquire that succeeded at or after notBefore and returns the
// process that made it.
func awaitGrant(ctx context.Context, events <-chan history.Event, notBefore int64) (int, bool) {
	for {
		select {
		case <-ctx.Done():
			return 0, false
		case e := <-events:
			if e.Func == history.Acquire && e.Type == history.OK && e.Time >= notBefore {
				return e.Process, true
			}
		}
	}
}

// awaitRelease waits until process p starts releasing the lock.
func awaitRelease(ctx context.Context, events <-chan history.Event, p int) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			if e.Process == p && e.Func == history.Release {
				return
			}
		}
	}
}

func (kleppmannClock) Heal(ctx context.Context, env Env) error {
	return errors.Join(partition{}.Heal(ctx, env), clockFault{}.Heal(ctx, env))
}

package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
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
// When the clients have addresses of their own (Env.Clients), it runs as Kleppmann wrote
// it, with every client live at once: a seeded client 1 and D, E cannot reach each other
// while the other clients reach every node; once client 1 has been granted the lock by A,
// B and C, C's clock jumps, and whichever other client tries next ("client 2") is granted
// C, D and E. When the clients share one address, "unreachable from client 1" is staged in
// time instead: the minority is cut off from every client until some client (client 1)
// has been granted the lock by the majority alone, then healed at the moment C's clock
// jumps, so the next client to try reaches C, D and E. Either way grants made within a
// TTL of the cut are ignored: a key set on D or E before the cut may still be alive then,
// while a grant made later came from an attempt that started after the cut (an attempt
// takes less than the TTL, or it does not grant), so D and E never saw it. Each round
// moves C's clock a further env.ClockOffset; the clock is put back when the run ends.
//
// Client 1 must still be working under its lease when client 2 is granted. Jumping a clock
// and healing take a few hundred milliseconds of docker exec, and a client that failed to
// dial D and E waits up to a second more before it dials them again (go-redis), which is
// longer than a holder's usual work. So rather than asking for hand-tuned --ttl and --work,
// the nemesis keeps client 1 in its critical section (SIGSTOP, recorded as the fault
// pause-in-lease) until client 2 has taken the lock and used the storage, and no longer
// than leaves client 1 the time to finish its work within its lease (watcher.pauseInLease):
// the validity its grant states (Redlock clients state it), or else a TTL from when its
// granted attempt began. A pause within the lease breaks no correct lock: the second holder
// is the clock's doing, and the hazard recorded (two-majorities) is client 2's grant within
// client 1's lease.
type kleppmannClock struct{}

func init() { register(func() kind { return kleppmannClock{} }) }

func (kleppmannClock) Kind() history.FaultKind { return history.KleppmannClock }

func (kleppmannClock) Needs() Needs { return Needs{Clocks: true, Network: true} }

func (kleppmannClock) suits(sys system.System, nodes int) error {
	if !sys.IndependentMajority || nodes < 3 {
		return errors.New("stages Kleppmann's example against a majority of independent nodes: needs --system redlock")
	}
	return nil
}

func (k kleppmannClock) Run(ctx context.Context, env Env) (err error) {
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
		return fmt.Errorf("needs at least 3 nodes, got %d", len(nodes))
	}
	majority := system.Majority(len(nodes))
	c, minority := nodes[majority-1], nodes[majority:]
	rng := rand.New(rand.NewSource(env.Seed))
	w := watch(env.Subscribe())
	var bumped time.Duration
	defer func() {
		if bumped != 0 {
			err = errors.Join(err, clocks.SetClock(context.WithoutCancel(ctx), c, 0))
			recordDetail(env, history.Stop, history.ClockBump.Name, map[string]string{"offset": offsetText(0), "furthest": offsetText(bumped)}, c)
		}
	}()
	for round := 1; ; round++ {
		if round > 1 {
			sleep(ctx, env.Interval)
		}
		if ctx.Err() != nil {
			return nil
		}
		g, client1 := grudge{}, -1
		for _, node := range minority {
			g[node] = []string{Clients}
		}
		cutKind := history.PartitionClientsFrom
		if env.Clients != nil {
			running := env.Workers.Processes()
			client1 = running[rng.Intn(len(running))]
			g, cutKind = complete([]string{history.TargetOfClient(client1)}, minority), history.PartitionClientFrom
		}
		fault := cutKind.With(g.String())
		if err := cutGrudge(context.WithoutCancel(ctx), env, net, g); err != nil {
			return errors.Join(err, healNetwork(context.WithoutCancel(ctx), env, net))
		}
		record(env, history.Start, fault, g.targets()...)
		grant, ok := w.awaitGrant(ctx, client1, history.Now()+env.TTL.Nanoseconds())
		healed := false
		heal := func() {
			if !healed {
				healed = true
				err = errors.Join(err, healNetwork(context.WithoutCancel(ctx), env, net))
				record(env, history.Stop, fault, g.targets()...)
			}
		}
		// Jump C's clock; staged, let the clients reach D and E again at the same moment.
		stage := func() {
			var clockErr error
			var wg sync.WaitGroup
			if bumped == 0 {
				recordDetail(env, history.Start, history.ClockBump.Name, map[string]string{"offset": offsetText(env.ClockOffset)}, c)
			}
			bumped += env.ClockOffset
			wg.Go(func() { clockErr = clocks.SetClock(context.WithoutCancel(ctx), c, bumped) })
			if env.Clients == nil {
				heal()
			}
			wg.Wait()
			err = errors.Join(err, clockErr)
		}
		if !ok {
			heal()
			return err
		}
		stop := w.seeTakeovers(env, k.Kind().Name, history.TwoMajorities, grant.Process)
		pauseErr := w.pauseInLease(ctx, env, grant.Process, func() bool {
			stage()
			return err == nil
		})
		stop()
		heal()
		if err = errors.Join(err, pauseErr); err != nil {
			return err
		}
		w.awaitRelease(ctx, grant.Process, takeoverLeases*env.TTL)
	}
}

func (kleppmannClock) Heal(ctx context.Context, env Env) error {
	return errors.Join(partition{}.Heal(ctx, env), clockFault{}.Heal(ctx, env), resumeAllWorkers(env))
}

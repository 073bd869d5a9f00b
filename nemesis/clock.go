package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Clock faults move a node's wall clock with libfaketime inside its container; monotonic
// clocks are never faked, so timers and ZooKeeper's session expiry are unaffected, while
// Redis, which expires keys by wall clock, sees a lease run out early or late. Each fault
// lasts env.Pause and ends with the node back on real time (clock-reset).

// Clocks moves the nodes' wall clocks: a node's clock reads real time plus offset.
type Clocks interface {
	SetClock(ctx context.Context, node string, offset time.Duration) error
	ResetClocks(ctx context.Context) error
}

// strobeStep is how often clock-strobe flips and clock-rate advances the clock.
const strobeStep = 100 * time.Millisecond

// clockFault is one of the clock faults; mode is bump, strobe, rate, or "" for a mix.
type clockFault struct{ mode string }

var clockModes = []string{"bump", "strobe", "rate"}

func (c clockFault) Name() string {
	if c.mode == "" {
		return "clock"
	}
	return "clock-" + c.mode
}

func (clockFault) Needs() Needs { return Needs{Clocks: true} }

func (c clockFault) Available(sys system.System, _ int) error { return c.Needs().available(sys) }

func (c clockFault) Run(ctx context.Context, env Env) error {
	clocks, err := clocksOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	return schedule(ctx, env, func(rng *rand.Rand) error {
		mode := c.mode
		if mode == "" {
			mode = clockModes[rng.Intn(len(clockModes))]
		}
		node := nodes[rng.Intn(len(nodes))]
		offset := env.ClockOffset
		if mode == "bump" && rng.Intn(2) == 0 {
			offset = -offset
		}
		return skewClock(ctx, env, clocks, mode, node, offset)
	})
}

// skewClock applies one clock fault to node for env.Pause and puts the clock back.
//   - bump: jump by offset seconds and stay there;
//   - strobe: flip between +offset and real time every strobeStep;
//   - rate: run env.ClockRate times as fast, emulated by advancing the offset every
//     strobeStep (libfaketime's own rate counts from process start, so it cannot be
//     switched on mid-run without a jump).
func skewClock(ctx context.Context, env Env, clocks Clocks, mode, node string, offset time.Duration) error {
	fault := fmt.Sprintf("clock-%s %+.3gs", mode, offset.Seconds())
	if mode == "rate" {
		fault = fmt.Sprintf("clock-rate x%g", env.ClockRate)
	}
	// The history keeps the offset at the start, the furthest it went, and the reset.
	var furthest time.Duration
	set := func(d time.Duration) error {
		if d.Abs() > furthest.Abs() {
			furthest = d
		}
		return clocks.SetClock(context.WithoutCancel(ctx), node, d)
	}
	start := initialOffset(mode, offset)
	if err := set(start); err != nil {
		return fmt.Errorf("%s on %s: %w", fault, node, err)
	}
	recordDetail(env, history.Start, fault, map[string]string{"offset": offsetText(start)}, node)
	var err error
	if mode != "bump" {
		err = vary(ctx, env.Pause, func(i int) error {
			if mode == "strobe" {
				return set(offset * time.Duration((i+1)%2))
			}
			return set(time.Duration(float64(time.Duration(i)*strobeStep) * (env.ClockRate - 1)))
		})
	} else {
		sleep(ctx, env.Pause)
	}
	furthestText := offsetText(furthest)
	err = errors.Join(err, set(0))
	recordDetail(env, history.Stop, fault, map[string]string{"offset": offsetText(0), "furthest": furthestText}, node)
	return err
}

// offsetText is how the history shows a clock offset: seconds, signed, "+2.000".
func offsetText(d time.Duration) string { return fmt.Sprintf("%+.3f", d.Seconds()) }

func initialOffset(mode string, offset time.Duration) time.Duration {
	if mode == "rate" {
		return 0
	}
	return offset
}

// vary calls step(1), step(2)... every strobeStep for d or until ctx ends.
func vary(ctx context.Context, d time.Duration, step func(int) error) error {
	tick := time.NewTicker(strobeStep)
	defer tick.Stop()
	end := time.After(d)
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-end:
			return nil
		case <-tick.C:
			if err := step(i); err != nil {
				return err
			}
		}
	}
}

func (clockFault) Heal(ctx context.Context, env Env) error {
	clocks, err := clocksOf(env)
	if err != nil {
		return nil // nothing could have been skewed
	}
	return clocks.ResetClocks(ctx)
}

func clocksOf(env Env) (Clocks, error) {
	clocks, ok := env.Nodes.(Clocks)
	if !ok {
		return nil, errors.New("this cluster cannot move its nodes' clocks")
	}
	return clocks, nil
}

func (clockFault) Hazard() history.Hazard { return history.ClockPastLease }

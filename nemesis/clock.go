package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
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

func (c clockFault) Run(ctx context.Context, env Env) error {
	clocks, err := clocksOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(rng *rand.Rand) error {
		mode := c.mode
		if mode == "" {
			mode = clockModes[rng.Intn(len(clockModes))]
		}
		node := nodes[rng.Intn(len(nodes))]
		offset := env.ClockOffset
		if mode == "bump" && rng.Intn(2) == 0 {
			offset = -offset
		}
		return skewClock(ctx, env, w, clocks, mode, node, offset)
	})
}

// skewClock applies one clock fault to node for env.Pause and puts the clock back,
// following the history meanwhile for the hazard: a held lease that node granted, past
// whose end the fault moved node's clock.
//   - bump: jump by offset seconds and stay there;
//   - strobe: flip between +offset and real time every strobeStep;
//   - rate: run env.ClockRate times as fast, emulated by advancing the offset every
//     strobeStep (libfaketime's own rate counts from process start, so it cannot be
//     switched on mid-run without a jump).
func skewClock(ctx context.Context, env Env, w *watcher, clocks Clocks, mode, node string, offset time.Duration) error {
	fault := fmt.Sprintf("clock-%s %+.3gs", mode, offset.Seconds())
	if mode == "rate" {
		fault = fmt.Sprintf("clock-rate x%g", env.ClockRate)
	}
	// The history keeps the offset at the start, the furthest it went, and the reset.
	var furthest time.Duration
	moves := clockMoves{node: node}
	set := func(d time.Duration) error {
		if d.Abs() > furthest.Abs() {
			furthest = d
		}
		err := clocks.SetClock(context.WithoutCancel(ctx), node, d)
		if err == nil {
			moves.set(env, w, fault, d)
		}
		return err
	}
	start := initialOffset(mode, offset)
	if err := set(start); err != nil {
		return fmt.Errorf("%s on %s: %w", fault, node, err)
	}
	recordDetail(env, history.Start, fault, map[string]string{"offset": offsetText(start)}, node)
	var err error
	if mode != "bump" {
		for i := 1; err == nil && w.wait(ctx, strobeStep) && time.Duration(i)*strobeStep < env.Pause; i++ {
			if mode == "strobe" {
				err = set(offset * time.Duration((i+1)%2))
			} else {
				err = set(time.Duration(float64(time.Duration(i)*strobeStep) * (env.ClockRate - 1)))
			}
		}
	} else {
		w.wait(ctx, env.Pause)
	}
	furthestText := offsetText(furthest)
	err = errors.Join(err, set(0))
	recordDetail(env, history.Stop, fault, map[string]string{"offset": offsetText(0), "furthest": furthestText}, node)
	return err
}

// clockMoves follows one node's clock offset through a fault, for its hazard.
type clockMoves struct {
	node string
	// changes are the offsets the node had, from when on.
	changes []offsetChange
	// served watches the grants (by index) already recorded as outrun, for an answer by
	// the node while its clock is past their lease.
	served map[int]*served
}

type offsetChange struct {
	at     int64
	offset time.Duration
}

// at is the node's offset at time t: 0 before the fault began.
func (m *clockMoves) at(t int64) time.Duration {
	var offset time.Duration
	for _, c := range m.changes {
		if c.at <= t {
			offset = c.offset
		}
	}
	return offset
}

// set notes the node's new offset d and records clock-past-lease for every grant the node
// made (a grant naming its nodes names it; any grant when they do not) still held, whose
// lease the clock has been moved past since the grant: a lease that ends in less than the
// clock moved forward since it was granted has already ended on the node's clock. From
// then on, for as long as the clock stays past that lease, the grant's served watch takes
// the node's answers to other clients as its hazard made real (clock-served).
func (m *clockMoves) set(env Env, w *watcher, fault string, d time.Duration) {
	w.catchUp() // the holders as they are now, not as last heard
	now := history.Now()
	m.changes = append(m.changes, offsetChange{now, d})
	for _, s := range m.served {
		s.end(m.node, now)
	}
	for p, grant := range w.holding {
		named := grant.Detail[grantNodes]
		if named != "" && !slices.Contains(strings.Split(named, ","), m.node) {
			continue
		}
		moved := d - m.at(grant.Time)
		if left := time.Duration(w.leaseEnd(p, env.TTL) - now); moved <= 0 || moved < left {
			continue
		}
		if m.served[grant.Index] == nil {
			if m.served == nil {
				m.served = map[int]*served{}
			}
			m.served[grant.Index] = w.watchServed(env, fault, history.ClockServed, grant)
			recordHazard(env, fault, history.ClockPastLease, now, map[string]string{"grant": grantText(grant),
				"moved": offsetText(moved), "lease left": time.Duration(w.leaseEnd(p, env.TTL) - now).Round(time.Millisecond).String()},
				m.node, workerName(p))
		}
		m.served[grant.Index].begin(m.node, now)
	}
}

// offsetText is how the history shows a clock offset: seconds, signed, "+2.000".
func offsetText(d time.Duration) string { return fmt.Sprintf("%+.3f", d.Seconds()) }

func initialOffset(mode string, offset time.Duration) time.Duration {
	if mode == "rate" {
		return 0
	}
	return offset
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

func (clockFault) Hazard() history.Hazard { return history.ClockServed }

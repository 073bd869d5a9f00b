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
// ends with the node back on real time. clock-bump is directed unless env.Undirected: it
// jumps a node of a holder's grant ahead while the holder, stopped right after its read,
// is kept within its lease (bumpInLease); the others, and clock-bump undirected, fire on
// their schedule for env.Pause.

// strobeStep is how often clock-strobe flips and clock-rate advances the clock.
const strobeStep = 100 * time.Millisecond

// clockFault is one of the clock faults: its mode is the kind of each fault, clock-bump,
// clock-strobe or clock-rate, or clock for a mix of them.
type clockFault struct{ mode history.FaultKind }

// clockModes are the kinds a mix picks from.
var clockModes = []history.FaultKind{history.ClockBump, history.ClockStrobe, history.ClockRate}

func init() {
	for _, mode := range append([]history.FaultKind{history.Clock}, clockModes...) {
		register(func() kind { return clockFault{mode} })
	}
}

func (c clockFault) Kind() history.FaultKind { return c.mode }

func (clockFault) Needs() Needs { return Needs{Clocks: true} }

func (c clockFault) Run(ctx context.Context, env Env) error {
	clocks, err := clocksOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	if c.mode == history.ClockBump && !env.Undirected {
		rng := rand.New(rand.NewSource(env.Seed))
		return afterHolderReads(ctx, env, func(w *watcher, holder int, _ func()) error {
			granted := grantedBy(w.holding[holder], nodes, env.IndependentMajority)
			if len(granted) == 0 {
				granted = nodes
			}
			return bumpInLease(ctx, env, w, clocks, holder, granted[rng.Intn(len(granted))])
		})
	}
	w := watch(env.Subscribe())
	return w.schedule(ctx, env, func(rng draw) error {
		mode := c.mode
		if mode == history.Clock {
			mode = clockModes[rng.Intn(len(clockModes))]
		}
		node := nodes[rng.Intn(len(nodes))]
		offset := env.ClockOffset
		if mode == history.ClockBump && rng.Intn(2) == 0 {
			offset = -offset
		}
		return skewClock(ctx, env, w, clocks, mode, node, offset)
	})
}

// bumpInLease is clock-bump directed: holder p, stopped right after its read, is kept in
// its critical section (pauseInLease) while node, one that granted its lock, jumps
// env.ClockOffset ahead, past the lease it granted, until another client has taken the
// lock over or p's lease is nearly over; then p is let go and the clock put back. A node
// that expires leases by its wall clock (Redis) hands the lock on meanwhile.
func bumpInLease(ctx context.Context, env Env, w *watcher, clocks Clocks, p int, node string) error {
	s := newSkew(env, w, clocks, history.ClockBump, node, env.ClockOffset)
	var startErr error
	pauseErr := w.pauseInLease(ctx, env, p, func() bool {
		startErr = s.start(ctx, env.ClockOffset)
		return startErr == nil
	})
	if startErr != nil {
		return errors.Join(startErr, pauseErr)
	}
	return errors.Join(pauseErr, s.stop(ctx))
}

// skewClock applies one clock fault to node for env.Pause and puts the clock back,
// following the history meanwhile for the hazard: a held lease that node granted, past
// whose end the fault moved node's clock.
//   - bump: jump by offset seconds and stay there;
//   - strobe: flip between +offset and real time every strobeStep;
//   - rate: run env.ClockRate times as fast, emulated by advancing the offset every
//     strobeStep (libfaketime's own rate counts from process start, so it cannot be
//     switched on mid-run without a jump).
func skewClock(ctx context.Context, env Env, w *watcher, clocks Clocks, mode history.FaultKind, node string, offset time.Duration) error {
	s := newSkew(env, w, clocks, mode, node, offset)
	if err := s.start(ctx, initialOffset(mode, offset)); err != nil {
		return err
	}
	var err error
	if mode != history.ClockBump {
		for i := 1; err == nil && w.wait(ctx, strobeStep) && time.Duration(i)*strobeStep < env.Pause; i++ {
			if mode == history.ClockStrobe {
				err = s.set(ctx, offset*time.Duration((i+1)%2))
			} else {
				err = s.set(ctx, time.Duration(float64(time.Duration(i)*strobeStep)*(env.ClockRate-1)))
			}
		}
	} else {
		w.wait(ctx, env.Pause)
	}
	return errors.Join(err, s.stop(ctx))
}

// skew is one clock fault on one node: the offsets it sets, recorded as the history
// keeps them (the offset at the start, the furthest it went, and the reset), and followed
// for the hazard.
type skew struct {
	env      Env
	w        *watcher
	clocks   Clocks
	fault    string
	moves    clockMoves
	furthest time.Duration
}

func newSkew(env Env, w *watcher, clocks Clocks, mode history.FaultKind, node string, offset time.Duration) *skew {
	fault := mode.With(fmt.Sprintf("%+.3gs", offset.Seconds()))
	if mode == history.ClockRate {
		fault = mode.With(fmt.Sprintf("x%g", env.ClockRate))
	}
	return &skew{env: env, w: w, clocks: clocks, fault: fault, moves: clockMoves{node: node}}
}

// set moves the node's clock to real time plus d.
func (s *skew) set(ctx context.Context, d time.Duration) error {
	if d.Abs() > s.furthest.Abs() {
		s.furthest = d
	}
	if err := s.clocks.SetClock(context.WithoutCancel(ctx), s.moves.node, d); err != nil {
		return fmt.Errorf("%s on %s: %w", s.fault, s.moves.node, err)
	}
	s.moves.set(s.env, s.w, s.fault, d)
	return nil
}

// start sets the fault's first offset d and records its start.
func (s *skew) start(ctx context.Context, d time.Duration) error {
	if err := s.set(ctx, d); err != nil {
		return err
	}
	recordDetail(s.env, history.Start, s.fault, map[string]string{"offset": offsetText(d)}, s.moves.node)
	return nil
}

// stop puts the node back on real time and records the fault's end.
func (s *skew) stop(ctx context.Context) error {
	furthest := offsetText(s.furthest)
	err := s.set(ctx, 0)
	recordDetail(s.env, history.Stop, s.fault, map[string]string{"offset": offsetText(0), "furthest": furthest}, s.moves.node)
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
				m.node, history.TargetOfClient(p))
		}
		m.served[grant.Index].begin(m.node, now)
	}
}

// offsetText is how the history shows a clock offset: seconds, signed, "+2.000".
func offsetText(d time.Duration) string { return fmt.Sprintf("%+.3f", d.Seconds()) }

func initialOffset(mode history.FaultKind, offset time.Duration) time.Duration {
	if mode == history.ClockRate {
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
	if env.clocks != nil {
		return env.clocks, nil
	}
	clocks, ok := env.Nodes.(Clocks)
	if !ok {
		return nil, errors.New("this cluster cannot move its nodes' clocks")
	}
	return clocks, nil
}

// clockSums is how the parts of a composition share the nodes' clocks: a node's clock reads
// real time plus the sum of the offsets every part has set on it, so two faults striking one
// node at once add up (clock-bump's jump, then clock-rate's running ahead of it) instead of
// each undoing the other's, and each part's reset takes back only its own. The offsets are
// written one at a time, so the last written is the latest sum.
type clockSums struct {
	clocks Clocks
	parts  int
	// turn is held by the part setting a clock (a channel of one: a wait for it is one a
	// test's synctest bubble sees as blocked); it guards offsets.
	turn    chan struct{}
	offsets map[string][]time.Duration // by node, by part
}

func newClockSums(clocks Clocks, parts int) *clockSums {
	return &clockSums{clocks: clocks, parts: parts, turn: make(chan struct{}, 1), offsets: map[string][]time.Duration{}}
}

// partClocks is part's view of the shared clocks.
type partClocks struct {
	sums *clockSums
	part int
}

func (p partClocks) SetClock(ctx context.Context, node string, offset time.Duration) error {
	s := p.sums
	s.turn <- struct{}{}
	defer func() { <-s.turn }()
	offsets := s.offsets[node]
	if offsets == nil {
		offsets = make([]time.Duration, s.parts)
		s.offsets[node] = offsets
	}
	offsets[p.part] = offset
	var sum time.Duration
	for _, d := range offsets {
		sum += d
	}
	return s.clocks.SetClock(ctx, node, sum)
}

// ResetClocks takes back every offset this part set.
func (p partClocks) ResetClocks(ctx context.Context) error {
	p.sums.turn <- struct{}{}
	var moved []string
	for node, offsets := range p.sums.offsets {
		if offsets[p.part] != 0 {
			moved = append(moved, node)
		}
	}
	<-p.sums.turn
	slices.Sort(moved)
	var errs []error
	for _, node := range moved {
		errs = append(errs, p.SetClock(ctx, node, 0))
	}
	return errors.Join(errs...)
}

package hunt

import (
	"cmp"
	"math"
	"math/rand"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Space is what a trial's schedule is drawn from: the faults, when they may begin, whom
// they may strike and how long they may last.
type Space struct {
	// Faults are the nemeses a step may be a fault of, and Takes what more of a step each
	// follows (none when it is not there).
	Faults []string
	Takes  map[string]Takes
	// Span is the trial's time limit: a step begins within it.
	Span time.Duration
	// Targets is how many victims a step's target tells apart (spec.Step.Target is taken
	// modulo the number the fault chooses from, so a multiple of each is fair to all).
	Targets int
	// Shortest and Longest bound a step's length.
	Shortest, Longest time.Duration
	// Lease is the lock's TTL, the scale a fault's length matters on.
	Lease time.Duration
	// MaxSteps bounds a schedule's steps.
	MaxSteps int
	// Extends says the holders extend their leases, so a step may wait for an extend.
	Extends bool
	// Aim is what the hunt looks for: the states a steered step waits for are those in
	// which a fault comes near it.
	Aim Aim
}

// NewSpace is the space of a trial of base with faults, which take what takes says, for a
// hunt that looks for what aim says: lengths from a tenth of the TTL to three TTLs (within
// the time limit), targets telling apart every client and every node.
func NewSpace(base spec.Spec, faults []string, takes map[string]Takes, nodes int, aim Aim) Space {
	ttl := base.TTL.Std()
	return Space{
		Faults:   faults,
		Takes:    takes,
		Span:     base.TimeLimit.Std(),
		Targets:  max(1, base.Clients*max(1, nodes)),
		Shortest: max(time.Millisecond, ttl/10),
		Longest:  min(3*ttl, base.TimeLimit.Std()),
		Lease:    ttl,
		MaxSteps: 3,
		Extends:  base.ExtendEvery > 0,
		Aim:      aim,
	}
}

// fresh draws a steered schedule afresh: one to MaxSteps steps, each a fault, moment,
// target and length drawn evenly (the length evenly on a log scale, so short and long are
// as likely), and, where its fault takes them, a state of the lock's business its victim
// must be in (or none) and whether it holds on until a takeover, drawn evenly too. Steered
// by what the lock's clients do, a step finds a waiter or a holder in a run that goes
// otherwise, as a step at a moment alone may not.
func (sp Space) fresh(rng *rand.Rand) []spec.Step {
	steps := sp.blind(rng)
	for i := range steps {
		sp.restate(&steps[i], rng)
		sp.rehold(&steps[i], rng)
	}
	return steps
}

// blind draws a schedule as Jepsen's nemesis does, blind to what the clients do: its
// steps' moments, targets and lengths only. It is what random search draws.
func (sp Space) blind(rng *rand.Rand) []spec.Step {
	steps := make([]spec.Step, 1+rng.Intn(sp.MaxSteps))
	for i := range steps {
		steps[i] = spec.Step{
			Fault:  sp.Faults[rng.Intn(len(sp.Faults))],
			At:     spec.Duration(rng.Int63n(int64(sp.Span))),
			Target: rng.Intn(sp.Targets),
			For:    spec.Duration(sp.length(rng)),
		}
	}
	return sp.tidy(steps)
}

// step draws one steered step, as fresh does.
func (sp Space) step(rng *rand.Rand) spec.Step {
	st := spec.Step{
		Fault:  sp.Faults[rng.Intn(len(sp.Faults))],
		At:     spec.Duration(rng.Int63n(int64(sp.Span))),
		Target: rng.Intn(sp.Targets),
		For:    spec.Duration(sp.length(rng)),
	}
	sp.restate(&st, rng)
	sp.rehold(&st, rng)
	return st
}

// states are the states a steered step may wait for its victim to be in: none ("", its
// moment's), or one in which a fault comes near what the hunt looks for (Aim.near).
func (sp Space) states() []history.ClientState {
	states := []history.ClientState{""}
	for _, st := range history.ClientStates {
		if sp.Aim.near(st) && (st != history.Extending || sp.Extends) {
			states = append(states, st)
		}
	}
	return states
}

// restate draws the state st waits for, if its fault takes one.
func (sp Space) restate(st *spec.Step, rng *rand.Rand) {
	st.When = ""
	if sp.Takes[st.Fault].State {
		states := sp.states()
		st.When = states[rng.Intn(len(states))]
	}
}

// rehold draws whether st holds on until a takeover, if its fault can.
func (sp Space) rehold(st *spec.Step, rng *rand.Rand) {
	st.Until = ""
	if sp.Takes[st.Fault].HoldOn {
		st.Until = []spec.Until{"", spec.Takeover}[rng.Intn(2)]
	}
}

// Takes is what more of a step a fault follows than its moment, target and length: the
// caller's to say (the nemeses' Scripting), so that a hunt links no nemesis.
type Takes struct {
	// State: its victim is a lock client, so a step may wait for one in a state.
	State bool
	// HoldOn: a fault of it can hold on until another client took the lock over.
	HoldOn bool
}

// length draws a step's length evenly on a log scale between Shortest and Longest.
func (sp Space) length(rng *rand.Rand) time.Duration {
	lo, hi := math.Log(float64(sp.Shortest)), math.Log(float64(sp.Longest))
	return time.Duration(math.Exp(lo + rng.Float64()*(hi-lo)))
}

// mutate changes one to three things of a schedule that came near (as score says): of a
// step its moment (by up to a twentieth of the span either way), its target, its length
// (half to twice), its fault, the state it waits for, whether it holds on, or a step added
// or taken away. Most changes are of the step that came nearest, and of that one mostly a
// longer length (once to twice, or one to two leases, which every step that came near
// is made too), or the state it waits for made the one its victim was in: its moment and
// target found a client in the lock's business, which waiting for that state finds again
// in a run that goes otherwise, and nearness is mostly how far its length reached into a
// lease. The nearest by the score need not be the one the danger needs (a delayed waiter
// is granted beside others as a rule, a delayed extend only near the danger), so each
// that came near is taken past a lease with it.
func (sp Space) mutate(parent []spec.Step, score Score, rng *rand.Rand) []spec.Step {
	steps := slices.Clone(parent)
	for range changes(rng) {
		i, weights := rng.Intn(len(steps)), evenly
		near, ok := stepOf(steps, score.Nearest)
		if ok && rng.Float64() < focus {
			i, weights = near, nearly
		}
		change := pickChange(weights, rng)
		if change == pastLease && ok && i == near {
			for _, nth := range score.Near {
				if j, ok := stepOf(steps, nth); ok && j != i {
					steps = sp.change(steps, j, pastLease, score.Nearest.Met, rng)
				}
			}
		}
		steps = sp.change(steps, i, change, score.Nearest.Met, rng)
	}
	return sp.tidy(steps)
}

// deepen takes every step of a schedule that came near (as score says) past a lease, one
// that already outlasted one kept as it is, and changes nothing else.
func (sp Space) deepen(parent []spec.Step, score Score, rng *rand.Rand) []spec.Step {
	steps := slices.Clone(parent)
	for _, nth := range score.Near {
		if i, ok := stepOf(steps, nth); ok && steps[i].For.Std() < sp.Lease {
			steps = sp.change(steps, i, pastLease, nth.Met, rng)
		}
	}
	return sp.tidy(steps)
}

// changes is how many changes a mutation makes: one half the time, two or three the rest,
// so that most children keep most of what made their parent near.
func changes(rng *rand.Rand) int {
	if rng.Intn(2) == 0 {
		return 1
	}
	return 2 + rng.Intn(2)
}

// focus is how often a mutation changes the step that came nearest.
const focus = 0.7

// The changes a mutation makes to a step.
const (
	moveIt = iota
	retarget
	resize
	refault
	addOne
	dropIt
	lengthen
	pastLease
	restate
	rehold
	pin
)

// How often each change is made (by the changes' order): of any step evenly, of the one
// that came nearest mostly a longer length, which reaches further into the lease it met,
// or past it, or the state its victim was in pinned.
var (
	evenly = []int{1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0}
	nearly = []int{2, 1, 2, 1, 2, 0, 6, 6, 1, 2, 6}
)

func pickChange(weights []int, rng *rand.Rand) int {
	n := rng.Intn(sumOf(weights))
	for c, w := range weights {
		if n < w {
			return c
		}
		n -= w
	}
	return len(weights) - 1
}

func sumOf(weights []int) int {
	s := 0
	for _, w := range weights {
		s += w
	}
	return s
}

// stepOf is the index of the step nth came from: the nth of its kind's.
func stepOf(steps []spec.Step, nth Nth) (int, bool) {
	n := 0
	for i, st := range steps {
		if st.Fault != nth.Fault {
			continue
		}
		if n == nth.N {
			return i, true
		}
		n++
	}
	return 0, false
}

// change makes one change to step i of steps; met is the state the nearest fault's victim
// was in, which pin makes the step wait for.
func (sp Space) change(steps []spec.Step, i, change int, met history.ClientState, rng *rand.Rand) []spec.Step {
	st := &steps[i]
	switch change {
	case moveIt:
		shift := time.Duration(rng.Int63n(int64(sp.Span)/10+1)) - sp.Span/20
		st.At = spec.Duration(min(max(0, st.At.Std()+shift), sp.Span-time.Millisecond))
	case retarget:
		if sp.Targets > 1 {
			st.Target = (st.Target + 1 + rng.Intn(sp.Targets-1)) % sp.Targets
		}
	case resize, lengthen:
		scale := math.Exp((rng.Float64()*2 - 1) * math.Ln2) // half to twice
		if change == lengthen {
			scale = math.Exp(rng.Float64() * math.Ln2) // once to twice
		}
		st.For = spec.Duration(min(max(sp.Shortest, time.Duration(float64(st.For)*scale)), sp.Longest))
	case pastLease:
		length := time.Duration(float64(sp.Lease) * (1 + rng.Float64())) // one to two leases
		st.For = spec.Duration(min(max(sp.Shortest, length), sp.Longest))
	case refault:
		st.Fault = sp.Faults[rng.Intn(len(sp.Faults))]
		sp.restate(st, rng)
		sp.rehold(st, rng)
	case restate:
		sp.restate(st, rng)
	case rehold:
		sp.rehold(st, rng)
	case pin:
		if sp.Takes[st.Fault].State {
			st.When = met
		}
	case addOne:
		if len(steps) < sp.MaxSteps {
			steps = append(steps, sp.step(rng))
		}
	case dropIt:
		if len(steps) > 1 {
			steps = slices.Delete(steps, i, i+1)
		}
	}
	return steps
}

// tidy rounds moments and lengths to the millisecond, which the command that runs a trial
// again writes, and puts the steps in the order of their moments.
func (sp Space) tidy(steps []spec.Step) []spec.Step {
	for i := range steps {
		steps[i].At = spec.Duration(steps[i].At.Std().Round(time.Millisecond))
		steps[i].For = spec.Duration(max(time.Millisecond, steps[i].For.Std().Round(time.Millisecond)))
	}
	slices.SortStableFunc(steps, func(a, b spec.Step) int { return cmp.Compare(a.At, b.At) })
	return steps
}

package history

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// Op is an operation: an invocation paired with its completion. Complete is nil when the
// history ends before the operation did (the run crashed, or a worker was lost); such an
// operation is indeterminate, like an Info one.
type Op struct {
	Invoke   Event
	Complete *Event
}

// Type is the operation's outcome; Info when it never completed.
func (o *Op) Type() Type {
	if o.Complete == nil {
		return Info
	}
	return o.Complete.Type
}

// Process is the client that ran the operation.
func (o *Op) Process() int { return o.Invoke.Process }

// Func is what the operation did.
func (o *Op) Func() Func { return o.Invoke.Func }

// Value is the completion's value when it has one, else the invocation's.
func (o *Op) Value() *int64 {
	if o.Complete != nil && o.Complete.Value != nil {
		return o.Complete.Value
	}
	return o.Invoke.Value
}

// Token is the completion's token when it has one (an acquire's grant), else the invocation's.
func (o *Op) Token() *int64 {
	if o.Complete != nil && o.Complete.Token != nil {
		return o.Complete.Token
	}
	return o.Invoke.Token
}

// Window is when op can have taken effect: from its invocation (or EffectFrom) to its
// completion (or EffectTo). An operation that never completed has no end: end is 0.
func (o *Op) Window() (start, end int64) {
	start = o.Invoke.Time
	if o.Complete == nil {
		return start, 0
	}
	end = o.Complete.Time
	if o.Complete.EffectFrom != 0 {
		start = o.Complete.EffectFrom
	}
	if o.Complete.EffectTo != 0 {
		end = o.Complete.EffectTo
	}
	return start, end
}

// Pair matches every invocation with the next completion of the same process and returns
// the client operations (nemesis events excluded) ordered by invocation time. Events may
// come from anywhere (a parsed file, a test, a fuzzer), so Pair refuses, naming the event,
// what Parse refuses except duplicate indexes: the checkers then decide nothing from them.
func Pair(events []Event) ([]Op, error) {
	invocations, completions := 0, 0
	for _, e := range events {
		switch {
		case e.Process == NemesisProcess:
		case e.Type == Invoke:
			invocations++
		default:
			completions++
		}
	}
	ops := make([]Op, 0, invocations)
	done := make([]Event, 0, completions) // the completions, in one allocation
	p := pairing{name: func(i int) string { return fmt.Sprintf("event #%d", ops[i].Invoke.Index) }}
	for _, e := range events {
		err := e.validate()
		var i int
		if err == nil {
			i, err = p.next(e, len(ops))
		}
		if err != nil {
			return nil, fmt.Errorf("event #%d: %w", e.Index, err)
		}
		switch {
		case e.Process == NemesisProcess:
		case e.Type == Invoke:
			ops = append(ops, Op{Invoke: e})
		default:
			done = append(done, e)
			ops[i].Complete = &done[len(done)-1]
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke.Time < ops[j].Invoke.Time })
	return ops, nil
}

// maxTime bounds event times well below the int64 limit: checkers take the last time + 1
// as "infinity" and subtract times, which must not overflow.
const maxTime = 1 << 62

// validate checks what an event must be on its own.
func (e Event) validate() error {
	switch e.Type {
	case Invoke, OK, Fail, Info:
	default:
		return fmt.Errorf("unknown event type %s", quote.Short(e.Type))
	}
	switch {
	case e.Func == "":
		return errors.New("event has no f")
	case e.Process == NemesisProcess && !slices.Contains(nemesisFuncs, e.Func):
		return fmt.Errorf("unknown nemesis operation %s (want start, stop, roles, hazard or not-serving)", quote.Short(e.Func))
	case e.Process != NemesisProcess && !slices.Contains(clientFuncs, e.Func):
		return fmt.Errorf("unknown operation %s (want acquire, release, extend, read, write or final-read)", quote.Short(e.Func))
	case e.Func == HazardFunc && e.Hazard == "":
		return errors.New("hazard event names no hazard")
	case e.Func != HazardFunc && e.Hazard != "":
		return fmt.Errorf("hazard %s on a %s event (hazards belong on f hazard)", quote.Short(e.Hazard), e.Func)
	}
	if e.Error != "" && !slices.Contains(errorKinds, e.Error) {
		return fmt.Errorf("unknown error kind %s (want one of %v; free text goes in message)", quote.Short(e.Error), errorKinds)
	}
	if e.Type == Invoke && (e.EffectFrom != 0 || e.EffectTo != 0) {
		return errors.New("effect_from and effect_to belong on a completion, not an invocation")
	}
	switch {
	case e.Time == 0:
		return errors.New("event has no time")
	case e.Time < 0 || e.Time >= maxTime:
		return fmt.Errorf("time %d out of range (want 0 < time < 2^62)", e.Time)
	}
	return nil
}

var (
	clientFuncs  = []Func{Acquire, Release, Extend, Read, Write, FinalRead}
	nemesisFuncs = []Func{Start, Stop, Roles, HazardFunc, NotServing}
)

// pairing follows a history's events in order and refuses those that do not pair: a
// process's invocation is completed by that process's next completion, with the same f,
// no earlier; nemesis events are not paired.
type pairing struct {
	open ByProcess[pending] // each process's invocation not yet completed
	// name says where the invocation given place at is, for messages ("line 3").
	name func(at int) string
}

// pending is what pairing keeps of an open invocation.
type pending struct {
	f    Func
	time int64
	at   int
}

// next takes the event after those already seen; at is its place, which next returns for
// the invocation a completion completes.
func (p *pairing) next(e Event, at int) (invokedAt int, err error) {
	if e.Process == NemesisProcess {
		return 0, nil
	}
	inv, open := p.open.Get(e.Process)
	if e.Type == Invoke {
		if open {
			return 0, fmt.Errorf("process %d invoked %s before completing its %s (%s)", e.Process, e.Func, inv.f, p.name(inv.at))
		}
		p.open.Set(e.Process, pending{f: e.Func, time: e.Time, at: at})
		return 0, nil
	}
	switch {
	case !open:
		return 0, fmt.Errorf("completion without an invocation (process %d has no open operation)", e.Process)
	case e.Func != inv.f:
		return 0, fmt.Errorf("f %s differs from its invocation's %s (%s)", quote.Short(e.Func), quote.Short(inv.f), p.name(inv.at))
	case e.Time < inv.time:
		return 0, fmt.Errorf("completed at %d, before its invocation at %d (%s)", e.Time, inv.time, p.name(inv.at))
	case e.EffectFrom != 0 && (e.EffectFrom < inv.time || e.EffectFrom > e.Time):
		return 0, fmt.Errorf("effect_from %d outside the operation [%d, %d] (%s)", e.EffectFrom, inv.time, e.Time, p.name(inv.at))
	case e.EffectTo != 0 && (e.EffectTo < max(inv.time, e.EffectFrom) || e.EffectTo > e.Time):
		return 0, fmt.Errorf("effect_to %d outside the operation [%d, %d] or before effect_from (%s)", e.EffectTo, max(inv.time, e.EffectFrom), e.Time, p.name(inv.at))
	}
	p.open.Delete(e.Process)
	return inv.at, nil
}

// Fault is one nemesis fault: from its start to its stop (or the history's end).
type Fault struct {
	Description string
	Targets     []string
	Start, Stop int64
	Healed      bool
}

// Faults pairs nemesis start and stop events by description and targets.
func Faults(events []Event) []Fault {
	var faults []Fault
	open := map[string]int{}
	for _, e := range events {
		if e.Process != NemesisProcess {
			continue
		}
		id := e.Fault + "@" + strings.Join(e.Targets, ",")
		switch e.Func {
		case Start:
			open[id] = len(faults)
			faults = append(faults, Fault{Description: e.Fault, Targets: e.Targets, Start: e.Time, Stop: e.Time})
		case Stop:
			if i, ok := open[id]; ok {
				faults[i].Stop, faults[i].Healed = e.Time, true
				delete(open, id)
			}
		}
	}
	end := Span(events)
	for _, i := range open {
		faults[i].Stop = end
	}
	return faults
}

// RoleChange is one roles event: every node's role from Time on, and the nodes whose
// role had just changed.
type RoleChange struct {
	Time    int64
	Roles   map[string]string
	Changed []string
}

// RoleChanges lists the history's roles events in order.
func RoleChanges(events []Event) []RoleChange {
	var changes []RoleChange
	for _, e := range events {
		if e.Process == NemesisProcess && e.Func == Roles {
			changes = append(changes, RoleChange{Time: e.Time, Roles: e.Detail, Changed: e.Targets})
		}
	}
	return changes
}

// Span is the time of the last event, or 0 for an empty history.
func Span(events []Event) int64 {
	var last int64
	for _, e := range events {
		if e.Time > last {
			last = e.Time
		}
	}
	return last
}

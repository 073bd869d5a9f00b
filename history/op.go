package history

import (
	"sort"
	"strings"
)

// Op is an operation: an invocation paired with its completion. Complete is nil when the
// history ends before the operation did (the run crashed, or a worker was lost); such an
// operation is indeterminate, like an Info one.
type Op struct {
	Invoke   Event
	Complete *Event
}

// Type is the operation's outcome; Info when it never completed.
func (o Op) Type() Type {
	if o.Complete == nil {
		return Info
	}
	return o.Complete.Type
}

// Process is the client that ran the operation.
func (o Op) Process() int { return o.Invoke.Process }

// Func is what the operation did.
func (o Op) Func() Func { return o.Invoke.Func }

// Value is the completion's value when it has one, else the invocation's.
func (o Op) Value() *int64 {
	if o.Complete != nil && o.Complete.Value != nil {
		return o.Complete.Value
	}
	return o.Invoke.Value
}

// Token is the completion's token when it has one (an acquire's grant), else the invocation's.
func (o Op) Token() *int64 {
	if o.Complete != nil && o.Complete.Token != nil {
		return o.Complete.Token
	}
	return o.Invoke.Token
}

// Pair matches every invocation with the next completion of the same process and returns
// the client operations (nemesis events excluded) ordered by invocation time. A completion
// without an invocation is reported as an error, since the history is then corrupt.
func Pair(events []Event) ([]Op, error) {
	open := map[int]int{} // process -> index into ops
	var ops []Op
	for _, e := range events {
		if e.Process == NemesisProcess {
			continue
		}
		switch {
		case e.Type == Invoke:
			if _, busy := open[e.Process]; busy {
				return nil, &CorruptError{Line: e.Index + 1, Reason: "process invoked again before completing its operation"}
			}
			open[e.Process] = len(ops)
			ops = append(ops, Op{Invoke: e})
		case e.IsCompletion():
			i, ok := open[e.Process]
			if !ok {
				return nil, &CorruptError{Line: e.Index + 1, Reason: "completion without an invocation"}
			}
			c := e
			ops[i].Complete = &c
			delete(open, e.Process)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke.Time < ops[j].Invoke.Time })
	return ops, nil
}

// Fault is one nemesis fault: from its start to its stop (or the history's end).
type Fault struct {
	Description string
	Nodes       []string
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
		id := e.Fault + "@" + strings.Join(e.Nodes, ",")
		switch e.Func {
		case Start:
			open[id] = len(faults)
			faults = append(faults, Fault{Description: e.Fault, Nodes: e.Nodes, Start: e.Time, Stop: e.Time})
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

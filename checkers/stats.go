package checkers

// stats: did enough happen for the other verdicts to mean anything? Jepsen has the same
// checker for the same reason. A run in which no acquire succeeded, no storage write was
// accepted, a requested nemesis never injected a fault, or whose nemeses exist to create
// hazards (a takeover while the holder is paused, a lost grant...) none of which ever
// occurred tested nothing, however clean its history looks; Judge turns every pass into
// unknown when this says so. With several targeted nemeses, a pass rests on the dangers
// that came: those that never came are named in a note, and the pass stands.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/history"
)

// stats is the precondition every pass rests on.
var stats = checker{name: Stats, property: PropertyPrecondition, start: func(opts Options) accumulator {
	return &statsState{faultsRequested: opts.FaultsRequested, wanted: opts.Hazards}
}}

// statsState is what stats counts, over the pieces judged so far.
type statsState struct {
	faultsRequested           bool
	wanted                    map[string]history.Hazard // Options.Hazards
	acquired, written, faults int
	hazards                   map[history.Hazard]int
	// faultsOf counts the faults by their kind's name, for the nemesis whose danger never came.
	faultsOf map[string]int
}

func (st *statsState) add(_ context.Context, p part) {
	for i := range p.ops {
		if op := &p.ops[i]; op.Type() == history.OK {
			switch op.Func() {
			case history.Acquire:
				st.acquired++
			case history.Write:
				st.written++
			}
		}
	}
	// A fault is counted by its start, so one that spans two pieces counts once.
	faults := history.Faults(p.events)
	st.faults += len(faults)
	if st.hazards == nil {
		st.hazards, st.faultsOf = map[history.Hazard]int{}, map[string]int{}
	}
	for _, f := range faults {
		if k, ok := history.KindOf(f.Description); ok {
			st.faultsOf[k.Name]++
		}
	}
	for h, n := range history.CountHazards(p.events) {
		st.hazards[h] += n
	}
}

func (st *statsState) result() Result {
	acquired, written, faults, hazards := st.acquired, st.written, st.faults, st.hazards
	r := Result{Counts: map[string]int{"acquires-granted": acquired, "writes-accepted": written, "faults": faults}}
	for h, n := range hazards {
		r.Counts[HazardCount(h)] = n
	}
	var missing []string
	if acquired == 0 {
		missing = append(missing, "no acquire succeeded")
	}
	if written == 0 {
		missing = append(missing, "no storage write was accepted")
	}
	absent := st.absent(faults)
	switch {
	case st.faultsRequested && faults == 0:
		missing = append(missing, "the nemesis injected no fault")
	case len(absent) == len(st.wanted): // none of the dangers came (or none was wanted)
		missing = append(missing, absent...)
	}
	if len(missing) > 0 {
		r.Verdict, r.Summary = Unknown, strings.Join(missing, ", ")
		return r
	}
	r.Verdict = Valid
	r.Summary = fmt.Sprintf("%s granted, %s accepted, %s", plural(acquired, "acquire"), plural(written, "write"), plural(faults, "fault"))
	for _, h := range slices.Sorted(maps.Keys(hazards)) {
		r.Summary += ", " + h.Count(hazards[h])
	}
	if len(absent) > 0 {
		// A pass is a claim about the dangers that came; the others are named, not held against it.
		r.Summary += "; note: " + strings.Join(absent, ", ")
	}
	return r
}

// absent says, for each targeted nemesis whose hazard never came, how many faults it
// injected (of all faults, when none in the history names a declared kind, as histories
// recorded before the kinds were declared do) and that its danger never came; a run in
// which some came is judged on those.
func (st *statsState) absent(faults int) []string {
	var absent []string
	for _, nemesis := range slices.Sorted(maps.Keys(st.wanted)) {
		if h := st.wanted[nemesis]; st.hazards[h] == 0 {
			injected := st.faultsOf[nemesis]
			if len(st.faultsOf) == 0 {
				injected = faults
			}
			m := fmt.Sprintf("%s injected %s and %s", nemesis, plural(injected, "fault"), h.Absent())
			if c := h.Condition(); st.hazards[c] > 0 {
				m += fmt.Sprintf(" (%s, but no other client was answered while it was held: the danger never came)", c.Count(st.hazards[c]))
			}
			absent = append(absent, m)
		}
	}
	return absent
}

// HazardCount is the name under which stats counts a hazard's occurrences.
func HazardCount(h history.Hazard) string { return "hazard " + string(h) }

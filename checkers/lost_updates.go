package checkers

// lost-updates: did the storage keep every increment it acknowledged? Each worker reads the
// counter and writes it plus one while it holds the lock, so with a correct lock the final
// counter F, read by the harness after every client stopped, lies between the acknowledged
// writes W and W plus the indeterminate ones I (each may or may not have landed). F < W
// means acknowledged increments were overwritten; F > W+I means the storage holds
// increments nobody made.
//
// It needs no search, so it gives a verdict where porcupine times out, and it names the
// damage in the unit a user cares about: increments lost.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/history"
)

// lostUpdates compares the final counter with the writes the storage acknowledged.
var lostUpdates = checker{name: LostUpdates, property: PropertyDataSafety, start: func(Options) accumulator {
	return &updatesState{keys: map[string]*keyUpdates{}}
}}

// updatesState is what lostUpdates counted, over the pieces judged so far; the verdict
// is made from it after the last piece, as the final read comes last.
type updatesState struct {
	tl    timeline               // the last piece's
	keys  map[string]*keyUpdates // the keys written or read finally
	stale evidence
	first earliest
}

func (st *updatesState) add(_ context.Context, p part) {
	tl := p.tl
	st.tl = tl
	keys, groups := byKey(p.ops, opKey)
	for _, key := range keys {
		var accepted []*history.Op // the piece's, shared
		k := st.keys[key]
		if k == nil {
			k = &keyUpdates{}
		}
		group := groups[key]
		for i := range group {
			op := &group[i]
			switch {
			case op.Func() == history.Write && op.Type() == history.OK:
				accepted = append(accepted, op)
			case op.Func() == history.Write && op.Type() == history.Info:
				k.unsure++
			case op.Func() == history.FinalRead && op.Type() == history.OK && op.Complete.Value != nil:
				k.final, k.read, k.finalRead = *op.Complete.Value, true, *op.Complete
			}
		}
		if len(accepted)+k.unsure == 0 && !k.read {
			continue // a key that was locked but never written
		}
		st.keys[key] = k
		k.acknowledged += len(accepted)
		sweepAfter(&k.last, accepted, writtenValue, func(w, earlier *history.Op, found bool) {
			if found && writtenValue(w) <= writtenValue(earlier) {
				k.overwrites++
				st.first.see(w.Complete.Time)
				st.stale.addf("stale overwrite: %s wrote %d after %s had written %d: %s",
					processName(w.Process()), writtenValue(w), processName(earlier.Process()), writtenValue(earlier), tl.describe(*w))
			}
		})
	}
}

func (st *updatesState) result() Result {
	tl := st.tl
	var counted, acknowledged, indeterminate, final, lost int
	var damage evidence
	var unread, broken []string
	first := st.first
	for _, key := range slices.Sorted(maps.Keys(st.keys)) {
		k := st.keys[key]
		unsure, overwrites, finalValue, read, finalRead := k.unsure, k.overwrites, k.final, k.read, &k.finalRead
		counted++
		acknowledged += k.acknowledged
		indeterminate += unsure
		// Increments only grow the counter: an acknowledged write that did not, wrote over
		// increments, even when an indeterminate write later made the final count add up.
		if overwrites > 0 {
			broken = append(broken, key)
			lost += overwrites
		}
		if !read {
			unread = append(unread, key)
			continue
		}
		w, f := int64(k.acknowledged), finalValue
		final += int(f)
		switch {
		case f < w && overwrites > 0:
			lost += max(int(w-f)-overwrites, 0)
			damage.addf("key %s: final counter %d, %d acknowledged increments: %d lost", key, f, w, w-f)
		case f < w:
			first.see(finalRead.Time)
			lost += int(w - f)
			broken = append(broken, key)
			damage.addf("key %s: final counter %d, %d acknowledged increments: %d lost", key, f, w, w-f)
		case f > w+int64(unsure):
			first.see(finalRead.Time)
			broken = append(broken, key)
			damage.addf("key %s: final counter %d, but only %d acknowledged and %d indeterminate increments: %d that no client made",
				key, f, w, unsure, f-w-int64(unsure))
		}
	}

	r := Result{
		Evidence: append(damage.list(), st.stale.list()...),
		Counts:   map[string]int{"acknowledged": acknowledged, "indeterminate": indeterminate, "final": final, "lost": lost},
	}
	r.FirstViolation = first.since(tl)
	switch {
	case len(broken) > 0 && lost > 0:
		r.Verdict, r.Summary = Invalid, plural(lost, "acknowledged increment")+" lost"
	case len(broken) > 0:
		r.Verdict, r.Summary = Invalid, "final counter higher than every write could make it on key "+strings.Join(broken, ", ")
	case len(unread) > 0 || counted == 0:
		r.Verdict, r.Summary = Unknown, "no final read"
		if len(unread) > 0 {
			r.Summary += " of key " + strings.Join(unread, ", ")
		}
	default:
		r.Verdict, r.Summary = Valid, fmt.Sprintf("no lost updates: %s, final counter %d (%d indeterminate)",
			plural(acknowledged, "acknowledged increment"), final, indeterminate)
	}
	return r
}

// keyUpdates is one key's writes and final read.
type keyUpdates struct {
	acknowledged, unsure, overwrites int
	last                             best // the highest value acknowledged
	final                            int64
	read                             bool
	finalRead                        history.Event
}

func writtenValue(op *history.Op) int64 { return valueOf(op.Invoke.Value) }

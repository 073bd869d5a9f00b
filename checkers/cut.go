package checkers

// Where a history may be cut (the rule and why it is sound are in stream.go).

import (
	"math"

	"github.com/lockbreaker/lockbreaker/history"
)

// never is the end of an operation that may still take effect at any time.
const never = math.MaxInt64

// findCut finds the latest time t at which ops (the operations since the last cut, in the
// order invoked) may be cut, and each key's storage there; storage is each key's at the
// last cut.
func findCut(ops []*history.Op, storage map[string]guarded) (t int64, after map[string]guarded, ok bool) {
	ends := blockingEnds(ops)
	starts := make([]int64, len(ops))
	for i, op := range ops {
		starts[i], _ = op.Window()
	}
	order := orderBy(starts)
	start := func(n int) int64 { return starts[order[n]] }

	var keys map[string]*storageFacts
	unknown := 0 // keys whose storage is not known
	// see takes in the n-th operation to start.
	see := func(n int) {
		op := ops[order[n]]
		k := keys[op.Invoke.Key]
		if k == nil {
			k = &storageFacts{known: true, lastWrite: math.MinInt64}
			keys[op.Invoke.Key] = k
		}
		wasKnown := k.known && k.fenceKnown()
		k.see(op, start(n), ends[order[n]])
		if isKnown := k.known && k.fenceKnown(); wasKnown != isKnown {
			if isKnown {
				unknown--
			} else {
				unknown++
			}
		}
	}
	reset := func() {
		keys, unknown = map[string]*storageFacts{}, 0
		for key, g := range storage {
			keys[key] = &storageFacts{state: g, known: true, lastWrite: math.MinInt64}
		}
	}

	reset()
	cut := 0 // the operations before the latest cut found
	reach := int64(math.MinInt64)
	for n, i := range order {
		if n > 0 && start(n-1) < start(n) && reach < start(n) && unknown == 0 {
			cut, t, ok = n, start(n)-1, true
		}
		reach = max(reach, ends[i])
		see(n)
	}
	if !ok {
		return 0, nil, false
	}
	// The storage at the cut: its operations taken in again.
	reset()
	for n := range cut {
		see(n)
	}
	after = make(map[string]guarded, len(keys))
	for key, k := range keys {
		after[key] = k.state
	}
	return t, after, true
}

// storageFacts is what is known of a key's register and fence, following its operations
// in the order their windows start.
type storageFacts struct {
	state     guarded // holder aside
	known     bool    // whether state.register is the register in every legal order
	lastWrite int64   // the latest end of a write that may have taken effect
	// unsure is the highest token of an indeterminate write (unsureSeen: there was one),
	// which may have raised the fence.
	unsure     int64
	unsureSeen bool
}

func (k *storageFacts) fenceKnown() bool {
	return !k.unsureSeen || k.state.fenced && k.unsure <= k.state.highest
}

// see takes in the next operation, whose window is [start, end].
func (k *storageFacts) see(op *history.Op, start, end int64) {
	o := outcomeOf(*op)
	f := op.Func()
	switch {
	case f == history.Write && o != rejected:
		// The register is this write's value when it began after every other write ended.
		k.known = o == succeeded && start > k.lastWrite
		k.state.register = valueOf(op.Invoke.Value)
		k.lastWrite = max(k.lastWrite, end)
	case (f == history.Read || f == history.FinalRead) && o == succeeded:
		if start > k.lastWrite {
			k.known, k.state.register = true, valueOf(op.Complete.Value)
		}
	default:
		return
	}
	t := op.Invoke.Token
	switch {
	case t == nil || f == history.FinalRead:
	case o == succeeded:
		// An accepted request raised the fence to its token, or the history is illegal.
		if !k.state.fenced || *t > k.state.highest {
			k.state.highest, k.state.fencer, k.state.fenced = *t, op.Process(), true
		}
	default:
		k.unsure, k.unsureSeen = max(k.unsure, *t), true
	}
}

// blockingEnds is, for each operation, until when it forbids a cut: when its window ends,
// for an ok acquire when its process's release of the key ended, never for what may still
// take effect, and its start for what changes no verdict (see stream.go).
func blockingEnds(ops []*history.Op) []int64 {
	ends := make([]int64, len(ops))
	type holding struct {
		process int
		key     string
	}
	held := map[holding]int{} // the ok acquire waiting for its release
	byKey := map[string]*settled{}
	for i, op := range ops {
		start, end := op.Window()
		o := outcomeOf(*op)
		h := holding{op.Process(), op.Invoke.Key}
		switch f := op.Func(); {
		case op.Complete == nil: // it may yet complete in any way
			end = never
		case f == history.Acquire && o == succeeded:
			held[h] = i
			end = never // until its release ends
		case f == history.Acquire, o == rejected, f == history.Read && o == indeterminate:
			end = start
		case f == history.Release:
			if a, ok := held[h]; ok {
				ends[a] = end
				delete(held, h)
			}
		}
		ends[i] = end
		if byKey[op.Invoke.Key] == nil {
			byKey[op.Invoke.Key] = &settled{}
		}
		byKey[op.Invoke.Key].add(op, o, start)
	}
	for _, s := range byKey {
		s.acquires.sort()
		s.accepted.sort()
	}
	// An indeterminate write takes effect by settle's bound or never.
	for i, op := range ops {
		if op.Func() != history.Write || outcomeOf(*op) != indeterminate || op.Complete == nil {
			continue
		}
		start, _ := op.Window()
		s := byKey[op.Invoke.Key]
		bound, ok := s.acquires.earliestAbove(start)
		if t := op.Invoke.Token; t != nil {
			bound, ok = s.accepted.earliestAbove(*t)
		}
		ends[i] = never
		if ok {
			ends[i] = max(start, bound)
		}
	}
	return ends
}

// settled is what settle bounds an indeterminate write by, for one key: the ok acquires by
// their start, the accepted tokened requests by their token.
type settled struct{ acquires, accepted returnsAbove }

func (s *settled) add(op *history.Op, o outcome, start int64) {
	if o != succeeded {
		return
	}
	switch _, ret := op.Window(); {
	case op.Func() == history.Acquire:
		s.acquires = append(s.acquires, keyedReturn{start, ret})
	case (op.Func() == history.Read || op.Func() == history.Write) && op.Invoke.Token != nil:
		s.accepted = append(s.accepted, keyedReturn{*op.Invoke.Token, ret})
	}
}

package checkers

// Where a history may be cut (the rule and why it is sound are in stream.go).

import (
	"math"

	"github.com/lockbreaker/lockbreaker/history"
)

// never is the end of an operation that may still take effect at any time.
const never = math.MaxInt64

// findCut finds the latest time t at which the operations since the last cut (cs, in the
// order invoked) may be cut, and each key's storage there; storage is each key's at the
// last cut.
func findCut(cs []cutOp, storage map[string]guarded) (t int64, after map[string]guarded, ok bool) {
	keyNames := numberKeys(cs)
	ends := blockingEnds(cs, len(keyNames))
	starts := make([]int64, len(cs))
	for i := range cs {
		starts[i] = cs[i].start
	}
	order := orderBy(starts)
	start := func(n int) int64 { return starts[order[n]] }

	keys := make([]storageFacts, len(keyNames)) // by key
	unknown := 0                                // keys whose storage is not known
	// see takes in the n-th operation to start.
	see := func(n int) {
		c := &cs[order[n]]
		k := &keys[c.k]
		wasKnown := k.known && k.fenceKnown()
		k.see(c, ends[order[n]])
		if isKnown := k.known && k.fenceKnown(); wasKnown != isKnown {
			if isKnown {
				unknown--
			} else {
				unknown++
			}
		}
	}
	reset := func() {
		unknown = 0
		for i, key := range keyNames {
			keys[i] = storageFacts{state: storage[key], known: true, lastWrite: math.MinInt64}
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
	after = make(map[string]guarded, len(storage)+len(keyNames))
	for key, g := range storage { // keys the operations held do not name keep theirs
		after[key] = g
	}
	for i, key := range keyNames {
		after[key] = keys[i].state
	}
	return t, after, true
}

// cutOp is what findCut needs of an operation, read from its events as they come: its
// passes read these alone, not the operation and its completion, which lie apart in memory.
type cutOp struct {
	start, end int64 // its window (history.Op.Window)
	key        string
	k          int // its key's place in the keys numberKeys names
	process    int
	f          history.Func
	o          outcome
	completed  bool
	// value is what a write wrote, or what a read returned.
	value int64
	// token is the token the invocation carried, when tokened.
	token   int64
	tokened bool
}

// numberKeys names the keys of cs, each once, and gives each operation its key's place.
func numberKeys(cs []cutOp) (keys []string) {
	var numbers keyNumbers
	for i := range cs {
		cs[i].k = numbers.number(cs[i].key)
	}
	return numbers.keys
}

// newCutOp is an operation's facts from its invocation: one that never completes.
func newCutOp(invoke *history.Event) cutOp {
	c := cutOp{start: invoke.Time, key: invoke.Key, process: invoke.Process, f: invoke.Func, o: indeterminate}
	if c.f == history.Write {
		c.value = valueOf(invoke.Value)
	}
	if t := invoke.Token; t != nil {
		c.token, c.tokened = *t, true
	}
	return c
}

// complete takes in the operation's completion, by the rules history.Op and outcomeOf
// read an operation by, given what they read of its invocation.
func (c *cutOp) complete(e *history.Event) {
	op := history.Op{Invoke: history.Event{Func: c.f, Time: c.start}, Complete: e}
	c.start, c.end = op.Window()
	c.o, c.completed = outcomeOf(&op), true
	if c.f != history.Write {
		c.value = valueOf(e.Value)
	}
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

// see takes in the next operation, which blocks a cut until end.
func (k *storageFacts) see(c *cutOp, end int64) {
	o, f := c.o, c.f
	switch {
	case f == history.Write && o != rejected:
		// The register is this write's value when it began after every other write ended.
		k.known = o == succeeded && c.start > k.lastWrite
		k.state.register = c.value
		k.lastWrite = max(k.lastWrite, end)
	case (f == history.Read || f == history.FinalRead) && o == succeeded:
		if c.start > k.lastWrite {
			k.known, k.state.register = true, c.value
		}
	default:
		return
	}
	switch {
	case !c.tokened || f == history.FinalRead:
	case o == succeeded:
		// An accepted request raised the fence to its token, or the history is illegal.
		if !k.state.fenced || c.token > k.state.highest {
			k.state.highest, k.state.fencer, k.state.fenced = c.token, c.process, true
		}
	default:
		k.unsure, k.unsureSeen = max(k.unsure, c.token), true
	}
}

// blockingEnds is, for each operation, until when it forbids a cut: when its window ends,
// for an ok acquire when its process's release of the key ended, never for what may still
// take effect, and its start for what changes no verdict (see stream.go).
func blockingEnds(cs []cutOp, keys int) []int64 {
	ends := make([]int64, len(cs))
	type holding struct{ process, key int }
	held := map[holding]int{}      // the ok acquire waiting for its release
	byKey := make([]settled, keys) // by key
	for i := range cs {
		c := &cs[i]
		end := c.end
		h := holding{c.process, c.k}
		switch f, o := c.f, c.o; {
		case !c.completed: // it may yet complete in any way
			end = never
		case f == history.Acquire && o == succeeded:
			held[h] = i
			end = never // until its release ends
		case f == history.Acquire, o == rejected, f == history.Read && o == indeterminate:
			end = c.start
		case f == history.Release:
			if a, ok := held[h]; ok {
				ends[a] = end
				delete(held, h)
			}
		}
		ends[i] = end
		byKey[c.k].add(c)
	}
	for _, s := range byKey {
		s.acquires.sort()
		s.accepted.sort()
	}
	// An indeterminate write takes effect by settle's bound or never.
	for i := range cs {
		c := &cs[i]
		if c.f != history.Write || c.o != indeterminate || !c.completed {
			continue
		}
		s := &byKey[c.k]
		bound, ok := s.acquires.earliestAbove(c.start)
		if c.tokened {
			bound, ok = s.accepted.earliestAbove(c.token)
		}
		ends[i] = never
		if ok {
			ends[i] = max(c.start, bound)
		}
	}
	return ends
}

// settled is what settle bounds an indeterminate write by, for one key: the ok acquires by
// their start, the accepted tokened requests by their token.
type settled struct{ acquires, accepted returnsAbove }

func (s *settled) add(c *cutOp) {
	if c.o != succeeded {
		return
	}
	switch {
	case c.f == history.Acquire:
		s.acquires = append(s.acquires, keyedReturn{c.start, c.end})
	case (c.f == history.Read || c.f == history.Write) && c.tokened:
		s.accepted = append(s.accepted, keyedReturn{c.token, c.end})
	}
}

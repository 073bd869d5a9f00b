package checkers

// What a checker carries from one piece of a history to the next when the history is
// judged piece by piece (see stream.go). A checker keeps everything it accumulates (counts,
// evidence, the highest token seen) in a state of its own, and builds its Result from that
// state after each piece: the Result after the last piece is the one for the whole history.
// A history judged whole has no carry, and each Check starts from a fresh state.

import (
	"sync"

	"github.com/lockbreaker/lockbreaker/history"
)

// carry is what one piece of a history is judged with.
type carry struct {
	// start is the history's first event's time, from which evidence counts times.
	start int64
	// infinity is the piece's end: no operation of the piece takes effect after it (see
	// cutter). For the last piece it is the history's last time + 1, as for a whole history.
	infinity int64
	// storage is the register and fence of each key at the piece's start (data-safety).
	storage map[string]guarded
	// states are the checkers' states, shared by the pieces of one history.
	states *states
}

// states are the checkers' states, by checker.
type states struct {
	mu sync.Mutex // RunAll runs checkers at once
	m  map[string]any
}

// stateOf is the checker's state carried from the pieces before, made on first use; a
// fresh one when the history is judged whole.
func stateOf[T any](opts Options, checker string) *T {
	if opts.carry == nil {
		return new(T)
	}
	c := opts.carry.states
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[checker]; ok {
		return s.(*T)
	}
	s := new(T)
	if c.m == nil {
		c.m = map[string]any{}
	}
	c.m[checker] = s
	return s
}

// timeline counts times from the history's first event, also in a later piece.
func (o Options) timeline(events []history.Event) timeline {
	if o.carry != nil {
		return timeline{start: o.carry.start}
	}
	return newTimeline(events)
}

// infinity is when an indeterminate operation returns (see operations).
func (o Options) infinity(events []history.Event) int64 {
	if o.carry != nil {
		return o.carry.infinity
	}
	return history.Span(events) + 1
}

// best is the highest-ranked operation seen in the pieces before (sweepCompletedBefore's
// best): every one of them ended before the piece began.
type best struct {
	op    history.Op
	rank  int64
	found bool
}

// sweepAfter is sweepCompletedBefore over one piece's operations, each also compared with
// the best of the pieces before, which then takes in the piece's.
func sweepAfter(before *best, ops []history.Op, rank func(history.Op) int64, visit func(op, best history.Op, found bool)) {
	sweepCompletedBefore(ops, rank, func(op, b history.Op, found bool) {
		// On equal ranks the earlier end wins: the one from before.
		if before.found && (!found || before.rank >= rank(b)) {
			b, found = before.op, true
		}
		visit(op, b, found)
	})
	for _, op := range ops {
		if r := rank(op); !before.found || r > before.rank {
			before.op, before.rank, before.found = op, r, true
		}
	}
}

package checkers

// Judging a history in pieces, so that one too long to hold (ten million operations) is
// judged in bounded memory with the verdicts the whole of it would get.
//
// The rule. A history is cut at a time T where, on every key:
//   - every operation whose window (history.Op.Window) starts by T has ended by T, where an
//     operation that never completed never ends, an indeterminate write ends where settle
//     bounds it (it cannot take effect later), and an acquire that did not succeed (failed,
//     indeterminate) does not count: a failed one changed nothing, and an indeterminate one
//     changes no verdict either way (in both models the state it leaves when it takes effect,
//     a lock held by an identity that never acts again, allows nothing the state it leaves
//     when it has no effect does not);
//   - no client holds the lock: every ok acquire's process invoked its next release of the
//     key by T, and that release ended by T;
//   - the storage's state is known: the register (a write or read that began after every
//     other write ended: its value, in every legal order) and its fence (the highest token
//     of an accepted request, no indeterminate write carrying a higher one).
//
// Why it is sound. No operation spans T, so in every legal order of the whole history the
// operations before T come first, and the history is legal exactly when the part before T
// is legal and the part after is legal from a state the part before can end in. At T that
// state is known: in the strict mutex the holder is nobody or an identity that never acts
// again, which allows exactly what nobody allows; in the guarded register the same holds
// of the holder, and the register and fence are the ones found. So each piece is searched
// from that state (place.storage), and the porcupine verdicts of the pieces together are
// the whole history's. The other checkers' questions are about operations whose windows do
// not span T either (holds, grants, accepted requests): each carries what it needs across
// in its accumulator (the highest token and value so far, every token granted, counts),
// and its result after the last piece is the one for the whole history.
//
// Where no such T comes for a long stretch, the stretch is judged as one piece and a note
// says so; past Limits.MaxOps held at once, or Limits.MaxHeap of live heap while a piece
// is searched (guard.go), the stream gives up, and every verdict not already invalid is
// unknown with that reason: never an exhausted memory.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lockbreaker/lockbreaker/history"
)

// Limits bound what a Stream holds.
type Limits struct {
	// PieceOps is how many operations a piece gathers before the stream looks for a cut.
	PieceOps int
	// MaxOps is the most operations held at once, waiting for a cut: more makes the
	// verdicts unknown. Judging takes about 2.5 KB per operation held.
	MaxOps int
	// LongOps is a stretch without a cut worth a note in the results.
	LongOps int
	// MaxHeap is the most bytes of live heap the process may hold while the stream judges
	// (porcupine's search of a piece grows with the orders it tries); 0: no limit.
	MaxHeap uint64
}

// DefaultLimits hold up to a million operations at once (about 2.5 GB while judged), which
// a history recorded by the harness never comes near without a cut, and stop a search
// past 2 GiB of heap.
var DefaultLimits = Limits{PieceOps: 10_000, MaxOps: 1_000_000, LongOps: 200_000, MaxHeap: 2 << 30}

// Stream judges a history fed to it event by event (history.Scan), piece by piece. A
// piece is judged while the next ones are read: three pieces are held at most (one judged,
// one waiting for a judge, one cut), besides the operations not yet cut and the room of up
// to three judged ones, kept to fill again (spent).
type Stream struct {
	ctx    context.Context
	opts   Options
	limits Limits
	place  place // of the next piece
	// judging is every checker's judging of the history, piece after piece.
	judging []*judging

	// events are the events since the last cut, the operations' and the nemesis's, in the
	// history's order, each with its operation's place in ops (opOf; -1: the nemesis's).
	events []history.Event
	opOf   []int32
	// ops are the operations since the last cut, in the order they were invoked, each with
	// its completion's place in events (done; -1: none yet); an op's Complete points into
	// events only once pointed (point).
	ops  []history.Op
	done []int32
	// facts are what findCut reads of each operation in ops, gathered as its events come.
	facts   []cutOp
	open    history.ByProcess[int32] // each process's operation not yet completed, by its place in ops
	seen    bool                     // whether an event came
	lastCut int64                    // the last cut's time; 0 before the first
	cuts    int
	tryAt   int // look for a cut when this many operations are held
	notes   []string
	failed  string // why the stream gave up
	// overHeap is the guard's reason when it stopped the judging of a piece (guard.go).
	overHeap atomic.Pointer[memoryLimit]

	// judges take the pieces cut, one after another, to the two goroutines that judge
	// them: one with the checkers that search (porcupine), one with the others, so that
	// neither waits for the other at every piece. judged waits for both.
	judges [2]chan piece
	judged sync.WaitGroup
	// spent are pieces both judges are done with, whose room take fills again: a piece's
	// events and operations, allocated anew at every cut, were most of what check allocated.
	spent chan piece
}

// piece is a piece of the history cut off, to judge: its events, in the history's order,
// and its operations in the order history.Pair gives, their completions among the events.
type piece struct {
	events []history.Event
	ops    []history.Op
	place  place
	// unjudged counts the judges not yet done with it.
	unjudged *atomic.Int32
}

// place is where a piece lies in its history.
type place struct {
	// start is the history's first event's time, from which evidence counts times.
	start int64
	// infinity is the piece's end: no operation of the piece takes effect after it (see
	// cutter). For the last piece it is the history's last time + 1, as for a whole history.
	infinity int64
	// storage is the register and fence of each key at the piece's start (data-safety).
	storage map[string]guarded
}

// NewStream starts judging a history with every checker (All), as Judge does.
func NewStream(ctx context.Context, opts Options, limits Limits) *Stream {
	return &Stream{ctx: ctx, opts: opts, limits: limits, tryAt: limits.PieceOps,
		judging: begin(All(), opts)}
}

// Add takes the history's next event. Events must come in the order of their times, as a
// recorder writes them, near enough that none comes before a cut already made.
func (s *Stream) Add(e history.Event) {
	if s.failed != "" {
		return
	}
	if !s.seen || e.Time < s.place.start {
		s.place.start = e.Time
	}
	s.seen = true
	s.place.infinity = max(s.place.infinity, e.Time+1)
	switch {
	case e.Process == history.NemesisProcess:
		s.events, s.opOf = append(s.events, e), append(s.opOf, -1)
		return
	case e.Type == history.Invoke:
		if s.cuts > 0 && e.Time <= s.lastCut {
			s.fail(fmt.Sprintf("event #%d comes before the history was cut at %s", e.Index, timeline{}.at(s.lastCut)))
			return
		}
		op := int32(len(s.ops))
		s.ops, s.done = append(s.ops, history.Op{Invoke: e}), append(s.done, -1)
		s.facts = append(s.facts, newCutOp(&e))
		s.events, s.opOf = append(s.events, e), append(s.opOf, op)
		s.open.Set(e.Process, op)
	default:
		op, ok := s.open.Get(e.Process)
		if !ok {
			s.fail(fmt.Sprintf("event #%d completes no operation", e.Index))
			return
		}
		s.done[op] = int32(len(s.events))
		s.events, s.opOf = append(s.events, e), append(s.opOf, op)
		s.open.Delete(e.Process)
		s.facts[op].complete(&s.events[len(s.events)-1])
	}
	if len(s.ops) >= s.tryAt {
		s.cut()
	}
	if len(s.ops) > s.limits.MaxOps {
		s.fail(fmt.Sprintf("no safe place to cut the history after %s: more than %d operations held at once (the memory limit)",
			s.at(s.lastCut), s.limits.MaxOps))
	}
}

func (s *Stream) fail(why string) {
	s.failed = why
	s.events, s.opOf, s.ops, s.done, s.facts, s.open = nil, nil, nil, nil, nil, history.ByProcess[int32]{}
}

// heapFull fails the stream once the guard stopped the judging of a piece, and says
// whether the stream has failed.
func (s *Stream) heapFull() bool {
	if m := s.overHeap.Load(); m != nil && s.failed == "" {
		s.fail(m.Error())
	}
	return s.failed != ""
}

// at is a time of the history as evidence prints it; the start for 0.
func (s *Stream) at(t int64) string {
	return timeline{start: s.place.start}.at(max(t, s.place.start))
}

// Notes say where the history had no place to cut for a long stretch.
func (s *Stream) Notes() []string { return s.notes }

// Close lets the judges go once they are done with the pieces handed to them, and waits
// for them. Results closes the stream; a reader that stops before Results must.
func (s *Stream) Close() {
	if s.judges[0] == nil {
		return
	}
	for _, j := range s.judges {
		close(j)
	}
	s.judged.Wait()
	s.judges = [2]chan piece{}
}

// Results judges what is left and returns every checker's verdict on the whole history,
// held to the stats precondition as Judge holds them.
func (s *Stream) Results() []Result {
	s.Close()
	if s.heapFull() {
		s.guard(func(ctx context.Context) { addAll(ctx, s.judging, piece{place: s.place}.part()) })
		return s.givenUp(resultsOf(s.judging))
	}
	last := s.take(math.MaxInt64)
	var results []Result
	if s.cuts == 0 { // never cut: judged whole, exactly as Judge does
		opts := s.opts
		opts.Ops = last.ops
		s.guard(func(ctx context.Context) { results = Judge(ctx, last.events, opts) })
	} else {
		s.note(last.ops)
		s.guard(func(ctx context.Context) { addAll(ctx, s.judging, last.part()) })
		results = precondition(resultsOf(s.judging))
	}
	if s.heapFull() {
		return s.givenUp(results)
	}
	return results
}

// givenUp makes every verdict not already invalid unknown, with the reason the stream
// gave up.
func (s *Stream) givenUp(results []Result) []Result {
	for i, r := range results {
		if r.Verdict != Invalid && r.Verdict != NotApplicable && r.Property != PropertyMetric {
			results[i].Verdict, results[i].Summary = Unknown, s.failed+" (judged until then: "+r.Summary+")"
		}
	}
	return results
}

// part is the piece as the checkers judge it, after the pieces before.
func (p piece) part() part {
	return part{events: p.events, ops: p.ops, tl: timeline{start: p.place.start}, infinity: p.place.infinity,
		streamed: true, storage: p.place.storage}
}

// guard runs judge under the heap limit, and keeps the reason when the guard stopped it.
func (s *Stream) guard(judge func(context.Context)) {
	if m := withinHeap(s.ctx, s.limits.MaxHeap, judge); m != nil {
		s.overHeap.CompareAndSwap(nil, m)
	}
}

// point points every operation held that has completed at its completion in events.
func (s *Stream) point() {
	for i, d := range s.done {
		if d >= 0 {
			s.ops[i].Complete = &s.events[d]
		}
	}
}

// take cuts off the operations whose windows start by t, their events and the nemesis
// events up to t, in the history's order, as a piece judged from the place as it is. The
// piece's events are those held, moved up in place over the ones left, which are copied
// out: each event is copied once as it comes and, most of them, never again.
func (s *Stream) take(t int64) piece {
	p := piece{place: s.place}
	s.point()
	taken := make([]bool, len(s.ops))
	order := make([]int, 0, len(s.ops)) // the operations taken, in the order history.Pair gives
	for i := range s.ops {
		if s.facts[i].start <= t {
			taken[i] = true
			order = append(order, i)
		}
	}
	byInvocation := func(a, b int) int { return compareInt64(s.ops[a].Invoke.Time, s.ops[b].Invoke.Time) }
	if !slices.IsSortedFunc(order, byInvocation) { // held in the order invoked, they seldom are not
		slices.SortStableFunc(order, byInvocation)
	}

	// The events: the piece's moved up, the rest copied out, each op's completion followed.
	inPiece := func(i int) bool { op := s.opOf[i]; return op < 0 && s.events[i].Time <= t || op >= 0 && taken[op] }
	left := 0
	for i := range s.events {
		if !inPiece(i) {
			left++
		}
	}
	// Room for those left and as many again as this piece took, so that rest seldom grows:
	// a spent piece's when it has that much.
	spent := s.spentPiece()
	rest := spent.events[:0]
	if cap(rest) < left+len(s.events) {
		rest = make([]history.Event, 0, left+len(s.events))
	}
	restOf := make([]int32, 0, cap(rest))
	at := make([]int32, len(s.events)) // each event's place in the piece or in rest
	n := 0
	for i, op := range s.opOf {
		if inPiece(i) {
			if n != i {
				s.events[n] = s.events[i]
			}
			at[i], n = int32(n), n+1
		} else {
			at[i] = int32(len(rest))
			rest, restOf = append(rest, s.events[i]), append(restOf, op)
		}
	}
	p.events = s.events[:n] // its room with it, to be filled again once spent

	// The operations: the piece's copied in order, pointing at their completions in it;
	// the rest moved up in place, their places in events and ops followed.
	p.ops = spent.ops[:0]
	if cap(p.ops) < len(order) {
		p.ops = make([]history.Op, 0, len(order))
	}
	for _, i := range order {
		op := history.Op{Invoke: s.ops[i].Invoke}
		if d := s.done[i]; d >= 0 {
			op.Complete = &p.events[at[d]]
		}
		p.ops = append(p.ops, op)
	}
	moved := make([]int32, len(s.ops)) // each operation left's new place
	m := 0
	for i := range s.ops {
		if taken[i] {
			continue
		}
		if m != i {
			s.ops[m].Invoke, s.facts[m] = s.ops[i].Invoke, s.facts[i]
		}
		s.ops[m].Complete = nil // pointed again into rest when needed
		if d := s.done[i]; d >= 0 {
			s.done[m] = at[d]
		} else {
			s.done[m] = -1
		}
		moved[i], m = int32(m), m+1
	}
	clear(s.ops[m:]) // let the piece's operations go once judged
	s.ops, s.done, s.facts = s.ops[:m], s.done[:m], s.facts[:m]
	for i, op := range restOf {
		if op >= 0 {
			restOf[i] = moved[op]
		}
	}
	for process, op := range s.open.All() {
		if taken[op] { // never, but for the last piece: no operation open can be cut
			s.open.Delete(process)
		} else {
			s.open.Set(process, moved[op])
		}
	}
	s.events, s.opOf = rest, restOf
	return p
}

// spentPiece is a piece both judges are done with, if there is one, for take to fill again.
func (s *Stream) spentPiece() piece {
	select {
	case p := <-s.spent:
		return p
	default:
		return piece{}
	}
}

// note says so when a piece is a long stretch without a cut.
func (s *Stream) note(piece []history.Op) {
	if len(piece) < s.limits.LongOps || len(piece) == 0 {
		return
	}
	from, to := piece[0].Invoke.Time, piece[0].Invoke.Time
	for _, op := range piece {
		from, to = min(from, op.Invoke.Time), max(to, op.Invoke.Time)
	}
	s.notes = append(s.notes, fmt.Sprintf("no safe place to cut the history from %s to %s: %d operations judged as one piece",
		s.at(from), s.at(to), len(piece)))
}

// cut hands the operations before the latest safe cut among those held, if there is one,
// to the judges, which judge them while the stream reads on.
func (s *Stream) cut() {
	if s.heapFull() {
		return
	}
	t, storage, ok := findCut(s.facts, s.place.storage)
	if !ok {
		s.tryAt = len(s.ops) + max(s.limits.PieceOps/4, 1)
		return
	}
	infinity := s.place.infinity
	s.place.infinity = t
	p := s.take(t)
	s.place.infinity, s.place.storage = infinity, storage
	s.note(p.ops)
	if s.judges[0] == nil {
		s.spent = make(chan piece, 3)
		for i, search := range []bool{true, false} {
			s.judges[i] = make(chan piece, 1)
			s.judged.Go(func() {
				for p := range s.judges[i] {
					s.guard(func(ctx context.Context) { addSome(ctx, s.judging, p.part(), search) })
					if p.unjudged.Add(-1) > 0 {
						continue
					}
					select { // no checker keeps a piece's events or operations once judged
					case s.spent <- p:
					default:
					}
				}
			})
		}
	}
	p.unjudged = new(atomic.Int32)
	p.unjudged.Store(int32(len(s.judges)))
	for _, j := range s.judges {
		j <- p
	}
	s.lastCut, s.tryAt = t, len(s.ops)+s.limits.PieceOps
	s.cuts++
}

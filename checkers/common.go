package checkers

// Helpers every checker shares: grouping by key, printing evidence a person can follow back
// into history.jsonl, and the one real-time sweep that fencing and lost-updates both need.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// evidenceLimit bounds the lines of one kind a checker reports: a badly broken run must
// still give a report a person can read, and the first violations are the telling ones.
const evidenceLimit = 20

// overlapLimit bounds the overlaps mutual-exclusion keeps as data (Result.Overlaps) for the
// report to draw: a soak of a broken lock has millions, which made results.json 277 MB and
// held as much while it was written; the report draws 10,000 operations at most.
const overlapLimit = 10_000

// corrupt is the result for a history whose operations cannot be paired: nothing can be
// decided from it, which is Unknown and never a pass.
func corrupt(err error) Result {
	return Result{Verdict: Unknown, Summary: "cannot pair the history's operations: " + err.Error()}
}

// byKey splits items by lock key, keeping their order, and returns the keys sorted so
// that reports list them the same way every time. A group may be items itself: callers
// sort or change a group only when items is their own.
func byKey[T any](items []T, keyOf func(T) string) (keys []string, groups map[string][]T) {
	// One key, the usual case: its group is items, not a copy, found without hashing the
	// key of every item.
	if len(items) > 0 {
		k := keyOf(items[0])
		if !slices.ContainsFunc(items, func(item T) bool { return keyOf(item) != k }) {
			return []string{k}, map[string][]T{k: slices.Clip(items)}
		}
	}
	sizes := map[string]int{}
	for _, item := range items {
		sizes[keyOf(item)]++
	}
	groups = make(map[string][]T, len(sizes))
	for k, n := range sizes {
		keys = append(keys, k)
		groups[k] = make([]T, 0, n)
	}
	for _, item := range items {
		k := keyOf(item)
		groups[k] = append(groups[k], item)
	}
	slices.Sort(keys)
	return keys, groups
}

// keyNumbers numbers lock keys in the order met. A history's operations are most often on
// the key of the one before, which is looked at first, without hashing the key.
type keyNumbers struct {
	numbers map[string]int
	keys    []string // by number
	last    int      // the number given last
}

// number is key's number.
func (k *keyNumbers) number(key string) int {
	if len(k.keys) > 0 && k.keys[k.last] == key {
		return k.last
	}
	n, ok := k.numbers[key]
	if !ok {
		if k.numbers == nil {
			k.numbers = map[string]int{}
		}
		n = len(k.keys)
		k.numbers[key] = n
		k.keys = append(k.keys, key)
	}
	k.last = n
	return n
}

func opKey(op history.Op) string { return op.Invoke.Key }

func opPointerKey(op *history.Op) string { return op.Invoke.Key }

// sweepCompletedBefore visits completed operations in the order their windows start (see
// history.Op.Window: from the invocation, or from what the servers saw), each with the
// highest-ranked one among those whose window ended strictly before its own began (found is
// false when none did). Operations whose windows overlap are never compared: their order
// is unknown. Two sorts and one pass make it O(n log n) where comparing every pair would be
// quadratic. On equal ranks the earlier end wins.
func sweepCompletedBefore(ops []*history.Op, rank func(*history.Op) int64, visit func(op, best *history.Op, found bool)) {
	starts, ends := make([]int64, len(ops)), make([]int64, len(ops))
	for i, op := range ops {
		starts[i], ends[i] = op.Window()
	}
	byEnd := orderBy(ends)
	var best *history.Op
	bestRank, found, next := int64(0), false, 0
	for _, i := range orderBy(starts) {
		for ; next < len(byEnd) && ends[byEnd[next]] < starts[i]; next++ {
			if c := ops[byEnd[next]]; !found || rank(c) > bestRank {
				best, bestRank, found = c, rank(c), true
			}
		}
		visit(ops[i], best, found)
	}
}

// best is the highest-ranked operation seen in the pieces before (sweepCompletedBefore's
// best): every one of them ended before the piece began. It is a copy, which holds no
// piece in memory once judged.
type best struct {
	op    history.Op
	rank  int64
	found bool
}

// sweepAfter is sweepCompletedBefore over one piece's operations, each also compared with
// the best of the pieces before, which then takes in the piece's.
func sweepAfter(before *best, ops []*history.Op, rank func(*history.Op) int64, visit func(op, best *history.Op, found bool)) {
	sweepCompletedBefore(ops, rank, func(op, b *history.Op, found bool) {
		// On equal ranks the earlier end wins: the one from before.
		if before.found && (!found || before.rank >= rank(b)) {
			b, found = &before.op, true
		}
		visit(op, b, found)
	})
	// The first of the highest-ranked in ops, when higher than before's: copied once.
	top, topRank := -1, int64(0)
	for i, op := range ops {
		if r := rank(op); top < 0 && (!before.found || r > before.rank) || top >= 0 && r > topRank {
			top, topRank = i, r
		}
	}
	if top >= 0 {
		before.op, before.rank, before.found = *ops[top], topRank, true
		if c := before.op.Complete; c != nil { // a streamed piece's room is filled again once judged
			complete := *c
			before.op.Complete = &complete
		}
	}
}

// orderBy is the indexes of keys in the order of their keys, equal keys in the order they
// come: a stable sort that moves indexes, not the (large) operations they stand for.
func orderBy(keys []int64) []int {
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := compareInt64(keys[a], keys[b]); c != 0 {
			return c
		}
		return a - b
	})
	return order
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// evidence collects report lines, keeping the first evidenceLimit and counting the rest.
type evidence struct {
	lines   []string
	dropped int
}

func (e *evidence) addf(format string, args ...any) {
	if len(e.lines) < evidenceLimit {
		e.lines = append(e.lines, fmt.Sprintf(format, args...))
		return
	}
	e.dropped++
}

// keeps says whether the next line added is kept; when not, it counts it as dropped
// instead, so that a caller with many lines formats only those kept:
// `if e.keeps() { e.addf(...) }`.
func (e *evidence) keeps() bool {
	if len(e.lines) < evidenceLimit {
		return true
	}
	e.dropped++
	return false
}

// count is how many lines were added, kept or not.
func (e *evidence) count() int { return len(e.lines) + e.dropped }

func (e *evidence) list() []string {
	if e.dropped == 0 {
		return e.lines
	}
	return append(slices.Clip(e.lines), fmt.Sprintf("... and %d more like these", e.dropped))
}

// earliest keeps the time of the first violating event a checker finds
// (Result.FirstViolation).
type earliest struct {
	at    int64
	found bool
}

func (e *earliest) see(t int64) {
	if !e.found || t < e.at {
		e.at, e.found = t, true
	}
}

// since is the time found, counted from the timeline's start; nil when none was.
func (e earliest) since(tl timeline) *time.Duration {
	if !e.found {
		return nil
	}
	d := history.Duration(tl.start, e.at)
	return &d
}

// timeline prints times as offsets from the history's first event: raw CLOCK_MONOTONIC
// nanoseconds mean nothing to a reader, offsets line up with the report's timeline.
type timeline struct{ start int64 }

func newTimeline(events []history.Event) timeline {
	if len(events) == 0 {
		return timeline{}
	}
	start := events[0].Time
	for _, e := range events {
		start = min(start, e.Time)
	}
	return timeline{start: start}
}

func (tl timeline) at(t int64) string {
	return "t=" + history.Duration(tl.start, t).Round(time.Microsecond).String()
}

// event points at one line of the history: "#12 (t=1.5s)".
func (tl timeline) event(e history.Event) string {
	return fmt.Sprintf("#%d (%s)", e.Index, tl.at(e.Time))
}

// describe renders an operation with everything needed to find it in history.jsonl:
// "p1 write k 3 token=7 -> fail (stale-token), #40 (t=1.2s) .. #41 (t=1.3s)".
func (tl timeline) describe(op history.Op) string {
	if op.Func() == lapse { // where it lapses is its Message, when not the last event
		where := cmp.Or(op.Invoke.Message, "its last event")
		return fmt.Sprintf("%s's hold of %s lapses at %s, %s", processName(op.Process()), op.Invoke.Key, where, tl.event(op.Invoke))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", processName(op.Process()), op.Func(), op.Invoke.Key)
	if v := op.Invoke.Value; v != nil && op.Func() == history.Write {
		fmt.Fprintf(&b, " %d", *v)
	}
	if t := op.Invoke.Token; t != nil {
		fmt.Fprintf(&b, " token=%d", *t)
	}
	c := op.Complete
	if c == nil {
		fmt.Fprintf(&b, " -> never completed, %s", tl.event(op.Invoke))
		return b.String()
	}
	fmt.Fprintf(&b, " -> %s", c.Type)
	if c.Value != nil {
		fmt.Fprintf(&b, " %d", *c.Value)
	}
	if c.Token != nil {
		fmt.Fprintf(&b, " token=%d", *c.Token)
	}
	if c.Error != "" {
		fmt.Fprintf(&b, " (%s)", c.Error)
	}
	fmt.Fprintf(&b, ", %s .. %s", tl.event(op.Invoke), tl.event(*c))
	return b.String()
}

// Describe renders an operation as evidence lines do, its times counted from start (the
// history's first event), so that a report's tooltips read as the evidence does.
func Describe(op history.Op, start int64) string { return timeline{start: start}.describe(op) }

// processName names a process the way reports do: p0, p1, ..., harness, nemesis.
func processName(p int) string {
	switch p {
	case history.HarnessProcess:
		return "harness"
	case history.NemesisProcess:
		return "nemesis"
	}
	return fmt.Sprintf("p%d", p)
}

// plural renders "1 stale request" or "3 stale requests".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

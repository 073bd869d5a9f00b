package checkers

// mutual-exclusion: did two clients ever believe they held the same lock at once? Unlike
// lock-linearizable it explains a violation in the terms a reader thinks in: who held the
// key from when to when, who came in meanwhile, and for how long both believed it.
//
// A client believes it holds a key from the moment its acquire returned ok until it
// invokes its next release of that key, whatever that release's outcome (a release that
// finds the lease gone shows the client believed it to the last); a client that never
// releases believes it until its last event.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// mutualExclusion reports every pair of overlapping holds of one key by different clients.
var mutualExclusion = checker{name: MutualExclusion, property: PropertyLockSafety, start: func(Options) accumulator {
	return &exclusionState{keys: map[string]bool{}}
}}

// hold is the time a process believed it held a key.
type hold struct {
	process  int
	key      string
	asked    *history.Event // the acquire's invocation
	granted  *history.Event // the acquire's ok: the hold starts at its time
	until    *history.Event // the release's invocation, or the process's last event (both the piece's, shared)
	released bool           // whether until is a release
	release  int            // when released, the release's index in the ops holds was given
}

// exclusionState is what mutualExclusion found, over the pieces judged so far. A piece
// ends where no hold is open (see cutter), so no hold spans two.
type exclusionState struct {
	tl       timeline // the last piece's
	keys     map[string]bool
	total    int
	overlaps []Overlap
	found    evidence
	first    earliest
}

func (st *exclusionState) add(_ context.Context, p part) {
	tl := p.tl
	st.tl = tl
	keys, groups := byKey(holds(p.ops, lastOf(p.events)), func(h hold) string { return h.key })
	found, first := &st.found, &st.first
	for _, key := range keys {
		st.keys[key] = true
		st.total += len(groups[key])
		for _, pair := range overlapping(groups[key]) {
			earlier, later := pair[0], pair[1]
			ended := "its last event"
			if earlier.released {
				ended = "its release"
			}
			overlap := time.Duration(min(earlier.until.Time, later.until.Time) - later.granted.Time)
			first.see(later.granted.Time)
			if found.count() < overlapLimit {
				st.overlaps = append(st.overlaps, Overlap{Key: key, Earlier: earlier.holding(), Later: later.holding(), Length: overlap})
			}
			if found.keeps() {
				found.addf("%s held %s from %s to %s, %s; %s acquired %s at %s while %s still believed it held it; overlap %v",
					processName(earlier.process), key, tl.event(*earlier.granted), tl.event(*earlier.until), ended,
					processName(later.process), key, tl.event(*later.granted), processName(earlier.process), overlap)
			}
		}
	}
}

func (st *exclusionState) result() Result {
	found, first, tl := &st.found, &st.first, st.tl
	overlaps, total := found.count(), st.total
	r := Result{Overlaps: st.overlaps, Evidence: found.list(), Counts: map[string]int{"holds": total, "overlaps": overlaps}}
	r.FirstViolation = first.since(tl)
	if overlaps > 0 {
		r.Verdict, r.Summary = Invalid, plural(overlaps, "overlapping hold")
	} else {
		r.Verdict, r.Summary = Valid, fmt.Sprintf("no overlapping holds (%s on %s)", plural(total, "hold"), plural(len(st.keys), "key"))
	}
	return r
}

// holds finds every hold in ops (ordered by invocation, so a process's operations come in
// the order it made them). A second acquire while holding extends nothing. The holds point
// into ops and last's events, which they share.
func holds(ops []history.Op, last lastOf) []hold {
	type holding struct{ process, key int } // a key by its number
	var keys keyNumbers
	open := map[holding]int{} // index into out
	var out []hold
	for j := range ops {
		op := &ops[j]
		h := holding{op.Process(), keys.number(op.Invoke.Key)}
		i, held := open[h]
		switch {
		case op.Func() == history.Acquire && op.Type() == history.OK && !held:
			open[h] = len(out)
			out = append(out, hold{process: h.process, key: op.Invoke.Key, asked: &ops[j].Invoke, granted: op.Complete})
		case op.Func() == history.Release && held:
			out[i].until, out[i].released, out[i].release = &ops[j].Invoke, true, j
			delete(open, h)
		}
	}
	if len(open) == 0 {
		return out
	}
	processes := map[int]bool{}
	for h := range open {
		processes[h.process] = true
	}
	ends := last.find(processes)
	for h, i := range open {
		if out[i].until = ends[h.process]; out[i].until == nil {
			out[i].until = &history.Event{}
		}
	}
	return out
}

// lastOf is events to find processes' last events in. holds finds those of the processes
// whose holds are left open, and only when one is: in most pieces none is.
type lastOf []history.Event

// find maps each of processes to its last event, the latest (of equal times, the later
// one); a process with none has none.
func (l lastOf) find(processes map[int]bool) map[int]*history.Event {
	last := map[int]*history.Event{}
	for i := range l {
		if e := &l[i]; processes[e.Process] {
			if p, ok := last[e.Process]; !ok || e.Time >= p.Time {
				last[e.Process] = e
			}
		}
	}
	return last
}

// overlapping returns every pair of holds (of one key) by different processes that
// overlap, earlier first. Sorted by start, a sweep keeps the holds still running: each new
// hold first drops those that ended by its start, then overlaps all that remain. A
// process's own holds never overlap, so with no violations at most one hold is running and
// the sweep is linear after the O(n log n) sort; with violations it costs one step per pair.
func overlapping(keyHolds []hold) [][2]hold {
	slices.SortStableFunc(keyHolds, func(a, b hold) int { return compareInt64(a.granted.Time, b.granted.Time) })
	var running []hold
	var pairs [][2]hold
	for _, h := range keyHolds {
		running = slices.DeleteFunc(running, func(r hold) bool { return r.until.Time <= h.granted.Time })
		for _, r := range running {
			if r.process != h.process {
				pairs = append(pairs, [2]hold{r, h})
			}
		}
		running = append(running, h)
	}
	return pairs
}

// Overlap is one occurrence of two clients holding a key at once, in event indexes, so
// that a report can place it in the history.
type Overlap struct {
	Key     string  `json:"key"`
	Earlier Holding `json:"earlier"`
	Later   Holding `json:"later"`
	// Length is how long both believed they held the key.
	Length time.Duration `json:"length_ns"`
}

// Holding is one hold of an Overlap: who, from which event to which.
type Holding struct {
	Process int `json:"process"`
	// Asked is the index of the acquire's invocation, Granted that of its ok, Until that of
	// the release's invocation (Released) or of the process's last event.
	Asked    int  `json:"asked"`
	Granted  int  `json:"granted"`
	Until    int  `json:"until"`
	Released bool `json:"released"`
}

func (h hold) holding() Holding {
	return Holding{Process: h.process, Asked: h.asked.Index, Granted: h.granted.Index, Until: h.until.Index, Released: h.released}
}

package harness

import (
	"context"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Two watches of the history as it is recorded, each ending a part of the run early: the
// whole run a grace after the first violation (--stop-at-first-violation), the nemesis
// after its last allowed fault (--faults). Neither decides a verdict: the run is judged
// on its whole history afterwards, as any other.

// overlapSeen follows the history and says when two clients were first seen holding one
// key at once, as mutual exclusion counts holds: from an acquire's ok to its holder's
// release, by the events' times. Events reach it in the order they were recorded, which on
// a busy host may differ from their times' (a holder's release invoked before another's
// grant can be recorded after it), so two holds overlap only when each holder was seen
// holding after the other's grant: the earlier holder's read, write or release after the
// later one's grant proves its hold reached past it. A holder that invokes an acquire
// instead has lost its hold unseen (it was killed and a new life took its place), and
// proves nothing.
type overlapSeen struct {
	holding map[holder]heldSpan   // holds not released yet, by their holders' own account
	ended   map[string][]heldSpan // each key's latest released holds (a recorded event may be older than one)
}

type holder struct {
	key     string
	process int
}

// heldSpan is a hold as far as it was seen: its grant's time, and the time of its holder's
// latest event within it.
type heldSpan struct {
	process     int
	from, until int64
}

func (a heldSpan) overlaps(b heldSpan) bool {
	return a.process != b.process && a.from < b.until && b.from < a.until
}

// endedKept is how many released holds of a key are kept to check a late-recorded event
// against: enough for every client of a run to release once while one event waits.
const endedKept = 32

func newOverlapSeen() *overlapSeen {
	return &overlapSeen{holding: map[holder]heldSpan{}, ended: map[string][]heldSpan{}}
}

// add follows event e and says whether it confirms an overlap.
func (o *overlapSeen) add(e history.Event) bool {
	if e.Process < 0 {
		return false
	}
	h := holder{e.Key, e.Process}
	span, held := o.holding[h]
	switch {
	case e.Func == history.Acquire && e.Type == history.OK:
		span = heldSpan{process: e.Process, from: e.Time, until: e.Time}
	case e.Func == history.Acquire && e.Type == history.Invoke:
		delete(o.holding, h)
		return false
	case held && (e.Func == history.Read || e.Func == history.Write || e.Func == history.Release):
		span.until = max(span.until, e.Time)
	default:
		return false
	}
	if e.Func == history.Release && e.Type == history.Invoke {
		delete(o.holding, h)
		o.ended[e.Key] = append(o.ended[e.Key], span)
		if n := len(o.ended[e.Key]); n > endedKept {
			o.ended[e.Key] = o.ended[e.Key][n-endedKept:]
		}
	} else {
		o.holding[h] = span
	}
	for other, s := range o.holding {
		if other.key == e.Key && span.overlaps(s) {
			return true
		}
	}
	return slices.ContainsFunc(o.ended[e.Key], span.overlaps)
}

// stopAtFirstOverlap calls stop grace after events first confirm an overlap; it returns
// then, or once done closes.
func stopAtFirstOverlap(events <-chan history.Event, done <-chan struct{}, grace time.Duration, stop func()) {
	seen := newOverlapSeen()
	for {
		select {
		case <-done:
			return
		case e := <-events:
			if !seen.add(e) {
				continue
			}
			select {
			case <-done:
			case <-time.After(grace):
				stop()
			}
			return
		}
	}
}

// stopAfterFaults calls stop at the first moment no fault is on once n faults have begun,
// so that a round under way (a kill and its restart, a pause and its thaw) ends as it
// would; it returns then, or once ctx ends. A fault whose kind is only a part of another's
// (history.FaultKind's Part: the pause that keeps a victim within its lease) keeps it
// waiting but is not counted; every other is one of the chosen nemeses' faults, recorded
// under its own kind's name (a partition's shape, a mix's pick, the cut and the clock jump
// of kleppmann-clock).
func stopAfterFaults(ctx context.Context, events <-chan history.Event, n int, stop context.CancelFunc) {
	begun, on := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			if e.Process != history.NemesisProcess {
				continue
			}
			switch e.Func {
			case history.Start:
				on++
				if k, _ := history.KindOf(e.Fault); !k.Part {
					begun++
				}
			case history.Stop:
				on--
			}
			if begun >= n && on <= 0 {
				stop()
				return
			}
		}
	}
}

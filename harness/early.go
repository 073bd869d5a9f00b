package harness

import (
	"context"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Two watches of the history as it is recorded, each ending a part of the run early: the
// whole run a grace after the first violation (--stop-at-first-violation), the nemesis
// after its last allowed fault (--faults). Neither decides a verdict: the run is judged
// on its whole history afterwards, as any other.

// overlapSeen follows the history and says when two clients were first seen holding one
// key at once, as mutual exclusion counts holds: from an acquire's ok to its holder's
// release. A grant to another client while one holds is confirmed as an overlap by the
// holder's next read, write or release, which proves its hold reached past that grant;
// a holder that invokes an acquire instead has lost its hold unseen (it was killed and a
// new life took its place), and confirms nothing.
type overlapSeen struct {
	holding  map[holder]bool // holders now, by their own account
	rivalled map[holder]bool // holders that another client was granted the key while they held
}

type holder struct {
	key     string
	process int
}

func newOverlapSeen() *overlapSeen {
	return &overlapSeen{holding: map[holder]bool{}, rivalled: map[holder]bool{}}
}

// add follows event e and says whether it confirms an overlap.
func (o *overlapSeen) add(e history.Event) bool {
	if e.Process < 0 {
		return false
	}
	h := holder{e.Key, e.Process}
	switch {
	case e.Func == history.Acquire && e.Type == history.OK:
		for other := range o.holding {
			if other.key == e.Key && other.process != e.Process {
				o.rivalled[other] = true
			}
		}
		o.holding[h] = true
	case e.Func == history.Acquire && e.Type == history.Invoke:
		delete(o.holding, h)
		delete(o.rivalled, h)
	case o.holding[h] && (e.Func == history.Read || e.Func == history.Write || e.Func == history.Release):
		if o.rivalled[h] {
			return true
		}
		if e.Func == history.Release && e.Type == history.Invoke {
			delete(o.holding, h)
		}
	}
	return false
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

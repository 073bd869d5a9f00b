package checkers

// herd: does a queue-based lock wake one waiter per handoff, or all of them? ZooKeeper's
// lock recipe has each waiter watch only its immediate predecessor, so the lock
// passing on should deliver about one watch notification; a recipe that watches the whole
// directory delivers one per waiter (the thundering herd). Lock clients that wait on
// watches record how many notifications each acquisition received in the grant's
// WatchEvents.
// Notifications are divided by handoffs, not by releases that returned ok: a holder whose
// session expired (paused, killed) hands the lock on with no ok release, its release
// failing not-held or never answering, and wakes its successor all the same.
// It is a metric: a herd wastes work but breaks no promise, so it never changes the
// overall verdict.

import (
	"context"
	"fmt"

	"github.com/lockbreaker/lockbreaker/history"
)

// herdLimit is the notifications per handoff above which waiters are being woken in a
// herd. One is ideal; waiters that give up and delete their node wake their successor
// too, so a little more is normal.
const herdLimit = 2.0

// herd measures watch notifications per handoff of the lock.
var herd = checker{name: Herd, property: PropertyMetric, start: func(Options) accumulator {
	return &herdState{granted: map[string]bool{}}
}}

// herdState is what herd counts, over the pieces judged so far.
type herdState struct {
	notifications, handoffs int
	granted                 map[string]bool // keys granted at least once
}

// Every grant of a key but its first is a handoff, however the hold before it ended: an
// ok release, a release that failed not-held because the session had expired, or none at
// all.
func (st *herdState) add(_ context.Context, p part) {
	granted := st.granted
	for i := range p.ops {
		op := &p.ops[i]
		if op.Func() != history.Acquire || op.Type() != history.OK || op.Complete.WatchEvents == nil {
			continue
		}
		st.notifications += *op.Complete.WatchEvents
		if granted[op.Invoke.Key] {
			st.handoffs++
		}
		granted[op.Invoke.Key] = true
	}
}

func (st *herdState) result() Result {
	granted := st.granted
	notifications, handoffs := st.notifications, st.handoffs
	counts := map[string]int{"notifications": notifications, "handoffs": handoffs}
	switch {
	case len(granted) == 0:
		return Result{Verdict: NotApplicable, Summary: "no watch notifications recorded: not a queue-based lock", Counts: counts}
	case handoffs == 0:
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("%d notifications but no handoff to divide them by", notifications), Counts: counts}
	}
	ratio := float64(notifications) / float64(handoffs)
	r := Result{Verdict: Valid, Counts: counts,
		Summary: fmt.Sprintf("%.2f watch notifications per handoff (%d / %d)", ratio, notifications, handoffs)}
	if ratio > herdLimit {
		r.Verdict = Invalid
		r.Summary += fmt.Sprintf(": a thundering herd (more than %.0f)", herdLimit)
	}
	return r
}

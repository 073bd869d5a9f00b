package checkers

// herd: does a queue-based lock wake one waiter per release, or all of them? The seed's
// ZooKeeper recipe has each waiter watch only its immediate predecessor, so a release
// should deliver about one watch notification; a recipe that watches the whole directory
// delivers one per waiter (the thundering herd). Lock clients that wait on watches record
// how many notifications each acquisition received in the grant's WatchEvents.
// It is a metric: a herd wastes work but breaks no promise, so it never changes the
// overall verdict.

import (
	"context"
	"fmt"

	"github.com/lockbreaker/lockbreaker/history"
)

// herdLimit is the notifications per release above which waiters are being woken in a
// herd. One is ideal; waiters that give up and delete their node wake their successor
// too, so a little more is normal.
const herdLimit = 2.0

// Herd measures watch notifications per lock release.
type Herd struct{}

// NewHerd returns the herd checker.
func NewHerd() Herd { return Herd{} }

func (Herd) Name() string       { return "herd" }
func (Herd) Property() Property { return PropertyMetric }

func (Herd) Check(_ context.Context, events []history.Event, opts Options) Result {
	ops, err := opts.pair(events)
	if err != nil {
		return corrupt(err)
	}
	notifications, grants, releases := 0, 0, 0
	for _, op := range ops {
		switch {
		case op.Func() == history.Acquire && op.Type() == history.OK:
			if op.Complete.WatchEvents == nil {
				continue
			}
			notifications += *op.Complete.WatchEvents
			grants++
		case op.Func() == history.Release && op.Type() == history.OK:
			releases++
		}
	}
	counts := map[string]int{"notifications": notifications, "releases": releases}
	switch {
	case grants == 0:
		return Result{Verdict: NotApplicable, Summary: "no watch notifications recorded: not a queue-based lock", Counts: counts}
	case releases == 0:
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("%d notifications but no release to divide them by", notifications), Counts: counts}
	}
	ratio := float64(notifications) / float64(releases)
	r := Result{Verdict: Valid, Counts: counts,
		Summary: fmt.Sprintf("%.2f watch notifications per release (%d / %d)", ratio, notifications, releases)}
	if ratio > herdLimit {
		r.Verdict = Invalid
		r.Summary += fmt.Sprintf(": a thundering herd (more than %.0f)", herdLimit)
	}
	return r
}

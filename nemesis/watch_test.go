package nemesis

import (
	"context"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// A fault's goroutine may follow the history long after the events it waits on were
// recorded: a run that stops early ends its wait while they are still queued. It must see
// them all the same, or a hazard that happened goes unrecorded and a verdict depends on how
// busy the host was.
func TestAnEndedWaitStillSeesWhatWasRecordedBeforeIt(t *testing.T) {
	grants := func() chan history.Event {
		events := make(chan history.Event, 4)
		events <- history.Event{Type: history.OK, Process: 0, Func: history.Acquire, Time: 1}
		events <- history.Event{Type: history.OK, Process: 3, Func: history.Acquire, Time: 2}
		events <- history.Event{Type: history.Invoke, Process: 0, Func: history.Release, Time: 3}
		return events
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	t.Run("a split's two primaries, once the run ended", func(t *testing.T) {
		f := newFake(4, 3)
		w := watch(grants())
		seen := false
		stop := w.seeSplitGrants(f.env(), history.PartitionPrimary.Name, map[int]bool{3: true}, func() { seen = true })
		defer stop()
		if w.waitUntil(ended, time.Hour, func() bool { return seen }) {
			t.Error("waitUntil said done after its context ended: its caller would act anew")
		}
		if !seen || len(f.hazards()) != 1 {
			t.Errorf("seen %v, hazards %v: want the grant on the other side seen", seen, f.hazards())
		}
		if w.holds(0) || !w.holds(3) {
			t.Errorf("holding %v, want p3 alone: every queued event followed", w.holding)
		}
	})
	t.Run("each hands see every queued event, once the run ended", func(t *testing.T) {
		w := watch(grants())
		var saw []int64
		w.each(ended, time.Hour, func(e history.Event) { saw = append(saw, e.Time) })
		if len(saw) != 3 {
			t.Errorf("see got events at %v, want all 3", saw)
		}
	})
	t.Run("past a deadline, the events recorded already", func(t *testing.T) {
		w := watch(grants())
		fired := make(chan time.Time, 1)
		fired <- time.Now()
		var saw []int64
		for {
			e, ok := w.next(context.Background(), fired)
			if !ok {
				break
			}
			saw = append(saw, e.Time)
		}
		if len(saw) != 3 {
			t.Errorf("next returned events at %v past its deadline, want all 3", saw)
		}
		if _, ok := w.next(context.Background(), fired); ok {
			t.Error("next went on waiting past a deadline it had seen fire")
		}
	})
}

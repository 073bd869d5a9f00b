package harness

import (
	"context"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
)

// Analyze runs every checker on a history and writes results.json, report.html and
// junit.xml into dir. It needs nothing but the history, so `lockbreaker check` calls it
// on a saved run and gets the verdicts the run itself got.
func Analyze(ctx context.Context, dir string, events []history.Event, s results.Summary) (results.Summary, error) {
	s.Results = checkers.RunAll(ctx, checkers.All(), events, checkers.Options{Dir: dir, Timeout: time.Minute})
	s.Verdict = checkers.Worst(s.Results)
	s.Ops = results.Tally(events)
	s.Faults = len(history.Faults(events))
	s.Finished = time.Now()
	return s, results.WriteAll(dir, s, events)
}

package harness

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
)

// checkTimeout bounds the porcupine searches of one analysis.
const checkTimeout = time.Minute

// Analyze judges a history (checkers.Judge) and writes results.json, report.html and
// junit.xml into dir. It needs nothing but the history and the summary's spec, so
// `lockbreaker check` calls it on a saved run and gets the verdicts the run itself got.
// The summary's times are the run's own and are kept: checking again changes no byte of
// results.json. The error is about writing the files; the summary is complete either way.
func Analyze(ctx context.Context, dir string, events []history.Event, s results.Summary) (results.Summary, error) {
	opts := checkers.Options{Dir: dir, Timeout: checkTimeout, FaultsRequested: faultsRequested(s.Spec)}
	s.Results = checkers.Judge(ctx, events, opts)
	s.Verdict = "" // an input only to Overall: the verdict of an earlier check must not stick
	s.Verdict = s.Overall()
	s.Ops = results.Tally(events)
	s.Faults = len(history.Faults(events))
	return s, results.WriteAll(dir, s, events)
}

// faultsRequested says whether the spec asked for any fault. A history checked without
// its spec is not held to that.
func faultsRequested(spec json.RawMessage) bool {
	var s Spec
	if json.Unmarshal(spec, &s) != nil {
		return false
	}
	for _, name := range s.Nemesis {
		if name != "" && name != "none" {
			return true
		}
	}
	return false
}

package harness

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/results"
)

// DefaultCheckTimeout bounds each checker's porcupine searches unless the user
// gives more (lockbreaker check --timeout).
const DefaultCheckTimeout = time.Minute

// Analyze judges a history (checkers.Judge, its searches bounded by timeout), completes the
// summary from it (results, verdict, op and fault counts, rerun command) and writes results.json,
// report.html and junit.xml into dir. It needs nothing but the history and the summary's
// spec, so `lockbreaker check` calls it on a saved run and gets the verdicts the run itself
// got. The summary's times, notes and error are the caller's and are kept: checking again
// changes no byte of results.json. The error is about writing the files; the summary is
// complete either way.
func Analyze(ctx context.Context, dir string, events []history.Event, s results.Summary, timeout time.Duration) (results.Summary, error) {
	// Paired once for the checkers, the counts and the report.
	ops, pairErr := history.Pair(events)
	faults, hazards := requested(s.Spec)
	opts := checkers.Options{Dir: dir, Timeout: timeout, FaultsRequested: faults, Hazards: hazards, Ops: ops}
	s.Results = checkers.Judge(ctx, events, opts)
	s.Verdict = overall(s.Results, s.Error)
	// A history that does not pair has no counts; every checker's verdict names why.
	s.Ops = nil
	if pairErr == nil {
		s.Ops = results.Count(ops)
	}
	s.Faults = len(history.Faults(events))
	s.Hazards = results.CountHazards(events, hazards)
	s.Command = ReproduceCommand(s.Spec)
	return s, results.WriteAll(dir, s, events, ops)
}

// overall is a run's verdict: the worst of the checkers' (unknown when none decided) and
// never valid when the harness broke, since the history may then be partial.
func overall(rs []checkers.Result, harnessError string) checkers.Verdict {
	v := checkers.Worst(rs)
	if v == checkers.Valid && harnessError != "" {
		return checkers.Unknown
	}
	return v
}

// requested says whether the spec asked for any fault, and which hazards its nemeses exist
// to create (nemesis.Hazards). A history checked without its spec is held to neither.
func requested(spec json.RawMessage) (faults bool, hazards map[string]history.Hazard) {
	var s Spec
	if json.Unmarshal(spec, &s) != nil {
		return false, nil
	}
	for _, name := range s.Nemesis {
		if name != "" && name != "none" {
			faults = true
		}
	}
	return faults, nemesis.Hazards(s.Nemesis)
}

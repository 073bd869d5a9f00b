package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// Summary is one run's outcome, what results.json holds.
type Summary struct {
	Test  string `json:"test"`
	RunID string `json:"run_id"`
	// Spec is the harness's spec as it ran; opaque here, shown pretty-printed in the report.
	Spec     json.RawMessage `json:"spec,omitempty"`
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	// Verdict is the overall line: see Overall.
	Verdict checkers.Verdict `json:"verdict"`
	// Results are the checkers' verdicts, one each, in the order they ran.
	Results []checkers.Result `json:"results"`
	// Notes are facts a reader needs to judge the run, e.g. "Redlock has no fencing token".
	Notes []string `json:"notes,omitempty"`
	// Ops counts operations by outcome and by function and outcome: see Tally.
	Ops map[string]int `json:"ops,omitempty"`
	// Faults is the number of faults the nemesis injected.
	Faults int `json:"faults"`
	// Error is the harness error that broke the run, if one did.
	Error string `json:"error,omitempty"`
}

// Overall is the run's overall verdict: the worst of Verdict (when set) and the checkers'
// results, and never valid when no checker ran or the harness broke.
func (s Summary) Overall() checkers.Verdict {
	rs := s.Results
	if s.Verdict != "" {
		rs = append(rs[:len(rs):len(rs)], checkers.Result{Verdict: s.Verdict})
	}
	v := checkers.Worst(rs)
	if v == checkers.Valid && (len(s.Results) == 0 || s.Error != "") {
		return checkers.Unknown
	}
	return v
}

// WriteSummary writes results.json in dir (atomically), with Verdict set to Overall.
func WriteSummary(dir string, s Summary) error {
	s.Verdict = s.Overall()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", SummaryFile, err)
	}
	return writeAtomic(filepath.Join(dir, SummaryFile), append(b, '\n'))
}

// ReadSummary reads results.json from a run directory.
func ReadSummary(dir string) (Summary, error) {
	var s Summary
	path := filepath.Join(dir, SummaryFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read run summary: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read run summary %s: %w", path, err)
	}
	return s, nil
}

// Tally counts client operations (nemesis events excluded) by outcome ("ok": 12) and by
// function and outcome ("acquire:ok": 12, "write:fail": 3). An operation the history ends
// before it completed counts as info, as the checkers treat it.
func Tally(events []history.Event) map[string]int {
	counts := map[string]int{}
	add := func(f history.Func, t history.Type) {
		counts[string(t)]++
		counts[string(f)+":"+string(t)]++
	}
	open := map[int]history.Func{}
	for _, e := range events {
		switch {
		case e.Process == history.NemesisProcess:
		case e.Type == history.Invoke:
			open[e.Process] = e.Func
		case e.IsCompletion():
			add(e.Func, e.Type)
			delete(open, e.Process)
		}
	}
	for _, f := range open {
		add(f, history.Info)
	}
	return counts
}

// WriteAll writes results.json, junit.xml and report.html (in that order, so the report
// links the other two), filling in Ops and Faults from events when they are unset, and
// returns every error, not just the first.
func WriteAll(dir string, s Summary, events []history.Event) error {
	if s.Ops == nil {
		s.Ops = Tally(events)
	}
	if s.Faults == 0 {
		s.Faults = len(history.Faults(events))
	}
	s.Verdict = s.Overall()
	return errors.Join(
		WriteSummary(dir, s),
		WriteJUnit(dir, s),
		WriteReport(dir, s, events),
	)
}

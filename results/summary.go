package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/async"
)

// Summary is one run's outcome, what results.json holds. Every field is decided before a
// writer sees it (analysis.File builds it); the writers render it as given.
type Summary struct {
	Test string `json:"test"`
	// RunID names and labels everything the run made (containers, networks, its workers'
	// environment): its directory's name, the harness's pid and its count of runs.
	RunID string `json:"run_id"`
	// Spec is the harness's spec as it ran; opaque here, shown pretty-printed in the report.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Command is the shell command that runs the spec again.
	Command string `json:"command,omitempty"`
	// Lease is what the run's lock promised its holders (lease-safety's measure); nil in a
	// run saved before it was written, whose lease-safety is then not applicable.
	Lease    *history.Lease `json:"lease,omitempty"`
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	// Verdict is the overall line: the worst of the checkers' verdicts, never valid when
	// none decided or the harness broke.
	Verdict checkers.Verdict `json:"verdict"`
	// Results are the checkers' verdicts, one each, in the order they ran.
	Results []checkers.Result `json:"results"`
	// Notes are facts a reader needs to judge the run, e.g. "Redlock has no fencing token".
	Notes []string `json:"notes,omitempty"`
	// Ops counts client operations by function and outcome: see Count.
	Ops OpCounts `json:"ops,omitempty"`
	// Faults is the number of faults the nemesis injected.
	Faults int `json:"faults"`
	// Hazards count the hazards that occurred (history.Hazard): first each one a nemesis of
	// the run exists to create, even when it never occurred, then any other seen.
	Hazards []HazardCount `json:"hazards,omitempty"`
	// Error is the harness error that broke the run, if one did.
	Error string `json:"error,omitempty"`
	// NotServing are the nodes a fault took down that did not serve again
	// (history.NotServing): the run ended there, and its verdict is never valid.
	NotServing []string `json:"not_serving,omitempty"`
}

// HazardCount is how often one hazard occurred in a run.
type HazardCount struct {
	Hazard history.Hazard `json:"hazard"`
	Count  int            `json:"count"`
	// Nemesis is the nemesis of the run that exists to create it, whose passes rest on it;
	// "" for a hazard seen on the way (a lease that expired in a pause-holder's pause).
	Nemesis string `json:"nemesis,omitempty"`
}

// CountHazards lists the hazards of a history: each of wanted (nemesis -> hazard), in the
// nemeses' order, then every other hazard that occurred, by name.
func CountHazards(events []history.Event, wanted map[string]history.Hazard) []HazardCount {
	counts := history.CountHazards(events)
	var list []HazardCount
	for _, nemesis := range slices.Sorted(maps.Keys(wanted)) {
		h := wanted[nemesis]
		list = append(list, HazardCount{Hazard: h, Count: counts[h], Nemesis: nemesis})
		delete(counts, h)
	}
	for _, h := range slices.Sorted(maps.Keys(counts)) {
		list = append(list, HazardCount{Hazard: h, Count: counts[h]})
	}
	return list
}

// Outcomes counts operations by how they ended.
type Outcomes struct {
	OK   int `json:"ok"`
	Fail int `json:"fail"`
	// Info: unknown whether it happened (timeout, lost connection, never completed).
	Info int `json:"info"`
}

// Total is the number of operations, whatever their outcome.
func (o Outcomes) Total() int { return o.OK + o.Fail + o.Info }

// OpCounts counts client operations by function, e.g. {"acquire": {"ok": 3, "fail": 1}}.
type OpCounts map[history.Func]Outcomes

// Total adds up every function's outcomes.
func (c OpCounts) Total() Outcomes {
	var sum Outcomes
	for _, o := range c {
		sum.OK, sum.Fail, sum.Info = sum.OK+o.OK, sum.Fail+o.Fail, sum.Info+o.Info
	}
	return sum
}

// WriteSummary writes results.json in dir (atomically).
func WriteSummary(dir string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", SummaryFile, err)
	}
	return WriteAtomic(filepath.Join(dir, SummaryFile), append(b, '\n'))
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

// ReadSummaryLenient reads results.json as ReadSummary does, but a file this version did not
// write (an older version's, another tool's) is no error: a field whose value does not
// decode as this version's is left zero, and a file that is not a JSON object gives the
// zero Summary. setAside says what was left out: the JSON names of such fields ("ops"), or
// "all of it (not a JSON object)". Only a file that cannot be read is an error.
func ReadSummaryLenient(dir string) (s Summary, setAside []string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return s, nil, fmt.Errorf("read run summary: %w", err)
	}
	if json.Unmarshal(b, &s) == nil {
		return s, nil, nil
	}
	s = Summary{} // a failed Unmarshal leaves what it had decoded, right or not
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return s, []string{"all of it (not a JSON object)"}, nil
	}
	// One field at a time, by its JSON name, so one that does not decode costs no other.
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		raw, ok := fields[name]
		if !ok {
			continue
		}
		field := reflect.New(v.Field(i).Type())
		if json.Unmarshal(raw, field.Interface()) != nil {
			setAside = append(setAside, name)
			continue
		}
		v.Field(i).Set(field.Elem())
	}
	return s, setAside, nil
}

// Count counts client operations (as history.Pair makes them, nemesis events excluded) by
// function and outcome. An operation the history ends before it completed counts as info,
// as the checkers treat it. A history that does not pair is not to be counted at all: a
// partial count would read as a whole one, and the checkers decide nothing from such a
// history either.
func Count(ops []history.Op) OpCounts {
	counts := OpCounts{}
	for _, op := range ops {
		counts.Add(op.Func(), op.Type())
	}
	return counts
}

// Add counts one operation of f that ended as t.
func (c OpCounts) Add(f history.Func, t history.Type) {
	o := c[f]
	switch t {
	case history.OK:
		o.OK++
	case history.Fail:
		o.Fail++
	default:
		o.Info++
	}
	c[f] = o
}

// WriteAll writes results.json, junit.xml and report.html from s as given, and returns
// every error, not just the first. The report is made while the other two are written,
// and links them once they are.
func WriteAll(dir string, s Summary, d *Drawing) error {
	var summaryErr, junitErr error
	written := async.Go(func() { summaryErr, junitErr = WriteSummary(dir, s), WriteJUnit(dir, s) })
	reportErr := writeReport(dir, s, d, written)
	written.Wait()
	return errors.Join(summaryErr, junitErr, reportErr)
}

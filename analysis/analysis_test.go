package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// staleWrite: client 0 is paused holding the lock, client 1 takes it and writes, client 0
// wakes and writes too; the storage accepts both.
const staleWrite = `{"index":0,"type":"invoke","process":0,"f":"acquire","key":"lock","time":1000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"lock","time":1100}
{"index":2,"type":"invoke","process":0,"f":"read","key":"lock","time":1200}
{"index":3,"type":"ok","process":0,"f":"read","key":"lock","value":0,"time":1300}
{"index":4,"type":"info","process":-1,"f":"start","fault":"pause-holder","nodes":["worker-0"],"time":1310}
{"index":5,"type":"invoke","process":1,"f":"acquire","key":"lock","time":1400}
{"index":6,"type":"ok","process":1,"f":"acquire","key":"lock","time":3500}
{"index":7,"type":"invoke","process":1,"f":"write","key":"lock","value":1,"time":3800}
{"index":8,"type":"ok","process":1,"f":"write","key":"lock","value":1,"time":3900}
{"index":9,"type":"info","process":-1,"f":"stop","fault":"pause-holder","nodes":["worker-0"],"time":5310}
{"index":10,"type":"invoke","process":0,"f":"write","key":"lock","value":1,"time":5400}
{"index":11,"type":"ok","process":0,"f":"write","key":"lock","value":1,"time":5500}
{"index":12,"type":"invoke","process":1,"f":"release","key":"lock","time":5600}
`

// analyze writes text as a run's history in dir and judges it.
func analyze(t *testing.T, dir, text string, s results.Summary) (results.Summary, error) {
	t.Helper()
	path := filepath.Join(dir, results.HistoryFile)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return File(context.Background(), dir, path, s, checkers.DefaultLimits)
}

// File builds the whole summary itself: what a saved results.json said about
// verdicts and counts is replaced, what the run said about itself (times, notes) is kept.
func TestAnalyzeCompletesTheSummary(t *testing.T) {
	dir := t.TempDir()
	saved := results.Summary{Test: "redis-pause", Notes: []string{"fencing off"}, Verdict: checkers.Valid,
		Ops: results.OpCounts{history.Acquire: {OK: 99}}, Faults: 7}
	got, err := analyze(t, dir, staleWrite, saved)
	if err != nil {
		t.Fatal(err)
	}
	want := results.OpCounts{history.Acquire: {OK: 2}, history.Read: {OK: 1}, history.Write: {OK: 2}, history.Release: {Info: 1}}
	if got.Verdict != checkers.Invalid || got.Faults != 1 || !reflect.DeepEqual(got.Ops, want) {
		t.Errorf("verdict %s, faults %d, ops %v; want invalid, 1, %v", got.Verdict, got.Faults, got.Ops, want)
	}
	if got.Test != saved.Test || !reflect.DeepEqual(got.Notes, saved.Notes) || len(got.Results) == 0 {
		t.Errorf("summary %+v lost what the run said or has no results", got)
	}
	written, err := results.ReadSummary(dir)
	if err != nil || !reflect.DeepEqual(written, got) {
		t.Errorf("results.json holds\n%+v (%v)\nwant what File returned\n%+v", written, err, got)
	}
}

// Acquires a majority granted too late (a Redlock client's spent validity) are counted in
// the notes, once however often the run is checked again, and judged as the refusals they
// were.
func TestSpentValidityIsCountedInTheNotes(t *testing.T) {
	spent := `{"index":0,"type":"invoke","process":0,"f":"acquire","key":"lock","time":1000}
{"index":1,"type":"fail","process":0,"f":"acquire","key":"lock","time":1100,"error":"busy","detail":{"validity spent":"2.1s"}}
{"index":2,"type":"invoke","process":1,"f":"acquire","key":"lock","time":1200}
{"index":3,"type":"fail","process":1,"f":"acquire","key":"lock","time":1300,"error":"busy","detail":{"validity spent":"2.4s"}}
{"index":4,"type":"invoke","process":0,"f":"acquire","key":"lock","time":1400}
{"index":5,"type":"ok","process":0,"f":"acquire","key":"lock","time":1500}
`
	dir := t.TempDir()
	got, err := analyze(t, dir, spent, results.Summary{})
	if err == nil {
		got, err = analyze(t, dir, spent, got)
	}
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, n := range got.Notes {
		if strings.Contains(n, "validity had run out") {
			counted = append(counted, n)
		}
	}
	if len(counted) != 1 || !strings.HasPrefix(counted[0], "2 acquires were granted by a majority") {
		t.Errorf("notes %q: want one saying 2 acquires were granted after their validity", got.Notes)
	}
	for _, r := range got.Results {
		if r.Verdict == checkers.Invalid {
			t.Errorf("%s invalid (%s): a spent grant is a refusal", r.Checker, r.Summary)
		}
	}
}

// On a run whose network was slowed and whose grants stated their validity, no spent grant
// is said too, with how close the grants came; a run that slowed nothing says nothing of it.
func TestASlowedRunSaysHowCloseItsGrantsCameToSpendingTheirValidity(t *testing.T) {
	grants := `{"index":0,"type":"invoke","process":0,"f":"acquire","key":"lock","time":1000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"lock","time":1100,"detail":{"validity":"1.62s"}}
{"index":2,"type":"invoke","process":1,"f":"acquire","key":"lock","time":1200}
{"index":3,"type":"ok","process":1,"f":"acquire","key":"lock","time":1300,"detail":{"validity":"812.4ms"}}
`
	slowed := `{"index":4,"type":"info","process":-1,"f":"start","time":1400,"fault":"` + history.SlowNetwork.Name + `","targets":["clients"]}
`
	for _, tt := range []struct {
		name, history, want string
	}{
		{"slowed", grants + slowed, "no acquire was granted only after the lock's validity had run out, though the network was slowed: " +
			"the least validity a grant was left with was 812ms"},
		{"not slowed", grants, ""},
	} {
		got, err := analyze(t, t.TempDir(), tt.history, results.Summary{})
		if err != nil {
			t.Fatal(err)
		}
		var said string
		for _, n := range got.Notes {
			if strings.Contains(n, "validity") {
				said = n
			}
		}
		if said != tt.want {
			t.Errorf("%s: notes %q, want the validity note %q", tt.name, got.Notes, tt.want)
		}
	}
}

// A history that does not pair is refused, naming its line: no verdict, no count and no
// results.json, since a partial judgement would read as a whole one.
func TestAnalyzeRefusesAHistoryThatDoesNotPair(t *testing.T) {
	dir := t.TempDir()
	saved := results.Summary{Ops: results.OpCounts{history.Acquire: {OK: 99}}}
	got, err := analyze(t, dir, staleWrite[strings.IndexByte(staleWrite, '\n')+1:], saved)
	if err == nil || !strings.Contains(err.Error(), "history.jsonl:1: ") || !strings.Contains(err.Error(), "without an invocation") {
		t.Errorf("error %v, want line 1 named as a completion without an invocation", err)
	}
	if len(got.Results) != 0 || !reflect.DeepEqual(got.Ops, saved.Ops) {
		t.Errorf("results %v, ops %v; want none and the caller's", got.Results, got.Ops)
	}
	if _, err := os.Stat(filepath.Join(dir, results.SummaryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("results.json written (%v)", err)
	}
}

func TestOverallVerdict(t *testing.T) {
	valid := checkers.Result{Checker: "a", Verdict: checkers.Valid}
	invalid := checkers.Result{Checker: "b", Verdict: checkers.Invalid}
	unknown := checkers.Result{Checker: "c", Verdict: checkers.Unknown}
	notApplicable := checkers.Result{Checker: "d", Verdict: checkers.NotApplicable}
	tests := []struct {
		name     string
		results  []checkers.Result
		cutShort bool
		want     checkers.Verdict
	}{
		{"all valid", []checkers.Result{valid, valid}, false, checkers.Valid},
		{"invalid beats unknown", []checkers.Result{valid, unknown, invalid}, false, checkers.Invalid},
		{"unknown beats valid", []checkers.Result{valid, unknown}, false, checkers.Unknown},
		{"no checker proves nothing", nil, false, checkers.Unknown},
		{"nothing decided proves nothing", []checkers.Result{notApplicable}, false, checkers.Unknown},
		{"a run cut short is never a pass", []checkers.Result{valid}, true, checkers.Unknown},
		{"a run cut short keeps invalid", []checkers.Result{invalid}, true, checkers.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := overall(tt.results, tt.cutShort); got != tt.want {
				t.Errorf("overall = %s, want %s", got, tt.want)
			}
		})
	}
}

// cleanRun: one client takes the lock, reads, writes and releases while a fault runs: a
// history in which nothing went wrong.
const cleanRun = `{"index":0,"type":"info","process":-1,"f":"start","fault":"some-fault","time":900}
{"index":1,"type":"invoke","process":0,"f":"acquire","key":"lock","time":1000}
{"index":2,"type":"ok","process":0,"f":"acquire","key":"lock","time":1100}
{"index":3,"type":"invoke","process":0,"f":"read","key":"lock","time":1200}
{"index":4,"type":"ok","process":0,"f":"read","key":"lock","value":0,"time":1300}
{"index":5,"type":"invoke","process":0,"f":"write","key":"lock","value":1,"time":1400}
{"index":6,"type":"ok","process":0,"f":"write","key":"lock","time":1500}
{"index":7,"type":"invoke","process":0,"f":"release","key":"lock","time":1600}
{"index":8,"type":"ok","process":0,"f":"release","key":"lock","time":1700}
{"index":9,"type":"info","process":-1,"f":"stop","fault":"some-fault","time":1800}
{"index":10,"type":"invoke","process":-2,"f":"final-read","key":"lock","time":1900}
{"index":11,"type":"ok","process":-2,"f":"final-read","key":"lock","value":1,"time":2000}
`

// A run that asked for a nemesis with a hazard, in which the hazard never occurred, is
// never valid, for every such nemesis; the same history with the hazard recorded is.
func TestARunWhoseHazardNeverOccurredIsNeverValid(t *testing.T) {
	targeted := history.Targets(history.TargetingFaults())
	if len(targeted) < 10 {
		t.Fatalf("only %d nemeses target a hazard: %v", len(targeted), targeted)
	}
	for name, hazard := range targeted {
		t.Run(name, func(t *testing.T) {
			saved, err := json.Marshal(spec.Spec{Nemesis: []string{name}})
			if err != nil {
				t.Fatal(err)
			}
			occurred := fmt.Sprintf(`{"index":12,"type":"info","process":-1,"f":"hazard","fault":%q,"hazard":%q,"time":1150}`+"\n", name, hazard)
			for _, tt := range []struct {
				history string
				want    checkers.Verdict
			}{{cleanRun, checkers.Unknown}, {cleanRun + occurred, checkers.Valid}} {
				got, err := analyze(t, t.TempDir(), tt.history, results.Summary{Spec: saved})
				if err != nil {
					t.Fatal(err)
				}
				if got.Verdict != tt.want {
					t.Errorf("verdict %s, want %s: %+v", got.Verdict, tt.want, got.Results)
				}
				stats := got.Results[len(got.Results)-1]
				if tt.want == checkers.Unknown && !strings.Contains(stats.Summary, hazard.Absent()) {
					t.Errorf("stats says %q, want it to say %q", stats.Summary, hazard.Absent())
				}
				if len(got.Hazards) == 0 || got.Hazards[0].Hazard != hazard || got.Hazards[0].Nemesis != name {
					t.Errorf("hazards %+v, want %s's %s first", got.Hazards, name, hazard)
				}
			}
		})
	}
}

// A node a fault took down that did not serve again ends the run: its history, valid
// otherwise, is unknown, and a note says which node and where its log is.
func TestANodeThatDidNotComeBackIsNeverValid(t *testing.T) {
	saved, err := json.Marshal(spec.Spec{Nemesis: []string{history.KillNode.Name}})
	if err != nil {
		t.Fatal(err)
	}
	hazard := fmt.Sprintf(`{"index":12,"type":"info","process":-1,"f":"hazard","fault":"kill-node","hazard":%q,"time":1150}`+"\n",
		history.KillNode.Hazard)
	gone := `{"index":13,"type":"info","process":-1,"f":"not-serving","targets":["n2"],"message":"node n2 exited (exit status 1)","time":1850}` + "\n"
	for _, tt := range []struct {
		history string
		want    checkers.Verdict
	}{{cleanRun + hazard, checkers.Valid}, {cleanRun + hazard + gone, checkers.Unknown}} {
		got, err := analyze(t, t.TempDir(), tt.history, results.Summary{Spec: saved})
		if err != nil {
			t.Fatal(err)
		}
		said := slices.ContainsFunc(got.Notes, func(n string) bool {
			return strings.HasPrefix(n, "node n2 exited (exit status 1) after a fault took it down") && strings.HasSuffix(n, "(the log: nodes/n2.log)")
		})
		if got.Verdict != tt.want || said != (tt.want == checkers.Unknown) {
			t.Errorf("verdict %s, notes %q; want %s, and the node named when it did not come back", got.Verdict, got.Notes, tt.want)
		}
	}
}

// Every invalid lock-safety and data-safety result opens with the story of the first
// overlap, told with the spec's TTL; the other results have none.
func TestAnInvalidRunTellsWhatHappened(t *testing.T) {
	got, err := analyze(t, t.TempDir(), staleWrite, results.Summary{Spec: json.RawMessage(`{"ttl":"2us"}`)})
	if err != nil {
		t.Fatal(err)
	}
	told := 0
	for _, r := range got.Results {
		want := r.Verdict == checkers.Invalid && r.Property != checkers.PropertyPrecondition && r.Property != checkers.PropertyMetric
		switch text := checkers.StoryText(r.Story); {
		case want && (!strings.HasPrefix(text, "p0 was granted the lock at 0.00 s and read 0. p0's TTL of 2µs ran out") ||
			!strings.HasSuffix(text, "p0 and p1 both wrote 1: 1 update lost.")):
			t.Errorf("%s (%s) tells %q", r.Checker, r.Verdict, text)
		case !want && text != "":
			t.Errorf("%s (%s) tells %q, want no story", r.Checker, r.Verdict, text)
		case want:
			told++
		}
	}
	if told < 2 {
		t.Errorf("%d results tell the story, want mutual exclusion's and the data checkers'", told)
	}
}

// A history that turns out corrupt after the stream has cut pieces of it leaves no judge
// behind: in the bubble, a goroutine left blocked fails the test.
func TestACorruptHistoryLeavesNoJudgeRunning(t *testing.T) {
	dir := t.TempDir()
	if err := histgen.WriteRun(dir, histgen.Config{Ops: 2000, Clients: 3, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, results.HistoryFile)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("{oops\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		limits := checkers.Limits{PieceOps: 20, MaxOps: 1_000_000, LongOps: 200_000}
		if _, err := File(context.Background(), dir, path, results.Summary{}, limits); err == nil || !strings.Contains(err.Error(), "not a JSON event") {
			t.Errorf("error %v, want the corrupt line's", err)
		}
	})
}

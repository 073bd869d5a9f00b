package results

import (
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

const hostile = `<script>alert("x")</script>`

// update rewrites the golden pages in testdata from what the report renders now.
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the golden file testdata/name, byte for byte (-update writes it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := readFile(t, path); got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s differs from the golden %s from byte %d on: %q, want %q (go test -update rewrites it)",
			name, path, i, got[i:min(len(got), i+80)], want[i:min(len(want), i+80)])
	}
}

// hostileResults put markup everywhere a run's data reaches the report.
func hostileResults() []checkers.Result {
	evidence := make([]string, 60)
	for i := range evidence {
		evidence[i] = fmt.Sprintf("#%d ok p1 write %s", i, hostile)
	}
	return []checkers.Result{
		{Checker: "mutual-exclusion", Verdict: checkers.Invalid, Summary: "overlap on key " + hostile,
			Story: []checkers.Sentence{{Text: hostile, Event: 0}}, Evidence: evidence, Files: []string{"javascript:alert(1)", "../../etc/passwd", "porcupine k.html"}},
		{Checker: hostile, Verdict: checkers.Unknown, Summary: "timed out\x00" + hostile, Evidence: []string{hostile}},
		{Checker: "lost-updates", Verdict: checkers.Valid, Summary: "ok"},
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReport(t *testing.T) {
	tests := []struct {
		name        string
		golden      string // testdata's page it renders, byte for byte
		s           Summary
		rows        int
		contains    []string
		notContains []string
	}{
		{
			name:   "pause with fencing teaches",
			golden: "report-pause-fencing.html",
			s: Summary{Test: "redis-pause-fencing", RunID: "20261130T081530Z", Verdict: checkers.Invalid, Results: pauseFencingResults(),
				Started: time.Date(2026, 11, 30, 8, 15, 30, 0, time.UTC), Finished: time.Date(2026, 11, 30, 8, 15, 42, 345_000_000, time.UTC),
				Notes: []string{"fencing on"}, Spec: json.RawMessage(`{"system":"redis","fencing":true}`),
				Ops: OpCounts{history.Write: {OK: 1, Fail: 1, Info: 1}, history.Acquire: {OK: 2}}},
			rows: 5,
			contains: []string{
				`<div class="banner invalid"><strong>lock safety: VIOLATED, data safety: OK (3 stale requests rejected)`,
				"yet the storage stayed correct",
				`<span class="verdict invalid">invalid</span>`, `<span class="verdict valid">valid</span>`,
				`<a href="lock-linearizable.html">lock-linearizable.html</a>`,
				`<a href="history.jsonl">`, `<a href="spec.json">`, `<a href="nodes/redis-1.log">`, `<a href="storage.jsonl">`,
				"overlaps=1", "fencing on", `&#34;fencing&#34;: true`,
				`<p class="muted">The first violation (lock-linearizable, mutual-exclusion), told from the history`,
				`<li><a class="to-timeline" href="#timeline" data-at="11100.000">p1 was granted the lock (token 2) at 0.00 s, while p0 still held it.</a></li>`,
				`<li>p0 wrote 1 with token 1 at 0.01 s, and the storage refused it as stale.</li>`,
				"<td>pause</td><td>0</td><td class=\"num\">1.000</td><td class=\"num\">13.000</td><td>yes</td>",
				`<h1>redis-pause-fencing <span class="verdict invalid">invalid</span></h1>`,
				"<tr><td>acquire</td><td class=\"num\">2</td><td class=\"num\">0</td><td class=\"num\">0</td><td class=\"num\">2</td></tr>\n" +
					"<tr><td>write</td><td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">3</td></tr>",
				"<tr><th>total</th><th class=\"num\">3</th><th class=\"num\">1</th><th class=\"num\">1</th><th class=\"num\">5</th></tr>",
			},
			notContains: []string{`<script>alert`},
		},
		{
			name:        "all valid has no lesson",
			golden:      "report-valid.html",
			s:           Summary{Test: "redis-nofault", Verdict: checkers.Valid, Results: pauseFencingResults()[2:]},
			rows:        3,
			contains:    []string{`<h1>redis-nofault <span class="verdict valid">valid</span></h1>`, "No operations were counted."},
			notContains: []string{"lock safety:", "yet the storage"},
		},
		{
			name:   "not applicable is its own grey verdict",
			golden: "report-not-applicable.html",
			s: Summary{Test: "redlock", Results: append(pauseFencingResults()[2:4],
				checkers.Result{Checker: "fencing", Property: checkers.PropertyFencing, Verdict: checkers.NotApplicable, Summary: "no tokens"})},
			rows:     3,
			contains: []string{`<span class="verdict not-applicable">not-applicable</span>`, ".verdict.not-applicable { background: var(--na); }"},
		},
		{
			name: "a node that did not serve again",
			s: Summary{Test: "zookeeper-power-loss", Verdict: checkers.Unknown, Results: pauseFencingResults()[2:],
				NotServing: []string{"n2"}},
			rows:     3,
			contains: []string{"The service did not come back", "did not serve again after a fault took them down: n2"},
		},
		{
			name:   "hostile strings are escaped",
			golden: "report-hostile.html",
			s: Summary{Test: hostile, RunID: hostile, Verdict: checkers.Invalid, Results: hostileResults(), Notes: []string{hostile},
				Error: hostile, Spec: json.RawMessage(`{"key":"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}`)},
			rows: 3,
			contains: []string{
				"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "and 10 more (all in results.json)", "#49 ok p1 write",
				`<a href="./javascript:alert%281%29">`, `<code>../../etc/passwd</code>`, `<a href="porcupine%20k.html">`,
				`<span class="verdict unknown">unknown</span>`, "The run broke",
			},
			notContains: []string{`<script>alert`, `href="javascript`, "#50 ok p1 write", `href="../`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{HistoryFile, SpecFile, StorageFile, filepath.Join(NodesDir, "redis-1.log")} {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteReport(dir, tt.s, Draw(pauseHistory())); err != nil {
				t.Fatal(err)
			}
			page := readFile(t, filepath.Join(dir, ReportFile))
			if got := strings.Count(page, `<tr><td><a href="#checker-`); got != tt.rows {
				t.Errorf("%d verdict rows, want one per checker (%d)", got, tt.rows)
			}
			for _, want := range tt.contains {
				if !strings.Contains(page, want) {
					t.Errorf("report lacks %q", want)
				}
			}
			if n := strings.Count(page, "<script"); n != 1 {
				t.Errorf("%d script elements, want only the page's own", n)
			}
			for _, bad := range tt.notContains {
				if strings.Contains(page, bad) {
					t.Errorf("report contains %q", bad)
				}
			}
			if tt.golden != "" { // a page a golden already shows whole is asserted by what it contains
				golden(t, tt.golden, page)
			}
			if t.Failed() {
				t.Log(page)
			}
		})
	}
}

type junitDoc struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnit(t *testing.T) {
	tests := []struct {
		name                    string
		s                       Summary
		tests, failures, errors int
		failed, errored         []string
	}{
		{"pause with fencing", Summary{Test: "redis-pause-fencing", Results: pauseFencingResults()},
			5, 2, 0, []string{"lock-linearizable", "mutual-exclusion"}, nil},
		{"hostile", Summary{Test: hostile, Results: hostileResults()},
			3, 1, 1, []string{"mutual-exclusion"}, []string{hostile}},
		{"harness error adds an errored case", Summary{Test: "t", Results: pauseFencingResults()[2:], Error: "docker went away"},
			4, 0, 1, nil, []string{"harness"}},
		{"a node that did not serve again adds an errored case", Summary{Test: "t", Results: pauseFencingResults()[2:],
			NotServing: []string{"n2"}}, 4, 0, 1, nil, []string{"service"}},
		{"no checker is an error", Summary{Test: "t"}, 1, 0, 1, nil, []string{"checkers"}},
		{"a metric never fails, not applicable is skipped", Summary{Test: "t", Results: []checkers.Result{
			{Checker: "herd", Property: checkers.PropertyMetric, Verdict: checkers.Invalid, Summary: "a thundering herd"},
			{Checker: "fencing", Property: checkers.PropertyFencing, Verdict: checkers.NotApplicable, Summary: "no tokens"},
		}}, 2, 0, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.s.Started = time.Date(2026, 11, 30, 8, 15, 30, 0, time.UTC)
			tt.s.Finished = tt.s.Started.Add(90 * time.Second)
			if err := WriteJUnit(dir, tt.s); err != nil {
				t.Fatal(err)
			}
			raw := readFile(t, filepath.Join(dir, JUnitFile))
			var doc junitDoc
			if err := xml.Unmarshal([]byte(raw), &doc); err != nil {
				t.Fatalf("junit.xml is not valid XML: %v\n%s", err, raw)
			}
			if len(doc.Suites) != 1 || doc.Suites[0].Name != tt.s.Test {
				t.Fatalf("want one testsuite named %q, got %+v", tt.s.Test, doc.Suites)
			}
			suite := doc.Suites[0]
			for _, c := range [][2]int{{suite.Tests, tt.tests}, {suite.Failures, tt.failures}, {suite.Errors, tt.errors},
				{doc.Tests, tt.tests}, {doc.Failures, tt.failures}, {doc.Errors, tt.errors}} {
				if c[0] != c[1] {
					t.Errorf("counts tests/failures/errors = %d/%d/%d, want %d/%d/%d",
						suite.Tests, suite.Failures, suite.Errors, tt.tests, tt.failures, tt.errors)
					break
				}
			}
			var failed, errored []string
			for _, c := range suite.Cases {
				if c.Failure != nil {
					failed = append(failed, c.Name)
					// A CI page shows what happened before the evidence.
					if story := checkers.StoryText(storyOf(tt.s, checkers.Name(c.Name))); !strings.HasPrefix(c.Failure.Text, story) {
						t.Errorf("%s's failure text %q does not open with its story %q", c.Name, c.Failure.Text, story)
					}
				}
				if c.Error != nil {
					errored = append(errored, c.Name)
				}
			}
			if fmt.Sprint(failed) != fmt.Sprint(tt.failed) || fmt.Sprint(errored) != fmt.Sprint(tt.errored) {
				t.Errorf("failed %v errored %v, want %v and %v", failed, errored, tt.failed, tt.errored)
			}
			if len(suite.Cases) != tt.tests {
				t.Errorf("%d testcases, want %d", len(suite.Cases), tt.tests)
			}
		})
	}
}

func storyOf(s Summary, checker checkers.Name) []checkers.Sentence {
	for _, r := range s.Results {
		if r.Checker == checker {
			return r.Story
		}
	}
	return nil
}

// The writers render the summary they are given, even where the history would say
// otherwise: they count and decide nothing, so the three files cannot disagree.
func TestWritersRenderTheSummaryAsGiven(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, HistoryFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The checkers' results say invalid and the history holds two faults and two acquires.
	want := Summary{Test: "redis-pause-fencing", Verdict: checkers.Unknown, Results: pauseFencingResults(),
		Ops: OpCounts{history.Acquire: {OK: 7}}, Faults: 9}
	if err := WriteAll(dir, want, Draw(pauseHistory())); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("results.json holds\n%+v\nwant it as given\n%+v", got, want)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	for _, wantText := range []string{
		`<h1>redis-pause-fencing <span class="verdict unknown">unknown</span></h1>`,
		"<tr><td>acquire</td><td class=\"num\">7</td><td class=\"num\">0</td><td class=\"num\">0</td><td class=\"num\">7</td></tr>\n<tr><th>total</th>",
		`<a href="results.json">`, `<a href="junit.xml">`, `<a href="history.jsonl">`,
	} {
		if !strings.Contains(page, wantText) {
			t.Errorf("report lacks %q", wantText)
		}
	}
	if strings.Contains(page, "<td>write</td>") {
		t.Error("report counted the history's writes itself")
	}
}

// The note on the timeline counts the events it is drawn from, fewer than TimelineEvents
// when the history's reader could not read them all again.
func TestDrawingNoteCountsTheEventsDrawn(t *testing.T) {
	events := make([]history.Event, 10)
	cases := []struct {
		name   string
		events []history.Event
		total  int
		want   string
	}{
		{"all drawn", events, 10, ""},
		{"the first TimelineEvents", make([]history.Event, TimelineEvents), TimelineEvents + 1,
			fmt.Sprintf("the first %d of the history's %d events;", TimelineEvents, TimelineEvents+1)},
		{"fewer read again", events, 50, "the first 10 of the history's 50 events;"},
	}
	for _, c := range cases {
		d := &Drawing{Events: c.events, Total: c.total}
		if got := d.Note(); c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: note %q, want one with %q", c.name, got, c.want)
		}
	}
}

package results

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// kleppmann is a history of n rounds on key "lock" by clients p0..p4, one holder at a
// time; every pauseEvery-th holder is paused past its lease (a nemesis fault), the next
// client acquires meanwhile, and the paused one wakes to write with its old token, which
// the storage rejects when fenced and accepts when not. Every tenth wakeful holder's
// release times out (info), so its client goes on in a new lane.
func kleppmann(rounds, pauseEvery int, fenced bool) []history.Event {
	const ms = int64(time.Millisecond)
	now, token := int64(5000)*int64(time.Second), int64(0)
	var events []history.Event
	add := func(e history.Event) {
		e.Index, e.Key = len(events), "lock"
		if e.Time == 0 {
			now += ms
			e.Time = now
		}
		events = append(events, e)
	}
	op := func(p int, f history.Func, outcome history.Type, tok *int64, value *int64, err history.ErrorKind) {
		invoke, done := history.Event{Type: history.Invoke, Process: p, Func: f, Token: tok, Value: value},
			history.Event{Type: outcome, Process: p, Func: f, Error: err}
		if f == history.Acquire { // a grant carries its token back
			invoke.Token, done.Token = nil, tok
		}
		add(invoke)
		if f == history.Read && outcome == history.OK {
			done.Value = history.Int64(0)
		}
		add(done)
	}
	for round := range rounds {
		p := round % 5
		token++
		mine := history.Int64(token)
		op(p, history.Acquire, history.OK, mine, nil, "")
		op(p, history.Read, history.OK, mine, nil, "")
		if pauseEvery > 0 && round%pauseEvery == pauseEvery-1 {
			add(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Start, Fault: "pause-holder",
				Targets: []string{fmt.Sprintf("worker-%d", p)}})
			next := (p + 1) % 5
			token++
			theirs := history.Int64(token)
			op(next, history.Acquire, history.OK, theirs, nil, "")
			op(next, history.Write, history.OK, theirs, history.Int64(int64(round)), "")
			op(next, history.Release, history.OK, nil, nil, "")
			add(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Stop, Fault: "pause-holder",
				Targets: []string{fmt.Sprintf("worker-%d", p)}})
			stale, kind := history.OK, history.ErrorKind("")
			if fenced {
				stale, kind = history.Fail, history.ErrStaleToken
			}
			op(p, history.Write, stale, mine, history.Int64(int64(round)), kind)
			op(p, history.Release, history.Fail, nil, nil, history.ErrNotHeld)
			continue
		}
		op(p, history.Write, history.OK, mine, history.Int64(int64(round)), "")
		release := history.OK
		if round%10 == 3 {
			release = history.Info
		}
		op(p, history.Release, release, nil, nil, "")
	}
	add(history.Event{Type: history.Invoke, Process: history.HarnessProcess, Func: history.FinalRead})
	add(history.Event{Type: history.OK, Process: history.HarnessProcess, Func: history.FinalRead, Value: history.Int64(0)})
	return events
}

// judged is a summary of events as the harness would make it, with mutual-exclusion's
// real overlaps.
func judged(events []history.Event) Summary {
	var me checkers.Result
	for _, ck := range checkers.All() {
		if ck.Name() == "mutual-exclusion" {
			me = ck.Check(context.Background(), events, checkers.Options{})
		}
	}
	ops, _ := history.Pair(events)
	return Summary{Test: "local-pause", RunID: "20261130T081530Z", Verdict: me.Verdict, Results: []checkers.Result{me}, Ops: Count(ops),
		Spec:    []byte(`{"system":"local","client":"local","nemesis":["pause-holder"],"fencing":false,"clients":5,"seed":7,"ttl":"500ms","time_limit":"5s"}`),
		Command: "lockbreaker run --system local --nemesis pause-holder"}
}

func TestReportDrawsTheRun(t *testing.T) {
	tests := []struct {
		name        string
		events      []history.Event
		contains    []string
		notContains []string
	}{
		{
			name:   "violated",
			events: kleppmann(12, 4, false),
			contains: []string{
				`<text class="lane" x="64" y="39">nemesis</text>`, `>p0</text>`, `>p4</text>`, `>harness</text>`,
				`<rect class="overlap" id="overlap-0"`, `id="overlap-2"`,
				// The first violation is linked from the verdicts and the evidence is grouped.
				`<td><a class="to-timeline" href="#overlap-0">t=30ms</a></td>`,
				`<a class="to-timeline" href="#overlap-0">p3 and p4 both held lock once, the longest for 3ms; first: p4 acquired it at #30 (t=30ms) while p3 held it since #25 (t=25ms)</a>`,
				"p2 and p3 both held lock once", "p1 and p2 both held lock once",
				`<rect class="fault" x="28.000" y="0" width="7.000"`,
				`<text class="fault" data-t="28.000"`, `>pause-holder worker-3</text>`,
				"system <b>local</b>", "ttl <b>500ms</b>", `<pre class="command">lockbreaker run --system local --nemesis pause-holder</pre>`,
				"<strong>Lock latency</strong>", "<strong>Throughput</strong>", "<strong>Fencing tokens</strong>",
				`<title>p3 write lock 3 token=4 -&gt; ok, #36 (t=36ms) .. #37 (t=37ms)</title>`,
			},
			notContains: []string{"<strong>Clock offsets</strong>", "#checker-mutual-exclusion\">evidence"},
		},
		{
			name:   "valid",
			events: kleppmann(9, 0, false),
			contains: []string{`>p0</text>`, "<strong>Lock latency</strong>", "the whole run: 37 operations, 9 holds",
				// The release that timed out starts p3's next life, in p3's lane: the two do not overlap.
				`<text class="life" data-t="64.000" x="876.6" y="135">p3&#39;1</text>`},
			notContains: []string{`class="overlap"`, `class="to-timeline"`, `<text class="lane" x="64" y="169">p3&#39;1</text>`},
		},
		{
			name:     "a history that does not pair has no timeline",
			events:   []history.Event{{Index: 0, Type: history.OK, Process: 0, Func: history.Acquire, Key: "k", Time: 5}},
			contains: []string{"The history&#39;s operations do not pair, so there is nothing to draw"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteReport(dir, judged(tt.events), Draw(tt.events)); err != nil {
				t.Fatal(err)
			}
			page := readFile(t, filepath.Join(dir, ReportFile))
			for _, want := range tt.contains {
				if !strings.Contains(page, want) {
					t.Errorf("report lacks %s", want)
				}
			}
			for _, bad := range tt.notContains {
				if strings.Contains(page, bad) {
					t.Errorf("report contains %s", bad)
				}
			}
			if t.Failed() {
				os.WriteFile(filepath.Join(os.TempDir(), "failed-report.html"), []byte(page), 0o644)
				t.Logf("the page is in %s", filepath.Join(os.TempDir(), "failed-report.html"))
			}
		})
	}
}

// A run of nearly 10,000 operations (timelineLimit), a fifth of its rounds with a paused
// holder, still makes a page of a few MB with every operation drawn and every overlap
// anchored.
func TestReportOfTenThousandOperationsStaysSmall(t *testing.T) {
	const limit = 4 << 20
	events := kleppmann(2100, 5, true)
	for i := range events { // times as untidy as a real run's, which take more room
		events[i].Time += int64(i*7919%1000) * int64(time.Microsecond)
	}
	s := judged(events)
	overlaps := len(s.Results[0].Overlaps)
	if ops := s.Ops.Total().Total(); ops < 9_000 || ops > timelineLimit || overlaps < 400 {
		t.Fatalf("the history has %d operations and %d overlaps; want nearly %d and hundreds", ops, overlaps, timelineLimit)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, s, Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	if len(page) > limit {
		t.Errorf("report is %d bytes, over %d", len(page), limit)
	}
	t.Logf("%d operations, %d overlaps: %d bytes", s.Ops.Total().Total(), overlaps, len(page))
	if lanes := strings.Count(page, `<text class="lane"`); lanes != 7 {
		t.Errorf("%d lanes, want the nemesis's, the harness's and one per client, whose lives share it", lanes)
	}
	for _, want := range []string{fmt.Sprintf(`id="overlap-%d"`, overlaps-1), `<g class="labels tokens hidden">`, "and 390 more"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %s", want)
		}
	}
}

// A run of more operations than the timeline draws is drawn around its first violation,
// with that stretch's overlaps anchored, the others listed unlinked, and a sentence saying
// what was capped; results.json is not the page's business and keeps its overlaps.
func TestReportOfALongRunIsCapped(t *testing.T) {
	events := kleppmann(4000, 5, true)
	s := judged(events)
	dir := t.TempDir()
	if err := WriteReport(dir, s, Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	drawn := strings.Count(page, `<path class="`)
	if drawn != timelineLimit {
		t.Errorf("%d operations drawn, want %d", drawn, timelineLimit)
	}
	ops := s.Ops.Total().Total()
	for _, want := range []string{fmt.Sprintf("The run has %d operations; the timeline draws %d of them", ops, timelineLimit),
		`data-from="`, `id="overlap-0"`, `<span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %s", want)
		}
	}
	if overlaps := len(s.Results[0].Overlaps); strings.Contains(page, fmt.Sprintf(`id="overlap-%d"`, overlaps-1)) {
		t.Errorf("the last of %d overlaps is anchored, far from the first", overlaps)
	}
}

// Every string a history carries into the timeline and the plots is escaped.
func TestTimelineEscapesHostileHistories(t *testing.T) {
	events := kleppmann(8, 5, false)
	for i := range events {
		events[i].Key = hostile
		if events[i].Process == history.NemesisProcess {
			events[i].Fault, events[i].Targets = hostile, []string{hostile}
			events[i].Detail = map[string]string{"offset": hostile}
		}
		if events[i].Type == history.Info {
			events[i].Message = hostile
		}
	}
	dir := t.TempDir()
	if err := WriteReport(dir, judged(events), Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	if strings.Contains(page, hostile) || strings.Count(page, "<script") != 1 {
		t.Errorf("a hostile string reached the page unescaped")
	}
	for _, want := range []string{`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks the hostile string escaped as %s", want)
		}
	}
}

// A plot of more dots than maxDots draws them on whole units, each place once, and says so.
func TestPlotOfManyDotsIsGridded(t *testing.T) {
	var dots []dot
	for i := range 3 * maxDots {
		dots = append(dots, dot{X: 64 + float64(i%9000)/10, Y: 8 + float64(i%1600)/10, Class: "ok"})
	}
	p := plotView{Caption: "Latency."}
	drawn := distinct(&p, dots)
	if len(drawn) > maxDots || len(drawn) == 0 {
		t.Errorf("%d dots drawn, want at most %d", len(drawn), maxDots)
	}
	for _, d := range drawn {
		if d.X != float64(int(d.X)) || d.Y != float64(int(d.Y)) {
			t.Fatalf("dot %+v is not on a whole unit", d)
		}
	}
	if want := fmt.Sprintf("Of its %d dots", 3*maxDots); !strings.Contains(p.Caption, want) {
		t.Errorf("caption %q does not say %q", p.Caption, want)
	}
}

// When mutual-exclusion found more overlaps than it keeps, the page says how many it lists.
func TestReportSaysWhenOverlapsAreCapped(t *testing.T) {
	s := judged(kleppmann(200, 5, true))
	kept := len(s.Results[0].Overlaps)
	for _, found := range []int{kept, kept + 5} {
		s.Results[0].Counts["overlaps"] = found
		dir := t.TempDir()
		if err := WriteReport(dir, s, Draw(kleppmann(200, 5, true))); err != nil {
			t.Fatal(err)
		}
		page := readFile(t, filepath.Join(dir, ReportFile))
		want := "results.json lists every occurrence (overlaps)"
		if found > kept {
			want = fmt.Sprintf("results.json lists the first %d occurrences of %d (overlaps)", kept, found)
		}
		if kept == 0 || !strings.Contains(page, want) {
			t.Errorf("%d overlaps kept of %d: the page lacks %q", kept, found, want)
		}
	}
}

package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// store makes a run store: runs of the given summaries (nil: a run without results.json)
// under test/run, with the latest links and litter the index must pass over.
func store(t *testing.T, runs map[string]*Summary) string {
	t.Helper()
	root := t.TempDir()
	for path, s := range runs {
		dir := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, HistoryFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if s != nil {
			if err := WriteSummary(dir, *s); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ReportFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, litter := range []string{".hidden/20261130T081530Z", "empty-test/20261130T081530Z"} {
		os.MkdirAll(filepath.Join(root, litter), 0o755)
	}
	os.Symlink("local-pause/20261130T090000Z", filepath.Join(root, Latest))
	return root
}

// hostileName is markup that can name a directory.
const hostileName = "<img src=x onerror=alert(1)>"

func ranAt(clock string, verdict checkers.Verdict, spec string, results ...checkers.Result) *Summary {
	started, _ := time.Parse(time.RFC3339, clock)
	return &Summary{Verdict: verdict, Started: started, Finished: started.Add(5 * time.Second), Spec: json.RawMessage(spec),
		Results: results, Ops: OpCounts{"acquire": {OK: 3, Fail: 1}}, Faults: 2}
}

func TestIndexListsEveryRunNewestFirst(t *testing.T) {
	root := store(t, map[string]*Summary{
		"local-pause/20261130T090000Z": ranAt("2026-11-30T09:00:00Z", checkers.Invalid,
			`{"system":"local","client":"local","nemesis":["pause-holder","kill-client"],"fencing":false}`, pauseFencingResults()...),
		"local-none/20261130T080000Z":     ranAt("2026-11-30T08:00:00Z", checkers.Valid, `{"system":"local","client":"local","nemesis":["none"],"fencing":true}`),
		hostileName + "/20261130T070000Z": ranAt("2026-11-30T07:00:00Z", checkers.Unknown, `{"system":"`+strings.ReplaceAll(hostile, `"`, `\"`)+`"}`),
		"redis-pause/20261130T100000Z":    nil,
		// a suite keeps its runs deeper; they are runs all the same
		"suite-smoke/20261130T060000Z/runs/local-none/20261130T060001Z": ranAt("2026-11-30T06:00:01Z", checkers.Valid,
			`{"system":"local","client":"local","nemesis":["none"],"fencing":true}`),
	})
	if err := WriteIndex(root, nil); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(root, IndexFile))
	order := []string{"redis-pause", "local-pause", "local-none", "&lt;img", "suite-smoke/"}
	last := -1
	for _, test := range order {
		at := strings.Index(page, `">`+test)
		if at < last {
			t.Errorf("%s is not after the run before it: want newest first, %v", test, order)
		}
		last = at
	}
	for _, want := range []string{
		`<tr class="run invalid" data-system="[&#34;local&#34;]" data-client="[&#34;local&#34;]" data-nemesis="[&#34;pause-holder&#34;,&#34;kill-client&#34;]" data-verdict="[&#34;invalid&#34;]">`,
		`<a href="local-pause/20261130T090000Z/report.html">local-pause</a>`, "lock safety: VIOLATED, data safety: OK (3 stale requests rejected)",
		`<a href="redis-pause/20261130T100000Z/">redis-pause</a>`, "no results: running, or it stopped before checking",
		`<tr class="run valid"`, "<td>on</td>", "<td>2026-11-30 08:00:00</td>", "<td>5s</td>",
		`<option>kill-client</option><option>none</option><option>pause-holder</option>`,
		`<option>invalid</option><option>unknown</option><option>valid</option>`,
		`<a href="%3Cimg%20src=x%20onerror=alert%281%29%3E/20261130T070000Z/report.html">&lt;img src=x onerror=alert(1)&gt;</a>`,
		`<td>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</td>`,
		`<a href="suite-smoke/20261130T060000Z/runs/local-none/20261130T060001Z/report.html">suite-smoke/20261130T060000Z/runs/local-none</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("index lacks %s", want)
		}
	}
	if n := strings.Count(page, `<tr class="run`); n != 5 {
		t.Errorf("%d runs listed, want 5", n)
	}
	if strings.Contains(page, hostile) || strings.Contains(page, hostileName) || strings.Count(page, "<script") != 1 {
		t.Errorf("a hostile string reached the index unescaped")
	}
}

// A run counts the hazards its nemeses exist to create beside its faults, an absent one
// too, and no other.
func TestIndexCountsWantedHazards(t *testing.T) {
	lost := ranAt("2026-11-30T09:00:00Z", checkers.Valid, `{"system":"sentinel","client":"redis","nemesis":["failover","pause-holder"]}`)
	lost.Hazards = []HazardCount{{Hazard: history.GrantLost, Count: 9, Nemesis: "failover"},
		{Hazard: history.GrantedInPause, Nemesis: "pause-holder"}, {Hazard: history.LeaseExpiredInPause, Count: 4}}
	root := store(t, map[string]*Summary{"sentinel-failover/20261130T090000Z": lost})
	if err := WriteIndex(root, nil); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(root, IndexFile))
	for _, want := range []string{
		`<td class="num">2<br><small class="hazard" title="grant-lost, what failover exists to create">9 lost grants</small>` +
			`<br><small class="hazard absent" title="` + history.GrantedInPause.Absent() + `">0 grants while their holder was paused</small></td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("index lacks %s", want)
		}
	}
	if strings.Contains(page, "lease") {
		t.Error("the index counts a hazard no nemesis of the run asked for")
	}
}

func TestRefreshIndexOnlyWhereThereIsOne(t *testing.T) {
	root := store(t, map[string]*Summary{"local-none/20261130T080000Z": ranAt("2026-11-30T08:00:00Z", checkers.Valid, `{}`)})
	run := filepath.Join(root, "local-none", "20261130T080000Z")
	if err := RefreshIndex(run, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, IndexFile)); err == nil {
		t.Fatal("RefreshIndex made an index where there was none")
	}
	if err := os.WriteFile(filepath.Join(root, IndexFile), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RefreshIndex(run, nil); err != nil {
		t.Fatal(err)
	}
	if page := readFile(t, filepath.Join(root, IndexFile)); !strings.Contains(page, "local-none") {
		t.Errorf("the index was not rebuilt: %s", page)
	}
}

// The index shows each suite's trend as it is given, every string escaped; an index with
// no suites shows no section for them.
func TestIndexShowsSuiteTrendsEscaped(t *testing.T) {
	root := store(t, map[string]*Summary{"local-none/20261130T080000Z": ranAt("2026-11-30T08:00:00Z", checkers.Valid, `{}`)})
	if page, _ := RenderIndex(root, nil); strings.Contains(string(page), "<h2>Suites</h2>") {
		t.Error("an index without trends shows a suites section")
	}
	trends := func(got string) ([]SuiteTrend, []string) {
		if got != root {
			t.Errorf("trends asked of %s, want the store %s", got, root)
		}
		return []SuiteTrend{{
			Suite: hostileName, Rule: hostile, Older: 3,
			Runs: []TrendRun{{Label: "2026-12-04 02:17", Href: "suite-x/20261204T021700Z/suite.html", Status: "failed", Text: "not met"},
				{Label: "2026-12-03 02:17", Href: "suite-x/20261203T021700Z/suite.html", Status: "met", Text: "met"}},
			Cells: []TrendCell{{Name: hostileName, Squares: []TrendSquare{
				{Status: "failed", Text: "not met", Href: "suite-x/20261204T021700Z/suite.html#cell-1", Rate: "0/2 (0 %)", Flags: []string{"regression", "drift"}},
				{}, // the older run did not have the cell
			}}},
			Flags: []TrendFlag{{Kind: "flaky", Cell: hostileName, Text: hostile, Command: "lockbreaker run --key '<b>'",
				Href: "suite-x/20261204T021700Z/runs/a/b/report.html"}},
		}}, []string{"read suite run " + hostile}
	}
	if err := WriteIndex(root, trends); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(root, IndexFile))
	for _, want := range []string{
		"<h2>Suites</h2>",
		`<p class="muted">Could not read a suite run: read suite run &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</p>`,
		"<h3>suite &lt;img src=x onerror=alert(1)&gt;</h3>",
		`<li class="flag flaky"><b>flaky</b> &lt;img src=x onerror=alert(1)&gt;: &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; (<a href="suite-x/20261204T021700Z/runs/a/b/report.html">report</a>)<code>lockbreaker run --key &#39;&lt;b&gt;&#39;</code></li>`,
		"(3 older runs not shown)",
		`<th class="sq failed"><a href="suite-x/20261204T021700Z/suite.html">2026-12-04 02:17</a><br>not met</th>`,
		`<tr><td>&lt;img src=x onerror=alert(1)&gt;</td><td class="sq failed"><a href="suite-x/20261204T021700Z/suite.html#cell-1">not met</a><br>found 0/2 (0 %)<br><span class="flag">regression</span><br><span class="flag">drift</span></td><td class="sq "></td></tr>`,
		"<h2>Runs</h2>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("index lacks %s", want)
		}
	}
	if strings.Contains(page, hostile) || strings.Contains(page, hostileName) || strings.Count(page, "<script") != 1 {
		t.Errorf("a hostile string reached the index unescaped")
	}
}

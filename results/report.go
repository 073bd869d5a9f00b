package results

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// WriteReport writes report.html in dir: a self-contained page (inline CSS, no scripts, no
// external assets) with the overall line, one verdict row per checker, each checker's
// evidence, links to the run's files, the notes, the spec, the faults and the op counts.
// The verdicts and counts are s's, as given; events only list the faults. Every value comes
// through html/template, so nothing a run recorded can inject markup.
func WriteReport(dir string, s Summary, events []history.Event) error {
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, newReport(dir, s, events)); err != nil {
		return fmt.Errorf("render %s: %w", ReportFile, err)
	}
	return WriteAtomic(filepath.Join(dir, ReportFile), buf.Bytes())
}

type report struct {
	Test, RunID       string
	Overall           verdictView
	Started, Duration string
	Headline          verdictView
	Lesson            string
	Error             string
	Checkers          []checkerView
	Artifacts         []link
	Notes             []string
	Spec              string
	Faults            []faultView
	Ops               []opRow
	OpsTotal          opRow
}

type verdictView struct{ Text, Class string }

type checkerView struct {
	Name     string
	Property string
	Verdict  verdictView
	Summary  string
	Counts   string
	Evidence []string
	More     int // evidence lines not shown
	Files    []link
}

// link is a file in the run directory; Href is empty when the name is not a safe relative path.
type link struct{ Name, Href string }

type faultView struct {
	Description, Targets, Start, Stop string
	Healed                            bool
}

// opRow is one line of the operations table; the template calls Outcomes.Total.
type opRow struct {
	Func string
	Outcomes
}

func newReport(dir string, s Summary, events []history.Event) report {
	r := report{Test: s.Test, RunID: s.RunID, Overall: viewVerdict(s.Verdict), Error: s.Error, Notes: s.Notes}
	if !s.Started.IsZero() {
		r.Started = s.Started.UTC().Format(time.RFC3339)
		if s.Finished.After(s.Started) {
			r.Duration = s.Finished.Sub(s.Started).Round(time.Millisecond).String()
		}
	}
	r.Headline, r.Lesson = headline(s.Results)
	for _, res := range s.Results {
		c := checkerView{Name: res.Checker, Property: string(res.Property), Verdict: viewVerdict(res.Verdict), Summary: res.Summary,
			Counts: formatCounts(res.Counts), Evidence: res.Evidence}
		if len(c.Evidence) > maxEvidence {
			c.Evidence, c.More = c.Evidence[:maxEvidence], len(c.Evidence)-maxEvidence
		}
		for _, f := range res.Files {
			c.Files = append(c.Files, newLink(f))
		}
		r.Checkers = append(r.Checkers, c)
	}
	r.Artifacts = artifacts(dir)
	r.Spec = prettySpec(s.Spec)
	r.Faults = faultViews(events)
	r.Ops, r.OpsTotal = opTable(s.Ops)
	return r
}

func viewVerdict(v checkers.Verdict) verdictView {
	switch v {
	case checkers.Valid, checkers.Invalid, checkers.NotApplicable:
		return verdictView{Text: string(v), Class: string(v)}
	}
	return verdictView{Text: string(checkers.Unknown), Class: string(checkers.Unknown)}
}

// headline says lock safety and data safety apart, e.g. "lock safety: VIOLATED, data
// safety: OK (3 stale requests rejected)", coloured by the worse of the two, and when the
// lock failed but the data held, why.
func headline(results []checkers.Result) (line verdictView, lesson string) {
	lock, okLock := groupVerdict(results, checkers.PropertyLockSafety)
	data, okData := groupVerdict(results, checkers.PropertyDataSafety)
	if !okLock || !okData {
		return verdictView{}, ""
	}
	word := map[checkers.Verdict]string{checkers.Valid: "OK", checkers.Invalid: "VIOLATED", checkers.Unknown: "UNKNOWN"}
	line = viewVerdict(checkers.Worst([]checkers.Result{{Verdict: lock}, {Verdict: data}}))
	line.Text = "lock safety: " + word[lock] + ", data safety: " + word[data]
	stale := 0
	for _, r := range results {
		if r.Property == checkers.PropertyFencing {
			stale += r.Counts[checkers.CountStaleRejected]
		}
	}
	if data == checkers.Valid && stale > 0 {
		line.Text += fmt.Sprintf(" (%d stale %s rejected)", stale, pluralWord(stale, "request"))
	}
	if lock == checkers.Invalid && data == checkers.Valid {
		lesson = "Two clients believed they held the lock at the same time, yet the storage stayed correct"
		if stale > 0 {
			lesson += ": it rejected every request carrying an older fencing token than one it had already seen"
		}
		lesson += ". A lock alone cannot keep data safe (a paused holder wakes up still believing it holds the lock); the storage checking fencing tokens can."
	}
	return line, lesson
}

// groupVerdict is the worst verdict among the checkers of one property, and whether any
// of them ran.
func groupVerdict(results []checkers.Result, p checkers.Property) (checkers.Verdict, bool) {
	var group []checkers.Result
	for _, r := range results {
		if r.Property == p {
			group = append(group, r)
		}
	}
	return checkers.Worst(group), len(group) > 0
}

// pluralWord is word as it reads after the number n: "request" or "requests".
func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func formatCounts(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// newLink makes a relative link to a file in the run directory. A name that is absolute or
// climbs out of the run directory is shown but not linked.
func newLink(name string) link {
	if !filepath.IsLocal(name) {
		return link{Name: name}
	}
	// url.URL prefixes "./" when the first segment holds a colon, so a name never reads as a scheme.
	return link{Name: name, Href: (&url.URL{Path: filepath.ToSlash(name)}).String()}
}

// artifacts lists the run's standard files that exist, then every node log under nodes/.
func artifacts(dir string) []link {
	var links []link
	for _, name := range []string{HistoryFile, SpecFile, SummaryFile, JUnitFile, StorageFile, RunLogFile} {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Mode().IsRegular() {
			links = append(links, newLink(name))
		}
	}
	nodes := filepath.Join(dir, NodesDir)
	filepath.WalkDir(nodes, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, err := filepath.Rel(dir, p); err == nil {
			links = append(links, newLink(rel))
		}
		return nil
	})
	return links
}

func prettySpec(spec json.RawMessage) string {
	if len(spec) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, spec, "", "  "); err != nil {
		return string(spec)
	}
	return buf.String()
}

func faultViews(events []history.Event) []faultView {
	var first int64
	for _, e := range events {
		if first == 0 || e.Time < first {
			first = e.Time
		}
	}
	seconds := func(t int64) string { return fmt.Sprintf("%.3f", history.Duration(first, t).Seconds()) }
	var views []faultView
	for _, f := range history.Faults(events) {
		views = append(views, faultView{Description: f.Description, Targets: strings.Join(f.Targets, ", "),
			Start: seconds(f.Start), Stop: seconds(f.Stop), Healed: f.Healed})
	}
	return views
}

// opTable is one row per function (the usual ones first) and a total.
func opTable(ops OpCounts) ([]opRow, opRow) {
	order := []history.Func{history.Acquire, history.Release, history.Read, history.Write, history.FinalRead}
	rank := func(f history.Func) int {
		if i := slices.Index(order, f); i >= 0 {
			return i
		}
		return len(order)
	}
	funcs := slices.Collect(maps.Keys(ops))
	slices.SortFunc(funcs, func(a, b history.Func) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
	})
	rows := make([]opRow, len(funcs))
	for i, f := range funcs {
		rows[i] = opRow{Func: string(f), Outcomes: ops[f]}
	}
	return rows, opRow{Func: "total", Outcomes: ops.Total()}
}

var reportTemplate = template.Must(template.New(ReportFile).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Test}} {{.RunID}}: {{.Overall.Text}} — lockbreaker</title>
<style>
:root { --valid: #1a7f37; --invalid: #cf222e; --unknown: #9a6700; --na: #6e7781; --line: #d0d7de; --muted: #57606a; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
.meta { color: var(--muted); margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; vertical-align: top; padding: .35rem .6rem; border-bottom: 1px solid var(--line); }
th { background: #f6f8fa; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; padding: .05rem .55rem; border-radius: 1rem; color: #fff; font-weight: 600; font-size: .85rem; }
.verdict.valid { background: var(--valid); }
.verdict.invalid { background: var(--invalid); }
.verdict.unknown { background: var(--unknown); }
.verdict.not-applicable { background: var(--na); }
.banner { border-left: .3rem solid var(--unknown); background: #fff8c5; padding: .75rem 1rem; margin: 1rem 0; }
.banner.valid { border-color: var(--valid); background: #dafbe1; }
.banner.invalid, .banner.error { border-color: var(--invalid); background: #ffebe9; }
.banner strong { display: block; font-size: 1.05rem; }
pre, code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: .4rem; padding: .75rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
ul.evidence { margin: .25rem 0; padding-left: 1.25rem; }
ul.evidence li { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
.more { color: var(--muted); font-style: italic; }
.files a { margin-right: 1rem; }
.muted { color: var(--muted); }
</style>
</head>
<body>
<h1>{{.Test}} <span class="verdict {{.Overall.Class}}">{{.Overall.Text}}</span></h1>
<p class="meta">run {{.RunID}}{{if .Started}} · started {{.Started}}{{end}}{{if .Duration}} · took {{.Duration}}{{end}} · overall: {{.Overall.Text}} (invalid beats unknown beats valid)</p>
{{- if .Headline.Text}}
<div class="banner {{.Headline.Class}}"><strong>{{.Headline.Text}}</strong>{{if .Lesson}}{{.Lesson}}{{end}}</div>
{{- end}}
{{- if .Error}}
<div class="banner error"><strong>The run broke: its verdicts may rest on a partial history.</strong><span class="mono">{{.Error}}</span></div>
{{- end}}

<h2>Verdicts</h2>
{{- if .Checkers}}
<table>
<thead><tr><th>checker</th><th>property</th><th>verdict</th><th>summary</th><th>counts</th></tr></thead>
<tbody>
{{- range .Checkers}}
<tr><td><a href="#checker-{{.Name}}">{{.Name}}</a></td><td>{{.Property}}</td><td><span class="verdict {{.Verdict.Class}}">{{.Verdict.Text}}</span></td><td>{{.Summary}}</td><td class="mono">{{.Counts}}</td></tr>
{{- end}}
</tbody>
</table>
{{- range .Checkers}}
<h3 id="checker-{{.Name}}">{{.Name}} <span class="verdict {{.Verdict.Class}}">{{.Verdict.Text}}</span></h3>
<p>{{.Summary}}</p>
{{- if .Evidence}}
<ul class="evidence">
{{- range .Evidence}}<li>{{.}}</li>{{end}}
{{- if .More}}<li class="more">and {{.More}} more (all in results.json)</li>{{end}}
</ul>
{{- else}}
<p class="muted">No evidence lines.</p>
{{- end}}
{{- if .Files}}
<p class="files">Files: {{range .Files}}{{if .Href}}<a href="{{.Href}}">{{.Name}}</a>{{else}}<code>{{.Name}}</code>{{end}} {{end}}</p>
{{- end}}
{{- end}}
{{- else}}
<p class="muted">No checker ran, so nothing was proven.</p>
{{- end}}

{{- if .Notes}}
<h2>Notes</h2>
<ul>
{{- range .Notes}}<li>{{.}}</li>{{end}}
</ul>
{{- end}}

<h2>Faults</h2>
{{- if .Faults}}
<table>
<thead><tr><th>fault</th><th>targets</th><th class="num">start (s)</th><th class="num">stop (s)</th><th>healed</th></tr></thead>
<tbody>
{{- range .Faults}}
<tr><td>{{.Description}}</td><td>{{.Targets}}</td><td class="num">{{.Start}}</td><td class="num">{{.Stop}}</td><td>{{if .Healed}}yes{{else}}<span class="verdict invalid">no</span>{{end}}</td></tr>
{{- end}}
</tbody>
</table>
<p class="muted">Times are seconds since the first event of the history.</p>
{{- else}}
<p class="muted">No faults were injected.</p>
{{- end}}

<h2>Operations</h2>
{{- if .Ops}}
<table>
<thead><tr><th>operation</th><th class="num">ok</th><th class="num">fail</th><th class="num">info</th><th class="num">total</th></tr></thead>
<tbody>
{{- range .Ops}}
<tr><td>{{.Func}}</td><td class="num">{{.OK}}</td><td class="num">{{.Fail}}</td><td class="num">{{.Info}}</td><td class="num">{{.Total}}</td></tr>
{{- end}}
<tr><th>{{.OpsTotal.Func}}</th><th class="num">{{.OpsTotal.OK}}</th><th class="num">{{.OpsTotal.Fail}}</th><th class="num">{{.OpsTotal.Info}}</th><th class="num">{{.OpsTotal.Total}}</th></tr>
</tbody>
</table>
<p class="muted">fail: definitely did not happen; info: unknown whether it happened (timeout, lost connection, killed worker).</p>
{{- else}}
<p class="muted">No operations were counted.</p>
{{- end}}

<h2>Files</h2>
{{- if .Artifacts}}
<p class="files">{{range .Artifacts}}{{if .Href}}<a href="{{.Href}}">{{.Name}}</a>{{else}}<code>{{.Name}}</code>{{end}} {{end}}</p>
{{- else}}
<p class="muted">No files found next to this report.</p>
{{- end}}

{{- if .Spec}}
<h2>Spec</h2>
<pre>{{.Spec}}</pre>
{{- end}}
</body>
</html>
`))

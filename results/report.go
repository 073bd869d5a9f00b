package results

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// WriteReport writes report.html in dir: a self-contained page (inline CSS, its one inline
// script, no external assets) with what ran and the command that runs it again, one
// verdict row per checker with its first violation linked, a timeline of the run (of
// timelineLimit operations around the first violation when it has more, as it says), plots of
// latency, throughput, tokens and clock offsets, each checker's evidence (overlapping holds
// grouped by pair of clients, each linked to its place in the timeline), links to the
// run's files, the notes, the faults, the hazards that occurred (counted beside the
// verdicts, a valid safety verdict naming those it held through, and drawn in the
// timeline), the op counts and the spec. The verdicts and counts
// are s's, as given; events are drawn, never judged. Every value comes through
// html/template, and the page's policy lets no script run but its own.
func WriteReport(dir string, s Summary, d *Drawing) error {
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, newReport(dir, s, d.Events, d.Plots)); err != nil {
		return fmt.Errorf("render %s: %w", ReportFile, err)
	}
	return WriteAtomic(filepath.Join(dir, ReportFile), buf.Bytes())
}

// TimelineEvents is how many of a history's first events a report's timeline is drawn
// from. It draws at most timelineLimit operations of them, so this bounds not what the
// browser gets but the memory the report takes to make (some tens of MB), and leaves
// room to find the first violation's neighbourhood in.
const TimelineEvents = 200_000

// Drawing is what a report draws of a history read one event at a time, in bounded
// memory: its first TimelineEvents events for the timeline, and the plots of all of it.
type Drawing struct {
	Events []history.Event
	Plots  *Plots
	// Total counts the history's events.
	Total int
}

// NewDrawing returns a Drawing of no events yet.
func NewDrawing() *Drawing { return &Drawing{Plots: NewPlots()} }

// Draw is the Drawing of a whole history.
func Draw(events []history.Event) *Drawing {
	d := NewDrawing()
	for _, e := range events {
		d.Add(e)
	}
	return d
}

// Add takes the history's next event.
func (d *Drawing) Add(e history.Event) {
	if len(d.Events) < TimelineEvents {
		d.Events = append(d.Events, e)
	}
	d.Plots.Add(e)
	d.Total++
}

// Note says that the timeline is of only the first events, or is "" when it is of all.
func (d *Drawing) Note() string {
	if d.Total <= len(d.Events) {
		return ""
	}
	return fmt.Sprintf("the report's timeline is drawn from the first %d of the history's %d events; verdicts, counts and plots are of them all", len(d.Events), d.Total)
}

type report struct {
	Policy            template.HTMLAttr
	Script            template.JS
	Test, RunID       string
	Overall           verdictView
	Started, Duration string
	Setup             []fact
	Command           string
	Headline          verdictView
	Lesson            string
	Error             string
	Checkers          []checkerView
	Timeline          *timelineView
	NoTimeline        string // why there is none
	Plots             []plotView
	Artifacts         []link
	Notes             []string
	Spec              string
	Faults            []faultView
	HazardCounts      []hazardView
	Occurrences       []occurrenceRow
	MoreOccurrences   int // hazard events not listed
	Roles             []roleView
	Ops               []opRow
	OpsTotal          opRow
	MaxLabels         int
}

// fact is one item of the "what ran" line: "ttl 500ms".
type fact struct{ Name, Value string }

type verdictView struct{ Text, Class string }

type checkerView struct {
	Name     string
	Property string
	Verdict  verdictView
	Summary  string
	// Through names the hazards a valid safety verdict held through: "through 9 lost grants".
	Through  string
	Counts   string
	Evidence []string
	More     int // evidence lines not shown
	Overlaps []overlapGroup
	// Listed are the overlaps results.json keeps (Result.Overlaps) of the Found.
	Listed, Found int
	// First links the first violation: an anchor in the page, and a time in milliseconds
	// when the timeline can show it.
	First *firstLink
	Files []link
}

type firstLink struct {
	Href, At, Text string
	Timeline       bool // whether the page's script can zoom the timeline to it
}

// link is a file in the run directory; Href is empty when the name is not a safe relative path.
type link struct{ Name, Href string }

type faultView struct {
	Description, Targets, Start, Stop string
	Healed                            bool
}

// roleView is one change of the nodes' roles: when, which nodes changed, and every node's
// role from then on ("n1 down, n2 primary, n3 replica").
type roleView struct{ At, Changed, Roles string }

// opRow is one line of the operations table; the template calls Outcomes.Total.
type opRow struct {
	Func string
	Outcomes
}

func newReport(dir string, s Summary, events []history.Event, plots *Plots) report {
	r := report{Policy: reportPolicy, Script: template.JS(reportScript), Test: s.Test, RunID: s.RunID, Overall: viewVerdict(s.Verdict), Error: s.Error, Notes: s.Notes,
		Command: s.Command, MaxLabels: maxLabels}
	if !s.Started.IsZero() {
		r.Started = s.Started.UTC().Format(time.RFC3339)
		if s.Finished.After(s.Started) {
			r.Duration = s.Finished.Sub(s.Started).Round(time.Millisecond).String()
		}
	}
	r.Setup = ReadSetup(s.Spec).facts()
	r.Headline, r.Lesson = headline(s.Results)
	ops, pairErr := history.Pair(events)
	var overlaps []checkers.Overlap
	focus := firstTime(events) // the earliest violation any checker found, or the start
	var earliest *time.Duration
	for _, res := range s.Results {
		overlaps = append(overlaps, res.Overlaps...)
		if v := res.FirstViolation; v != nil && (earliest == nil || *v < *earliest) {
			earliest = v
		}
	}
	if earliest != nil {
		focus += int64(*earliest)
	}
	switch {
	case pairErr != nil:
		r.NoTimeline = "The history's operations do not pair, so there is nothing to draw: " + pairErr.Error()
	case len(events) == 0:
		r.NoTimeline = "The history is empty."
	default:
		tl := newTimeline(events, ops, overlaps, focus)
		r.Timeline = &tl
		r.Plots = plots.views()
	}
	base := 0 // the first of a checker's overlaps among all of them
	for _, res := range s.Results {
		c := checkerView{Name: res.Checker, Property: string(res.Property), Verdict: viewVerdict(res.Verdict), Summary: res.Summary,
			Through: throughHazards(res, s.Hazards), Counts: formatCounts(res.Counts), Evidence: res.Evidence}
		if len(res.Overlaps) > 0 && pairErr == nil {
			var anchored []bool
			if r.Timeline != nil {
				anchored = r.Timeline.anchored
			}
			c.Overlaps = groupOverlaps(res.Overlaps, events, base, anchored)
			c.Listed, c.Found = len(res.Overlaps), res.Counts["overlaps"]
			c.Evidence = nil
			c.First = &firstLink{Href: "#checker-" + res.Checker, Text: c.Overlaps[0].Occurrences[0].Text}
			if id := c.Overlaps[0].First; id != "" {
				c.First.Href, c.First.Timeline = "#"+id, true
			}
		} else if res.Verdict == checkers.Invalid {
			c.First = &firstLink{Href: "#checker-" + res.Checker, Text: "evidence"}
			if res.FirstViolation != nil && pairErr == nil {
				c.First = &firstLink{Href: "#timeline", At: strconv.FormatFloat(float64(*res.FirstViolation)/1e6, 'f', 3, 64),
					Text: seconds(*res.FirstViolation), Timeline: true}
			}
		}
		if len(c.Evidence) > maxEvidence {
			c.Evidence, c.More = c.Evidence[:maxEvidence], len(c.Evidence)-maxEvidence
		}
		for _, f := range res.Files {
			c.Files = append(c.Files, newLink(f))
		}
		base += len(res.Overlaps)
		r.Checkers = append(r.Checkers, c)
	}
	r.Artifacts = artifacts(dir)
	r.Spec = prettySpec(s.Spec)
	r.Faults = faultViews(events)
	r.HazardCounts = hazardViews(s.Hazards)
	var drawn map[int]bool
	if r.Timeline != nil {
		drawn = r.Timeline.hazards
	}
	r.Occurrences, r.MoreOccurrences = occurrenceRows(events, drawn)
	r.Roles = roleViews(events)
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

// firstTime is the time of the history's earliest event, which the report's times count from.
func firstTime(events []history.Event) int64 {
	var first int64
	for _, e := range events {
		if first == 0 || e.Time < first {
			first = e.Time
		}
	}
	return first
}

func faultViews(events []history.Event) []faultView {
	first := firstTime(events)
	seconds := func(t int64) string { return fmt.Sprintf("%.3f", history.Duration(first, t).Seconds()) }
	var views []faultView
	for _, f := range history.Faults(events) {
		views = append(views, faultView{Description: f.Description, Targets: strings.Join(f.Targets, ", "),
			Start: seconds(f.Start), Stop: seconds(f.Stop), Healed: f.Healed})
	}
	return views
}

func roleViews(events []history.Event) []roleView {
	var views []roleView
	for _, c := range history.RoleChanges(events) {
		var roles []string
		for _, node := range slices.Sorted(maps.Keys(c.Roles)) {
			roles = append(roles, node+" "+c.Roles[node])
		}
		views = append(views, roleView{At: fmt.Sprintf("%.3f", history.Duration(firstTime(events), c.Time).Seconds()),
			Changed: strings.Join(c.Changed, ", "), Roles: strings.Join(roles, ", ")})
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

// reportScript zooms and pans the timeline; it is the one script the report's policy lets run.
//
//go:embed report.js
var reportScript string

var (
	reportPolicy   = contentSecurityPolicy(reportScript)
	reportTemplate = template.Must(template.New(ReportFile).Parse(pageHead + reportStyle +
		"</style>\n<title>{{.Test}} {{.RunID}}: {{.Overall.Text}} — lockbreaker</title>\n</head>\n<body>\n" +
		reportBody + "<script>{{.Script}}</script>\n</body>\n</html>\n"))
)

const reportStyle = `.banner { border-left: .3rem solid var(--unknown); background: #fff8c5; padding: .75rem 1rem; margin: 1rem 0; }
.banner.valid { border-color: var(--valid); background: #dafbe1; }
.banner.invalid, .banner.error { border-color: var(--invalid); background: #ffebe9; }
.banner strong { display: block; font-size: 1.05rem; }
.setup { margin: .25rem 0; }
.setup span { display: inline-block; margin-right: 1rem; }
.setup b { font-weight: 600; }
ul.evidence { margin: .25rem 0; padding-left: 1.25rem; }
ul.evidence li { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
ul.evidence .occurrences { font-size: .8rem; }
ul.evidence .occurrences a, ul.evidence .occurrences span { margin-right: .4rem; }
.more { color: var(--muted); font-style: italic; }
.files a { margin-right: 1rem; }
.timeline { border: 1px solid var(--line); border-radius: .4rem; padding: .25rem .5rem; }
.timeline .controls { display: flex; gap: .5rem; align-items: center; font-size: .85rem; }
.timeline button { font: inherit; padding: .1rem .6rem; border: 1px solid var(--line); border-radius: .3rem; background: #f6f8fa; cursor: pointer; }
svg.tl, svg.plot { display: block; width: 100%; height: auto; }
svg text { font: 11px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; fill: #57606a; }
svg.tl .axis line, svg.plot .grid { stroke: #eaeef2; }
svg.tl line.sep { stroke: var(--line); }
svg.tl text.lane { font-weight: 600; fill: #1f2328; text-anchor: end; }
svg.lanes { cursor: grab; touch-action: none; }
svg.lanes * { vector-effect: non-scaling-stroke; }
svg.lanes rect.bg { fill: #fff; }
svg.lanes .fault, svg.plot .fault { fill: var(--fault); }
svg.lanes .fault.lane { fill: #d8b9ff; stroke: var(--fault-edge); stroke-width: 1; }
svg.lanes .hold { fill: var(--hold); fill-opacity: .45; stroke: var(--hold); stroke-width: 1; }
svg.lanes .overlap { fill: var(--invalid); fill-opacity: .8; stroke: var(--invalid); stroke-width: 1; }
svg.lanes .overlap.focus { stroke: #000; stroke-width: 3; }
svg.lanes path { stroke-width: 2; fill: none; }
svg.lanes path.ok { stroke: var(--ok); }
svg.lanes path.fail { stroke: var(--invalid); }
svg.lanes path.attempt.fail { stroke: var(--fail); }
svg.lanes path.info { stroke: var(--info); }
svg.lanes path.hazard { stroke: var(--hazard); stroke-width: 3; stroke-dasharray: 5 3; }
.through { font-size: .85rem; font-weight: 600; color: var(--valid); }
ul.hazards { margin: .25rem 0; padding-left: 1.25rem; }
.legend i.hazard { width: 0; height: .9rem; border-left: 3px dashed var(--hazard); border-radius: 0; }
svg.tl .labels text { pointer-events: none; font-size: 10px; }
svg.tl .labels text.fault { fill: var(--fault-edge); font-weight: 600; }
svg.tl .tokens text.fail { fill: var(--invalid); }
svg.tl .tokens text.life { fill: #1f2328; font-weight: 600; }
svg.tl .tokens.hidden text { display: none; }
.legend { font-size: .8rem; color: var(--muted); margin: .25rem 0 .5rem; }
.legend span { display: inline-flex; align-items: center; margin-right: .9rem; }
.legend i { display: inline-block; width: .9rem; height: .6rem; margin-right: .3rem; border-radius: .1rem; }
.legend i.tick { width: .2rem; height: .9rem; }
.legend i.square { width: .55rem; height: .55rem; border-radius: 0; }
.legend i.dot { width: .55rem; height: .55rem; border-radius: 50%; }
.plots figure { margin: 1rem 0; }
.plots figcaption { font-size: .85rem; color: var(--muted); }
svg.plot .axisline { stroke: #8c959f; }
svg.plot circle { r: 2.2px; }
svg.plot rect:not(.fault) { width: 4px; height: 4px; }
svg.plot .ok { fill: #1a7f37; } svg.plot .fail { fill: #8c959f; } svg.plot .info { fill: #bc4c00; }
svg.plot .c0 { fill: #0969da; } svg.plot .c1 { fill: #cf222e; } svg.plot .c2 { fill: #1a7f37; } svg.plot .c3 { fill: #8250df; }
svg.plot .c4 { fill: #bf8700; } svg.plot .c5 { fill: #1b7c83; } svg.plot .c6 { fill: #bf3989; } svg.plot .c7 { fill: #57606a; }
svg.plot .c8 { fill: #953800; } svg.plot .c9 { fill: #0550ae; }
`

const reportBody = `<h1>{{.Test}} <span class="verdict {{.Overall.Class}}">{{.Overall.Text}}</span></h1>
<p class="meta">run {{.RunID}}{{if .Started}} · started {{.Started}}{{end}}{{if .Duration}} · took {{.Duration}}{{end}} · overall: {{.Overall.Text}} (invalid beats unknown beats valid)</p>
{{- if .Setup}}
<p class="setup">{{range .Setup}}<span>{{.Name}} <b>{{.Value}}</b></span>{{end}}</p>
{{- end}}
{{- if .Command}}
<p class="muted">To run it again:</p>
<pre class="command">{{.Command}}</pre>
{{- end}}
{{- if .Headline.Text}}
<div class="banner {{.Headline.Class}}"><strong>{{.Headline.Text}}</strong>{{if .Lesson}}{{.Lesson}}{{end}}</div>
{{- end}}
{{- if .Error}}
<div class="banner error"><strong>The run broke: its verdicts may rest on a partial history.</strong><span class="mono">{{.Error}}</span></div>
{{- end}}

<h2>Verdicts</h2>
{{- if .Checkers}}
<table class="verdicts">
<thead><tr><th>checker</th><th>property</th><th>verdict</th><th>summary</th><th>first violation</th><th>counts</th></tr></thead>
<tbody>
{{- range .Checkers}}
<tr><td><a href="#checker-{{.Name}}">{{.Name}}</a></td><td>{{.Property}}</td><td><span class="verdict {{.Verdict.Class}}">{{.Verdict.Text}}</span></td><td>{{.Summary}}{{with .Through}}<br><span class="through">{{.}}</span>{{end}}</td><td>{{with .First}}{{template "first" .}}{{end}}</td><td class="mono">{{.Counts}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- if .HazardCounts}}
<p class="hazards-head"><strong>Hazards</strong>, the situations the faults exist to create{{if .Occurrences}} (<a href="#hazards">each occurrence</a>){{end}}:</p>
<ul class="hazards">
{{- range .HazardCounts}}
<li>{{if .Absent}}<span class="verdict unknown">absent</span> {{.Hazard}}: {{.Absent}}{{else}}<b>{{.Text}}</b> <span class="muted">({{.Hazard}})</span>{{end}}
{{- if .Nemesis}} <span class="muted">· what {{.Nemesis}} exists to create{{if .Absent}}: without it no verdict of the run is a pass{{end}}</span>{{else}} <span class="muted">· seen on the way</span>{{end}}</li>
{{- end}}
</ul>
{{- end}}

<h2 id="timeline-heading">Timeline</h2>
{{- with .Timeline}}
<div id="timeline" class="timeline" data-span="{{.SpanMS}}" data-x0="{{.X0}}" data-w="{{.Width}}" data-axis="{{.LanesTop}}" data-bottom="{{.Height}}" data-max-labels="{{$.MaxLabels}}"{{if .Capped}} data-from="{{.From}}" data-to="{{.To}}"{{end}}>
<div class="controls"><button type="button" data-zoom="in">zoom in</button><button type="button" data-zoom="out">zoom out</button><button type="button" data-zoom="all">whole run</button>
<span id="tl-range" class="muted">the whole run: {{.Operations}} operations, {{.Holders}} holds</span></div>
<svg class="tl" viewBox="0 0 1000 {{.Height}}" role="img" aria-label="timeline of the run">
<g class="axis">{{range .Ticks}}<line x1="{{.X}}" x2="{{.X}}" y1="{{$.Timeline.LanesTop}}" y2="{{$.Timeline.Height}}"></line><text x="{{.X}}" y="{{$.Timeline.LanesTop}}" dy="-6">{{.Text}}</text>{{end}}</g>
{{- range .Lanes}}
<text class="lane" x="64" y="{{.Text}}">{{.Name}}</text>
{{- end}}
<svg class="lanes" x="{{.X0}}" y="{{.LanesTop}}" width="{{.Width}}" height="{{.LanesHeight}}" viewBox="0 0 {{.SpanMS}} {{.LanesHeight}}" preserveAspectRatio="none">
<rect class="bg" x="0" y="0" width="{{.SpanMS}}" height="{{.LanesHeight}}"></rect>
{{- range .Faults}}
<rect class="fault" x="{{.X}}" y="0" width="{{.Width}}" height="{{.Height}}"><title>{{.Title}}</title></rect><rect class="fault lane" x="{{.X}}" y="4" width="{{.Width}}" height="18"><title>{{.Title}}</title></rect>
{{- end}}
{{- range .Lanes}}<line class="sep" x1="0" x2="{{$.Timeline.SpanMS}}" y1="{{.Y}}" y2="{{.Y}}"></line>{{end}}
{{- range .Holds}}
<rect class="hold" x="{{.X}}" y="{{.Y}}" width="{{.Width}}" height="{{.Height}}"><title>{{.Title}}</title></rect>
{{- end}}
{{- range .Overlaps}}
<rect class="overlap"{{if .ID}} id="{{.ID}}"{{end}} x="{{.X}}" y="{{.Y}}" width="{{.Width}}" height="{{.Height}}"><title>{{.Title}}</title></rect>
{{- end}}
{{- range .Attempts}}
<path class="{{.Class}}" d="{{.Path}}"><title>{{.Title}}</title></path>
{{- end}}
{{- range .Marks}}
<path class="{{.Class}}" d="{{.Path}}"><title>{{.Title}}</title></path>
{{- end}}
{{- range .Hazards}}
<path class="{{.Class}}" d="{{.Path}}"><title>{{.Title}}</title></path>
{{- end}}
</svg>
<g class="labels">{{range .FaultLabels}}<text class="fault" data-t="{{.T}}" data-end="{{.End}}" x="{{.X}}" y="{{.Y}}">{{.Text}}</text>{{end}}</g>
<g class="labels tokens{{if .LabelsHidden}} hidden{{end}}">{{range .Tokens}}<text class="{{.Class}}" data-t="{{.T}}" x="{{.X}}" y="{{.Y}}">{{.Text}}</text>{{end}}</g>
</svg>
</div>
<p class="legend"><span><i style="background:#9ccfff"></i>held the lock</span><span><i style="background:var(--invalid)"></i>two held it at once</span><span><i style="background:#d8b9ff"></i>fault</span>
<span><i style="background:var(--ok);height:.15rem"></i>acquire or release ok</span><span><i style="background:var(--fail);height:.15rem"></i>failed</span><span><i style="background:var(--info);height:.15rem"></i>unknown</span>
<span><i class="tick" style="background:var(--ok)"></i>write (tall) or read accepted</span><span><i class="tick" style="background:var(--invalid)"></i>rejected</span><span><i class="tick" style="background:var(--info)"></i>unknown, with its token</span>
{{- if .Hazards}}<span><i class="hazard"></i>a hazard occurred: the situation a fault exists to create (hover for which, the fault that saw it and why)</span>{{end}}</p>
<p class="muted">Times are seconds since the history's first event, as in the evidence. Hover for an operation's events; drag to pan, double-click to zoom in (shift: out), ctrl+wheel to zoom.</p>
{{- if .Capped}}
<p class="muted capped">{{.Capped}}</p>
{{- end}}
{{- else}}
<p class="muted">{{.NoTimeline}}</p>
{{- end}}

{{- if .Plots}}
<h2>Plots</h2>
<div class="plots">
{{- range .Plots}}
<figure>
<figcaption><strong>{{.Title}}</strong>: {{.Caption}}</figcaption>
<svg class="plot" viewBox="0 0 1000 196" role="img" aria-label="{{.Title}}">
{{- range .Faults}}<rect class="fault" x="{{.X}}" y="8" width="{{.Width}}" height="164"><title>{{.Title}}</title></rect>{{end}}
{{- range .YTicks}}<line class="grid" x1="64" x2="990" y1="{{.X}}" y2="{{.X}}"></line><text x="58" y="{{.X}}" dy="4" text-anchor="end">{{.Text}}</text>{{end}}
{{- range .XTicks}}<text x="{{.X}}" y="190" text-anchor="middle">{{.Text}}</text>{{end}}
<line class="axisline" x1="64" x2="990" y1="172" y2="172"></line><line class="axisline" x1="64" x2="64" y1="8" y2="172"></line>
{{- range .Lines}}<polyline fill="none" stroke="{{.Color}}" stroke-width="1.5" points="{{.Points}}"></polyline>{{end}}
{{- range .Dots}}{{if .Square}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}"/>{{else}}<circle class="{{.Class}}" cx="{{.X}}" cy="{{.Y}}"/>{{end}}{{end}}
</svg>
{{- if .Legend}}
<p class="legend">{{range .Legend}}<span><i class="{{if .Square}}square{{else}}dot{{end}}" style="background:{{.Color}}"></i>{{.Text}}</span>{{end}}<span><i style="background:var(--fault)"></i>fault</span></p>
{{- end}}
</figure>
{{- end}}
</div>
{{- end}}

<h2>Evidence</h2>
{{- range .Checkers}}
<h3 id="checker-{{.Name}}">{{.Name}} <span class="verdict {{.Verdict.Class}}">{{.Verdict.Text}}</span></h3>
<p>{{.Summary}}</p>
{{- if .Overlaps}}
<ul class="evidence overlaps">
{{- range .Overlaps}}<li>{{if .First}}<a class="to-timeline" href="#{{.First}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}{{if gt (len .Occurrences) 1}}<br><span class="occurrences">in the timeline: {{range .Occurrences}}{{if .ID}}<a class="to-timeline" href="#{{.ID}}">{{.Text}}</a>{{else}}<span>{{.Text}}</span>{{end}}{{end}}{{if .More}}<span class="more">and {{.More}} more</span>{{end}}</span>{{end}}</li>{{end}}
</ul>
<p class="muted">One line per pair of clients that held the key at once; results.json lists {{if gt .Found .Listed}}the first {{.Listed}} occurrences of {{.Found}}{{else}}every occurrence{{end}} (overlaps).</p>
{{- else if .Evidence}}
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
{{- if or .HazardCounts .Occurrences}}

<h2 id="hazards">Hazards</h2>
{{- if .Occurrences}}
<table class="occurrences">
<thead><tr><th class="num">at (s)</th><th>hazard</th><th>seen by</th><th>targets</th><th>detail</th></tr></thead>
<tbody>
{{- range .Occurrences}}
<tr><td class="num">{{if .At}}<a class="to-timeline" href="#timeline" data-at="{{.At}}">{{.Time}}</a>{{else}}{{.Time}}{{end}}</td><td>{{.Hazard}}</td><td>{{.Fault}}</td><td>{{.Targets}}</td><td class="mono">{{.Detail}}</td></tr>
{{- end}}
{{- if .MoreOccurrences}}
<tr><td colspan="5" class="more">and {{.MoreOccurrences}} more (every one is in history.jsonl, f hazard)</td></tr>
{{- end}}
</tbody>
</table>
<p class="muted">Each time the situation a fault exists to create really occurred, as the nemesis that saw it recorded it; a time links to its place in the timeline.</p>
{{- else}}
<p class="muted">No hazard occurred.</p>
{{- end}}
{{- end}}
{{- if .Roles}}

<h2>Roles</h2>
<table>
<thead><tr><th class="num">from (s)</th><th>changed</th><th>roles</th></tr></thead>
<tbody>
{{- range .Roles}}
<tr><td class="num">{{.At}}</td><td>{{.Changed}}</td><td>{{.Roles}}</td></tr>
{{- end}}
</tbody>
</table>
<p class="muted">The nodes' roles as the harness saw them change: which node led or was primary when, and which were down.</p>
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
{{define "first"}}<a{{if .Timeline}} class="to-timeline"{{end}} href="{{.Href}}"{{if .At}} data-at="{{.At}}"{{end}}>{{.Text}}</a>{{end}}
`

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
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/async"
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
	return writeReport(dir, s, d, nil)
}

// writeReport writes report.html, listing the run's files once written is done (when
// not nil).
func writeReport(dir string, s Summary, d *Drawing, written *async.Task) error {
	r := newReport(s, d.Events, d.Plots)
	if written != nil {
		written.Wait()
	}
	r.Artifacts = artifacts(dir)
	var buf bytes.Buffer
	err := reportTemplate().Execute(&buf, &r)
	// The template makes an error of a panic in a method it calls: a section's is ours.
	r.timeline.task.Wait()
	r.plots.task.Wait()
	if err != nil {
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
// memory: the plots of all of it, and its first TimelineEvents events for the timeline.
// Those are not gathered as the history is read but given by its reader (a file's are
// read again at the end, analysis.File): held all along, they were a third of what check
// of a long history kept, and its heap grew three times as much with them.
type Drawing struct {
	// Events are the history's first TimelineEvents events, all of a shorter one; fewer
	// when its reader could not read them all again.
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
	d.Events = events[:min(len(events), TimelineEvents)]
	return d
}

// Add takes the history's next event into the plots and the count, not the timeline's
// events (Events).
func (d *Drawing) Add(e history.Event) {
	d.Plots.Add(e)
	d.Total++
}

// Note says that the timeline is of only the first events, or is "" when it is of all.
func (d *Drawing) Note() string {
	if len(d.Events) >= d.Total {
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
	NotServing        string // the nodes a fault took down that did not serve again
	Checkers          []checkerView
	Story             *storyView
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
	// timeline and plots are the page's sections of those names (TimelineSection,
	// PlotsSection).
	timeline, plots *section
}

// TimelineSection is the page's timeline, executed apart.
func (r *report) TimelineSection() (template.HTML, error) { return r.timeline.get() }

// PlotsSection is the page's plots, executed apart.
func (r *report) PlotsSection() (template.HTML, error) { return r.plots.get() }

// section is a part of the page, a template of its own executed in a goroutine of its
// own while the rest is.
type section struct {
	task *async.Task
	html template.HTML
	err  error
}

// executeSection starts executing the template named name on r.
func executeSection(name string, r report) *section {
	s := &section{}
	s.task = async.Go(func() {
		var buf bytes.Buffer
		s.err = reportTemplate().ExecuteTemplate(&buf, name, r)
		s.html = template.HTML(buf.String())
	})
	return s
}

// get waits for the section.
func (s *section) get() (template.HTML, error) {
	s.task.Wait()
	return s.html, s.err
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

// storyView is the story of the first violation (checkers.Result.Story), with the
// checkers it explains; a sentence's At is its event's time (ms) when the page has it.
type storyView struct {
	Checkers  string
	Sentences []struct{ Text, At string }
}

type firstLink struct {
	Href, At, Text string
	Timeline       bool // whether the page's script can zoom the timeline to it
}

// link is a file in the run directory; Href is empty when the name is not a safe relative path.
type link struct{ Name, Href string }

type faultView struct {
	// Does is what a fault of its kind does, in its kind's words (history.FaultKind); "" for
	// a fault of no declared kind.
	Description, Does, Targets, Start, Stop string
	Healed                                  bool
}

// roleView is one change of the nodes' roles: when, which nodes changed, and every node's
// role from then on ("n1 down, n2 primary, n3 replica").
type roleView struct{ At, Changed, Roles string }

// opRow is one line of the operations table; the template calls Outcomes.Total.
type opRow struct {
	Func string
	Outcomes
}

func newReport(s Summary, events []history.Event, plots *Plots) report {
	r := report{Policy: reportPolicy, Script: template.JS(reportScript), Test: s.Test, RunID: s.RunID, Overall: viewVerdict(s.Verdict), Error: s.Error,
		NotServing: strings.Join(s.NotServing, ", "), Notes: s.Notes,
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
		drawn := async.Go(func() { r.Plots = plots.views() }) // while the timeline is drawn
		tl := newTimeline(events, ops, overlaps, focus)
		r.Timeline = &tl
		drawn.Wait()
	}
	// The timeline and the plots, most of the page, are executed while the rest is made
	// and executed.
	r.timeline, r.plots = executeSection("timeline", r), executeSection("plots", r)
	base := 0 // the first of a checker's overlaps among all of them
	for _, res := range s.Results {
		c := checkerView{Name: string(res.Checker), Property: string(res.Property), Verdict: viewVerdict(res.Verdict), Summary: res.Summary,
			Through: throughHazards(res, s.Hazards), Counts: formatCounts(res.Counts), Evidence: res.Evidence}
		if len(res.Overlaps) > 0 && pairErr == nil {
			var anchored []bool
			if r.Timeline != nil {
				anchored = r.Timeline.anchored
			}
			c.Overlaps = groupOverlaps(res.Overlaps, events, base, anchored)
			c.Listed, c.Found = len(res.Overlaps), res.Counts["overlaps"]
			c.Evidence = nil
			c.First = &firstLink{Href: "#checker-" + string(res.Checker), Text: c.Overlaps[0].Occurrences[0].Text}
			if id := c.Overlaps[0].First; id != "" {
				c.First.Href, c.First.Timeline = "#"+id, true
			}
		} else if res.Verdict == checkers.Invalid {
			c.First = &firstLink{Href: "#checker-" + string(res.Checker), Text: "evidence"}
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
	r.Story = newStoryView(s.Results, events, pairErr == nil)
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
		k, _ := history.KindOf(f.Description)
		views = append(views, faultView{Description: f.Description, Does: k.Does, Targets: strings.Join(f.Targets, ", "),
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
	order := []history.Func{history.Acquire, history.Extend, history.Release, history.Read, history.Write, history.FinalRead}
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

// reportStyle is the report's own style, after the shared one (pageHead).
//
//go:embed report.css
var reportStyle string

// reportPage is the rest of the report's template: the end of the head, and the body.
//
//go:embed report.html.tmpl
var reportPage string

var reportPolicy = contentSecurityPolicy(reportScript)

// reportTemplate is parsed on first use, not at every start of every lockbreaker process.
var reportTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New(ReportFile).Parse(pageHead + reportStyle + reportPage))
})

// newStoryView is the first story among rs, told once for every checker it explains; its
// sentences link to the timeline when linked is set and the page has their events.
func newStoryView(rs []checkers.Result, events []history.Event, linked bool) *storyView {
	i := slices.IndexFunc(rs, func(r checkers.Result) bool { return len(r.Story) > 0 })
	if i < 0 {
		return nil
	}
	story := rs[i].Story
	var names []string
	for _, r := range rs {
		if slices.Equal(r.Story, story) {
			names = append(names, string(r.Checker))
		}
	}
	v := &storyView{Checkers: strings.Join(names, ", ")}
	event, start := byIndex(events), firstTime(events)
	for _, s := range story {
		var at string
		if e := event(s.Event); linked && e.Index == s.Event && e.Time != 0 {
			at = strconv.FormatFloat(float64(e.Time-start)/1e6, 'f', 3, 64)
		}
		v.Sentences = append(v.Sentences, struct{ Text, At string }{s.Text, at})
	}
	return v
}

package hunt

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/spec"
)

// The files of a hunt's directory: every trial kept small (its schedule and score) in
// FileName, the page that plots them in PageName; the failing trial's run is kept whole
// beside them by the caller.
const (
	FileName = "hunt.json"
	PageName = "hunt.html"
)

// Saved is a hunt as its directory keeps it.
type Saved struct {
	// Base is the spec every trial ran, but for its schedule and seed.
	Base   spec.Spec `json:"base"`
	Faults []string  `json:"faults"`
	// For are the checkers whose violation the hunt looked for.
	For      []string `json:"for"`
	Feedback bool     `json:"feedback"`
	Seed     int64    `json:"seed"`
	Result
	// Command runs the smallest failing schedule again; Failing is its run's directory.
	Command string `json:"command,omitempty"`
	Failing string `json:"failing,omitempty"`
}

// Write writes a hunt's record and its page into dir.
func Write(dir string, h Saved) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, PageName))
	if err != nil {
		return err
	}
	if err := page.Execute(f, view(h)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read reads a hunt's record from its directory.
func Read(dir string) (Saved, error) {
	var h Saved
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s: %w", filepath.Join(dir, FileName), err)
	}
	return h, nil
}

// The plot's size, in SVG units.
const plotW, plotH, margin = 800.0, 240.0, 30.0

type pageView struct {
	Title, Summary, Command, Failing string
	Score, Nearness                  string // SVG polyline points
	Found                            *point
	Rows                             []row
	W, H, Margin, Right, Bottom      float64
}

type point struct{ X, Y float64 }

type row struct {
	N, Parent                   int
	Schedule, Verdict, Took, At string
	Hazards, New                int
	Nearness, Value             string
}

// view lays a hunt out for its page: score (scaled to the best) and nearness over trials.
func view(h Saved) pageView {
	v := pageView{W: plotW, H: plotH, Margin: margin, Right: plotW - margin, Bottom: plotH - margin, Command: h.Command, Failing: h.Failing}
	mode := "random search"
	if h.Feedback {
		mode = "feedback"
	}
	v.Title = fmt.Sprintf("hunt: %s, %s (%s)", h.Base.System, strings.Join(h.Faults, ","), mode)
	if len(h.For) > 0 {
		v.Title += ", for a violation of " + strings.Join(h.For, ",")
	}
	if t, ok := h.FirstFound(); ok {
		v.Summary = fmt.Sprintf("a violation in trial %d of %d, after %s", t.N, len(h.Trials), t.At.Round(time.Second))
	} else {
		v.Summary = fmt.Sprintf("no violation in %d trials (%s)", len(h.Trials), h.Took.Round(time.Second))
	}
	best := 1.0
	for _, t := range h.Trials {
		best = max(best, t.Score.Value())
	}
	x := func(i int) float64 {
		return margin + (plotW-2*margin)*float64(i)/float64(max(1, len(h.Trials)-1))
	}
	y := func(f float64) float64 { return plotH - margin - (plotH-2*margin)*f }
	var score, near []string
	for i, t := range h.Trials {
		score = append(score, fmt.Sprintf("%.1f,%.1f", x(i), y(t.Score.Value()/best)))
		near = append(near, fmt.Sprintf("%.1f,%.1f", x(i), y(t.Score.Nearness)))
		verdict := "no violation"
		switch {
		case t.Error != "":
			verdict = "could not run: " + t.Error
		case len(t.Invalid) > 0:
			verdict = strings.Join(t.Invalid, ", ") + " invalid"
			v.Found = &point{x(i), y(t.Score.Value() / best)}
		}
		v.Rows = append(v.Rows, row{N: t.N, Parent: t.Parent, Schedule: spec.ScheduleText(t.Schedule), Verdict: verdict,
			Took: t.Took.Round(100 * time.Millisecond).String(), At: t.At.Round(time.Second).String(),
			Hazards: t.Score.Hazards, New: t.Score.New, Nearness: fmt.Sprintf("%.2f", t.Score.Nearness),
			Value: fmt.Sprintf("%.2f", t.Score.Value())})
	}
	v.Score, v.Nearness = strings.Join(score, " "), strings.Join(near, " ")
	return v
}

var page = template.Must(template.New(PageName).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222 }
table { border-collapse: collapse } td, th { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: left }
code { font-size: 12px } .bad { color: #b00020; font-weight: bold }
</style></head><body>
<h1>{{.Title}}</h1>
<p>{{.Summary}}</p>
{{with .Command}}<p>Run it again: <code>{{.}}</code></p>{{end}}
{{with .Failing}}<p>The failing trial's run, whole: <a href="{{.}}/report.html">{{.}}</a></p>{{end}}
<svg width="{{.W}}" height="{{.H}}" role="img" aria-label="score and nearness over trials">
<line x1="{{.Margin}}" y1="{{.Margin}}" x2="{{.Margin}}" y2="{{.Bottom}}" stroke="#999"/>
<line x1="{{.Margin}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}" stroke="#999"/>
<text x="{{.Margin}}" y="20">score (of the best) and nearness, 0 to 1, over trials</text>
<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{{.Score}}"><title>score</title></polyline>
<polyline fill="none" stroke="#ff7f0e" stroke-width="2" stroke-dasharray="4 3" points="{{.Nearness}}"><title>nearness</title></polyline>
{{with .Found}}<circle cx="{{.X}}" cy="{{.Y}}" r="6" fill="#b00020"><title>the violation</title></circle>{{end}}
</svg>
<p><span style="color:#1f77b4">score</span> · <span style="color:#ff7f0e">nearness</span></p>
<table><tr><th>trial</th><th>from</th><th>schedule</th><th>hazards</th><th>nearness</th><th>new states</th><th>score</th><th>took</th><th>at</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{.N}}</td><td>{{if .Parent}}{{.Parent}}{{else}}drawn{{end}}</td><td><code>{{.Schedule}}</code></td><td>{{.Hazards}}</td><td>{{.Nearness}}</td><td>{{.New}}</td><td>{{.Value}}</td><td>{{.Took}}</td><td>{{.At}}</td><td{{if ne .Verdict "no violation"}} class="bad"{{end}}>{{.Verdict}}</td></tr>
{{end}}</table>
</body></html>
`))

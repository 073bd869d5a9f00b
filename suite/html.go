package suite

import (
	"bytes"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// suite.html: a matrix of scenarios (faults, fencing) against locks (system, client), each
// square coloured by its cell's status and linking to the cell; then every cell with its
// expectations against what its runs showed, its detection rate and time to violation,
// the hazards its runs went through (in all, the fewest in one run, and the runs short of
// what the cell requires), and links to its runs' reports. Everything from a result is escaped by html/template;
// the page has no script.

// verdictOrder is the order verdict counts are listed in.
var verdictOrder = []checkers.Verdict{checkers.Invalid, checkers.Unknown, checkers.Valid, checkers.NotApplicable, ""}

type page struct {
	Result
	Met, Failed, Unknown int
	Took                 string
	Columns              []string // locks: "system / client"
	Rows                 []matrixRow
	Cells                []cellView
}

type matrixRow struct {
	Scenario string // "pause-holder, fencing on"
	Squares  []*cellView
}

type cellView struct {
	CellResult
	Anchor   string
	Lock     string
	Scenario string
	Rate     string
	Median   string
	Worst    string
	Checks   []checkView
	Hazards  []hazardLine
}

type checkView struct {
	Check
	Observed string
}

func renderHTML(r Result) ([]byte, error) {
	n := r.Counts()
	p := page{Result: r, Met: n[Met], Failed: n[Failed], Unknown: n[Unknown], Took: r.Finished.Sub(r.Started).Round(time.Second).String()}
	squares := map[[2]string]*cellView{}
	var scenarios []string
	for i, c := range r.Cells {
		v := cellView{CellResult: c, Anchor: fmt.Sprintf("cell-%d", i+1), Lock: c.Cell.Spec.System + " / " + c.Cell.Spec.Client}
		if h := c.Cell.Spec.SystemFileSHA256; len(h) >= 12 {
			v.Lock = c.Cell.Spec.System + " (file " + h[:12] + ") / " + c.Cell.Spec.Client
		}
		v.Scenario = history.NemesisText(c.Cell.Spec.Nemesis, "+") + map[bool]string{true: ", fencing on", false: ", fencing off"}[c.Cell.Spec.Fencing]
		v.Rate, v.Median = foundText(c), medianText(c)
		if c.WorstToViolation != nil {
			v.Worst = c.WorstToViolation.Std().Round(time.Millisecond).String()
		}
		v.Hazards = hazardLines(c)
		for _, ch := range c.Checks {
			if ch.Expect != ExpectEither || len(ch.Observed) > 0 {
				v.Checks = append(v.Checks, checkView{Check: ch, Observed: observed(ch)})
			}
		}
		p.Cells = append(p.Cells, v)
		if !slices.Contains(p.Columns, v.Lock) {
			p.Columns = append(p.Columns, v.Lock)
		}
		if !slices.Contains(scenarios, v.Scenario) {
			scenarios = append(scenarios, v.Scenario)
		}
	}
	for i := range p.Cells {
		// Two cells of one square (other TTLs, say): the matrix links the first.
		key := [2]string{p.Cells[i].Scenario, p.Cells[i].Lock}
		if squares[key] == nil {
			squares[key] = &p.Cells[i]
		}
	}
	for _, s := range scenarios {
		row := matrixRow{Scenario: s}
		for _, col := range p.Columns {
			row.Squares = append(row.Squares, squares[[2]string{s, col}])
		}
		p.Rows = append(p.Rows, row)
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var pageTemplate = template.Must(template.New("suite").Funcs(template.FuncMap{
	"upper": func(s Status) string { return strings.ToUpper(string(s)) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>lockbreaker suite {{.Suite}}: {{upper .Status}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;text-align:left}
th{background:#f4f4f4}
.met{background:#d8f5d8}.failed{background:#f9c9c9}.unknown{background:#fbe7b0}.either{background:#eee;color:#666}
.empty{background:#fafafa}
a{color:#0645ad}
small{color:#555}
ul{margin:.2em 0;padding-left:1.2em}
</style></head><body>
<h1>lockbreaker suite {{.Suite}}: <span class="{{.Status}}">{{upper .Status}}</span></h1>
<p>{{.About}}</p>
<p>{{.Met}} cells met their expectations, {{.Failed}} failed, {{.Unknown}} unknown.
Seeds per cell: {{.Seeds}}, shard {{.Shard}}{{with .Merged}} (merged from shards{{range .}} {{.Shard}}{{end}}){{end}}, started {{.Started.UTC.Format "2006-01-02 15:04:05Z"}}, took {{.Took}}.</p>
{{with .Error}}<p class="unknown">Stopped early: {{.}}</p>{{end}}

<h2>Matrix</h2>
<p><small>Each square is a cell: green met its expectations, red did not, amber could not say. A cell expecting a violation shows how often it was found.</small></p>
<table><tr><th>faults, fencing</th>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><th>{{.Scenario}}</th>{{range .Squares}}{{if .}}<td class="{{.Status}}"><a href="#{{.Anchor}}">{{.Status}}</a>{{with .Rate}}<br><small>found {{.}}</small>{{end}}</td>{{else}}<td class="empty"></td>{{end}}{{end}}</tr>
{{end}}</table>

<h2>Cells</h2>
<table><tr><th>cell</th><th>expected / observed per checker</th><th>detection</th><th>first violation (median / worst)</th><th>hazards over the runs</th><th>runs</th></tr>
{{range .Cells}}<tr id="{{.Anchor}}">
<td class="{{.Status}}"><b>{{.Cell.Name}}</b><br>{{upper .Status}}<br><small>{{.Cell.Why}}</small>
{{with .Reasons}}<ul>{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}</td>
<td><table>{{range .Checks}}<tr class="{{if eq .Expect "either"}}either{{else}}{{.Status}}{{end}}"><td>{{.Checker}}</td><td>{{.Expect}}</td><td>{{.Observed}}</td></tr>{{end}}</table></td>
<td>{{.Rate}}</td>
<td>{{if .Median}}{{.Median}} / {{.Worst}}{{end}}</td>
<td>{{with .Hazards}}<ul>{{range .}}<li{{if .Short}} class="unknown"{{end}}>{{.Text}}</li>{{end}}</ul>{{end}}</td>
<td>{{range .Runs}}{{if .Report}}<a href="{{.Report}}">seed {{.Seed}}: {{.Verdict}}</a>{{else}}seed {{.Seed}}: {{.Verdict}}{{end}}{{with .Error}} <small>(harness error: {{.}})</small>{{end}}<br>{{end}}</td>
</tr>
{{end}}</table>
</body></html>
`))

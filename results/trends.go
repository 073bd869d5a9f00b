package results

// The index's suites: for each suite in the store, a matrix of its cells by its runs,
// newest first, and the flags of its newest run. The suite package reads the suite runs
// and decides every status, number and flag (results cannot import it: it imports
// results); the index renders what it is given, escaped like the rest of the page.

// SuiteTrend is one suite's runs as the index shows them.
type SuiteTrend struct {
	Suite string
	// Rule says what a drift is (its margin), for the reader.
	Rule string
	// Runs are the columns, newest first; Older counts the runs left out after them.
	Runs  []TrendRun
	Older int
	Cells []TrendCell
	// Flags are the newest run's.
	Flags []TrendFlag
}

// TrendRun is a suite run: a column of the matrix.
type TrendRun struct {
	Label, Href string
	// Status is the run's as a class (met, failed, unknown), Text what it says.
	Status, Text string
}

// TrendCell is a cell of the suite: a row, with a square per run ("" where the run did
// not have the cell).
type TrendCell struct {
	Name    string
	Squares []TrendSquare
}

// TrendSquare is how a cell fared in one run.
type TrendSquare struct {
	// Status is a class (met, failed, unknown), Text what it says (met, not met, could
	// not say); both "" when the run did not have the cell.
	Status, Text, Href string
	// Rate and Median are the detection rate and the median time to the first violation,
	// for a cell that expects a violation.
	Rate, Median string
	// Flags name what was flagged in this square: regression, flaky, drift.
	Flags []string
}

// TrendFlag is something in the newest run a reader should look at.
type TrendFlag struct {
	Kind, Cell, Text string
	// Command runs the flagged run again; Href is its report.
	Command, Href string
}

// Trends gives the suites of the store at root, and why any suite run there could not be
// read. The index shows what its caller's Trends give (the suite package's
// suite.StoreTrends); a nil Trends shows none.
type Trends func(root string) ([]SuiteTrend, []string)

// of are the suites of the store at root, none when trends is nil.
func (trends Trends) of(root string) ([]SuiteTrend, []string) {
	if trends == nil {
		return nil, nil
	}
	return trends(root)
}

const trendStyle = `table.trend { width: auto; }
table.trend td, table.trend th { font-size: .85rem; white-space: nowrap; }
.sq.met { background: #dafbe1; } .sq.failed { background: #ffebe9; } .sq.unknown { background: #fff8c5; }
.sq .flag, li.flag b { color: var(--invalid); font-weight: 600; }
ul.flags { padding-left: 1.2rem; }
ul.flags code { display: block; margin: .2rem 0 .4rem; word-break: break-all; white-space: normal; }
`

const trendBody = `{{- if or .Suites .SuiteProblems}}
<h2>Suites</h2>
{{- range .SuiteProblems}}
<p class="muted">Could not read a suite run: {{.}}</p>
{{- end}}
{{- range .Suites}}
<h3>suite {{.Suite}}</h3>
{{- if .Flags}}
<ul class="flags">
{{- range .Flags}}
<li class="flag {{.Kind}}"><b>{{.Kind}}</b> {{.Cell}}: {{.Text}}{{with .Href}} (<a href="{{.}}">report</a>){{end}}{{with .Command}}<code>{{.}}</code>{{end}}</li>
{{- end}}
</ul>
{{- else}}
<p>Its newest run has no regression, no violation of a property a cell expects to hold, no drift.</p>
{{- end}}
<p class="meta">Cells by run, newest first{{if .Older}} ({{.Older}} older runs not shown){{end}}: met, not met, could not say; found is the detection rate, then the median time to the first violation. A regression is a cell not met now that met the last time it could say; a drift is {{.Rule}}.</p>
<table class="trend">
<thead><tr><th>cell</th>{{range .Runs}}<th class="sq {{.Status}}"><a href="{{.Href}}">{{.Label}}</a><br>{{.Text}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Cells}}
<tr><td>{{.Name}}</td>{{range .Squares}}<td class="sq {{.Status}}">{{if .Text}}<a href="{{.Href}}">{{.Text}}</a>{{with .Rate}}<br>found {{.}}{{end}}{{with .Median}}<br>{{.}}{{end}}{{range .Flags}}<br><span class="flag">{{.}}</span>{{end}}{{end}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- end}}
<h2>Runs</h2>
{{- end}}
`

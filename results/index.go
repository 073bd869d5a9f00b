package results

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
)

// IndexFile is the store's page of every run, at its root.
const IndexFile = "index.html"

// WriteIndex writes <root>/index.html: every run in the store, newest first, coloured by
// its verdict and filterable by system, client, nemesis and verdict; beside its faults, a
// run counts the hazards its nemeses exist to create ("9 lost grants"); above them, the
// suites trends finds in the store (none when it is nil). The harness calls it after each
// run.
func WriteIndex(root string, trends Trends) error {
	page, err := RenderIndex(root, trends)
	if err != nil {
		return err
	}
	return WriteAtomic(filepath.Join(root, IndexFile), page)
}

// RefreshIndex rewrites the index of the store a run directory lies in, when that store
// has one, with the suites trends finds there; it makes no index anywhere else.
func RefreshIndex(runDir string, trends Trends) error {
	root := filepath.Dir(filepath.Dir(runDir))
	if _, err := os.Stat(filepath.Join(root, IndexFile)); err != nil {
		return nil
	}
	return WriteIndex(root, trends)
}

// RenderIndex is the index page of the store at root, as WriteIndex writes it.
func RenderIndex(root string, trends Trends) ([]byte, error) {
	runs, err := listRuns(root)
	if err != nil {
		return nil, err
	}
	v := indexView{Policy: indexPolicy, Script: template.JS(indexScript), Runs: runs}
	v.Suites, v.SuiteProblems = trends.of(root)
	for _, r := range runs {
		v.Systems = append(v.Systems, r.systems...)
		v.Clients = append(v.Clients, r.clients...)
		v.Nemeses = append(v.Nemeses, r.nemeses...)
		v.Verdicts = append(v.Verdicts, r.Verdict.Class)
	}
	for _, list := range []*[]string{&v.Systems, &v.Clients, &v.Nemeses, &v.Verdicts} {
		slices.Sort(*list)
		*list = slices.Compact(*list)
	}
	var buf bytes.Buffer
	if err := indexTemplate().Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("render %s: %w", IndexFile, err)
	}
	return buf.Bytes(), nil
}

type indexView struct {
	Policy                              template.HTMLAttr
	Script                              template.JS
	Runs                                []runRow
	Systems, Clients, Nemeses, Verdicts []string
	Suites                              []SuiteTrend
	SuiteProblems                       []string
}

// runRow is one run of the index. The filters read its data attributes, JSON lists.
type runRow struct {
	Test, RunID, Href, Started, Took string
	Verdict, Headline                verdictView
	System, Client, Nemesis, Fencing string
	Faults, Ops                      int
	// Hazards are those the run's nemeses exist to create, counted, each absent one too.
	Hazards                   []hazardView
	Problem                   string // why the run has no verdict to show
	DataSystem, DataClient    string
	DataNemesis, DataVerdict  string
	started                   time.Time
	systems, clients, nemeses []string
}

// listRuns finds every run directory under root, newest first: <root>/<test>/<run>/, and
// the runs a suite keeps deeper (<root>/suite-<name>/<time>/runs/<test>/<run>/). A run
// is a directory with a history or a summary; links (latest) and hidden names are not
// followed.
func listRuns(root string) ([]runRow, error) {
	var rows []runRow
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return fmt.Errorf("read the run store %s: %w", root, err)
		case !d.IsDir():
			return nil
		case dir != root && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case dir == root || !hasAny(dir, HistoryFile, SummaryFile):
			return nil
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		test := filepath.ToSlash(filepath.Dir(rel))
		if test != "." {
			rows = append(rows, newRunRow(dir, test, d.Name()))
		}
		return filepath.SkipDir
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rows, func(a, b runRow) int {
		return cmp.Or(b.started.Compare(a.started), cmp.Compare(b.RunID, a.RunID), cmp.Compare(a.Test, b.Test))
	})
	return rows, nil
}

func hasAny(dir string, names ...string) bool {
	for _, name := range names {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Mode().IsRegular() {
			return true
		}
	}
	return false
}

func newRunRow(dir, test, id string) runRow {
	row := runRow{Test: test, RunID: id, Href: (&url.URL{Path: test + "/" + id + "/"}).String()}
	if hasAny(dir, ReportFile) {
		row.Href += ReportFile
	}
	row.started, _ = time.Parse(timestampLayout, strings.SplitN(id, "-", 2)[0])
	s, err := ReadSummary(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		row.Problem, row.Verdict = "no results: running, or it stopped before checking", viewVerdict(checkers.Unknown)
	case err != nil:
		row.Problem, row.Verdict = err.Error(), viewVerdict(checkers.Unknown)
	default:
		row.Verdict = viewVerdict(s.Verdict)
		row.Headline, _ = headline(s.Results)
		row.Faults, row.Ops = s.Faults, s.Ops.Total().Total()
		for _, h := range hazardViews(s.Hazards) {
			if h.Nemesis != "" {
				row.Hazards = append(row.Hazards, h)
			}
		}
		if !s.Started.IsZero() {
			row.started = s.Started
			if s.Finished.After(s.Started) {
				row.Took = s.Finished.Sub(s.Started).Round(time.Second).String()
			}
		}
		setup := ReadSetup(s.Spec)
		row.System, row.Client, row.Nemesis = setup.System, setup.Client, strings.Join(setup.Nemesis, ", ")
		if h := setup.SystemFileSHA256; len(h) >= 12 { // a system described in a file (package sysfile)
			row.System += " (file " + h[:12] + ")"
		}
		if setup.System != "" {
			row.Fencing = map[bool]string{true: "on", false: "off"}[setup.Fencing]
			row.systems, row.clients, row.nemeses = []string{setup.System}, []string{setup.Client}, setup.Nemesis
		}
	}
	if !row.started.IsZero() {
		row.Started = row.started.UTC().Format("2006-01-02 15:04:05")
	}
	row.DataSystem, row.DataClient, row.DataNemesis = jsonList(row.systems), jsonList(row.clients), jsonList(row.nemeses)
	row.DataVerdict = jsonList([]string{row.Verdict.Class})
	return row
}

func jsonList(values []string) string {
	b, _ := json.Marshal(append([]string{}, values...))
	return string(b)
}

// indexScript filters the runs' rows; it is the one script the index's policy lets run.
//
//go:embed index.js
var indexScript string

var indexPolicy = contentSecurityPolicy(indexScript)

// indexTemplate is parsed on first use, not at every start of every lockbreaker process.
var indexTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New(IndexFile).Parse(pageHead + indexStyle + trendStyle + "</style>\n<title>lockbreaker runs</title>\n</head>\n<body>\n" +
		indexBody + "<script>{{.Script}}</script>\n</body>\n</html>\n"))
})

const indexStyle = `.filters { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; margin: .5rem 0 1rem; font-size: .9rem; }
.filters select { font: inherit; }
tr.run td:first-child { border-left: .3rem solid var(--unknown); }
tr.run.valid td:first-child { border-left-color: var(--valid); }
tr.run.invalid td:first-child { border-left-color: var(--invalid); }
tr.run.invalid { background: #fff5f5; }
tr.run.valid { background: #f6fff8; }
tr.run.not-applicable td:first-child { border-left-color: var(--na); }
td.headline { font-size: .85rem; }
small.hazard { white-space: nowrap; }
small.hazard.absent { color: var(--unknown); }
`

const indexBody = `<h1>lockbreaker runs</h1>
<p class="meta">Every run in this store, newest first{{if .Suites}}, after its suites' runs{{end}}. Rebuilt after each run; <code>lockbreaker serve</code> serves it.</p>
` + trendBody + `{{- if .Runs}}
<div class="filters">
<label>system <select data-filter="system"><option value="">any</option>{{range .Systems}}<option>{{.}}</option>{{end}}</select></label>
<label>client <select data-filter="client"><option value="">any</option>{{range .Clients}}<option>{{.}}</option>{{end}}</select></label>
<label>nemesis <select data-filter="nemesis"><option value="">any</option>{{range .Nemeses}}<option>{{.}}</option>{{end}}</select></label>
<label>verdict <select data-filter="verdict"><option value="">any</option>{{range .Verdicts}}<option>{{.}}</option>{{end}}</select></label>
<span id="shown" class="muted">{{len .Runs}} runs</span>
</div>
<table class="runs">
<thead><tr><th>verdict</th><th>test</th><th>started (UTC)</th><th>system</th><th>client</th><th>nemesis</th><th>fencing</th><th class="num">ops</th><th class="num">faults</th><th>took</th><th>lock and data safety</th></tr></thead>
<tbody>
{{- range .Runs}}
<tr class="run {{.Verdict.Class}}" data-system="{{.DataSystem}}" data-client="{{.DataClient}}" data-nemesis="{{.DataNemesis}}" data-verdict="{{.DataVerdict}}">
<td><span class="verdict {{.Verdict.Class}}">{{.Verdict.Text}}</span></td><td><a href="{{.Href}}">{{.Test}}</a><br><span class="muted mono">{{.RunID}}</span></td><td>{{.Started}}</td>
<td>{{.System}}</td><td>{{.Client}}</td><td>{{.Nemesis}}</td><td>{{.Fencing}}</td><td class="num">{{.Ops}}</td><td class="num">{{.Faults}}{{range .Hazards}}<br><small class="hazard{{if .Absent}} absent{{end}}" title="{{if .Absent}}{{.Absent}}{{else}}{{.Hazard}}, what {{.Nemesis}} exists to create{{end}}">{{.Text}}</small>{{end}}</td><td>{{.Took}}</td>
<td class="headline">{{if .Problem}}<span class="muted">{{.Problem}}</span>{{else}}{{.Headline.Text}}{{end}}</td></tr>
{{- end}}
</tbody>
</table>
{{- else}}
<p class="muted">No runs yet: lockbreaker run makes one.</p>
{{- end}}
`

package suite

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads"
)

func TestBuiltinSuitesAreComplete(t *testing.T) {
	for _, name := range BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			s, ok, err := Builtin(name, harness.CheckedSpec)
			if !ok || err != nil {
				t.Fatalf("Builtin(%s): %v, %v", name, ok, err)
			}
			for _, c := range s.Cells {
				if len(c.expecting(ExpectInvalid))+len(c.expecting(ExpectValid)) == 0 {
					t.Errorf("cell %s expects nothing decided", c.Name)
				}
				if c.Why == "" {
					t.Errorf("cell %s does not say where its expectation comes from", c.Name)
				}
			}
		})
	}
	if _, ok, _ := Builtin("nightly-special", harness.CheckedSpec); ok {
		t.Error("an unknown suite was found")
	}
}

// Every built-in cell says what it expects of every checker, so a checker added to
// checkers.All() without a built-in expectation is caught here rather than expected
// "either" in silence.
func TestBuiltinCellsExpectEveryChecker(t *testing.T) {
	for _, name := range BuiltinNames() {
		s, _, _ := Builtin(name, harness.CheckedSpec)
		for _, c := range s.Cells {
			for _, ck := range checkers.All() {
				if _, ok := c.Expect[ck.Name()]; !ok {
					t.Errorf("%s: cell %s has no expectation of checker %s (suite/builtin.go, tableRow.expect)", name, c.Name, ck.Name())
				}
			}
		}
	}
}

// Every system a cell names in the kleppmann suite is covered with every one of its
// clients: a client added later must be added to the table too.
func TestKleppmannCoversEveryClientOfItsSystems(t *testing.T) {
	s, _, _ := Builtin("kleppmann", harness.CheckedSpec)
	clients := map[string][]string{}
	for _, c := range s.Cells {
		if !slices.Contains(clients[c.Spec.System], c.Spec.Client) {
			clients[c.Spec.System] = append(clients[c.Spec.System], c.Spec.Client)
		}
	}
	for _, want := range []string{"redis/redis", "redis/redislock", "redlock/redlock", "redlock/redlock-parallel",
		"redlock/redsync", "zookeeper/zookeeper", "zookeeper/zk-recipe-lib", "local/local", "local-broken/local-broken", "sentinel/redis"} {
		sys, client, _ := strings.Cut(want, "/")
		if !slices.Contains(clients[sys], client) {
			t.Errorf("kleppmann has no cell for %s", want)
		}
	}
}

// The table names the clients without fencing tokens rather than linking the clients
// (noTokens): every client of the built-in suites is in it exactly when its grants carry
// none.
func TestNoTokensAreTheClientsWithout(t *testing.T) {
	for _, name := range BuiltinNames() {
		s, _, err := Builtin(name, harness.CheckedSpec)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Cells {
			client, err := workloads.LookupClient(c.Spec.Client)
			if err != nil {
				t.Fatal(err)
			}
			if listed := slices.Contains(noTokens, client.Name); listed == client.Tokens {
				t.Errorf("%s: client %s grants tokens: %v; in noTokens: %v", c.Name, client.Name, client.Tokens, listed)
			}
		}
	}
	for _, name := range noTokens {
		if c, err := workloads.LookupClient(name); err != nil || c.Tokens {
			t.Errorf("noTokens names %s, a client with tokens or none (%v)", name, err)
		}
	}
}

func TestShardsCoverTheSuiteOnce(t *testing.T) {
	s, _, _ := Builtin("kleppmann", harness.CheckedSpec)
	for _, n := range []int{1, 2, 3, 4, 7, len(s.Cells), len(s.Cells) + 3} {
		var all []string
		for i := 1; i <= n; i++ {
			for _, c := range (Shard{i, n}).Of(s.Cells) {
				all = append(all, c.Name)
			}
		}
		var want []string
		for _, c := range s.Cells {
			want = append(want, c.Name)
		}
		if !slices.Equal(all, want) {
			t.Errorf("%d shards cover %d cells, want each of the %d once", n, len(all), len(want))
		}
	}
}

// Shards of one suite share its definition; a changed expectation or spec is another.
func TestDefinitionNamesTheCellsAsTheyRun(t *testing.T) {
	s, _, _ := Builtin("smoke", harness.CheckedSpec)
	again, _, _ := Builtin("smoke", harness.CheckedSpec)
	expect := func(s Suite) Suite { s.Cells[0].Expect = map[checkers.Name]Expect{"stats": ExpectValid}; return s }
	seed := func(s Suite) Suite { s.Cells[1].Spec.Seed++; return s }
	base, _ := s.definition()
	if d, _ := again.definition(); d != base || base == "" {
		t.Fatalf("the same suite twice: %q and %q", base, d)
	}
	for name, change := range map[string]func(Suite) Suite{"an expectation": expect, "a seed": seed} {
		changed, _, _ := Builtin("smoke", harness.CheckedSpec)
		if d, _ := change(changed).definition(); d == base {
			t.Errorf("%s changed, the definition did not", name)
		}
	}
}

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		want Shard
		err  bool
	}{
		{"", Shard{1, 1}, false},
		{"2/4", Shard{2, 4}, false},
		{"4/4", Shard{4, 4}, false},
		{"0/4", Shard{}, true},
		{"5/4", Shard{}, true},
		{"1/0", Shard{}, true},
		{"2/4x", Shard{}, true},
		{"two", Shard{}, true},
	}
	for _, tt := range tests {
		got, err := ParseShard(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestLoadReadsYAMLAndJSON(t *testing.T) {
	tests := []struct {
		name, file, text string
		want             []string // cell names
		err              string
	}{
		{"yaml", "mine.yaml", `
name: mine
defaults: {system: local, ttl: 500ms, time_limit: 3s}
threshold: 0.8
cells:
  - name: safe
    spec: {nemesis: [none]}
    expect: {mutual-exclusion: valid}
  - spec: {system: local-broken}
    expect: {mutual-exclusion: invalid}
    threshold: 1
`, []string{"safe", "local-broken-local-broken-none-nofence"}, ""},
		{"json, named after its file", "nightly.json",
			`{"cells":[{"spec":{"system":"local","nemesis":["pause-holder"]},"expect":{"mutual-exclusion":"invalid"}}]}`,
			[]string{"local-local-pause-holder-nofence"}, ""},
		{"a typo in a spec", "t.yaml", "cells: [{spec: {sytem: local}, expect: {stats: valid}}]", nil, `unknown field "sytem"`},
		{"a typo in a cell", "t.yaml", "cells: [{spec: {system: local}, expct: {stats: valid}}]", nil, `unknown field "expct"`},
		{"an unknown checker", "t.yaml", "cells: [{spec: {system: local}, expect: {mutex: valid}}]", nil, `checker "mutex", which does not exist`},
		{"an unknown expectation", "t.yaml", "cells: [{spec: {system: local}, expect: {stats: maybe}}]", nil, `expectation must be valid, invalid, either or not-applicable, got "maybe"`},
		{"no expectation", "t.yaml", "cells: [{spec: {system: local}}]", nil, "expects nothing"},
		{"a bad spec", "t.yaml", "cells: [{spec: {system: local, ttl: 0s}, expect: {stats: valid}}]", nil, "--ttl must be between"},
		{"a duration as a number", "t.yaml", "cells: [{spec: {system: local, ttl: 2}, expect: {stats: valid}}]", nil, `duration must be a string like "2s"`},
		{"two cells of one name", "t.yaml", "cells: [{name: a, spec: {system: local}, expect: {stats: valid}}, {name: a, spec: {system: local}, expect: {stats: valid}}]", nil, "two cells are named a"},
		{"a threshold above 1", "t.yaml", "cells: [{spec: {system: local}, expect: {stats: valid}, threshold: 90}]", nil, "threshold must be between 0 and 1"},
		{"an unknown hazard", "t.yaml", "cells: [{spec: {system: local}, expect: {stats: valid}, hazards: {grant-lots: 3}}]", nil,
			`requires hazard "grant-lots", which does not exist (hazards: clock-past-lease, clock-served, crash-under-grant, grant-lost,`},
		{"a hazard required no times", "t.yaml", "cells: [{spec: {system: local}, expect: {stats: valid}, hazards: {grant-lost: 0}}]", nil,
			"hazard grant-lost: the least number per run must be at least 1, got 0"},
		{"a hazard required a fraction of a time", "t.yaml", "cells: [{spec: {system: local}, expect: {stats: valid}, hazards: {grant-lost: 1.5}}]", nil,
			"cannot unmarshal number 1.5"},
		{"no cells", "t.yaml", "name: empty", nil, "no cells"},
		{"not yaml", "t.yaml", "cells: [", nil, "not YAML or JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Load(path, harness.CheckedSpec)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Load: %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range s.Cells {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("cells %q, want %q", names, tt.want)
			}
		})
	}
}

// Defaults lie over run's, cells over the defaults; thresholds fall back to the file's.
func TestFileDefaultsAndThresholds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(path, []byte(`
defaults: {system: local, clients: 3}
threshold: 0.8
cells:
  - {name: a, spec: {ttl: 500ms}, expect: {stats: valid}, hazards: {granted-in-pause: 2}}
  - {name: b, spec: {clients: 2}, expect: {stats: valid}, threshold: 1}
`), 0o644)
	s, err := Load(path, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Cells[0], s.Cells[1]
	if a.Spec.Clients != 3 || a.Spec.TTL.Std() != 500*time.Millisecond || a.Spec.TimeLimit.Std() != 10*time.Second || len(a.Spec.Nemesis) != 0 {
		t.Errorf("cell a: %+v", a.Spec)
	}
	if b.Spec.Clients != 2 || b.Spec.TTL.Std() != 2*time.Second {
		t.Errorf("cell b: %+v", b.Spec)
	}
	if a.threshold() != 0.8 || b.threshold() != 1 || s.Name != "s" {
		t.Errorf("thresholds %g, %g, name %q", a.threshold(), b.threshold(), s.Name)
	}
	if len(a.Hazards) != 1 || a.Hazards[history.GrantedInPause] != 2 || b.Hazards != nil {
		t.Errorf("hazards %v, %v; want a to require 2 granted-in-pause, b none", a.Hazards, b.Hazards)
	}
	if list := Describe(s); !strings.Contains(list, "valid: stats; at least 2 granted-in-pause a run\n") {
		t.Errorf("the list does not say what cell a requires:\n%s", list)
	}
}

// A spec's client may be a list, in the defaults or a cell: the clients share the slots,
// held as one comma-separated name; a client that cannot run on the system is refused.
func TestFileClientsShareTheSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(path, []byte(`
defaults: {system: redis, client: [redis, redislock]}
cells:
  - {name: both, spec: {}, expect: {stats: valid}}
  - {name: three, spec: {client: [redislock, exec, redis], client_cmd: [sh, lock.sh]}, expect: {stats: valid}}
  - {name: one, spec: {client: redis}, expect: {stats: valid}}
`), 0o644)
	s, err := Load(path, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"redis,redislock", "redislock,exec,redis", "redis"} {
		if got := s.Cells[i].Spec.Client; got != want {
			t.Errorf("cell %s: client %q, want %q", s.Cells[i].Name, got, want)
		}
	}
	os.WriteFile(path, []byte(`
cells:
  - {name: wrong, spec: {system: redis, client: [redis, redsync]}, expect: {stats: valid}}
`), 0o644)
	if _, err := Load(path, harness.CheckedSpec); err == nil || !strings.Contains(err.Error(), `client "redsync" runs on redlock, not on "redis"`) {
		t.Errorf("a client of another system among the list: %v, want it refused", err)
	}
}

// An exec client's program words that start with ./ or ../ are paths from the suite
// file's directory; other words are left as they are.
func TestFileProgramsAreBesideTheFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "suites")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "mylock"), []byte("#!/bin/sh\n"), 0o755)
	path := filepath.Join(dir, "s.yaml")
	os.WriteFile(path, []byte(`
defaults: {system: local, client: exec, client_cmd: [sh, ./mylock.sh, --verbose], nemesis: [pause-holder, kill-client]}
cells:
  - {name: b, spec: {client_cmd: [./mylock, ../lib/x.py, /opt/y.py, -u], nemesis: [none]}, expect: {stats: valid}}
  - {name: a, expect: {stats: valid}}
`), 0o644)
	s, err := Load(path, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{
		{filepath.Join(dir, "mylock"), filepath.Join(filepath.Dir(dir), "lib/x.py"), "/opt/y.py", "-u"},
		{"sh", filepath.Join(dir, "mylock.sh"), "--verbose"},
	} {
		if got := s.Cells[i].Spec.ClientCmd; !slices.Equal(got, want) {
			t.Errorf("cell %s: program %q, want %q", s.Cells[i].Name, got, want)
		}
	}
	// A cell's list is its own: cell b's did not overwrite the defaults' for cell a.
	if got := s.Cells[1].Spec.Nemesis; !slices.Equal(got, []string{"pause-holder", "kill-client"}) {
		t.Errorf("cell a: nemesis %q, want the defaults'", got)
	}
	cells := []Cell{{Spec: harness.Spec{ClientCmd: []string{"./mylock"}}}}
	if besideFile(cells, "."); cells[0].Spec.ClientCmd[0] != "./mylock" {
		t.Errorf("a program beside a suite in the working directory became %q, which exec would look up in PATH", cells[0].Spec.ClientCmd[0])
	}
}

// A system file is a path from the suite file's directory; the cells' specs name the
// file's system and carry the file's hash.
func TestSystemFilesAreBesideTheSuiteFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "suites")
	os.MkdirAll(filepath.Join(dir, "own"), 0o755)
	os.WriteFile(filepath.Join(dir, "own", "mine.yaml"), []byte("name: suite-mine\nnodes: 1\nport: 7070\ncommand: [lockd]\n"+
		"ready: {tcp: true}\nclients: [exec]\n"), 0o644)
	path := filepath.Join(dir, "s.yaml")
	os.WriteFile(path, []byte("defaults: {system_file: own/mine.yaml, client_cmd: [/bin/true]}\n"+
		"cells: [{name: a, expect: {stats: valid}}]\n"), 0o644)
	s, err := Load(path, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cells[0].Spec
	if c.SystemFile != filepath.Join(dir, "own", "mine.yaml") || c.System != "suite-mine" || c.Client != "exec" || len(c.SystemFileSHA256) != 64 {
		t.Errorf("cell a: system file %q, system %q, client %q, sha256 %q", c.SystemFile, c.System, c.Client, c.SystemFileSHA256)
	}
}

// junit.xml has one testcase per cell: a failed expectation is a failure with its reason,
// an unknown cell an error.
func TestJUnitHasOneCasePerCell(t *testing.T) {
	r := sampleResult()
	data, err := renderJUnit(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		XMLName  xml.Name `xml:"testsuite"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct{} `xml:"error"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(data, &got); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, data)
	}
	if got.Tests != 3 || len(got.Cases) != 3 || got.Failures != 1 || got.Errors != 1 {
		t.Fatalf("tests %d, cases %d, failures %d, errors %d; want 3, 3, 1, 1", got.Tests, len(got.Cases), got.Failures, got.Errors)
	}
	if f := got.Cases[1].Failure; f == nil || !strings.Contains(f.Message, "expected valid, got invalid") {
		t.Errorf("failed cell's failure: %+v", f)
	}
	if got.Cases[0].Failure != nil || got.Cases[0].Error != nil || got.Cases[2].Error == nil {
		t.Errorf("cases %+v", got.Cases)
	}
}

// Text from runs reaches suite.html escaped; cells link to their runs' reports.
func TestHTMLEscapesAndLinks(t *testing.T) {
	data, err := renderHTML(sampleResult())
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	if strings.Contains(page, "<script>") {
		t.Error("a summary's markup reached the page unescaped")
	}
	for _, want := range []string{`href="runs/safe/1/report.html"`, `href="#cell-3"`, "&lt;script&gt;", "found 1/1 (100 %)", "1s / 1s"} {
		if !strings.Contains(page, want) {
			t.Errorf("suite.html lacks %q", want)
		}
	}
}

// sampleResult is a judged suite of three cells: met, failed, unknown.
func sampleResult() Result {
	s := time.Second
	safeRun := run(1, valid, valid, na, 0)
	safeRun.Report = "runs/safe/1/report.html"
	hostile := run(2, invalid, valid, na, 1500*time.Millisecond)
	hostile.Summaries["mutual-exclusion"] = "<script>alert(1)</script>"
	paused := pausedCell
	paused.Spec.System, paused.Spec.Client = "redis", "redis"
	r := Result{Suite: "sample", Seeds: 1, Shard: "1/1", Started: time.Unix(0, 0), Finished: time.Unix(10, 0), Cells: []CellResult{
		Judge(safeCell, []RunResult{safeRun}),
		Judge(func() Cell { c := safeCell; c.Name = "safe-but-broken"; return c }(), []RunResult{hostile}),
		Judge(paused, []RunResult{broken(run(3, invalid, valid, valid, s))}),
	}}
	r.Cells[2].Cell.Expect = map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid}
	r.Cells[2] = Judge(r.Cells[2].Cell, r.Cells[2].Runs)
	r.Tally()
	return r
}

func TestSampleResultIsWhatTheWritersAreShown(t *testing.T) {
	r := sampleResult()
	got := []Status{r.Cells[0].Status, r.Cells[1].Status, r.Cells[2].Status}
	if !slices.Equal(got, []Status{Met, Failed, Unknown}) || r.Status != Failed {
		t.Fatalf("statuses %v, suite %s", got, r.Status)
	}
	if r.Cells[1].Runs[0].Verdicts["mutual-exclusion"] != checkers.Invalid {
		t.Fatal("the hostile run is not a violation")
	}
}

// suite.json, suite.html and junit.xml count each cell's hazards over its runs, and say
// which runs were short of what the cell requires.
func TestWritersCountHazards(t *testing.T) {
	cell := Judge(failoverCell, []RunResult{lost(3, run(1, invalid, valid, valid, time.Second)), lost(1, run(2, invalid, valid, valid, time.Second))})
	r := Result{Suite: "hazards", Seeds: 2, Shard: "1/1", Started: time.Unix(0, 0), Finished: time.Unix(10, 0), Cells: []CellResult{cell}}
	r.Tally()
	dir := t.TempDir()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	const line = "grant-lost: 4 lost grants in all, 1 in the fewest run; the cell requires 3 per run, 1 run short"
	var saved Result
	if data, err := os.ReadFile(filepath.Join(dir, JSONFile)); err != nil || json.Unmarshal(data, &saved) != nil {
		t.Fatalf("suite.json: %v", err)
	}
	want := []HazardTally{{Hazard: history.GrantLost, Total: 4, MinPerRun: 1, Required: 3, Short: 1}}
	if got := saved.Cells[0].Hazards; !slices.Equal(got, want) || saved.Cells[0].Cell.Hazards[history.GrantLost] != 3 ||
		saved.Cells[0].Runs[1].Hazards[history.GrantLost] != 1 {
		t.Errorf("suite.json keeps hazards %+v, cell %v, runs %v; want %+v", got, saved.Cells[0].Cell.Hazards, saved.Cells[0].Runs, want)
	}
	for file, want := range map[string]string{HTMLFile: `<li class="unknown">` + line + `</li>`, JUnitFile: "&#xA;" + line + "&#xA;"} {
		if page, err := os.ReadFile(filepath.Join(dir, file)); err != nil || !strings.Contains(string(page), want) {
			t.Errorf("%s lacks %q (%v):\n%s", file, want, err, page)
		}
	}
}

// A cell that expects only violations stops its runs at the first one unless it says
// otherwise; one that expects something to hold, or counts hazards, runs to its limit.
func TestCellsExpectingOnlyViolationsStopEarly(t *testing.T) {
	no, yes := false, true
	for _, tt := range []struct {
		name string
		cell Cell
		want bool
	}{
		{"violations only", Cell{Expect: map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid, "stats": ExpectValid}}, true},
		{"something must hold", Cell{Expect: map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid, "data-safety": ExpectValid}}, false},
		{"nothing expected invalid", Cell{Expect: map[checkers.Name]Expect{"stats": ExpectValid}}, false},
		{"hazards counted", Cell{Expect: map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid},
			Hazards: map[history.Hazard]int{history.GrantLost: 3}}, false},
		{"the cell says no", Cell{Expect: map[checkers.Name]Expect{"mutual-exclusion": ExpectInvalid}, StopEarly: &no}, false},
		{"the cell says yes", Cell{Expect: map[checkers.Name]Expect{"data-safety": ExpectValid}, StopEarly: &yes}, true},
	} {
		if got := tt.cell.stopsEarly(); got != tt.want {
			t.Errorf("%s: stops early %t, want %t", tt.name, got, tt.want)
		}
	}
}

package cli

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/suite"
)

// writeSuite writes a suite file of whole runs on the lock the harness serves itself.
func writeSuite(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const localDefaults = "defaults: {system: local, clients: 3, ttl: 500ms, interval: 500ms, time_limit: 2s}\n"

// The exit code is the suite's: 0 when every cell met its expectation, 1 when one did
// not (and the output says which and why), 254 for a suite that cannot run.
func TestSuiteExitCodes(t *testing.T) {
	met := writeSuite(t, localDefaults+`cells:
  - {name: safe, spec: {nemesis: [none]}, expect: {mutual-exclusion: valid, stats: valid}}
`)
	wrong := writeSuite(t, localDefaults+`cells:
  - {name: safe, spec: {nemesis: [none]}, expect: {mutual-exclusion: valid}}
  - {name: wrong, spec: {system: local-broken, nemesis: [none]}, expect: {mutual-exclusion: valid}}
`)
	typo := writeSuite(t, localDefaults+"cells: [{spec: {nemesiss: [none]}, expect: {stats: valid}}]\n")
	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout for 0 and 1, in the one line of stderr for 254
	}{
		{"every cell met", []string{"suite", met}, 0, "suite mine (shard 1/1, seeds per cell 1): MET, 1 cells met, 0 failed, 0 unknown"},
		{"a wrong expectation", []string{"suite", wrong, "--seeds", "2"}, 1, "mutual-exclusion expected valid, got invalid"},
		{"the second shard only", []string{"suite", "--shard", "2/2", wrong}, 1, "FAILED   wrong"},
		{"the first shard only", []string{"suite", "--shard", "1/2", wrong}, 0, "MET      safe"},
		{"list", []string{"suite", "--list", "kleppmann"}, 0, "kleppmann: "},
		{"an unknown suite", []string{"suite", "nightly"}, 254, `"nightly" is neither a built-in suite`},
		{"no suite", []string{"suite"}, 254, "give one suite"},
		{"two suites", []string{"suite", "smoke", "kleppmann"}, 254, `unexpected argument "kleppmann"`},
		{"a typo in the file", []string{"suite", typo}, 254, `unknown field "nemesiss"`},
		{"no seeds", []string{"suite", "--seeds", "0", "smoke"}, 254, "--seeds must be between 1 and 1000"},
		{"parallel out of range", []string{"suite", "--parallel", "9", "smoke"}, 254, "--parallel must be between 1 and 8"},
		{"a bad shard", []string{"suite", "--shard", "3/2", "smoke"}, 254, "--shard must be i/n"},
		{"no results", []string{"suite", "--results", "", "smoke"}, 254, "--results must name a directory"},
		{"help of merge", []string{"suite", "merge", "-h"}, 0, "suite merge DIR... joins the shards of one suite run"},
		{"help of compare", []string{"suite", "compare", "--help"}, 0, "suite compare OLD NEW compares the newest suite run"},
		{"merge nothing", []string{"suite", "merge"}, 254, "suite merge: give the directories of a suite run's shards"},
	}
	runs := map[string]bool{"every cell met": true, "a wrong expectation": true, "the second shard only": true, "the first shard only": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if runs[c.name] && testing.Short() {
				t.Skip("runs a suite on the in-process lock, seconds each: make test has it, the fast tier does not")
			}
			t.Parallel() // each is its own process on the in-process lock
			var code int
			var stdout, stderr string
			switch {
			case runs[c.name]:
				code, stdout, stderr, _ = suiteUntilDecided(t, c.code, c.args...)
			case c.name == "no results":
				code, stdout, stderr = lockbreaker(t, nil, c.args...)
			default:
				code, stdout, stderr = lockbreaker(t, nil, append(c.args, "--results", t.TempDir())...)
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
			}
			if c.code == 254 {
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if len(lines) != 1 || !strings.Contains(lines[0], c.out) {
					t.Errorf("stderr %q: want one line containing %q", stderr, c.out)
				}
				return
			}
			if !strings.Contains(stdout, c.out) {
				t.Errorf("stdout lacks %q:\n%s", c.out, stdout)
			}
			if i := strings.IndexFunc(stdout, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }); i >= 0 {
				t.Errorf("control character at %d of stdout (not a terminal: no live line)", i)
			}
		})
	}
}

// suiteUntilDecided runs the suite of args in a new store until its exit code is want,
// up to three times, each on fresh seeds, as long as the one before fell short of its
// danger: a run of two seconds on a busy machine may grant nothing (unknown, exit 2), and
// the broken lock may show no overlap (the wrong expectation met, exit 0). Any other exit
// is the answer.
func suiteUntilDecided(t *testing.T, want int, args ...string) (code int, stdout, stderr, store string) {
	t.Helper()
	for try := range 3 {
		store = t.TempDir()
		code, stdout, stderr = lockbreaker(t, nil, append(args, "--seed-offset", fmt.Sprint(10*try), "--results", store)...)
		fellShort := code == 2 || want == 1 && code == 0
		if code == want || !fellShort {
			return code, stdout, stderr, store
		}
		t.Logf("try %d: exit %d, want %d; again on fresh seeds\n%s", try+1, code, want, stdout)
	}
	return code, stdout, stderr, store
}

// smoke on real containers: the matrix is produced, junit.xml has one valid test case per
// cell, and every cell meets its expectation.
func TestSuiteSmokeOnRealContainers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	start := time.Now()
	code, stdout, stderr, store := suiteUntilDecided(t, 0, "suite", "smoke")
	t.Logf("suite smoke took %s\n%s", time.Since(start).Round(time.Second), stdout)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr)
	}
	dir := onlySuiteDir(t, store, "smoke")
	s, _, _ := suite.Builtin("smoke", harness.CheckedSpec)
	var junit struct {
		XMLName  xml.Name `xml:"testsuite"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Cases    []struct {
			Name string `xml:"name,attr"`
		} `xml:"testcase"`
	}
	data, err := os.ReadFile(filepath.Join(dir, suite.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(data, &junit); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
	if junit.Tests != len(s.Cells) || len(junit.Cases) != len(s.Cells) || junit.Failures+junit.Errors != 0 {
		t.Errorf("junit.xml: %d tests, %d cases, %d failures, %d errors; want %d cases, none failed",
			junit.Tests, len(junit.Cases), junit.Failures, junit.Errors, len(s.Cells))
	}
	for i, c := range junit.Cases {
		if i < len(s.Cells) && c.Name != s.Cells[i].Name {
			t.Errorf("case %d is %s, want cell %s", i, c.Name, s.Cells[i].Name)
		}
	}
	if page, err := os.ReadFile(filepath.Join(dir, suite.HTMLFile)); err != nil || !strings.Contains(string(page), "report.html") {
		t.Errorf("suite.html does not link the runs' reports: %v", err)
	}
}

// The whole kleppmann suite with one seed, for its wall time on this machine. It takes
// longer than make test may (see the Makefile: make nightly runs it), so it runs only when
// LOCKBREAKER_KLEPPMANN=1.
func TestKleppmannSuiteWithOneSeed(t *testing.T) {
	if os.Getenv("LOCKBREAKER_KLEPPMANN") != "1" {
		t.Skip("the whole kleppmann suite: set LOCKBREAKER_KLEPPMANN=1 (make nightly)")
	}
	store := t.TempDir()
	start := time.Now()
	code, stdout, stderr := lockbreaker(t, nil, "suite", "kleppmann", "--seeds", "1", "--results", store)
	t.Logf("suite kleppmann --seeds 1: wall time %s\n%s", time.Since(start).Round(time.Second), stdout)
	if code != 0 {
		t.Errorf("exit %d, want 0 (every cell met)\n%s", code, stderr)
	}
}

func onlySuiteDir(t *testing.T, store, name string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(store, "suite-"+name, "2*"))
	if len(dirs) != 1 {
		t.Fatalf("suite directories %q, want one", dirs)
	}
	return dirs[0]
}

// shardedSuite has five cells on the in-process lock whose expected verdicts every seed
// gives, so a sharded run and an unsharded one must judge alike.
const shardedSuite = `name: sharded
defaults: {system: local, clients: 3, ttl: 500ms, interval: 500ms, time_limit: 1s}
cells:
  - {name: safe, spec: {nemesis: [none]}, expect: {mutual-exclusion: valid, stats: valid}}
  - {name: fenced, spec: {nemesis: [none], fencing: true}, expect: {mutual-exclusion: valid, fencing: valid}}
  - {name: two-clients, spec: {nemesis: [none], clients: 2}, expect: {mutual-exclusion: valid}}
  - {name: broken, spec: {system: local-broken, nemesis: [none]}, expect: {mutual-exclusion: invalid}}
  - {name: broken-fenced, spec: {system: local-broken, nemesis: [none], fencing: true}, expect: {mutual-exclusion: invalid}}
`

// Four shards of a suite with two seeds merge into the matrix the unsharded run of the
// same cells and seeds gives: the same cells in the same order, the same expectations
// and statuses, a report per run inside the merged directory. A shard given twice, or
// one left out, is refused in one line.
func TestSuiteMergeEqualsTheUnshardedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("whole suites run on the in-process lock, seconds each: make test has them, the fast tier does not")
	}
	t.Parallel() // processes on the in-process lock, each with stores of its own
	file := writeSuite(t, shardedSuite)
	whole, shards := runShardedAndWhole(t, file)

	merged := t.TempDir()
	code, stdout, stderr := lockbreaker(t, nil, append(append([]string{"suite", "merge"}, shards...), "--results", merged)...)
	if code != 0 {
		t.Fatalf("merge: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "merged from shards 1/4, 2/4, 3/4, 4/4") {
		t.Errorf("merge says nothing of its shards:\n%s", stdout)
	}
	mergedDir := onlySuiteDir(t, merged, "sharded")
	got, want := readSuiteJSON(t, mergedDir), readSuiteJSON(t, onlySuiteDir(t, whole, "sharded"))
	if got.Status != want.Status || got.Seeds != want.Seeds || got.Shard != "1/1" || len(got.Cells) != len(want.Cells) {
		t.Fatalf("merged: %s, %d seeds, shard %s, %d cells; unsharded: %s, %d seeds, %d cells",
			got.Status, got.Seeds, got.Shard, len(got.Cells), want.Status, want.Seeds, len(want.Cells))
	}
	for i, c := range got.Cells {
		w := want.Cells[i]
		if !reflect.DeepEqual(c.Cell, w.Cell) || c.Status != w.Status {
			t.Errorf("cell %d: %s %s, unsharded %s %s (or their expectations differ)", i+1, c.Cell.Name, c.Status, w.Cell.Name, w.Status)
		}
		if len(c.Runs) != len(w.Runs) {
			t.Fatalf("cell %s: %d runs, unsharded %d", c.Cell.Name, len(c.Runs), len(w.Runs))
		}
		for j, run := range c.Runs {
			if run.Seed != w.Runs[j].Seed {
				t.Errorf("cell %s run %d: seed %d, unsharded %d", c.Cell.Name, j+1, run.Seed, w.Runs[j].Seed)
			}
			if filepath.IsAbs(run.Report) {
				t.Errorf("cell %s seed %d: report %s is not relative to the merged directory", c.Cell.Name, run.Seed, run.Report)
			}
			if _, err := os.Stat(filepath.Join(mergedDir, run.Report)); err != nil {
				t.Errorf("cell %s seed %d: its report is not in the merged directory: %v", c.Cell.Name, run.Seed, err)
			}
		}
	}
	if page, err := os.ReadFile(filepath.Join(mergedDir, suite.HTMLFile)); err != nil || !strings.Contains(string(page), "merged from shards 1/4 2/4 3/4 4/4") {
		t.Errorf("suite.html does not say it was merged: %v", err)
	}

	for _, c := range []struct {
		name string
		dirs []string
		want string
	}{
		{"a shard twice", append([]string{shards[0]}, shards...), "are the same run of shard 1/4"},
		{"a shard left out", shards[:3], "the shards do not cover suite sharded: shard 4/4 is missing (cells broken, broken-fenced)"},
		{"not a suite run", []string{t.TempDir()}, "no suite run in it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := lockbreaker(t, nil, append(append([]string{"suite", "merge"}, c.dirs...), "--results", t.TempDir())...)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if code != 254 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("exit %d, stderr %q; want 254 and one line saying %q\n%s", code, stderr, c.want, stdout)
			}
		})
	}
}

// runShardedAndWhole runs the suite in file as four shards and whole, side by side, with
// two seeds, and returns the whole run's store and the shards'. A run of a second on a
// machine that busy may grant nothing (unknown, exit 2), or the broken lock may show no
// overlap (its cell failed, exit 1): the five are then run again on fresh seeds, up to
// three times, since only runs that found what their cells expect can be compared.
func runShardedAndWhole(t *testing.T, file string) (whole string, shards []string) {
	t.Helper()
	var undecided []string
	for try := range 3 {
		whole, shards = t.TempDir(), make([]string, 4)
		codes, outputs := make([]int, 5), make([]string, 5)
		var wg sync.WaitGroup
		for i := range 5 {
			args := []string{"suite", file, "--seeds", "2", "--seed-offset", fmt.Sprint(10 * try), "--results", whole}
			if i < 4 {
				shards[i] = t.TempDir()
				args = []string{"suite", file, "--seeds", "2", "--seed-offset", fmt.Sprint(10 * try), "--shard", fmt.Sprintf("%d/4", i+1), "--results", shards[i]}
			}
			wg.Go(func() {
				var stdout, stderr string
				codes[i], stdout, stderr = lockbreaker(t, nil, args...)
				outputs[i] = stdout + stderr
			})
		}
		wg.Wait()
		undecided = undecided[:0]
		for i, code := range codes {
			switch code {
			case 0:
			case 1, 2: // the broken lock showed no overlap, or a run granted nothing
				undecided = append(undecided, fmt.Sprintf("run %d exit %d:\n%s", i+1, code, outputs[i]))
			default:
				t.Fatalf("run %d: exit %d, want 0\n%s", i+1, code, outputs[i])
			}
		}
		if len(undecided) == 0 {
			return whole, shards
		}
		t.Logf("try %d: %d of the five runs undecided; again on fresh seeds", try+1, len(undecided))
	}
	t.Fatalf("three tries left runs undecided:\n%s", strings.Join(undecided, "\n"))
	return "", nil
}

// regressedStore runs the suite of cells and the cell made of format twice in one store,
// its expectation valid, then invalid, so that the second run fails where the first met.
// A run of a second on a machine that busy may grant nothing (unknown, exit 2): both are
// then run again in a new store on fresh seeds, up to three times.
func regressedStore(t *testing.T, cells, format string) string {
	t.Helper()
	var undecided string
	for try := range 3 {
		store := t.TempDir()
		undecided = ""
		for i, expect := range []string{"valid", "invalid"} {
			file := writeSuite(t, cells+fmt.Sprintf(format, expect))
			code, stdout, stderr := lockbreaker(t, nil, "suite", file, "--seed-offset", fmt.Sprint(10*try), "--results", store)
			if code == 2 {
				undecided = stdout + stderr
				break
			}
			if code != i {
				t.Fatalf("run %d: exit %d, want %d\n%s%s", i+1, code, i, stdout, stderr)
			}
		}
		if undecided == "" {
			return store
		}
		t.Logf("try %d: a run undecided; again on fresh seeds", try+1)
	}
	t.Fatalf("three tries left a run undecided:\n%s", undecided)
	return ""
}

func readSuiteJSON(t *testing.T, dir string) suite.Result {
	t.Helper()
	r, err := suite.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Two runs of a suite in one store, the second with a cell made to fail (its expectation
// changed): the store's index flags the regression, and suite compare exits 1 naming it,
// from the store where it ran and from a copy of it (an artifact), and from the two suite
// runs' directories.
func TestSuiteRegressionIsFlaggedAndFailsCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("whole suites run on the in-process lock, seconds each: make test has them, the fast tier does not")
	}
	t.Parallel() // processes on the in-process lock, each with stores of its own
	const cells = "defaults: {system: local, clients: 3, ttl: 500ms, interval: 500ms, time_limit: 1s}\ncells:\n"
	store := regressedStore(t, cells, "  - {name: safe, spec: {nemesis: [none]}, expect: {mutual-exclusion: %s}}\n")
	dirs, _ := filepath.Glob(filepath.Join(store, "suite-mine", "2*"))
	if len(dirs) != 2 {
		t.Fatalf("suite runs %q, want two", dirs)
	}
	first := "suite-mine/" + filepath.Base(dirs[0])
	index, err := os.ReadFile(filepath.Join(store, results.IndexFile))
	if err != nil || !strings.Contains(string(index), "<li class=\"flag regression\"><b>regression</b> safe: met in "+first+", not met now: ") {
		t.Errorf("the store's index does not flag the regression of safe: %v", err)
	}
	copied := filepath.Join(t.TempDir(), "artifact")
	if err := os.CopyFS(copied, os.DirFS(store)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		old, new string
		code     int
		want     string
	}{
		{"the store against itself", store, store, 1, "REGRESSED: suite mine, safe\n"},
		{"a copy of the store", copied, copied, 1, "  REGRESSION  safe: met in " + first + ", not met now: expected mutual-exclusion invalid: found in 0 of 1 seeds"},
		{"the two suite runs", dirs[0], dirs[1], 1, "  safe  met     not met"},
		{"the first run against itself", dirs[0], dirs[0], 254, "holds no run of suite mine from before NEW's"},
		{"the first against the store", store, dirs[0], 254, "holds no run of suite mine from before NEW's"},
		{"one argument", store, "", 254, "give OLD and NEW"},
		{"a file", store, filepath.Join(dirs[0], suite.JSONFile), 254, "is not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"suite", "compare", c.old, c.new}
			if c.new == "" {
				args = args[:3]
			}
			code, stdout, stderr := lockbreaker(t, nil, args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s%s", code, c.code, c.want, stdout, stderr)
			}
		})
	}
}

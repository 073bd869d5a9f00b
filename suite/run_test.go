package suite

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// The test binary doubles as the worker: the runner starts it again with WorkerEnv set.
func TestMain(m *testing.M) {
	harness.MaybeRunWorker()
	os.Exit(m.Run())
}

// harnessRunners runs a suite's specs on the harness, the test binary as the worker.
func harnessRunners(worker string) Runners {
	return func(specs []spec.Spec, root string, log io.Writer, _ int) (Runner, func(context.Context) error) {
		clusters := harness.NewClusters(specs...)
		return harness.Runner{ResultsRoot: root, Progress: log, Worker: []string{worker}, Clusters: clusters, Trends: StoreTrends}, clusters.Close
	}
}

// localSuite is a suite of whole runs on the lock the harness serves itself (no Docker),
// one of whose cells expects what its scenario cannot give.
const localSuite = `
name: local
defaults: {system: local, clients: 3, ttl: 500ms, interval: 500ms, time_limit: 2s}
cells:
  - name: safe
    spec: {nemesis: [none], fencing: true}
    expect: {lock-linearizable: valid, mutual-exclusion: valid, data-safety: valid, lost-updates: valid, fencing: valid, stats: valid}
  - name: broken
    spec: {system: local-broken, nemesis: [none]}
    expect: {mutual-exclusion: invalid, lock-linearizable: invalid}
  - name: wrong
    spec: {nemesis: [pause-holder]}
    expect: {mutual-exclusion: valid}
    why: deliberately wrong
`

// A whole suite on the in-process lock: every cell runs with every seed, the wrong
// expectation fails with its reason, and suite.json, suite.html and junit.xml say so.
func TestRunJudgesEveryCellAndWritesItsFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real runs: make test has it, the fast tier has the judging of cells on made-up runs")
	}
	path := filepath.Join(t.TempDir(), "local.yaml")
	if err := os.WriteFile(path, []byte(localSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A cell whose danger did not come in its two-second runs (a busy machine) is unknown,
	// the suite's honest answer: the suite runs again in a fresh store on the next seeds.
	var (
		progress  strings.Builder
		root, dir string
		r         Result
		offset    int64
		undecided = func(c CellResult) bool { return c.Status == Unknown }
	)
	for try := range 3 {
		progress.Reset()
		offset, root = int64(10+10*try), t.TempDir()
		dir, r, err = Run(ctx, s, Options{Seeds: 2, SeedOffset: offset, Root: root, Progress: &progress, Runners: harnessRunners(exe),
			CheckSpec: harness.CheckedSpec, Parallel: 3})
		t.Log(progress.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Log(Summary(dir, r))
		if !slices.ContainsFunc(r.Cells, undecided) {
			break
		}
	}
	if r.Status != Failed || len(r.Cells) != 3 {
		t.Fatalf("suite %s with %d cells, want failed with 3", r.Status, len(r.Cells))
	}
	want := map[string]Status{"safe": Met, "broken": Met, "wrong": Failed}
	for _, c := range r.Cells {
		if c.Status != want[c.Cell.Name] || len(c.Runs) != 2 {
			t.Errorf("cell %s: %s with %d runs, want %s with 2; %q", c.Cell.Name, c.Status, len(c.Runs), want[c.Cell.Name], c.Reasons)
		}
		for _, run := range c.Runs {
			if _, err := os.Stat(filepath.Join(dir, run.Report)); err != nil {
				t.Errorf("cell %s seed %d: its report is not where suite.html links: %v", c.Cell.Name, run.Seed, err)
			}
		}
	}
	wrong := r.Cells[2]
	if !slices.ContainsFunc(wrong.Reasons, func(s string) bool { return strings.Contains(s, "mutual-exclusion expected valid, got invalid") }) {
		t.Errorf("the wrong cell's reasons %q do not say what was expected and seen", wrong.Reasons)
	}
	if got := []int64{r.Cells[0].Runs[0].Seed, r.Cells[0].Runs[1].Seed}; !slices.Equal(got, []int64{7 + offset, 8 + offset}) {
		t.Errorf("seeds %v, want the spec's 7 moved by the offset of %d, and the one after", got, offset)
	}
	if !strings.Contains(progress.String(), "run 6/6  ") {
		t.Errorf("progress never reached the last run:\n%s", progress.String())
	}

	var saved Result
	data, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil || json.Unmarshal(data, &saved) != nil || saved.Status != Failed || len(saved.Cells) != 3 {
		t.Errorf("suite.json: %v, status %s, %d cells", err, saved.Status, len(saved.Cells))
	}
	if !slices.Equal(saved.AllCells, []string{"safe", "broken", "wrong"}) || saved.Definition == "" || saved.SeedOffset != offset {
		t.Errorf("suite.json: all cells %q, definition %q, seed offset %d; want every cell, a definition and %d",
			saved.AllCells, saved.Definition, saved.SeedOffset, offset)
	}
	if cmd := saved.Cells[1].Runs[1].Command; !strings.HasPrefix(cmd, "lockbreaker run --system local-broken ") || !strings.Contains(cmd, fmt.Sprintf(" --seed %d ", 8+offset)) {
		t.Errorf("suite.json: the broken cell's second run is reproduced by %q", cmd)
	}
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	data, err = os.ReadFile(filepath.Join(dir, JUnitFile))
	if err != nil || xml.Unmarshal(data, &junit) != nil || junit.Tests != 3 || junit.Failures != 1 {
		t.Errorf("junit.xml: %v, %d tests, %d failures; want 3 and 1", err, junit.Tests, junit.Failures)
	}
	if page, err := os.ReadFile(filepath.Join(dir, HTMLFile)); err != nil || !strings.Contains(string(page), "FAILED") {
		t.Errorf("suite.html: %v", err)
	}
	if index, err := os.ReadFile(filepath.Join(root, results.IndexFile)); err != nil || !strings.Contains(string(index), "<h3>suite local</h3>") {
		t.Errorf("the store's index does not show the suite: %v", err)
	}
}

// Runs go side by side up to Parallel, never more; each cell is judged once, on its runs
// in seed order, whatever order they ended in.
func TestRunCellsSideBySide(t *testing.T) {
	cells := []Cell{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	const parallel, seeds = 3, 4
	var (
		mu            sync.Mutex
		running, most int
		allIn         = make(chan struct{})
		judged        = map[string][]int64{}
	)
	run := func(c Cell, seed int64) (RunResult, error) {
		mu.Lock()
		running++
		most = max(most, running)
		if running == parallel && most == parallel && allIn != nil {
			close(allIn)
			allIn = nil
		}
		wait := allIn
		mu.Unlock()
		if wait != nil { // the first runs wait until as many go at once as may
			select {
			case <-wait:
			case <-time.After(time.Minute):
				t.Error("never were as many runs under way at once as Parallel allows")
			}
		}
		mu.Lock()
		running--
		mu.Unlock()
		return RunResult{Seed: seed}, nil
	}
	judge := func(c Cell, runs []RunResult) error {
		for _, r := range runs {
			judged[c.Name] = append(judged[c.Name], r.Seed)
		}
		return nil
	}
	line := progress{w: io.Discard}
	if err := runCells(cells, Options{Seeds: seeds, Parallel: parallel}, run, judge, &line, &Result{}); err != nil {
		t.Fatal(err)
	}
	if most != parallel {
		t.Errorf("at most %d runs at once, want %d", most, parallel)
	}
	for _, c := range cells {
		if !slices.Equal(judged[c.Name], []int64{0, 1, 2, 3}) {
			t.Errorf("cell %s judged once on seeds %v, want 0 1 2 3 once", c.Name, judged[c.Name])
		}
	}
}

// An Alone cell's runs go with no other beside them.
//
// In a synctest bubble a run's sleep ends only once every other goroutine waits: every
// run that could begin beside an alone run has begun before the alone run's ends, so a
// gate that let one through is caught every time, on any machine.
func TestAloneCellsRunWithNoneBeside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cells := []Cell{{Name: "a"}, {Name: "b", Alone: true}, {Name: "c"}}
		var (
			mu                         sync.Mutex
			running, beside, aloneRuns int
		)
		run := func(c Cell, seed int64) (RunResult, error) {
			mu.Lock()
			running++
			beside = max(beside, running)
			if c.Alone {
				aloneRuns++
				if running != 1 {
					t.Errorf("cell %s seed %d began beside %d other runs", c.Name, seed, running-1)
				}
			}
			mu.Unlock()
			time.Sleep(time.Second)
			mu.Lock()
			if c.Alone && running != 1 {
				t.Errorf("cell %s seed %d ended beside %d other runs", c.Name, seed, running-1)
			}
			running--
			mu.Unlock()
			return RunResult{Seed: seed}, nil
		}
		line := progress{w: io.Discard}
		if err := runCells(cells, Options{Seeds: 4, Parallel: 3}, run, func(Cell, []RunResult) error { return nil }, &line, &Result{}); err != nil {
			t.Fatal(err)
		}
		if aloneRuns != 4 || beside != 3 {
			t.Errorf("%d alone runs, at most %d runs at once; want 4, and the other cells' 3 side by side", aloneRuns, beside)
		}
	})
}

// A run that stops the suite starts no other; the cells begun are judged on what they have.
func TestRunCellsStopAtTheFirstError(t *testing.T) {
	cells := []Cell{{Name: "a"}, {Name: "b"}}
	var started []string
	judged := map[string]int{}
	run := func(c Cell, seed int64) (RunResult, error) {
		started = append(started, fmt.Sprintf("%s%d", c.Name, seed))
		if c.Name == "a" && seed == 1 {
			return RunResult{}, errors.New("interrupted")
		}
		return RunResult{Seed: seed}, nil
	}
	judge := func(c Cell, runs []RunResult) error {
		judged[c.Name] = len(runs)
		return nil
	}
	line := progress{w: io.Discard}
	err := runCells(cells, Options{Seeds: 3, Parallel: 1}, run, judge, &line, &Result{})
	if err == nil || err.Error() != "interrupted" {
		t.Errorf("error %v, want the run's", err)
	}
	if !slices.Equal(started, []string{"a0", "a1"}) || !maps.Equal(judged, map[string]int{"a": 1}) {
		t.Errorf("started %v, judged %v; want a0 a1 started and a judged on its one run", started, judged)
	}
}

// A shard runs only its block of cells, and an interrupted suite keeps what it did.
func TestShardAndInterrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "local.yaml")
	os.WriteFile(path, []byte(localSuite), 0o644)
	s, err := Load(path, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // interrupted before the first run
	dir, r, err := Run(ctx, s, Options{Seeds: 1, Shard: Shard{3, 3}, Root: t.TempDir(), Runners: harnessRunners(exe), CheckSpec: harness.CheckedSpec})
	if err == nil || r.Status != Unknown || r.Error == "" {
		t.Fatalf("interrupted suite: %v, status %s, error %q", err, r.Status, r.Error)
	}
	if r.Shard != "3/3" || len(r.AllCells) != 3 {
		t.Errorf("shard %s of cells %q, want 3/3 of all three", r.Shard, r.AllCells)
	}
	if _, err := os.Stat(filepath.Join(dir, JUnitFile)); err != nil {
		t.Errorf("an interrupted suite left no junit.xml: %v", err)
	}
}

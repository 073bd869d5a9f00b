package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Options say how a suite runs.
type Options struct {
	// Seeds is how many runs each cell gets: its spec's seed and the ones after it.
	Seeds int
	// SeedOffset moves every cell's seeds that far from its spec's: a nightly that explores
	// new seeds, a test that tries another when one brought no danger.
	SeedOffset int64
	Shard      Shard
	// Root is the results root: the suite's directory is Root/suite-<name>/<timestamp>,
	// its runs' directories are under that directory's runs/.
	Root string
	// Progress receives the live progress line; nil discards it.
	Progress io.Writer
	// Live rewrites one progress line in place (a terminal) instead of printing a line
	// per run.
	Live bool
	// Runners makes what runs the cells' specs: the harness's runner (the CLI's), or a
	// test's.
	Runners Runners
	// CheckSpec checks the cells' specs before any runs (Suite.Check): the harness's.
	CheckSpec SpecCheck
	// Parallel is how many runs go at once, each on a cluster and network of its own; 0 or
	// 1: one after another.
	Parallel int
	// RunToLimit runs every cell to its time limit, none stopping at its first violation
	// (Cell.StopEarly).
	RunToLimit bool
}

// Runner runs one spec as a run of its own under the results root it was made for and
// returns the run's directory and summary (harness.Runner is one).
type Runner interface {
	Run(ctx context.Context, s spec.Spec) (dir string, summary results.Summary, err error)
}

// Runners makes the Runner of one suite run: its runs' directories under root, their
// progress lines to log, up to parallel runs at once on the systems of specs. done ends
// what it kept between runs (clusters).
type Runners func(specs []spec.Spec, root string, log io.Writer, parallel int) (r Runner, done func(context.Context) error)

// Names in a suite's directory.
const (
	JSONFile  = "suite.json"
	HTMLFile  = "suite.html"
	JUnitFile = "junit.xml"
	// LogFile keeps the runs' own progress lines, which would drown the live line.
	LogFile = "suite.log"
	runsDir = "runs"
)

// Run runs the shard's cells, each with opts.Seeds seeds and up to opts.Parallel runs at
// once, judges each cell as soon as its runs are done, and keeps suite.json, suite.html and junit.xml in the
// suite's directory up to date, so a suite cut short still shows what it did; at the end
// it rewrites the store's index.html. Runs on the same system share a cluster where that
// is sound (see Runners). The error is the harness's (Docker unreachable, an
// interrupt); the result is complete up to there.
func Run(ctx context.Context, s Suite, opts Options) (string, Result, error) {
	if err := s.Check(opts.CheckSpec); err != nil {
		return "", Result{}, err
	}
	if opts.Seeds < 1 {
		return "", Result{}, errorf("--seeds must be at least 1, got %d", opts.Seeds)
	}
	if opts.Shard.Count == 0 {
		opts.Shard = Shard{1, 1}
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	opts.Parallel = max(opts.Parallel, 1)
	cells := opts.Shard.Of(s.Cells)
	definition, err := s.definition()
	if err != nil {
		return "", Result{}, err
	}
	res := Result{Suite: s.Name, About: s.About, Seeds: opts.Seeds, SeedOffset: opts.SeedOffset, Shard: opts.Shard.String(),
		AllCells: cellNames(s.Cells), Definition: definition, Started: time.Now()}
	dir, err := newSuiteDir(opts.Root, s.Name, res.Started)
	if err != nil {
		return "", Result{}, err
	}
	logFile, err := os.Create(filepath.Join(dir, LogFile))
	if err != nil {
		return dir, Result{}, fmt.Errorf("suite log: %w", err)
	}
	defer logFile.Close()

	var specs []spec.Spec
	for _, c := range cells {
		specs = append(specs, c.Spec)
	}
	runner, done := opts.Runners(specs, filepath.Join(dir, runsDir), logFile, opts.Parallel)
	line := progress{w: opts.Progress, live: opts.Live, started: res.Started, runs: len(cells) * opts.Seeds, parallel: opts.Parallel}
	runErr := runCells(cells, opts, func(c Cell, seed int64) (RunResult, error) {
		if opts.RunToLimit {
			c.StopEarly = new(bool)
		}
		return runOnce(ctx, runner, c, s.cellIndex(c), opts.SeedOffset+seed, dir)
	}, func(c Cell, runs []RunResult) error {
		res.Cells = append(res.Cells, Judge(c, runs))
		// Cells finish out of order when runs go side by side; the files list them as the suite does.
		slices.SortStableFunc(res.Cells, func(a, b CellResult) int { return s.cellIndex(a.Cell) - s.cellIndex(b.Cell) })
		res.Finished = time.Now()
		res.Tally()
		return Write(dir, res)
	}, &line, &res)
	line.done()
	runErr = errors.Join(runErr, done(context.WithoutCancel(ctx)))
	res.Finished = time.Now()
	if runErr != nil {
		res.Error = runErr.Error()
	}
	res.Tally()
	// The store's index shows the suite's runs beside the others (index.go).
	return dir, res, errors.Join(runErr, Write(dir, res), results.WriteIndex(opts.Root, StoreTrends))
}

// runCells runs every cell's seeds, up to opts.Parallel at once (an Alone cell's with
// none beside them), in the suite's order: a cell's seeds follow one another, so the runs
// side by side are mostly on one system and share its kept clusters. judged is called one call at a time as each cell's last run
// ends, with its runs in seed order. The first error that stops the suite (see runOnce, or
// judged's) starts no more runs; the runs under way end as they would, and each cell begun
// is judged on the runs it has.
func runCells(cells []Cell, opts Options, run func(Cell, int64) (RunResult, error), judged func(Cell, []RunResult) error, line *progress, res *Result) error {
	type job struct{ cell, seed int }
	side := newGate(opts.Parallel)
	var (
		mu             sync.Mutex
		firstErr       error
		stop           = make(chan struct{})
		runs           = make([][]*RunResult, len(cells))
		left           = make([]int, len(cells))
		begun, running int
		jobs           = make(chan job)
	)
	fail := func(err error) { // with mu held
		if firstErr == nil {
			firstErr = err
			close(stop)
		}
	}
	for i := range cells {
		runs[i], left[i] = make([]*RunResult, opts.Seeds), opts.Seeds
	}
	go func() {
		defer close(jobs)
		for i := range cells {
			for j := range opts.Seeds {
				select {
				case jobs <- job{i, j}:
				case <-stop:
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for range opts.Parallel {
		wg.Go(func() {
			for jb := range jobs {
				c := cells[jb.cell]
				mu.Lock()
				if firstErr != nil {
					mu.Unlock()
					continue
				}
				begun++
				running++
				line.show(begun, running, c.Name, *res)
				mu.Unlock()

				leave := side.enter(c.Alone)
				r, err := run(c, int64(jb.seed))
				leave()
				mu.Lock()
				running--
				if err != nil {
					fail(err)
				} else {
					runs[jb.cell][jb.seed] = &r
					if left[jb.cell]--; left[jb.cell] == 0 {
						if err := judged(c, got(runs[jb.cell])); err != nil {
							fail(err)
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, c := range cells {
		if ran := got(runs[i]); firstErr != nil && left[i] > 0 && len(ran) > 0 {
			firstErr = errors.Join(firstErr, judged(c, ran))
		}
	}
	return firstErr
}

// got are the runs that ended, in seed order.
func got(runs []*RunResult) []RunResult {
	var ended []RunResult
	for _, r := range runs {
		if r != nil {
			ended = append(ended, *r)
		}
	}
	return ended
}

// cellIndex is the cell's place in the whole suite, so that its runs' lock keys are the
// same whichever shard runs it.
func (s Suite) cellIndex(c Cell) int {
	for i := range s.Cells {
		if s.Cells[i].Name == c.Name {
			return i + 1
		}
	}
	return 0
}

// runOnce runs seed number j of cell c. Its error is one that stops the suite: a run that
// could not even start (no Docker) or an interrupt. Any other harness error is the run's,
// kept in its result.
func runOnce(ctx context.Context, runner Runner, c Cell, index int, j int64, suiteDir string) (RunResult, error) {
	s := c.Spec
	s.Seed += j
	s.StopEarly = c.stopsEarly()
	// A key of its own: a cluster kept from the run before never shows this run its state.
	s.Key = fmt.Sprintf("%s-c%ds%d", c.Spec.Key, index, s.Seed)
	runDir, summary, err := runner.Run(ctx, s)
	if runDir == "" || ctx.Err() != nil {
		if err == nil {
			err = errors.New("the run made no directory")
		}
		return RunResult{}, fmt.Errorf("cell %s, seed %d: %w", c.Name, s.Seed, err)
	}
	report, _ := filepath.Rel(suiteDir, filepath.Join(runDir, results.ReportFile))
	return FromSummary(s.Seed, filepath.ToSlash(report), runDir, summary, err), nil
}

// newSuiteDir makes root/suite-<name>/<timestamp>/ (a run directory of the test
// "suite-<name>", so names never collide) and its runs/.
func newSuiteDir(root, name string, now time.Time) (string, error) {
	run, err := results.NewRun(root, "suite-"+name, now)
	if err != nil {
		return "", &Error{Reason: err.Error()}
	}
	if err := os.MkdirAll(run.Path(runsDir), 0o755); err != nil {
		return "", fmt.Errorf("suite directory: %w", err)
	}
	return run.Dir(), nil
}

// progress is the suite's one line for a person watching: where it is, how long it has
// taken, and the cells' statuses so far.
type progress struct {
	w              io.Writer
	live           bool
	started        time.Time
	runs, parallel int
	shown          bool
}

// show says that run number run (counted from 1) of cell name starts, with running runs
// under way counting it.
func (p *progress) show(run, running int, name string, so Result) {
	n := so.Counts()
	at := ""
	if p.parallel > 1 {
		at = fmt.Sprintf("  %d running", running)
	}
	text := fmt.Sprintf("run %d/%d%s  %s  met %d  failed %d  unknown %d  %s",
		run, p.runs, at, clock(time.Since(p.started)), n[Met], n[Failed], n[Unknown], name)
	if p.live {
		fmt.Fprint(p.w, "\r\033[K"+text)
	} else {
		fmt.Fprintln(p.w, text)
	}
	p.shown = true
}

// done ends a live line.
func (p *progress) done() {
	if p.live && p.shown {
		fmt.Fprintln(p.w)
	}
}

// clock writes an elapsed time as 1:02:03 or 02:03.
func clock(d time.Duration) string {
	s := int(d.Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}

// Summary is the suite's outcome in a few lines for a terminal: each cell that did not
// meet its expectation with its reasons, then the counts.
func Summary(dir string, r Result) string {
	var b strings.Builder
	for _, c := range r.Cells {
		rate := ""
		if f, ok := c.DetectionRate(); ok {
			rate = fmt.Sprintf("  found %s", percent(f))
			if c.MedianToViolation != nil {
				rate += fmt.Sprintf(" (median %s, worst %s)", c.MedianToViolation.Std().Round(time.Millisecond), c.WorstToViolation.Std().Round(time.Millisecond))
			}
		}
		fmt.Fprintf(&b, "  %-8s %s%s\n", strings.ToUpper(string(c.Status)), c.Cell.Name, rate)
		if c.Status != Met {
			for _, why := range c.Reasons {
				fmt.Fprintf(&b, "           %s\n", why)
			}
		}
	}
	n := r.Counts()
	fmt.Fprintf(&b, "\nsuite %s (shard %s, seeds per cell %d): %s, %d cells met, %d failed, %d unknown, in %s\n",
		r.Suite, r.Shard, r.Seeds, strings.ToUpper(string(r.Status)), n[Met], n[Failed], n[Unknown], r.Finished.Sub(r.Started).Round(time.Second))
	if len(r.Merged) > 0 {
		var shards []string
		for _, m := range r.Merged {
			shards = append(shards, m.Shard)
		}
		fmt.Fprintf(&b, "merged from shards %s\n", strings.Join(shards, ", "))
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "stopped early: %s\n", r.Error)
	}
	fmt.Fprintf(&b, "matrix: %s\n", filepath.Join(dir, HTMLFile))
	return b.String()
}

// gate lets up to n runs go side by side, or one run alone. It is made of channels, whose
// waiting testing/synctest sees (a mutex's it does not): a slot per run beside others, all
// n of them for a run alone, which takes them one after another behind any other alone run.
// A run waiting for a slot is queued behind the alone run that asked first.
type gate struct {
	slots chan struct{}
	alone chan struct{}
}

func newGate(n int) *gate {
	return &gate{slots: make(chan struct{}, n), alone: make(chan struct{}, 1)}
}

// enter waits until the run may go, alone or not, and returns what lets it out.
func (g *gate) enter(alone bool) (leave func()) {
	n := 1
	if alone {
		g.alone <- struct{}{}
		n = cap(g.slots)
	}
	for range n {
		g.slots <- struct{}{}
	}
	return func() {
		for range n {
			<-g.slots
		}
		if alone {
			<-g.alone
		}
	}
}

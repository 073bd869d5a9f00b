// Package offline holds the commands that work on a saved run alone, check and report:
// they judge and draw its history through package analysis and link no Docker client,
// no containers, no harness, no nemesis and no lock client (TestOfflineCommandsLinkNoDocker).
package offline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/analysis"
	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/suite"
)

// Check is `lockbreaker check`: its help, and cmdCheck to run it.
var Check = command.Command{
	Name:     "check",
	Synopsis: "re-run the checkers on a saved run: lockbreaker check store/latest",
	Args:     "[flags] RUN",
	About: `Re-runs every checker on a saved run's history and rewrites its results.json,
report.html and junit.xml. RUN is a run directory, a latest link, a test directory or a
results root (then its latest run). Only the history is judged: of a results.json another
version wrote, what this one cannot read is set aside (said on stderr). Needs no Docker.`,
	Flags: func() *flag.FlagSet {
		fs, _, _, _ := checkFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker check store/latest",
		"lockbreaker check --timeout 10m store/redis-redis-pause-holder-nofence",
		"lockbreaker check store/redis-redis-pause-holder-nofence/20250101T120000Z",
	},
	Run: cmdCheck,
	Parse: func(args []string) error {
		_, _, err := parseCheck(args)
		return err
	},
}

// maxCheckTimeout caps check --timeout like run's other spans: a search longer than a day
// is a typo, not a plan.
const maxCheckTimeout = 24 * time.Hour

// wallClockGuard is the cause check --timeout gives the searches it stops, which their
// verdicts' summaries show: the one verdict that depends on the machine says so.
type wallClockGuard struct{ timeout time.Duration }

func (g wallClockGuard) Error() string {
	return fmt.Sprintf("stopped by check --timeout %s, a wall-clock guard; without it the search is bounded by steps", g.timeout)
}

// checkMemoryLimit is the soft limit (debug.SetMemoryLimit) check sets on its heap unless
// GOMEMLIMIT sets one: a long history's searches would otherwise let the heap grow to
// twice what they hold (3 GB at a million operations). Near it the collector works harder;
// past it nothing fails.
const checkMemoryLimit = 2400 << 20

// checkGCPercent is check's GOGC unless GOGC sets one: collecting a streamed history's
// garbage is much of its work, which fewer collections save: the heap grows by three
// times what it holds live before the next. At a million operations, about 70 MB live, 300
// took 8 % less CPU than 200 for a peak of 390 MB rather than 330 (2026-12-07);
// checkMemoryLimit still bounds it.
const checkGCPercent = 300

// checkFlags makes check's flag set; timeout holds --timeout, maxOps --max-ops, whole --whole.
func checkFlags() (fs *flag.FlagSet, timeout *spec.Duration, maxOps *int, whole *bool) {
	timeout = new(spec.Duration)
	fs = command.NewFlags("check")
	fs.Var((*command.Duration)(timeout), "timeout",
		"a wall-clock guard for your patience: how long the checkers may search (porcupine) before the verdicts of the searches left are unknown; 0 (the default): no limit. Without it each search is bounded by the steps of its model, which gives a history the same verdicts on any machine")
	maxOps = fs.Int("max-ops", checkers.DefaultLimits.MaxOps,
		"the memory limit: the most operations held at once while the history has no safe place to cut (about 2.5 KB each); past it the verdicts are unknown")
	whole = fs.Bool("whole", false,
		"judge the history as one piece, never cut: the reference the pieces' verdicts are tested against, in memory that grows with the history (about 2.5 KB an operation)")
	return fs, timeout, maxOps, whole
}

// checkOptions are check's flags.
type checkOptions struct {
	timeout spec.Duration
	maxOps  int
	whole   bool
}

// parseCheck parses check's arguments: its flags and the run's path.
func parseCheck(args []string) (checkOptions, string, error) {
	fs, timeout, maxOps, whole := checkFlags()
	args, err := command.ParseArgs(fs, args)
	if err != nil {
		return checkOptions{}, "", err
	}
	if *whole && command.IsSet(fs, "max-ops") {
		return checkOptions{}, "", command.Bad(errors.New("check: --whole holds the whole history: --max-ops does not go with it"))
	}
	if t := timeout.Std(); t != 0 && (t < time.Millisecond || t > maxCheckTimeout) {
		return checkOptions{}, "", command.Bad(fmt.Errorf("check: --timeout must be 0 (no limit) or between 1ms and 24h, got %s", t))
	}
	if *maxOps < 1 {
		return checkOptions{}, "", command.Bad(fmt.Errorf("check: --max-ops must be at least 1, got %d", *maxOps))
	}
	path, err := oneRun(fs.Name(), args)
	return checkOptions{timeout: *timeout, maxOps: *maxOps, whole: *whole}, path, err
}

func cmdCheck(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	opts, path, err := parseCheck(args)
	if err != nil {
		return 0, err
	}
	limits := checkers.DefaultLimits
	limits.MaxOps = opts.maxOps
	if opts.whole {
		limits.PieceOps, limits.MaxOps, limits.LongOps = math.MaxInt, math.MaxInt, math.MaxInt
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(checkMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(checkGCPercent)
	}
	run, err := openRun(path)
	if err != nil {
		return 0, err
	}
	dir, summary := run.dir, run.summary
	// The history is what is judged: a results.json of another version only loses what it
	// said (check writes it anew), on stderr so that stdout stays the verdicts.
	if len(run.setAside) > 0 {
		fmt.Fprintf(os.Stderr, "lockbreaker: check: %s is not this version's; set aside: %s\n",
			command.Escape(filepath.Join(dir, results.SummaryFile)), command.Escape(strings.Join(run.setAside, ", ")))
	}
	if t := opts.timeout.Std(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, t, wallClockGuard{t})
		defer cancel()
	}
	summary, err = analysis.File(ctx, dir, filepath.Join(dir, results.HistoryFile), summary, limits)
	if len(summary.Results) == 0 { // the history could not be read
		return 0, err
	}
	// The verdicts stand even when the files cannot be written (a read-only run directory).
	if len(summary.Results) > 0 {
		command.PrintVerdicts(stdout, dir, summary)
	}
	if err = errors.Join(err, results.RefreshIndex(dir, suite.StoreTrends)); err != nil {
		return 0, fmt.Errorf("check: could not write the results files in %s: %w", dir, err)
	}
	return command.ExitCode(summary.Verdict), nil
}

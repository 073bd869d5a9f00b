package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockbreaker/lockbreaker/analysis"
	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/suite"
)

// Report is `lockbreaker report`: its help, and cmdReport to run it.
var Report = command.Command{
	Name:     "report",
	Synopsis: "render a saved run's report again, without checking: lockbreaker report store/latest",
	Args:     "RUN",
	About: `Renders report.html again from a saved run's results.json and history, checking
nothing (lockbreaker check re-judges), and rebuilds the store's index.html. RUN is a run
directory, a latest link, a test directory or a results root (then its latest run).`,
	Examples: []string{"lockbreaker report store/latest"},
	Run:      cmdReport,
	Parse: func(args []string) error {
		_, err := parseReport(args)
		return err
	},
}

// parseReport parses report's arguments: the run's path.
func parseReport(args []string) (string, error) {
	fs := command.NewFlags("report")
	args, err := command.ParseArgs(fs, args)
	if err != nil {
		return "", err
	}
	return oneRun(fs.Name(), args)
}

// cmdReport renders a saved run's report.html again from its results.json and history,
// checking nothing, and rebuilds the index of the store it is in.
func cmdReport(_ context.Context, args []string, stdout io.Writer) (int, error) {
	path, err := parseReport(args)
	if err != nil {
		return 0, err
	}
	run, err := openRun(path)
	if err != nil {
		return 0, err
	}
	// Read as check reads it, so a soak's history is drawn in bounded memory.
	drawing, err := analysis.Draw(filepath.Join(run.dir, results.HistoryFile))
	if err != nil {
		return 0, err
	}
	if !run.judged {
		return 0, command.Bad(fmt.Errorf("report: %s has no %s (lockbreaker check %s judges the run first)", run.dir, results.SummaryFile, run.dir))
	}
	if len(run.setAside) > 0 { // a report of half a summary would show a run that did not happen
		return 0, command.Bad(fmt.Errorf("report: %s is not this version's, which cannot read %s of it (lockbreaker check %s judges the run again)",
			filepath.Join(run.dir, results.SummaryFile), strings.Join(run.setAside, ", "), run.dir))
	}
	if err := errors.Join(analysis.Report(run.dir, run.summary, drawing), results.RefreshIndex(run.dir, suite.StoreTrends)); err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(stdout, "report: %s\n", command.Escape(filepath.Join(run.dir, results.ReportFile)))
	return command.ExitValid, nil
}

// savedRun is a run directory as check and report read it.
type savedRun struct {
	dir     string // symlinks resolved
	summary results.Summary
	judged  bool // whether it has a results.json
	// setAside is what of results.json this version cannot read (see
	// results.ReadSummaryLenient), left zero in summary.
	setAside []string
}

// oneRun is the one run directory among args, the arguments other than flags of the
// command named.
func oneRun(name string, args []string) (string, error) {
	if len(args) != 1 {
		return "", command.Bad(fmt.Errorf("%s: give one run directory, e.g. lockbreaker %s store/latest (got %d arguments)", name, name, len(args)))
	}
	return args[0], nil
}

// openRun reads the run directory at path; a run without a results.json has the zero
// summary, and one this version did not write what it can read.
func openRun(path string) (savedRun, error) {
	var run savedRun
	dir, err := results.Resolve(path)
	if err != nil {
		return run, command.Bad(err)
	}
	run.dir = dir
	run.summary, run.setAside, err = results.ReadSummaryLenient(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return run, command.Bad(err)
	}
	run.judged = err == nil
	return run, nil
}

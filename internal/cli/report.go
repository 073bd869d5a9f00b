package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
)

// cmdReport renders a saved run's report.html again from its results.json and history,
// checking nothing, and rebuilds the index of the store it is in.
func cmdReport(_ context.Context, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("report")
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() != 1 {
		return 0, badInput{errors.New("report: give one run directory, e.g. lockbreaker report store/latest")}
	}
	dir, err := results.Resolve(fs.Arg(0))
	if err != nil {
		return 0, badInput{err}
	}
	file, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	if err != nil {
		return 0, err
	}
	summary, err := results.ReadSummary(dir)
	if err != nil {
		return 0, badInput{fmt.Errorf("report: %w (lockbreaker check %s judges the run first)", err, dir)}
	}
	if summary.Command == "" { // a run saved before results.json kept its command
		summary.Command = harness.ReproduceCommand(summary.Spec)
	}
	if err := errors.Join(results.WriteReport(dir, summary, file.Events), results.RefreshIndex(dir)); err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(stdout, "report: %s\n", escape(filepath.Join(dir, results.ReportFile)))
	return exitValid, nil
}

package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/shrink"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/suite"
)

// shrinkCommand is `lockbreaker shrink`: its help, and cmdShrink to run it.
var shrinkCommand = command.Command{
	Name:     "shrink",
	Synopsis: "find the smallest run that still fails as a failing run did: lockbreaker shrink store/latest",
	Args:     "[flags] RUN",
	About: `Takes a run whose verdict was invalid and looks for the smallest spec that still fails the
same way (the same checkers invalid) in --confirm fresh runs out of as many, each on a new
seed: one nemesis of a composition, at most 1 or 2 faults (--faults), 2 or 3 clients, a
time limit of 3 or 5 s, the system's fewest nodes, no work, no rate; the TTL is kept.
Every step is printed (what was tried, how many of its runs failed, kept or not), every
trial is a normal run in the results directory, and the runs stop a second after their
first violation. It ends with the smallest command, its failure rate over 10 fresh seeds,
the median time to its first violation and its report. A budget that runs out gives the
smallest found so far and says so. Exit 1 when the smallest still fails, 2 when no
fresh run failed, 254 for a run that did not fail or cannot be read.`,
	Flags: func() *flag.FlagSet {
		fs, _ := shrinkFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker shrink store/latest",
		"lockbreaker shrink --confirm 5 --budget 30m store/redlock-redsync-kill-node-nofence",
	},
	Run: cmdShrink,
	Parse: func(args []string) error {
		_, _, err := parseShrink(args)
		return err
	},
}

type shrinkOptions struct {
	confirm int
	budget  spec.Duration
	results string
}

// shrinkRateRuns is how many fresh runs measure the smallest spec's failure rate.
const shrinkRateRuns = 10

func shrinkFlags() (*flag.FlagSet, *shrinkOptions) {
	opts := &shrinkOptions{confirm: 3, budget: spec.Duration(10 * time.Minute)}
	fs := command.NewFlags("shrink")
	fs.IntVar(&opts.confirm, "confirm", opts.confirm, "fresh runs a smaller spec must fail in, every one of them, to be kept")
	fs.Var((*command.Duration)(&opts.budget), "budget", "how long the search may take; its answer is then the smallest found so far")
	fs.StringVar(&opts.results, "results", defaultResults, "directory the trial runs are made in")
	return fs, opts
}

// parseShrink parses shrink's arguments: its flags and the failing run's directory.
func parseShrink(args []string) (*shrinkOptions, string, error) {
	fs, opts := shrinkFlags()
	args, err := command.ParseArgs(fs, args)
	if err != nil {
		return nil, "", err
	}
	switch {
	case len(args) != 1:
		return nil, "", command.Bad(fmt.Errorf("shrink: give one run directory, e.g. lockbreaker shrink store/latest (got %d arguments)", len(args)))
	case opts.confirm < 1 || opts.confirm > 100:
		return nil, "", command.Bad(fmt.Errorf("shrink: --confirm must be between 1 and 100, got %d", opts.confirm))
	case opts.budget.Std() < time.Second || opts.budget.Std() > 24*time.Hour:
		return nil, "", command.Bad(fmt.Errorf("shrink: --budget must be between 1s and 24h, got %s", opts.budget.Std()))
	case opts.results == "":
		return nil, "", command.Bad(fmt.Errorf("shrink: --results must name a directory, got an empty string"))
	}
	return opts, args[0], nil
}

func cmdShrink(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	opts, path, err := parseShrink(args)
	if err != nil {
		return 0, err
	}
	from, target, err := failingRun(path)
	if err != nil {
		return 0, command.Bad(fmt.Errorf("shrink: %w", err))
	}
	fmt.Fprintf(stdout, "shrinking %s: %s invalid\n", command.Escape(shrink.Command(from)), strings.Join(target, ", "))

	clusters := harness.NewClusters(from)
	defer clusters.Close(context.WithoutCancel(ctx))
	runner := harness.Runner{ResultsRoot: opts.results, Progress: io.Discard, Clusters: clusters, Trends: suite.StoreTrends}
	trial := func(ctx context.Context, s spec.Spec) (shrink.Outcome, error) {
		s.Test = from.Test + "-shrink"
		dir, summary, err := runner.Run(ctx, s)
		if dir == "" || ctx.Err() != nil || len(summary.Results) == 0 {
			return shrink.Outcome{}, fmt.Errorf("shrink: a trial run failed: %w", err)
		}
		return outcomeOf(dir, summary), nil
	}
	res, err := shrink.Search(ctx, from, target, trial, shrink.Options{Confirm: opts.confirm, Budget: opts.budget.Std(),
		RateRuns: shrinkRateRuns, Progress: stdout})
	printShrunk(stdout, res)
	if err != nil {
		return 0, err
	}
	if res.Failed == 0 {
		return command.ExitUnknown, nil
	}
	return command.ExitInvalid, nil
}

// failingRun reads the run directory at path: its spec, and the checkers that found it
// invalid (lock safety, data safety, fencing), or why it cannot be shrunk.
func failingRun(path string) (spec.Spec, []string, error) {
	dir, err := results.Resolve(path)
	if err != nil {
		return spec.Spec{}, nil, err
	}
	summary, setAside, err := results.ReadSummaryLenient(dir)
	switch {
	case err != nil:
		return spec.Spec{}, nil, err
	case len(setAside) > 0:
		return spec.Spec{}, nil, fmt.Errorf("%s is not this version's, which cannot read %s of it (lockbreaker check %s judges it again)",
			filepath.Join(dir, results.SummaryFile), strings.Join(setAside, ", "), dir)
	case summary.Verdict != checkers.Invalid:
		return spec.Spec{}, nil, fmt.Errorf("%s was %s, not invalid: there is no failure to shrink", dir, summary.Verdict)
	}
	s := spec.Default()
	if err := json.Unmarshal(summary.Spec, &s); err != nil {
		return spec.Spec{}, nil, fmt.Errorf("%s: its spec cannot be read: %w", dir, err)
	}
	s, err = harness.CheckedSpec(s)
	if err != nil {
		return spec.Spec{}, nil, fmt.Errorf("%s: its spec cannot run here: %w", dir, err)
	}
	var target []string
	for _, r := range summary.Results {
		if r.Verdict == checkers.Invalid && r.Property != checkers.PropertyMetric && r.Property != checkers.PropertyPrecondition {
			target = append(target, string(r.Checker))
		}
	}
	if len(target) == 0 {
		return spec.Spec{}, nil, fmt.Errorf("%s: no lock or data checker found it invalid: there is no failure to shrink", dir)
	}
	return s, target, nil
}

// outcomeOf is what a trial run found.
func outcomeOf(dir string, s results.Summary) shrink.Outcome {
	o := shrink.Outcome{Report: filepath.Join(dir, results.ReportFile)}
	for _, r := range s.Results {
		if r.Verdict != checkers.Invalid {
			continue
		}
		o.Invalid = append(o.Invalid, string(r.Checker))
		if v := r.FirstViolation; v != nil && (o.FirstViolation == nil || *v < *o.FirstViolation) {
			o.FirstViolation = v
		}
	}
	return o
}

func printShrunk(w io.Writer, res shrink.Result) {
	fmt.Fprintln(w)
	for _, st := range res.Steps {
		switch {
		case st.Skipped:
			fmt.Fprintf(w, "  %-22s not tried: the budget ran out\n", st.What)
		case st.Kept:
			fmt.Fprintf(w, "  %-22s kept (%d of %d failed)\n", st.What, st.Failed, st.Runs)
		default:
			fmt.Fprintf(w, "  %-22s not kept (%d of %d failed)\n", st.What, st.Failed, st.Runs)
		}
	}
	if res.BudgetSpent {
		fmt.Fprintln(w, "\nthe budget ran out: this is the smallest found so far")
	}
	fmt.Fprintf(w, "\nsmallest: %s\n", command.Escape(shrink.Command(res.Smallest)))
	if res.Runs > 0 {
		fmt.Fprintf(w, "it failed in %d of %d fresh seeds", res.Failed, res.Runs)
		if res.Failed > 0 {
			fmt.Fprintf(w, ", its first violation after %s (median)", res.MedianFirst.Round(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
	if res.Report != "" {
		fmt.Fprintf(w, "report: %s\n", command.Escape(res.Report))
	}
}

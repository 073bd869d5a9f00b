// Command lockbreaker breaks distributed locks on purpose and checks which ones keep data
// safe. See README.md for the commands; `lockbreaker help` lists them.
//
// Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input, 255 harness error.
// Every failure is one line on stderr, never a stack trace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
)

const (
	exitValid      = 0
	exitInvalid    = 1
	exitUnknown    = 2
	exitBadInput   = 254
	exitHarness    = 255
	defaultResults = "results"
)

const usage = `usage: lockbreaker COMMAND [flags]

commands:
  run      run one test (default: Kleppmann's paused holder on a single Redis)
  check    re-run the checkers on a saved run: lockbreaker check results/latest
  clean    remove every container and network lockbreaker left behind
  images   build the node image if it is missing
  worker   (internal) a lock client process started by run

exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 harness error
`

// badInput marks errors that are the user's input, not the harness's fault.
type badInput struct{ error }

func main() {
	harness.MaybeRunWorker()
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) (code int) {
	// A bug is still one line and exit 255 for the user; the run's own defers (heal,
	// teardown) have already run by the time the panic reaches here.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "lockbreaker: internal error: %v\n", p)
			code = exitHarness
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitBadInput
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "run":
		code, err = cmdRun(ctx, args[1:], stdout)
	case "check":
		code, err = cmdCheck(ctx, args[1:], stdout)
	case "clean":
		code, err = cmdClean(ctx, args[1:], stdout)
	case "images":
		code, err = cmdImages(ctx, args[1:], stdout)
	case "worker":
		// Reached only when started by hand: workers are started with harness.WorkerEnv set.
		err = harness.RunWorker(os.Stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitValid
	default:
		err = badInput{fmt.Errorf("unknown command %q (try: lockbreaker help)", args[0])}
	}
	if err == nil {
		return code
	}
	fmt.Fprintln(stderr, "lockbreaker: "+oneLine(err))
	var bad badInput
	var spec *harness.SpecError
	var corrupt *history.CorruptError
	if errors.As(err, &bad) || errors.As(err, &spec) || errors.As(err, &corrupt) {
		return exitBadInput
	}
	return exitHarness
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// newFlags makes a flag set whose parse errors are reported once, by realMain.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return badInput{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	if fs.NArg() > 0 {
		return badInput{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func cmdRun(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	spec := harness.DefaultSpec()
	fs := newFlags("run")
	fs.StringVar(&spec.System, "system", spec.System, "lock service: "+strings.Join(harness.Systems(), ", "))
	fs.StringVar(&spec.Client, "client", "", "lock client (default: the system's own)")
	nem := fs.String("nemesis", strings.Join(spec.Nemesis, ","), "faults, comma-separated, or none")
	fencing := fs.String("fencing", "off", "on or off: fencing tokens checked by the storage")
	fs.IntVar(&spec.Clients, "clients", spec.Clients, "number of lock clients")
	fs.IntVar(&spec.Nodes, "nodes", 0, "cluster size (default: the system's usual)")
	fs.Func("ttl", "lock lease, e.g. 2s", durationFlag(&spec.TTL))
	fs.Func("time-limit", "how long clients run", durationFlag(&spec.TimeLimit))
	fs.Int64Var(&spec.Seed, "seed", spec.Seed, "seed of the nemesis schedule")
	fs.Func("work", "time a holder spends between read and write", durationFlag(&spec.Work))
	fs.Func("pause", "length of a pause (default twice the ttl)", durationFlag(&spec.Pause))
	fs.Func("interval", "mean time between faults", durationFlag(&spec.Interval))
	fs.Func("clock-offset", "how far clock faults move a clock (default twice the ttl)", durationFlag(&spec.ClockOffset))
	fs.Float64Var(&spec.ClockRate, "clock-rate", spec.ClockRate, "how many times as fast clock-rate runs a clock")
	fs.StringVar(&spec.Key, "key", spec.Key, "lock key")
	fs.StringVar(&spec.Test, "test", "", "test name (default: derived from the flags)")
	root := fs.String("results", defaultResults, "results directory")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	switch *fencing {
	case "on":
		spec.Fencing = true
	case "off":
	default:
		return 0, badInput{fmt.Errorf("run: --fencing must be on or off, got %q", *fencing)}
	}
	spec.Nemesis = strings.Split(*nem, ",")

	runner := harness.Runner{ResultsRoot: *root, Progress: stdout}
	dir, summary, err := runner.Run(ctx, spec)
	if dir != "" && len(summary.Results) > 0 {
		printVerdicts(stdout, dir, summary)
	}
	if err != nil {
		return 0, err
	}
	return exitCode(summary.Overall()), nil
}

func durationFlag(d *harness.Duration) func(string) error {
	return func(s string) error {
		return d.UnmarshalJSON([]byte(`"` + s + `"`))
	}
}

func cmdCheck(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("check")
	if err := fs.Parse(args); err != nil {
		return 0, badInput{fmt.Errorf("check: %w", err)}
	}
	if fs.NArg() != 1 {
		return 0, badInput{errors.New("check: give one run directory, e.g. lockbreaker check results/latest")}
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
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, badInput{err}
	}
	summary.Results = nil
	// A check run again finds the note of the last one in the summary.
	if file.Note != "" && !slices.Contains(summary.Notes, file.Note) {
		summary.Notes = append(summary.Notes, file.Note)
	}
	summary, err = harness.Analyze(ctx, dir, file.Events, summary)
	if err != nil {
		return 0, err
	}
	printVerdicts(stdout, dir, summary)
	return exitCode(summary.Overall()), nil
}

func cmdClean(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parse(newFlags("clean"), args); err != nil {
		return 0, err
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	n, err := containers.Clean(ctx, "")
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "removed %d containers and networks\n", n)
	return exitValid, nil
}

func cmdImages(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parse(newFlags("images"), args); err != nil {
		return 0, err
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	ref, err := containers.EnsureImage(ctx, stdout)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "node image: %s\n", ref)
	return exitValid, nil
}

func exitCode(v checkers.Verdict) int {
	switch v {
	case checkers.Valid:
		return exitValid
	case checkers.Invalid:
		return exitInvalid
	}
	return exitUnknown
}

func printVerdicts(w io.Writer, dir string, s results.Summary) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range s.Results {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Checker, strings.ToUpper(string(r.Verdict)), r.Summary)
	}
	tw.Flush()
	for _, n := range s.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "  harness error: %s\n", s.Error)
	}
	fmt.Fprintf(w, "\n%s: %s\nreport: %s\n", s.Test, strings.ToUpper(string(s.Overall())), filepath.Join(dir, results.ReportFile))
}

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/hunt"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/shrink"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/suite"
)

// huntCommand is `lockbreaker hunt`: its help, and cmdHunt to run it.
var huntCommand = command.Command{
	Name:     "hunt",
	Synopsis: "look for a violation by many short trials whose faults steer toward the danger",
	Args:     "[run's flags] [--for CHECKERS] [--budget D] [--trials N] [--parallel N] [--random]",
	About: `Runs short trials of one test, one after another on one cluster (--parallel: that
many at once, each on a cluster of its own), each with a written schedule of the faults
--nemesis names (when each strikes, whom, for how long: run's --schedule), and stops at
the first violation of a checker --for names (awaiting the trials still running). Unless
it says, lease-safety: the lock's own fault, a client told it held the lock while another's
grant surely ran; a holder that outlived its lease (mutual-exclusion, and data-safety unfenced)
is what any long pause makes of any lease lock, fixed or not. A step may wait for a client
in a state of the lock's business and strike one of those, and a pause may hold on until
another client took the lock over. Each trial is scored by what it came near (hazards
made; of a fault on a client waiting for the lock or holding it, how far into a lease it
reached, whether another client was granted meanwhile or held the lock at its end; states
of the lock not met before); the next schedule is a mutation of one that came near, never
one tried before. --random draws every schedule blind instead, as a run's nemesis does:
the search it is measured against. A line per trial says its score and schedule.

On a violation, the schedule is made as small as still fails (each step taken away in
turn, kept away when a fresh trial still fails), and the hunt ends with what happened and
the run command that makes it again. Writes <results>/hunt-<test>/<time>/: hunt.json
(every trial's schedule and score), hunt.html (score and nearness over trials) and, whole,
the failing trial's run; the others' runs are removed once scored. Exit 1 on a violation,
2 when the budget ran out first (no violation found is no claim that there is none).
The faults it steers: ` + strings.Join(nemesis.Scripted(), ", ") + `.`,
	Flags: func() *flag.FlagSet {
		s := huntDefaults()
		fs, _ := huntFlags(&s)
		return fs
	},
	Examples: []string{
		"lockbreaker hunt --system etcd --client exec --client-cmd examples/known-bugs/etcdctl_lock.py --nemesis pause-client,pause-node",
		"lockbreaker hunt --system redis --nemesis pause-client --budget 10m --random",
	},
	Run: cmdHunt,
	Parse: func(args []string) error {
		_, _, err := parseHunt(args)
		return err
	},
}

type huntOptions struct {
	run      *runOptions
	budget   runspec.Duration
	trials   int
	parallel int
	random   bool
	want     []string // the checkers whose violation the hunt looks for
}

// huntTrialTime is a trial's time limit unless --time-limit says: a few leases.
const huntTrialTime = 8 * time.Second

func huntDefaults() harness.Spec {
	s := harness.DefaultSpec()
	s.TimeLimit = runspec.Duration(huntTrialTime)
	s.Nemesis = []string{history.PauseClient.Name}
	return s
}

func huntFlags(s *harness.Spec) (*flag.FlagSet, *huntOptions) {
	fs, run := runFlags(s, "hunt")
	opts := &huntOptions{run: run, budget: runspec.Duration(10 * time.Minute), trials: 1000, parallel: 1}
	fs.Var((*command.Duration)(&opts.budget), "budget", "how long the hunt may take; it ends at the first violation or here")
	fs.IntVar(&opts.trials, "trials", opts.trials, "how many trials the hunt may run")
	fs.IntVar(&opts.parallel, "parallel", opts.parallel, fmt.Sprintf("trials at once, 1 to %d, each on a cluster of its own; "+
		"more than one wants cores to spare, or their clients slow each other", maxParallel))
	fs.BoolVar(&opts.random, "random", false, "draw every schedule afresh, with no feedback: the random search a hunt is measured against")
	opts.want = []string{string(checkers.LeaseSafety)}
	fs.Func("for", "the checkers whose violation the hunt looks for, comma-separated (default lease-safety: the lock's own fault, "+
		"not a holder outliving its lease, which any long pause makes)", func(v string) error {
		opts.want = nil
		for _, name := range strings.Split(v, ",") {
			if !slices.Contains(huntable(), name) {
				return fmt.Errorf("no checker %s a hunt can look for; those it can: %s", quote.Short(name), strings.Join(huntable(), ", "))
			}
			opts.want = append(opts.want, name)
		}
		return nil
	})
	return fs, opts
}

// takes says what more of a step each of faults follows, as its nemesis says.
func takes(faults []string) map[string]hunt.Takes {
	takes := map[string]hunt.Takes{}
	for _, name := range faults {
		s, _ := nemesis.ScriptingOf(name)
		takes[name] = hunt.Takes{State: s.Clients, HoldOn: s.HoldsOn}
	}
	return takes
}

// aimOf is what a hunt for the checkers want looks for: the lock's own fault when it wants
// lease-safety alone.
func aimOf(want []string) hunt.Aim {
	if slices.Equal(want, []string{string(checkers.LeaseSafety)}) {
		return hunt.LockFault
	}
	return hunt.AnyViolation
}

// huntable are the checkers whose violation a hunt can look for: those of lock safety, data
// safety and fencing, not a metric or the precondition.
func huntable() []string {
	var names []string
	for _, c := range checkers.All() {
		if p := c.Property(); p == checkers.PropertyLockSafety || p == checkers.PropertyDataSafety || p == checkers.PropertyFencing {
			names = append(names, string(c.Name()))
		}
	}
	return names
}

// parseHunt makes hunt's base spec and options, starting nothing.
func parseHunt(args []string) (harness.Spec, *huntOptions, error) {
	s := huntDefaults()
	fs, opts := huntFlags(&s)
	if err := command.Parse(fs, args); err != nil {
		return s, nil, err
	}
	s, err := specOf(s, opts.run, "hunt")
	if err != nil {
		return s, nil, err
	}
	switch {
	case opts.budget <= 0 || opts.budget.Std() > 7*24*time.Hour:
		return s, nil, command.Bad(fmt.Errorf("hunt: --budget must be more than 0 and at most a week, got %s", opts.budget.Std()))
	case opts.trials < 1:
		return s, nil, command.Bad(fmt.Errorf("hunt: --trials must be at least 1, got %d", opts.trials))
	case opts.parallel < 1 || opts.parallel > maxParallel:
		return s, nil, command.Bad(fmt.Errorf("hunt: --parallel must be between 1 and %d, got %d", maxParallel, opts.parallel))
	case opts.parallel > 1 && s.NodesFile != "":
		return s, nil, command.Bad(errors.New("hunt: --parallel runs trials side by side, which one set of machines (--nodes-file) cannot"))
	case len(s.Schedule) > 0:
		return s, nil, command.Bad(errors.New("hunt: --schedule is what a hunt writes for each trial; give the faults with --nemesis"))
	case !history.Injecting(s.Nemesis):
		return s, nil, command.Bad(fmt.Errorf("hunt: --nemesis names the faults to hunt with (%s), not none", strings.Join(nemesis.Scripted(), ", ")))
	}
	for _, name := range s.Nemesis {
		if _, known := history.KindOf(name); known && !slices.Contains(nemesis.Scripted(), name) {
			return s, nil, command.Bad(fmt.Errorf("hunt: nemesis %s draws its own faults, which a hunt cannot steer; those it can: %s",
				name, strings.Join(nemesis.Scripted(), ", ")))
		}
	}
	return s, opts, nil
}

func cmdHunt(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	base, opts, err := parseHunt(args)
	if err != nil {
		return 0, err
	}
	checked, err := harness.CheckSpec(base)
	if err != nil {
		return 0, err
	}
	base = checked.Spec()
	base.StopEarly = true // a trial that failed is over a second later
	store, err := results.NewRun(opts.run.results, "hunt-"+base.Test, time.Now())
	if err != nil {
		return 0, err
	}
	clusters := harness.NewClusters(base)
	clusters.Keep = opts.parallel
	defer clusters.Close(context.WithoutCancel(ctx))
	trials := &huntTrials{runner: harness.Runner{ResultsRoot: store.Path("trials"), Progress: io.Discard, Clusters: clusters, Trends: suite.StoreTrends},
		want: opts.want, failed: map[int64]failedTrial{}}
	mode := "feedback"
	if opts.random {
		mode = "random search"
	}
	fmt.Fprintf(stdout, "hunting %s with %s (%s) for a violation of %s: at most %d trials of %s, in %s; in %s\n", command.Escape(base.Test),
		strings.Join(base.Nemesis, ","), mode, strings.Join(opts.want, ","), opts.trials, base.TimeLimit.Std(), opts.budget.Std(), command.Escape(store.Dir()))
	saved := hunt.Saved{Base: base, Faults: base.Nemesis, For: opts.want, Feedback: !opts.random, Seed: base.Seed}
	saved.Result, err = hunt.Search(ctx, base, hunt.NewSpace(base, base.Nemesis, takes(base.Nemesis), checked.Nodes(), aimOf(opts.want)), trials.run,
		hunt.Options{Feedback: !opts.random, Budget: opts.budget.Std(), Trials: opts.trials, Seed: base.Seed, Parallel: opts.parallel, Progress: stdout})
	if err != nil {
		return 0, errors.Join(err, hunt.Write(store.Dir(), saved))
	}
	found, ok := saved.FirstFound()
	if !ok {
		fmt.Fprintf(stdout, "\nno violation in %d trials (%s): the budget ran out, which is no claim that there is none\npage: %s\n",
			len(saved.Trials), saved.Took.Round(time.Second), command.Escape(store.Path(hunt.PageName)))
		return command.ExitUnknown, hunt.Write(store.Dir(), saved)
	}
	failing := base
	failing.Schedule, failing.Seed = found.Schedule, base.Seed+int64(found.N)
	fmt.Fprintf(stdout, "\na violation in trial %d, after %s; making its schedule smaller\n", found.N, found.At.Round(time.Second))
	smallest, err := hunt.Shrink(ctx, failing, trials.run, stdout)
	if err != nil {
		return 0, errors.Join(err, hunt.Write(store.Dir(), saved))
	}
	failing.Schedule, failing.StopEarly = smallest, false
	saved.Smallest, saved.Spec, saved.Command = smallest, &failing, shrink.Command(failing)
	last := trials.failed[failing.Seed] // the found trial's, or the last of its shrink's that failed
	saved.Failing, _ = filepath.Rel(store.Dir(), last.dir)
	command.PrintVerdicts(stdout, last.dir, last.summary)
	fmt.Fprintf(stdout, "\nrun it again: %s\npage: %s\n", command.Escape(saved.Command), command.Escape(store.Path(hunt.PageName)))
	return command.ExitInvalid, hunt.Write(store.Dir(), saved)
}

// huntTrials runs a hunt's trials, side by side when the hunt says: each a run of the
// harness, its directory removed once scored unless it found a violation of a checker the
// hunt looks for (want), which is kept whole.
type huntTrials struct {
	runner harness.Runner
	want   []string
	mu     sync.Mutex
	// failed are the runs that found a violation, by their spec's seed (a trial's, which
	// its shrink's trials share): the last of each.
	failed map[int64]failedTrial
}

// failedTrial is a run that found a violation: its directory and summary.
type failedTrial struct {
	dir     string
	summary results.Summary
}

func (h *huntTrials) run(ctx context.Context, s runspec.Spec) (hunt.Outcome, error) {
	dir, summary, err := h.runner.Run(ctx, s)
	if dir == "" || ctx.Err() != nil || len(summary.Results) == 0 {
		return hunt.Outcome{}, fmt.Errorf("a trial run failed: %w", err)
	}
	file, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	if err != nil {
		return hunt.Outcome{}, err
	}
	out := hunt.Outcome{Dir: dir, Events: file.Events}
	for _, name := range outcomeOf(dir, summary).Invalid {
		if slices.Contains(h.want, name) {
			out.Invalid = append(out.Invalid, name)
		}
	}
	if len(out.Invalid) == 0 {
		return out, os.RemoveAll(dir)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed[s.Seed] = failedTrial{dir, summary}
	return out, nil
}

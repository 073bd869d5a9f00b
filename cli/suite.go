package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/suite"
)

// suiteCommand is `lockbreaker suite`: its help, and cmdSuite to run it.
var suiteCommand = command.Command{
	Name:     "suite",
	Synopsis: "run a matrix of scenarios, each judged against its expected outcome",
	Args:     "[flags] NAME|FILE  |  suite merge [--results DIR] DIR...  |  suite compare OLD NEW",
	About: `Runs every cell of a suite (a scenario and the verdict each checker is expected to give)
once per seed, up to --parallel runs at once (each on a cluster and network of its own),
and judges each cell: a cell expecting a violation
must find it in at least its threshold of seeds (default 90 %); a cell expecting a
property to hold fails on any violation. Built-in suites: ` + strings.Join(suite.BuiltinNames(), ", ") + ` (kleppmann is the
design's expected-outcome table; smoke a few fast cells). FILE is a suite in YAML or
JSON (docs/suites.md). Writes suite.html (the matrix, linking every
run's report), suite.json and junit.xml (one test case per cell) into
<results>/suite-<name>/<timestamp>/, the runs under its runs/. Cells of one system
share a cluster where that is sound. Exit 0 when every cell met its expectation, 1 when
some did not, 2 when some could not say. The store's index.html shows each suite's cells
by run, with the flags suite compare prints.

suite merge DIR... joins the shards of one suite run (suite NAME --shard i/n; each DIR a
shard's suite directory, or a store holding just one) into one suite.html, suite.json
and junit.xml in <results>/suite-<name>/<time>/, every run copied under its runs/, each
cell judged again on its runs; its exit code is the merged suite's. Shards of different
suites, definitions or seeds, overlapping shards and shards that leave cells out are
refused with the reason (exit 254).

suite compare OLD NEW compares the newest suite run in NEW with the runs of its suite in
OLD that started before it (each a suite run's directory or a store, read from its own
files, so a store copied off a CI runner works): every cell's status in the last run that
could say and now, its detection rate and median time to the first violation, then the
flags: a regression (met the last time it could say, not met now), a violation of what
a cell expects to hold (with its seed and the lockbreaker run command that reruns it),
a drift (` + suite.DriftRule + `).
Exit 1 on a regression, 0 otherwise.`,
	Flags: func() *flag.FlagSet {
		fs, _ := suiteFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker suite smoke",
		"lockbreaker suite kleppmann --seeds 5 --shard 2/4",
		"lockbreaker suite --list kleppmann   # its cells and expectations",
		"lockbreaker suite my-lock.yaml --seeds 20",
		"lockbreaker suite merge shard-1/store shard-2/store shard-3/store shard-4/store --results store",
		"lockbreaker suite compare last-night/store store   # exit 1 on a regression",
	},
	Run:   cmdSuite,
	Parse: parseSuiteArgs,
}

// suiteOptions are suite's flags.
type suiteOptions struct {
	seeds, parallel  int
	seedOffset       int64
	shard, results   string
	list, runToLimit bool
	// nodesFile names the machines the cells' nodes run on, logged in to as login says,
	// their clocks moved as machineClock says.
	nodesFile, machineClock string
	login                   loginFlags
}

func suiteFlags() (*flag.FlagSet, *suiteOptions) {
	opts := &suiteOptions{}
	fs := command.NewFlags("suite")
	fs.IntVar(&opts.seeds, "seeds", 1, "runs per cell, with the cell's seed and the ones after it")
	fs.Int64Var(&opts.seedOffset, "seed-offset", 0, "move every cell's seeds this far from its own (a nightly exploring new ones)")
	fs.IntVar(&opts.parallel, "parallel", defaultParallel, fmt.Sprintf("runs at once, 1 to %d, each on a cluster of its own", maxParallel))
	fs.StringVar(&opts.shard, "shard", "1/1", "i/n: run only the i-th of n contiguous parts of the suite (one per CI runner)")
	fs.StringVar(&opts.results, "results", defaultResults, "directory the suite's directory (or the merged one) is made in")
	fs.BoolVar(&opts.list, "list", false, "list the suite's cells and their expectations, run nothing")
	fs.BoolVar(&opts.runToLimit, "run-to-limit", false, "run every cell to its time limit: none stops a second after its first violation, "+
		"as the cells that expect only violations do unless they say stop_early: false")
	fs.StringVar(&opts.nodesFile, "nodes-file", "", "run the cells' nodes on the machines this file names (docs/machines.md), one run at a time; "+
		"the cells whose system machines cannot take, or that the machines cannot serve as they are, are left out, each said")
	fs.StringVar(&opts.machineClock, "machine-clock", "", machineClockHelp)
	opts.login.add(fs)
	return fs, opts
}

// maxSeeds caps --seeds: a nightly wants tens, not millions.
const maxSeeds = 1000

// defaultParallel is suite's runs at once: see docs/suites.md, "Runs side by side", for
// what 2 and 3 did on a 2-core machine (and docs/measurements.md for 1). maxParallel is what one engine can hold: each run
// starts up to nine containers and a network of its own.
const (
	defaultParallel = 2
	maxParallel     = 8
)

func cmdSuite(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	if len(args) > 0 {
		switch args[0] {
		case "merge":
			return cmdSuiteMerge(args[1:], stdout)
		case "compare":
			return cmdSuiteCompare(args[1:], stdout)
		}
	}
	name, opts, shard, err := parseSuite(args)
	if err != nil {
		return 0, err
	}
	s, err := loadSuite(name)
	if err != nil {
		return 0, command.Bad(err)
	}
	if opts.list {
		fmt.Fprintf(stdout, "suite %s: %d cells, shard %s runs %d\n%s", command.Escape(s.Name), len(s.Cells), shard, len(shard.Of(s.Cells)), command.EscapeLines(suite.Describe(s)))
		return command.ExitValid, nil
	}
	var login machines.Login
	if opts.nodesFile != "" {
		if login, err = opts.login.login(); err != nil {
			return 0, err
		}
		if s, err = onMachines(ctx, s, opts.nodesFile, opts.machineClock, login, stdout); err != nil {
			return 0, err
		}
		opts.parallel = 1 // one set of machines
	}
	// A lock client's program that cannot start here is refused before the suite's
	// directory, or any run of it, exists.
	for _, c := range shard.Of(s.Cells) {
		if err := harness.CheckProgram(ctx, c.Spec); err != nil {
			return 0, err
		}
	}
	dir, res, err := suite.Run(ctx, s, suite.Options{Seeds: opts.seeds, SeedOffset: opts.seedOffset, Shard: shard, Root: opts.results,
		Parallel: opts.parallel, Progress: stdout, Live: command.IsTerminal(stdout), Runners: harnessRunners(login), CheckSpec: harness.CheckedSpec, RunToLimit: opts.runToLimit})
	if dir != "" {
		fmt.Fprint(stdout, "\n"+command.EscapeLines(suite.Summary(dir, res)))
	}
	if err != nil {
		return 0, err
	}
	return suiteExit(res.Status), nil
}

// parseSuiteArgs parses suite's arguments as cmdSuite does, running nothing.
func parseSuiteArgs(args []string) error {
	var err error
	switch {
	case len(args) > 0 && args[0] == "merge":
		_, _, err = parseSuiteMerge(args[1:])
	case len(args) > 0 && args[0] == "compare":
		_, err = parseSuiteCompare(args[1:])
	default:
		_, _, _, err = parseSuite(args)
	}
	return err
}

// parseSuite parses suite NAME|FILE's arguments: the suite's name or file, the flags and
// the shard to run. Flags may also follow the suite's name, as in "suite kleppmann --seeds 5".
func parseSuite(args []string) (string, *suiteOptions, suite.Shard, error) {
	fs, opts := suiteFlags()
	names, err := command.ParseArgs(fs, args)
	if err != nil {
		return "", nil, suite.Shard{}, err
	}
	var name string
	switch len(names) {
	case 0:
	case 1:
		name = names[0]
	default:
		return "", nil, suite.Shard{}, command.Bad(fmt.Errorf("suite: unexpected argument %q", names[1]))
	}
	if name == "" {
		return "", nil, suite.Shard{}, command.Bad(fmt.Errorf("suite: give one suite, a built-in (%s) or a YAML or JSON file", strings.Join(suite.BuiltinNames(), ", ")))
	}
	if opts.seeds < 1 || opts.seeds > maxSeeds {
		return "", nil, suite.Shard{}, command.Bad(fmt.Errorf("suite: --seeds must be between 1 and %d, got %d", maxSeeds, opts.seeds))
	}
	if opts.parallel < 1 || opts.parallel > maxParallel {
		return "", nil, suite.Shard{}, command.Bad(fmt.Errorf("suite: --parallel must be between 1 and %d, got %d", maxParallel, opts.parallel))
	}
	if opts.results == "" {
		return "", nil, suite.Shard{}, command.Bad(errors.New("suite: --results must name a directory, got an empty string"))
	}
	shard, err := suite.ParseShard(opts.shard)
	if err != nil {
		return "", nil, suite.Shard{}, command.Bad(err)
	}
	return name, opts, shard, nil
}

// parseSuiteMerge parses suite merge's arguments: the results root and the shards' directories.
func parseSuiteMerge(args []string) (string, []string, error) {
	fs := command.NewFlags("suite merge")
	root := fs.String("results", defaultResults, "directory the merged suite's directory is made in")
	dirs, err := command.ParseArgs(fs, args)
	if err != nil {
		return "", nil, err
	}
	if len(dirs) == 0 {
		return "", nil, command.Bad(errors.New("suite merge: give the directories of a suite run's shards (suite runs, or stores holding one each)"))
	}
	if *root == "" {
		return "", nil, command.Bad(errors.New("suite merge: --results must name a directory, got an empty string"))
	}
	return *root, dirs, nil
}

// parseSuiteCompare parses suite compare's arguments: OLD and NEW.
func parseSuiteCompare(args []string) ([]string, error) {
	dirs, err := command.ParseArgs(command.NewFlags("suite compare"), args)
	if err != nil {
		return nil, err
	}
	if len(dirs) != 2 {
		return nil, command.Bad(fmt.Errorf("suite compare: give OLD and NEW, each a suite run's directory or a store, got %d arguments", len(dirs)))
	}
	return dirs, nil
}

// cmdSuiteMerge joins the shards of one suite run into one matrix: suite merge DIR...
func cmdSuiteMerge(args []string, stdout io.Writer) (int, error) {
	root, dirs, err := parseSuiteMerge(args)
	if err != nil {
		return 0, err
	}
	dir, res, err := suite.MergeInto(root, dirs)
	var refused *suite.Error
	if errors.As(err, &refused) {
		return 0, command.Bad(fmt.Errorf("suite merge: %w", err))
	}
	if dir != "" {
		fmt.Fprint(stdout, command.EscapeLines(suite.Summary(dir, res)))
	}
	if err != nil {
		return 0, fmt.Errorf("suite merge: %w", err)
	}
	return suiteExit(res.Status), nil
}

// cmdSuiteCompare compares the newest suite run in NEW with the runs of its suite in OLD
// before it, and exits 1 on a regression: suite compare OLD NEW.
func cmdSuiteCompare(args []string, stdout io.Writer) (int, error) {
	dirs, err := parseSuiteCompare(args)
	if err != nil {
		return 0, err
	}
	olds, problems, err := suite.Find(dirs[0])
	if err != nil {
		return 0, command.Bad(fmt.Errorf("suite compare: OLD: %w", err))
	}
	news, newProblems, err := suite.Find(dirs[1])
	switch {
	case err != nil:
		return 0, command.Bad(fmt.Errorf("suite compare: NEW: %w", err))
	case len(news) == 0 && len(newProblems) > 0:
		return 0, command.Bad(fmt.Errorf("suite compare: NEW: %w", newProblems[0]))
	case len(news) == 0:
		return 0, command.Bad(fmt.Errorf("suite compare: NEW (%s) holds no suite run", dirs[1]))
	}
	comparisons := suite.CompareAll(olds, news)
	if len(comparisons) == 0 {
		return 0, command.Bad(fmt.Errorf("suite compare: OLD (%s) holds no run of suite %s from before NEW's",
			dirs[0], strings.Join(suite.Suites(news), " or ")))
	}
	// A suite.json that cannot be read is said first: it may be the run meant.
	for _, p := range problems {
		fmt.Fprintf(stdout, "note: OLD: %s\n", command.OneLine(p.Error()))
	}
	for _, p := range newProblems {
		fmt.Fprintf(stdout, "note: NEW: %s\n", command.OneLine(p.Error()))
	}
	code := command.ExitValid
	for i, c := range comparisons {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprint(stdout, command.EscapeLines(c.Text()))
		if regressions := c.Regressions(); len(regressions) > 0 {
			var cells []string
			for _, r := range regressions {
				cells = append(cells, r.Cell)
			}
			fmt.Fprintf(stdout, "REGRESSED: suite %s, %s\n", command.Escape(c.Now.Result.Suite), command.Escape(strings.Join(cells, ", ")))
			code = command.ExitInvalid
		}
	}
	for _, name := range suite.Suites(news) {
		if !slices.ContainsFunc(comparisons, func(c suite.Comparison) bool { return c.Now.Result.Suite == name }) {
			fmt.Fprintf(stdout, "note: OLD holds no run of suite %s from before NEW's\n", command.Escape(name))
		}
	}
	return code, nil
}

// suiteExit is a suite's exit code: 0 when every cell met its expectation, 1 when one
// did not, 2 when one could not say.
func suiteExit(s suite.Status) int {
	switch s {
	case suite.Met:
		return command.ExitValid
	case suite.Failed:
		return command.ExitInvalid
	}
	return command.ExitUnknown
}

// loadSuite is a built-in suite by name, or else a suite file.
func loadSuite(arg string) (suite.Suite, error) {
	s, ok, err := suite.Builtin(arg, harness.CheckedSpec)
	if ok {
		return s, err
	}
	if _, statErr := os.Stat(arg); statErr != nil {
		return suite.Suite{}, fmt.Errorf("suite: %s is neither a built-in suite (%s) nor a file", quote.Short(arg), strings.Join(suite.BuiltinNames(), ", "))
	}
	return suite.Load(arg, harness.CheckedSpec)
}

// harnessRunners runs a suite's specs on the harness, up to parallel at once, sharing
// clusters between runs where that is sound and keeping one idle cluster for each; the
// machines of a spec's nodes file are logged in to with login.
func harnessRunners(login machines.Login) suite.Runners {
	return func(specs []spec.Spec, root string, log io.Writer, parallel int) (suite.Runner, func(context.Context) error) {
		clusters := harness.NewClusters(specs...)
		clusters.Keep = parallel
		return harness.Runner{ResultsRoot: root, Progress: log, Clusters: clusters, Trends: suite.StoreTrends, Login: login}, clusters.Close
	}
}

// onMachines is s with every cell's nodes on the machines nodesFile names, their clocks
// moved as machineClock says, and without the cells they cannot serve (their system not on
// machines, or the machines lacking its packages, tools or rights: harness.CheckMachines),
// each said on progress; an error when none is left.
func onMachines(ctx context.Context, s suite.Suite, nodesFile, machineClock string, login machines.Login, progress io.Writer) (suite.Suite, error) {
	var kept []suite.Cell
	var first error
	for _, c := range s.Cells {
		c.Spec.NodesFile, c.Spec.MachineClock = nodesFile, machineClock
		if err := harness.CheckMachines(ctx, c.Spec, login); err != nil {
			fmt.Fprintf(progress, "left out on machines: %s: %s\n", command.Escape(c.Name), command.Escape(err.Error()))
			first = cmp.Or(first, err)
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		return s, fmt.Errorf("suite %s: no cell runs on machines (the first: %w)", s.Name, first)
	}
	s.Cells = kept
	return s, nil
}

// Package cli is the lockbreaker command line: run, suite, check, report, serve, clean,
// images, help, version and worker. Our binary (cmd/lockbreaker) and a user's own binary
// built with lockbreaker.Main run exactly this code, so both behave alike and a worker
// started from either finds the same lock clients. See README.md for the commands;
// `lockbreaker help` lists them.
//
// Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input, 255 harness error.
// Every failure is one line on stderr, never a stack trace; the CLI never decides a
// verdict itself, it prints what the harness and the checkers said.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/analysis"
	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/suite"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

const (
	exitValid    = 0
	exitInvalid  = 1
	exitUnknown  = 2
	exitBadInput = 254
	exitHarness  = 255
	// defaultResults is where runs land: not "results", the package's own folder, so
	// removing old runs never removes source.
	defaultResults = "store"
)

const exitCodes = "exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 harness error\n"

// command is one subcommand: how it runs and what its help says.
type command struct {
	name     string
	synopsis string // one line in the command list
	args     string // what the usage line shows after the name
	about    string
	// flags makes the command's flag set with its defaults; nil when it has none. Help
	// lists the flags from the same code the command parses with, so they cannot drift.
	flags    func() *flag.FlagSet
	examples []string
	run      func(ctx context.Context, args []string, stdout io.Writer) (int, error)
}

var commands = []command{
	{
		name:     "run",
		synopsis: "run one test (default: Kleppmann's paused holder on a single Redis)",
		args:     "[flags]",
		about: `Starts the system's containers, lets the lock clients and the nemesis loose for the
time limit, heals and tears everything down, then checks the history. Writes
<results>/<test>/<timestamp>/ and points <results>/latest at it. Needs Docker.`,
		flags: func() *flag.FlagSet {
			spec := harness.DefaultSpec()
			fs, _ := runFlags(&spec)
			return fs
		},
		examples: []string{
			"lockbreaker run",
			"lockbreaker run --system redis --nemesis pause-holder --fencing on",
			"lockbreaker run --system redis --nemesis none --clients 1 --work 0 --rate 0",
			"lockbreaker run --system redlock --nemesis kleppmann-clock --time-limit 10s",
			"lockbreaker run --system sentinel --nemesis failover --fencing on",
			"lockbreaker run --system redlock --nemesis kill-node --restart-delay-ttl",
			"lockbreaker run --system zookeeper --nemesis partition-holder --fencing on",
			"lockbreaker run --system redis --nemesis partition-holder --undirected",
			"lockbreaker run --system etcd --nemesis pause-holder --fencing on",
			"lockbreaker run --system postgres --client pg-advisory --nemesis partition-holder",
			"lockbreaker run --system postgres --client pg-lease --nemesis pause-holder --fencing on",
			"lockbreaker run --system redis --client exec --client-cmd 'python3 mylock.py'   # a lock in any language",
		},
		run: cmdRun,
	},
	{
		name:     "suite",
		synopsis: "run a matrix of scenarios, each judged against its expected outcome",
		args:     "[flags] NAME|FILE  |  suite merge [--results DIR] DIR...  |  suite compare OLD NEW",
		about: `Runs every cell of a suite (a scenario and the verdict each checker is expected to give)
once per seed, up to --parallel runs at once (each on a cluster and network of its own),
and judges each cell: a cell expecting a violation
must find it in at least its threshold of seeds (default 90 %); a cell expecting a
property to hold fails on any violation. Built-in suites: ` + strings.Join(suite.BuiltinNames(), ", ") + ` (kleppmann is the
design's expected-outcome table; smoke a few fast cells). FILE is a suite in YAML or
JSON (see README.md, "Test your own lock"). Writes suite.html (the matrix, linking every
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
		flags: func() *flag.FlagSet {
			fs, _ := suiteFlags()
			return fs
		},
		examples: []string{
			"lockbreaker suite smoke",
			"lockbreaker suite kleppmann --seeds 5 --shard 2/4",
			"lockbreaker suite --list kleppmann   # its cells and expectations",
			"lockbreaker suite my-lock.yaml --seeds 20",
			"lockbreaker suite merge shard-1/store shard-2/store shard-3/store shard-4/store --results store",
			"lockbreaker suite compare last-night/store store   # exit 1 on a regression",
		},
		run: cmdSuite,
	},
	{
		name:     "check",
		synopsis: "re-run the checkers on a saved run: lockbreaker check store/latest",
		args:     "[flags] RUN",
		about: `Re-runs every checker on a saved run's history and rewrites its results.json,
report.html and junit.xml. RUN is a run directory, a latest link, a test directory or a
results root (then its latest run). Only the history is judged: of a results.json another
version wrote, what this one cannot read is set aside (said on stderr). Needs no Docker.`,
		flags: func() *flag.FlagSet {
			fs, _, _, _ := checkFlags()
			return fs
		},
		examples: []string{
			"lockbreaker check store/latest",
			"lockbreaker check --timeout 10m store/redis-redis-pause-holder-nofence",
			"lockbreaker check store/redis-redis-pause-holder-nofence/20250101T120000Z",
		},
		run: cmdCheck,
	},
	{
		name:     "report",
		synopsis: "render a saved run's report again, without checking: lockbreaker report store/latest",
		args:     "RUN",
		about: `Renders report.html again from a saved run's results.json and history, checking
nothing (lockbreaker check re-judges), and rebuilds the store's index.html. RUN is a run
directory, a latest link, a test directory or a results root (then its latest run).`,
		examples: []string{"lockbreaker report store/latest"},
		run:      cmdReport,
	},
	{
		name:     "serve",
		synopsis: "serve the run store read-only over HTTP: its index, every report",
		args:     "[flags]",
		about: `Serves the run store, read-only, until interrupted: the index of every run at /, each
run's report and files below it, and nothing outside the store. Listens on loopback unless
--addr says otherwise.`,
		flags: func() *flag.FlagSet {
			fs, _ := serveFlags()
			return fs
		},
		examples: []string{"lockbreaker serve", "lockbreaker serve --addr 127.0.0.1:9000 --results /tmp/store"},
		run:      cmdServe,
	},
	{
		name:     "clean",
		synopsis: "remove the containers and networks of runs that died, e.g. killed with SIGKILL",
		args:     "[--run ID | --all]",
		about: `Removes the containers and networks labelled by lockbreaker whose run has died on this
host (killed with SIGKILL, a crash): their owner process is gone. Runs still going, such as
another suite or test beside this one, are left alone; --run removes one run's, live or
not, and --all every labelled container and network. Lock clients leave nothing for it: a
client's network namespace and address on the cluster network die with its process, and
an exec client's program with its worker.`,
		flags: func() *flag.FlagSet {
			fs, _, _ := cleanFlags()
			return fs
		},
		examples: []string{
			"lockbreaker clean",
			"lockbreaker clean --run 20260101T120000Z-4242-1",
			"lockbreaker clean --all",
			"docker ps -a --filter label=org.lockbreaker.project   # what clean --all removes",
		},
		run: cmdClean,
	},
	{
		name:     "images",
		synopsis: "build the node images that are missing",
		about: `Builds the node image (Debian with redis-server, zookeeper, libfaketime, iptables) and,
on it, the image of each system with packages of its own (etcd: etcd-server; postgres:
postgresql-15), unless an image with the current content hash exists; --system builds only
what that system's nodes run. run builds what its system needs before its first test, and
no more: a run of Redis never waits for etcd or PostgreSQL. The Debian mirror comes from the
host's apt sources, or from LOCKBREAKER_APT_MIRROR.`,
		examples: []string{
			"lockbreaker images",
			"lockbreaker images --system etcd",
			"LOCKBREAKER_APT_MIRROR=http://mirror.example/debian lockbreaker images",
		},
		run: cmdImages,
	},
	{
		name:     "version",
		synopsis: "print the version and the node image tag",
		about:    "Prints the module version, the commit it was built from when known, and the node image tag. Needs no Docker.",
		examples: []string{"lockbreaker version"},
		run:      cmdVersion,
	},
	{
		name:     "worker",
		synopsis: "(internal) a lock client process started by run",
		about:    "A lock client process: run starts one per client and talks to it over stdin and stdout.",
		run:      cmdWorker,
	},
}

func lookup(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// badInput marks errors that are the user's input, not the harness's fault.
type badInput struct{ error }

// Main runs the command in os.Args and exits with its code. A process the harness
// started as a worker runs the worker instead: workers are this same binary again.
func Main() {
	harness.MaybeRunWorker()
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) (code int) {
	// A bug is still one line and exit 255 for the user; the run's own defers (heal,
	// teardown) have already run by the time the panic reaches here.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintln(stderr, "lockbreaker: internal error: "+oneLine(fmt.Sprint(p)))
			code = exitHarness
		}
	}()
	if len(args) == 0 {
		fmt.Fprintln(stderr, "lockbreaker: no command given (try: lockbreaker help)")
		return exitBadInput
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if name := args[0]; name == "help" || name == "-h" || name == "--help" {
		err = cmdHelp(args[1:], stdout)
	} else if cmd, ok := lookup(name); !ok {
		err = badInput{fmt.Errorf("unknown command %s (try: lockbreaker help)", quote.Short(name))}
	} else if code, err = cmd.run(ctx, args[1:], stdout); errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, cmd)
		return exitValid
	}
	if err == nil {
		return code
	}
	fmt.Fprintln(stderr, "lockbreaker: "+oneLine(err.Error()))
	var bad badInput
	var spec *harness.SpecError
	var corrupt *history.CorruptError
	if errors.As(err, &bad) || errors.As(err, &spec) || errors.As(err, &corrupt) {
		return exitBadInput
	}
	return exitHarness
}

// oneLine is a message as one line for a terminal. Our messages quote values short; other
// packages' (flag's, encoding/json's) show them whole, however long, so those are
// shortened here.
func oneLine(s string) string { return escape(quote.ShortenAll(strings.ReplaceAll(s, "\n", "; "))) }

// escape makes text safe for a terminal: summaries, notes and names can come from a saved
// run anyone may have written, and an ESC sequence, \r or \b in them would rewrite what
// the user sees. Control and other non-printing runes and invalid UTF-8 become Go escapes.
func escape(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsPrint(r):
			b.WriteString(s[:n])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\r', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}

func cmdHelp(args []string, stdout io.Writer) error {
	switch {
	case len(args) > 1:
		return badInput{errors.New("help: give at most one command, e.g. lockbreaker help run")}
	case len(args) == 0 || args[0] == "help":
		printUsage(stdout)
		return nil
	}
	cmd, ok := lookup(args[0])
	if !ok {
		return badInput{fmt.Errorf("help: unknown command %s (try: lockbreaker help)", quote.Short(args[0]))}
	}
	printHelp(stdout, cmd)
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: lockbreaker COMMAND [flags]\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.synopsis)
	}
	fmt.Fprintf(tw, "  help\tlockbreaker help COMMAND (or lockbreaker COMMAND -h) explains one\n")
	tw.Flush()
	fmt.Fprint(w, "\n"+exitCodes)
}

// printHelp prints a command's usage: every flag with its default, and examples.
func printHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "usage: lockbreaker %s %s\n\n%s\n\nflags:\n", c.name, c.args, c.about)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if c.flags != nil {
		c.flags().VisitAll(func(f *flag.Flag) {
			kind, usage := flag.UnquoteUsage(f)
			if _, ok := f.Value.(*durationValue); ok {
				kind = "duration"
			}
			// A zero default is explained by the usage text itself ("0: twice the ttl").
			if d := f.DefValue; d != "" && d != "0" && d != "0s" {
				usage += " (default " + d + ")"
			}
			fmt.Fprintf(tw, "  --%s %s\t%s\n", f.Name, kind, usage)
		})
	}
	fmt.Fprintf(tw, "  -h, --help\tprint this help\n")
	tw.Flush()
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nexamples:\n  %s\n", strings.Join(c.examples, "\n  "))
	}
	fmt.Fprint(w, "\n"+exitCodes)
}

// newFlags makes a flag set whose parse errors are reported once, by realMain.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// isSet says whether the command line set the flag.
func isSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseFlags parses flags only. -h and --help come back as flag.ErrHelp itself, for
// realMain to print the command's help.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return badInput{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	return err
}

// parse parses flags and refuses any other argument.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badInput{fmt.Errorf("%s: unexpected argument %s", fs.Name(), quote.Short(fs.Arg(0)))}
	}
	return nil
}

// runOptions are run's flags that are not part of the spec.
type runOptions struct {
	nemesis, fencing, results, clientCmd string
}

// runFlags binds run's flags to spec, whose values are the defaults.
func runFlags(spec *harness.Spec) (*flag.FlagSet, *runOptions) {
	opts := &runOptions{}
	fs := newFlags("run")
	fs.StringVar(&spec.System, "system", spec.System, "lock service: "+strings.Join(system.Names(), ", "))
	fs.StringVar(&spec.Client, "client", spec.Client, "lock client: "+strings.Join(workloads.ClientNames(), ", ")+"; empty: the system's own")
	fs.StringVar(&opts.clientCmd, "client-cmd", shellwords.Join(spec.ClientCmd), "the program each lock client runs with --client exec, "+
		"in any language: JSON lines on stdin and stdout (docs/protocol.md); split into words as a shell would, without expanding anything")
	fs.StringVar(&opts.nemesis, "nemesis", strings.Join(spec.Nemesis, ","), "faults, comma-separated, or none: "+strings.Join(nemesis.Names(), ", "))
	fs.StringVar(&opts.fencing, "fencing", "off", "on or off: whether the storage checks fencing tokens")
	fs.IntVar(&spec.Clients, "clients", spec.Clients, "number of lock clients, one OS process each")
	fs.IntVar(&spec.Nodes, "nodes", spec.Nodes, "cluster size; 0: the system's usual (redis 1, redlock 5, sentinel 3, zookeeper 3, etcd 3, postgres 1)")
	fs.Var((*durationValue)(&spec.TTL), "ttl", "lock lease; for ZooKeeper the session timeout; for etcd the lease, "+
		"in whole seconds (rounded up) and at least 2s (etcd raises a shorter one); for pg-advisory about how soon the "+
		"server ends a silent client's session (its TCP keepalives, whole seconds, at least 2s); for pg-lease how long "+
		"a waiter watches an unrenewed lease row before taking it")
	fs.Var((*durationValue)(&spec.TimeLimit), "time-limit", "how long the clients run")
	fs.Int64Var(&spec.Seed, "seed", spec.Seed, "seed of the nemesis schedule")
	fs.Var((*durationValue)(&spec.Work), "work", "time a holder spends between reading and writing the register")
	fs.Float64Var(&spec.Rate, "rate", spec.Rate, "lock cycles (acquire, read, write, release) per second each client aims at; "+
		"a cycle waits at least --retry after the last; 0: as fast as the lock and the storage answer")
	fs.Var((*durationValue)(&spec.Retry), "retry", "pause between acquire attempts while the lock is busy")
	fs.Var((*durationValue)(&spec.Pause), "pause", "how long a fault lasts: a pause, a cut, a clock fault, a delay; 0: twice the ttl")
	fs.Var((*durationValue)(&spec.Interval), "interval", "mean time between faults")
	fs.Var((*durationValue)(&spec.ClockOffset), "clock-offset", "how far clock faults move a clock; 0: twice the ttl")
	fs.Float64Var(&spec.ClockRate, "clock-rate", spec.ClockRate, "how many times as fast the clock-rate fault runs a clock")
	fs.StringVar(&spec.Key, "key", spec.Key, "lock key, also the storage register's key")
	fs.StringVar(&spec.Persistence, "persistence", spec.Persistence, "what Redis servers keep on disk, so what a killed one remembers: "+
		"none, aof-everysec or aof-always; empty: none")
	fs.IntVar(&spec.MinReplicas, "min-replicas-to-write", spec.MinReplicas, "(sentinel) the primary refuses a write unless that many replicas acknowledged within --min-replicas-max-lag")
	fs.Var((*durationValue)(&spec.MinReplicasMaxLag), "min-replicas-max-lag", "(sentinel) whole seconds; 0: Redis's default, 10s")
	fs.Var((*durationValue)(&spec.RestartAfter), "restart-after", "how long a node killed by kill-node or failover stays down; 0: it is started again at once")
	fs.BoolVar(&spec.RestartDelayTTL, "restart-delay-ttl", spec.RestartDelayTTL, "keep a killed node down for at least one ttl (antirez's delayed restart)")
	fs.BoolVar(&spec.Undirected, "undirected", spec.Undirected, "targeted faults fire on their schedule and hope: no victim is kept inside its critical section "+
		"until the fault's hazard occurs, a failover waits for the Sentinels to notice the crash")
	fs.StringVar(&spec.Test, "test", spec.Test, "test name, the run directory's parent; empty: derived from the flags")
	fs.StringVar(&opts.results, "results", defaultResults, "directory the run directories are made in")
	return fs, opts
}

func cmdRun(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	spec := harness.DefaultSpec()
	fs, opts := runFlags(&spec)
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	switch opts.fencing {
	case "on":
		spec.Fencing = true
	case "off":
	default:
		return 0, badInput{fmt.Errorf("run: --fencing must be on or off, got %s", quote.Short(opts.fencing))}
	}
	if opts.results == "" {
		return 0, badInput{errors.New("run: --results must name a directory, got an empty string")}
	}
	spec.Nemesis = strings.Split(opts.nemesis, ",")
	cmdWords, err := shellwords.Split(opts.clientCmd)
	if err != nil {
		return 0, badInput{fmt.Errorf("run: --client-cmd: %w", err)}
	}
	spec.ClientCmd = cmdWords

	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(runGCPercent)
	}
	runner := harness.Runner{ResultsRoot: opts.results, Progress: stdout, Trends: suite.StoreTrends}
	dir, summary, err := runner.Run(ctx, spec)
	if dir != "" && len(summary.Results) > 0 {
		printVerdicts(stdout, dir, summary)
	}
	if err != nil {
		return 0, err
	}
	return exitCode(summary.Verdict), nil
}

// suiteOptions are suite's flags.
type suiteOptions struct {
	seeds, parallel int
	shard, results  string
	list            bool
}

func suiteFlags() (*flag.FlagSet, *suiteOptions) {
	opts := &suiteOptions{}
	fs := newFlags("suite")
	fs.IntVar(&opts.seeds, "seeds", 1, "runs per cell, with the cell's seed and the ones after it")
	fs.IntVar(&opts.parallel, "parallel", defaultParallel, fmt.Sprintf("runs at once, 1 to %d, each on a cluster of its own", maxParallel))
	fs.StringVar(&opts.shard, "shard", "1/1", "i/n: run only the i-th of n contiguous parts of the suite (one per CI runner)")
	fs.StringVar(&opts.results, "results", defaultResults, "directory the suite's directory (or the merged one) is made in")
	fs.BoolVar(&opts.list, "list", false, "list the suite's cells and their expectations, run nothing")
	return fs, opts
}

// maxSeeds caps --seeds: a nightly wants tens, not millions.
const maxSeeds = 1000

// defaultParallel is suite's runs at once: see README.md, "Runs side by side", for what
// 1, 2 and 3 did on a 2-core machine. maxParallel is what one engine can hold: each run
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
	fs, opts := suiteFlags()
	// Flags may also follow the suite's name, as in "suite kleppmann --seeds 5".
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return 0, err
	}
	var name string
	switch len(names) {
	case 0:
	case 1:
		name = names[0]
	default:
		return 0, badInput{fmt.Errorf("suite: unexpected argument %q", names[1])}
	}
	if name == "" {
		return 0, badInput{fmt.Errorf("suite: give one suite, a built-in (%s) or a YAML or JSON file", strings.Join(suite.BuiltinNames(), ", "))}
	}
	if opts.seeds < 1 || opts.seeds > maxSeeds {
		return 0, badInput{fmt.Errorf("suite: --seeds must be between 1 and %d, got %d", maxSeeds, opts.seeds)}
	}
	if opts.parallel < 1 || opts.parallel > maxParallel {
		return 0, badInput{fmt.Errorf("suite: --parallel must be between 1 and %d, got %d", maxParallel, opts.parallel)}
	}
	if opts.results == "" {
		return 0, badInput{errors.New("suite: --results must name a directory, got an empty string")}
	}
	shard, err := suite.ParseShard(opts.shard)
	if err != nil {
		return 0, badInput{err}
	}
	s, err := loadSuite(name)
	if err != nil {
		return 0, badInput{err}
	}
	if opts.list {
		fmt.Fprintf(stdout, "suite %s: %d cells, shard %s runs %d\n%s", escape(s.Name), len(s.Cells), shard, len(shard.Of(s.Cells)), escapeLines(suite.Describe(s)))
		return exitValid, nil
	}
	dir, res, err := suite.Run(ctx, s, suite.Options{Seeds: opts.seeds, Shard: shard, Root: opts.results,
		Parallel: opts.parallel, Progress: stdout, Live: isTerminal(stdout)})
	if dir != "" {
		fmt.Fprint(stdout, "\n"+escapeLines(suite.Summary(dir, res)))
	}
	if err != nil {
		return 0, err
	}
	return suiteExit(res.Status), nil
}

// cmdSuiteMerge joins the shards of one suite run into one matrix: suite merge DIR...
func cmdSuiteMerge(args []string, stdout io.Writer) (int, error) {
	fs := newFlags("suite merge")
	root := fs.String("results", defaultResults, "directory the merged suite's directory is made in")
	dirs, err := parseInterleaved(fs, args)
	if err != nil {
		return 0, err
	}
	if len(dirs) == 0 {
		return 0, badInput{errors.New("suite merge: give the directories of a suite run's shards (suite runs, or stores holding one each)")}
	}
	if *root == "" {
		return 0, badInput{errors.New("suite merge: --results must name a directory, got an empty string")}
	}
	dir, res, err := suite.MergeInto(*root, dirs)
	var refused *suite.Error
	if errors.As(err, &refused) {
		return 0, badInput{fmt.Errorf("suite merge: %w", err)}
	}
	if dir != "" {
		fmt.Fprint(stdout, escapeLines(suite.Summary(dir, res)))
	}
	if err != nil {
		return 0, fmt.Errorf("suite merge: %w", err)
	}
	return suiteExit(res.Status), nil
}

// cmdSuiteCompare compares the newest suite run in NEW with the runs of its suite in OLD
// before it, and exits 1 on a regression: suite compare OLD NEW.
func cmdSuiteCompare(args []string, stdout io.Writer) (int, error) {
	dirs, err := parseInterleaved(newFlags("suite compare"), args)
	if err != nil {
		return 0, err
	}
	if len(dirs) != 2 {
		return 0, badInput{fmt.Errorf("suite compare: give OLD and NEW, each a suite run's directory or a store, got %d arguments", len(dirs))}
	}
	olds, problems, err := suite.Find(dirs[0])
	if err != nil {
		return 0, badInput{fmt.Errorf("suite compare: OLD: %w", err)}
	}
	news, newProblems, err := suite.Find(dirs[1])
	switch {
	case err != nil:
		return 0, badInput{fmt.Errorf("suite compare: NEW: %w", err)}
	case len(news) == 0 && len(newProblems) > 0:
		return 0, badInput{fmt.Errorf("suite compare: NEW: %w", newProblems[0])}
	case len(news) == 0:
		return 0, badInput{fmt.Errorf("suite compare: NEW (%s) holds no suite run", dirs[1])}
	}
	comparisons := suite.CompareAll(olds, news)
	if len(comparisons) == 0 {
		return 0, badInput{fmt.Errorf("suite compare: OLD (%s) holds no run of suite %s from before NEW's",
			dirs[0], strings.Join(suite.Suites(news), " or "))}
	}
	// A suite.json that cannot be read is said first: it may be the run meant.
	for _, p := range problems {
		fmt.Fprintf(stdout, "note: OLD: %s\n", oneLine(p.Error()))
	}
	for _, p := range newProblems {
		fmt.Fprintf(stdout, "note: NEW: %s\n", oneLine(p.Error()))
	}
	code := exitValid
	for i, c := range comparisons {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprint(stdout, escapeLines(c.Text()))
		if regressions := c.Regressions(); len(regressions) > 0 {
			var cells []string
			for _, r := range regressions {
				cells = append(cells, r.Cell)
			}
			fmt.Fprintf(stdout, "REGRESSED: suite %s, %s\n", escape(c.Now.Result.Suite), escape(strings.Join(cells, ", ")))
			code = exitInvalid
		}
	}
	for _, name := range suite.Suites(news) {
		if !slices.ContainsFunc(comparisons, func(c suite.Comparison) bool { return c.Now.Result.Suite == name }) {
			fmt.Fprintf(stdout, "note: OLD holds no run of suite %s from before NEW's\n", escape(name))
		}
	}
	return code, nil
}

// suiteExit is a suite's exit code: 0 when every cell met its expectation, 1 when one
// did not, 2 when one could not say.
func suiteExit(s suite.Status) int {
	switch s {
	case suite.Met:
		return exitValid
	case suite.Failed:
		return exitInvalid
	}
	return exitUnknown
}

// parseInterleaved parses flags wherever they stand among the arguments, as in "suite
// merge a b --results x", and returns the other arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
}

// loadSuite is a built-in suite by name, or else a suite file.
func loadSuite(arg string) (suite.Suite, error) {
	s, ok, err := suite.Builtin(arg)
	if ok {
		return s, err
	}
	if _, statErr := os.Stat(arg); statErr != nil {
		return suite.Suite{}, fmt.Errorf("suite: %s is neither a built-in suite (%s) nor a file", quote.Short(arg), strings.Join(suite.BuiltinNames(), ", "))
	}
	return suite.Load(arg)
}

// escapeLines escapes text of several lines line by line (escape).
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = escape(l)
	}
	return strings.Join(lines, "\n")
}

// isTerminal says whether w is a terminal, where a progress line may rewrite itself.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// durationValue is a flag holding a harness.Duration, so help can show its default as 2s.
type durationValue harness.Duration

func (d *durationValue) String() string { return harness.Duration(*d).Std().String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = durationValue(v)
	return err
}

// maxCheckTimeout caps check --timeout like run's other spans: a search longer than a day
// is a typo, not a plan.
const maxCheckTimeout = 24 * time.Hour

// checkMemoryLimit is the soft limit (debug.SetMemoryLimit) check sets on its heap unless
// GOMEMLIMIT sets one: a long history's searches would otherwise let the heap grow to
// twice what they hold (3 GB at a million operations). Near it the collector works harder;
// past it nothing fails.
const checkMemoryLimit = 2400 << 20

// checkGCPercent is check's GOGC unless GOGC sets one: collecting a streamed history's
// garbage is a fifth of its work, and letting the heap grow twice as far between
// collections takes about 15 % less CPU for a third more memory, which checkMemoryLimit
// still bounds.
const checkGCPercent = 200

// runGCPercent is run's GOGC unless GOGC sets one. A run's peak of memory is the judging
// of its history after it (recording holds about 30 MB, however long), on the machine the
// system's containers share: collecting twice as often as Go's default judged a
// 15-minute full-rate run (10.8 M operations) in 234 MB rather than 280, 16 % slower.
const runGCPercent = 50

// checkFlags makes check's flag set; timeout holds --timeout, maxOps --max-ops, whole --whole.
func checkFlags() (fs *flag.FlagSet, timeout *harness.Duration, maxOps *int, whole *bool) {
	timeout = new(harness.Duration)
	*timeout = harness.Duration(analysis.DefaultTimeout)
	fs = newFlags("check")
	fs.Var((*durationValue)(timeout), "timeout", "how long a checker may search (porcupine) before its verdict is unknown")
	maxOps = fs.Int("max-ops", checkers.DefaultLimits.MaxOps,
		"the memory limit: the most operations held at once while the history has no safe place to cut (about 2.5 KB each); past it the verdicts are unknown")
	whole = fs.Bool("whole", false,
		"judge the history as one piece, never cut: the reference the pieces' verdicts are tested against, in memory that grows with the history (about 2.5 KB an operation)")
	return fs, timeout, maxOps, whole
}

func cmdCheck(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	fs, timeout, maxOps, whole := checkFlags()
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	if *whole && isSet(fs, "max-ops") {
		return 0, badInput{errors.New("check: --whole holds the whole history: --max-ops does not go with it")}
	}
	if t := timeout.Std(); t < time.Millisecond || t > maxCheckTimeout {
		return 0, badInput{fmt.Errorf("check: --timeout must be between 1ms and 24h, got %s", t)}
	}
	if *maxOps < 1 {
		return 0, badInput{fmt.Errorf("check: --max-ops must be at least 1, got %d", *maxOps)}
	}
	limits := checkers.DefaultLimits
	limits.MaxOps = *maxOps
	if *whole {
		limits.PieceOps, limits.MaxOps, limits.LongOps = math.MaxInt, math.MaxInt, math.MaxInt
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(checkMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(checkGCPercent)
	}
	run, err := openRun(fs)
	if err != nil {
		return 0, err
	}
	dir, summary := run.dir, run.summary
	// The history is what is judged: a results.json of another version only loses what it
	// said (check writes it anew), on stderr so that stdout stays the verdicts.
	if len(run.setAside) > 0 {
		fmt.Fprintf(os.Stderr, "lockbreaker: check: %s is not this version's; set aside: %s\n",
			escape(filepath.Join(dir, results.SummaryFile)), escape(strings.Join(run.setAside, ", ")))
	}
	summary, err = analysis.File(ctx, dir, filepath.Join(dir, results.HistoryFile), summary, timeout.Std(), limits)
	if len(summary.Results) == 0 { // the history could not be read
		return 0, err
	}
	// The verdicts stand even when the files cannot be written (a read-only run directory).
	if len(summary.Results) > 0 {
		printVerdicts(stdout, dir, summary)
	}
	if err = errors.Join(err, results.RefreshIndex(dir, suite.StoreTrends)); err != nil {
		return 0, fmt.Errorf("check: could not write the results files in %s: %w", dir, err)
	}
	return exitCode(summary.Verdict), nil
}

// cleanFlags makes clean's flag set; run holds --run, all --all.
func cleanFlags() (fs *flag.FlagSet, run *string, all *bool) {
	fs = newFlags("clean")
	run = fs.String("run", "", "remove what run ID left, live or not (its containers' "+containers.LabelRun+" label, <time>-<pid>-<n>)")
	all = fs.Bool("all", false, "remove every labelled container and network, also of runs still going")
	return fs, run, all
}

func cmdClean(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	fs, run, all := cleanFlags()
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	var n int
	var err error
	switch {
	case *all && *run != "":
		return 0, badInput{errors.New("clean: --run and --all exclude each other")}
	case *all || *run != "":
		n, err = containers.Clean(ctx, *run)
	default:
		n, err = containers.CleanStale(ctx)
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "removed %d containers and networks\n", n)
	return exitValid, nil
}

func cmdImages(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("images")
	only := fs.String("system", "", "build only the image this system's nodes run")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	names := system.Names()
	if *only != "" {
		if _, err := system.Lookup(*only); err != nil {
			return 0, badInput{fmt.Errorf("images: %w", err)}
		}
		names = []string{*only}
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	ref, err := containers.EnsureImage(ctx, stdout)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "node image: %s\n", ref)
	for _, name := range names {
		sys, _ := system.Lookup(name)
		if sys.Container == nil || sys.Container.Image == nil {
			continue
		}
		ref, err := containers.EnsureSystemImage(ctx, name, stdout)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(stdout, "%s image: %s\n", name, ref)
	}
	return exitValid, nil
}

func cmdVersion(_ context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parse(newFlags("version"), args); err != nil {
		return 0, err
	}
	version := "(no build information)"
	if info, ok := debug.ReadBuildInfo(); ok {
		version = describeBuild(info)
	}
	fmt.Fprintf(stdout, "lockbreaker %s\nnode image %s\n", version, containers.ImageRef())
	return exitValid, nil
}

// describeBuild is the module version ("(devel)" from a checkout), with the commit and Go
// version when the build recorded them.
func describeBuild(info *debug.BuildInfo) string {
	v := info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += ", commit " + rev
		if modified == "true" {
			v += " with local changes"
		}
	}
	return v + ", built with " + info.GoVersion
}

// cmdWorker is reached only when started by hand: workers are started with
// harness.WorkerEnv set and never get here.
func cmdWorker(_ context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parse(newFlags("worker"), args); err != nil {
		return 0, err
	}
	return 0, harness.RunWorker(os.Stdin, stdout)
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
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", escape(r.Checker), escape(strings.ToUpper(string(r.Verdict))), escape(r.Summary))
	}
	tw.Flush()
	for _, n := range s.Notes {
		fmt.Fprintf(w, "  note: %s\n", escape(n))
	}
	if s.Error != "" {
		fmt.Fprintf(w, "  harness error: %s\n", oneLine(s.Error))
	}
	fmt.Fprintf(w, "\n%s: %s\nreport: %s\n", escape(s.Test), escape(strings.ToUpper(string(s.Verdict))), escape(filepath.Join(dir, results.ReportFile)))
}

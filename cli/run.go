package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nemesis"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/suite"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// runCommand is `lockbreaker run`: its help, and cmdRun to run it.
var runCommand = command.Command{
	Name:     "run",
	Synopsis: "run one test (default: Kleppmann's paused holder on a single Redis)",
	Args:     "[flags]",
	About: `Starts the system's containers, lets the lock clients and the nemesis loose for the
time limit, heals and tears everything down, then checks the history. Writes
<results>/<test>/<timestamp>/ and points <results>/latest at it. Needs Docker, but
for the locks the harness serves itself (--system ` + inProcessSystems() + `) and runs on
machines (--nodes-file: ` + strings.Join(machines.Systems, ", ") + ` and a system file's
with a machine key, under every fault; docs/machines.md).

` + nemesisHelp(),
	Flags: func() *flag.FlagSet {
		spec := harness.DefaultSpec()
		fs, _ := runFlags(&spec, "run")
		return fs
	},
	Examples: []string{
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
		"lockbreaker run --system-file examples/own-service/redis.yaml --nemesis pause-holder   # your own lock service",
	},
	Run: cmdRun,
	Parse: func(args []string) error {
		_, _, err := parseRun(args)
		return err
	},
}

// runOptions are run's flags that are not part of the spec.
type runOptions struct {
	nemesis, fencing, results, clientCmd, schedule string
	// login is how the machines of --nodes-file are logged in to.
	login loginFlags
	// noInstall takes the machines' packages as installed.
	noInstall bool
}

// runFlags binds run's flags to spec, whose values are the defaults, as flags of command
// cmd (run, or hunt, which takes them too).
func runFlags(spec *harness.Spec, cmd string) (*flag.FlagSet, *runOptions) {
	opts := &runOptions{}
	fs := command.NewFlags(cmd)
	fs.StringVar(&spec.System, "system", spec.System, "lock service: "+strings.Join(system.Names(), ", "))
	fs.StringVar(&spec.SystemFile, "system-file", spec.SystemFile, "a file describing your own lock service (its name, nodes, command, image...; "+
		"docs/your-own.md), tested as a built-in system is; it replaces --system")
	fs.StringVar(&spec.Client, "client", spec.Client, "lock client, or several comma-separated that share the slots on one lock (a,b: slot 1 a, slot 2 b, slot 3 a...): "+
		strings.Join(workloads.ClientNames(), ", ")+"; empty: the system's own")
	fs.StringVar(&opts.clientCmd, "client-cmd", shellwords.Join(spec.ClientCmd), "the program each lock client runs with --client exec, "+
		"in any language: JSON lines on stdin and stdout (docs/protocol.md); split into words as a shell would, without expanding anything")
	fs.StringVar(&opts.nemesis, "nemesis", strings.Join(spec.Nemesis, ","), "faults, comma-separated, or none: "+strings.Join(nemesis.Names(), ", "))
	fs.StringVar(&opts.fencing, "fencing", "off", "on or off: whether the storage checks fencing tokens")
	fs.StringVar(&spec.NodesFile, "nodes-file", spec.NodesFile, "run the nodes on the machines this file names (one host or user@host:port a line), "+
		"logged in to over SSH, instead of in containers (docs/machines.md)")
	fs.StringVar(&spec.MachineClock, "machine-clock", spec.MachineClock, machineClockHelp)
	opts.login.add(fs)
	fs.BoolVar(&opts.noInstall, "no-install", false, noInstallHelp)
	fs.IntVar(&spec.Clients, "clients", spec.Clients, "number of lock clients, one OS process each")
	fs.IntVar(&spec.Nodes, "nodes", spec.Nodes, "cluster size; 0: the system's usual ("+usualSizes()+")")
	fs.Var((*command.Duration)(&spec.TTL), "ttl", "lock lease; for ZooKeeper the session timeout; for etcd the lease, "+
		"in whole seconds (rounded up) and at least 2s (etcd raises a shorter one); for pg-advisory about how soon the "+
		"server ends a silent client's session (its TCP keepalives, whole seconds, at least 2s); for pg-lease how long "+
		"a waiter watches an unrenewed lease row before taking it")
	fs.Var((*command.Duration)(&spec.TimeLimit), "time-limit", "how long the clients run")
	fs.Int64Var(&spec.Seed, "seed", spec.Seed, "seed of the nemesis schedule")
	fs.Var((*command.Duration)(&spec.Work), "work", "time a holder spends between reading and writing the register: asleep, or CPU work where a fault starves holders of CPU")
	fs.Var((*command.Duration)(&spec.ExtendEvery), "extend-every", "holders extend their lease after each this much of their work and once more just "+
		"before they write, and do not write when an extend fails; under the ttl; 0: holders do not extend")
	fs.Float64Var(&spec.Rate, "rate", spec.Rate, "lock cycles (acquire, read, write, release) per second each client aims at; "+
		"a cycle waits at least --retry after the last; 0: as fast as the lock and the storage answer")
	fs.Var((*command.Duration)(&spec.Retry), "retry", "pause between acquire attempts while the lock is busy")
	fs.Var((*command.Duration)(&spec.Pause), "pause", "how long a fault lasts: a pause, a cut, a clock fault, a delay; 0: twice the ttl")
	fs.Var((*command.Duration)(&spec.Interval), "interval", "mean time between faults")
	fs.StringVar(&spec.LinkNode, "link-node", "", "the faults on the clients' links strike only each client's link to this node (n1, n2...); \"\": every link")
	fs.BoolVar(&spec.LinkAnswers, "link-answers", false, "the faults on the clients' links strike what comes back to the client instead of what it sends")
	fs.Var((*command.Duration)(&spec.ClockOffset), "clock-offset", "how far clock faults move a clock; 0: twice the ttl")
	fs.Float64Var(&spec.ClockRate, "clock-rate", spec.ClockRate, "how many times as fast the clock-rate fault runs a clock")
	fs.StringVar(&spec.Key, "key", spec.Key, "lock key, also the storage register's key")
	fs.StringVar(&spec.Persistence, "persistence", spec.Persistence, "what the nodes keep on disk and when they sync it, so what a killed node, "+
		"or one that lost its power, remembers ("+persistenceChoices()+"); empty: the system's own default, the first")
	fs.StringVar(&spec.Pooler, "pooler", spec.Pooler, "(postgres) a connection pooler between every client and the server: "+
		strings.Join(system.PoolerModes(), " or ")+" (PgBouncer in the node, in that pool mode); empty: none")
	fs.IntVar(&spec.MinReplicas, "min-replicas-to-write", spec.MinReplicas, "(sentinel) the primary refuses a write unless that many replicas acknowledged within --min-replicas-max-lag")
	fs.Var((*command.Duration)(&spec.MinReplicasMaxLag), "min-replicas-max-lag", "(sentinel) whole seconds; 0: Redis's default, 10s")
	fs.Var((*command.Duration)(&spec.RestartAfter), "restart-after", "how long a node killed by kill-node or failover stays down; 0: it is started again at once")
	fs.BoolVar(&spec.RestartDelayTTL, "restart-delay-ttl", spec.RestartDelayTTL, "keep a killed node down for at least one ttl (antirez's delayed restart)")
	fs.StringVar(&spec.Victims, "victims", spec.Victims, "which nodes kill-node and power-loss strike under a held lock: "+
		strings.Join(runspec.Victims, ", ")+" (holder: as many of the holder's nodes as another client needs); empty: holder")
	fs.BoolVar(&spec.Undirected, "undirected", spec.Undirected, "targeted faults fire on their schedule and hope: no victim is kept inside its critical section "+
		"until the fault's hazard occurs, a failover waits for the Sentinels to notice the crash")
	fs.IntVar(&spec.Faults, "faults", spec.Faults, "stop the nemesis once this many of its faults have begun (a round under way ends as it would); 0: no bound")
	fs.StringVar(&opts.schedule, "schedule", "", "when, on whom and how long the nemeses strike, instead of their seeded draws: steps FAULT@AT/TARGET/FOR, "+
		"comma-separated (pause-client@1.2s/3/2.5s: the fourth client, 1.2s after the nemesis began, for 2.5s), as a hunt writes them; "+
		"/STATE after a step waits for a client in it (idle, waiting, holding, extending) and targets one of those, /until-takeover holds a pause on until another client took the lock over; empty: drawn from --seed")
	fs.BoolVar(&spec.StopEarly, "stop-at-first-violation", spec.StopEarly, fmt.Sprintf("end the run %s after two clients are first seen holding the lock at once, "+
		"rather than at --time-limit (which then bounds it: run until it breaks, at most that long); the whole history is judged as always", runspec.StopGrace))
	fs.StringVar(&spec.Test, "test", spec.Test, "test name, the run directory's parent; empty: derived from the flags")
	fs.StringVar(&opts.results, "results", defaultResults, "directory the run directories are made in")
	return fs, opts
}

// runGCPercent is run's GOGC unless GOGC sets one. A run's peak of memory is the judging
// of its history after it (recording holds about 30 MB, however long), on the machine the
// system's containers share: collecting twice as often as Go's default judged a
// 15-minute full-rate run (10.8 M operations) in 234 MB rather than 280, 16 % slower.
const runGCPercent = 50

// parseRun makes run's spec and results root from its arguments, starting nothing; the
// harness validates the spec itself (Normalize) when it runs it.
func parseRun(args []string) (harness.Spec, *runOptions, error) {
	spec := harness.DefaultSpec()
	fs, opts := runFlags(&spec, "run")
	if err := command.Parse(fs, args); err != nil {
		return spec, nil, err
	}
	spec, err := specOf(spec, opts, "run")
	return spec, opts, err
}

// specOf is spec with what run's flags (opts) say of it beside their bound fields, or the
// flag that is wrong, named as command cmd's.
func specOf(spec harness.Spec, opts *runOptions, cmd string) (harness.Spec, error) {
	switch opts.fencing {
	case "on":
		spec.Fencing = true
	case "off":
	default:
		return spec, command.Bad(fmt.Errorf("%s: --fencing must be on or off, got %s", cmd, quote.Short(opts.fencing)))
	}
	if opts.results == "" {
		return spec, command.Bad(fmt.Errorf("%s: --results must name a directory, got an empty string", cmd))
	}
	spec.Nemesis = strings.Split(opts.nemesis, ",")
	cmdWords, err := shellwords.Split(opts.clientCmd)
	if err != nil {
		return spec, command.Bad(fmt.Errorf("%s: --client-cmd: %w", cmd, err))
	}
	spec.ClientCmd = cmdWords
	if opts.schedule != "" {
		if spec.Schedule, err = runspec.ParseSchedule(opts.schedule); err != nil {
			return spec, command.Bad(fmt.Errorf("%s: %w", cmd, err))
		}
	}
	return spec, nil
}

func cmdRun(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	spec, opts, err := parseRun(args)
	if err != nil {
		return 0, err
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(runGCPercent)
	}
	runner := harness.Runner{ResultsRoot: opts.results, Progress: stdout, Trends: suite.StoreTrends, NoInstall: opts.noInstall}
	if spec.NodesFile != "" {
		if runner.Login, err = opts.login.login(); err != nil {
			return 0, err
		}
	}
	dir, summary, err := runner.Run(ctx, spec)
	if dir != "" && len(summary.Results) > 0 {
		command.PrintVerdicts(stdout, dir, summary)
	}
	if err != nil {
		return 0, err
	}
	return command.ExitCode(summary.Verdict), nil
}

// nemesisHelp lists the nemeses --nemesis takes, each with what it does and the hazard it
// targets, in the words its fault kind declares (history.FaultKind).
func nemesisHelp() string {
	const indent, width = 29, 100
	var b strings.Builder
	b.WriteString("nemeses (--nemesis; several, comma-separated, run side by side):")
	for _, name := range nemesis.Names() {
		k, _ := history.KindOf(name)
		does := k.Does
		if k.Hazard != "" {
			does += "; targets " + string(k.Hazard)
		}
		line := fmt.Sprintf("  %-*s", indent-3, name)
		for _, word := range strings.Fields(does) {
			if len(line)+1+len(word) > width {
				b.WriteString("\n" + line)
				line = strings.Repeat(" ", indent-1)
			}
			line += " " + word
		}
		b.WriteString("\n" + line)
	}
	return b.String()
}

// usualSizes says each system's usual cluster size, "redis 1, redlock 5, ...", of the
// systems that run in containers (the in-process ones have one node, always).
func usualSizes() string {
	return systemsSaid(func(sys system.System) string {
		if sys.Container == nil {
			return ""
		}
		return fmt.Sprintf("%s %d", sys.Name, sys.Sizes.Default)
	})
}

// persistenceChoices says each system's choices of --persistence, its default first.
func persistenceChoices() string {
	return systemsSaid(func(sys system.System) string {
		var choices []string
		for _, p := range sys.Persistences {
			choices = append(choices, string(p))
		}
		if len(choices) == 0 {
			return ""
		}
		return sys.Name + " " + strings.Join(choices, "|")
	})
}

// inProcessSystems names the systems the harness serves itself, which need no Docker.
func inProcessSystems() string {
	return systemsSaid(func(sys system.System) string {
		if sys.InProcess == nil {
			return ""
		}
		return sys.Name
	})
}

// systemsSaid is what say says of each system, comma-separated, leaving out those it says
// nothing of.
func systemsSaid(say func(system.System) string) string {
	var said []string
	for _, sys := range system.All() {
		if s := say(sys); s != "" {
			said = append(said, s)
		}
	}
	return strings.Join(said, ", ")
}

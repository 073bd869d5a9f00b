package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/cpucap"
	"github.com/lockbreaker/lockbreaker/machines"
)

// cleanCommand is `lockbreaker clean`: its help, and cmdClean to run it.
var cleanCommand = command.Command{
	Name:     "clean",
	Synopsis: "remove the containers, networks and disks of runs that died, e.g. killed with SIGKILL",
	Args:     "[--run ID | --all | --nodes-file FILE]",
	About: `Removes the containers and networks labelled by lockbreaker whose run has died on this
host (killed with SIGKILL, a crash): their owner process is gone; and the disks served on
this host for their nodes (power-loss, slow-disk): each daemon stopped or killed, each mount
unmounted, each directory under /var/lib/lockbreaker/disks removed. Runs still going, such as
another suite or test beside this one, are left alone; --run removes one run's, live or
not, and --all every labelled container and network and every disk. Lock clients leave little for it: a
client's network namespace and address on the cluster network die with its process, and
an exec client's program with its worker. The cgroup of a throttled client
(throttle-holder) that a killed run left empty is removed once a minute old, here and at
the next run's start.

With --nodes-file (and the login flags of run), clean logs in to those machines instead and
kills every server a run left there (the pidfiles under /var/lib/lockbreaker name them), then
removes /var/lib/lockbreaker and lockbreaker's iptables chain: what a run on machines killed
with SIGKILL leaves. It needs no Docker. Either way, clean removes from this host the bridges
(lbr-*) and their iptables rules that put a killed run's clients on addresses of their own
toward machines.`,
	Flags: func() *flag.FlagSet {
		fs, _ := cleanFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker clean",
		"lockbreaker clean --nodes-file store/machines/machines.txt --ssh-private-key store/machines/id_ed25519",
		"lockbreaker clean --run 20260101T120000Z-4242-1",
		"lockbreaker clean --all",
		"docker ps -a --filter label=org.lockbreaker.project   # what clean --all removes",
	},
	Run: cmdClean,
	Parse: func(args []string) error {
		_, err := parseClean(args)
		return err
	},
}

// cleanOptions are clean's flags.
type cleanOptions struct {
	run, nodesFile string
	all            bool
	login          loginFlags
}

// cleanFlags makes clean's flag set, filling opts.
func cleanFlags() (*flag.FlagSet, *cleanOptions) {
	fs := command.NewFlags("clean")
	opts := &cleanOptions{}
	fs.StringVar(&opts.run, "run", "", "remove what run ID left, live or not (its containers' "+containers.LabelRun+" label, <time>-<pid>-<n>)")
	fs.BoolVar(&opts.all, "all", false, "remove every labelled container and network, also of runs still going")
	fs.StringVar(&opts.nodesFile, "nodes-file", "", "clean these machines instead: kill the servers runs left and remove /var/lib/lockbreaker")
	opts.login.add(fs)
	return fs, opts
}

// parseClean parses clean's arguments.
func parseClean(args []string) (cleanOptions, error) {
	fs, opts := cleanFlags()
	if err := command.Parse(fs, args); err != nil {
		return cleanOptions{}, err
	}
	if opts.all && opts.run != "" {
		return cleanOptions{}, command.Bad(errors.New("clean: --run and --all exclude each other"))
	}
	if opts.nodesFile != "" && (opts.all || opts.run != "") {
		return cleanOptions{}, command.Bad(errors.New("clean: --nodes-file cleans machines, --run and --all containers: one at a time"))
	}
	return *opts, nil
}

func cmdClean(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	opts, err := parseClean(args)
	if err != nil {
		return 0, err
	}
	if opts.nodesFile != "" {
		return cleanMachines(ctx, opts, stdout)
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	var n int
	switch {
	case opts.all || opts.run != "":
		n, err = containers.Clean(ctx, opts.run)
	default:
		n, err = containers.CleanStale(ctx)
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "removed %d containers, networks and disks\n", n)
	cgroups, err := cpucap.Sweep(cpucap.Root)
	if cgroups > 0 {
		fmt.Fprintf(stdout, "removed %d cgroups of throttled clients\n", cgroups)
	}
	if err != nil {
		return 0, err
	}
	return sweepClientNetworks(ctx, stdout)
}

// sweepClientNetworks removes the routed client networks (clientnet.Route) that runs on
// machines killed with SIGKILL left on this host.
func sweepClientNetworks(ctx context.Context, stdout io.Writer) (int, error) {
	n, err := clientnet.Sweep(ctx)
	if n > 0 {
		fmt.Fprintf(stdout, "removed %d client networks of runs on machines\n", n)
	}
	if err != nil {
		return 0, err
	}
	return command.ExitValid, nil
}

// cleanMachines kills what runs left on the machines --nodes-file names, and removes their
// directory.
func cleanMachines(ctx context.Context, opts cleanOptions, stdout io.Writer) (int, error) {
	addrs, err := machines.ReadFile(opts.nodesFile)
	if err != nil {
		return 0, command.Bad(err)
	}
	login, err := opts.login.login()
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, a := range addrs {
		m, err := machines.Dial(ctx, a, login)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := machines.Clean(ctx, m)
		m.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: killed %d servers, removed %s\n", m.Name(), n, machines.Dir)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return sweepClientNetworks(ctx, stdout)
}

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/cpucap"
)

// cleanCommand is `lockbreaker clean`: its help, and cmdClean to run it.
var cleanCommand = command.Command{
	Name:     "clean",
	Synopsis: "remove the containers and networks of runs that died, e.g. killed with SIGKILL",
	Args:     "[--run ID | --all]",
	About: `Removes the containers and networks labelled by lockbreaker whose run has died on this
host (killed with SIGKILL, a crash): their owner process is gone. Runs still going, such as
another suite or test beside this one, are left alone; --run removes one run's, live or
not, and --all every labelled container and network. Lock clients leave little for it: a
client's network namespace and address on the cluster network die with its process, and
an exec client's program with its worker. The cgroup of a throttled client
(throttle-holder) that a killed run left empty is removed once a minute old, here and at
the next run's start.`,
	Flags: func() *flag.FlagSet {
		fs, _, _ := cleanFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker clean",
		"lockbreaker clean --run 20260101T120000Z-4242-1",
		"lockbreaker clean --all",
		"docker ps -a --filter label=org.lockbreaker.project   # what clean --all removes",
	},
	Run: cmdClean,
	Parse: func(args []string) error {
		_, _, err := parseClean(args)
		return err
	},
}

// cleanFlags makes clean's flag set; run holds --run, all --all.
func cleanFlags() (fs *flag.FlagSet, run *string, all *bool) {
	fs = command.NewFlags("clean")
	run = fs.String("run", "", "remove what run ID left, live or not (its containers' "+containers.LabelRun+" label, <time>-<pid>-<n>)")
	all = fs.Bool("all", false, "remove every labelled container and network, also of runs still going")
	return fs, run, all
}

// parseClean parses clean's arguments: the run named by --run, and --all.
func parseClean(args []string) (run string, all bool, err error) {
	fs, runFlag, allFlag := cleanFlags()
	if err := command.Parse(fs, args); err != nil {
		return "", false, err
	}
	if *allFlag && *runFlag != "" {
		return "", false, command.Bad(errors.New("clean: --run and --all exclude each other"))
	}
	return *runFlag, *allFlag, nil
}

func cmdClean(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	run, all, err := parseClean(args)
	if err != nil {
		return 0, err
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	var n int
	switch {
	case all || run != "":
		n, err = containers.Clean(ctx, run)
	default:
		n, err = containers.CleanStale(ctx)
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "removed %d containers and networks\n", n)
	cgroups, err := cpucap.Sweep(cpucap.Root)
	if cgroups > 0 {
		fmt.Fprintf(stdout, "removed %d cgroups of throttled clients\n", cgroups)
	}
	if err != nil {
		return 0, err
	}
	return command.ExitValid, nil
}

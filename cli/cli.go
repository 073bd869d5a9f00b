// Package cli is the lockbreaker command line: run, suite, check, report, serve, clean,
// images, machines, help, version and worker. Our binary (cmd/lockbreaker) and a user's own binary
// built with lockbreaker.Main run exactly this code, so both behave alike and a worker
// started from either finds the same lock clients. See README.md and docs/ for the commands;
// `lockbreaker help` lists them.
//
// Main is its only export. Each command is one file (run.go, suite.go, shrink.go, serve.go,
// clean.go, images.go, machines.go, version.go, worker.go; help.go prints the help), its help text
// beside its code; check and report, which judge and draw a saved run with no Docker,
// are in package cli/offline, and what every command is made of (its help, flags, exit
// codes, safe output) in cli/command.
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
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/cli/offline"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// defaultResults is where runs land: not "results", the package's own folder, so
// removing old runs never removes source.
const defaultResults = "store"

// commands are the subcommands, in the order help lists them; each is defined, with its
// help, beside its code (run.go, suite.go, check.go...).
var commands = []command.Command{
	runCommand, suiteCommand, offline.Check, offline.Report, shrinkCommand, huntCommand, serveCommand,
	cleanCommand, imagesCommand, machinesCommand, versionCommand, workerCommand,
}

func lookup(name string) (command.Command, bool) {
	i := slices.IndexFunc(commands, func(c command.Command) bool { return c.Name == name })
	if i < 0 {
		return command.Command{}, false
	}
	return commands[i], true
}

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
			fmt.Fprintln(stderr, "lockbreaker: internal error: "+command.OneLine(fmt.Sprint(p)))
			code = command.ExitHarness
		}
	}()
	if len(args) == 0 {
		fmt.Fprintln(stderr, "lockbreaker: no command given (try: lockbreaker help)")
		return command.ExitBadInput
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A reader of the output that goes away (lockbreaker run | head) ends the command as
	// Ctrl-C does, so a run still removes its containers. Asked for, SIGPIPE no longer
	// kills the process: the write to the closed output fails (cancelOnClosed). Ignoring
	// it instead would pass the ignoring on to the programs the harness starts itself
	// (mmdebstrap, ip, nsenter), which would then take a closed pipe for an error.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	ctx, readerGone := context.WithCancelCause(ctx)
	defer readerGone(nil)
	stdout = cancelOnClosed{stdout, readerGone}
	var err error
	if name := args[0]; name == "help" || name == "-h" || name == "--help" {
		err = cmdHelp(args[1:], stdout)
	} else if cmd, ok := lookup(name); !ok {
		err = command.Bad(fmt.Errorf("unknown command %s (try: lockbreaker help)", quote.Short(name)))
	} else if code, err = cmd.Run(ctx, args[1:], stdout); errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, cmd)
		return command.ExitValid
	}
	if err == nil {
		return code
	}
	if cause := context.Cause(ctx); errors.Is(cause, errOutputClosed) && !errors.Is(err, errOutputClosed) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	fmt.Fprintln(stderr, "lockbreaker: "+command.OneLine(err.Error()))
	var bad command.BadInput
	var specErr *harness.SpecError
	var corrupt *history.CorruptError
	if errors.As(err, &bad) || errors.As(err, &specErr) || errors.As(err, &corrupt) {
		return command.ExitBadInput
	}
	return command.ExitHarness
}

// errOutputClosed is why a command stopped when its standard output's reader went away.
var errOutputClosed = errors.New("its output was closed")

// cancelOnClosed is a command's standard output: a write that finds no reader cancels
// the command's context.
type cancelOnClosed struct {
	w      io.Writer
	cancel context.CancelCauseFunc
}

func (c cancelOnClosed) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		c.cancel(errOutputClosed)
	}
	return n, err
}

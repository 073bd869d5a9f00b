// Package cli is the lockbreaker command line: run, suite, check, report, serve, clean,
// images, help, version and worker. Our binary (cmd/lockbreaker) and a user's own binary
// built with lockbreaker.Main run exactly this code, so both behave alike and a worker
// started from either finds the same lock clients. See README.md for the commands;
// `lockbreaker help` lists them.
//
// Main is its only export. Each command is one file (run.go, suite.go, check.go,
// report.go, serve.go, clean.go, images.go, version.go, worker.go; help.go prints the
// help), its help text beside its code. check and report judge and draw a saved run
// through package analysis, which links no Docker client.
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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
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

// commands are the subcommands, in the order help lists them; each is defined, with its
// help, beside its code (run.go, suite.go, check.go...).
var commands = []command{
	runCommand, suiteCommand, checkCommand, reportCommand, serveCommand,
	cleanCommand, imagesCommand, versionCommand, workerCommand,
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
	var specErr *harness.SpecError
	var corrupt *history.CorruptError
	if errors.As(err, &bad) || errors.As(err, &specErr) || errors.As(err, &corrupt) {
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

// escapeLines escapes text of several lines line by line (escape).
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = escape(l)
	}
	return strings.Join(lines, "\n")
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

// isTerminal says whether w is a terminal, where a progress line may rewrite itself.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// durationValue is a flag holding a spec.Duration, so help can show its default as 2s.
type durationValue spec.Duration

func (d *durationValue) String() string { return spec.Duration(*d).Std().String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = durationValue(v)
	return err
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

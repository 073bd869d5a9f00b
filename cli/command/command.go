// Package command is what every lockbreaker subcommand is made of: its help, its flag set
// and how it parses, the errors that are the user's input, the exit codes, and the output
// made safe for a terminal. The CLI (package cli) and the commands that judge a saved run
// with no Docker (package cli/offline) are both built from it; it is the CLI's own, so it
// sits under cli, and it links no Docker, containers or harness, as cli/offline must not.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Exit codes.
const (
	ExitValid    = 0
	ExitInvalid  = 1
	ExitUnknown  = 2
	ExitBadInput = 254
	ExitHarness  = 255
)

// Command is one subcommand: how it runs and what its help says.
type Command struct {
	Name     string
	Synopsis string // one line in the command list
	Args     string // what the usage line shows after the name
	About    string
	// Flags makes the command's flag set with its defaults; nil when it has none. Help
	// lists the flags from the same code the command parses with, so they cannot drift.
	Flags    func() *flag.FlagSet
	Examples []string
	// Run runs the command on its arguments: an exit code, or an error (a BadInput for the
	// user's, flag.ErrHelp for -h).
	Run func(ctx context.Context, args []string, stdout io.Writer) (int, error)
	// Parse parses the arguments as Run does before it starts anything (the flags, their
	// values, how many operands), and runs nothing: Run calls the same code. It lets a
	// command line be checked without Docker, as every one README.md and docs/ show is.
	Parse func(args []string) error
}

// BadInput marks errors that are the user's input, not the harness's fault.
type BadInput struct{ error }

// Bad marks err as the user's input.
func Bad(err error) error { return BadInput{err} }

// NewFlags makes a flag set whose parse errors are reported once, by the CLI's main.
func NewFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// IsSet says whether the command line set the flag.
func IsSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseFlags parses flags up to the first argument that is not one, or up to "--". -h and
// --help come back as flag.ErrHelp itself, for the CLI to print the command's help.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return Bad(fmt.Errorf("%s: %w", fs.Name(), err))
	}
	return err
}

// Parse parses a command that takes flags only, wherever they stand, and refuses any other
// argument.
func Parse(fs *flag.FlagSet, args []string) error {
	rest, err := ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return Bad(fmt.Errorf("%s: unexpected argument %s", fs.Name(), quote.Short(rest[0])))
	}
	return nil
}

// ParseArgs parses flags wherever they stand among a command's arguments, before, between
// or after them ("shrink store/latest --results out"), and returns the other arguments in
// order. "--" ends the flags: every argument after it is returned as it is, even one that
// starts with a dash.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if endedByDashes(fs, args[:len(args)-len(left)]) {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest, args = append(rest, left[0]), left[1:]
	}
}

// endedByDashes says whether parsed, the arguments fs.Parse has just consumed, ended with
// the "--" that ends the flags, rather than with a flag or a flag's value (as in
// "--test --"). It walks them as fs.Parse did: a flag, then its value unless it is a
// boolean or holds its value after "=".
func endedByDashes(fs *flag.FlagSet, parsed []string) bool {
	for i := 0; i < len(parsed); i++ {
		arg := parsed[i]
		if arg == "--" {
			return true // fs.Parse stops at it, so it is the last
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if hasValue {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
		}
		i++ // the flag's value
	}
	return false
}

// IsTerminal says whether w is a terminal, where a progress line may rewrite itself.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Duration is a flag holding a spec.Duration, so help can show its default as 2s.
type Duration spec.Duration

func (d *Duration) String() string { return spec.Duration(*d).Std().String() }

func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// ExitCode is the exit code of a run's verdict.
func ExitCode(v checkers.Verdict) int {
	switch v {
	case checkers.Valid:
		return ExitValid
	case checkers.Invalid:
		return ExitInvalid
	}
	return ExitUnknown
}

// PrintVerdicts prints a run's verdicts, notes and the path of its report.
func PrintVerdicts(w io.Writer, dir string, s results.Summary) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range s.Results {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", Escape(string(r.Checker)), Escape(strings.ToUpper(string(r.Verdict))), Escape(r.Summary))
	}
	tw.Flush()
	for _, n := range s.Notes {
		fmt.Fprintf(w, "  note: %s\n", Escape(n))
	}
	if s.Error != "" {
		fmt.Fprintf(w, "  harness error: %s\n", OneLine(s.Error))
	}
	for _, r := range s.Results {
		if len(r.Story) > 0 { // the first story; the report tells which checkers it explains
			fmt.Fprintf(w, "\n  what happened first:\n")
			for _, sentence := range r.Story {
				fmt.Fprintf(w, "    %s\n", Escape(sentence.Text))
			}
			break
		}
	}
	fmt.Fprintf(w, "\n%s: %s\nreport: %s\n", Escape(s.Test), Escape(strings.ToUpper(string(s.Verdict))), Escape(filepath.Join(dir, results.ReportFile)))
}

// OneLine is a message as one line for a terminal. Our messages quote values short; other
// packages' (flag's, encoding/json's) show them whole, however long, so those are
// shortened here.
func OneLine(s string) string { return Escape(quote.ShortenAll(strings.ReplaceAll(s, "\n", "; "))) }

// Escape makes text safe for a terminal: summaries, notes and names can come from a saved
// run anyone may have written, and an ESC sequence, \r or \b in them would rewrite what
// the user sees. Control and other non-printing runes and invalid UTF-8 become Go escapes.
func Escape(s string) string {
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

// EscapeLines escapes text of several lines line by line (Escape).
func EscapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/internal/quote"
)

const exitCodes = "exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 harness error\n"

func cmdHelp(args []string, stdout io.Writer) error {
	switch {
	case len(args) > 1:
		return command.Bad(errors.New("help: give at most one command, e.g. lockbreaker help run"))
	case len(args) == 0 || args[0] == "help":
		printUsage(stdout)
		return nil
	}
	cmd, ok := lookup(args[0])
	if !ok {
		return command.Bad(fmt.Errorf("help: unknown command %s (try: lockbreaker help)", quote.Short(args[0])))
	}
	printHelp(stdout, cmd)
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: lockbreaker COMMAND [flags]\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Synopsis)
	}
	fmt.Fprintf(tw, "  help\tlockbreaker help COMMAND (or lockbreaker COMMAND -h) explains one\n")
	tw.Flush()
	fmt.Fprint(w, "\n"+exitCodes)
}

// printHelp prints a command's usage: every flag with its default, and examples.
func printHelp(w io.Writer, c command.Command) {
	fmt.Fprintf(w, "usage: lockbreaker %s %s\n\n%s\n\nflags:\n", c.Name, c.Args, c.About)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if c.Flags != nil {
		c.Flags().VisitAll(func(f *flag.Flag) {
			kind, usage := flag.UnquoteUsage(f)
			if _, ok := f.Value.(*command.Duration); ok {
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
	if len(c.Examples) > 0 {
		fmt.Fprintf(w, "\nexamples:\n  %s\n", strings.Join(c.Examples, "\n  "))
	}
	fmt.Fprint(w, "\n"+exitCodes)
}

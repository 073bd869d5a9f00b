package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/machines"
)

// machinesCommand is `lockbreaker machines check`: its help, and cmdMachines to run it.
var machinesCommand = command.Command{
	Name:     "machines",
	Synopsis: "check that the machines in a file can serve a run: reached, root, tools, clocks",
	Args:     "check --nodes-file FILE [flags]",
	About: `machines check logs in to every machine the file names (one host or user@host:port a
line, # comments), all at once, and asks each whether it can serve a run, changing nothing on
any: that it can be reached and logged in to over SSH, that commands can be run as root
(as root, or through sudo with --password or, without one, sudo -n), that every --tool is
on root's PATH, and that its clock is within --max-clock-offset of this machine's. It
prints each machine that can; one that cannot is named with its reason, one line each, and
the exit code is 254. docs/machines.md says what a machine needs.`,
	Flags: func() *flag.FlagSet {
		fs, _ := machinesFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker machines check --nodes-file machines.txt",
		"lockbreaker machines check --nodes-file machines.txt --username admin --ssh-private-key ~/.ssh/id_ed25519 --strict-host-key-checking",
	},
	Run: cmdMachines,
	Parse: func(args []string) error {
		_, err := parseMachines(args)
		return err
	},
}

// machinesOptions are machines check's settings.
type machinesOptions struct {
	file  string
	login loginFlags
	needs machines.Needs
}

// machinesFlags makes the flag set of machines check, filling opts.
func machinesFlags() (*flag.FlagSet, *machinesOptions) {
	fs := command.NewFlags("machines check")
	opts := &machinesOptions{}
	fs.StringVar(&opts.file, "nodes-file", "", "the machines, one host or user@host:port a line")
	opts.login.add(fs)
	fs.DurationVar(&opts.needs.MaxClockOffset, "max-clock-offset", time.Second, "how far a machine's clock may be from this one's; 0: not looked at")
	fs.Func("tool", "a command every machine must have on root's PATH; repeat it for more (default iptables)", func(s string) error {
		opts.needs.Tools = append(opts.needs.Tools, s)
		return nil
	})
	return fs, opts
}

// loginFlags are the flags of how machines are logged in to, with the names Jepsen's
// users know.
type loginFlags struct {
	machines.Login
	strict bool
}

func (f *loginFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.User, "username", "root", "the user of the machines the file names with none")
	fs.StringVar(&f.SudoPassword, "password", "", "the password sudo asks for; \"\": sudo -n (no password) or the user is root")
	fs.StringVar(&f.KeyFile, "ssh-private-key", "", "the private key to log in with (unencrypted); \"\": the ssh agent's keys ($SSH_AUTH_SOCK)")
	fs.BoolVar(&f.strict, "strict-host-key-checking", false, "check each machine's host key against --known-hosts (off: any key is taken, for machines made for the run)")
	fs.StringVar(&f.KnownHosts, "known-hosts", "", "the known_hosts file of --strict-host-key-checking (default ~/.ssh/known_hosts)")
}

// login is the login the flags say together: the agent when no key is named, known_hosts
// only with strict checking.
func (f loginFlags) login() (machines.Login, error) {
	l := f.Login
	switch {
	case f.strict && l.KnownHosts == "":
		home, err := os.UserHomeDir()
		if err != nil {
			return l, command.Bad(fmt.Errorf("--strict-host-key-checking: no home directory for ~/.ssh/known_hosts: %w", err))
		}
		l.KnownHosts = filepath.Join(home, ".ssh", "known_hosts")
	case !f.strict && l.KnownHosts != "":
		return l, command.Bad(errors.New("--known-hosts is the file of --strict-host-key-checking, which is off"))
	}
	if l.KeyFile == "" {
		if os.Getenv("SSH_AUTH_SOCK") == "" {
			return l, command.Bad(errors.New("no --ssh-private-key and no ssh agent (SSH_AUTH_SOCK) to log in with"))
		}
		l.Agent = true
	}
	return l, nil
}

// parseMachines parses machines check's arguments and reads its file.
func parseMachines(args []string) (machinesOptions, error) {
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help"):
		return machinesOptions{}, flag.ErrHelp
	case len(args) == 0 || args[0] != "check":
		return machinesOptions{}, command.Bad(errors.New("machines: say what to do: machines check --nodes-file FILE"))
	}
	fs, opts := machinesFlags()
	if err := command.Parse(fs, args[1:]); err != nil {
		return machinesOptions{}, err
	}
	if opts.file == "" {
		return machinesOptions{}, command.Bad(errors.New("machines check: --nodes-file names the machines"))
	}
	if opts.needs.Tools == nil {
		opts.needs.Tools = []string{"iptables"}
	}
	return *opts, nil
}

func cmdMachines(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	opts, err := parseMachines(args)
	if err != nil {
		return 0, err
	}
	addrs, err := machines.ReadFile(opts.file)
	if err != nil {
		return 0, command.Bad(err)
	}
	login, err := opts.login.login()
	if err != nil {
		return 0, err
	}
	ms, err := machines.Preflight(ctx, addrs, login, opts.needs)
	if err != nil {
		return 0, command.Bad(errors.New(strings.ReplaceAll(err.Error(), "\n", "; ")))
	}
	for _, m := range ms {
		fmt.Fprintf(stdout, "%s: ready\n", m.Name())
		m.Close()
	}
	return command.ExitValid, nil
}

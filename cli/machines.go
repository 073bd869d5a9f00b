package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/machines"
	runspec "github.com/lockbreaker/lockbreaker/spec"
)

// machinesCommand is `lockbreaker machines check|up|down`: its help, and cmdMachines to
// run it.
var machinesCommand = command.Command{
	Name:     "machines",
	Synopsis: "check machines named in a file; start or remove stand-in machines to try runs on",
	Args:     "check --nodes-file FILE | up N [--system S] | down  [flags]",
	About: `machines check logs in to every machine the file names (one host or user@host:port a
line, # comments), all at once, and asks each whether it can serve a run, changing nothing on
any: that it can be reached and logged in to over SSH, that commands can be run as root
(as root, or through sudo with --password or, without one, sudo -n), that every --tool is
on root's PATH, and that its clock is within --max-clock-offset of this machine's. It
prints each machine that can; one that cannot is named with its reason, one line each, and
the exit code is 254.

machines up N starts N stand-in machines on this host: containers of --system's node image
with sshd, root let in with a key made for them, NET_ADMIN, FUSE (/dev/fuse and CAP_SYS_ADMIN, for
the disks of power-loss and slow-disk) and no clock rights. It writes
the machines file and the key into --dir and prints the run that uses them; they stay until
machines down (or clean --all) removes them and the files. docs/machines.md says what a
machine needs and what runs on machines can do.`,
	Flags: func() *flag.FlagSet {
		fs, _ := machinesFlags()
		return fs
	},
	Examples: []string{
		"lockbreaker machines check --nodes-file machines.txt",
		"lockbreaker machines check --nodes-file machines.txt --username admin --ssh-private-key ~/.ssh/id_ed25519 --strict-host-key-checking",
		"lockbreaker machines up 1 --system redis",
		"lockbreaker run --nodes-file store/machines/machines.txt --ssh-private-key store/machines/id_ed25519",
		"lockbreaker machines down",
	},
	Run: cmdMachines,
	Parse: func(args []string) error {
		_, err := parseMachines(args)
		return err
	},
}

// machinesOptions are machines' settings: the subcommand and its flags.
type machinesOptions struct {
	do    string // check, up or down
	count int    // up's N
	file  string
	login loginFlags
	needs machines.Needs
	// dir holds the stand-ins' machines file, key and id; system is what they serve.
	dir, system string
}

// machinesFlags makes the flag set of machines, filling opts.
func machinesFlags() (*flag.FlagSet, *machinesOptions) {
	fs := command.NewFlags("machines")
	opts := &machinesOptions{}
	fs.StringVar(&opts.file, "nodes-file", "", "check: the machines, one host or user@host:port a line")
	opts.login.add(fs)
	fs.DurationVar(&opts.needs.MaxClockOffset, "max-clock-offset", time.Second, "check: how far a machine's clock may be from this one's; 0: not looked at")
	fs.Func("tool", "check: a command every machine must have on root's PATH; repeat it for more (default iptables)", func(s string) error {
		opts.needs.Tools = append(opts.needs.Tools, s)
		return nil
	})
	fs.StringVar(&opts.dir, "dir", filepath.Join(defaultResults, "machines"), "up, down: where the stand-ins' machines file and key are")
	fs.StringVar(&opts.system, "system", "redis", "up: the system whose packages the stand-ins have: "+strings.Join(machines.Systems, ", "))
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

// machineClockHelp is --machine-clock's help, run's and suite's.
const machineClockHelp = "with --nodes-file, the clock the clock faults move: " + runspec.MachineFaketime +
	" (default), each server's under libfaketime, or " + runspec.MachineSystemClock +
	", the machine's own system clock, its NTP stopped meanwhile (dedicated VMs; root needs CAP_SYS_TIME)"

// noInstallHelp is run's --no-install's help.
const noInstallHelp = "with --nodes-file: take the system's packages as installed on the machines (a machine that lacks one is refused); " +
	"otherwise they are installed where missing (apt-get) before the run"

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

// standInsFile names, in --dir, the id the stand-ins were started as.
const standInsFile = "stand-ins"

// parseMachines parses machines' arguments.
func parseMachines(args []string) (machinesOptions, error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return machinesOptions{}, flag.ErrHelp
	}
	fs, opts := machinesFlags()
	words, err := command.ParseArgs(fs, args)
	if err != nil {
		return machinesOptions{}, err
	}
	usage := command.Bad(errors.New("machines: say what to do: check --nodes-file FILE, up N, or down"))
	if len(words) == 0 {
		return machinesOptions{}, usage
	}
	opts.do = words[0]
	switch {
	case opts.do == "check" && len(words) == 1:
		if opts.file == "" {
			return machinesOptions{}, command.Bad(errors.New("machines check: --nodes-file names the machines"))
		}
		if opts.needs.Tools == nil {
			opts.needs.Tools = []string{"iptables"}
		}
	case opts.do == "up" && len(words) == 2:
		n, err := strconv.Atoi(words[1])
		if err != nil || n < 1 || n > 9 {
			return machinesOptions{}, command.Bad(fmt.Errorf("machines up: N is how many stand-ins, 1 to 9, got %s", quote.Short(words[1])))
		}
		if !slices.Contains(machines.Systems, opts.system) {
			return machinesOptions{}, command.Bad(fmt.Errorf("machines up: --system %s does not run on machines yet (those that do: %s)",
				quote.Short(opts.system), strings.Join(machines.Systems, ", ")))
		}
		opts.count = n
	case opts.do == "down" && len(words) == 1:
	case opts.do == "check" || opts.do == "up" || opts.do == "down":
		return machinesOptions{}, command.Bad(fmt.Errorf("machines %s: unexpected argument %s", opts.do, quote.Short(words[len(words)-1])))
	default:
		return machinesOptions{}, usage
	}
	return *opts, nil
}

func cmdMachines(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	opts, err := parseMachines(args)
	if err != nil {
		return 0, err
	}
	switch opts.do {
	case "up":
		return standInsUp(ctx, opts, stdout)
	case "down":
		return standInsDown(ctx, opts, stdout)
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

// standInsUp starts the stand-ins and writes their machines file and key into --dir.
func standInsUp(ctx context.Context, opts machinesOptions, stdout io.Writer) (int, error) {
	idFile := filepath.Join(opts.dir, standInsFile)
	if _, err := os.Stat(idFile); err == nil {
		return 0, command.Bad(fmt.Errorf("machines up: %s holds stand-ins already (machines down removes them)", opts.dir))
	}
	if err := os.MkdirAll(opts.dir, 0o755); err != nil {
		return 0, err
	}
	key := filepath.Join(opts.dir, "id_ed25519")
	authorized, err := machines.WriteKey(key)
	if err != nil {
		return 0, err
	}
	id := fmt.Sprintf("machines-%s-%d", time.Now().UTC().Format("20060102T150405Z"), os.Getpid())
	ms, err := containers.StartStandIns(ctx, id, opts.system, opts.count, authorized, stdout)
	if err != nil {
		return 0, err
	}
	lines := []string{"# stand-in machines for " + opts.system + " (lockbreaker machines up); lockbreaker machines down removes them"}
	for _, m := range ms {
		lines = append(lines, "root@"+m.IP)
	}
	file := filepath.Join(opts.dir, "machines.txt")
	err = errors.Join(os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644), os.WriteFile(idFile, []byte(id+"\n"), 0o644))
	if err != nil {
		return 0, errors.Join(err, containers.StopStandIns(context.WithoutCancel(ctx), id))
	}
	fmt.Fprintf(stdout, "%d stand-in machines for %s are up, named in %s; try:\n  lockbreaker run --system %s --nodes-file %s --ssh-private-key %s\n",
		len(ms), opts.system, file, opts.system, file, key)
	return command.ExitValid, nil
}

// standInsDown removes the stand-ins --dir names, and their files.
func standInsDown(ctx context.Context, opts machinesOptions, stdout io.Writer) (int, error) {
	idFile := filepath.Join(opts.dir, standInsFile)
	id, err := os.ReadFile(idFile)
	if err != nil {
		return 0, command.Bad(fmt.Errorf("machines down: no stand-ins in %s (%v)", opts.dir, err))
	}
	if err := containers.StopStandIns(ctx, strings.TrimSpace(string(id))); err != nil {
		return 0, err
	}
	for _, f := range []string{"machines.txt", "id_ed25519", standInsFile} {
		if err := os.Remove(filepath.Join(opts.dir, f)); err != nil && !os.IsNotExist(err) {
			return 0, err
		}
	}
	fmt.Fprintf(stdout, "stand-in machines %s removed\n", strings.TrimSpace(string(id)))
	return command.ExitValid, nil
}

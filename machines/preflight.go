package machines

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/system"
)

// Needs is what a run asks of every machine before it changes anything on one.
type Needs struct {
	// Install are the Debian packages to install where missing (apt-get), once root's
	// commands run and before the tools are looked for: the only change Preflight makes.
	// None: the machines' packages are taken as installed.
	Install []string
	// Tools are the commands that must be on root's PATH (iptables, the services' own).
	Tools []string
	// MaxClockOffset is how far a machine's clock may be from this one's; 0 does not look.
	MaxClockOffset time.Duration
	// SetClock: root must be able to set the system clock (CAP_SYS_TIME), for SystemClock.
	SetClock bool
	// FUSE: the machine must have /dev/fuse, for the disks its nodes' data is served on.
	FUSE bool
	// Ports are the TCP ports the run's servers will listen on, by machine. Each must be
	// free there: another process listening on one, on any address, refuses the machine.
	// None: not looked at.
	Ports Ports
}

// Ports are the TCP ports a run's servers listen on, by the machine each runs on: a node
// on each of the first Nodes machines, then a monitor (a Sentinel) on each machine after
// them, as StartCluster places them.
type Ports struct {
	Nodes   int
	Node    []int // each node's server's
	Monitor []int // each monitor's
}

// On are the ports the server on the i-th machine listens on.
func (p Ports) On(i int) []int {
	if i < p.Nodes {
		return p.Node
	}
	return p.Monitor
}

// ServerPorts are the ports sys's servers listen on when setup starts them on machines.
func ServerPorts(sys system.System, setup system.Cluster) Ports {
	p := Ports{Nodes: setup.Nodes, Node: sys.Container.Listens(setup.Pooler)}
	if m := sys.Container.Monitors; m != nil {
		p.Monitor = []int{m.Port}
	}
	return p
}

// Preflight asks every machine at once whether it can serve the run: that it can be
// reached and logged in to, that root's commands can be run (Sudo), that each of the
// tools is there (once the packages to install are), that its clock is within the
// bound, and that no other process listens on the ports its server will. It changes nothing on any machine but the packages it installs. It returns the connections, in the order of addrs, when every machine can;
// otherwise none, and an error of one line per machine that cannot, naming it and why.
func Preflight(ctx context.Context, addrs []Address, login Login, needs Needs) ([]*Machine, error) {
	ms := make([]*Machine, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			m, err := Dial(ctx, a, login)
			if err == nil {
				ms[i], err = m, m.preflight(ctx, needs, needs.Ports.On(i))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range ms {
			if m != nil {
				m.Close()
			}
		}
		return nil, err
	}
	return ms, nil
}

// preflight asks one machine what Preflight asks, its server to listen on ports.
func (m *Machine) preflight(ctx context.Context, needs Needs, ports []int) error {
	if _, err := m.Sudo(ctx, "true"); err != nil {
		return fmt.Errorf("machine %s: cannot run commands as root (sudo): %w", m.Name(), unwrapped(err))
	}
	// The clock before the install: a machine refused for a check changes nothing.
	if needs.MaxClockOffset > 0 {
		if err := m.checkClock(ctx, needs.MaxClockOffset); err != nil {
			return err
		}
	}
	if needs.SetClock {
		if err := m.checkSetClock(ctx); err != nil {
			return err
		}
	}
	if needs.FUSE {
		if _, err := m.Sudo(ctx, "test -c /dev/fuse"); err != nil {
			return fmt.Errorf("machine %s: has no /dev/fuse, which the faults on the nodes' disks serve them through", m.Name())
		}
	}
	if err := m.checkPorts(ctx, ports); err != nil {
		return err
	}
	if err := m.install(ctx, needs.Install); err != nil {
		return err
	}
	if len(needs.Tools) > 0 {
		words := make([]string, len(needs.Tools))
		for i, t := range needs.Tools {
			words[i] = shellwords.Quote(t)
		}
		// A command on root's PATH, or a file a path names (a jar; a glob, for a path that
		// names the machine's architecture) that can be read.
		r, err := m.Sudo(ctx, "for t in "+strings.Join(words, " ")+`; do command -v "$t" >/dev/null || { case "$t" in /*) set -- $t; [ -r "$1" ] ;; *) false ;; esac; } || echo "$t"; done`)
		if err != nil {
			return err
		}
		if missing := strings.Fields(string(r.Stdout)); len(missing) > 0 {
			return fmt.Errorf("machine %s: lacks %s (not on root's PATH, or no such file)", m.Name(), strings.Join(missing, ", "))
		}
	}
	return nil
}

// listening lists the machine's listening TCP sockets, with the processes that hold them
// (ss -ltnpH, of Debian's iproute2), then a line "# group PID PGID" for each of those
// processes, then "# lockbreaker PGID" for each server a run started there (its pidfile
// under Dir). It reads and changes nothing else.
const listening = `listening=$(ss -ltnpH) || exit
printf '%s\n' "$listening"
for pid in $(printf '%s\n' "$listening" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
	echo "# group $pid $(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f3)"
done
for p in ` + Dir + `/*/pid; do [ -f "$p" ] && echo "# lockbreaker $(cat "$p")"; done
true`

// checkPorts refuses a machine where another process listens on one of ports, on any of
// its addresses, so that the run's server could not. A server an earlier run left there
// (in a process group its pidfile names) does not count: the run stops it first.
func (m *Machine) checkPorts(ctx context.Context, ports []int) error {
	if len(ports) == 0 {
		return nil
	}
	r, err := m.Sudo(ctx, listening)
	if err != nil {
		return fmt.Errorf("machine %s: cannot list the ports in use with ss (Debian's iproute2): %w", m.Name(), unwrapped(err))
	}
	if taken := takenPorts(string(r.Stdout), ports); len(taken) > 0 {
		return fmt.Errorf("machine %s: %s: the run's servers listen there; stop what listens, or use another machine",
			m.Name(), strings.Join(taken, ", "))
	}
	return nil
}

// ssProcess is a process ss -p names as holding a socket: users:(("name",pid=N,fd=M),...).
var ssProcess = regexp.MustCompile(`\("([^"]*)",pid=(\d+),`)

// takenPorts reads what listening printed and says which of ports another process listens
// on: "port 6379 is taken by redis-server (pid 812)", or without the process when ss
// cannot say, in the order of ports.
func takenPorts(out string, ports []int) []string {
	group, ours := map[string]string{}, map[string]bool{}
	var sockets []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "#" && f[1] == "group":
			group[f[2]] = f[3]
		case len(f) == 3 && f[0] == "#" && f[1] == "lockbreaker":
			ours[f[2]] = true
		case len(f) > 0 && f[0] != "#":
			sockets = append(sockets, line)
		}
	}
	taken, named := map[int]bool{}, map[int][]string{}
	for _, line := range sockets {
		port, ok := localPort(line)
		if !ok || !slices.Contains(ports, port) {
			continue
		}
		procs := ssProcess.FindAllStringSubmatch(line, -1)
		if slices.ContainsFunc(procs, func(p []string) bool { return ours[p[2]] || ours[group[p[2]]] }) {
			continue // a server of an earlier run's, which this one stops
		}
		taken[port] = true
		for _, p := range procs {
			named[port] = append(named[port], fmt.Sprintf("%s (pid %s)", p[1], p[2]))
		}
	}
	var said []string
	for _, port := range ports {
		switch names := slices.Compact(slices.Sorted(slices.Values(named[port]))); {
		case !taken[port]:
		case len(names) == 0:
			said = append(said, fmt.Sprintf("port %d is taken", port))
		default:
			said = append(said, fmt.Sprintf("port %d is taken by %s", port, strings.Join(names, " and ")))
		}
	}
	return said
}

// localPort is the port of the local address of a line of ss: its first word with a colon
// (0.0.0.0:6379, [::]:6379, *:6379, 127.0.0.1%lo:53).
func localPort(line string) (int, bool) {
	for _, w := range strings.Fields(line) {
		if i := strings.LastIndexByte(w, ':'); i >= 0 {
			port, err := strconv.Atoi(w[i+1:])
			return port, err == nil
		}
	}
	return 0, false
}

// install installs the packages the machine lacks (dpkg says which), from its own apt
// sources.
func (m *Machine) install(ctx context.Context, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	words := make([]string, len(pkgs))
	for i, p := range pkgs {
		words[i] = shellwords.Quote(p)
	}
	_, err := m.Sudo(ctx, `missing=
for p in `+strings.Join(words, " ")+`; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null`)
	if err != nil {
		return fmt.Errorf("machine %s: cannot install %s: %w", m.Name(), strings.Join(pkgs, " "), unwrapped(err))
	}
	return nil
}

// unwrapped is an *ExitError's last words, or err.
func unwrapped(err error) error {
	var exit *ExitError
	if errors.As(err, &exit) {
		if last := lastLine(exit.Stderr); last != "" {
			return errors.New(last)
		}
		return fmt.Errorf("exit %d", exit.ExitCode)
	}
	return err
}

// checkClock refuses a machine whose wall clock is further than most from this one's, by
// more than the round trip that read it could account for.
func (m *Machine) checkClock(ctx context.Context, most time.Duration) error {
	sent := time.Now()
	r, err := m.Run(ctx, "date +%s%N", nil)
	answered := time.Now()
	if err != nil {
		return err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(r.Stdout)), 10, 64)
	if err != nil {
		return fmt.Errorf("machine %s: cannot read its clock (date +%%s%%N said %q)", m.Name(), strings.TrimSpace(string(r.Stdout)))
	}
	mid := sent.Add(answered.Sub(sent) / 2)
	offset := time.Unix(0, ns).Sub(mid)
	if slack := answered.Sub(sent) / 2; offset.Abs()-slack > most {
		way := "ahead of"
		if offset < 0 {
			way = "behind"
		}
		return fmt.Errorf("machine %s: its clock is %s %s this machine's, more than %s (set it right, or run NTP)",
			m.Name(), offset.Abs().Round(time.Millisecond), way, most)
	}
	return nil
}

// capSysTime is CAP_SYS_TIME's bit in a capability set.
const capSysTime = 25

// checkSetClock refuses a machine whose root cannot set the system clock: it lacks
// CAP_SYS_TIME (a container, where the clock is the host's).
func (m *Machine) checkSetClock(ctx context.Context) error {
	r, err := m.Sudo(ctx, "grep '^CapEff:' /proc/self/status")
	if err != nil {
		return err
	}
	f := strings.Fields(string(r.Stdout))
	caps, perr := uint64(0), errors.New("no CapEff line")
	if len(f) == 2 {
		caps, perr = strconv.ParseUint(f[1], 16, 64)
	}
	switch {
	case perr != nil:
		return fmt.Errorf("machine %s: cannot read root's capabilities (%v)", m.Name(), perr)
	case caps&(1<<capSysTime) == 0:
		return fmt.Errorf("machine %s: root cannot set its system clock (no CAP_SYS_TIME: a container shares its host's clock); "+
			"move the servers' clocks instead (--machine-clock faketime)", m.Name())
	}
	return nil
}

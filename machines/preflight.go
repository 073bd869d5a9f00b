package machines

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
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
}

// Preflight asks every machine at once whether it can serve the run: that it can be
// reached and logged in to, that root's commands can be run (Sudo), that each of the
// tools is there (once the packages to install are), and that its clock is within the
// bound. It changes nothing on any machine but the packages it installs. It returns the connections, in the order of addrs, when every machine can;
// otherwise none, and an error of one line per machine that cannot, naming it and why.
func Preflight(ctx context.Context, addrs []Address, login Login, needs Needs) ([]*Machine, error) {
	ms := make([]*Machine, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			m, err := Dial(ctx, a, login)
			if err == nil {
				ms[i], err = m, m.preflight(ctx, needs)
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

// preflight asks one machine what Preflight asks.
func (m *Machine) preflight(ctx context.Context, needs Needs) error {
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

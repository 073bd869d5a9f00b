package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/machines/machinestest"
)

// machines check names each machine that can serve, and refuses with one line and 254
// when one cannot, naming it and why.
func TestMachinesCheck(t *testing.T) {
	signer, key := machinestest.Key(t)
	good, noSudo := machinestest.Serve(t, signer.PublicKey()), machinestest.Serve(t, signer.PublicKey())
	noSudo.Sudo = false
	file := func(servers ...*machinestest.Server) string {
		var lines []string
		for _, s := range servers {
			lines = append(lines, s.Address())
		}
		path := filepath.Join(t.TempDir(), "machines.txt")
		if err := os.WriteFile(path, []byte("# the stand-ins\n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	code, stdout, stderr := lockbreaker(t, nil, "machines", "check", "--nodes-file", file(good), "--ssh-private-key", key)
	if code != 0 || stdout != good.Address()+": ready\n" {
		t.Errorf("a good machine: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = lockbreaker(t, nil, "machines", "check", "--nodes-file", file(good, noSudo), "--ssh-private-key", key)
	want := "lockbreaker: machine " + noSudo.Address() + ": cannot run commands as root (sudo): sudo: a password is required\n"
	if code != 254 || stderr != want {
		t.Errorf("a machine without sudo: exit %d, stderr %q; want 254 and %q", code, stderr, want)
	}
	// A run, too, is refused in one line naming the machine, before it makes anything: one
	// that nobody answers, one that does not take the key.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := fmt.Sprintf("tester@127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	_, stranger := machinestest.Key(t)
	for _, c := range []struct {
		machine, key, says string
	}{
		{unreachable, key, "cannot reach it"},
		{good.Address(), stranger, "cannot log in"},
	} {
		nodes := filepath.Join(t.TempDir(), "machines.txt")
		if err := os.WriteFile(nodes, []byte(c.machine+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		store := filepath.Join(t.TempDir(), "store")
		code, _, stderr := lockbreaker(t, nil, "run", "--nodes-file", nodes, "--ssh-private-key", c.key, "--results", store)
		if _, err := os.Stat(store); code != 254 || !strings.HasPrefix(stderr, "lockbreaker: machine "+c.machine+": ") ||
			!strings.Contains(stderr, c.says) || strings.Count(stderr, "\n") != 1 || err == nil {
			t.Errorf("a run on %s with key %s: exit %d, stderr %q, store made: %v; want 254 and one line saying %q, nothing made",
				c.machine, c.key, code, stderr, err == nil, c.says)
		}
	}
}

// A run on a stand-in machine ended by Ctrl-C, or killed with SIGKILL and followed by
// clean with the machines file, leaves no server, file, directory or iptables rule of
// lockbreaker's on the machine, and no client network on this host (its fault cuts the
// holder alone off, so its clients have addresses of their own); a finished one neither
// (harness's TestRunOnAStandInMachine).
func TestKilledMachineRunsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a stand-in machine")
	}
	ms, file, key := standIns(t, "redis", 1)
	login := []string{"--nodes-file", file, "--ssh-private-key", key}
	for _, by := range []ending{ending(syscall.SIGINT), ending(syscall.SIGKILL)} {
		t.Run(by.String(), func(t *testing.T) {
			k := kill{killMoment{phase: "mid-run", name: "clients started", system: "redis", line: "clients running"}, by}
			code, pid, printed, stderr := killRun(t, k.m, k.by, append([]string{"run", "--system", "redis", "--nemesis", "partition-holder",
				"--clients", "3", "--ttl", "1s", "--time-limit", "30s", "--results", t.TempDir()}, login...)...)
			checkExit(t, k, code, stderr)
			bridges := fmt.Sprintf("/sys/class/net/lbr-%d-*", pid)
			if by == ending(syscall.SIGKILL) {
				if left, _ := filepath.Glob(bridges); len(left) == 0 {
					t.Fatal("the killed run left no client network on this host: the test proves nothing of clean")
				}
				// Before leftBehind, whose clean of the run's containers sweeps dead client networks too.
				code, stdout, stderr := lockbreaker(t, nil, append([]string{"clean"}, login...)...)
				if code != 0 || !strings.Contains(stdout, "killed 1 servers") || !strings.Contains(stdout, "client networks of runs on machines") {
					t.Errorf("clean --nodes-file: exit %d, stdout %q, stderr %q; want the killed run's server and client network removed",
						code, stdout, stderr)
				}
			}
			leftBehind(t, by, pid, printed, nil)
			leftOn(t, ms, key)
			if left, _ := filepath.Glob(bridges); len(left) > 0 {
				t.Errorf("this host keeps the run's client network: %q", left)
			}
			rules, err := exec.Command("sh", "-c", "iptables -w -S; iptables -w -t nat -S").Output()
			if tag := fmt.Sprintf("lockbreaker:lbr-%d-", pid); err != nil || strings.Contains(string(rules), tag) {
				t.Errorf("this host keeps the run's iptables rules (%v):\n%s", err, rules)
			}
		})
	}
}

// A run whose node keeps its data on a disk served on its machine (power-loss), killed with
// SIGKILL while the holder is paused and its node loses its power, leaves nothing there
// once clean --nodes-file has run: no disk daemon, no mount, no directory.
func TestKilledPowerLossRunOnAMachineLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a stand-in machine")
	}
	ms, file, key := standIns(t, "redis", 1)
	login := []string{"--nodes-file", file, "--ssh-private-key", key}
	k := kill{killMoment{phase: "mid-run", name: "holder's node powered off", system: "redis", paused: true}, ending(syscall.SIGKILL)}
	code, pid, printed, stderr := killRun(t, k.m, k.by, append([]string{"run", "--system", "redis", "--nemesis", "power-loss",
		"--persistence", "aof-everysec", "--clients", "3", "--ttl", "1s", "--time-limit", "30s", "--results", t.TempDir()}, login...)...)
	checkExit(t, k, code, stderr)
	if code, stdout, stderr := lockbreaker(t, nil, append([]string{"clean"}, login...)...); code != 0 {
		t.Errorf("clean --nodes-file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	leftBehind(t, k.by, pid, printed, nil)
	leftOn(t, ms, key)
}

// The kleppmann suite with a machines file meets, on stand-in machines of each system, the
// expectations of every cell it keeps, as in containers; the cells the machines cannot
// serve (another system's, or the harness's own) are left out, each said. In
// the long tier (LOCKBREAKER_LONG=1): each system's stand-ins, one seed a cell. Every
// stand-in has Redis too (the node image's), so Sentinel's six also run the Redis and
// Redlock cells.
func TestKleppmannSuiteOnStandInMachines(t *testing.T) {
	if os.Getenv("LOCKBREAKER_LONG") != "1" {
		t.Skip("the kleppmann suite on stand-in machines runs in the long tier (make test-long)")
	}
	for _, sys := range []struct {
		name     string
		machines int
	}{{"sentinel", 6}, {"zookeeper", 3}, {"etcd", 3}, {"postgres", 1}} {
		t.Run(sys.name, func(t *testing.T) {
			ms, file, key := standIns(t, sys.name, sys.machines)
			code, stdout, stderr := lockbreaker(t, nil, "suite", "kleppmann", "--nodes-file", file, "--ssh-private-key", key,
				"--results", t.TempDir())
			t.Logf("suite kleppmann on %d %s stand-ins:\n%s", sys.machines, sys.name, stdout)
			if code != 0 || !strings.Contains(stdout, "MET ") {
				t.Errorf("exit %d, want 0 with cells met\n%s", code, stderr)
			}
			leftOn(t, ms, key)
		})
	}
}

// standIns starts n stand-in machines of system sys for the test, and writes a machines
// file naming them and their key.
func standIns(t *testing.T, sys string, n int) (ms []containers.StandIn, file, key string) {
	t.Helper()
	dir := t.TempDir()
	key = filepath.Join(dir, "id_ed25519")
	authorized, err := machines.WriteKey(key)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("machines-cli-%s-%d-%s", sys, os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	ms, err = containers.StartStandIns(context.Background(), id, sys, n, authorized, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { containers.StopStandIns(context.Background(), id) })
	var lines []string
	for _, m := range ms {
		lines = append(lines, "root@"+m.IP)
	}
	file = filepath.Join(dir, "machines.txt")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ms, file, key
}

// A run asked to move a machine's system clock, on a stand-in whose root cannot (a
// container shares its host's clock), is refused in one line naming the machine, 254,
// before anything changes on it.
func TestSystemClockOnAStandInIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a stand-in machine")
	}
	ms, file, key := standIns(t, "redis", 1)
	code, stdout, stderr := lockbreaker(t, nil, "run", "--system", "redis", "--nemesis", "clock-bump", "--machine-clock", "system",
		"--nodes-file", file, "--ssh-private-key", key, "--results", t.TempDir())
	want := "lockbreaker: machine root@" + ms[0].IP + ": root cannot set its system clock (no CAP_SYS_TIME"
	if code != 254 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 254 and one line starting %q", code, stdout, stderr, want)
	}
	leftOn(t, ms, key)
}

// leftOn fails t when a stand-in machine keeps anything of lockbreaker's: its directory, a
// server the run started, a rule of its iptables chain.
func leftOn(t *testing.T, ms []containers.StandIn, key string) {
	t.Helper()
	for _, s := range ms {
		m, err := machines.Dial(context.Background(), machines.Address{User: "root", Host: s.IP}, machines.Login{KeyFile: key})
		if err != nil {
			t.Fatal(err)
		}
		left, err := m.Run(context.Background(), "ls "+machines.Dir+" 2>/dev/null; pgrep -l 'redis-server|redis-sentinel|java|etcd|postgres|pgbouncer'; "+
			"iptables -S 2>/dev/null | grep lockbreaker; grep lockbreaker-disk /proc/mounts; pgrep -af 'disk[.]sock'; true", nil)
		m.Close()
		if err != nil || len(strings.TrimSpace(string(left.Stdout))) > 0 {
			t.Errorf("machine %s keeps lockbreaker's: %q, %v", s.IP, left.Stdout, err)
		}
	}
}

// A run on a machine that cannot serve it is refused in one line naming the machine and
// why, with 254, before it makes anything: no run directory, nothing installed on the
// machine. A disk fault needs /dev/fuse; with --no-install the packages must be there; the
// ports the run's servers take must be free.
func TestRunRefusedOnAMachineIsOneLineAnd254(t *testing.T) {
	for _, c := range []struct {
		name    string
		machine func(*machinestest.Server)
		args    []string
		says    string
	}{
		{"a disk fault without FUSE", func(m *machinestest.Server) { m.NoFUSE = true },
			[]string{"run", "--system", "redis", "--nemesis", "power-loss", "--no-install"},
			"has no /dev/fuse, which the faults on the nodes' disks serve them through"},
		{"a package lacking", func(m *machinestest.Server) { m.Missing = []string{"/usr/lib/postgresql/15/bin/postgres"} },
			[]string{"run", "--system", "postgres", "--no-install"},
			"lacks /usr/lib/postgresql/15/bin/postgres (not on root's PATH, or no such file)"},
		{"a port taken", func(m *machinestest.Server) {
			m.Listening = []string{`LISTEN 0 511 0.0.0.0:6379 0.0.0.0:* users:(("redis-server",pid=812,fd=6))`, "# group 812 812"}
		}, []string{"run", "--system", "redis"},
			"port 6379 is taken by redis-server (pid 812): the run's servers listen there; stop what listens, or use another machine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			signer, key := machinestest.Key(t)
			m := machinestest.Serve(t, signer.PublicKey())
			c.machine(m)
			file := filepath.Join(t.TempDir(), "machines.txt")
			if err := os.WriteFile(file, []byte(m.Address()+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			results := filepath.Join(t.TempDir(), "results")
			code, _, stderr := lockbreaker(t, nil, append(c.args, "--nodes-file", file, "--ssh-private-key", key, "--results", results)...)
			want := "lockbreaker: machine " + m.Address() + ": " + c.says + "\n"
			if code != 254 || stderr != want {
				t.Errorf("exit %d, stderr %q; want 254 and %q", code, stderr, want)
			}
			if _, err := os.Stat(results); !os.IsNotExist(err) {
				t.Errorf("the refused run made %s (stat: %v)", results, err)
			}
			if n := m.Installs.Load(); n > 0 {
				t.Errorf("the refused run installed packages on the machine %d times", n)
			}
		})
	}
}

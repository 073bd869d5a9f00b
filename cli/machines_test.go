package cli

import (
	"context"
	"fmt"
	"io"
	"os"
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
}

// A run on a stand-in machine ended by Ctrl-C, or killed with SIGKILL and followed by
// clean with the machines file, leaves no server, file or directory of lockbreaker's on the
// machine; a finished one neither (harness's TestRunOnAStandInMachine).
func TestKilledMachineRunsLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a stand-in machine")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	authorized, err := machines.WriteKey(key)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("machines-cli-test-%d", os.Getpid())
	ms, err := containers.StartStandIns(context.Background(), id, "redis", 1, authorized, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { containers.StopStandIns(context.Background(), id) })
	file := filepath.Join(dir, "machines.txt")
	if err := os.WriteFile(file, []byte("root@"+ms[0].IP+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	login := []string{"--nodes-file", file, "--ssh-private-key", key}
	for _, by := range []ending{ending(syscall.SIGINT), ending(syscall.SIGKILL)} {
		t.Run(by.String(), func(t *testing.T) {
			k := kill{killMoment{phase: "mid-run", name: "clients started", system: "redis", line: "clients running"}, by}
			code, pid, printed, stderr := killRun(t, k.m, k.by, append([]string{"run", "--system", "redis", "--nemesis", "pause-holder",
				"--clients", "3", "--ttl", "1s", "--time-limit", "30s", "--results", t.TempDir()}, login...)...)
			checkExit(t, k, code, stderr)
			leftBehind(t, by, pid, printed, nil)
			if by == ending(syscall.SIGKILL) {
				code, stdout, stderr := lockbreaker(t, nil, append([]string{"clean"}, login...)...)
				if code != 0 || !strings.Contains(stdout, "killed 1 servers") {
					t.Errorf("clean --nodes-file: exit %d, stdout %q, stderr %q; want the killed run's server killed", code, stdout, stderr)
				}
			}
			m, err := machines.Dial(context.Background(), machines.Address{User: "root", Host: ms[0].IP}, machines.Login{KeyFile: key})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			left, err := m.Run(context.Background(), "ls "+machines.Dir+" 2>/dev/null; pgrep -l redis-server; true", nil)
			if err != nil || len(strings.TrimSpace(string(left.Stdout))) > 0 {
				t.Errorf("the machine keeps lockbreaker's: %q, %v", left.Stdout, err)
			}
		})
	}
}

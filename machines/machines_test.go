package machines

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/machines/machinestest"
	"github.com/lockbreaker/lockbreaker/system"
	"golang.org/x/crypto/ssh/knownhosts"
)

// login is a login with the key file.
func login(keyFile string) Login {
	return Login{KeyFile: keyFile, Timeout: 10 * time.Second}
}

// address is where s listens.
func address(t *testing.T, s *machinestest.Server) Address {
	t.Helper()
	a, err := ParseAddress(s.Address())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// machine serves a machine and dials it.
func machine(t *testing.T, sessions int) (*machinestest.Server, *Machine) {
	t.Helper()
	signer, file := machinestest.Key(t)
	s := machinestest.Serve(t, signer.PublicKey())
	l := login(file)
	l.MaxSessions = sessions
	m, err := Dial(context.Background(), address(t, s), l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return s, m
}

func TestParse(t *testing.T) {
	good := "# the staging cluster\nn1.example\nadmin@n2.example:2222  # the odd one\n\n[::1]:22\nops@10.0.0.4\n"
	got, err := Parse(strings.NewReader(good), "machines.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []Address{{Host: "n1.example"}, {User: "admin", Host: "n2.example", Port: 2222}, {Host: "::1", Port: 22}, {User: "ops", Host: "10.0.0.4"}}
	if !slices.Equal(got, want) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if a := want[1].String(); a != "admin@n2.example:2222" {
		t.Errorf("address %q written back as %q", "admin@n2.example:2222", a)
	}
	for _, bad := range []struct{ file, says string }{
		{"n1\n@n2\n", "machines.txt:2: machine \"@n2\": an empty user before @"},
		{"n1:99999\n", "machines.txt:1: machine \"n1:99999\": port \"99999\" is not a number from 1 to 65535"},
		{"n1 n2\n", "machines.txt:1: machine \"n1 n2\": want host, user@host, host:port or user@host:port"},
		{"n1\nroot@n1:22\n", "machines.txt:2: machine root@n1:22 is named on line 1 already"},
		{"# nothing\n", "machines.txt: no machine in it"},
	} {
		if _, err := Parse(strings.NewReader(bad.file), "machines.txt"); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%q: %v, want it to say %q", bad.file, err, bad.says)
		}
	}
}

// A command's output and exit code come back; one that fails says its last words.
func TestRunExitCodes(t *testing.T) {
	_, m := machine(t, 0)
	ctx := context.Background()
	r, err := m.Run(ctx, "echo hi", nil)
	if err != nil || string(r.Stdout) != "hi\n" || r.ExitCode != 0 {
		t.Errorf("echo hi: %+v, %v", r, err)
	}
	r, err = m.Run(ctx, "exit 3", nil)
	var exit *ExitError
	if !errors.As(err, &exit) || r.ExitCode != 3 || !strings.HasSuffix(err.Error(), "exit 3 exited with 3: it failed") {
		t.Errorf("exit 3: %+v, %v; want exit code 3 and its last words", r, err)
	}
}

// A command still running when its context ends is given up, and the machine serves the
// next command.
func TestRunEndsWithItsContext(t *testing.T) {
	s, m := machine(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(ctx, "block", nil)
		done <- err
	}()
	<-s.Started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a command whose context ended: %v, want canceled", err)
	}
	if _, err := m.Run(context.Background(), "echo hi", nil); err != nil {
		t.Errorf("the next command: %v", err)
	}
}

// No more sessions are open at once than the bound: with two commands running on a
// machine that allows two, a third waits, and is given up when its context ends first.
func TestSessionsAreBounded(t *testing.T) {
	s, m := machine(t, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { m.Run(context.Background(), "hold", nil) })
	}
	<-s.Started
	<-s.Started
	// Both took a session of the machine's two: a third has none to take, so its Run can
	// only give up (with sessions to spare it could as well have gone on).
	if len(m.sessions) != 2 || cap(m.sessions) != 2 {
		t.Fatalf("%d of %d sessions taken by two running commands, want 2 of 2", len(m.sessions), cap(m.sessions))
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Run(ended, "echo hi", nil); err == nil || !strings.Contains(err.Error(), "waiting for a session") {
		t.Errorf("a third command beside two: %v, want it to wait for a session", err)
	}
	s.Release <- struct{}{}
	s.Release <- struct{}{}
	wg.Wait()
	if _, err := m.Run(context.Background(), "echo hi", nil); err != nil {
		t.Errorf("once they ended: %v", err)
	}
	if most := s.MaxOpen.Load(); most > 2 {
		t.Errorf("%d sessions were open at once, more than 2", most)
	}
}

// A connection that broke is dialed again for the next command.
func TestReconnects(t *testing.T) {
	s, m := machine(t, 0)
	if _, err := m.Run(context.Background(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	s.DropConnections()
	if _, err := m.Run(context.Background(), "echo hi", nil); err != nil {
		t.Errorf("after the connection broke: %v", err)
	}
}

// A key the machine does not take, a host key known_hosts does not list, and a machine
// nobody listens on are each refused, naming the machine.
func TestDialRefuses(t *testing.T) {
	signer, file := machinestest.Key(t)
	s := machinestest.Serve(t, signer.PublicKey())
	addr := address(t, s)
	_, stranger := machinestest.Key(t)
	if _, err := Dial(context.Background(), addr, login(stranger)); err == nil || !strings.Contains(err.Error(), "cannot log in") {
		t.Errorf("a key it does not take: %v", err)
	}
	other, _ := machinestest.Key(t)
	known := filepath.Join(t.TempDir(), "known_hosts")
	hostPort := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	line := knownhosts.Line([]string{knownhosts.Normalize(hostPort)}, other.PublicKey())
	if err := os.WriteFile(known, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := login(file)
	l.KnownHosts = known
	if _, err := Dial(context.Background(), addr, l); err == nil || !strings.Contains(err.Error(), "key mismatch") {
		t.Errorf("a host key known_hosts does not list: %v", err)
	}
	line = knownhosts.Line([]string{knownhosts.Normalize(hostPort)}, s.HostKey.PublicKey())
	if err := os.WriteFile(known, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m, err := Dial(context.Background(), addr, l); err != nil {
		t.Errorf("the host key known_hosts lists: %v", err)
	} else {
		m.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := Address{User: "tester", Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	ln.Close()
	if _, err := Dial(context.Background(), closed, login(file)); err == nil || !strings.Contains(err.Error(), "cannot reach it") {
		t.Errorf("nobody listening: %v", err)
	}
}

// Sudo runs a command as root: with -n, or with the password on sudo's stdin.
func TestSudo(t *testing.T) {
	s, m := machine(t, 0)
	if r, err := m.Sudo(context.Background(), "echo hi"); err != nil || string(r.Stdout) != "hi\n" {
		t.Errorf("sudo -n echo hi: %+v, %v", r, err)
	}
	s.Sudo, s.Password = false, "secret"
	if _, err := m.Sudo(context.Background(), "echo hi"); err == nil {
		t.Error("sudo -n on a machine that wants a password passed")
	}
	m.login.SudoPassword = "secret"
	if r, err := m.Sudo(context.Background(), "echo hi"); err != nil || string(r.Stdout) != "hi\n" {
		t.Errorf("sudo -S echo hi: %+v, %v", r, err)
	}
}

// Files go to a machine and come back through SFTP.
func TestPutAndGet(t *testing.T) {
	_, m := machine(t, 0)
	path := filepath.Join(t.TempDir(), "redis.conf")
	if err := m.Put(context.Background(), path, []byte("port 6379\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(context.Background(), path)
	if err != nil || string(got) != "port 6379\n" {
		t.Errorf("got %q, %v", got, err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("the file: %v, %v; want mode 0640", info, err)
	}
}

// Preflight refuses, one line each, every machine that cannot serve, and hands out no
// connection; when all can, it hands out one each, in order. A machine refused is left as
// it was: no package is installed on it.
func TestPreflight(t *testing.T) {
	signer, file := machinestest.Key(t)
	needs := Needs{Install: []string{"redis-server"}, Tools: []string{"iptables", "redis-server"}, MaxClockOffset: time.Second,
		SetClock: true, Ports: Ports{Nodes: 6, Node: []int{6379}}}
	var addrs []Address
	servers := make([]*machinestest.Server, 6)
	for i := range servers {
		servers[i] = machinestest.Serve(t, signer.PublicKey())
		addrs = append(addrs, address(t, servers[i]))
	}
	// The good machine's 6379 is held by the server an earlier run left, which the run stops.
	servers[0].Listening = []string{
		`LISTEN 0      128          0.0.0.0:22        0.0.0.0:*    users:(("sshd",pid=500,fd=3))`,
		`LISTEN 0      511          0.0.0.0:6379      0.0.0.0:*    users:(("redis-server",pid=700,fd=6))`,
		"# group 500 500", "# group 700 700", "# lockbreaker 700",
	}
	servers[1].Sudo = false
	servers[2].Missing = []string{"redis-server"}
	servers[3].Skew = -time.Minute
	servers[4].NoClockRights = true
	servers[5].Listening = []string{`LISTEN 0      511        127.0.0.1:6379      0.0.0.0:*    users:(("redis-server",pid=812,fd=6))`, "# group 812 812"}
	ms, err := Preflight(context.Background(), addrs, login(file), needs)
	if ms != nil {
		t.Errorf("preflight with failures handed out %d connections", len(ms))
	}
	lines := strings.Split(fmt.Sprint(err), "\n")
	want := []string{
		addrs[1].String() + ": cannot run commands as root (sudo): sudo: a password is required",
		addrs[2].String() + ": lacks redis-server (not on root's PATH, or no such file)",
		addrs[3].String() + ": its clock is ", // a minute, give or take the round trip: "59.999s behind" on a busy machine
		addrs[4].String() + ": root cannot set its system clock (no CAP_SYS_TIME",
		"machine " + addrs[5].String() + ": port 6379 is taken by redis-server (pid 812): the run's servers listen there; stop what listens, or use another machine",
	}
	if len(lines) != len(want) {
		t.Fatalf("preflight said %q, want %d lines", lines, len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q, want it to say %q", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[2], "behind this machine's, more than 1s") {
		t.Errorf("line 3: %q, want the clock behind, by more than 1s", lines[2])
	}
	// A machine refused before the install is left as it was: the port's above all. The
	// tools are looked for once installed, on the machine that lacks one too.
	for i, s := range servers {
		if n := s.Installs.Load(); (i == 0 || i == 2) != (n > 0) {
			t.Errorf("machine %d (%s) was asked to install %d times", i, addrs[i], n)
		}
	}
	ms, err = Preflight(context.Background(), []Address{addrs[0], addrs[0]}, login(file), needs)
	if err != nil || len(ms) != 2 {
		t.Fatalf("preflight of good machines: %d, %v", len(ms), err)
	}
	for _, m := range ms {
		m.Close()
	}
}

// A port counts as taken when another process listens on it, on any address, named when
// ss names it; a server an earlier run left (its pidfile's process group) does not count,
// nor a port the run's servers do not take.
func TestTakenPorts(t *testing.T) {
	listening := []string{
		`LISTEN 0      128          0.0.0.0:22        0.0.0.0:*    users:(("sshd",pid=500,fd=3))`,
		`LISTEN 0      511          0.0.0.0:6379      0.0.0.0:*    users:(("redis-server",pid=812,fd=6))`,
		`LISTEN 0      511             [::]:6379         [::]:*    users:(("redis-server",pid=812,fd=7))`,
		`LISTEN 0      4096               *:2380            *:*`,
		`LISTEN 0      511          0.0.0.0:16379     0.0.0.0:*    users:(("redis-server",pid=813,fd=6))`,
		`LISTEN 0      128    127.0.0.1%lo:5432      0.0.0.0:*    users:(("postgres",pid=900,fd=5))`,
		`LISTEN 0      128          0.0.0.0:6432      0.0.0.0:*    users:(("pgbouncer",pid=901,fd=5))`,
		`LISTEN 0      128          0.0.0.0:2181      0.0.0.0:*    users:(("java",pid=950,fd=9),("java",pid=951,fd=9))`,
		"# group 500 500", "# group 812 812", "# group 813 813", "# group 900 900", "# group 901 900",
		"# group 950 950", "# group 951 950",
	}
	for _, tt := range []struct {
		name  string
		ours  []string // the "# lockbreaker" lines
		ports []int
		want  []string
	}{
		{"nothing asked", nil, nil, nil},
		{"free", nil, []int{2379, 26379}, nil},
		{"taken on every address, named once", nil, []int{6379}, []string{"port 6379 is taken by redis-server (pid 812)"}},
		{"a process ss cannot name", nil, []int{2380}, []string{"port 2380 is taken"}},
		{"in the order asked", nil, []int{2380, 2181, 6379}, []string{"port 2380 is taken",
			"port 2181 is taken by java (pid 950) and java (pid 951)", "port 6379 is taken by redis-server (pid 812)"}},
		{"an earlier run's server and its process group", []string{"# lockbreaker 900"}, []int{5432, 6432, 6379},
			[]string{"port 6379 is taken by redis-server (pid 812)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := takenPorts(strings.Join(append(slices.Clone(listening), tt.ours...), "\n")+"\n", tt.ports)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// The listing runs as written under this host's sh and ss: a port this test listens on is
// taken, by this process.
func TestListingPortsHere(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("no ss here (iproute2)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	out, err := exec.Command("sh", "-c", listening).Output()
	if err != nil {
		t.Fatalf("sh -c listening: %v", err)
	}
	comm, err := os.ReadFile("/proc/self/comm") // the name ss gives
	if err != nil {
		t.Fatal(err)
	}
	got := takenPorts(string(out), []int{port})
	if want := fmt.Sprintf("port %d is taken by %s (pid %d)", port, strings.TrimSpace(string(comm)), os.Getpid()); !slices.Equal(got, []string{want}) {
		t.Errorf("listing %d while this test listens on it: %q, want %q\n%s", port, got, want, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("# group %d %d\n", os.Getpid(), syscall.Getpgrp())) {
		t.Errorf("no process group of this process's in the listing:\n%s", out)
	}
}

// A run's servers take their client ports, their peers' and the pooler's when it has one:
// the nodes' on the first machines, the monitors' on those after them.
func TestServerPorts(t *testing.T) {
	for _, tt := range []struct {
		system, pooler string
		nodes          int
		want           [][]int // by machine
	}{
		{"redis", "", 1, [][]int{{6379}}},
		{"redlock", "", 5, [][]int{{6379}, {6379}, {6379}, {6379}, {6379}}},
		{"sentinel", "", 3, [][]int{{6379}, {6379}, {6379}, {26379}, {26379}, {26379}}},
		{"zookeeper", "", 3, [][]int{{2181, 2888, 3888}, {2181, 2888, 3888}, {2181, 2888, 3888}}},
		{"etcd", "", 3, [][]int{{2379, 2380}, {2379, 2380}, {2379, 2380}}},
		{"postgres", "", 1, [][]int{{5432}}},
		{"postgres", "pgbouncer-transaction", 1, [][]int{{5432, 6432}}},
	} {
		sys, err := system.Lookup(tt.system)
		if err != nil {
			t.Fatal(err)
		}
		p := ServerPorts(sys, system.Cluster{Nodes: tt.nodes, TTL: 2 * time.Second, Pooler: tt.pooler})
		for i, want := range tt.want {
			if got := p.On(i); !slices.Equal(got, want) {
				t.Errorf("%s %s: machine %d's ports %v, want %v", tt.system, tt.pooler, i, got, want)
			}
		}
	}
}

// A machine must have what its node runs: the command, and the programs and jars its
// words name by path, never the node's own files nor a URL.
func TestToolsAreWhatTheNodesRun(t *testing.T) {
	want := map[string][]string{
		"redis":     {"redis-server"},
		"sentinel":  {"redis-server", "redis-sentinel"},
		"zookeeper": {"java", "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"},
		"etcd":      {"etcd"},
		"postgres":  {"/usr/lib/postgresql/15/bin/postgres"},
	}
	for name, tools := range want {
		sys, err := system.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := Tools(sys, system.Cluster{Nodes: 3, TTL: 2 * time.Second}); !slices.Equal(got, tools) {
			t.Errorf("%s: tools %q, want %q", name, got, tools)
		}
	}
}

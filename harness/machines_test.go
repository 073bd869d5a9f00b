package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/nodes/nodestest"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/system"
)

// A run whose node is a stand-in machine reached over SSH, its service a team's own described
// in a system file (Redis behind a start script of theirs, copied from here, its
// configuration file, a preparation and a ready command run on the machine): a holder
// paused and cut off the node alone (partition-holder: the clients on addresses of their
// own, routed out through this host) breaks its lock as in a container, with its hazard;
// the node's log comes back into the run directory, and nothing of lockbreaker's stays on
// the machine (its files were written under the node's directory alone) or here.
func TestRunOnAStandInMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a stand-in machine")
	}
	inLane(t, laneRedis)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	ip := standIns(ctx, t, "machines-test", key, 1)[0]
	file := filepath.Join(dir, "machines.txt")
	if err := os.WriteFile(file, []byte("root@"+ip+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	login := machines.Login{KeyFile: key}
	r := Runner{ResultsRoot: testStore(t), Progress: testWriter{t}, Worker: []string{exe}, Login: login}
	spec := kleppmannSpec(false)
	spec.Nemesis = []string{history.PartitionHolder.Name}
	spec.NodesFile = file
	spec.System, spec.SystemFile = "", writeSystemFile(t, dir)
	var run string
	for try := 1; ; try++ {
		var s results.Summary
		run, s, err = r.Run(ctx, spec)
		if err != nil {
			t.Fatalf("run on a stand-in machine: %v", err)
		}
		if verdicts(s)[checkers.MutualExclusion].Verdict == checkers.Invalid && hazardCount(s, history.GrantedInCut) > 0 {
			break
		}
		if try == dangerTries {
			t.Fatalf("no two holders after a cut in %d tries on a stand-in machine", try)
		}
		spec.Seed++
	}
	if log, err := os.ReadFile(filepath.Join(run, results.NodesDir, "n1.log")); err != nil || !strings.Contains(string(log), "Ready to accept connections") {
		t.Errorf("the node's log in the run directory: %v\n%s", err, log)
	}
	m, err := machines.Dial(ctx, machines.Address{User: "root", Host: ip}, login)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	left, err := m.Run(ctx, "ls "+machines.Dir+" /etc/lock.conf /usr/local/bin/start-lock 2>/dev/null; pgrep -l redis-server; "+
		"iptables -S | grep lockbreaker; true", nil)
	if err != nil || len(strings.TrimSpace(string(left.Stdout))) > 0 {
		t.Errorf("the machine keeps lockbreaker's: %q, %v", left.Stdout, err)
	}
	if bridges, _ := filepath.Glob(fmt.Sprintf("/sys/class/net/lbr-%d-*", os.Getpid())); len(bridges) > 0 {
		t.Errorf("this host keeps the run's client network: %q", bridges)
	}
}

// Heal is one contract wherever nodes live (nodes/nodestest): here on a stand-in machine,
// its one Redis node paused, cut off this host, off its clock, on a slow disk and killed
// at once, where the cut outlives the server it struck.
func TestHealContractOnAStandInMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a stand-in machine")
	}
	inLane(t, laneRedis)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key := filepath.Join(t.TempDir(), "id_ed25519")
	ip := standIns(ctx, t, "heal-test", key, 1)[0]
	m, err := machines.Dial(ctx, machines.Address{User: "root", Host: ip}, machines.Login{KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sys, err := system.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	c, err := machines.StartCluster(ctx, []*machines.Machine{m}, sys, system.Cluster{Nodes: 1, TTL: 2 * time.Second}, nodes.Faketime, true, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	nodestest.HealContract(t, c.Cluster, "n1", "n1")
}

// standIns starts n stand-in machines of Redis's image for the test, named by prefix,
// root let in with a new key written at key; their addresses.
func standIns(ctx context.Context, t *testing.T, prefix, key string, n int) []string {
	t.Helper()
	authorized, err := machines.WriteKey(key)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	ms, err := containers.StartStandIns(ctx, id, "redis", n, authorized, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := containers.StopStandIns(context.Background(), id); err != nil {
			t.Error(err)
		}
	})
	var ips []string
	for _, m := range ms {
		ips = append(ips, m.IP)
	}
	return ips
}

// writeSystemFile writes a system file into dir for a Redis of a team's own on machines:
// a start script copied from here, a configuration file, a preparation, a ready command
// run on the node; its path.
func writeSystemFile(t *testing.T, dir string) string {
	t.Helper()
	script := "#!/bin/sh\n[ -d data ] || exit 3 # made by the preparation\nexec redis-server \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "start.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "myredis.yaml")
	yaml := `name: myredis
nodes: 1
port: 6379
command: [/usr/local/bin/start-lock, /etc/lock.conf, --port, "{{port}}"]
files:
  - {path: /etc/lock.conf, content: "bind 0.0.0.0\nprotected-mode no\nappendonly no\nsave \"\"\n"}
ready: {command: [redis-cli, ping]}
clients: [redis]
copy:
  - {from: start.sh, to: /usr/local/bin/start-lock}
machine:
  prepare: mkdir -p data
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

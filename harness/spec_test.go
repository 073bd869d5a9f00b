package harness

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/execlock"
)

// What a spec names must exist here and fit together: refused with one line, a
// *SpecError, before anything starts. What is wrong on its face is said first
// (spec.Spec.Validate, whose own cases are spec's).
func TestCheckSpecRefusesWhatDoesNotFit(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"unknown system", func(s *Spec) { s.System = "consul" }, `unknown system "consul"`},
		{"unknown client", func(s *Spec) { s.Client = "nope" }, `unknown client "nope"`},
		{"an unknown client among others", func(s *Spec) { s.Client = "redis,nope" }, `unknown client "nope"`},
		{"a client of another system among others", func(s *Spec) { s.Client = "redis,redsync" }, `client "redsync" runs on redlock, not on "redis"`},
		{"a client without tokens among others, fenced", func(s *Spec) { s.Client, s.Fencing = "redis,redislock", true }, `--fencing on is not possible with client "redislock"`},
		{"extends on a lock that cannot", func(s *Spec) { s.Client, s.ExtendEvery = "redis,redislock", Duration(time.Second) }, `--extend-every is not possible with client "redis"`},
		{"a link node the cluster lacks", func(s *Spec) { s.System, s.Nemesis, s.LinkNode = "redlock", []string{"delay"}, "n6" }, "--link-node n6: the cluster has 5 nodes (n1 to n5)"},
		{"a link node no fault takes", func(s *Spec) { s.LinkNode = "n1" }, "--link-node and --link-answers narrow the faults on the clients' links (delay, delay-extend, reset-client, slow-network, timeout-client), not pause-holder"},
		{"a link node not named so", func(s *Spec) { s.Nemesis, s.LinkNode = []string{"delay"}, "node1" }, `--link-node must name a node as n1, n2..., got "node1"`},
		{"delay-extend without extends", func(s *Spec) { s.Client, s.Nemesis = "redislock", []string{"delay-extend"} }, "nemesis delay-extend acts on the holders' extends: it needs --extend-every"},
		{"unknown nemesis", func(s *Spec) { s.Nemesis = []string{"pause-holder", "meteor"} }, `unknown nemesis "meteor"`},
		{"even redlock", func(s *Spec) { s.System, s.Nodes = "redlock", 4 }, "redlock: 4 nodes (want an odd number"},
		{"two redis", func(s *Spec) { s.Nodes = 2 }, "redis: 2 nodes (it has 1)"},
		{"kleppmann on redis", func(s *Spec) { s.Nemesis = []string{"kleppmann-clock"} }, "needs --system redlock"},
		{"a schedule beside a nemesis that draws its own", func(s *Spec) {
			s.Nemesis = []string{"pause-client", "pause-holder"}
			s.Schedule = []runspec.Step{{Fault: "pause-client", Target: 1, For: Duration(time.Second)}}
		}, `--schedule: nemesis "pause-holder" draws its own faults and follows no written schedule`},
		{"a schedule waiting for a client's state, of a node's fault", func(s *Spec) {
			s.Nemesis = []string{"pause-node"}
			s.Schedule = []runspec.Step{{Fault: "pause-node", For: Duration(time.Second), When: history.Waiting}}
		}, "--schedule: step 1 waits for a client waiting, but pause-node strikes no client of its choosing"},
		{"a schedule holding a delay on", func(s *Spec) {
			s.Nemesis = []string{"delay"}
			s.Schedule = []runspec.Step{{Fault: "delay", For: Duration(time.Second), Until: runspec.Takeover}}
		}, "--schedule: step 1 lasts until a takeover, but delay cannot hold on past its length"},
		{"leader of redis", func(s *Spec) { s.Nemesis = []string{"partition-leader"} }, "has no leader to isolate"},
		{"persistence of zookeeper", func(s *Spec) { s.System, s.Persistence = "zookeeper", "none" }, `--persistence of zookeeper is one of force-sync, no-force-sync, got "none"`},
		{"persistence of the harness's lock", func(s *Spec) { s.System, s.Persistence = "local", "none" }, "--persistence applies to systems that choose what they sync (etcd, postgres, redis, redlock, sentinel, zookeeper), not local"},
		{"unknown persistence", func(s *Spec) { s.Persistence = "disk" }, `--persistence of redis is one of none, aof-everysec, aof-always, got "disk"`},
		{"replicas of redis", func(s *Spec) { s.MinReplicas = 1 }, "--min-replicas-to-write needs a primary with replicas (sentinel), not redis"},
		{"more replicas than there are", func(s *Spec) { s.System, s.MinReplicas = "sentinel", 3 }, "--min-replicas-to-write must be between 0 and 2 (the replicas of 3 nodes), got 3"},
		{"restart without kills", func(s *Spec) { s.RestartAfter = Duration(time.Second) }, "--restart-after and --restart-delay-ttl apply to nemeses that kill nodes"},
		{"delayed restart without kills", func(s *Spec) { s.RestartDelayTTL = true }, "apply to nemeses that kill nodes"},
		{"kill the harness", func(s *Spec) { s.System, s.Nemesis = "local", []string{"kill-node"} }, "served by the harness itself"},
		{"undirected without a target", func(s *Spec) { s.Nemesis, s.Undirected = []string{"pause-node"}, true },
			"--undirected applies to the nemeses that target a hazard (clock, clock-bump"},
		{"failover of redis", func(s *Spec) { s.Nemesis = []string{"failover"} }, "(try --system sentinel)"},
		{"a single client cut in the harness", func(s *Spec) { s.System, s.Nemesis = "local", []string{"partition-holder"} }, "local runs inside the harness"},
		{"held writes beside a client cut", func(s *Spec) { s.Nemesis = []string{"delay-holder", "partition-holder"} }, "run them apart"},
		{"a pooler in front of redis", func(s *Spec) { s.Pooler = "pgbouncer-transaction" },
			"--pooler applies to postgres, not redis, which has no pooler in front of it"},
		{"a pooler in the harness", func(s *Spec) { s.System, s.Pooler = "local", "pgbouncer-session" }, "--pooler applies to postgres, not local"},
		{"an unknown pooler", func(s *Spec) { s.System, s.Nemesis, s.Pooler = "postgres", nil, "pgbouncer-statement" },
			`--pooler must be pgbouncer-session or pgbouncer-transaction, got "pgbouncer-statement"`},
		{"a pooler's mode alone", func(s *Spec) { s.System, s.Nemesis, s.Pooler = "postgres", nil, "transaction" },
			`--pooler must be pgbouncer-session or pgbouncer-transaction, got "transaction"`},
		{"a program that is not there", func(s *Spec) { s.ClientCmd = []string{"/nonexistent/mylock"} }, `--client-cmd: exec: "/nonexistent/mylock"`},
		{"a bad ttl before an unknown system", func(s *Spec) { s.System, s.TTL = "consul", 0 }, "--ttl must be between 1ms and 1h, got 0s"},
		{"a derived test name too long", func(s *Spec) {
			s.Nemesis = slices.Repeat([]string{"pause-holder"}, 20)
		}, "test name must be at most 255 bytes"},
		{"a changed system file", func(s *Spec) {
			s.SystemFile, s.SystemFileSHA256 = systemFile(t, "checkspec-changed", ""), "0123456789abcdef"
		},
			"has changed since the run (sha256"},
		{"machines for a system that does not run there", func(s *Spec) { s.System, s.NodesFile = "local", machinesFile(t) },
			"--nodes-file: local does not run on machines (those that do: redis, redlock, sentinel, zookeeper, etcd, postgres, and a system file's"},
		{"machines for a system file that says nothing of them", func(s *Spec) {
			s.System, s.SystemFile, s.NodesFile = "", systemFile(t, "checkspec-nomachine", ""), machinesFile(t)
		}, "--nodes-file: the system file of checkspec-nomachine says nothing of machines: give it a machine key"},
		{"a system file's hash without it", func(s *Spec) { s.SystemFileSHA256 = "0123456789abcdef" }, "system_file_sha256 without system_file"},
		{"a built-in system and a system file", func(s *Spec) { s.System, s.SystemFile = "etcd", systemFile(t, "checkspec-etcd", "") },
			`--system "etcd" and --system-file`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := DefaultSpec()
			c.change(&s)
			_, err := CheckSpec(s)
			var se *SpecError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a SpecError containing %q", err, c.want)
			}
		})
	}
}

// systemFile writes a system file for a system named name, its text changed by extra
// lines, and returns its path.
func systemFile(t *testing.T, name, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	text := "name: " + name + "\nnodes: 1\nport: 6379\ncommand: [redis-server, --port, \"{{port}}\"]\nready: {tcp: true}\nclients: [redis]\n" + extra
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// machinesFile writes a machines file naming one machine, and returns its path.
func machinesFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "machines.txt")
	if err := os.WriteFile(path, []byte("root@192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A system file's system is registered by CheckSpec, once: the same file again is the
// same system, another file of the same name is refused.
func TestCheckSpecRegistersASystemFile(t *testing.T) {
	path := systemFile(t, "checkspec-mine", "")
	if _, err := system.Lookup("checkspec-mine"); err == nil {
		t.Fatal("registered before any spec named it")
	}
	s := DefaultSpec()
	s.SystemFile, s.Nemesis = path, []string{"none"}
	c, err := CheckSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Spec(); got.System != "checkspec-mine" || got.Client != "redis" || len(got.SystemFileSHA256) != 64 ||
		got.Test != "checkspec-mine-redis-none-nofence" || c.System().Name != "checkspec-mine" {
		t.Fatalf("spec %+v, system %s", got, c.System().Name)
	}
	var clients []string
	for _, cl := range workloads.ForSystem("checkspec-mine") {
		clients = append(clients, cl.Name)
	}
	if want := []string{"exec", "redis", "redislock"}; !slices.Equal(clients, want) {
		t.Errorf("clients %v, want %v", clients, want)
	}
	if _, err := CheckSpec(c.Spec()); err != nil {
		t.Errorf("the same file again: %v", err)
	}
	s.SystemFile = systemFile(t, "checkspec-mine", "about: another\n")
	if _, err := CheckSpec(s); err == nil || !strings.Contains(err.Error(), `system "checkspec-mine" was already described by another file`) {
		t.Errorf("another file of the same name: %v", err)
	}
}

func TestCheckSpecFillsDefaults(t *testing.T) {
	c, err := CheckSpec(DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Spec(); s.Client != "redis" || s.Test != "redis-redis-pause-holder-nofence" || s.PauseLength() != 2*s.TTL.Std() {
		t.Fatalf("client %q test %q pause %s", s.Client, s.Test, s.PauseLength())
	}
	s := DefaultSpec()
	s.ClientCmd = []string{"sh", "examples/python/redispy_lock.py"}
	if c, err = CheckSpec(s); err != nil {
		t.Fatal(err)
	}
	if s := c.Spec(); s.Client != "exec" || s.Test != "redis-exec-redispy_lock-pause-holder-nofence" {
		t.Fatalf("client %q test %q: want exec, named by its program", s.Client, s.Test)
	}
}

// Crash settings take their defaults where they apply, and only there.
func TestCheckSpecFillsCrashSettings(t *testing.T) {
	tests := []struct {
		name                 string
		change               func(*Spec)
		persistence          string
		maxLag, restartAfter time.Duration
	}{
		{"redis keeps nothing, a killed node is back at once", func(*Spec) {}, "none", 0, 0},
		{"zookeeper syncs by default", func(s *Spec) { s.System = "zookeeper" }, "force-sync", 0, 0},
		{"min replicas take Redis's lag", func(s *Spec) { s.System, s.MinReplicas = "sentinel", 1 }, "none", 10 * time.Second, 0},
		{"a restart delayed to a ttl by default", func(s *Spec) { s.Nemesis, s.RestartDelayTTL = []string{"kill-node"}, true }, "none", 0, 2 * time.Second},
		{"a chosen restart", func(s *Spec) { s.Nemesis, s.RestartAfter = []string{"kill-node"}, Duration(300*time.Millisecond) }, "none", 0, 300 * time.Millisecond},
		{"a restart delayed to a ttl", func(s *Spec) {
			s.Nemesis, s.RestartAfter, s.RestartDelayTTL = []string{"kill-node"}, Duration(300*time.Millisecond), true
		}, "none", 0, 2 * time.Second},
		{"a restart longer than a ttl", func(s *Spec) {
			s.Nemesis, s.RestartAfter, s.RestartDelayTTL = []string{"kill-node"}, Duration(5*time.Second), true
		}, "none", 0, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := checked(t, tt.change).Spec()
			if s.Persistence != tt.persistence || s.MinReplicasMaxLag.Std() != tt.maxLag || s.RestartDelay() != tt.restartAfter {
				t.Errorf("persistence %q, max lag %s, restart after %s; want %q, %s, %s",
					s.Persistence, s.MinReplicasMaxLag.Std(), s.RestartDelay(), tt.persistence, tt.maxLag, tt.restartAfter)
			}
		})
	}
}

// A spec names the exec client without linking it (spec.ExecClient).
func TestExecClientIsExeclocks(t *testing.T) {
	if runspec.ExecClient != execlock.Name {
		t.Fatalf("spec.ExecClient %q, execlock.Name %q", runspec.ExecClient, execlock.Name)
	}
}

// A lever this host cannot give (clients on addresses of their own without root, a throttle
// without a CPU controller) refuses the nemesis that pulls it, by name and with the reason,
// before anything starts; a nemesis that pulls neither is not asked about them.
func TestCheckSpecRefusesALeverTheHostLacks(t *testing.T) {
	defer func(addrs, caps func() error) { clientAddrsHere, cpuCapsHere = addrs, caps }(clientAddrsHere, cpuCapsHere)
	clientAddrsHere = func() error { return errors.New("not root") }
	cpuCapsHere = func() error { return errors.New("no CPU controller to throttle with") }
	cases := []struct {
		nemesis []string
		want    string
	}{
		{[]string{"partition-halves", "partition-client"}, "nemesis partition-client: not root"},
		{[]string{"throttle-holder"}, "nemesis throttle-holder: no CPU controller to throttle with"},
		{[]string{"pause-holder", "partition-halves"}, ""},
	}
	for _, c := range cases {
		s := DefaultSpec()
		s.System, s.Nodes, s.Client, s.Nemesis = "redlock", 5, "redlock", c.nemesis
		_, err := CheckSpec(s)
		var specErr *SpecError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v, want no refusal", c.nemesis, err)
		case c.want != "" && (!errors.As(err, &specErr) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want a SpecError saying %q", c.nemesis, err, c.want)
		}
	}
}

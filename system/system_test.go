package system

import (
	"strings"
	"testing"
	"time"
)

func TestCheckResolvesAndRefusesSizes(t *testing.T) {
	tests := []struct {
		system string
		nodes  int
		want   int
		err    string
	}{
		{"redis", 0, 1, ""},
		{"redis", 1, 1, ""},
		{"redis", 3, 0, "redis: 3 nodes (it has 1)"},
		{"redlock", 0, 5, ""},
		{"redlock", 7, 7, ""},
		{"redlock", 4, 0, "want an odd number"},
		{"redlock", 1, 0, "want 3 to 9"},
		{"redlock", 11, 0, "want 3 to 9"},
		{"zookeeper", 0, 3, ""},
		{"zookeeper", 1, 1, ""},
		{"zookeeper", 2, 0, "want an odd number"},
		{"zookeeper", -1, 0, "want 1 to 9"},
		{"local", 0, 1, ""},
		{"sentinel", 0, 3, ""},
		{"sentinel", 2, 2, ""},
		{"sentinel", 1, 0, "want 2 to 9"},
		{"etcd", 0, 3, ""},
		{"etcd", 5, 5, ""},
		{"etcd", 1, 0, "want 3 to 9"},
		{"etcd", 4, 0, "want an odd number"},
		{"postgres", 0, 1, ""},
		{"postgres", 3, 0, "postgres: 3 nodes (it has 1)"},
	}
	for _, tt := range tests {
		s, err := Lookup(tt.system)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Check(tt.nodes)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s %d: got %d, %v; want %d", tt.system, tt.nodes, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s %d: got %v, want an error containing %q", tt.system, tt.nodes, err, tt.err)
		}
	}
}

func TestLookupNamesTheKnownSystems(t *testing.T) {
	_, err := Lookup("consul")
	if err == nil || !strings.Contains(err.Error(), `unknown system "consul" (known: etcd, local, local-broken, postgres, redis, redlock, sentinel, zookeeper)`) {
		t.Fatalf("got %v", err)
	}
}

// Every descriptor is complete: what the CLI, containers and nemeses read is there.
func TestDescriptorsAreComplete(t *testing.T) {
	for _, s := range All() {
		if s.About == "" || s.DefaultClient == "" {
			t.Errorf("%s: no about line or default client", s.Name)
		}
		if _, err := s.Check(0); err != nil {
			t.Errorf("%s: its default size is refused: %v", s.Name, err)
		}
		if c := s.Container; c != nil {
			if c.Port == 0 || c.Node == nil || c.Ready == nil {
				t.Errorf("%s: container recipe lacks a port, a node setup or a readiness probe", s.Name)
			}
			if setup := c.Node(Cluster{Nodes: s.Sizes.Default}, 1); len(setup.Cmd) == 0 {
				t.Errorf("%s: node 1 has no command", s.Name)
			}
			if c.Image != nil && len(c.Image.Packages) == 0 {
				t.Errorf("%s: an image of its own with no packages", s.Name)
			}
		}
		if (s.Leader || s.Replicated) && (s.Container == nil || s.Container.Role == nil) {
			t.Errorf("%s: has a leader or a primary but no way to ask a node for its role", s.Name)
		}
		if s.Replicated && (s.Container == nil || s.Container.Monitors == nil) {
			t.Errorf("%s: replicated, but no monitors to promote a replica", s.Name)
		}
		if len(s.Persistences) > 0 && (s.Container == nil || s.Container.Data == "") {
			t.Errorf("%s: chooses what its nodes keep on disk, but keeps no data directory", s.Name)
		}
		if s.Container == nil || s.Container.Monitors == nil {
			continue
		}
		m := s.Container.Monitors
		if m.Prefix == "" || m.Prefix == "n" || m.Count < 1 || m.Port == 0 || m.Node == nil || m.Ready == nil {
			t.Errorf("%s: monitors lack a prefix of their own, a count, a port, a setup or a readiness probe", s.Name)
		}
		if setup := m.Node(Cluster{Nodes: s.Sizes.Default}, 1); len(setup.Cmd) == 0 {
			t.Errorf("%s: monitor 1 has no command", s.Name)
		}
	}
}

// The server's configuration follows the persistence and the min-replicas settings, and
// replicas follow n1.
func TestRedisConfiguration(t *testing.T) {
	tests := []struct {
		system  string
		cluster Cluster
		id      int
		want    []string
		not     []string
	}{
		{"redis", Cluster{Nodes: 1}, 1, []string{"appendonly no\n", `save ""`}, []string{"replicaof", "min-replicas"}},
		{"redlock", Cluster{Nodes: 5, Persistence: PersistAOFAlways}, 3, []string{"appendonly yes\n", "appendfsync always\n"}, nil},
		{"redis", Cluster{Nodes: 1, Persistence: PersistAOFEverySec}, 1, []string{"appendfsync everysec\n"}, nil},
		{"sentinel", Cluster{Nodes: 3}, 1, []string{"repl-diskless-sync-delay 0\n"}, []string{"replicaof", "min-replicas"}},
		{"sentinel", Cluster{Nodes: 3, MinReplicas: 1, MinReplicasMaxLag: 2 * time.Second}, 2,
			[]string{"replicaof n1 6379\n", "min-replicas-to-write 1\n", "min-replicas-max-lag 2\n"}, nil},
	}
	for _, tt := range tests {
		s, _ := Lookup(tt.system)
		setup := s.Container.Node(tt.cluster, tt.id)
		if len(setup.Files) != 1 || setup.Cmd[len(setup.Cmd)-1] != setup.Files[0].Path {
			t.Fatalf("%s: want the server to read its one configuration file: %+v", tt.system, setup)
		}
		conf := setup.Files[0].Content
		for _, w := range tt.want {
			if !strings.Contains(conf, w) {
				t.Errorf("%s node %d %+v: configuration lacks %q:\n%s", tt.system, tt.id, tt.cluster, w, conf)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(conf, n) {
				t.Errorf("%s node %d %+v: configuration has %q:\n%s", tt.system, tt.id, tt.cluster, n, conf)
			}
		}
	}
}

func TestSentinelsWatchN1WithQuorumTwo(t *testing.T) {
	s, _ := Lookup("sentinel")
	m := s.Container.Monitors
	conf := m.Node(Cluster{Nodes: 3}, 2).Files[0].Content
	for _, want := range []string{
		"sentinel monitor lockbreaker n1 6379 2\n",
		"sentinel down-after-milliseconds lockbreaker 1000\n",
		"sentinel failover-timeout lockbreaker 3000\n",
		"sentinel resolve-hostnames yes\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("sentinel.conf lacks %q:\n%s", want, conf)
		}
	}
	if m.Count != 3 || m.Prefix != "s" {
		t.Errorf("want three Sentinels s1..s3, got %d named %s*", m.Count, m.Prefix)
	}
}

func TestZooKeeperSessionsTakeTheTTL(t *testing.T) {
	s, _ := Lookup("zookeeper")
	cfg := s.Container.Node(Cluster{Nodes: 3, TTL: 500_000_000}, 2)
	zoo, myid := cfg.Files[0].Content, cfg.Files[1].Content
	for _, want := range []string{"minSessionTimeout=500\n", "maxSessionTimeout=60000\n", "server.3=n3:2888:3888\n", "syncLimit=1\n"} {
		if !strings.Contains(zoo, want) {
			t.Errorf("zoo.cfg lacks %q:\n%s", want, zoo)
		}
	}
	if myid != "2\n" {
		t.Errorf("myid %q", myid)
	}
}

// A follower cut off its leader stops serving within half the TTL, before the quorum
// expires its clients' sessions: syncLimit ticks of 500 ms.
func TestZooKeeperFollowersGiveUpWithinHalfTheTTL(t *testing.T) {
	s, _ := Lookup("zookeeper")
	for ttl, want := range map[time.Duration]string{
		0: "syncLimit=10\n", 2 * time.Second: "syncLimit=2\n", 3 * time.Second: "syncLimit=3\n", time.Minute: "syncLimit=10\n",
	} {
		zoo := s.Container.Node(Cluster{Nodes: 3, TTL: ttl}, 1).Files[0].Content
		if !strings.Contains(zoo, "tickTime=500\n") || !strings.Contains(zoo, want) {
			t.Errorf("TTL %s: zoo.cfg lacks tickTime=500 and %q:\n%s", ttl, want, zoo)
		}
	}
}

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 3: 2, 5: 3, 7: 4} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestOnePrimaryOnlyWhenRolesHaveSettled(t *testing.T) {
	cases := []struct {
		roles map[string]Role
		want  string
	}{
		{map[string]Role{"n1": Primary, "n2": Replica, "n3": Replica}, "n1"},
		{map[string]Role{"n1": Primary, "n2": Replica, "n3": Primary}, ""}, // an old primary back
		{map[string]Role{"n1": Down, "n2": Replica, "n3": Primary}, ""},
		{map[string]Role{"n1": Unknown, "n2": Primary}, ""},
		{map[string]Role{"n1": Replica, "n2": Replica}, ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := OnePrimary(c.roles); got != c.want {
			t.Errorf("OnePrimary(%v) = %q, want %q", c.roles, got, c.want)
		}
	}
}

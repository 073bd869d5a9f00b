package system

import (
	"strings"
	"testing"
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
	_, err := Lookup("etcd")
	if err == nil || !strings.Contains(err.Error(), `unknown system "etcd" (known: local, local-broken, redis, redlock, zookeeper)`) {
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
		}
		if s.Leader && (s.Container == nil || s.Container.Role == nil) {
			t.Errorf("%s: has a leader but no way to ask a node for its role", s.Name)
		}
	}
}

func TestZooKeeperSessionsTakeTheTTL(t *testing.T) {
	s, _ := Lookup("zookeeper")
	cfg := s.Container.Node(Cluster{Nodes: 3, TTL: 500_000_000}, 2)
	zoo, myid := cfg.Files[0].Content, cfg.Files[1].Content
	for _, want := range []string{"minSessionTimeout=500\n", "maxSessionTimeout=60000\n", "server.3=n3:2888:3888\n"} {
		if !strings.Contains(zoo, want) {
			t.Errorf("zoo.cfg lacks %q:\n%s", want, zoo)
		}
	}
	if myid != "2\n" {
		t.Errorf("myid %q", myid)
	}
}

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 3: 2, 5: 3, 7: 4} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

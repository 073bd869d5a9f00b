package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/nemesis"
)

// A kept cluster serves a run only on the same nodes, with the levers it needs, and a
// lock key no run on it has used.
func TestKeptClusterServesOnlyWhatIsSound(t *testing.T) {
	setup := clusterSetup{runID: "r1", nodes: 5, ttl: 2 * time.Second, needs: nemesis.Needs{Clocks: true}, logs: "a"}
	k := &kept{setup: setup, faults: []string{"clock-bump"}, keys: []string{"lock-1"}}
	other := func(change func(*clusterSetup)) clusterSetup {
		s := setup
		s.runID, s.logs, s.needs = "r2", "b", nemesis.Needs{} // never make a difference
		change(&s)
		return s
	}
	same := other(func(*clusterSetup) {})
	tests := []struct {
		name   string
		setup  clusterSetup
		faults []string
		key    string
		want   string
	}{
		{"same nodes, a lever it has, a new key", same, []string{"clock-strobe"}, "lock-2", ""},
		{"no fault at all", same, nil, "lock-2", ""},
		{"another size", other(func(s *clusterSetup) { s.nodes = 3 }), nil, "lock-2", "nodes of another size"},
		{"another ttl", other(func(s *clusterSetup) { s.ttl = time.Second }), nil, "lock-2", "another size, TTL"},
		{"a lever it lacks", same, []string{"partition-halves"}, "lock-2", "a lever it was started without"},
		{"busy holders, which ask nothing of it", same, []string{"throttle-holder"}, "lock-2", ""},
		{"a key used before", same, nil, "lock-1", "already used the lock key lock-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := k.unfitFor(tt.setup, tt.faults, tt.key)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("unfit: %q, want %q", got, tt.want)
			}
		})
	}
}

// Runs side by side each take an idle cluster that fits them, the one given back last;
// one that does not only when the pool is full (to stop it, making room).
func TestRunsTakeAnIdleClusterThatFits(t *testing.T) {
	redis1, zk, redis2 := &kept{system: "redis"}, &kept{system: "zookeeper"}, &kept{system: "redis"}
	isRedis := func(k *kept) bool { return k.system == "redis" }
	cs := &Clusters{Keep: 3, idle: []*kept{redis1, zk, redis2}}
	for i, want := range []*kept{redis2, redis1, nil} {
		if got := cs.take(isRedis); got != want {
			t.Fatalf("take %d: got %+v, want %+v", i+1, got, want)
		}
	}
	full := &Clusters{Keep: 1, idle: []*kept{zk}}
	if got := full.take(isRedis); got != zk {
		t.Errorf("from a full pool: got %+v, want the zookeeper cluster to stop", got)
	}
}

// Runs on one system share its containers: the second run finds the first's cluster,
// healed and serving, and both judge their own key only. The second is Kleppmann's: it
// tries fresh seeds, each on a key of its own, until two holders overlapped.
func TestRunsShareAKeptCluster(t *testing.T) {
	inLane(t, laneRedis)
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	first := kleppmannSpec(true)
	first.Nemesis, first.TimeLimit = none, Duration(4*time.Second)
	second := kleppmannSpec(true)
	second.TimeLimit = Duration(6 * time.Second)
	clusters := NewClusters(first, second)
	defer clusters.Close(context.Background())
	var progress bytes.Buffer
	r := Runner{ResultsRoot: t.TempDir(), Progress: &progress, Worker: []string{exe}, Clusters: clusters}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	runs := 0
	run := func(t *testing.T, spec Spec) (ran, string) {
		runs++
		spec.Key = fmt.Sprintf("reuse-%d", runs) // a kept cluster serves a key no run on it used
		dir, s, err := r.Run(ctx, spec)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", runs, err, progress.String())
		}
		return ran{dir: dir, summary: s}, ""
	}
	tr, _ := run(t, first)
	expectAllValid(t, tr.summary)
	expectLockBrokenDataSafe(t, untilDangerOn(t, second, overlapped, run).summary)
	out := progress.String()
	if strings.Count(out, "starting redis cluster") != 1 || strings.Count(out, "reusing the redis cluster of the last run") != runs-1 {
		t.Errorf("want one cluster started and reused by the %d runs after the first:\n%s", runs-1, out)
	}
	if len(clusters.idle) != 1 {
		t.Fatalf("%d clusters kept after the runs, want 1", len(clusters.idle))
	}
	if err := clusters.Close(context.Background()); err != nil || clusters.idle != nil {
		t.Errorf("close: %v, still kept: %d", err, len(clusters.idle))
	}
}

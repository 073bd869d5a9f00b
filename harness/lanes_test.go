package harness

import (
	"sync"
	"testing"
)

// The real-container tests run in lanes, side by side: the runs on a system slow to start
// one after another on its kept cluster (sharedClusters), the Redis family's two at a
// time, the in-process trials two at a time (four in the fast tier, where they run alone:
// fastLocalWidth). The few whose servers must come back within a lease are not in a lane:
// they run first, one after another, before any lane starts (Go runs a package's
// sequential tests before its parallel ones), since beside another test a restarted Redis
// master can serve again too late for a second holder.
//
// Go's -parallel caps how many tests run at once, waiting ones included: the Makefile
// gives enough for every lane's width at once.

// Lanes, and how many of their tests run at once.
const (
	laneZooKeeper      = "zookeeper"       // TTL 2 s: zkSpec
	laneZooKeeperCrash = "zookeeper-crash" // zkSpec's, whose nodes and clients are killed
	laneZooKeeper1s    = "zookeeper-1s"    // TTL 1 s: holderCutSpec
	laneEtcd           = "etcd"
	lanePostgres       = "postgres"
	laneRedis          = "redis"
	laneLocal          = "local"
)

var laneWidth = map[string]int{laneZooKeeper: 1, laneZooKeeperCrash: 1, laneZooKeeper1s: 1, laneEtcd: 1, lanePostgres: 1,
	laneRedis: 2, laneLocal: 2}

// fastLocalWidth is the in-process lane's width in the fast tier (-short), where its trials
// are all that runs: each waits out its time limit on a tenth of a CPU, so four at a time
// cost the machine what one does (TestMain lets as many tests run at once).
const fastLocalWidth = 4

var (
	lanesOnce sync.Once
	lanes     map[string]chan struct{}
)

// inLane runs t beside the other lanes' tests, and beside at most its lane's width of
// its own lane's.
func inLane(t *testing.T, lane string) {
	t.Helper()
	t.Parallel()
	lanesOnce.Do(func() {
		lanes = map[string]chan struct{}{}
		for name, width := range laneWidth {
			if name == laneLocal && testing.Short() {
				width = fastLocalWidth
			}
			lanes[name] = make(chan struct{}, width)
		}
	})
	slots, ok := lanes[lane]
	if !ok {
		t.Fatalf("no lane %q", lane)
	}
	slots <- struct{}{}
	t.Cleanup(func() { <-slots })
}

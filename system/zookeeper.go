package system

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// zookeeperPort is a server's client port; zookeeperQuorumPort and zookeeperElectionPort are
// where the other servers reach it (server.N=host:quorum:election).
const (
	zookeeperPort         = 2181
	zookeeperQuorumPort   = 2888
	zookeeperElectionPort = 3888
)

func init() {
	register(System{
		Name:          "zookeeper",
		About:         "a ZooKeeper ensemble; the ephemeral sequential node recipe",
		Sizes:         Sizes{Default: 3, Min: 1, Max: 9, Odd: true},
		DefaultClient: "zookeeper",
		Leader:        true,
		Persistences:  []Persistence{PersistForceSync, PersistNoForceSync},
		Container: &Container{
			Port:      zookeeperPort,
			PeerPorts: []int{zookeeperQuorumPort, zookeeperElectionPort},
			Node:      zookeeperNode,
			Ready:     zookeeperServing,
			Role:      zookeeperRole,
			Data:      zookeeperData,
			// Debian's zookeeper brings a JRE: a layer of its own keeps the node image, which
			// the default run needs, small and quick to build.
			Image: &Image{Packages: []string{"zookeeper"}, Prepare: "mkdir -p " + zookeeperData},
		},
	})
}

// zookeeperCmd runs Debian's ZooKeeper with only its own jar, log4j and the SLF4J binding
// for log4j on the class path (adding every jar of /usr/share/java breaks SLF4J; without
// the binding ZooKeeper logs nothing). The heap is small and the JIT quick to start: the
// machines have few cores. Leader election retries at least every 2 s (default: backing
// off to 60 s), so an ensemble whose servers start, pause or heal at different times forms
// a quorum soon after it can.
var zookeeperCmd = []string{
	"java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.fastleader.maxNotificationInterval=2000",
	"-cp", "/lockbreaker/zk:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar",
	"org.apache.zookeeper.server.quorum.QuorumPeerMain", "/lockbreaker/zk/zoo.cfg",
}

// zookeeperData is where a server keeps its transaction log, its snapshots and its id.
const zookeeperData = "/lockbreaker/zk/data"

// zookeeperTick is ZooKeeper's unit of time; zookeeperSyncLimit, in ticks, the longest a
// follower waits for its leader (less for a short TTL: see zookeeperNode).
const (
	zookeeperTick      = 500 * time.Millisecond
	zookeeperSyncLimit = 10
)

// zookeeperNode writes zoo.cfg and myid for server id of the ensemble.
//
// Servers find each other by their hosts (names on the cluster network, n1..nN, or their
// machines). A tick is
// 500 ms so short session timeouts expire close to on time (the server checks expiry once
// per tick); the accepted session timeouts widen to take the lock's TTL, which the
// clients ask for. 4lw srvr tells when a quorum serves.
//
// A follower cut off its leader goes on answering its clients from its stale copy until
// syncLimit ticks pass without a word from the leader, while the quorum expires those
// clients' sessions after the session timeout (the TTL) and hands their lock nodes' turn
// on. A client there can then be told it holds a lock whose node the quorum had already
// deleted: seen here with syncLimit 10 (5 s) against a 2 s TTL, in a partition of one
// follower. So a follower gives up within half the TTL, and its clients reconnect to the
// quorum while their sessions still live.
func zookeeperNode(cluster Cluster, id int) NodeSetup {
	minSession, maxSession := time.Second, time.Minute
	syncTicks := zookeeperSyncLimit
	if t := cluster.TTL; t > 0 {
		minSession, maxSession = min(minSession, t), max(maxSession, t)
		syncTicks = max(1, min(syncTicks, int(t/2/zookeeperTick)))
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `tickTime=%d
initLimit=20
syncLimit=%d
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
standaloneEnabled=false
reconfigEnabled=false
quorumListenOnAllIPs=true
admin.enableServer=false
4lw.commands.whitelist=srvr,stat,ruok,mntr,conf,cons
`, zookeeperTick.Milliseconds(), syncTicks, minSession.Milliseconds(), maxSession.Milliseconds(), zookeeperData, zookeeperPort)
	if cluster.Persistence == PersistNoForceSync {
		cfg.WriteString("forceSync=no\n") // a key ZooKeeper does not know becomes its zookeeper.forceSync property
	}
	for i := 1; i <= cluster.Nodes; i++ {
		fmt.Fprintf(&cfg, "server.%d=%s:%d:%d\n", i, cluster.Host(i), zookeeperQuorumPort, zookeeperElectionPort)
	}
	return NodeSetup{Cmd: zookeeperCmd, Files: []File{
		{Path: "/lockbreaker/zk/zoo.cfg", Content: cfg.String()},
		{Path: zookeeperData + "/myid", Content: fmt.Sprintf("%d\n", id)},
	}}
}

// zookeeperServing succeeds when the server at addr leads or follows a quorum that
// serves requests.
func zookeeperServing(ctx context.Context, addr string) error {
	mode, err := zookeeperRole(ctx, addr)
	if err == nil && mode != Leader && mode != Follower {
		err = fmt.Errorf("srvr: mode %s", mode)
	}
	return err
}

// zookeeperRole asks the server at addr for srvr and returns its mode (leader, follower,
// standalone...).
func zookeeperRole(ctx context.Context, addr string) (Role, error) {
	reply, err := ask(ctx, addr, "srvr", readAll)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(reply, "\n") {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return Role(strings.TrimSpace(mode)), nil
		}
	}
	return "", fmt.Errorf("srvr: %s", quote.Short(strings.TrimSpace(reply)))
}

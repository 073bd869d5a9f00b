package system

import (
	"context"
	"fmt"
	"strings"
	"time"
)

const zookeeperPort = 2181

func init() {
	register(System{
		Name:          "zookeeper",
		About:         "a ZooKeeper ensemble; the ephemeral sequential node recipe",
		Sizes:         Sizes{Default: 3, Min: 1, Max: 9, Odd: true},
		DefaultClient: "zookeeper",
		Leader:        true,
		Container: &Container{
			Port:  zookeeperPort,
			Node:  zookeeperNode,
			Ready: zookeeperServing,
			Role:  zookeeperRole,
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

// zookeeperNode writes zoo.cfg and myid for server id of the ensemble.
//
// Servers find each other by their names on the cluster network (n1..nN). A tick is
// 500 ms so short session timeouts expire close to on time (the server checks expiry once
// per tick); the accepted session timeouts widen to take the lock's TTL, which the
// clients ask for. 4lw srvr tells when a quorum serves.
func zookeeperNode(cluster Cluster, id int) NodeSetup {
	minSession, maxSession := time.Second, time.Minute
	if t := cluster.TTL; t > 0 {
		minSession, maxSession = min(minSession, t), max(maxSession, t)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `tickTime=500
initLimit=20
syncLimit=10
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=/lockbreaker/zk/data
clientPort=%d
standaloneEnabled=false
reconfigEnabled=false
quorumListenOnAllIPs=true
admin.enableServer=false
4lw.commands.whitelist=srvr,stat,ruok,mntr,conf,cons
`, minSession.Milliseconds(), maxSession.Milliseconds(), zookeeperPort)
	for i := 1; i <= cluster.Nodes; i++ {
		fmt.Fprintf(&cfg, "server.%d=n%d:2888:3888\n", i, i)
	}
	return NodeSetup{Cmd: zookeeperCmd, Files: []File{
		{Path: "/lockbreaker/zk/zoo.cfg", Content: cfg.String()},
		{Path: "/lockbreaker/zk/data/myid", Content: fmt.Sprintf("%d\n", id)},
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
	return "", fmt.Errorf("srvr: %q", strings.TrimSpace(reply))
}

package containers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// zookeeperCmd runs Debian's ZooKeeper with only its own jar, log4j and the
// SLF4J binding for log4j on the class path (adding every jar of
// /usr/share/java breaks SLF4J; without the binding ZooKeeper logs nothing).
// The heap is small and the JIT quick to start: the machines have few cores.
// Leader election retries at least every 2 s (default: backing off to 60 s),
// so an ensemble whose servers start, pause or heal at different times forms
// a quorum soon after it can.
var zookeeperCmd = []string{
	"java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.fastleader.maxNotificationInterval=2000",
	"-cp", "/lockbreaker/zk:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar",
	"org.apache.zookeeper.server.quorum.QuorumPeerMain", "/lockbreaker/zk/zoo.cfg",
}

// zookeeperFiles returns zoo.cfg and myid for server id of the ensemble.
//
// Servers find each other by their aliases on the cluster network (n1..nN).
// A tick is 500 ms so short session timeouts expire close to on time (the
// server checks expiry once per tick). 4lw srvr tells Start when a quorum serves.
func zookeeperFiles(spec Spec, id int) []testcontainers.ContainerFile {
	minSession, maxSession := time.Second, time.Minute
	if t := spec.ZKSessionTimeout; t > 0 {
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
	for i := 1; i <= spec.Nodes; i++ {
		fmt.Fprintf(&cfg, "server.%d=n%d:2888:3888\n", i, i)
	}
	return []testcontainers.ContainerFile{
		{Reader: strings.NewReader(cfg.String()), ContainerFilePath: "/lockbreaker/zk/zoo.cfg", FileMode: 0o644},
		{Reader: strings.NewReader(fmt.Sprintf("%d\n", id)), ContainerFilePath: "/lockbreaker/zk/data/myid", FileMode: 0o644},
	}
}

// zookeeperServing succeeds when the server at addr is a leader or follower of a
// quorum that serves requests.
func zookeeperServing(ctx context.Context, addr string) error {
	mode, err := zookeeperMode(ctx, addr)
	if err == nil && mode != "leader" && mode != "follower" {
		err = fmt.Errorf("srvr: mode %s", mode)
	}
	return err
}

// zookeeperMode asks the server at addr for srvr and returns its mode (leader,
// follower, standalone...).
func zookeeperMode(ctx context.Context, addr string) (string, error) {
	reply, err := ask(ctx, addr, "srvr", readAll)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(reply, "\n") {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", fmt.Errorf("srvr: %q", strings.TrimSpace(reply))
}

// Leader returns the name of the node that leads the ZooKeeper ensemble now.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	if c.spec.System != SystemZooKeeper {
		return "", fmt.Errorf("a %s cluster has no leader", c.spec.System)
	}
	for _, n := range c.nodes {
		if mode, err := zookeeperMode(ctx, n.Addr()); err == nil && mode == "leader" {
			return n.Name, nil
		}
	}
	return "", errors.New("no zookeeper node says it leads")
}

func readAll(r *bufio.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

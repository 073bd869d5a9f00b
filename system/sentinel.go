package system

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// Redis Sentinel: n1 starts as the primary, the other nodes replicate it asynchronously,
// and three Sentinels (s1..s3) watch them and promote a replica when two of them agree
// the primary is down. Sentinels announce the nodes by their container IPs, which the
// lock clients can dial.
const (
	// SentinelMaster is the name the Sentinels know the primary by.
	SentinelMaster = "lockbreaker"
	sentinelPort   = 26379
	sentinelCount  = 3
	sentinelQuorum = 2
	// A primary silent for a second is down; a failover that stalls is retried after 3 s.
	// Measured here: a new primary about 2 s after the old one is killed.
	sentinelDownAfter       = time.Second
	sentinelFailoverTimeout = 3 * time.Second
)

func init() {
	register(System{
		Name:          "sentinel",
		About:         "a Redis primary, its asynchronous replicas, and three Sentinels that promote a replica when the primary fails",
		Sizes:         Sizes{Default: 3, Min: 2, Max: 9},
		DefaultClient: "redis",
		Replicated:    true,
		TokenCaveat: "fencing tokens are counted on whichever node is primary: a replica promoted without the latest " +
			"count hands out tokens that repeat or go back, and the storage then accepts a stale holder's request " +
			"(the fencing checker reports each)",
		Persistences: redisPersistences,
		Container: &Container{
			Port:  redisPort,
			Node:  sentinelNode,
			Ready: redisReplicating,
			Role:  redisRole,
			Crash: crashRedis,
			Data:  redisDir,
			Monitors: &Monitors{
				Prefix:  "s",
				Count:   sentinelCount,
				Port:    sentinelPort,
				Node:    sentinelMonitor,
				Ready:   sentinelWatching,
				Promote: sentinelFailover,
				Primary: sentinelPrimary,
			},
		},
	})
}

// sentinelNode is Redis server id: n1 the first primary, the others its replicas. Every
// node carries the min-replicas setting, since any of them may be promoted. A replica
// syncs at once (no diskless-sync delay), so one started again catches up quickly.
func sentinelNode(cluster Cluster, id int) NodeSetup {
	extra := []string{"repl-diskless-sync-delay 0"}
	if cluster.MinReplicas > 0 {
		extra = append(extra,
			fmt.Sprintf("min-replicas-to-write %d", cluster.MinReplicas),
			fmt.Sprintf("min-replicas-max-lag %d", int(cluster.MinReplicasMaxLag.Seconds())))
	}
	if id > 1 {
		extra = append(extra, fmt.Sprintf("replicaof %s %d", cluster.Host(1), redisPort))
	}
	return redisNode(cluster, extra...)
}

// sentinelMonitor is Sentinel id. It finds the first primary by name; the replicas and the
// other Sentinels it discovers. Its configuration file is its own: Sentinel rewrites it.
func sentinelMonitor(cluster Cluster, _ int) NodeSetup {
	const dir = "/lockbreaker/sentinel"
	conf := fmt.Sprintf(`port %d
protected-mode no
dir %s
sentinel resolve-hostnames yes
sentinel monitor %s %s %d %d
sentinel down-after-milliseconds %[3]s %[7]d
sentinel failover-timeout %[3]s %[8]d
`, sentinelPort, dir, SentinelMaster, cluster.Host(1), redisPort, sentinelQuorum,
		sentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
	return NodeSetup{
		Cmd:   []string{"redis-sentinel", dir + "/sentinel.conf"},
		Files: []File{{Path: dir + "/sentinel.conf", Content: conf}},
	}
}

// redisRole asks the Redis server at addr whether it is a primary or a replica.
func redisRole(ctx context.Context, addr string) (Role, error) {
	info, err := redisInfo(ctx, addr, "replication")
	if err != nil {
		return "", err
	}
	switch info["role"] {
	case "master":
		return Primary, nil
	case "slave":
		return Replica, nil
	}
	return "", fmt.Errorf("INFO replication: role %s", quote.Short(info["role"]))
}

// redisReplicating succeeds when the server at addr is a primary, or a replica whose link
// to its primary is up.
func redisReplicating(ctx context.Context, addr string) error {
	info, err := redisInfo(ctx, addr, "replication")
	if err != nil {
		return err
	}
	if info["role"] == "slave" && info["master_link_status"] != "up" {
		return fmt.Errorf("replica of %s:%s: link %s", info["master_host"], info["master_port"], info["master_link_status"])
	}
	return nil
}

// sentinelFailover asks the Sentinel at addr to fail the primary over now (SENTINEL
// FAILOVER): it promotes a replica as if the primary were unreachable, without waiting
// out down-after-milliseconds or asking the other Sentinels.
func sentinelFailover(ctx context.Context, addr string) error {
	reply, err := ask(ctx, addr, "SENTINEL FAILOVER "+SentinelMaster+"\r\n", readLine)
	if err != nil {
		return fmt.Errorf("SENTINEL FAILOVER: %w", err)
	}
	if reply = strings.TrimSpace(reply); reply != "+OK" {
		return fmt.Errorf("SENTINEL FAILOVER answered %q", reply)
	}
	return nil
}

// sentinelPrimary is the primary's address the Sentinel at addr gives clients now (SENTINEL
// GET-MASTER-ADDR-BY-NAME): the one go-redis's failover client dials.
func sentinelPrimary(ctx context.Context, addr string) (string, error) {
	reply, err := ask(ctx, addr, "SENTINEL GET-MASTER-ADDR-BY-NAME "+SentinelMaster+"\r\n", func(r *bufio.Reader) (string, error) {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if line = strings.TrimSpace(line); line != "*2" {
			return "", fmt.Errorf("answered %s", quote.Short(line))
		}
		host, err := readBulk(r)
		if err != nil {
			return "", err
		}
		port, err := readBulk(r)
		return net.JoinHostPort(host, port), err
	})
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME: %w", err)
	}
	return reply, nil
}

// sentinelWatching succeeds when the Sentinel at addr finds the primary healthy and knows
// every replica and every Sentinel (itself included).
func sentinelWatching(ctx context.Context, cluster Cluster, addr string) error {
	info, err := redisInfo(ctx, addr, "sentinel")
	if err != nil {
		return err
	}
	want := fmt.Sprintf("name=%s,status=ok,", SentinelMaster)
	tail := fmt.Sprintf(",slaves=%d,sentinels=%d", cluster.Nodes-1, sentinelCount)
	if m := info["master0"]; !strings.HasPrefix(m, want) || !strings.HasSuffix(m, tail) {
		return fmt.Errorf("sentinel sees %s, want %s...%s", quote.Short(m), want, tail)
	}
	return nil
}

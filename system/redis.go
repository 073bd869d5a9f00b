package system

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// A single Redis and Redlock's independent masters run the same server, logging to stdout
// and keeping on disk what the run's persistence says.
var redisServer = &Container{
	Port: redisPort,
	Node: func(cluster Cluster, _ int) NodeSetup {
		return redisNode(cluster)
	},
	Ready: pingRedis,
	Crash: crashRedis,
	Data:  redisDir,
}

const (
	redisPort = 6379
	redisDir  = "/lockbreaker/redis"
	// redisServerPath is absolute because a server restarting itself (crashRedis) runs
	// again the path it was started by, taken from its working directory when relative.
	redisServerPath = "/usr/bin/redis-server"
)

func init() {
	register(System{
		Name:          "redis",
		About:         "one Redis server; the textbook SET NX PX lock",
		Sizes:         Sizes{Default: 1, Min: 1, Max: 1},
		DefaultClient: "redis",
		Persistences:  redisPersistences,
		Container:     redisServer,
	})
	register(System{
		Name:                "redlock",
		About:               "independent Redis masters; a lock is a majority of them (Redlock)",
		Sizes:               Sizes{Default: 5, Min: 3, Max: 9, Odd: true},
		DefaultClient:       "redlock",
		IndependentMajority: true,
		Persistences:        redisPersistences,
		Container:           redisServer,
	})
}

// redisNode runs redis-server from a configuration file (Sentinel rewrites it when it
// reconfigures a server) with the given extra lines. RDB snapshots are off whatever the
// persistence: a snapshot taken now and then would make what a restarted server remembers
// depend on timing rather than on the setting. aof-always writes and syncs each write
// before replying. aof-everysec writes it before replying too, unless a sync of the disk
// is slow, when it may reply first; a killed process therefore loses little with either,
// and they differ when the machine loses its power (power-loss): everysec loses up to a
// second of acknowledged writes, always none.
func redisNode(cluster Cluster, extra ...string) NodeSetup {
	lines := []string{
		fmt.Sprintf("port %d", redisPort),
		"protected-mode no",
		"enable-debug-command yes", // for crashRedis
		"dir " + redisDir,
		`save ""`,
	}
	switch cluster.Persistence {
	case PersistAOFEverySec:
		lines = append(lines, "appendonly yes", "appendfsync everysec")
	case PersistAOFAlways:
		lines = append(lines, "appendonly yes", "appendfsync always")
	default:
		lines = append(lines, "appendonly no")
	}
	conf := redisDir + "/redis.conf"
	return NodeSetup{
		Cmd:   []string{redisServerPath, conf},
		Files: []File{{Path: conf, Content: strings.Join(append(lines, extra...), "\n") + "\n"}},
	}
}

// pingRedis sends PING to the Redis server at addr.
func pingRedis(ctx context.Context, addr string) error {
	reply, err := ask(ctx, addr, "PING\r\n", readLine)
	if err != nil {
		return err
	}
	if strings.TrimSpace(reply) != "+PONG" {
		return fmt.Errorf("PING answered %s", quote.Short(strings.TrimSpace(reply)))
	}
	return nil
}

// crashRedis has the Redis server at addr crash and start again in place (DEBUG
// CRASH-AND-RECOVER: it closes every connection and its listening socket, and execs
// itself anew, saving nothing).
var crashRedis = LineCrash("DEBUG CRASH-AND-RECOVER 0")

// redisInfo returns the fields of INFO section at addr ("role" -> "master").
func redisInfo(ctx context.Context, addr, section string) (map[string]string, error) {
	reply, err := ask(ctx, addr, "INFO "+section+"\r\n", readBulk)
	if err != nil {
		return nil, fmt.Errorf("INFO %s: %w", section, err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(reply, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			fields[k] = v
		}
	}
	return fields, nil
}

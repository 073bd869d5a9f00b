package system

import (
	"context"
	"fmt"
	"strings"
)

// A single Redis and Redlock's independent masters run the same server: one that keeps
// nothing on disk and logs to stdout.
var redisServer = &Container{
	Port: 6379,
	Node: func(Cluster, int) NodeSetup {
		return NodeSetup{Cmd: []string{
			"redis-server", "--port", "6379", "--protected-mode", "no",
			"--save", "", "--appendonly", "no",
		}}
	},
	Ready: pingRedis,
}

func init() {
	register(System{
		Name:          "redis",
		About:         "one Redis server; the seed's SET NX PX lock",
		Sizes:         Sizes{Default: 1, Min: 1, Max: 1},
		DefaultClient: "redis",
		Container:     redisServer,
	})
	register(System{
		Name:                "redlock",
		About:               "independent Redis masters; a lock is a majority of them (Redlock)",
		Sizes:               Sizes{Default: 5, Min: 3, Max: 9, Odd: true},
		DefaultClient:       "redlock",
		IndependentMajority: true,
		Container:           redisServer,
	})
}

// pingRedis sends PING to the Redis server at addr.
func pingRedis(ctx context.Context, addr string) error {
	reply, err := ask(ctx, addr, "PING\r\n", readLine)
	if err != nil {
		return err
	}
	if strings.TrimSpace(reply) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(reply))
	}
	return nil
}

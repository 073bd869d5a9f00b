package containers

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// redisCmd runs a Redis server that keeps nothing on disk and logs to stdout.
var redisCmd = []string{
	"redis-server", "--port", "6379", "--protected-mode", "no",
	"--save", "", "--appendonly", "no",
}

// pingRedis sends PING to the Redis server at addr.
func pingRedis(ctx context.Context, addr string) error {
	reply, err := ask(ctx, addr, "PING\r\n", func(r *bufio.Reader) (string, error) { return r.ReadString('\n') })
	if err != nil {
		return err
	}
	if strings.TrimSpace(reply) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(reply))
	}
	return nil
}

// ask dials addr, writes request and returns what read makes of the answer,
// all within a second.
func ask(ctx context.Context, addr, request string, read func(*bufio.Reader) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte(request)); err != nil {
		return "", err
	}
	return read(bufio.NewReader(conn))
}

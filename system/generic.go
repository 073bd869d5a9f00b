package system

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// Probes for systems described in a file (package sysfile), which say how to tell that a
// node serves instead of coding it: a TCP connect, or a line sent and the reply expected.

// TCPReady succeeds once the node at addr accepts a TCP connection, within a second.
func TCPReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// LineReady returns a probe that sends send and a newline to the node and succeeds when
// the first line it answers, without its line end, starts with expect.
func LineReady(send, expect string) func(ctx context.Context, addr string) error {
	return func(ctx context.Context, addr string) error {
		reply, err := ask(ctx, addr, send+"\n", func(r *bufio.Reader) (string, error) {
			line, err := r.ReadString('\n')
			if err != nil && line == "" {
				return "", err
			}
			return line, nil
		})
		if err != nil {
			return err
		}
		if reply = strings.TrimRight(reply, "\r\n"); !strings.HasPrefix(reply, expect) {
			return fmt.Errorf("%s answered %s, not %s", quote.Short(send), quote.Short(reply), quote.Short(expect))
		}
		return nil
	}
}

// ParseRole reads a role from the first word of a role probe's output: leader, follower,
// primary (or master), replica (or slave, secondary), case aside.
func ParseRole(output string) (Role, error) {
	words := strings.Fields(strings.ToLower(output))
	if len(words) == 0 {
		return "", fmt.Errorf("the role probe said nothing")
	}
	switch words[0] {
	case "leader":
		return Leader, nil
	case "follower":
		return Follower, nil
	case "primary", "master":
		return Primary, nil
	case "replica", "slave", "secondary":
		return Replica, nil
	}
	return "", fmt.Errorf("the role probe said %s: want leader, follower, primary or replica", quote.Short(words[0]))
}

// LineCrash returns a Crash for a server that crashes and starts again in place when sent
// send and a newline (Redis's DEBUG CRASH-AND-RECOVER): it succeeds once the server has
// dropped the connection, and an answer is an error carrying it. The server has
// crashWithin to drop it: a busy one took more than a probe's second.
func LineCrash(send string) func(ctx context.Context, addr string) error {
	return func(ctx context.Context, addr string) error {
		reply, err := askWithin(ctx, addr, send+"\n", readLine, crashWithin)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
			return nil // it closed the connection as it crashed
		case err != nil:
			return fmt.Errorf("%s: %w", quote.Short(send), err)
		}
		return fmt.Errorf("%s answered %s", quote.Short(send), quote.Short(strings.TrimSpace(reply)))
	}
}

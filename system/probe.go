package system

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// ask dials addr, writes request and returns what read makes of the answer, all within a
// second: probes must never hang on a paused node.
func ask(ctx context.Context, addr, request string, read func(*bufio.Reader) (string, error)) (string, error) {
	return askWithin(ctx, addr, request, read, time.Second)
}

// crashWithin is how long a server told to crash has to drop the connection.
const crashWithin = 10 * time.Second

// askWithin is ask within the given time.
func askWithin(ctx context.Context, addr, request string, read func(*bufio.Reader) (string, error), within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
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

func readLine(r *bufio.Reader) (string, error) { return r.ReadString('\n') }

func readAll(r *bufio.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

// readBulk reads one Redis bulk string ("$5\r\nhello\r\n"); an error reply is an error.
func readBulk(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	n, err := strconv.Atoi(strings.TrimPrefix(line, "$"))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return "", fmt.Errorf("answered %s", quote.Short(line))
	}
	b := make([]byte, n+2) // and its CRLF, so that a reply's next element can be read
	_, err = io.ReadFull(r, b)
	return string(b[:n]), err
}

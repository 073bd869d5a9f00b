package execlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lockbreaker/lockbreaker/workloads"
)

// Serve is the program's side of the protocol with a lock written in Go: it reads the
// configuration line from in, makes the lock with newLock (refusing the configuration
// when that fails), and answers each request on out until in ends. It is what a program
// in another language does, and lets a Go lock run through the exec path: the tests'
// well-behaved program, and the measure of what the protocol itself costs.
func Serve(in io.Reader, out io.Writer, newLock func(workloads.Config) (workloads.Lock, error)) error {
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 0, 4096), MaxLine)
	if !lines.Scan() {
		return fmt.Errorf("no configuration line: %v", lines.Err())
	}
	var cfg Config
	if err := decode(lines.Bytes(), &cfg); err != nil {
		return err
	}
	lock, err := newLock(cfg.lockConfig())
	if err != nil {
		return encode(out, Answer{Result: Refused, Message: err.Error()})
	}
	defer lock.Close()
	if _, ok := lock.(workloads.Extender); cfg.Extend && !ok {
		return encode(out, Answer{Result: Refused, Message: "this lock cannot extend a lease"})
	}
	if err := encode(out, Answer{Result: Ready}); err != nil {
		return err
	}
	for lines.Scan() {
		var req Request
		if err := decode(lines.Bytes(), &req); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), seconds(req.Timeout))
		a, err := serveOne(ctx, lock, req.Op)
		cancel()
		if err != nil {
			return err
		}
		if err := encode(out, a); err != nil {
			return err
		}
	}
	return lines.Err()
}

// serveOne answers one request.
func serveOne(ctx context.Context, lock workloads.Lock, op string) (Answer, error) {
	switch op {
	case OpAcquire:
		g, err := lock.Acquire(ctx)
		switch {
		case err == nil:
			a := Answer{Result: Granted, Detail: g.Detail}
			if g.HasToken {
				a.Token = &g.Token
			}
			if g.AttemptStarted != 0 {
				started := float64(g.AttemptStarted) / float64(time.Second)
				a.AttemptStarted = &started
			}
			return a, nil
		case errors.Is(err, workloads.ErrBusy):
			return Answer{Result: Busy}, nil
		}
		return Answer{Result: Unknown, Message: err.Error()}, nil
	case OpRelease:
		return heldAnswer(lock.Release(ctx), Released), nil
	case OpExtend:
		if extender, ok := lock.(workloads.Extender); ok {
			return heldAnswer(extender.Extend(ctx), Extended), nil
		}
	}
	return Answer{}, fmt.Errorf("unknown request %q", op)
}

// heldAnswer answers a request only the holder may make: done when err is nil, not-held
// when the lock said so, unknown otherwise.
func heldAnswer(err error, done string) Answer {
	switch {
	case err == nil:
		return Answer{Result: done}
	case errors.Is(err, workloads.ErrNotHeld):
		return Answer{Result: NotHeld, Message: err.Error()}
	}
	return Answer{Result: Unknown, Message: err.Error()}
}

// ServeEnv names, in a program's environment, the registered Go client MaybeServe
// serves: `env LOCKBREAKER_SERVE_CLIENT=redis lockbreaker` is the redis lock as a program.
const ServeEnv = "LOCKBREAKER_SERVE_CLIENT"

// MaybeServe serves the Go client ServeEnv names over stdin and stdout and exits, when
// this process was started with it set. Any binary that can be a worker calls it first.
func MaybeServe() {
	name := os.Getenv(ServeEnv)
	if name == "" {
		return
	}
	client, err := workloads.LookupClient(name)
	if err == nil {
		err = Serve(os.Stdin, os.Stdout, client.New)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "serve %s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

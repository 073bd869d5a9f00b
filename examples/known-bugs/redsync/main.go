// Command redsync is an old version of redsync's Redlock as a lockbreaker lock client,
// over the exec protocol (docs/protocol.md). It lives in a module of its own so that
// lockbreaker keeps its own redsync, and imports nothing of lockbreaker for the same
// reason. One source serves every version: go.vXYZ.mod (go build -modfile) pins redsync
// vX.Y.Z, and ../redsync_lock builds the one it is asked for.
//
// The versions' bugs (docs/known-bugs.md):
//   - v4.0.3: Extend and Unlock report success whatever the nodes answered. Its scripts
//     answer 0 on a node where the key is not this client's, and redsync takes any answer
//     but "ERR" (Extend) or an int other than 0 (Unlock, comparing an int64 with an int)
//     for yes. v4.0.4 fixed both (redsync PR #61). A holder paused past its lease asks to
//     extend, is told it still holds the lock, and writes.
//   - v4.3.0: Extend checks no validity. It waits for every node's answer and says yes
//     when a majority renewed the keys, however long that took: an answer slower than the
//     lease leaves a holder believing in keys that expired meanwhile. v4.4.0 checks that
//     validity is left (v4.4.1 is the first the module proxy serves).
//
// The Redis clients keep go-redis's own timeouts (a read may take 3 s), as a service that
// sets none has them; they do not retry, so an answer is the first request's.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-redis/redis/v8"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v8"
)

// config is the protocol's configuration line, the keys this program uses.
type config struct {
	System  string   `json:"system"`
	Nodes   []string `json:"nodes"`
	Key     string   `json:"key"`
	TTL     float64  `json:"ttl"`
	Fencing bool     `json:"fencing"`
	Retry   float64  `json:"retry"`
}

type request struct {
	Op      string  `json:"op"`
	Timeout float64 `json:"timeout"`
}

type answer struct {
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
	// Lease, on ready, says what keeps a grant alive: Redlock's keys, each with its TTL.
	Lease string `json:"lease,omitempty"`
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout) // one line per answer, unbuffered
	if !in.Scan() {
		return
	}
	var cfg config
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "redsync: bad configuration:", err)
		os.Exit(1)
	}
	switch {
	case cfg.System != "redlock":
		out.Encode(answer{Result: "refused", Message: "redsync runs on redlock's independent masters, not on " + cfg.System})
		return
	case cfg.Fencing:
		out.Encode(answer{Result: "refused", Message: "redsync hands out no fencing token"})
		return
	}
	var pools []redsyncredis.Pool
	for _, addr := range cfg.Nodes {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		pools = append(pools, goredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	var mutex *redsync.Mutex
	out.Encode(answer{Result: "ready", Lease: "key"})
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "redsync: bad request:", err)
			os.Exit(1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), seconds(req.Timeout))
		var a answer
		switch req.Op {
		case "acquire":
			mutex = rs.NewMutex(cfg.Key, redsync.WithExpiry(seconds(cfg.TTL)), redsync.WithTries(1))
			a = acquire(ctx, mutex, seconds(cfg.Retry))
		case "release":
			a = said(mutex.UnlockContext(ctx))("released")
		case "extend":
			a = said(mutex.ExtendContext(ctx))("extended")
		default:
			fmt.Fprintln(os.Stderr, "redsync: unknown request", req.Op)
			os.Exit(1)
		}
		cancel()
		out.Encode(a)
	}
}

// acquire tries once, then every retry, until ctx ends. ErrFailed is redsync's "no
// majority granted it", after it released what it got: busy.
func acquire(ctx context.Context, mutex *redsync.Mutex, retry time.Duration) answer {
	for {
		err := mutex.LockContext(ctx)
		switch {
		case err == nil:
			return answer{Result: "granted"}
		case !errors.Is(err, redsync.ErrFailed):
			return answer{Result: "unknown", Message: err.Error()}
		}
		select {
		case <-ctx.Done():
			return answer{Result: "busy"}
		case <-time.After(retry):
		}
	}
}

// extendFailed is the words of v4.4.0's ErrExtendFailed (a majority renewed the keys, with
// no validity left), which older versions lack as a name.
const extendFailed = "redsync: failed to extend lock"

// said is the answer to a release or an extend from redsync's yes or no: no with an error
// is unknown (a node did not answer), but for an extend with no validity left; no without
// one is not-held.
func said(ok bool, err error) func(done string) answer {
	return func(done string) answer {
		switch {
		case ok:
			return answer{Result: done}
		case err != nil && err.Error() == extendFailed:
			return answer{Result: "not-held", Message: "the keys were renewed after the lease had run out"}
		case err != nil:
			return answer{Result: "unknown", Message: err.Error()}
		}
		return answer{Result: "not-held", Message: "a majority of the nodes did not hold this client's key"}
	}
}

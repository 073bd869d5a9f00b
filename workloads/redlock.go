package workloads

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Redlock as the seed describes it: read the time, SET key value NX PX ttl on every one
// of N independent masters with a short per-node timeout, and hold the lock when a
// majority granted it within the TTL; the lock is valid for ttl - elapsed - drift. On
// failure the client releases on every node. Redlock has no fencing token: there is no
// monotonic counter shared by a majority, and inventing one would hide the very problem
// this harness shows.

const redlockNoTokens = "Redlock has no monotonic fencing token (independent masters share no counter); " +
	"antirez suggests checking the random value with compare-and-set instead, which needs storage that can do that"

func init() {
	for _, parallel := range []bool{false, true} {
		name := "redlock"
		if parallel {
			name = "redlock-parallel"
		}
		register(Client{Name: name, Systems: []string{"redlock"}, Lease: history.KeptByKey, NoTokens: redlockNoTokens,
			New: func(cfg Config) (Lock, error) { return NewRedlock(cfg, parallel, time.Now) }})
	}
}

// Redlock is our implementation of the Redlock client.
type Redlock struct {
	cfg      Config
	nodes    []*redis.Client
	parallel bool
	// now is the client's clock, replaceable so a client-side clock jump can be simulated
	// (Go programs are immune to libfaketime).
	now      func() time.Time
	value    string
	acquires int
}

// NewRedlock makes a Redlock client over cfg.Nodes that asks the nodes one after another,
// or all at once when parallel, and reads the time from now.
func NewRedlock(cfg Config, parallel bool, now func() time.Time) (*Redlock, error) {
	if len(cfg.Nodes) < 3 || len(cfg.Nodes)%2 == 0 {
		return nil, fmt.Errorf("redlock needs an odd number of nodes, at least 3; got %d", len(cfg.Nodes))
	}
	l := &Redlock{cfg: cfg, parallel: parallel, now: now}
	for _, addr := range cfg.Nodes {
		l.nodes = append(l.nodes, newRedisClient(addr, cfg.OpTimeout))
	}
	return l, nil
}

func (l *Redlock) quorum() int { return system.Majority(len(l.nodes)) }

// drift is Redlock's allowance for clock drift between the nodes.
func (l *Redlock) drift() time.Duration { return l.cfg.TTL/100 + 2*time.Millisecond }

func (l *Redlock) Acquire(ctx context.Context) (Grant, error) {
	l.acquires++
	l.value = fmt.Sprintf("%s-%d", l.cfg.Owner, l.acquires)
	return retryWhileBusy(ctx, l.cfg.Retry, l.try)
}

func (l *Redlock) try(ctx context.Context) (Grant, error) {
	start := l.now()
	granted, failed := l.onEveryNode(ctx, func(ctx context.Context, rdb *redis.Client) (bool, error) {
		return rdb.SetNX(ctx, l.cfg.Key, l.value, l.cfg.TTL).Result()
	})
	elapsed := l.now().Sub(start)
	validity := l.cfg.TTL - elapsed - l.drift()
	if len(granted) >= l.quorum() && validity > 0 {
		return Grant{Detail: map[string]string{
			history.Validity: validity.String(),
			"nodes":          strings.Join(granted, ","),
		}}, nil
	}
	l.releaseEverywhere(ctx)
	if len(granted) >= l.quorum() {
		return Grant{}, &SpentError{Took: elapsed, TTL: l.cfg.TTL}
	}
	// A node that did not answer may have granted the lock: if those could make a
	// majority, whether we held the lock is unknown, not a clean failure.
	if len(granted)+len(failed) >= l.quorum() && validity > 0 {
		return Grant{}, fmt.Errorf("redlock: %d granted, %d unknown (%s)", len(granted), len(failed), strings.Join(failed, "; "))
	}
	return Grant{}, ErrBusy
}

func (l *Redlock) Release(ctx context.Context) error {
	released, failed := l.releaseEverywhere(ctx)
	switch {
	case len(released) >= l.quorum():
		return nil
	case len(released)+len(failed) >= l.quorum():
		return fmt.Errorf("redlock release: %d released, %d unknown (%s)", len(released), len(failed), strings.Join(failed, "; "))
	}
	return ErrNotHeld
}

func (l *Redlock) releaseEverywhere(ctx context.Context) (released, failed []string) {
	return l.onEveryNode(ctx, func(ctx context.Context, rdb *redis.Client) (bool, error) {
		n, err := compareAndDelete.Run(ctx, rdb, []string{l.cfg.Key}, l.value).Int64()
		return n == 1, err
	})
}

// onEveryNode runs op on each node, in turn or at once, each under its own timeout, and
// returns the nodes where it succeeded and descriptions of the ones whose outcome is
// unknown. A node that could not even be dialled did nothing, so it is neither.
func (l *Redlock) onEveryNode(ctx context.Context, op func(context.Context, *redis.Client) (bool, error)) (ok, failed []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(i int, rdb *redis.Client) {
		nctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
		defer cancel()
		done, err := op(nctx, rdb)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && err != redis.Nil && !neverSent(err):
			failed = append(failed, "n"+strconv.Itoa(i+1)+": "+err.Error())
		case done:
			ok = append(ok, "n"+strconv.Itoa(i+1))
		}
	}
	for i, rdb := range l.nodes {
		if !l.parallel {
			run(i, rdb)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); run(i, rdb) }()
	}
	wg.Wait()
	return ok, failed
}

func (l *Redlock) Close() error {
	for _, rdb := range l.nodes {
		rdb.Close()
	}
	return nil
}

// neverSent reports whether err means the request never left the client: the connection
// could not be made. go-redis also answers with its last dial error, without dialling,
// while its circuit breaker is open after a failed dial.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Package brokenlock is a lock a user might write, tested with lockbreaker without forking
// it. It is a Redis lock (SET key value NX PX ttl, with a fencing token counted in the same
// step) whose client first clears whatever lock it may have left behind (after a crash or
// a release that timed out) before it asks for the lock again, a common piece of
// housekeeping. It registers twice:
//
//   - fixedlock releases with a compare-and-delete: only a lock holding this client's
//     value is deleted, so the housekeeping is harmless;
//   - brokenlock releases without checking ownership (DEL key): its housekeeping deletes
//     the lock another client holds, and two clients hold it at once.
//
// The same code with and without the ownership check: lockbreaker's suite (brokenlock.yaml)
// passes one and fails the other. This package never decides whether it is safe: the
// checkers do, from the history.
package brokenlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker"
)

// Register makes both locks lockbreaker clients of a single Redis.
func Register() error {
	for _, checked := range []bool{true, false} {
		name := "brokenlock"
		if checked {
			name = "fixedlock"
		}
		err := lockbreaker.Register(lockbreaker.Client{Name: name, Systems: []string{"redis"}, Tokens: true,
			New: func(cfg lockbreaker.Config) (lockbreaker.Lock, error) { return newLock(cfg, checked) }})
		if err != nil {
			return err
		}
	}
	return nil
}

var (
	// acquire sets the key if it is free and counts a fencing token in the same step.
	acquire = redis.NewScript(`
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return false`)
	compareAndDelete = redis.NewScript(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`)
)

type lock struct {
	cfg lockbreaker.Config
	rdb *redis.Client
	// checked: release deletes the key only when it holds this client's value.
	checked bool
}

func newLock(cfg lockbreaker.Config, checked bool) (lockbreaker.Lock, error) {
	if len(cfg.Nodes) != 1 {
		return nil, fmt.Errorf("this lock needs one Redis node, got %d", len(cfg.Nodes))
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Nodes[0], DialTimeout: cfg.OpTimeout,
		ReadTimeout: cfg.OpTimeout, WriteTimeout: cfg.OpTimeout, MaxRetries: -1, PoolSize: 1})
	return &lock{cfg: cfg, rdb: rdb, checked: checked}, nil
}

// Acquire clears this client's leftover lock, then sets the key once it is free, trying
// again every cfg.Retry until ctx ends.
func (l *lock) Acquire(ctx context.Context) (lockbreaker.Grant, error) {
	if _, err := l.release(ctx); err != nil {
		return lockbreaker.Grant{}, err
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
		token, err := acquire.Run(rctx, l.rdb, []string{l.cfg.Key, l.cfg.Key + ":token"}, l.cfg.Owner, l.cfg.TTL.Milliseconds()).Int64()
		cancel()
		switch {
		case err == nil:
			return lockbreaker.Grant{Token: token, HasToken: true}, nil
		case err != redis.Nil:
			return lockbreaker.Grant{}, err // it may or may not have been set
		}
		select {
		case <-ctx.Done():
			return lockbreaker.Grant{}, lockbreaker.ErrBusy
		case <-time.After(l.cfg.Retry):
		}
	}
}

func (l *lock) Release(ctx context.Context) error {
	deleted, err := l.release(ctx)
	switch {
	case err != nil:
		return err
	case !deleted:
		return lockbreaker.ErrNotHeld
	}
	return nil
}

// release deletes the key: only when it holds this client's value if checked, whoever
// holds it if not (the bug).
func (l *lock) release(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	var n int64
	var err error
	if l.checked {
		n, err = compareAndDelete.Run(ctx, l.rdb, []string{l.cfg.Key}, l.cfg.Owner).Int64()
	} else {
		n, err = l.rdb.Del(ctx, l.cfg.Key).Result()
	}
	return n == 1, err
}

func (l *lock) Close() error { return l.rdb.Close() }

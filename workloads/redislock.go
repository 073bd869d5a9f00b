package workloads

import (
	"context"
	"errors"

	"github.com/bsm/redislock"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/redis/go-redis/v9"
)

// bsmRedisLock adapts github.com/bsm/redislock, a popular single-Redis lock, as a
// third-party client: SET NX PX with a random token and a Lua compare-and-delete, like the
// textbook lock, and no fencing token.
type bsmRedisLock struct {
	cfg  Config
	rdb  *redis.Client
	lib  *redislock.Client
	held *redislock.Lock
}

func init() {
	register(Client{Name: "redislock", Systems: []string{"redis", "sentinel"}, Lease: history.KeptByKey, Extends: true, New: newBSMRedisLock,
		NoTokens: "github.com/bsm/redislock hands out a random value, not a monotonic token"})
}

func newBSMRedisLock(cfg Config) (Lock, error) {
	rdb, err := primaryClient(cfg, "redislock")
	if err != nil {
		return nil, err
	}
	return &bsmRedisLock{cfg: cfg, rdb: rdb, lib: redislock.New(rdb)}, nil
}

func (l *bsmRedisLock) Acquire(ctx context.Context) (Grant, error) {
	return retryWhileBusy(ctx, l.cfg.Retry, func(ctx context.Context) (Grant, error) {
		lock, err := l.lib.Obtain(ctx, l.cfg.Key, l.cfg.TTL, &redislock.Options{RetryStrategy: redislock.NoRetry()})
		if errors.Is(err, redislock.ErrNotObtained) {
			return Grant{}, ErrBusy
		}
		if err != nil {
			return Grant{}, err
		}
		l.held = lock
		return Grant{}, nil
	})
}

func (l *bsmRedisLock) Release(ctx context.Context) error {
	if l.held == nil {
		return ErrNotHeld
	}
	lock := l.held
	l.held = nil
	err := lock.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return ErrNotHeld
	}
	return err
}

// Extend is redislock's Refresh: the key's lease is set to a TTL again if its value is
// still this grant's.
func (l *bsmRedisLock) Extend(ctx context.Context) error {
	if l.held == nil {
		return ErrNotHeld
	}
	err := l.held.Refresh(ctx, l.cfg.TTL, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return ErrNotHeld
	}
	return err
}

func (l *bsmRedisLock) Close() error { return l.rdb.Close() }

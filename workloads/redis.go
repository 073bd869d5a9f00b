package workloads

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// The textbook lock on one Redis: SET key value NX PX ttl, released by a Lua
// compare-and-delete so a client can never delete a lock another client now holds.
// With fencing, the grant and the INCR of a token counter happen in one Lua script, so
// no other client can be granted the lock between the two.
//
// On Sentinel the same lock runs on whichever node the Sentinels call the primary. The
// primary replicates the key and the counter asynchronously, so a replica promoted after
// a crash may have neither: it grants the lock again and counts tokens from where its copy
// stopped, which is how a token repeats or goes back.

var (
	acquireWithToken = redis.NewScript(`
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

func init() {
	register(Client{Name: "redis", Systems: []string{"redis", "sentinel"}, Lease: history.KeptByKey, Tokens: true, New: newRedisLock})
}

type redisLock struct {
	cfg Config
	rdb *redis.Client
	// value is this grant's random value: unique per acquisition, as the seed says, so a
	// release can only delete the lock it was granted.
	value    string
	acquires int
}

func newRedisLock(cfg Config) (Lock, error) {
	rdb, err := primaryClient(cfg, "the redis lock")
	if err != nil {
		return nil, err
	}
	return &redisLock{cfg: cfg, rdb: rdb}, nil
}

// primaryClient connects a single-server lock to its server: the one node, or on Sentinel
// whichever node the Sentinels say is the primary (go-redis's failover client asks them
// again when its connection breaks, and drops its connections when they announce a new
// primary).
func primaryClient(cfg Config, lock string) (*redis.Client, error) {
	if len(cfg.Sentinels) > 0 {
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    system.SentinelMaster,
			SentinelAddrs: cfg.Sentinels,
			DialTimeout:   cfg.OpTimeout,
			ReadTimeout:   cfg.OpTimeout,
			WriteTimeout:  cfg.OpTimeout,
			MaxRetries:    -1,
			PoolSize:      1,
		}), nil
	}
	if len(cfg.Nodes) != 1 {
		return nil, fmt.Errorf("%s needs exactly one node, got %d", lock, len(cfg.Nodes))
	}
	return newRedisClient(cfg.Nodes[0], cfg.OpTimeout), nil
}

// newRedisClient makes a client that never retries on its own: a retried SET NX could
// succeed twice from the client's point of view, and every outcome must be the one the
// history records.
func newRedisClient(addr string, timeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  timeout,
		ReadTimeout:  timeout,
		WriteTimeout: timeout,
		MaxRetries:   -1,
		PoolSize:     1,
	})
}

func (l *redisLock) Acquire(ctx context.Context) (Grant, error) {
	l.acquires++
	l.value = fmt.Sprintf("%s-%d", l.cfg.Owner, l.acquires)
	return retryWhileBusy(ctx, l.cfg.Retry, l.try)
}

// retryWhileBusy calls try until it returns something other than ErrBusy, or a
// SpentError (a refusal the history keeps, attempt by attempt), or ctx ends.
// ctx only stops new attempts: an attempt in flight runs to its own timeout, so giving up
// on a busy lock is a definite failure rather than an abandoned request. A grant's
// AttemptStarted, unless try set it, is when the granted attempt began; a busy outcome is a
// BusyError naming the last attempt, or, when the service answered none, the last
// attempt's own words (a connection that could not be made).
func retryWhileBusy(ctx context.Context, retry time.Duration, try func(context.Context) (Grant, error)) (Grant, error) {
	var unasked error     // the latest attempt that asked nothing
	var busy *BusyError   // the latest run of attempts the service answered busy
	var last int64        // when the latest of them began
	var apart, took int64 // the longest gap between their starts, the longest of them
	unbroken := true      // every attempt so far was answered
	for {
		started := history.Now()
		g, err := try(context.WithoutCancel(ctx))
		if err == nil && g.AttemptStarted == 0 {
			g.AttemptStarted = started
		}
		if err == nil && busy != nil && unbroken {
			g.BusyEvery = time.Duration(max(apart, started-last) + took)
		}
		if spent := (*SpentError)(nil); !errors.Is(err, ErrBusy) || errors.As(err, &spent) {
			return g, err
		}
		switch now := history.Now(); {
		case err != ErrBusy: // a wrapped one: a try that asked nothing (no connection) ends the run
			unasked, last, unbroken = err, 0, false
		case last == 0:
			busy, last, apart, took = &BusyError{Since: started, Until: now}, started, 0, now-started
		default:
			apart, took = max(apart, started-last), max(took, now-started)
			busy.Until, last = now, started
		}
		if busy != nil {
			busy.Every = time.Duration(apart + took)
		}
		select {
		case <-ctx.Done():
			if busy != nil {
				return Grant{}, busy
			}
			return Grant{}, unasked // no attempt was answered
		case <-time.After(retry):
		}
	}
}

func (l *redisLock) try(ctx context.Context) (Grant, error) {
	ttl := strconv.FormatInt(l.cfg.TTL.Milliseconds(), 10)
	if l.cfg.Fencing {
		token, err := acquireWithToken.Run(ctx, l.rdb, []string{l.cfg.Key, l.cfg.Key + ":token"}, l.value, ttl).Int64()
		if errors.Is(err, redis.Nil) {
			return Grant{}, ErrBusy
		}
		if err != nil {
			return Grant{}, err
		}
		return Grant{Token: token, HasToken: true}, nil
	}
	ok, err := l.rdb.SetNX(ctx, l.cfg.Key, l.value, l.cfg.TTL).Result()
	if err != nil {
		return Grant{}, err
	}
	if !ok {
		return Grant{}, ErrBusy
	}
	return Grant{}, nil
}

func (l *redisLock) Release(ctx context.Context) error {
	deleted, err := compareAndDelete.Run(ctx, l.rdb, []string{l.cfg.Key}, l.value).Int64()
	if err != nil {
		return err
	}
	if deleted == 0 {
		return ErrNotHeld
	}
	return nil
}

func (l *redisLock) Close() error { return l.rdb.Close() }

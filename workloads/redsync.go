package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// redsyncLock adapts github.com/go-redsync/redsync, the most used Go Redlock library, as a
// third-party client. It asks all nodes at once and computes validity with Go's monotonic
// clock, so a pause during acquire is caught but a pause after it is not.
type redsyncLock struct {
	cfg     Config
	clients []*redis.Client
	rs      *redsync.Redsync
	mutex   *redsync.Mutex
}

func init() {
	register(Client{Name: "redsync", Systems: []string{"redlock"}, Lease: history.KeptByKey, NoTokens: redlockNoTokens, Extends: true, New: newRedsync})
}

func newRedsync(cfg Config) (Lock, error) {
	if len(cfg.Nodes) < 3 || len(cfg.Nodes)%2 == 0 {
		return nil, fmt.Errorf("redsync needs an odd number of nodes, at least 3; got %d", len(cfg.Nodes))
	}
	l := &redsyncLock{cfg: cfg}
	var pools []redsyncredis.Pool
	for _, addr := range cfg.Nodes {
		c := newRedisClient(addr, cfg.OpTimeout)
		l.clients = append(l.clients, c)
		pools = append(pools, goredis.NewPool(c))
	}
	l.rs = redsync.New(pools...)
	return l, nil
}

func (l *redsyncLock) Acquire(ctx context.Context) (Grant, error) {
	// One try per call: our loop retries, so giving up is a definite failure.
	options := []redsync.Option{redsync.WithExpiry(l.cfg.TTL), redsync.WithTries(1)}
	if l.cfg.OpTimeout > 0 && l.cfg.TTL > 0 {
		// A node's answer may take OpTimeout, as with every client; redsync's own default
		// (5 % of the TTL, 15 ms for a 300 ms lease) calls a busy machine's node silent.
		options = append(options, redsync.WithTimeoutFactor(float64(l.cfg.OpTimeout)/float64(l.cfg.TTL)))
	}
	l.mutex = l.rs.NewMutex(l.cfg.Key, options...)
	return retryWhileBusy(ctx, l.cfg.Retry, func(ctx context.Context) (Grant, error) {
		err := l.mutex.LockContext(ctx)
		if err == nil {
			until := l.mutex.Until()
			return Grant{Detail: map[string]string{"until": until.Format("15:04:05.000"),
				history.Validity: time.Until(until).Round(time.Millisecond).String()}}, nil
		}
		// Nodes that failed to answer may have granted the lock: if they and the nodes that
		// granted it could make a majority, the outcome is unknown.
		refused, unanswered := nodeOutcomes(err)
		if unanswered > 0 && len(l.clients)-refused >= system.Majority(len(l.clients)) {
			return Grant{}, err
		}
		return Grant{}, ErrBusy
	})
}

func (l *redsyncLock) Release(ctx context.Context) error {
	return quorumAnswer(l.mutex.UnlockContext(ctx))
}

// Extend is redsync's: it renews the keys on every node that still holds them, and says
// yes when a majority did with validity left.
func (l *redsyncLock) Extend(ctx context.Context) error {
	if l.mutex == nil {
		return ErrNotHeld
	}
	ok, err := l.mutex.ExtendContext(ctx)
	if errors.Is(err, redsync.ErrExtendFailed) {
		return fmt.Errorf("%w: a majority renewed the lease with no validity left", ErrNotHeld)
	}
	return quorumAnswer(ok, err)
}

// quorumAnswer is a release's or extend's outcome from redsync's: done, unknown when
// nodes that did not answer could have made a majority, not held otherwise.
func quorumAnswer(ok bool, err error) error {
	switch {
	case ok:
		return nil
	case hasUnanswered(err):
		return err
	}
	return ErrNotHeld
}

func (l *redsyncLock) Close() error {
	for _, c := range l.clients {
		c.Close()
	}
	return nil
}

// nodeOutcomes counts, in a redsync error, the nodes that certainly did not grant (the
// lock was taken there, or the node could not be dialled) and the nodes whose answer is
// unknown.
func nodeOutcomes(err error) (refused, unanswered int) {
	var quorumTaken *redsync.ErrTaken
	if errors.As(err, &quorumTaken) {
		return len(quorumTaken.Nodes), 0
	}
	for _, e := range flatten(err) {
		var nodeTaken *redsync.ErrNodeTaken
		var redisErr *redsync.RedisError
		switch {
		case errors.As(e, &nodeTaken), errors.Is(e, redsync.ErrLockAlreadyExpired), neverSent(e):
			refused++
		case errors.As(e, &redisErr):
			unanswered++
		}
	}
	return refused, unanswered
}

func hasUnanswered(err error) bool {
	_, unanswered := nodeOutcomes(err)
	return unanswered > 0
}

// flatten lists the errors joined in err.
func flatten(err error) []error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var all []error
	for _, e := range joined.Unwrap() {
		all = append(all, flatten(e)...)
	}
	return all
}

package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/locksvc"
)

// The local lock: a lease on the in-process lock service (package locksvc), so a trial
// runs with no Docker. Whether the service is correct or deliberately broken is the
// service's business: both systems use this one client.
//
// Every grant carries the service's token whether or not the storage checks it (as with
// Redis, the token exists either way), so Config.Fencing changes nothing here.

func init() {
	register(Client{Name: "local", Systems: []string{"local"}, Lease: history.KeptByKey, Tokens: true, Extends: true, New: newLocalLock})
	register(Client{Name: "local-broken", Systems: []string{"local-broken"}, Lease: history.KeptByKey, Tokens: true, Extends: true, New: newLocalLock})
}

type localLock struct {
	cfg Config
	svc *locksvc.Client
	// owner names this grant: unique per acquisition, like the Redis lock's value, so a
	// release can only give up the lock it was granted.
	owner    string
	acquires int
}

func newLocalLock(cfg Config) (Lock, error) {
	if len(cfg.Nodes) != 1 {
		return nil, errors.New("the local lock needs exactly one node: the lock service's address")
	}
	if cfg.OpTimeout <= 0 {
		return nil, errors.New("the local lock needs an op timeout: a paused service never answers")
	}
	return &localLock{cfg: cfg, svc: locksvc.NewClient(cfg.Nodes[0])}, nil
}

func (l *localLock) Acquire(ctx context.Context) (Grant, error) {
	l.acquires++
	l.owner = fmt.Sprintf("%s-%d", l.cfg.Owner, l.acquires)
	return retryWhileBusy(ctx, l.cfg.Retry, l.try)
}

func (l *localLock) try(ctx context.Context) (Grant, error) {
	resp, err := l.do(ctx, locksvc.Request{Op: locksvc.OpAcquire, TTLms: l.cfg.TTL.Milliseconds()})
	switch {
	case err != nil:
		return Grant{}, err
	case resp.OK:
		return Grant{Token: resp.Token, HasToken: true, Detail: map[string]string{"owner": l.owner}}, nil
	case resp.Reason == locksvc.RefuseBusy:
		return Grant{}, ErrBusy
	}
	return Grant{}, fmt.Errorf("local lock: acquire refused: %s", resp.Reason)
}

func (l *localLock) Release(ctx context.Context) error {
	if l.owner == "" {
		return ErrNotHeld // never acquired
	}
	return l.held(ctx, locksvc.Request{Op: locksvc.OpRelease})
}

// Extend renews the lease, and says no when the answer came a TTL or more after the
// request: the lease it renewed may have run out before the client heard of it.
func (l *localLock) Extend(ctx context.Context) error {
	if l.owner == "" {
		return ErrNotHeld // never acquired
	}
	asked := time.Now()
	err := l.held(ctx, locksvc.Request{Op: locksvc.OpExtend, TTLms: l.cfg.TTL.Milliseconds()})
	if took := time.Since(asked); err == nil && took >= l.cfg.TTL {
		return fmt.Errorf("%w: the extend was answered %s after it was asked, past the lease it renewed", ErrNotHeld, took.Round(time.Millisecond))
	}
	return err
}

// held sends a request that only the lease's owner may make: nil when it was applied,
// ErrNotHeld when this client does not hold the lock.
func (l *localLock) held(ctx context.Context, req locksvc.Request) error {
	resp, err := l.do(ctx, req)
	switch {
	case err != nil:
		return err
	case resp.OK:
		return nil
	case resp.Reason == locksvc.RefuseNotHeld:
		return ErrNotHeld
	}
	return fmt.Errorf("local lock: %s refused: %s", req.Op, resp.Reason)
}

// do sends req for this lock and grant, bounded by the op timeout but an extend's, which
// waits for its answer as long as ctx allows, as redsync's waits for every node's.
func (l *localLock) do(ctx context.Context, req locksvc.Request) (locksvc.Response, error) {
	if req.Op != locksvc.OpExtend {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.cfg.OpTimeout)
		defer cancel()
	}
	req.Key, req.Owner = l.cfg.Key, l.owner
	return l.svc.Do(ctx, req)
}

func (l *localLock) Close() error { return l.svc.Close() }

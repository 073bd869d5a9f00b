package workloads

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"

	"github.com/go-zookeeper/zk"
	"github.com/lockbreaker/lockbreaker/history"
)

// zkLibLock adapts go-zookeeper's own zk.NewLock recipe as a third-party client. Its lock
// node and sequence number are unexported, so the fencing token is the lock node's czxid
// (a zxid, so it only grows), read after the grant from the lowest node in the queue,
// which is ours while we hold the lock. zk.Lock cannot be cancelled: giving up means
// closing the session, which deletes its queued node, and starting a new one.
type zkLibLock struct {
	cfg      Config
	conn     *zk.Conn
	lock     *zk.Lock
	dir      string
	acquires int
}

func init() {
	register(Client{Name: "zk-recipe-lib", Systems: []string{"zookeeper"}, Lease: history.KeptBySession, Tokens: true, Queues: true, New: newZKLib})
}

func newZKLib(cfg Config) (Lock, error) {
	l := &zkLibLock{cfg: cfg, dir: "/locks/" + cfg.Key}
	return l, l.connect()
}

func (l *zkLibLock) connect() error {
	conn, err := dialZK(l.cfg)
	if err != nil {
		return err
	}
	l.conn, l.lock = conn, zk.NewLock(conn, l.dir, zk.WorldACL(zk.PermAll))
	return nil
}

func (l *zkLibLock) Acquire(ctx context.Context) (Grant, error) {
	l.acquires++
	data := fmt.Sprintf("%s-%d", l.cfg.Owner, l.acquires)
	done := make(chan error, 1)
	go func() { done <- l.lock.LockWithData([]byte(data)) }()
	select {
	case err := <-done:
		if err != nil {
			return Grant{}, err
		}
		g, err := l.grant(data)
		if err != nil {
			l.lock.Unlock() // do not keep a lock we cannot use
			l.lock = zk.NewLock(l.conn, l.dir, zk.WorldACL(zk.PermAll))
		}
		return g, err
	case <-ctx.Done():
	}
	l.conn.Close()
	err := <-done
	if cerr := l.connect(); cerr != nil {
		return Grant{}, cerr
	}
	if err == nil {
		// Granted just as we gave up; closing the session has released it again.
		return Grant{}, errors.New("zk.Lock granted while giving up; session closed")
	}
	return Grant{}, ErrBusy
}

func (l *zkLibLock) grant(data string) (Grant, error) {
	children, _, err := l.conn.Children(l.dir)
	if err != nil {
		return Grant{}, fmt.Errorf("find lock node: %w", err)
	}
	sortBySequence(children)
	for _, c := range children[:min(1, len(children))] {
		got, stat, err := l.conn.Get(path.Join(l.dir, c))
		if err == nil && string(got) == data {
			return Grant{Token: stat.Czxid, HasToken: true,
				Detail: map[string]string{"node": c, "czxid": strconv.FormatInt(stat.Czxid, 10)}}, nil
		}
	}
	return Grant{}, fmt.Errorf("zk.Lock granted but the lowest node in %s is not ours", l.dir)
}

func (l *zkLibLock) Release(context.Context) error {
	err := l.lock.Unlock()
	if err != nil {
		// zk.Lock still thinks it holds the lock after a failed Unlock and would refuse
		// the next Lock with ErrDeadlock.
		l.lock = zk.NewLock(l.conn, l.dir, zk.WorldACL(zk.PermAll))
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: lock node is gone (session expired)", ErrNotHeld)
	case errors.Is(err, zk.ErrNotLocked):
		return ErrNotHeld
	}
	return err
}

func (l *zkLibLock) Close() error {
	l.conn.Close()
	return nil
}

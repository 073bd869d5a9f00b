package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// etcd's own lock, from its client library (go.etcd.io/etcd/client/v3): a
// concurrency.Session keeps a lease alive from a goroutine of the client, and
// concurrency.Mutex puts the key <prefix>/<lease> under that lease; the key with the
// lowest create revision owns the lock, and each waiter watches for the deletion of the
// keys created before its own. The lease is the lock's: a holder paused past its TTL stops
// renewing it, etcd deletes its key, and the next waiter is told it holds the lock while
// the paused one still believes it does (Jepsen, etcd 3.4.3, 2020).
//
// The lease asks for --ttl rounded up to whole seconds, which is all the lease API counts,
// and the server raises a lease under its minimum (see system.EtcdLeaseTTL and the run's
// notes); a grant records the TTL the server gave (lease_ttl) and, renewing the lease as
// it is granted, how long it is valid at least (validity).
//
// The fencing token is the lock key's create revision. A revision is the cluster's, not a
// member's: every write to the replicated store takes the next one, and a new leader goes
// on from the last committed entry, which Raft's election rule guarantees it has, so
// revisions never repeat or go back across leaders or restarts. And the lock passes in
// create-revision order: a key owns the lock only once every key created before it is
// gone, so a later holder's key was created after an earlier holder's, at a higher
// revision.

func init() {
	register(Client{Name: "etcd", Systems: []string{"etcd"}, Lease: history.KeptBySession, Tokens: true, Queues: true, New: newEtcdLock})
}

type etcdLock struct {
	cfg    Config
	cli    *clientv3.Client
	prefix string
	// session is the lease this client's keys live under, granted with leaseTTL; nil until
	// the next acquire makes one.
	session  *concurrency.Session
	leaseTTL time.Duration
	// held is the mutex of the grant being held.
	held *concurrency.Mutex
}

func newEtcdLock(cfg Config) (Lock, error) {
	l := &etcdLock{cfg: cfg, prefix: "/locks/" + cfg.Key}
	return l, l.dial()
}

// dial makes the client. It connects lazily: an unreachable cluster is an acquire's
// failure, not the worker's. The library's warnings (lost leases, broken streams) go to
// stderr, the worker's log in the run's run.log.
func (l *etcdLock) dial() error {
	logs := zap.NewProductionConfig()
	logs.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	logs.OutputPaths, logs.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	lg, err := logs.Build()
	if err != nil {
		return fmt.Errorf("etcd client logger: %w", err)
	}
	var endpoints []string
	for _, n := range l.cfg.Nodes {
		endpoints = append(endpoints, "http://"+n)
	}
	l.cli, err = clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: lg,
		DialKeepAliveTime: l.cfg.TTL, DialKeepAliveTimeout: l.cfg.TTL})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	return nil
}

// ensureSession makes a session when there is none, or when its lease is no longer kept
// alive (it expired while this client was paused or cut off).
func (l *etcdLock) ensureSession(ctx context.Context) error {
	if l.session != nil {
		select {
		case <-l.session.Done():
			l.session = nil
		default:
			return nil
		}
	}
	// The lease is granted here, on ctx: NewSession would grant it on a context without
	// a deadline, which a cluster that does not answer holds for ever.
	lease, err := l.cli.Grant(ctx, system.EtcdLeaseTTL(l.cfg.TTL))
	if err != nil {
		return err
	}
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(lease.TTL)))
	if err != nil {
		return err
	}
	l.session, l.leaseTTL = s, time.Duration(lease.TTL)*time.Second
	return nil
}

// dropSession stops renewing the session's lease, whose keys then die with it: after an
// outcome this client cannot know, no key of its own may live on to make it the owner
// unawares, and its next grant must be under a new key.
func (l *etcdLock) dropSession() {
	if l.session != nil {
		l.session.Orphan()
		l.session = nil
	}
}

func (l *etcdLock) Acquire(ctx context.Context) (Grant, error) {
	if err := l.ensureSession(ctx); err != nil {
		return Grant{}, fmt.Errorf("%w (no session: %v)", ErrBusy, err) // no key was written
	}
	m := concurrency.NewMutex(l.session, l.prefix)
	key := fmt.Sprintf("%s/%x", l.prefix, l.session.Lease())
	if err := l.lock(ctx, m); err != nil {
		return Grant{}, l.gaveUp(key, err)
	}
	validity, err := l.renew(ctx)
	if err != nil {
		return Grant{}, l.gaveUp(key, err)
	}
	l.held = m
	cmp := m.IsOwner()
	detail := map[string]string{"key": key, history.LeaseTTL: l.leaseTTL.String(), history.Validity: validity.String()}
	return Grant{Token: (*pb.Compare)(&cmp).GetCreateRevision(), HasToken: true, Detail: detail}, nil
}

// renew renews the session's lease once more as the lock is granted and returns how long
// this client can stop from now on and still keep its lease: a TTL from when the renewal
// was sent, less etcdRenewLag. The session's own renewals come every third of a TTL, so
// without this the lease could end two thirds of a TTL after the grant, and a fault that
// keeps a holder inside its lease (kill-node's pause-in-lease) would keep it past. A
// lease already gone is the session's expiry: the key went with it.
func (l *etcdLock) renew(ctx context.Context) (time.Duration, error) {
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	resp, err := l.cli.KeepAliveOnce(ctx, l.session.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		err = concurrency.ErrSessionExpired
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(resp.TTL)*time.Second - time.Since(sent) - etcdRenewLag, nil
}

// etcdRenewLag is how long a client thawed after a pause may take to renew its lease: the
// library's keep-alive loop looks every 500 ms whether a renewal is due, and the renewal
// must then reach the leader. A client stopped until its lease's last moment loses it.
const etcdRenewLag = 600 * time.Millisecond

// lockGrace is how long Lock may run past its context's end before the client is closed
// under it.
const lockGrace = time.Second

// lock runs m.Lock(ctx). When Lock gives up waiting it deletes its key on the client's own
// context, which has no deadline, so a cluster that does not answer would hold it for
// ever: past ctx's end and a grace, the client is closed under it and dialled again.
func (l *etcdLock) lock(ctx context.Context, m *concurrency.Mutex) error {
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(lockGrace):
	}
	l.dropSession()
	l.cli.Close()
	<-done
	if err := l.dial(); err != nil {
		return err
	}
	return errors.New("etcd did not answer Lock's clean-up; client closed, its lease left to expire")
}

// gaveUp is Acquire's outcome when Lock failed with err: definitely not acquired (ErrBusy)
// once this client's key is known to be gone, unknown otherwise.
func (l *etcdLock) gaveUp(key string, err error) error {
	if errors.Is(err, concurrency.ErrSessionExpired) {
		l.dropSession()
		return fmt.Errorf("%w: %v", ErrBusy, err)
	}
	if l.session == nil { // closed under Lock
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.OpTimeout)
	defer cancel()
	if _, derr := l.cli.Delete(ctx, key); derr != nil {
		l.dropSession()
		return fmt.Errorf("%w (and deleting lock key %s failed: %v)", err, key, derr)
	}
	return ErrBusy
}

// Release deletes the lock key only while it is the one this grant owns, as Unlock would
// without saying whether it still was: gone (its lease expired) means this client no
// longer held the lock.
func (l *etcdLock) Release(ctx context.Context) error {
	m := l.held
	l.held = nil
	if m == nil {
		return ErrNotHeld
	}
	resp, err := l.cli.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpDelete(m.Key())).Commit()
	switch {
	case err != nil:
		l.dropSession()
		return err
	case !resp.Succeeded:
		l.dropSession()
		return fmt.Errorf("%w: lock key %s is gone (lease expired)", ErrNotHeld, m.Key())
	}
	return nil
}

func (l *etcdLock) Close() error {
	l.dropSession()
	return l.cli.Close()
}

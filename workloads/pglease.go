package workloads

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockbreaker/lockbreaker/history"
)

// A lease row in PostgreSQL, in the design of cirello.io/pglock (the Go module proxy does
// not serve that module here, so this is the design, not the library): a row per lock with
// a record version number (RVN) drawn from a sequence; the holder renews its lease by
// giving the row a new RVN every quarter of the TTL (pglock's ratio: 5 s in 20); a waiter
// takes the lock when the row is free or when it has seen the same RVN for a whole TTL by
// its own clock, by a conditional upsert on the RVN it saw. Nothing on the server expires:
// the lease is the waiters' patience, so a holder paused past the TTL stops renewing, a
// waiter takes the lock, and the paused one wakes up believing it still holds it.
//
// The fencing token is the RVN the grant wrote. Every grant and renewal draws the next
// number of one sequence, so a later holder's grant, which replaced the row an earlier
// holder last renewed, carries a higher number.

func init() {
	register(Client{Name: "pg-lease", Systems: []string{"postgres"}, Lease: history.KeptByKey, Tokens: true, New: newPGLease})
}

type pgLease struct {
	db pgSession
	// seen is the RVN of someone else's lease this client last saw, and when it first saw
	// it; a lease unchanged for a TTL has run out.
	seen      int64
	seenSince time.Time
	// rvn is the row's RVN while this client holds the lock. Renewals change it, from a
	// goroutine that alone uses the connection until stopRenewing returns.
	rvn          int64
	held         bool
	stopRenewing func()
}

func newPGLease(cfg Config) (Lock, error) { return &pgLease{db: pgSession{cfg: cfg}}, nil }

func (l *pgLease) Acquire(ctx context.Context) (Grant, error) {
	return retryWhileBusy(ctx, l.db.cfg.Retry, l.try)
}

// try takes the row when it is free or still carries the RVN this client has seen for a
// TTL; otherwise it notes the RVN it found.
func (l *pgLease) try(ctx context.Context) (Grant, error) {
	if err := l.db.connected(ctx); err != nil {
		return Grant{}, err
	}
	var expired *int64
	if l.seen != 0 && time.Since(l.seenSince) >= l.db.cfg.TTL {
		expired = &l.seen
	}
	var taken, current *int64
	err := l.db.do(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		// Both sub-statements see the row as it was before the upsert: current is the RVN
		// that kept this client out, when it was kept out.
		return conn.QueryRow(ctx, `WITH taken AS (
				INSERT INTO lockbreaker_leases (name, record_version_number, owner)
				VALUES ($1, nextval('lockbreaker_leases_rvn'), $2)
				ON CONFLICT (name) DO UPDATE SET record_version_number = EXCLUDED.record_version_number, owner = EXCLUDED.owner
				WHERE lockbreaker_leases.record_version_number IS NULL OR lockbreaker_leases.record_version_number = $3
				RETURNING record_version_number)
			SELECT (SELECT record_version_number FROM taken),
				(SELECT record_version_number FROM lockbreaker_leases WHERE name = $1)`,
			l.db.cfg.Key, l.db.cfg.Owner, expired).Scan(&taken, &current)
	})
	switch {
	case err != nil:
		return Grant{}, err
	case taken == nil:
		if current != nil && *current != l.seen {
			l.seen, l.seenSince = *current, time.Now()
		}
		return Grant{}, ErrBusy
	}
	detail := map[string]string{}
	if expired != nil {
		detail["took_over"] = fmt.Sprint(*expired) // the RVN whose lease ran out
	}
	l.seen = 0
	l.rvn, l.held = *taken, true
	l.stopRenewing = l.renew()
	return Grant{Token: *taken, HasToken: true, Detail: detail}, nil
}

// renew gives the row a new RVN every quarter TTL while this client holds it, until the
// returned function is called or a renewal fails (the row is someone else's, or the
// database did not answer: the holder learns of it at its release).
func (l *pgLease) renew() (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(l.db.cfg.TTL / 4)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var next *int64
			err := l.db.do(context.Background(), func(ctx context.Context, conn *pgx.Conn) error {
				return conn.QueryRow(ctx, `UPDATE lockbreaker_leases SET record_version_number = nextval('lockbreaker_leases_rvn')
					WHERE name = $1 AND record_version_number = $2 RETURNING record_version_number`,
					l.db.cfg.Key, l.rvn).Scan(&next)
			})
			if err == nil && next != nil {
				l.rvn = *next
			}
			if err != nil || next == nil {
				return
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// Release frees the row if it still carries this client's latest RVN.
func (l *pgLease) Release(ctx context.Context) error {
	if !l.held {
		return ErrNotHeld
	}
	l.held = false
	l.stopRenewing()
	var freed int64
	err := l.db.do(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		tag, err := conn.Exec(ctx, `UPDATE lockbreaker_leases SET record_version_number = NULL, owner = NULL
			WHERE name = $1 AND record_version_number = $2`, l.db.cfg.Key, l.rvn)
		freed = tag.RowsAffected()
		return err
	})
	switch {
	case err != nil:
		return err
	case freed == 0:
		return fmt.Errorf("%w: another client took the row over (the lease ran out)", ErrNotHeld)
	}
	return nil
}

func (l *pgLease) Close() error {
	if l.held {
		l.stopRenewing()
	}
	l.db.drop()
	return nil
}

package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockbreaker/lockbreaker/history"
)

// PostgreSQL's session-level advisory lock, through github.com/jackc/pgx/v5: the lock is
// pg_try_advisory_lock on a number hashed from the key, tried every --retry, and released
// with pg_advisory_unlock. The lease is the session: the server frees the lock when the
// session ends, which for a client that went silent is when the server's TCP keepalives
// give up on it (sized to the TTL, see system/postgres.go). The holder learns that only
// at its next query: until then it believes it holds the lock, and a client cut off the
// database but not the storage goes on writing.
//
// Each grant records the server backend that ran its statement (pg_backend_pid(), in the
// same statement): through a pooler that is the server connection, and so the session,
// that holds the lock, which need not be the client's own (nemesis: pooled-session).
//
// The fencing token is nextval of a sequence, taken in the same statement, and so the same
// session, as the grant. A sequence only moves forward, also across a crash (nextval's WAL
// record is flushed when its transaction commits), and a later grant's statement runs
// after the earlier holder's session gave the lock up, so it draws a higher number.

func init() {
	register(Client{Name: "pg-advisory", Systems: []string{"postgres"}, Lease: history.KeptBySession, Tokens: true, New: newPGAdvisory})
}

// pgSession is a lock client's connection to the database: made on first use, and again
// after it broke (a session that broke is over, and its locks with it). It is not safe for
// concurrent use.
type pgSession struct {
	cfg  Config
	conn *pgx.Conn
}

// get returns the connection, connecting first when there is none. A new connection makes
// sure the objects the locks use exist.
func (s *pgSession) get(ctx context.Context) (*pgx.Conn, error) {
	if s.conn != nil && !s.conn.IsClosed() {
		return s.conn, nil
	}
	if len(s.cfg.Nodes) != 1 {
		return nil, fmt.Errorf("postgres: want one node, got %d", len(s.cfg.Nodes))
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.cfg.Nodes[0]))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = s.cfg.Owner
	if s.cfg.Pooler != "" {
		// Through a pooler the next statement may run on another server connection, where
		// pgx's cache of prepared statements names statements that do not exist: the simple
		// protocol prepares none, as PgBouncer's users are told to do.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	ctx, cancel := context.WithTimeout(ctx, pgConnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := pgSchema(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	s.conn = conn
	return conn, nil
}

// connected connects unless connected; a connection that cannot be made is a try that
// asked nothing, so it is ErrBusy, and the lock's retries go on.
func (s *pgSession) connected(ctx context.Context) error {
	if _, err := s.get(ctx); err != nil {
		return fmt.Errorf("%w (%v)", ErrBusy, err)
	}
	return nil
}

// pgConnectTimeout bounds connecting and setting up: longer than one request, since a
// fresh server process must start for it.
const pgConnectTimeout = 2 * time.Second

// pgSchema creates the fencing sequence and pg-lease's table and sequence unless they
// exist, one client at a time (CREATE ... IF NOT EXISTS races with itself): under a
// transaction-level advisory lock on a pair of numbers, which never meets the single
// bigint keys of the locks under test.
func pgSchema(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			`SELECT pg_advisory_xact_lock(1819239275, 1)`,
			`CREATE SEQUENCE IF NOT EXISTS lockbreaker_fence`,
			`CREATE TABLE IF NOT EXISTS lockbreaker_leases (name text PRIMARY KEY, record_version_number bigint, owner text)`,
			`CREATE SEQUENCE IF NOT EXISTS lockbreaker_leases_rvn`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("postgres schema: %w", err)
			}
		}
		return nil
	})
}

// do runs f on the connection within the client's request timeout. A request that failed
// other than by the server's refusal leaves the session's state unknown, so the
// connection is closed: the session ends, and whatever it held with it.
func (s *pgSession) do(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	conn, err := s.get(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	if err := f(ctx, conn); err != nil {
		s.drop()
		return err
	}
	return nil
}

// drop closes the connection, if any.
func (s *pgSession) drop() {
	if s.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	s.conn.Close(ctx)
	s.conn = nil
}

type pgAdvisory struct {
	db pgSession
	// held is whether this client holds the lock by its own account.
	held bool
}

func newPGAdvisory(cfg Config) (Lock, error) { return &pgAdvisory{db: pgSession{cfg: cfg}}, nil }

func (l *pgAdvisory) Acquire(ctx context.Context) (Grant, error) {
	return retryWhileBusy(ctx, l.db.cfg.Retry, l.try)
}

func (l *pgAdvisory) try(ctx context.Context) (Grant, error) {
	if err := l.db.connected(ctx); err != nil {
		return Grant{}, err
	}
	var token *int64
	var pid int32
	err := l.db.do(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT CASE WHEN pg_try_advisory_lock(hashtextextended($1, 0))
			THEN nextval('lockbreaker_fence') END, pg_backend_pid()`, l.db.cfg.Key).Scan(&token, &pid)
	})
	switch {
	case err != nil:
		return Grant{}, err
	case token == nil:
		return Grant{}, ErrBusy
	}
	l.held = true
	return Grant{Token: *token, HasToken: true, Detail: map[string]string{history.BackendDetail: fmt.Sprint(pid)}}, nil
}

func (l *pgAdvisory) Release(ctx context.Context) error {
	if !l.held {
		return ErrNotHeld
	}
	l.held = false
	if l.db.conn == nil {
		return errors.New("postgres: the session broke while the lock was held")
	}
	var released bool
	err := l.db.do(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, l.db.cfg.Key).Scan(&released)
	})
	switch {
	case err != nil:
		return err
	case !released:
		return fmt.Errorf("%w: the session no longer holds it", ErrNotHeld)
	}
	return nil
}

func (l *pgAdvisory) Close() error {
	l.db.drop()
	return nil
}

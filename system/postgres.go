package system

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"
)

// PostgreSQL from Debian's postgresql-15: one server, the lock service being the database
// itself (session-level advisory locks, or a table of leases). It runs as the plain
// postgres process, PID 1 of its container under the postgres user, on a database
// initialised when the image is built, so a node starts in well under a second and one
// killed and started again recovers from its write-ahead log like any crashed server.
//
// With a pooler (--pooler), Debian's PgBouncer 1.18 runs in the same node, in front of the
// server, and every lock client connects to it instead (port 6432). It lives in the node
// rather than in a container of its own because that is both simpler and what the faults
// need: a client cut off the node (partition-holder and every other cut, which drop a
// client's address inside the node) is cut off the pooler with it, and kill-node kills the
// whole node, pooler and server together, as a crashed database host would; a pooler that
// outlived its server, or the reverse, is a scenario of its own that no fault here makes.
// The pooler is started by the node's shell just before it becomes the server, so it is a
// child of the postmaster; it ends only with the container. A signal to the node (pause-node's
// SIGSTOP) reaches PID 1, the postmaster, alone: the pooler, like the server's backends,
// runs on.
const (
	postgresPort  = 5432
	postgresBin   = "/usr/lib/postgresql/15/bin"
	postgresDir   = "/lockbreaker/pg"
	postgresData  = postgresDir + "/data"
	pgbouncerPort = 6432
)

// The pooler modes: PgBouncer's pool_mode session (a server connection is a client's from
// its first query until it disconnects, then reset with DISCARD ALL, which ends its
// advisory locks) and transaction (a server connection is a client's for one transaction,
// a single statement outside one, and then any other client's: session state, an advisory
// lock included, stays on the server connection, not with the client that made it).
const (
	PgBouncerSession     = "pgbouncer-session"
	PgBouncerTransaction = "pgbouncer-transaction"
)

// pgbouncerPoolSize is how many server connections PgBouncer keeps for all the clients
// together (default_pool_size; no reserve): fewer than a run's five clients, so that in
// transaction mode one server connection really serves one client's statement after
// another's, as a pooler in production does. In session mode the clients beyond it wait
// for a server connection that the two first ones keep for their whole session.
const pgbouncerPoolSize = 2

func init() {
	register(System{
		Name:          "postgres",
		About:         "one PostgreSQL server; session-level advisory locks, or a table of leases (pglock's design)",
		Sizes:         Sizes{Default: 1, Min: 1, Max: 1},
		DefaultClient: "pg-advisory",
		Persistences:  []Persistence{PersistSynchronousCommit, PersistSynchronousCommitOff},
		Container: &Container{
			Port:   postgresPort,
			Node:   postgresNode,
			Ready:  postgresServing,
			Data:   postgresData,
			Image:  &Image{Packages: []string{"postgresql-15", "pgbouncer"}, Prepare: postgresPrepare},
			Notes:  postgresNotes,
			Pooler: &Pooler{Modes: []string{PgBouncerSession, PgBouncerTransaction}, Port: pgbouncerPort},
		},
	})
}

// postgresPrepare initialises the database when the image is built: initdb refuses to run
// as root, and the data directory must belong to the server's user.
const postgresPrepare = "install -d -o postgres -g postgres -m 0700 " + postgresData + "\n" +
	"setpriv --reuid=postgres --regid=postgres --init-groups " + postgresBin + "/initdb -D " + postgresData +
	" -U postgres --auth=trust --encoding=UTF8 --locale=C --no-sync >/dev/null\n"

// postgresKeepalive is how the server notices a client that went silent (cut off, its host
// gone): TCP keepalives probe an idle connection after idle, every interval, and give up
// after count unanswered probes; tcp_user_timeout gives up on data left unacknowledged
// that long. Ending the session ends its advisory locks, so this is the advisory lock's
// lease: sized to the TTL (whole seconds, at least 2 s), as a team that wants a dead
// holder's lock back within its lease would set it. A paused client's kernel still
// answers the probes, so its session, and its lock, outlive any pause.
type postgresKeepalive struct {
	idle, interval time.Duration
	count          int
	userTimeout    time.Duration
}

func keepaliveFor(ttl time.Duration) postgresKeepalive {
	total := max(2, int(wholeSeconds(ttl))) // whole seconds, as the settings count them
	return postgresKeepalive{idle: time.Duration(total-total/2) * time.Second, interval: time.Second, count: total / 2,
		userTimeout: time.Duration(total) * time.Second}
}

// postgresStart execs its arguments as the postgres user (the server refuses to run as
// root), staying PID 1. Under faked clocks libfaketime, preloaded into every program the
// node's entry point starts, opens a semaphore and shared memory named by the PID and
// shares them with the programs started after it: made by root, the server could not open
// them and would exit. So no root program after this shell is preloaded, the shell's
// leftovers go, and the server is the first to make its own.
//
// With a pooler, whose configuration is then among the node's files, PgBouncer is started
// first, in the background, as the postgres user too (it refuses root) and never preloaded: its clock is
// the host's, whatever a clock fault does to the server's.
const postgresStart = `preload="${LD_PRELOAD:-}"
unset LD_PRELOAD FAKETIME_SHARED
rm -f /dev/shm/sem.faketime_sem_* /dev/shm/faketime_shm_*
if [ -f ` + pgbouncerConf + ` ]; then
  setpriv --reuid=postgres --regid=postgres --init-groups /usr/sbin/pgbouncer ` + pgbouncerConf + ` &
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups env ${preload:+"LD_PRELOAD=$preload"} "$@"`

// postgresNode runs the server on the image's database with a configuration of its own:
// every address trusted (the lock clients are the harness's), logs to stderr (the node's
// log), connections and disconnections logged, and keepalives sized to the TTL.
func postgresNode(cluster Cluster, _ int) NodeSetup {
	k := keepaliveFor(cluster.TTL)
	conf := fmt.Sprintf(`listen_addresses = '*'
port = %d
unix_socket_directories = '/tmp'
hba_file = '%s/pg_hba.conf'
max_connections = 200
shared_buffers = 32MB
log_destination = 'stderr'
logging_collector = off
log_connections = on
log_disconnections = on
log_line_prefix = '%%m [%%p] %%a '
tcp_keepalives_idle = %d
tcp_keepalives_interval = %d
tcp_keepalives_count = %d
tcp_user_timeout = %d
`, postgresPort, postgresDir, int(k.idle.Seconds()), int(k.interval.Seconds()), k.count, k.userTimeout.Milliseconds())
	if cluster.Persistence == PersistSynchronousCommitOff {
		conf += "synchronous_commit = off\n"
	}
	setup := NodeSetup{
		Cmd: []string{"sh", "-c", postgresStart, "postgres-start",
			postgresBin + "/postgres", "-D", postgresData, "-c", "config_file=" + postgresDir + "/postgresql.conf"},
		Files: []File{
			{Path: postgresDir + "/postgresql.conf", Content: conf},
			{Path: postgresDir + "/pg_hba.conf", Content: "local all all trust\nhost all all all trust\n"},
		},
	}
	if mode := pgbouncerMode(cluster.Pooler); mode != "" {
		setup.Files = append(setup.Files,
			File{Path: pgbouncerConf, Content: pgbouncerConfig(mode, k)},
			File{Path: pgbouncerUsers, Content: `"postgres" ""` + "\n"})
	}
	return setup
}

const (
	pgbouncerConf  = postgresDir + "/pgbouncer.ini"
	pgbouncerUsers = postgresDir + "/userlist.txt"
)

// pgbouncerMode is PgBouncer's pool_mode for a pooler's name; "" for none.
func pgbouncerMode(pooler string) string {
	switch pooler {
	case PgBouncerSession:
		return "session"
	case PgBouncerTransaction:
		return "transaction"
	}
	return ""
}

// pgbouncerConfig is PgBouncer's configuration: every database to the server beside it,
// every client trusted (trust still wants the user in the auth file), the pool mode, a
// pool of pgbouncerPoolSize server connections, its log on stderr (the node's log), and
// the server's keepalives on the clients' connections, so that a client gone silent is
// dropped by the pooler as soon as the server would have dropped it. In session mode that
// hands its server connection back, reset with DISCARD ALL, which ends its advisory
// locks; in transaction mode the locks stay on the server connection whatever becomes of
// the client. A failed login to the server is retried after a second, not 15 (the
// default), so a node is ready as soon as its server is.
func pgbouncerConfig(mode string, k postgresKeepalive) string {
	return fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = *
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = postgres
pool_mode = %s
default_pool_size = %d
reserve_pool_size = 0
max_client_conn = 200
server_reset_query = DISCARD ALL
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
log_connections = 1
log_disconnections = 1
tcp_keepalive = 1
tcp_keepidle = %d
tcp_keepintvl = %d
tcp_keepcnt = %d
tcp_user_timeout = %d
`, postgresPort, pgbouncerPort, pgbouncerUsers, mode, pgbouncerPoolSize,
		int(k.idle.Seconds()), int(k.interval.Seconds()), k.count, k.userTimeout.Milliseconds())
}

func postgresNotes(cluster Cluster) []string {
	k := keepaliveFor(cluster.TTL)
	var notes []string
	switch mode := pgbouncerMode(cluster.Pooler); mode {
	case "transaction":
		notes = append(notes, fmt.Sprintf("%s: every client reaches the server through PgBouncer 1.18 in the node, pool_mode transaction, "+
			"%d server connections for all the clients: a server connection is a client's for one statement (or one transaction) and then "+
			"another's, and session state, an advisory lock included, stays with the server connection; the clients speak pgx's simple "+
			"protocol (no prepared statements, which transaction pooling breaks)", cluster.Pooler, pgbouncerPoolSize))
	case "session":
		notes = append(notes, fmt.Sprintf("%s: every client reaches the server through PgBouncer 1.18 in the node, pool_mode session, "+
			"%d server connections for all the clients: a server connection is a client's until it disconnects, then reset with DISCARD ALL "+
			"(which ends its advisory locks) and handed to the next; clients beyond the pool wait for one; the pooler drops a silent client "+
			"with the server's keepalives", cluster.Pooler, pgbouncerPoolSize))
	}
	return append(notes, fmt.Sprintf("postgres: tcp_keepalives_idle %s, tcp_keepalives_interval %s, tcp_keepalives_count %d, "+
		"tcp_user_timeout %s: the server ends the session of a client gone silent (cut off, its host dead) within about %s, "+
		"and with it the session's advisory locks; a paused client's kernel still answers, so its session outlives the pause",
		k.idle, k.interval, k.count, k.userTimeout, k.idle+time.Duration(k.count)*k.interval))
}

// postgresServing succeeds when the server at addr lets a client in: it answers a startup
// message with ReadyForQuery, not with "the database system is starting up".
func postgresServing(ctx context.Context, addr string) error {
	params := "user\x00postgres\x00database\x00postgres\x00\x00"
	startup := binary.BigEndian.AppendUint32(nil, uint32(8+len(params)))
	startup = binary.BigEndian.AppendUint32(startup, 3<<16) // protocol 3.0
	_, err := ask(ctx, addr, string(startup)+params, readUntilReady)
	return err
}

// readUntilReady reads backend messages until ReadyForQuery ('Z'); an ErrorResponse ('E')
// is an error carrying its message.
func readUntilReady(r *bufio.Reader) (string, error) {
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return "", err
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 || n > 1<<16 {
			return "", fmt.Errorf("postgres: a %q message of %d bytes", head[0], n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		switch head[0] {
		case 'Z':
			return "ready", nil
		case 'E':
			return "", fmt.Errorf("postgres: %s", errorMessage(body))
		}
	}
}

// errorMessage is the message field ('M') of an ErrorResponse's body.
func errorMessage(body []byte) string {
	for _, field := range strings.Split(string(body), "\x00") {
		if msg, ok := strings.CutPrefix(field, "M"); ok {
			return msg
		}
	}
	return "error without a message"
}

package history

import "time"

// Lease is what a run's lock promises the client it grants: for how long, and what keeps
// the grant alive. The lease-safety checker holds the lock to it; a run whose summary
// states none is not judged for it.
type Lease struct {
	// TTL is the lease the clients asked for (--ttl).
	TTL time.Duration `json:"ttl_ns"`
	// Kept is what keeps a grant alive.
	Kept Keeping `json:"kept,omitempty"`
}

// Keeping is what keeps a grant alive, which decides what a history can prove of it: that
// another client's grant surely still ran when a client was told it held the lock.
type Keeping string

const (
	// KeptUnknown: nothing is known (a program over the exec protocol); a grant is taken to
	// run only where it would by either way below.
	KeptUnknown Keeping = ""
	// KeptByKey: a key with a time to live, set by each acquire and extend (Redis, Redlock,
	// a lease table): a grant runs at least until the TTL after its last attempt began.
	KeptByKey Keeping = "key"
	// KeptBySession: the client's session, kept alive as long as the client runs and
	// reaches the service (ZooKeeper's session, etcd's lease kept alive, a PostgreSQL
	// connection): a grant runs while no fault touches its client or the service.
	KeptBySession Keeping = "session"
)

// KeptDetail is the detail of a grant that says what keeps it alive (a Keeping), where its
// client says so and the run's Lease cannot (a program over the exec protocol); it stands
// over the run's.
const KeptDetail = "kept"

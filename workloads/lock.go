// Package workloads is what the lock clients do: the Lock interface every lock client
// implements (our own implementations of the textbook algorithms and adapters around
// third-party libraries), the registry that names them, and the lock-counter workload a
// worker runs against a lock and the shared storage.
//
// Workloads never decide whether a run was safe; they only do the work and report each
// operation's outcome honestly: ok, fail (definitely did not happen) or indeterminate.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
)

// Lock is one client's handle on one distributed lock.
type Lock interface {
	// Acquire tries until the lock is held or ctx ends. ErrBusy means it was definitely
	// not acquired; any other error leaves that unknown.
	Acquire(ctx context.Context) (Grant, error)
	// Release gives the lock up. ErrNotHeld means this client did not hold it any more
	// (the lease expired, or someone else holds it); other errors leave it unknown.
	Release(ctx context.Context) error
	Close() error
}

// Extender is a Lock whose holder can renew its lease (redsync's Extend, redis-py's
// extend, an etcd lease's keep-alive): a holder that extends (--extend-every) calls it
// during its work and once more just before it writes. nil means the lease runs for a
// TTL from now; ErrNotHeld means this client does not hold the lock any more, and a
// holder told so does not write; other errors leave it unknown, and the holder does not
// write either.
type Extender interface {
	Extend(ctx context.Context) error
}

// Grant is what a successful Acquire returns.
type Grant struct {
	// Token is the fencing token, when HasToken.
	Token    int64
	HasToken bool
	// WatchEvents, for a lock whose waiters watch a queue, counts the watch notifications
	// this acquire waited through (the herd checker reads it); nil for other locks.
	WatchEvents *int
	// Detail is kept in the history for readers (e.g. the lock node's name, validity).
	Detail map[string]string
	// AttemptStarted, optional, is when the attempt that was granted began (CLOCK_MONOTONIC
	// nanoseconds, from history.Now()); zero means unknown. A lock that retries while the
	// lock is busy sets it to the start of its last attempt: the attempts before it found
	// the lock busy, a definite answer, so the grant cannot have happened earlier. The
	// history records it, narrowing when the acquire can have taken effect, only when it
	// lies within the acquire call; a lock that cannot tell leaves it zero.
	AttemptStarted int64
	// BusyEvery, when set, says that every attempt before the granted one found the lock
	// busy, and that any stretch of this length within them holds a whole one (see
	// BusyError).
	BusyEvery time.Duration
}

// BusyError is ErrBusy with when the lock service said so (CLOCK_MONOTONIC nanoseconds):
// every attempt from Since to Until found the lock busy, and Every is the longest gap
// between two attempts' starts plus the longest attempt, so any stretch of Every within
// them holds a whole busy answer. The history keeps it on the acquire's fail, so a fault
// can tell whether the service, in the state the fault left it, answered another client
// (nemesis: a hazard made real).
type BusyError struct {
	Since, Until int64
	Every        time.Duration
}

func (*BusyError) Error() string        { return ErrBusy.Error() }
func (*BusyError) Is(target error) bool { return target == ErrBusy }

// SpentError is a definite refusal of a lock whose client asks several nodes: a majority
// granted it, but the attempt took so long (Took, of a TTL) that no validity was left, so
// the client released what it got and used none of it. Acquire returns it at once, without
// trying again, so that the history keeps each such attempt (history.ValiditySpent).
type SpentError struct{ Took, TTL time.Duration }

func (e *SpentError) Error() string {
	return fmt.Sprintf("a majority granted the lock after its validity ran out (the attempt took %s of a %s TTL); released unused",
		e.Took.Round(time.Millisecond), e.TTL)
}
func (*SpentError) Is(target error) bool { return target == ErrBusy }

var (
	ErrBusy    = errors.New("lock is held by another client")
	ErrNotHeld = errors.New("lock is not held by this client")
	// ErrLost means the lock client itself is gone (a program that exited or stopped
	// answering): the operation's outcome is unknown and this client cannot go on, so its
	// worker ends and a new client takes its place, as after kill-client.
	ErrLost = errors.New("lock client lost")
	// ErrBroken means the lock client broke its contract (a program that spoke no
	// protocol): nothing it says can be trusted, so the run stops and says the client
	// broke instead of judging the lock.
	ErrBroken = errors.New("lock client broke")
)

// Config is what a lock client needs to reach its system.
type Config struct {
	// System names the lock service (redis, sentinel, zookeeper...), for a client that
	// runs on several.
	System string
	// Nodes are the addresses of the lock service's nodes.
	Nodes []string
	// Sentinels, when the system has them, are the addresses of the monitors that say which
	// node is the primary now; a client then finds the primary through them.
	Sentinels []string
	Key       string
	TTL       time.Duration
	// Fencing asks the lock for a fencing token with each grant.
	Fencing bool
	// OpTimeout bounds one request to one node.
	OpTimeout time.Duration
	// Retry is the pause between acquire attempts while the lock is busy.
	Retry time.Duration
	// Owner names this client uniquely within a run (the lock's value, the znode's data).
	Owner string
	// Extend says the run's holders will extend their leases (an Extender's), for a client
	// that must know beforehand: an exec program is told, and may refuse.
	Extend bool `json:",omitempty"`
	// Pooler names the connection pooler between the client and the nodes
	// (system.Pooler), "" for none: a client whose protocol a pooler breaks speaks one it
	// does not (pgx's simple protocol through PgBouncer).
	Pooler string `json:",omitempty"`
	// Program is the command line of the program an exec client drives (package
	// execlock); empty for every other client.
	Program []string
}

// Client describes a lock client that can be chosen with --client.
type Client struct {
	Name string
	// Systems are the cluster kinds it runs against.
	Systems []string
	// Tokens says whether grants carry a fencing token.
	Tokens bool
	// NoTokens explains, when Tokens is false, why fencing cannot be offered.
	NoTokens string
	// Queues says the lock's waiters queue at the service (a ZooKeeper recipe, etcd's
	// Mutex): an acquire not yet granted is the service's refusal for as long as it waits,
	// where a polling client's is only each busy answer.
	Queues bool
	// Extends says its locks are Extenders: a run may ask its holders to extend.
	Extends bool
	// Lease is what keeps its grants alive, which lease-safety judges by; unknown
	// (history.KeptUnknown) for a lock that does not say.
	Lease history.Keeping
	New   func(Config) (Lock, error)
}

var clients = map[string]Client{}

func register(c Client) { clients[c.Name] = c }

// Register adds a lock client from outside this package: a user's own lock, through
// lockbreaker.Register, before the command line runs. It refuses what would make the
// client unusable or ambiguous: a name that is taken or that a flag, a comma-separated
// list or a directory name would mangle, no system or one that does not exist, no
// constructor, and no tokens without the reason the report must give.
func Register(c Client) error {
	switch {
	case c.Name == "" || strings.ContainsAny(c.Name, " ,/\\") || strings.IndexFunc(c.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("register lock client %q: a name is a printable word without spaces, commas or slashes", c.Name)
	case clients[c.Name].Name != "":
		return fmt.Errorf("register lock client %q: the name is taken", c.Name)
	case len(c.Systems) == 0:
		return fmt.Errorf("register lock client %q: name the systems it runs on (%s)", c.Name, strings.Join(system.Names(), ", "))
	case c.New == nil:
		return fmt.Errorf("register lock client %q: no New function", c.Name)
	case !c.Tokens && c.NoTokens == "":
		return fmt.Errorf("register lock client %q: say why its grants carry no fencing token (NoTokens); the report shows it", c.Name)
	}
	for _, name := range c.Systems {
		if _, err := system.Lookup(name); err != nil {
			return fmt.Errorf("register lock client %q: %w", c.Name, err)
		}
	}
	register(c)
	return nil
}

// LookupClient returns a registered lock client.
func LookupClient(name string) (Client, error) {
	c, ok := clients[name]
	if !ok {
		return Client{}, fmt.Errorf("unknown client %s (known: %v)", quote.Short(name), ClientNames())
	}
	return c, nil
}

// ClientNames lists the registered clients, sorted.
func ClientNames() []string {
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RunsOn reports whether the client runs against the system called name: one it names,
// or one described in a file that says it speaks to this client (system.System.Speaks:
// one of the systems the client names, or the client itself).
func (c Client) RunsOn(name string) bool {
	if slices.Contains(c.Systems, name) {
		return true
	}
	sys, err := system.Lookup(name)
	if err != nil {
		return false
	}
	return slices.Contains(sys.Speaks, c.Name) || slices.ContainsFunc(c.Systems, func(s string) bool { return slices.Contains(sys.Speaks, s) })
}

// ForSystem lists the clients that run on a system, sorted by name.
func ForSystem(system string) []Client {
	var on []Client
	for _, name := range ClientNames() {
		if c := clients[name]; c.RunsOn(system) {
			on = append(on, c)
		}
	}
	return on
}

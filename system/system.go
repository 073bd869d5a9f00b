// Package system describes, once, each lock service lockbreaker can test: its name, the
// cluster sizes it accepts, how one of its nodes (and of the monitors beside them, such as
// Redis Sentinels) runs in a container and how to tell that it serves, its default lock
// client, and the facts that decide which faults and settings apply to it (a leader, a
// majority of independent nodes, a replicated primary, a choice of persistence). The CLI,
// containers, workloads and nemeses all read these descriptors, so adding a system is one
// new file here plus its clients.
//
// Descriptors are plain data and probes that dial a node; nothing here touches Docker.
package system

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// System is one lock service.
type System struct {
	Name string
	// About is one line for help texts.
	About string
	Sizes Sizes
	// DefaultClient is the lock client used when none is asked for: our own
	// implementation of the textbook algorithm for this system.
	DefaultClient string
	// Leader: one node leads the others (a ZooKeeper ensemble), so faults aimed at the
	// leader apply.
	Leader bool
	// IndependentMajority: a client holds the lock when a majority of independent nodes
	// granted it, each expiring its grant by its own wall clock (Redlock). Kleppmann's
	// clock example is staged against such a system.
	IndependentMajority bool
	// Replicated: one primary replicates asynchronously to the other nodes, and the
	// monitors promote a replica when the primary fails (Redis Sentinel), so failover faults
	// apply and a primary can be told to refuse writes its replicas have not acknowledged.
	Replicated bool
	// Persistences are the choices of what the nodes keep on disk and when they sync it
	// (Cluster.Persistence), the system's own default first: what a node killed, or whose
	// machine lost its power, remembers. Nil: the system has no such choice.
	Persistences []Persistence
	// TokenCaveat says why the system's fencing tokens may not protect the storage, when
	// they may not (a count that a failover sets back); the report's notes carry it.
	TokenCaveat string
	// FixedClock, when set, says why the nodes' wall clocks cannot be moved, so clock
	// faults are refused; "" when they can.
	FixedClock string
	// Speaks, for a system described in a file (package sysfile), says which lock clients
	// speak to it: each word a built-in system, all of whose clients do, a client's name,
	// or exec. Built-in systems leave it empty: their clients name them.
	Speaks []string
	// Exactly one of Container and InProcess is set: how the service runs.
	Container *Container
	InProcess *InProcess
}

// Sizes are the cluster sizes a system accepts.
type Sizes struct {
	Default, Min, Max int
	// Odd: only odd sizes, so that any two majorities overlap.
	Odd bool
}

// Check resolves 0 to the default size and refuses a size the system cannot run.
func (s System) Check(nodes int) (int, error) {
	if nodes == 0 {
		return s.Sizes.Default, nil
	}
	z := s.Sizes
	switch {
	case z.Min == z.Max && nodes != z.Min:
		return nodes, fmt.Errorf("%s: %d nodes (it has %d)", s.Name, nodes, z.Min)
	case nodes < z.Min || nodes > z.Max:
		return nodes, fmt.Errorf("%s: %d nodes (want %d to %d)", s.Name, nodes, z.Min, z.Max)
	case z.Odd && nodes%2 == 0:
		return nodes, fmt.Errorf("%s: %d nodes (want an odd number, so that any two majorities overlap)", s.Name, nodes)
	}
	return nodes, nil
}

// Majority is the smallest number of nodes out of n that any other such number overlaps.
func Majority(n int) int { return n/2 + 1 }

// Container says how one node of a system runs in a container of the node image.
type Container struct {
	// Port is the server's client port inside the container.
	Port int
	// PeerPorts are the other ports a node's server listens on, for the other nodes (an
	// ensemble's quorum and election, a Raft cluster's peers). On a machine each must be
	// free, as Port must.
	PeerPorts []int
	// Node is the command and files of node id (1..cluster.Nodes).
	Node func(cluster Cluster, id int) NodeSetup
	// Ready succeeds once the node at addr serves (for an ensemble: once a quorum does).
	Ready func(ctx context.Context, addr string) error
	// ReadyIn, when set, is a command run in the node (no shell needed) that exits 0 once
	// it serves, asked instead of Ready; for systems described in a file.
	ReadyIn []string
	// Role, when set, asks the node at addr for its role now (Leader, Follower, Primary,
	// Replica).
	Role func(ctx context.Context, addr string) (Role, error)
	// RoleIn, when set, is a command run in the node whose output's first word is its role
	// (ParseRole), asked instead of Role; for systems described in a file.
	RoleIn []string
	// Data is the directory in the node where the server keeps what it must not lose (its
	// log, its snapshots, its database): a fault on the node's disk puts a disk that can
	// lose unsynced writes there, holding what the node had there before. "" when the
	// server keeps nothing lockbreaker knows of, and no disk fault applies.
	Data string
	// Crash, when set, crashes the server at addr in place and has it start again at once,
	// as a supervisor restarting a crashed server would: its memory is lost, its disk and
	// address kept, and connections are refused until it serves again rather than left to
	// time out on an address that has gone. It returns once the server has dropped the
	// connection it was told on. Without it a crash kills the node's container.
	Crash func(ctx context.Context, addr string) error
	// Monitors, when set, run beside the nodes (Redis Sentinels).
	Monitors *Monitors
	// Image, when set, is what the nodes run that the node image lacks. The node image
	// holds Redis, Sentinel and ZooKeeper; a system with packages of its own gets an image
	// of its own on top of it, built only when a run asks for that system, so a run of
	// Redis never waits for a database it does not use.
	Image *Image
	// Notes, when set, are the settings of the nodes a reader needs to judge a run (what
	// the lease became, how soon a dead client is noticed); the report shows them.
	Notes func(cluster Cluster) []string
	// Pooler, when set, is a connection pooler that can stand between every lock client
	// and the nodes (PgBouncer in front of PostgreSQL), run when Cluster.Pooler names one
	// of its modes.
	Pooler *Pooler
	// OnMachine, when set, says that the nodes of a system described in a file run on
	// machines too (package machines), and how they start there. The built-in systems'
	// recipes start there as they are.
	OnMachine *OnMachine
}

// OnMachine is how a node of a system described in a file starts on a machine: as in its
// container (Node's command and files, Image's copied files), but for what a machine does
// otherwise.
type OnMachine struct {
	// Cmd, when set, is node id's command there instead of Node's (the program's path on
	// the machine, say).
	Cmd func(cluster Cluster, id int) []string
	// Prepare is a shell script run as root in the node's directory before the node's
	// first start, in place of Image's, which prepares an image.
	Prepare string
}

// Pooler is a connection pooler a system's node runs beside its server when asked to: the
// clients then dial Port on the node instead of the server's own, and whether a node
// serves is asked through it, so a node is ready once both the pooler and the server
// behind it answer.
type Pooler struct {
	// Modes are the names a run chooses it by (--pooler), e.g. pgbouncer-transaction.
	Modes []string
	// Port is the pooler's client port inside the container.
	Port int
}

// PoolerModes lists the poolers every system offers, sorted.
func PoolerModes() []string {
	var modes []string
	for _, s := range systems {
		if s.Container != nil && s.Container.Pooler != nil {
			modes = append(modes, s.Container.Pooler.Modes...)
		}
	}
	slices.Sort(modes)
	return slices.Compact(modes)
}

// ClientPort is the port lock clients dial on a node of this recipe: the pooler's when
// pooler names one, else the server's.
func (c *Container) ClientPort(pooler string) int {
	if pooler != "" && c.Pooler != nil && slices.Contains(c.Pooler.Modes, pooler) {
		return c.Pooler.Port
	}
	return c.Port
}

// Listens are the TCP ports a node of this recipe listens on: its client port, its peers',
// and the pooler's when pooler names one.
func (c *Container) Listens(pooler string) []int {
	ports := append([]int{c.Port}, c.PeerPorts...)
	if p := c.ClientPort(pooler); p != c.Port {
		ports = append(ports, p)
	}
	return ports
}

// Image is a system's own layer on the node image.
type Image struct {
	// Packages are the Debian packages the nodes run.
	Packages []string
	// Prepare is a shell script run as root once the packages are installed, when the
	// image is built: whatever must exist before a node's first start (a database's files).
	Prepare string
	// Copy are files from this machine copied into the layer before Prepare runs (a
	// team's own server binary); for systems described in a file.
	Copy []CopyFile
	// Local, when set, is an image the engine already has (docker load, a local build),
	// which the nodes run as it is instead of a layer on the node image: nothing is
	// pulled, and the image needs no shell, iptables or libfaketime (the harness cuts its
	// network and moves its clock from outside). Its node command replaces the image's
	// entry point. Packages, Prepare and Copy are then empty.
	Local string
}

// CopyFile is a file of this machine copied into an image layer.
type CopyFile struct {
	From string // an absolute path on this machine
	To   string // an absolute path in the image
	Mode int64  // its permissions in the image
}

// Monitors are servers that watch a system's nodes and decide their roles: they grant no
// lock, and clients find the nodes through them. They are named <Prefix>1..<Prefix><Count>
// and start once every node serves; faults aim at the nodes, not at them.
type Monitors struct {
	Prefix string
	Count  int
	// Port is a monitor's client port inside its container.
	Port int
	// Node is the command and files of monitor id (1..Count).
	Node func(cluster Cluster, id int) NodeSetup
	// Ready succeeds once the monitor at addr watches every node of cluster and knows every
	// other monitor: only then can the monitors agree on a failover.
	Ready func(ctx context.Context, cluster Cluster, addr string) error
	// Promote makes the monitor at addr promote a replica now, without waiting until the
	// monitors agree that the primary is down; nil when monitors cannot be asked to.
	Promote func(ctx context.Context, addr string) error
	// Primary is the address ("ip:port") the monitor at addr gives clients for the primary
	// now; nil when the monitors cannot be asked.
	Primary func(ctx context.Context, addr string) (string, error)
}

// NodePackages are the Debian packages every node image has, under each system's own
// (Image.Packages): what the default run needs, and what the faults use in a node
// (libfaketime, iptables). The node image's build installs them.
var NodePackages = []string{"redis-server", "redis-sentinel", "libfaketime", "iptables", "iproute2", "procps"}

// Packages are the Debian packages sys's nodes need: every node's, then its own.
func (sys System) Packages() []string {
	pkgs := slices.Clone(NodePackages)
	if sys.Container != nil && sys.Container.Image != nil {
		pkgs = append(pkgs, sys.Container.Image.Packages...)
	}
	return pkgs
}

// Watcher is one monitor as a cluster reaches it: its name and its address.
type Watcher struct{ Name, Addr string }

// Watchers are a cluster's monitors, s1 first.
type Watchers []Watcher

// Names are the monitors' names.
func (ws Watchers) Names() []string {
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
	}
	return names
}

// Addrs are the addresses lock clients dial to find the nodes through the monitors.
func (ws Watchers) Addrs() []string {
	var addrs []string
	for _, w := range ws {
		addrs = append(addrs, w.Addr)
	}
	return addrs
}

// PromoteAny makes the monitors promote a replica now, asking each in turn until one
// agrees.
func (m *Monitors) PromoteAny(ctx context.Context, system string, monitors []Watcher) error {
	if m == nil || m.Promote == nil {
		return fmt.Errorf("a %s cluster has no monitors to promote a replica", system)
	}
	var errs []error
	for _, mon := range monitors {
		err := m.Promote(ctx, mon.Addr)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("monitor %s: %w", mon.Name, err))
	}
	return errors.Join(errs...)
}

// Announced is the index in nodeAddrs of the node every monitor now gives clients as the
// primary; -1 when they do not all name the same node (a failover under way).
func (m *Monitors) Announced(ctx context.Context, system string, monitors []Watcher, nodeAddrs []string) (int, error) {
	if m == nil || m.Primary == nil {
		return -1, fmt.Errorf("a %s cluster has no monitors to ask for its primary", system)
	}
	named := -1
	for i, mon := range monitors {
		addr, err := m.Primary(ctx, mon.Addr)
		if err != nil {
			return -1, fmt.Errorf("monitor %s: %w", mon.Name, err)
		}
		node := slices.Index(nodeAddrs, addr)
		if node < 0 || i > 0 && node != named {
			return -1, nil
		}
		named = node
	}
	return named, nil
}

// Cluster is what a node's setup depends on.
type Cluster struct {
	Nodes int
	// TTL is the lock's lease; systems with sessions size their timeouts by it.
	TTL time.Duration
	// Persistence is what the nodes keep on disk and when they sync it, one of
	// System.Persistences.
	Persistence Persistence
	// MinReplicas is how many replicas must have acknowledged recent writes for a primary
	// to accept a write (Redis min-replicas-to-write), within MinReplicasMaxLag; for
	// replicated systems. 0 accepts every write.
	MinReplicas       int
	MinReplicasMaxLag time.Duration
	// Pooler names the pooler mode the nodes run in front of their server (one of
	// Container.Pooler's Modes); "" runs none, and clients reach the server itself.
	Pooler string
	// Hosts are what the nodes know each other by, n1's first: the machines' host names or
	// addresses (package machines). Empty, they are the nodes' names, n1 to nN, which the
	// containers' network resolves.
	Hosts []string
}

// Host is what the other nodes know node id (1 for n1) by.
func (c Cluster) Host(id int) string {
	if id <= len(c.Hosts) {
		return c.Hosts[id-1]
	}
	return fmt.Sprintf("n%d", id)
}

// Persistence is what a server keeps on disk and when it syncs it, so what a server killed
// and started again, or one whose machine lost its power, still knows.
type Persistence string

// Redis's: the log is written before each reply in both AOF settings, so a killed server
// keeps it in the machine's memory; only a machine that loses its power loses what was not
// synced.
const (
	// PersistNone keeps nothing: a restarted server has forgotten every key.
	PersistNone Persistence = "none"
	// PersistAOFEverySec appends every write to a log and syncs it to disk once a second.
	PersistAOFEverySec Persistence = "aof-everysec"
	// PersistAOFAlways syncs the log before every reply.
	PersistAOFAlways Persistence = "aof-always"
)

// ZooKeeper's: whether a server syncs its transaction log before it acknowledges.
const (
	PersistForceSync   Persistence = "force-sync"
	PersistNoForceSync Persistence = "no-force-sync"
)

// etcd's: whether a member syncs its write-ahead log before it acknowledges.
const (
	PersistFsync         Persistence = "fsync"
	PersistUnsafeNoFsync Persistence = "unsafe-no-fsync"
)

// PostgreSQL's synchronous_commit: whether a commit waits for its log record to be synced.
// Advisory locks live in the server's memory whatever it is; the lease table's rows obey it.
const (
	PersistSynchronousCommit    Persistence = "synchronous-commit"
	PersistSynchronousCommitOff Persistence = "synchronous-commit-off"
)

// Says is what p means for a node killed or whose machine lost its power, for a report's
// notes; "" for a choice it does not know.
func (p Persistence) Says() string {
	return map[Persistence]string{
		PersistNone:                 "a killed node comes back having forgotten every lock it granted",
		PersistAOFEverySec:          "a killed node keeps every lock its log holds; one that lost its power, what was synced up to a second before",
		PersistAOFAlways:            "each write is synced before its reply: a node killed or powered off keeps every lock it granted",
		PersistForceSync:            "a server syncs its log before it acknowledges: a power loss costs nothing acknowledged",
		PersistNoForceSync:          "a server acknowledges before its log is synced: a power loss loses what its cache held",
		PersistFsync:                "a member syncs its log before it acknowledges: a power loss costs nothing acknowledged",
		PersistUnsafeNoFsync:        "a member never syncs its log: a power loss loses what its cache held",
		PersistSynchronousCommit:    "a commit waits for its log record to be synced: a power loss costs nothing committed",
		PersistSynchronousCommitOff: "a commit answers before its log record is synced: a power loss loses the last commits",
	}[p]
}

// redisPersistences are Redis's choices, none first.
var redisPersistences = []Persistence{PersistNone, PersistAOFEverySec, PersistAOFAlways}

// Persistence is the choice p, or the system's default when p is empty; an error names
// the choices when p is not one of them.
func (s System) Persistence(p Persistence) (Persistence, error) {
	switch {
	case len(s.Persistences) == 0 && p == "":
		return "", nil
	case len(s.Persistences) == 0:
		return "", fmt.Errorf("--persistence applies to systems that choose what they sync (%s), not %s",
			strings.Join(NamesWhere(func(s System) bool { return len(s.Persistences) > 0 }), ", "), s.Name)
	case p == "":
		return s.Persistences[0], nil
	case !slices.Contains(s.Persistences, p):
		var choices []string
		for _, c := range s.Persistences {
			choices = append(choices, string(c))
		}
		return "", fmt.Errorf("--persistence of %s is one of %s, got %s", s.Name, strings.Join(choices, ", "), quote.Short(string(p)))
	}
	return p, nil
}

// NodeSetup is what a node's container runs.
type NodeSetup struct {
	Cmd   []string
	Files []File
}

// File is a file written into a node's container before it starts.
type File struct {
	Path    string
	Content string
}

// Role is a node's part in its cluster.
type Role string

const (
	Leader   Role = "leader"
	Follower Role = "follower"
	// Primary takes the writes and replicates them, asynchronously, to the replicas.
	Primary Role = "primary"
	Replica Role = "replica"
	// Down: the node's server is not running (killed, not started again yet).
	Down Role = "down"
	// Unknown: the node did not say (paused, cut off, or between roles).
	Unknown Role = "unknown"
)

// OnePrimary is the primary of a replicated cluster whose roles have settled: exactly one
// node primary and every other a replica; "" otherwise (a failover under way, an old
// primary back as a second one, a node down).
func OnePrimary(roles map[string]Role) string {
	primary := ""
	for node, role := range roles {
		switch {
		case role == Primary && primary == "":
			primary = node
		case role != Replica:
			return ""
		}
	}
	return primary
}

// InProcess is a lock service the harness serves itself, so a whole trial runs without
// Docker.
type InProcess struct {
	// Broken: the service grants a lock that is held, on purpose, for the checkers to catch.
	Broken bool
}

var (
	// systemsMu guards systems: a system described in a file is registered while a suite
	// runs cells side by side.
	systemsMu sync.RWMutex
	systems   = map[string]System{}
	builtIn   = map[string]bool{}
)

// register adds a descriptor; each system's file registers its own.
func register(s System) {
	if err := Register(s); err != nil {
		panic("system: bad descriptor " + s.Name + ": " + err.Error())
	}
	builtIn[s.Name] = true
}

// Register adds a descriptor from outside this package: a system described in a file
// (package sysfile), once it has been checked. A name that is taken is refused.
func Register(s System) error {
	systemsMu.Lock()
	defer systemsMu.Unlock()
	if _, dup := systems[s.Name]; dup {
		return fmt.Errorf("the name %s is taken by another system", quote.Short(s.Name))
	}
	if (s.Container == nil) == (s.InProcess == nil) {
		return errors.New("a system runs either in containers or in the harness")
	}
	systems[s.Name] = s
	return nil
}

// BuiltIn reports whether name is one of lockbreaker's own systems, not one described in
// a file.
func BuiltIn(name string) bool {
	systemsMu.RLock()
	defer systemsMu.RUnlock()
	return builtIn[name]
}

// Lookup returns the system called name.
func Lookup(name string) (System, error) {
	systemsMu.RLock()
	defer systemsMu.RUnlock()
	s, ok := systems[name]
	if !ok {
		return System{}, fmt.Errorf("unknown system %s (known: %s)", quote.Short(name), strings.Join(names(), ", "))
	}
	return s, nil
}

// Names lists the systems, sorted.
func Names() []string {
	systemsMu.RLock()
	defer systemsMu.RUnlock()
	return names()
}

func names() []string {
	names := make([]string, 0, len(systems))
	for n := range systems {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NamesWhere names the systems for which has holds, sorted.
func NamesWhere(has func(System) bool) []string {
	var names []string
	for _, s := range All() {
		if has(s) {
			names = append(names, s.Name)
		}
	}
	return names
}

// All lists the descriptors in the order of Names.
func All() []System {
	systemsMu.RLock()
	defer systemsMu.RUnlock()
	var all []System
	for _, n := range names() {
		all = append(all, systems[n])
	}
	return slices.Clip(all)
}

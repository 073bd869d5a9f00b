package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/system"
)

// The levers: every power a nemesis has over the nodes, the clients and the network, each a
// small interface that a cluster, the worker pool or the harness's adapters implement, and
// each asked for by one field of Needs, declared in levers below with where it acts and what
// a system without it lacks. A fault that needs a new lever adds its interface and its field
// here, its row in levers, and its adapter in the harness (harness/levers.go), which also
// says whether this host can give it (preflight). Nothing here knows how a lever is made:
// package nemesis imports none of the packages that make them (links, cpucap, clientnet).

// Needs are the levers a nemesis pulls. Each field is one lever and has its row in levers
// (TestEveryNeedIsALever).
type Needs struct {
	// Clocks: the nodes' wall clocks move (libfaketime in containers).
	Clocks bool
	// Network: packets to the nodes can be dropped (NET_ADMIN in containers).
	Network bool
	// Restarts: the nodes' servers are killed and started again.
	Restarts bool
	// ClientAddrs: each lock client has an address of its own on the cluster network, so
	// a fault can reach one client and not the others (ClientNetwork).
	ClientAddrs bool
	// Links: each lock client reaches the nodes and the storage through proxies of its own,
	// which slow, break or hold what it sends, on any system (Links).
	Links bool
	// BusyHolders: a holder works on the CPU through its critical section instead of
	// sleeping, on one processor (workloads.Busy), so a fault that starves it of CPU
	// starves its lock client too.
	BusyHolders bool
	// CPUCaps: a client's process group can be held to a share of a CPU (Throttler).
	CPUCaps bool
	// Disks: the nodes keep their data on disks that hold what a server wrote until it
	// syncs it, so a power loss can drop it and syncs can be slowed (Disks).
	Disks bool
}

// lever is one field of Needs: where it acts and what a system must have for it.
type lever struct {
	field func(*Needs) *bool
	// onCluster: a cluster is started for it, so a kept cluster serves a run that pulls it
	// only when it was started for it too; the others are the workers' and ask nothing of
	// a cluster.
	onCluster bool
	// lacks says why sys cannot take it; nil for a lever every system takes.
	lacks func(sys system.System) error
}

// levers declares every field of Needs once.
var levers = []lever{
	{field: func(n *Needs) *bool { return &n.Clocks }, onCluster: true, lacks: func(sys system.System) error {
		if sys.FixedClock != "" {
			return fmt.Errorf("moves the nodes' wall clocks, and %s", sys.FixedClock)
		}
		return nil
	}},
	{field: func(n *Needs) *bool { return &n.Network }, onCluster: true, lacks: func(sys system.System) error {
		if sys.Container == nil {
			return fmt.Errorf("cuts packets between containers, and %s runs inside the harness", sys.Name)
		}
		return nil
	}},
	{field: func(n *Needs) *bool { return &n.Restarts }, onCluster: true, lacks: func(sys system.System) error {
		if sys.Container == nil {
			return fmt.Errorf("kills a node's server, and %s is served by the harness itself, which would die with it", sys.Name)
		}
		return nil
	}},
	{field: func(n *Needs) *bool { return &n.ClientAddrs }, onCluster: true, lacks: func(sys system.System) error {
		if sys.Container == nil {
			return fmt.Errorf("reaches single lock clients through their own network addresses, and the clients of %s "+
				"share the harness's", sys.Name)
		}
		return nil
	}},
	{field: func(n *Needs) *bool { return &n.Links }, onCluster: true},
	{field: func(n *Needs) *bool { return &n.Disks }, onCluster: true, lacks: func(sys system.System) error {
		if sys.Container == nil || sys.Container.Data == "" {
			return fmt.Errorf("acts on the disk a node keeps its data on, and %s keeps none that lockbreaker knows", sys.Name)
		}
		return nil
	}},
	{field: func(n *Needs) *bool { return &n.BusyHolders }},
	{field: func(n *Needs) *bool { return &n.CPUCaps }},
}

func (n Needs) or(o Needs) Needs {
	for _, l := range levers {
		*l.field(&n) = *l.field(&n) || *l.field(&o)
	}
	return n
}

// available says why sys cannot take the levers n needs: the first it lacks.
func (n Needs) available(sys system.System) error {
	for _, l := range levers {
		if *l.field(&n) && l.lacks != nil {
			if err := l.lacks(sys); err != nil {
				return err
			}
		}
	}
	return nil
}

// OfCluster is the levers a cluster is started for: n without the workers' own, so that
// runs differing only in those can share a cluster.
func (n Needs) OfCluster() Needs {
	var c Needs
	for _, l := range levers {
		if l.onCluster {
			*l.field(&c) = *l.field(&n)
		}
	}
	return c
}

// Workers reaches the lock clients, which are processes known by their numbers in the
// history. A worker that dies is replaced by one with a new number.
type Workers interface {
	// Processes are the workers running now.
	Processes() []int
	// Signal signals a worker; one that has exited takes no signal, and that is no error.
	Signal(process int, sig syscall.Signal) error
}

// SelfStoppers are workers that a directed fault can arm to stop themselves where it needs
// them: after a read under the lock, before the write, where a GC pause hurts. The fault
// then meets its victim at that point however late it hears of the read (a busy machine's
// harness hears it tens of milliseconds late, by which time a holder may have written).
type SelfStoppers interface {
	// ArmStop arms every worker running now. stopped gets the first to stop itself (its
	// whole process group, as SIGSTOP stops it) once it has, and the others are disarmed
	// then; disarm takes the arming back. A worker that stops itself when nobody waits is
	// continued at once.
	ArmStop() (stopped <-chan SelfStop, disarm func())
}

// SelfStop is a worker that stopped itself, and when (CLOCK_MONOTONIC).
type SelfStop struct {
	Process int
	At      int64
}

// Throttler starves lock clients of CPU without stopping them (Needs.CPUCaps): the whole
// process group of one (the worker and its exec client's program, as Signal reaches it)
// gets a small share of one CPU until it is given its CPU back.
type Throttler interface {
	// Throttle caps the process group of client process; one that has exited is no error.
	Throttle(process int) error
	// Tighten lowers every throttled client's share of a CPU one step, and says the share
	// it is at now ("0.4% of a CPU"); false once the least share was reached already.
	Tighten() (share string, tightened bool, err error)
	// Unthrottle gives every throttled client its CPU back. It is idempotent.
	Unthrottle() error
}

// Nodes reaches the lock service's nodes (containers). Every lever's ctx, here and in the
// other levers, is the run's without its cancellation (context.WithoutCancel) when a fault
// is made or healed: a fault begun is made whole and a heal happens after the run ended,
// however long a busy engine takes, within the deadlines the lever keeps of its own.
type Nodes interface {
	Names() []string
	// Signal sends sig (SIGSTOP, SIGCONT) to the node's server.
	Signal(ctx context.Context, node string, sig syscall.Signal) error
}

// Clocks moves the nodes' wall clocks (Needs.Clocks): a node's clock reads real time plus
// offset.
type Clocks interface {
	SetClock(ctx context.Context, node string, offset time.Duration) error
	ResetClocks(ctx context.Context) error
}

// Disks are the nodes' disks, which hold what a server wrote until it syncs it
// (Needs.Disks).
type Disks interface {
	// PowerOff kills the node's server and drops every write its disk held unsynced, as a
	// power cut does, and says in words what was lost; Restarter.Restart starts it again.
	PowerOff(ctx context.Context, node string) (lost string, err error)
	// PowerCycle is PowerOff with the node started again at once, as Restarter.Crash
	// does: the server reads its disk again only once the disk dropped what it held.
	PowerCycle(ctx context.Context, node string) (lost string, err error)
	// SlowSync makes every sync on the node's disk take d; 0 makes them fast again.
	SlowSync(ctx context.Context, node string, d time.Duration) error
}

// Restarter crashes a node's server and starts it again (Needs.Restarts).
type Restarter interface {
	// Kill sends SIGKILL to the node's server and returns once it has gone.
	Kill(ctx context.Context, node string) error
	// Crash kills the node's server to start again at once, in place where the system
	// can (its address then refuses connections rather than leaving them to time out),
	// and returns once it has gone.
	Crash(ctx context.Context, node string) error
	// Restart starts a killed or crashed node's server again and returns once it serves.
	// A node that does not serve again is the service's failure (nodes.NotServingError):
	// a nemesis passes the error on, wrapped with %w, and the harness tells it apart.
	Restart(ctx context.Context, node string) error
	// RestartKilled starts every node still killed again.
	RestartKilled(ctx context.Context) error
}

// Promoter makes the monitors of a replicated cluster promote a replica now, without
// waiting until they agree that the primary is down (SENTINEL FAILOVER), and tells whom
// they name as the primary to clients.
type Promoter interface {
	Promote(ctx context.Context) error
	// Announced is the node every monitor names the primary now; "" while they differ.
	Announced(ctx context.Context) (string, error)
}

// Roles tells each node's part in its cluster now: leader or follower, primary or
// replica, down when killed, unknown when it does not say.
type Roles interface {
	Roles(ctx context.Context) (map[string]system.Role, error)
}

// Leaders finds the node that leads a consensus cluster (ZooKeeper).
type Leaders interface {
	Leader(ctx context.Context) (string, error)
}

// Monitors names the monitors beside the nodes (Sentinels), which a split puts on the
// replicas' side.
type Monitors interface {
	MonitorNames() []string
}

// Network cuts nodes off each other and off the clients (Needs.Network).
type Network interface {
	// IP is a node's address on the cluster network.
	IP(node string) string
	// Gateway is the address the lock clients' traffic comes from.
	Gateway() string
	DropFrom(ctx context.Context, node string, sources ...string) error
	HealNetwork(ctx context.Context) error
}

// ClientNetwork reaches single lock clients on the cluster network, by process number
// (Needs.ClientAddrs). A client that replaces a dead one has its address.
type ClientNetwork interface {
	// ClientIP is process p's address on the cluster network; an error for a process the
	// run never had.
	ClientIP(p int) (string, error)
	// ClientDropFrom makes process p drop every packet from the sources (addresses, or
	// Storage: its path to the storage).
	ClientDropFrom(ctx context.Context, p int, sources ...string) error
	// HealClients removes every cut from every running client.
	HealClients(ctx context.Context) error
	// Routed says the nodes see every client at one address, Network's Gateway (clients
	// routed out to machines): a cut of one client is then made at the client alone, both
	// ways, and a cut of them all at that address.
	Routed() bool
}

// Links reaches what single lock clients send, by process number, through the proxies on
// each client's links to the nodes and to the storage (Needs.Links): the network's faults
// without the kernel's.
type Links interface {
	// Strike does f to process p's links until HealLinks.
	Strike(p int, f LinkFault) error
	// HoldNextWrite arms every client's link to the storage to hold the next write it
	// sends, until the hold is released.
	HoldNextWrite() (WriteHold, error)
	// HealLinks takes every fault and hold back, delivering what was held.
	HealLinks()
}

// LinkEffect is what a LinkFault does to what a client sends.
type LinkEffect int

const (
	// Slow delays it by the fault's Latency, give or take its Jitter.
	Slow LinkEffect = iota + 1
	// Reset answers it with the connection's end at once: it is dropped unanswered.
	Reset
	// Silence lets nothing through and closes each connection CloseAfter after the
	// silence began or the client last sent on it (under a millisecond: never).
	Silence
)

// LinkFault is what a client's links do to what it sends, until HealLinks.
type LinkFault struct {
	Effect          LinkEffect
	Latency, Jitter time.Duration // Slow's
	CloseAfter      time.Duration // Silence's
	Reach           LinkReach
}

// LinkReach narrows a link fault to one of a client's links and to one direction: the
// zero LinkReach is what the client sends on every link, the storage's too.
type LinkReach struct {
	// Node is the node whose link is struck, 1 for n1; 0 strikes every link.
	Node int
	// Answers strikes what comes back to the client instead of what it sends.
	Answers bool
	// LockOnly spares the storage's link when Node is 0: the fault is on the lock service.
	LockOnly bool
}

// String says where r strikes, for logs and details: "" for the zero LinkReach.
func (r LinkReach) String() string {
	var where []string
	if r.Node > 0 {
		where = append(where, "n"+strconv.Itoa(r.Node)+"'s link")
	}
	if r.Node == 0 && r.LockOnly {
		where = append(where, "the lock's links")
	}
	if r.Answers {
		where = append(where, "answers")
	}
	return strings.Join(where, ", ")
}

// String says what f does, for a nemesis's tests and logs.
func (f LinkFault) String() string {
	var what string
	switch f.Effect {
	case Slow:
		what = fmt.Sprintf("slowed %s±%s", f.Latency, f.Jitter)
	case Reset:
		what = "broken: reset"
	case Silence:
		what = fmt.Sprintf("broken: silent, closed after %s", f.CloseAfter)
	default:
		return "no fault"
	}
	if where := f.Reach.String(); where != "" {
		what += " (" + where + ")"
	}
	return what
}

// WriteHold is an armed hold: Caught tells the write it caught, Release lets it go on to
// the storage.
type WriteHold interface {
	Caught() <-chan HeldWrite
	Release()
}

// HeldWrite is the storage write a hold caught: whose (the process its request names), its
// value, and when the proxy caught it (history.Now).
type HeldWrite struct {
	Process int
	Value   int64
	At      int64
}

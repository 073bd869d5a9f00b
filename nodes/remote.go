// Package nodes reaches a lock service's nodes wherever they live and writes every node
// fault once, above that reach: kills and restarts, pauses, clocks, partitions, the role
// and leader probes, readiness and the servers' logs. A place (containers through the
// Docker engine, machines over SSH) gives one Remote per node, Jepsen's remote protocol: run
// a command as root where the server lives, put a file there, signal its server, kill it
// and start it again, and read its log. Everything else, and what Heal means, is Cluster's,
// the same in every place. It imports no place: the places import it.
package nodes

import (
	"context"
	"io"
	"syscall"
)

// Remote is one node's server as its place reaches it. A place must make each call whole
// or fail: a fault begun is made whole and a heal happens after the run ended, so the
// calls keep deadlines of their own rather than ending with ctx.
type Remote interface {
	// Info is the node's plain facts, fixed for the life of its cluster.
	Info() Info
	// Run runs cmd as root where the server lives, no shell needed, and returns its
	// output; a non-zero exit is an error carrying it. cmd's words name the node's files as
	// its container recipe does (under /lockbreaker/): a place that keeps them elsewhere
	// moves them.
	Run(ctx context.Context, cmd ...string) (string, error)
	// NetRun runs a shell script as root in the node's network namespace, where its
	// iptables rules take effect; the script finds iptables there.
	NetRun(ctx context.Context, script string) error
	// Put writes data to the file at path (named as Run's words are), whole: a reader of
	// the file never sees it half written, and two Puts at once do not undo each other.
	Put(ctx context.Context, path string, data []byte) error
	// Signal sends sig to the server's process.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Kill sends SIGKILL to the server, with what it started beside it, and returns once it
	// has gone; its disk stays for Start. An error that unwraps to
	// context.DeadlineExceeded means the place never answered: the kill may have happened.
	Kill(ctx context.Context) error
	// Start starts a killed server again on what its disk kept, and returns once it runs
	// (not once it serves).
	Start(ctx context.Context) error
	// Alive says whether the server's process runs: nil while it does, an *ExitedError
	// once it has exited, another error when its place could not tell.
	Alive(ctx context.Context) error
	// Log writes the server's log to w: its last tail lines, or all of it when tail is 0.
	Log(ctx context.Context, w io.Writer, tail int) error
	// Disk is the disk the server keeps its data on when it can lose power or be slowed;
	// nil when the run's faults need no such disk.
	Disk() *Disk
}

// Info is what a node is, as plain data.
type Info struct {
	// Name is n1..nN for a node, s1..sM for a monitor.
	Name string
	// Addr is the host:port the lock clients dial.
	Addr string
	// IP is the node's address as the other nodes and this host reach it: what a
	// partition between nodes drops.
	IP string
	// Control is this host's address as the node sees it: where every lock client's and
	// the harness's traffic to the node comes from.
	Control string
	// KeepPort, when not 0, is a TCP port no cut may close: the one the place reaches the
	// node through (SSH).
	KeepPort int
	// ClockFile is the file libfaketime reads the server's wall clock offset from, in
	// signed seconds, when the server runs under it.
	ClockFile string
	// ClockProgram, when set, is a program that sets the node's system clock to real time
	// plus its argument in signed seconds, for a node whose own clock moves.
	ClockProgram string
}

// ExitedError is Alive's answer for a server that has exited; How says what its place knows
// of it ("exit code 3").
type ExitedError struct{ How string }

func (e *ExitedError) Error() string { return "exited (" + e.How + ")" }

// NotServingError is a node that did not serve: its server exited, or did not answer
// within the wait. At a cluster's start the run cannot begin. After a fault took the node
// down, the service did not come back, which a run reports as what it found
// (history.NotServing) rather than as its own failure.
type NotServingError struct {
	Node string
	// Why is how it did not serve: "exited (...)", or the wait's end and the last probe's
	// answer.
	Why string
	// Log is the end of the node's log.
	Log string
	// Err is the wait's end when that is why: its deadline, or an interrupt.
	Err error
}

// Short is the error without the log: "node n2 exited (exit code 3)".
func (e *NotServingError) Short() string { return "node " + e.Node + " " + e.Why }

func (e *NotServingError) Error() string { return e.Short() + "; log ends:\n" + e.Log }

func (e *NotServingError) Unwrap() error { return e.Err }

// Package history is the record of one run: every operation a lock client invoked and
// how it completed, and every fault the nemesis injected and healed, in the order they
// happened, with CLOCK_MONOTONIC times that are comparable across processes.
//
// It is plain data on purpose. The harness appends events as they happen (see Recorder),
// the checkers read them back (see ReadFile) and never need Docker, a worker or a clock, so a
// saved history can be checked again at any time.
//
// It is also where the two halves agree on names: every kind of fault (faults.go) and every
// hazard (hazard.go) is declared here once, with the words a story, a report and `help run`
// say it in; a nemesis refers to its kind's declaration rather than spelling its name.
package history

import (
	"strconv"
	"strings"
	"time"
)

// Type says whether an event is an invocation or one of the three ways an operation ends.
type Type string

const (
	Invoke Type = "invoke"
	// OK means the operation took effect.
	OK Type = "ok"
	// Fail means the operation definitely did not take effect.
	Fail Type = "fail"
	// Info means it is unknown whether the operation took effect: a timeout, a lost
	// connection, a killed worker. Never record such an outcome as Fail.
	Info Type = "info"
)

// Func names what an operation does.
type Func string

const (
	Acquire Func = "acquire"
	Release Func = "release"
	// Extend renews a held lock's lease (--extend-every): ok, the holder still holds it;
	// not-held, it does not, and a holder that is told so does not write.
	Extend Func = "extend"
	Read   Func = "read"
	Write  Func = "write"
	// FinalRead is the harness's read of the register after every client stopped; it is
	// made by no lock holder and shows what the storage really kept.
	FinalRead Func = "final-read"
	// Start and Stop bracket a fault injected by the nemesis.
	Start Func = "start"
	Stop  Func = "stop"
	// Roles records the nodes' roles (leader, primary, replica, down...) as they are seen
	// to change; not a fault.
	Roles Func = "roles"
	// HazardFunc records that a fault's hazard occurred (see Hazard); not a fault.
	HazardFunc Func = "hazard"
	// NotServing records that a node a fault took down did not serve again (Targets names
	// it, Message says how): the service failed to come back. The run ends there, and none
	// of its verdicts can be valid.
	NotServing Func = "not-serving"
)

// Process numbers that are not lock clients.
const (
	NemesisProcess = -1
	HarnessProcess = -2
)

// ErrorKind says why an operation failed, so checkers need not parse messages.
type ErrorKind string

// The error kinds a fail may carry.
const (
	// ErrStaleToken: the storage rejected a request whose fencing token was lower than
	// one it had already seen.
	ErrStaleToken ErrorKind = "stale-token"
	// ErrMissingToken: the storage, fencing, rejected a request that carried no token.
	ErrMissingToken ErrorKind = "missing-token"
	// ErrBadRequest: the service did not understand the request.
	ErrBadRequest ErrorKind = "bad-request"
	// ErrUnreachable: the service could not be reached; nothing was sent.
	ErrUnreachable ErrorKind = "unreachable"
	// ErrNotHeld: a release or an extend found the lock held by someone else or by no one.
	ErrNotHeld ErrorKind = "not-held"
	// ErrLockBusy: an acquire gave up because the lock stayed held.
	ErrLockBusy ErrorKind = "busy"
)

var errorKinds = []ErrorKind{ErrStaleToken, ErrMissingToken, ErrBadRequest, ErrUnreachable, ErrNotHeld, ErrLockBusy}

// Event is one line of history.jsonl.
type Event struct {
	// Index is the event's position in the file, assigned by the recorder.
	Index int  `json:"index"`
	Type  Type `json:"type"`
	// Process is the lock client (worker) number, or NemesisProcess/HarnessProcess.
	Process int  `json:"process"`
	Func    Func `json:"f"`
	// Key is the lock key (and the storage register it guards).
	Key string `json:"key,omitempty"`
	// Value: for a write the value written, for a read its result.
	Value *int64 `json:"value,omitempty"`
	// Token is the fencing token: granted by an acquire, carried by a read or write.
	Token *int64 `json:"token,omitempty"`
	// Time is CLOCK_MONOTONIC in nanoseconds, taken by the process that did the work.
	Time int64 `json:"time"`
	// EffectFrom and EffectTo, on a completion, narrow when the operation can have taken
	// effect, from what the servers saw (zero: the invocation's and the completion's
	// times stand). An acquire's last attempt began at EffectFrom: the attempts before it
	// found the lock busy, a definite answer; on a busy fail, every attempt from EffectFrom
	// to EffectTo found it busy (see BusyEvery). The storage applied a read or write at
	// EffectFrom = EffectTo. Both lie within [invocation time, completion time].
	EffectFrom int64 `json:"effect_from,omitempty"`
	EffectTo   int64 `json:"effect_to,omitempty"`
	// Error is why a fail failed, one of the ErrorKinds; checkers read it.
	Error ErrorKind `json:"error,omitempty"`
	// Message is free text for people: what an info outcome ran into, a client's own
	// words for a failure.
	Message string `json:"message,omitempty"`
	// WatchEvents counts the watch notifications a queue-based lock's acquire waited
	// through (see the herd checker); nil for other locks.
	WatchEvents *int `json:"watch_events,omitempty"`
	// Fault describes a nemesis fault on Start/Stop events: its kind's name (FaultKind),
	// alone or followed by a space and what that one fault was (KindOf reads it back); on a
	// hazard event, the nemesis that saw the hazard.
	Fault string `json:"fault,omitempty"`
	// Targets are what a fault hit: lock clients (worker-3) or nodes (n2).
	Targets []string `json:"targets,omitempty"`
	// Hazard names the hazard a hazard event records.
	Hazard Hazard `json:"hazard,omitempty"`
	// Detail holds anything else worth keeping for a reader (lock node name, validity,
	// czxid, a clock's offset); nothing decides by it.
	Detail map[string]string `json:"detail,omitempty"`
}

// BusyEvery is the detail of a busy acquire that says how far apart, at most, the
// attempts from its EffectFrom to its EffectTo began, plus how long each took at most (a
// time.Duration): any stretch that long within them holds a whole busy answer. On a
// granted acquire it says the same of the attempts from its invocation to its EffectFrom,
// every one of which found the lock busy.
const BusyEvery = "busy every"

// Validity is the detail of a granted acquire in which its client states for how long from
// the grant on it may use the lock (a time.Duration): for Redlock, the TTL less the time the
// attempt took and the drift allowance.
const Validity = "validity"

// ClientDetail is the detail of a granted acquire that names the lock client it came
// through, in a run whose slots several clients share (--client a,b).
const ClientDetail = "client"

// LeaseTTL is the detail of a granted acquire that says how long the lease its client
// keeps alive lasts (a time.Duration), where the server gave another than the TTL asked
// for (etcd's leases count whole seconds and have a minimum): a client stopped that long
// has lost it, whether it held the lock or waited for it.
const LeaseTTL = "lease_ttl"

// ValiditySpent is the detail of a failed acquire whose attempt a majority granted only
// after the lock's validity had run out (a time.Duration: how long the attempt took): a
// Redlock client then releases what it got and uses none of it. It is counted, not
// judged: the client never acted on the grant.
const ValiditySpent = "validity spent"

// clientTargetPrefix starts a target that names a lock client rather than a node.
const clientTargetPrefix = "worker-"

// TargetOfClient is how a fault names lock client process p among its targets
// ("worker-3"); ClientTarget reads it back.
func TargetOfClient(p int) string { return clientTargetPrefix + strconv.Itoa(p) }

// ClientTarget is the process of the lock client a target names ("worker-3" is process
// 3), and whether the target names a client at all rather than a node (n2).
func ClientTarget(target string) (process int, ok bool) {
	n, ok := strings.CutPrefix(target, clientTargetPrefix)
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(n)
	return p, err == nil
}

// Int64 returns a pointer to v, for Event.Value and Event.Token.
func Int64(v int64) *int64 { return &v }

// Int returns a pointer to v, for Event.WatchEvents.
func Int(v int) *int { return &v }

// IsCompletion reports whether e ends an operation.
func (e Event) IsCompletion() bool { return e.Type == OK || e.Type == Fail || e.Type == Info }

// Duration is a monotonic time difference, for display.
func Duration(from, to int64) time.Duration { return time.Duration(to - from) }

// Conventions the workloads and the nemesis follow (checkers rely on them):
//   - acquire: invoke{key}; ok{token when the lock has one}; fail{error: busy, effect window:
//     when every attempt found it busy, and detail{busy every}, when the lock tells}; info.
//   - read:    invoke{key, token?}; ok{value}; fail{error: stale-token}; info.
//   - write:   invoke{key, value, token?}; ok; fail{error: stale-token}; info.
//   - release: invoke{key}; ok; fail{error: not-held}; info.
//   - final-read: process HarnessProcess, invoke{key}, ok{value}, after every client stopped.
//   - info outcomes carry no error kind, only a message.
//   - nemesis: process NemesisProcess, type info, f start/stop, fault and targets set; a
//     stop closes the start with the same fault and targets. The fault begins with the
//     name of one of the kinds in faults.go.
//   - kill-node: start when the node's server was killed, detail{restart-after, role: its
//     role then, when the cluster has roles}; stop once it serves again, none when it
//     never did (see not-serving).
//   - failover: start when replication from the primary is cut, detail{primary}; stop
//     once a replica was promoted and the old primary started again, detail{primary: the
//     promoted one, grant: the client granted just before the crash, or none}.
//   - roles: process NemesisProcess, type info, f roles, detail{node: role} for every
//     node, targets the nodes whose role changed; one when the run starts, one per change.
//   - hazard: process NemesisProcess, type info, f hazard, hazard set, fault the nemesis
//     that saw it, targets the clients and nodes involved, detail what made it so; one per
//     occurrence (see Hazard).
//   - not-serving: process NemesisProcess, type info, targets the node a fault took down
//     that did not serve again, message how ("node n2 exited (exit code 3)"); the run
//     ends after it.
//   - a grant's detail{nodes: n1,n2,n3} names the nodes that granted it (Redlock).

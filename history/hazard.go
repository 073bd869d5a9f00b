package history

import (
	"fmt"
	"maps"
	"slices"
)

// Hazard names a situation a fault exists to create: the moment at which a lock can fail.
// A fault that fired but never created its situation tested nothing (a holder cut off the
// lock service after it had finished its work, a node killed while nobody held the lock),
// so a nemesis records a hazard event (f hazard) each time its situation really occurred,
// with what made it so in Detail and the clients or nodes involved in Targets. A pass is
// then a claim about the hazards it survived, and a run whose nemesis asked for a hazard
// that never occurred is no pass at all (the stats checker).
type Hazard string

// The hazards the nemeses record. Each is observed by the harness from the history and its
// own faults: where the fact itself is out of sight (a server's lease table), the nearest
// thing the harness can see stands for it, as each constant says.
const (
	// LeaseExpiredInPause: a paused client, which had not begun to release, stayed stopped
	// past the end of its lease (its grant's stated validity, else the TTL from the grant).
	LeaseExpiredInPause Hazard = "lease-expired-in-pause"
	// GrantedInPause: another client was granted the lock while a paused client, which had
	// been granted it and had not begun to release, was still stopped.
	GrantedInPause Hazard = "granted-in-pause"
	// GrantedInThrottle: another client was granted the lock while a throttled client, which
	// had been granted it and had not begun to release, was still throttled. A correct lock
	// grants it only once the starved client's lease has run out (its keepalive came late or
	// never), a broken one sooner; either way the throttled client still acts on its grant.
	GrantedInThrottle Hazard = "granted-in-throttle"
	// GrantedInCut: another client was granted the lock while a holder cut off the lock
	// service (or the storage) had not finished its critical section.
	GrantedInCut Hazard = "granted-in-cut"
	// CrashUnderGrant: a node's server was killed while a lock it had granted (a grant
	// naming it, or any grant when grants do not name their nodes) was still held: what
	// the node kept only in memory is gone.
	CrashUnderGrant Hazard = "crash-under-grant"
	// RestartInLease: a node killed under a grant serves again while that grant's lease
	// still runs, ready to grant the lock a second time if it forgot it.
	RestartInLease Hazard = "restart-in-lease"
	// GrantLost: a replica was promoted in place of a primary whose grant, made after the
	// primary was cut off its replicas, was still held: the new primary never saw it.
	GrantLost Hazard = "grant-lost"
	// TwoPrimaries: a client on the old primary's side of a split and a client on the new
	// primary's side held grants at once.
	TwoPrimaries Hazard = "two-primaries"
	// WaiterLapsed: a client frozen while it waited for the lock (its acquire under way,
	// another client holding) stayed stopped past its lease (the one its client keeps
	// alive: the TTL, or the lease_ttl the grants state), and another client was granted
	// the lock after that lease had run out, while it was still stopped. A correct lock
	// then refuses the thawed waiter; etcd 3.4's grants it (Jepsen's etcd 3.4.3 analysis).
	WaiterLapsed Hazard = "waiter-lapsed"
	// GrantedAfterOutage: every node of the lock service was down, while clients held or
	// waited for the lock, for longer than their lease (their clients saw their sessions run
	// out), and the service, started again on what its disks kept, granted the lock within a
	// lease of its first node serving again: while the sessions it restored from disk, and
	// the lock nodes they own, still stood (a quorum restores them as it forms and expires
	// them a lease later). A correct lock grants on its client's live session only; Curator
	// 5.4's LeaderLatch leads on a node of its lost session, and once the server expires that
	// session another client leads too (CURATOR-696).
	GrantedAfterOutage Hazard = "granted-after-outage"
	// ClockPastLease: a node's clock was moved forward past the end of a lease that was
	// still held.
	ClockPastLease Hazard = "clock-past-lease"
	// TwoMajorities: a second client was granted the lock while the first, granted by a
	// majority, was still within its lease (Kleppmann's example against Redlock).
	TwoMajorities Hazard = "two-majorities"

	// The three below are the danger of the three above them that name only a fault's
	// condition (grant-lost, crash-under-grant and restart-in-lease, clock-past-lease): the
	// lock service, in the state the fault left it, answered another client's acquire
	// (granted it, or refused it as busy, within the attempt the client recorded) while the
	// victim still held the lock by its own account and within its lease. A lock that
	// forgot the grant answers with a second grant; a correct one with busy. Without this,
	// a pass through the condition alone says nothing: the lease may have ended before
	// anyone asked.

	// LostGrantServed: with the primary that made a lost grant down, the promoted replica
	// answered another client while that grant was held within its lease.
	LostGrantServed Hazard = "lost-grant-served"
	// RestartServed: a node killed under a grant, serving again, answered another client
	// (alone, or among the majority that granted it) while that grant was held within its
	// lease; with a restart delayed past the lease (antirez's), the nodes left answered
	// while the killed one was down.
	RestartServed Hazard = "restart-served"
	// ClockServed: a node whose clock had been moved past a held lease answered another
	// client, its clock still moved, while that lease still ran in real time.
	ClockServed Hazard = "clock-served"

	// SyncStalledPastLease: the term of a held lease (the TTL from its grant) ended while
	// every sync on the disk of the node it depended on (the leader, or the node that
	// granted it) stalled: the lease had to be renewed, or run out, on a node that could
	// make nothing durable.
	SyncStalledPastLease Hazard = "sync-stalled-past-lease"

	// LateWrite: a holder's storage write, sent within its lease and held in the network,
	// reached the storage after that lease had run out and another client, granted the lock
	// since, had written: Kleppmann's delayed packet, a fenced storage's stale token.
	LateWrite Hazard = "late-write"

	// SlowPastLease: with the network slowed (everyone's, or the holder's alone), a holder's
	// write reached the storage after its lease (the validity its client stated, else the TTL from its grant) had run out.
	SlowPastLease Hazard = "slow-past-lease"

	// GrantedInExtend: a holder asked to extend its lease, and while it waited for the
	// answer (slowed in the network) another client was granted the lock: the lease the
	// extend renewed ran out before the holder heard of it.
	GrantedInExtend Hazard = "granted-in-extend"

	// OutcomeUnknown: an operation of a client whose connections were broken (reset, or
	// silenced and closed) ended without its answer, indeterminate: the client cannot know
	// whether the lock service or the storage acted on it, and the checkers must allow both.
	OutcomeUnknown Hazard = "outcome-unknown"

	// PooledSession: a connection pooler ran another client's lock statement on the server
	// connection, and so in the server session, that holds a client's lock, while that
	// client still held it by its own account: a grant naming the server session it was
	// made in (detail backend, PostgreSQL's pg_backend_pid) named the same one as a grant
	// still held. No fault makes it; a pooler in transaction mode does (recognised by
	// nemesis.PooledSessions).
	PooledSession Hazard = "pooled-session"
)

// LeaseLimit says hazard h is a holder outliving its lease (paused, starved, cut off, its
// write late): the danger every lease lock has, in which the lock itself does right, so
// lease-safety never fails by it alone.
func LeaseLimit(h Hazard) bool {
	switch h {
	case LeaseExpiredInPause, GrantedInPause, GrantedInThrottle, GrantedInCut, LateWrite, SlowPastLease:
		return true
	}
	return false
}

// BackendDetail is the detail of a grant that names the server session it was made in
// (PostgreSQL's backend process id): two grants held at once in one session are a
// pooler's doing (PooledSession).
const BackendDetail = "backend"

// hazardWords are a hazard in words: one occurrence, several, and what a run without any
// lacked.
type hazardWords struct{ one, many, absent string }

var hazards = map[Hazard]hazardWords{
	LeaseExpiredInPause: {"lease expired in a pause", "leases expired in a pause",
		"no paused client stayed stopped past the end of its lease"},
	GrantedInPause: {"grant while its holder was paused", "grants while their holder was paused",
		"no other client was granted the lock while a paused client still held it"},
	GrantedInThrottle: {"grant while its holder was throttled", "grants while their holder was throttled",
		"no other client was granted the lock while a throttled client still held it"},
	GrantedInCut: {"grant while a cut-off holder worked", "grants while a cut-off holder worked",
		"no other client was granted the lock while a cut-off holder was in its critical section"},
	CrashUnderGrant: {"crash under a held grant", "crashes under a held grant",
		"no node was killed while a lock it had granted was held"},
	RestartInLease: {"restart within a held lease", "restarts within a held lease",
		"no killed node served again while a lease it had granted still ran"},
	GrantLost: {"lost grant", "lost grants",
		"no replica was promoted while a grant its primary made after the cut was held"},
	TwoPrimaries: {"grant under two primaries", "grants under two primaries",
		"no clients on both sides of a split held grants at once"},
	WaiterLapsed: {"grant while a frozen waiter's lease had run out", "grants while a frozen waiter's lease had run out",
		"no client frozen while it waited for the lock stayed stopped past its lease while another client was granted it"},
	GrantedAfterOutage: {"grant after an outage longer than a lease", "grants after an outage longer than a lease",
		"the lock service was never down longer than a lease while clients held or waited for the lock, and then granted it within a lease of its return"},
	ClockPastLease: {"clock jump past a held lease", "clock jumps past a held lease",
		"no clock was moved past the end of a lease that was still held"},
	TwoMajorities: {"second majority within a lease", "second majorities within a lease",
		"no second client was granted the lock while the first was within its lease"},
	LostGrantServed: {"answer by the promoted replica within a lost grant's lease", "answers by the promoted replica within a lost grant's lease",
		"the promoted replica answered no other client while a lost grant was held within its lease"},
	RestartServed: {"answer by a restarted node within a forgotten grant's lease", "answers by a restarted node within a forgotten grant's lease",
		"no node killed under a grant answered another client while that grant was held within its lease"},
	ClockServed: {"answer by a moved clock's node within a held lease", "answers by a moved clock's node within a held lease",
		"no node whose clock was moved past a held lease answered another client while that lease ran"},
	SyncStalledPastLease: {"lease term ended while its node's syncs stalled", "lease terms ended while their node's syncs stalled",
		"no held lease's term ended while the syncs of its node's disk stalled"},
	LateWrite: {"write delivered after its lease and another's write", "writes delivered after their lease and another's write",
		"no write held in the network reached the storage after its lease had run out and another client had written"},
	SlowPastLease: {"write after its lease on a slow network", "writes after their lease on a slow network",
		"no holder's write reached the storage after its lease while the network was slow"},
	GrantedInExtend: {"grant while its holder waited for its extend", "grants while their holder waited for its extend",
		"no other client was granted the lock while a holder waited for its slowed extend"},
	OutcomeUnknown: {"operation cut off without its answer", "operations cut off without their answer",
		"no operation of a client whose connections were broken ended without its answer"},
	PooledSession: {"grant in a server session another client's lock was held in", "grants in a server session another client's lock was held in",
		"the pooler never ran a client's lock statement in a server session that held another client's lock"},
}

// Count says n occurrences of h in words: "1 lost grant", "9 lost grants".
func (h Hazard) Count(n int) string {
	w, ok := hazards[h]
	switch {
	case !ok:
		return fmt.Sprintf("%d × %s", n, h)
	case n == 1:
		return "1 " + w.one
	}
	return fmt.Sprintf("%d %s", n, w.many)
}

// One says one occurrence of h in words, without a count: "lost grant"; h's name when it
// is not one of the hazards above.
func (h Hazard) One() string {
	if w, ok := hazards[h]; ok {
		return w.one
	}
	return string(h)
}

// Absent says what a run in which h never occurred lacked.
func (h Hazard) Absent() string {
	if w, ok := hazards[h]; ok {
		return w.absent
	}
	return fmt.Sprintf("hazard %s never occurred", h)
}

// Condition is the fault's condition that h is the danger of (grant-lost for
// lost-grant-served...), or "" when h is a danger in itself.
func (h Hazard) Condition() Hazard {
	return map[Hazard]Hazard{LostGrantServed: GrantLost, RestartServed: CrashUnderGrant, ClockServed: ClockPastLease}[h]
}

// Known reports whether h is one of the hazards above.
func (h Hazard) Known() bool {
	_, ok := hazards[h]
	return ok
}

// KnownHazards lists the hazards above, by name.
func KnownHazards() []Hazard { return slices.Sorted(maps.Keys(hazards)) }

// Targets maps each of the named faults whose kind targets a hazard (FaultKind.Hazard) to
// that hazard; the others, and names no kind has, are left out. It is read here, from the
// kinds' declarations, and not from package nemesis, so that the judging half (package
// analysis, and so check) holds a run to the hazards its spec asked for without linking
// the nemeses: a run that asked for one of these faults and in which its hazard never
// occurred is no pass (the stats checker).
func Targets(faults []string) map[string]Hazard {
	wanted := map[string]Hazard{}
	for _, f := range faults {
		if k, ok := faultKinds[f]; ok && k.Hazard != "" && !k.Part {
			wanted[f] = k.Hazard
		}
	}
	return wanted
}

// TargetingFaults lists the faults whose kind targets a hazard, by name.
func TargetingFaults() []string {
	var names []string
	for _, k := range FaultKinds() {
		if k.Hazard != "" && !k.Part {
			names = append(names, k.Name)
		}
	}
	return names
}

// Occurrence is one hazard event: what occurred, when, recorded by which fault, involving
// whom, and what made it so.
type Occurrence struct {
	Hazard  Hazard
	Time    int64
	Fault   string
	Targets []string
	Detail  map[string]string
	// Index is the event's index in the history, for evidence.
	Index int
}

// Hazards lists the history's hazard events in order.
func Hazards(events []Event) []Occurrence {
	var found []Occurrence
	for _, e := range events {
		if e.Process == NemesisProcess && e.Func == HazardFunc {
			found = append(found, Occurrence{Hazard: e.Hazard, Time: e.Time, Fault: e.Fault, Targets: e.Targets,
				Detail: e.Detail, Index: e.Index})
		}
	}
	return found
}

// CountHazards counts the history's hazard events by hazard.
func CountHazards(events []Event) map[Hazard]int {
	counts := map[Hazard]int{}
	for _, e := range events {
		if e.Process == NemesisProcess && e.Func == HazardFunc {
			counts[e.Hazard]++
		}
	}
	return counts
}

package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FaultKind is one kind of fault, declared once, here, with everything the judging half
// says of it: the nemesis that makes it refers to it (nemesis registers one per chosen
// kind), and the story, the report, `help run` and the suites read its name and words from
// it, and, for the kinds that need more, the scene a story sets and the notes a report
// makes from it (Telling). A fault's start and stop events carry its kind's Name as their
// Fault, alone or followed by a space and what that one fault was ("partition-halves
// n1|n2,n3", "clock-bump +2.000s"); KindOf reads it back.
type FaultKind struct {
	// Name is how the kind is chosen (--nemesis, a suite's cells) and recorded.
	Name string
	// Does says what a fault of this kind does, one phrase for `help run`.
	Does string
	// Struck is how a story tells that a fault of this kind struck a process or a node,
	// after its name: "was paused", "had everything it sent delayed".
	Struck string
	// Back is how a story tells that what it struck came back when the fault stopped
	// ("resumed", "served again"); "" when a stop is not worth telling.
	Back string
	// Hazard is the hazard the kind exists to create (see Hazard); "" for none. A run that
	// asked for the kind and never saw its hazard is no pass (the stats checker).
	Hazard Hazard
	// Part says the kind is never chosen by name: it is recorded only as a step of another
	// kind's faults (the pause that keeps a cut-off holder in its critical section).
	Part bool
	// Telling is what a story and a report say of the kind's faults beyond its words; nil
	// for a kind they need nothing more of. A pointer, so that a kind stays comparable.
	Telling *Telling
	// Stalls says whether and how a fault of this kind stalls the lock clients it strikes
	// (lease-safety reads it).
	Stalls Stall
}

// Stall is how a fault stalls a lock client's process, worker and lock program together:
// an answer the client had before the fault, it records only once it runs again.
type Stall int

const (
	// StallsNone: the client runs on (a network fault delays its messages, not its decisions).
	StallsNone Stall = iota
	// StallStops: stopped (SIGSTOP), it decides nothing until it is continued: what it
	// records then was decided then, or just before it was stopped.
	StallStops
	// StallStarves: starved of CPU, it may decide at any moment of the stall and record it late.
	StallStarves
)

// Telling is what a story and a report say of one kind's faults that depends on more than
// the kind: on the hazard it recorded, or on the settings of the run that chose it. It
// lives with the kind's declaration so that a new kind's story is written where the kind
// is, and the story and the harness ask every kind the same way.
type Telling struct {
	// Scene, when not nil, tells in a sentence of its own, before the story's first grant,
	// the kind's hazard (FaultKind.Hazard) when it is about one of the story's two holders
	// (its first target is that holder), from the hazard's event e: holder is that holder
	// as the story names it ("p2"), and at says a moment of the history as the story does
	// ("2.43 s"). The sentence has no full stop. False when e's detail is not what the kind
	// records (a hazard of another making, which the story then tells as any other).
	Scene func(e Event, holder string, at func(int64) string) (string, bool)
	// Later says the scene's hazard is about the later of the story's two holders, granted
	// while the earlier still held the lock; else it is about the earlier.
	Later bool
	// Granted is, for a scene about the later holder, why its grant was wrong, which the
	// story tells at the end of that grant's sentence in place of how much of the earlier
	// holder's lease was left.
	Granted string
	// Notes, when not nil, are what a report says of a run that chose the kind: the
	// settings that decide what its faults do.
	Notes func(Settings) []string
	// Start, when not nil, is what a story adds to its sentence of one fault's start, from
	// the start's event e: what that fault did beyond the kind's words (", and its disk
	// lost ..."); "" adds nothing.
	Start func(e Event) string
}

// Settings are the settings of a run that the kinds' notes tell (Telling.Notes).
type Settings struct {
	// Pause is how long a fault lasts (--pause, or its default).
	Pause time.Duration
	// RestartAfter is how long a killed node stays down; RestartAfterTTL says it stays
	// down at least one TTL (antirez's delayed restart), which RestartAfter then counts.
	RestartAfter    time.Duration
	RestartAfterTTL bool
}

// NoFaults is how a run that injects no fault names its nemesis (--nemesis none).
const NoFaults = "none"

// Injecting says whether the nemeses named inject any fault: one named neither "" nor
// NoFaults.
func Injecting(nemeses []string) bool {
	return slices.ContainsFunc(nemeses, func(n string) bool { return n != "" && n != NoFaults })
}

// NemesisText is the nemeses named, joined by sep, or NoFaults when none is.
func NemesisText(nemeses []string, sep string) string {
	if text := strings.Join(nemeses, sep); text != "" {
		return text
	}
	return NoFaults
}

// The fault kinds. Each is declared with all its words; a kind without them fails
// TestFaultKindsHaveTheirWords, a chosen kind no nemesis makes fails nemesis's
// TestEveryChosenFaultKindHasItsNemesis, and its name spelled out anywhere else fails
// TestNamesAreDeclaredOnce.
var (
	PauseHolder = declare(FaultKind{Name: "pause-holder", Stalls: StallStops, Struck: "was paused", Back: "resumed", Hazard: GrantedInPause,
		Does: "freezes a holder (SIGSTOP) right after its read until another client has taken the lock over: Kleppmann's GC pause"})
	ThrottleHolder = declare(FaultKind{Name: "throttle-holder", Stalls: StallStarves, Struck: "was throttled", Back: "ran at full speed again", Hazard: GrantedInThrottle,
		Does: "throttles a holder's whole process, busy in its work, to 1% of a CPU right after its read until another client has taken the lock over: a starved process, not a stopped one"})
	PauseClient = declare(FaultKind{Name: "pause-client", Stalls: StallStops, Struck: "was paused", Back: "resumed", Hazard: GrantedInPause,
		Does: "freezes a random client, holder or not, for --pause"})
	PauseWaiter = declare(FaultKind{Name: "pause-waiter", Stalls: StallStops, Struck: "was frozen while it waited for the lock", Back: "went on", Hazard: WaiterLapsed,
		Does:    "freezes a client whose acquire waits behind another's grant until its lease has run out and another client has been granted the lock: etcd 3.4's lock bug",
		Telling: &Telling{Scene: frozenWaiter, Later: true, Granted: "though its lease had run out while it was frozen"}})
	PauseNode = declare(FaultKind{Name: "pause-node", Struck: "was paused", Back: "resumed",
		Does: "freezes a random node's server for --pause"})
	// PauseInLease keeps a directed fault's victim inside its critical section, and never
	// past its lease, while the fault does its work, as a GC pause would. A pause within the
	// lease breaks no correct lock, so a second holder meanwhile is the fault's doing.
	PauseInLease = declare(FaultKind{Name: "pause-in-lease", Stalls: StallStops, Struck: "was paused", Back: "resumed", Part: true,
		Does: "keeps a holder within its lease (SIGSTOP) while another fault strikes"})
	// PauseInSection keeps a holder cut off by partition-holder inside its critical section.
	PauseInSection = declare(FaultKind{Name: "pause-in-section", Stalls: StallStops, Struck: "was paused", Back: "resumed", Part: true,
		Does: "keeps a cut-off holder inside its critical section (SIGSTOP) until the lock has passed on"})

	KillClient = declare(FaultKind{Name: "kill-client", Struck: "was killed",
		Does: "kills (SIGKILL) the client that has waited longest for the lock; a new one takes its place"})
	KillNode = declare(FaultKind{Name: "kill-node", Struck: "was killed", Back: "served again", Hazard: RestartServed,
		Does:    "kills the server of a node that granted a held lock and starts it again on what its disk kept (--persistence, --restart-after)",
		Telling: &Telling{Notes: restartNotes}})
	PowerLoss = declare(FaultKind{Name: "power-loss", Struck: "lost its power", Back: "served again", Hazard: RestartServed,
		Does: "cuts the power of the nodes that granted a held lock, as many as another client needs: each server killed and every " +
			"write its disk held unsynced dropped, then started again on what the disk kept (--persistence, --restart-after)",
		Telling: &Telling{Notes: restartNotes, Start: diskLost}})
	SlowDisk = declare(FaultKind{Name: "slow-disk", Struck: "had its disk's syncs slowed", Back: "synced at full speed again", Hazard: SyncStalledPastLease,
		Does: "makes every sync on the disk of the leader (of the holder's node where there is none) take --pause, twice the TTL " +
			"by default, while a client holds the lock; reads and writes answer at once"})
	Outage = declare(FaultKind{Name: "outage", Struck: "went down together", Back: "served again", Hazard: GrantedAfterOutage,
		Does:    "kills every node's server while a client holds the lock and another waits, keeps them down for --pause (twice the TTL by default: past the lease, so the clients see their sessions run out), and starts them again on what their disks kept",
		Telling: &Telling{Scene: backFromOutage, Notes: outageNotes}})
	Failover = declare(FaultKind{Name: "failover", Struck: "was cut off from its replicas", Hazard: LostGrantServed,
		Does:    "cuts the primary off its replicas, lets it grant the lock, crashes it and promotes a replica at once",
		Telling: &Telling{Notes: restartNotes}})

	Clock = declare(FaultKind{Name: "clock", Struck: "had its clock moved", Hazard: ClockServed,
		Does: "moves a random node's wall clock, by clock-bump, clock-strobe or clock-rate, for --pause"})
	ClockBump = declare(FaultKind{Name: "clock-bump", Struck: "had its clock moved", Hazard: ClockServed,
		Does: "jumps the clock of a node that granted a holder's lock --clock-offset ahead while the holder is kept within its lease"})
	ClockStrobe = declare(FaultKind{Name: "clock-strobe", Struck: "had its clock moved", Hazard: ClockServed,
		Does: "flips a random node's clock between --clock-offset ahead and real time every 100 ms, for --pause"})
	ClockRate = declare(FaultKind{Name: "clock-rate", Struck: "had its clock moved", Hazard: ClockServed,
		Does: "runs a random node's clock --clock-rate times as fast, for --pause"})
	KleppmannClock = declare(FaultKind{Name: "kleppmann-clock", Struck: "was cut off while a node's clock jumped", Hazard: TwoMajorities,
		Does: "Kleppmann's example against Redlock: a client cut off a minority of the nodes, a majority node's clock jumped past its lease"})

	Partition = declare(FaultKind{Name: "partition", Struck: "was cut off",
		Does: "cuts the network in one of the partition-* shapes at random, for --pause"})
	PartitionIsolateOne = declare(FaultKind{Name: "partition-isolate-one", Struck: "was cut off",
		Does: "cuts one node off every other node, for --pause"})
	PartitionHalves = declare(FaultKind{Name: "partition-halves", Struck: "was cut off",
		Does: "splits the nodes into two sides that cannot talk, for --pause"})
	PartitionMajoritiesRing = declare(FaultKind{Name: "partition-majorities-ring", Struck: "was cut off",
		Does: "puts the nodes on a ring where each hears a majority, no two the same, for --pause"})
	PartitionBridge = declare(FaultKind{Name: "partition-bridge", Struck: "was cut off",
		Does: "splits the nodes into two sides joined by one node that sees both, for --pause"})
	PartitionClientsFrom = declare(FaultKind{Name: "partition-clients-from", Struck: "was cut off",
		Does: "cuts every client off a minority of the nodes, for --pause"})
	PartitionClient = declare(FaultKind{Name: "partition-client", Struck: "was cut off",
		Does: "cuts one client off every node (not off the storage), for --pause"})
	PartitionClientMinority = declare(FaultKind{Name: "partition-client-minority", Struck: "was cut off",
		Does: "cuts one client and a minority of the nodes off the rest, for --pause"})
	PartitionLeader = declare(FaultKind{Name: "partition-leader", Struck: "was cut off",
		Does: "cuts whichever node leads off the others, for --pause"})
	// PartitionClientFrom is kleppmann-clock's cut of one client off a minority of the nodes.
	PartitionClientFrom = declare(FaultKind{Name: "partition-client-from", Struck: "was cut off", Part: true,
		Does: "cuts one client off a minority of the nodes"})
	PartitionPrimary = declare(FaultKind{Name: "partition-primary", Struck: "was cut off", Hazard: TwoPrimaries,
		Does: "cuts the primary and a minority of the clients off the rest until both sides' grants are held at once (split brain)"})
	PartitionHolder = declare(FaultKind{Name: "partition-holder", Struck: "was cut off", Hazard: GrantedInCut,
		Does: "cuts a holder off the lock service right after its read, kept in its critical section until another client holds the lock"})
	PartitionHolderStorage = declare(FaultKind{Name: "partition-holder-storage", Struck: "was cut off", Hazard: GrantedInCut,
		Does: "cuts a holder off the storage right after its read, kept in its critical section until another client holds the lock"})

	Delay = declare(FaultKind{Name: "delay", Struck: "had everything it sent delayed", Hazard: SlowPastLease,
		Does: "delays everything the client just granted the lock sends, to the nodes and the storage, by --pause, for twice that (through its links' proxies)"})
	DelayHolder = declare(FaultKind{Name: "delay-holder", Struck: "had its write held in the network",
		Hazard: LateWrite,
		Does:   "holds a holder's next storage write in the network until its lease has run out and another client has written, then delivers it: a write delivered after its lease"})
	DelayExtend = declare(FaultKind{Name: "delay-extend", Struck: "had the answers to its extend delayed", Hazard: GrantedInExtend,
		Does: "delays the answers the client just granted the lock receives, from every node or from --link-node's, by --pause until its next extend has been answered, so the lease it renewed may run out before it hears (through its links' proxies; needs --extend-every)"})
	SlowNetwork = declare(FaultKind{Name: "slow-network", Struck: "had their network slowed", Hazard: SlowPastLease,
		Does: "delays everything every client sends, from a grant on, by a latency drawn for each window between a sixteenth of the --ttl and twice the --ttl and half as much jitter, for --pause (through their links' proxies)"})
	ResetClient = declare(FaultKind{Name: "reset-client", Struck: "had its connections reset", Back: "connected normally again", Hazard: OutcomeUnknown,
		Does: "resets one client's connections, to the nodes and the storage, as soon as it sends on them: each request is dropped and its connection torn down (a TCP reset), for --pause (through its links' proxies)"})
	TimeoutClient = declare(FaultKind{Name: "timeout-client", Struck: "had its connections go silent", Back: "got through again", Hazard: OutcomeUnknown,
		Does: "lets nothing one client sends through, to the nodes and the storage, and closes each connection after half the --ttl or half the --pause, whichever is shorter, for --pause (through its links' proxies)"})
)

// restartNotes say when a node killed by a kind that starts it again (kill-node, failover)
// comes back.
func restartNotes(s Settings) []string {
	restart := "a killed node is started again at once"
	if s.RestartAfter > 0 {
		restart = fmt.Sprintf("a killed node stays down for %s", s.RestartAfter)
	}
	if s.RestartAfterTTL {
		restart += ", at least one TTL (antirez's delayed restart: every lease it granted has run out when it is back)"
	}
	return []string{restart}
}

// outageNotes say how long an outage keeps the nodes down.
func outageNotes(s Settings) []string {
	return []string{fmt.Sprintf("an outage keeps every node down for %s", s.Pause)}
}

// The details of a waiter-lapsed hazard beside the grant it names: how long the waiter had
// been frozen when that grant came, and the lease it had (time.Durations).
const (
	FrozenForDetail = "frozen for"
	LeaseDetail     = "lease"
)

// frozenWaiter is the scene pause-waiter's hazard sets: when the waiter was frozen while it
// waited, and when its lease ran out, from the hazard's detail (how long it had been frozen
// at the other grant, and its lease).
func frozenWaiter(e Event, waiter string, at func(int64) string) (string, bool) {
	frozenFor, err1 := time.ParseDuration(e.Detail[FrozenForDetail])
	lease, err2 := time.ParseDuration(e.Detail[LeaseDetail])
	if err1 != nil || err2 != nil {
		return "", false
	}
	frozen := e.Time - frozenFor.Nanoseconds()
	return fmt.Sprintf("%s was frozen at %s while it waited for the lock (%s); its lease of %s ran out at %s",
		waiter, at(frozen), e.Fault, lease, at(frozen+lease.Nanoseconds())), true
}

// The details of a granted-after-outage hazard beside the grant it names: how long the
// service was down (until its first node served again), and how long after that the grant
// came (time.Durations), beside the lease (LeaseDetail) the outage outlasted.
const (
	DownForDetail   = "down for"
	SinceBackDetail = "since back"
)

// LostDetail, on a power-loss's start, says in words what its node's disk lost: the
// writes it held unsynced, by file.
const LostDetail = "lost"

// diskLost is what a story says a power loss's node lost, from its start.
func diskLost(e Event) string {
	if lost := e.Detail[LostDetail]; lost != "" {
		return ", and its disk lost " + lost
	}
	return ""
}

// backFromOutage is the scene an outage's hazard sets: when every node went down and the
// first came back, and what that did to the clients' sessions, from the hazard's detail
// (how long the service was down, how long after its return the grant came, the lease).
func backFromOutage(e Event, _ string, at func(int64) string) (string, bool) {
	downFor, err1 := time.ParseDuration(e.Detail[DownForDetail])
	sinceBack, err2 := time.ParseDuration(e.Detail[SinceBackDetail])
	lease, err3 := time.ParseDuration(e.Detail[LeaseDetail])
	if err1 != nil || err2 != nil || err3 != nil {
		return "", false
	}
	back := e.Time - sinceBack.Nanoseconds()
	return fmt.Sprintf("Every node went down at %s (%s), and the first served again at %s: down %.2f s, past the lease of %s, so "+
		"each client saw its session run out and opened a new one, while the servers, started again on their disks, kept the "+
		"old sessions and their lock nodes for one more lease", at(back-downFor.Nanoseconds()), e.Fault, at(back),
		downFor.Seconds(), lease), true
}

// Notes are what a report says of a run that chose the faults named: each chosen kind's
// notes (Telling.Notes), in the order of their names, each note once (kill-node and failover
// both restart nodes).
func Notes(faults []string, s Settings) []string {
	var notes []string
	for _, k := range FaultKinds() {
		if k.Telling == nil || k.Telling.Notes == nil || !slices.Contains(faults, k.Name) {
			continue
		}
		for _, note := range k.Telling.Notes(s) {
			if !slices.Contains(notes, note) {
				notes = append(notes, note)
			}
		}
	}
	return notes
}

// faultKinds are the declared kinds by name.
var faultKinds = map[string]FaultKind{}

// declare adds k to the kinds; a name declared twice is a programming error.
func declare(k FaultKind) FaultKind {
	if _, ok := faultKinds[k.Name]; ok {
		panic(fmt.Sprintf("history: fault kind %s declared twice", k.Name))
	}
	faultKinds[k.Name] = k
	return k
}

// FaultKinds lists every declared kind, by name.
func FaultKinds() []FaultKind {
	kinds := make([]FaultKind, 0, len(faultKinds))
	for _, k := range faultKinds {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b FaultKind) int { return cmp.Compare(a.Name, b.Name) })
	return kinds
}

// KindOf is the kind of a fault as an event records it (Event.Fault): its name, or its name
// and what that fault was after a space. A fault no kind declares (a pooler named as a
// hazard's fault, an older history's) has none.
func KindOf(fault string) (FaultKind, bool) {
	name, _, _ := strings.Cut(fault, " ")
	k, ok := faultKinds[name]
	return k, ok
}

// With is what a start or stop event of this kind records as its Fault: the kind's name,
// then what that one fault was, when something was ("n1|n2,n3", "+2.000s").
func (k FaultKind) With(what string) string {
	if what == "" {
		return k.Name
	}
	return k.Name + " " + what
}

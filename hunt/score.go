package hunt

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Score is how near a trial came to the danger, read from its history alone.
type Score struct {
	// Hazards is how many dangers its faults made real (history.Hazard events) of those
	// near what the hunt looks for (Aim).
	Hazards int `json:"hazards"`
	// Nearness is how near its nearest fault came, from 0 to 1, of the faults on a client in
	// a state near what the hunt looks for while struck (Aim: waiting for the lock or an
	// extend, or holding it): half for its length (two leases and more: all of it), a
	// quarter for another client granted the lock while it lasted, a quarter for another
	// holding it when it ended.
	Nearness float64 `json:"nearness"`
	// Nearest is that fault, as the how-manieth of its kind (from 0), the schedule's step it
	// came from; its Fault is "" when no fault came near.
	Nearest Nth `json:"nearest,omitempty"`
	// Near are the faults that came near at all, Nearest among them, in the order they ended.
	Near []Nth `json:"near,omitempty"`
	// States are the states of the lock its faults met (State), sorted.
	States []string `json:"states,omitempty"`
	// New is how many of States no trial before had met.
	New int `json:"new"`
}

// Value ranks trials: a danger made real weighs most, then how near a fault came, then
// each state not met before, which only tells apart trials that came near nothing.
func (s Score) Value() float64 {
	return 4*float64(s.Hazards) + 2*s.Nearness + 0.02*float64(s.New)
}

// Nth is the n-th fault of a kind, from 0, and the nearest state the client it struck was
// in while struck ("" for a node).
type Nth struct {
	Fault string              `json:"fault,omitempty"`
	N     int                 `json:"n,omitempty"`
	Met   history.ClientState `json:"met,omitempty"`
}

// nearLeases is how many leases a fault must outlast to be as near as can be.
const nearLeases = 2

// What a fault's nearness is made of: how far its length reached, up to nearLeases leases;
// another client granted the lock while it lasted; and another client holding it when the
// fault ended, so that its victim went on beside a holder.
const (
	lengthPart  = 0.5
	grantedPart = 0.25
	besidePart  = 0.25
)

// What a fault on a node met, in its State.
const (
	nodeVictim    = "node"
	nodeUnderLock = "node-under-holding"
)

// Aim is what a hunt looks for, which decides what comes near it.
type Aim int

const (
	// AnyViolation: any checker's; every hazard, and a fault on a client waiting for the
	// lock or holding it, comes near.
	AnyViolation Aim = iota
	// LockFault: the lock's own fault (lease-safety). A holder outliving its lease is no
	// nearer to it, so neither that danger's hazards (history.LeaseLimit) nor a fault on a
	// holder that asked for nothing count: only one on a client whose answer is to come
	// (waiting for the lock, or for its extend).
	LockFault
)

// near says whether a fault on a client in state victim comes near what aim looks for.
func (aim Aim) near(victim history.ClientState) bool {
	return victim == history.Waiting || victim == history.Extending || victim == history.Holding && aim == AnyViolation
}

// counts says whether hazard h comes near what aim looks for.
func (aim Aim) counts(h history.Hazard) bool {
	return aim == AnyViolation || !history.LeaseLimit(h)
}

// Measure scores a trial's history (its events as recorded) against a TTL, for what aim
// looks for: its hazards, how near its faults came, and the states of the lock they met;
// New is left for the search, which knows what came before.
func Measure(events []history.Event, ttl time.Duration, aim Aim) Score {
	var score Score
	states := history.States{}
	owner := -1 // the client that last was granted the lock and holds it
	type open struct {
		start  int64
		victim int // the client struck; -1: a node
		grants int // grants to other clients before
		nth    Nth
		struck string // the victim's state, or what a node's fault met
	}
	faults := map[string]*open{} // by fault and target
	grants := 0
	seen := map[string]bool{}
	begun := map[string]int{} // faults begun, by kind
	for _, e := range events {
		states.Follow(e)
		for _, f := range faults {
			if f.victim == e.Process && nearer(states.Of(e.Process), f.nth.Met) {
				f.nth.Met = states.Of(e.Process)
				f.struck = string(f.nth.Met)
			}
		}
		switch {
		case e.Hazard != "":
			if aim.counts(e.Hazard) {
				score.Hazards++
			}
		case e.Process == history.NemesisProcess && (e.Func == history.Start || e.Func == history.Stop) && len(e.Targets) == 1:
			key := e.Fault + " " + e.Targets[0]
			if e.Func == history.Start {
				f := &open{start: e.Time, victim: -1, grants: grants, nth: Nth{Fault: e.Fault, N: begun[e.Fault]}, struck: nodeVictim}
				begun[e.Fault]++
				if p, ok := history.ClientTarget(e.Targets[0]); ok {
					f.victim, f.nth.Met = p, states.Of(p)
					f.struck = string(f.nth.Met)
				} else if owner >= 0 {
					f.struck = nodeUnderLock
				}
				faults[key] = f
				continue
			}
			f, ok := faults[key]
			if !ok {
				continue
			}
			delete(faults, key)
			lasted := time.Duration(e.Time - f.start)
			granted := grants > f.grants
			if near := nearness(lasted, ttl, granted, owner >= 0 && owner != f.victim); aim.near(f.nth.Met) && near > 0 {
				score.Near = append(score.Near, f.nth)
				if near > score.Nearness {
					score.Nearness, score.Nearest = near, f.nth
				}
			}
			seen[State(e.Fault, f.struck, lasted, ttl, granted)] = true
		case e.Process >= 0 && e.Func == history.Acquire && e.Type == history.OK:
			owner = e.Process
			grants++
		case e.Process >= 0 && e.Func == history.Release && e.Type == history.Invoke && owner == e.Process:
			owner = -1
		}
	}
	for s := range seen {
		score.States = append(score.States, s)
	}
	sort.Strings(score.States)
	return score
}

// nearness is a fault's: of its length against the TTL, another client granted the lock
// while it lasted, and another holding it when it ended. A grant beside a fault shorter
// than a lease counts too: it says the victim was struck where the lock changed hands,
// which a longer fault there makes the danger (measured: docs/hunting.md).
func nearness(lasted, ttl time.Duration, granted, beside bool) float64 {
	near := lengthPart * min(1, float64(lasted)/float64(nearLeases*ttl))
	if granted {
		near += grantedPart
	}
	if beside {
		near += besidePart
	}
	return near
}

// nearer says whether a client in state now is nearer the lock's business than in was:
// a fault's victim is taken in the nearest state it was in while struck (a holder whose
// extend began under a delay was extending).
func nearer(now, was history.ClientState) bool {
	rank := func(s history.ClientState) int {
		switch s {
		case history.Waiting, history.Extending:
			return 2
		case history.Holding:
			return 1
		}
		return 0
	}
	return rank(now) > rank(was)
}

// State names what a fault met: its kind, its victim's state when struck, its length in
// quarters of the TTL (at most 8: two leases and more), and whether another client was
// granted the lock while it lasted.
func State(fault, victim string, lasted, ttl time.Duration, grantedMeanwhile bool) string {
	quarters := min(8, int(4*lasted/ttl))
	s := fmt.Sprintf("%s %s %d/4", fault, victim, quarters)
	if grantedMeanwhile {
		s += " granted-meanwhile"
	}
	return s
}

package hunt

import (
	"cmp"
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
	// Nearness is how far its nearest fault reached into a lease: the longest fault on a
	// client in a state near what the hunt looks for when struck (Aim: waiting for the lock
	// or an extend, or holding it), in leases, halved and at most 1 (a fault that outlasted
	// two leases of a client in the lock's business).
	Nearness float64 `json:"nearness"`
	// Nearest is that fault, as the how-manieth of its kind (from 0), the schedule's step it
	// came from; its Fault is "" when no fault came near.
	Nearest Nth `json:"nearest,omitempty"`
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

// Nth is the n-th fault of a kind, from 0.
type Nth struct {
	Fault string `json:"fault,omitempty"`
	N     int    `json:"n,omitempty"`
}

// nearLeases is how many leases a fault must outlast to be as near as can be.
const nearLeases = 2

// The states a client can be in when a fault strikes it.
const (
	idle      = "idle"
	waiting   = "waiting"
	holding   = "holding"
	extending = "extending" // a holder whose extend is under way
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
func (aim Aim) near(victim string) bool {
	return victim == waiting || victim == extending || victim == holding && aim == AnyViolation
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
	state := map[int]string{} // each client's state
	owner := -1               // the client that last was granted the lock and holds it
	type open struct {
		start  int64
		victim string // the client's state, or "node"
		grants int    // grants to other clients since
		nth    Nth
	}
	faults := map[string]*open{} // by fault and target
	grants := 0
	seen := map[string]bool{}
	begun := map[string]int{} // faults begun, by kind
	for _, e := range events {
		switch {
		case e.Hazard != "":
			if aim.counts(e.Hazard) {
				score.Hazards++
			}
		case e.Process == history.NemesisProcess && (e.Func == history.Start || e.Func == history.Stop) && len(e.Targets) == 1:
			key := e.Fault + " " + e.Targets[0]
			if e.Func == history.Start {
				f := &open{start: e.Time, victim: "node", grants: grants, nth: Nth{e.Fault, begun[e.Fault]}}
				begun[e.Fault]++
				if p, ok := history.ClientTarget(e.Targets[0]); ok {
					f.victim = cmp.Or(state[p], idle)
				} else if owner >= 0 {
					f.victim = "node-under-" + holding
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
			if near := min(1, float64(lasted)/float64(nearLeases*ttl)); aim.near(f.victim) && near > score.Nearness {
				score.Nearness, score.Nearest = near, f.nth
			}
			seen[State(e.Fault, f.victim, lasted, ttl, grants > f.grants)] = true
		case e.Process >= 0 && e.Func == history.Acquire:
			switch e.Type {
			case history.Invoke:
				state[e.Process] = waiting
			case history.OK:
				state[e.Process], owner = holding, e.Process
				grants++
			default:
				state[e.Process] = idle
			}
		case e.Process >= 0 && e.Func == history.Extend && state[e.Process] == holding && e.Type == history.Invoke:
			state[e.Process] = extending
		case e.Process >= 0 && e.Func == history.Extend && state[e.Process] == extending:
			state[e.Process] = holding
		case e.Process >= 0 && e.Func == history.Release && e.Type == history.Invoke:
			state[e.Process] = idle
			if owner == e.Process {
				owner = -1
			}
		}
	}
	for s := range seen {
		score.States = append(score.States, s)
	}
	sort.Strings(score.States)
	return score
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

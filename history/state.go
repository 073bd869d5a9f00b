package history

import (
	"fmt"
	"slices"
)

// ClientState is what a lock client is about, as its history tells: the moment a fault
// strikes it in decides what the fault can do (a waiter frozen past its lease, a holder
// whose extend is held up).
type ClientState string

// The states a lock client is in.
const (
	Idle      ClientState = "idle"      // between requests, or asking for nothing of the lock
	Waiting   ClientState = "waiting"   // its acquire is under way
	Holding   ClientState = "holding"   // granted the lock and not yet releasing it
	Extending ClientState = "extending" // holding, with its extend under way
)

// ClientStates are the states a client can be in.
var ClientStates = []ClientState{Idle, Waiting, Holding, Extending}

// ParseClientState reads a state's name.
func ParseClientState(name string) (ClientState, error) {
	if s := ClientState(name); slices.Contains(ClientStates, s) {
		return s, nil
	}
	return "", fmt.Errorf("no client state %q (%v)", name, ClientStates)
}

// States follows the history's client events into each client's state.
type States map[int]ClientState

// Follow takes e into account.
func (s States) Follow(e Event) {
	if e.Process < 0 {
		return
	}
	switch {
	case e.Func == Acquire && e.Type == Invoke:
		s[e.Process] = Waiting
	case e.Func == Acquire && e.Type == OK:
		s[e.Process] = Holding
	case e.Func == Acquire:
		s[e.Process] = Idle
	case e.Func == Extend && e.Type == Invoke && s[e.Process] == Holding:
		s[e.Process] = Extending
	case e.Func == Extend && s[e.Process] == Extending:
		s[e.Process] = Holding
	case e.Func == Release && e.Type == Invoke:
		s[e.Process] = Idle
	}
}

// Of is client p's state; Idle before its first request.
func (s States) Of(p int) ClientState {
	if st, ok := s[p]; ok {
		return st
	}
	return Idle
}

// In are the clients among ps in state st, in the order of ps.
func (s States) In(st ClientState, ps []int) []int {
	var in []int
	for _, p := range ps {
		if s.Of(p) == st {
			in = append(in, p)
		}
	}
	return in
}

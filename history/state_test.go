package history

import (
	"slices"
	"testing"
)

func TestStatesFollowAClientThroughItsRequests(t *testing.T) {
	s := States{}
	steps := []struct {
		e    Event
		want ClientState
	}{
		{Event{Process: 1, Func: Acquire, Type: Invoke}, Waiting},
		{Event{Process: 1, Func: Acquire, Type: OK}, Holding},
		{Event{Process: 1, Func: Read, Type: Invoke}, Holding},
		{Event{Process: 1, Func: Extend, Type: Invoke}, Extending},
		{Event{Process: 1, Func: Extend, Type: Fail}, Holding},
		{Event{Process: 1, Func: Release, Type: Invoke}, Idle},
		{Event{Process: 1, Func: Acquire, Type: Invoke}, Waiting},
		{Event{Process: 1, Func: Acquire, Type: Info}, Idle},
		{Event{Process: NemesisProcess, Func: Start, Type: Info}, Idle},
	}
	for i, step := range steps {
		s.Follow(step.e)
		if got := s.Of(1); got != step.want {
			t.Fatalf("after event %d (%s %s): %s, want %s", i, step.e.Func, step.e.Type, got, step.want)
		}
	}
	if got := s.Of(7); got != Idle {
		t.Errorf("a client never heard of: %s, want idle", got)
	}
	s.Follow(Event{Process: 2, Func: Acquire, Type: Invoke})
	s.Follow(Event{Process: 3, Func: Acquire, Type: Invoke})
	if got := s.In(Waiting, []int{3, 1, 2}); !slices.Equal(got, []int{3, 2}) {
		t.Errorf("In(waiting) = %v, want [3 2]", got)
	}
	if _, err := ParseClientState("asleep"); err == nil {
		t.Error("ParseClientState(asleep) took it")
	}
}

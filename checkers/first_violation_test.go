package checkers

import (
	"testing"
	"time"
)

// FirstViolation points at the earliest violating event, counted from the history's first
// event; a checker that finds nothing leaves it unset.
func TestFirstViolationIsTheEarliestViolatingEvent(t *testing.T) {
	ms := func(n int) *time.Duration { d := time.Duration(n) * time.Millisecond; return &d }
	tests := []struct {
		file string
		want map[Name]*time.Duration
	}{
		{"kleppmann-unfenced.jsonl", map[Name]*time.Duration{
			"mutual-exclusion":  ms(22), // p1's grant (#6) while p0 was paused holding the lock
			"lock-linearizable": nil,    // a search says no order is legal, not from when on
			"lost-updates":      ms(32), // p0's stale write (#15) overwrote p1's increment
			"fencing":           nil,
		}},
		{"fencing-stale-accepted.jsonl", map[Name]*time.Duration{"fencing": ms(32)}}, // token 33 accepted after 34 (#15)
		{"clean.jsonl", map[Name]*time.Duration{
			"mutual-exclusion": nil, "lost-updates": nil, "fencing": nil,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			events := readHistory(t, tt.file)
			for _, r := range RunAll(t.Context(), All(), events, Options{}) {
				want, ok := tt.want[r.Checker]
				if !ok {
					continue
				}
				switch got := r.FirstViolation; {
				case (got == nil) != (want == nil):
					t.Errorf("%s (%s): first violation %v, want %v", r.Checker, r.Verdict, got, want)
				case got != nil && *got != *want:
					t.Errorf("%s: first violation at %s, want %s", r.Checker, *got, *want)
				}
			}
		})
	}
}

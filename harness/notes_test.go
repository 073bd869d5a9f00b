package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/nodes"
)

// The notes say what the fencing and the servers of a run are worth: tokens that a
// failover sets back, a crash that forgets, a restart at once.
func TestNotesSayWhatTheSetupIsWorth(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Spec)
		want   []string
	}{
		{"fencing off", func(*Spec) {}, []string{"fencing off: the storage accepts every request"}},
		{"sentinel's tokens go back", func(s *Spec) { s.System, s.Fencing, s.Nemesis = "sentinel", true, []string{"failover"} },
			[]string{"a replica promoted without the latest count hands out tokens that repeat or go back", "started again at once"}},
		{"a crash that forgets", func(s *Spec) { s.Nemesis = []string{"kill-node"} },
			[]string{"persistence none: a killed node comes back having forgotten", "started again at once"}},
		{"a crash that forgets the tokens", func(s *Spec) { s.Nemesis, s.Fencing = []string{"kill-node"}, true },
			[]string{"its fencing-token count: its tokens start again from nothing"}},
		{"antirez's delay", func(s *Spec) { s.Nemesis, s.RestartDelayTTL = []string{"kill-node"}, true },
			[]string{"stays down for 2s, at least one TTL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes := strings.Join((&trial{Checked: checked(t, tt.change)}).notes(), "\n")
			for _, want := range tt.want {
				if !strings.Contains(notes, want) {
					t.Errorf("notes %q do not say %q", notes, want)
				}
			}
		})
	}
}

// checked is run's defaults changed by change, checked (CheckSpec).
func checked(t *testing.T, change func(*Spec)) Checked {
	t.Helper()
	s := DefaultSpec()
	change(&s)
	c, err := CheckSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A node that did not serve again after a fault is what the run found, recorded in its
// history, and no harness error; any other error beside it still is one.
func TestANodeThatDidNotComeBackIsAFinding(t *testing.T) {
	gone := func(node string) error {
		return &nodes.NotServingError{Node: node, Why: "exited (exit status 1)", Log: "..."}
	}
	broken := errors.New("restart node n3: no such container")
	tests := []struct {
		name   string
		err    error
		nodes  []string
		harmed bool
	}{
		{"none", nil, nil, false},
		{"one, as a crash returns it", errors.Join(nil, fmt.Errorf("power-loss of node n2: %w", gone("n2"))), []string{"n2"}, false},
		{"two at a heal", errors.Join(gone("n1"), gone("n2")), []string{"n1", "n2"}, false},
		{"one that never answered", &nodes.NotServingError{Node: "n3", Why: "exited (exit status 1)", Err: context.DeadlineExceeded},
			[]string{"n3"}, false},
		{"one beside a harness error", errors.Join(gone("n1"), broken), []string{"n1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recorded []history.Event
			env := nemesis.Env{Record: func(e history.Event) { recorded = append(recorded, e) }}
			tr := &trial{progress: io.Discard, log: slog.New(slog.DiscardHandler)}
			rest := tr.unserved(env, tt.err)
			if (rest != nil) != tt.harmed || tt.harmed && !errors.Is(rest, broken) {
				t.Errorf("left %v, want a harness error: %v", rest, tt.harmed)
			}
			var nodes []string
			for _, e := range recorded {
				if e.Func != history.NotServing || e.Process != history.NemesisProcess || e.Message != "node "+e.Targets[0]+" exited (exit status 1)" {
					t.Errorf("recorded %+v", e)
				}
				nodes = append(nodes, e.Targets...)
			}
			if !slices.Equal(nodes, tt.nodes) {
				t.Errorf("recorded nodes %v as not serving, want %v", nodes, tt.nodes)
			}
		})
	}
}

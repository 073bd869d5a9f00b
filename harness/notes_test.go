package harness

import (
	"strings"
	"testing"
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

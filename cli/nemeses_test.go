package cli

import (
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/nemesis"
)

// help run says what every nemesis does, from its fault kind's declaration: a line of its
// own that opens with its name and the first words of what it does.
func TestHelpRunSaysWhatEveryNemesisDoes(t *testing.T) {
	_, stdout, _ := lockbreaker(t, nil, "help", "run")
	for _, name := range nemesis.Names() {
		k, _ := history.KindOf(name)
		first := strings.Join(strings.Fields(k.Does)[:2], " ")
		found := false
		for _, line := range strings.Split(stdout, "\n") {
			if fields := strings.Fields(line); len(fields) > 2 && fields[0] == name && strings.HasPrefix(strings.Join(fields[1:], " "), first) {
				found = true
			}
		}
		if !found {
			t.Errorf("help run has no line for nemesis %s saying %q...", name, first)
		}
	}
}

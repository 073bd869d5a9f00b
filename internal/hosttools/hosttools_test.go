package hosttools

import (
	"os"
	"slices"
	"testing"
)

// As root, a tool not on PATH is missing and one that is is not; not as root, root is what
// is lacking.
func TestCheckNamesWhatIsMissing(t *testing.T) {
	root, missing := Check("sh", "no-such-tool-of-lockbreaker")
	if os.Geteuid() != 0 {
		if root || missing != nil {
			t.Errorf("not root: got root %v, missing %q", root, missing)
		}
		return
	}
	if !root || !slices.Equal(missing, []string{"no-such-tool-of-lockbreaker"}) {
		t.Errorf("got root %v, missing %q; want only no-such-tool-of-lockbreaker missing", root, missing)
	}
}

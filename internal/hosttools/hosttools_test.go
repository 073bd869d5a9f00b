package hosttools

import (
	"errors"
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

// Lack answers from memory after its first check, in the caller's words; nil when nothing
// is lacking.
func TestLackSaysOnceInItsWords(t *testing.T) {
	calls := 0
	lack := Lack(func(root bool, missing []string) error {
		calls++
		if !root {
			return errors.New("not root")
		}
		return errors.New("missing " + missing[0])
	}, "no-such-tool-of-lockbreaker")
	first, second := lack(), lack()
	want := "missing no-such-tool-of-lockbreaker"
	if os.Geteuid() != 0 {
		want = "not root"
	}
	if first == nil || first.Error() != want || second != first || calls != 1 {
		t.Errorf("got %v then %v in %d calls; want %q once", first, second, calls, want)
	}
	if err := Lack(func(bool, []string) error { return errors.New("lacks") }, "sh")(); os.Geteuid() == 0 && err != nil {
		t.Errorf("sh is on PATH: %v", err)
	}
}

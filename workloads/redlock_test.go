package workloads

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

// Only a request that never left the client is a certain refusal; a request that timed
// out waiting for its answer may have been applied.
func TestNeverSent(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"dial":         {dial, true},
		"wrapped dial": {fmt.Errorf("node n4: %w", dial), true},
		"read timeout": {read, false},
		"other":        {errors.New("ERR something"), false},
	}
	for name, c := range cases {
		if got := neverSent(c.err); got != c.want {
			t.Errorf("%s: neverSent = %v, want %v", name, got, c.want)
		}
	}
}

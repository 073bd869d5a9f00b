package containers

import (
	"os"
	"testing"

	"github.com/lockbreaker/lockbreaker/lazydisk"
)

// TestMain lets this test binary serve the nodes' disks, as the lockbreaker binary does
// (startDisks runs the program it is in).
func TestMain(m *testing.M) {
	lazydisk.MaybeServe()
	os.Exit(m.Run())
}

// Package tier says which tier of tests runs: make test's, which proves in minutes on any
// machine that verdicts, hazards, stories and files are right once a danger came, or the
// long tier's (make test-long, LOCKBREAKER_LONG=1), which also runs the whole scenario
// matrix and so measures how often each fault brings its danger.
package tier

import (
	"os"
	"testing"
)

// Env, set to 1, runs the long tier.
const Env = "LOCKBREAKER_LONG"

// IsLong says whether the long tier runs.
func IsLong() bool { return os.Getenv(Env) == "1" }

// Long skips t outside the long tier.
func Long(t testing.TB) {
	t.Helper()
	if !IsLong() {
		t.Skip("long tier: make test-long (" + Env + "=1)")
	}
}

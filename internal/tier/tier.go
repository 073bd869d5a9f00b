// Package tier says which tier of tests runs: make test's, which proves in minutes on any
// machine that verdicts, hazards, stories and files are right once a danger came, or the
// long tier's (make test-long, LOCKBREAKER_LONG=1), which also runs the whole scenario
// matrix and so measures how often each fault brings its danger.
package tier

import (
	"flag"
	"os"
	"runtime"
	"strconv"
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

// FastParallel lets n tests run at once in the fast tier (-short), unless the command line
// says how many (-parallel): for a package whose fast tests mostly wait, on runs of a set
// length or on processes a core is shared by, which go test's default of one test per CPU
// would leave waiting in line while the CPUs idle. TestMain calls it once flags are parsed.
func FastParallel(n int) {
	if !testing.Short() {
		return
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
	}
}

// Command brokenlock is lockbreaker with the example's broken lock as one more --client.
// Every lockbreaker command works: `brokenlock suite ../../brokenlock.yaml` runs the
// example's suite, `brokenlock run --client brokenlock ...` one test.
package main

import (
	"fmt"
	"os"

	"github.com/lockbreaker/lockbreaker"
	"github.com/lockbreaker/lockbreaker/examples/brokenlock"
)

func main() {
	// Registered in every start of the binary: workers are this binary again.
	if err := brokenlock.Register(); err != nil {
		fmt.Fprintln(os.Stderr, "brokenlock:", err)
		os.Exit(254)
	}
	lockbreaker.Main()
}

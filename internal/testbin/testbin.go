// Package testbin gives tests the lockbreaker binary they run as a user would. make test
// builds it once and names it in LOCKBREAKER_TEST_BIN, so that the packages' tests do not
// each link their own copy (a link of the whole binary costs seconds of CPU on a machine
// the tests already keep busy); a test run by hand builds one.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Env names the binary the tests run; unset, they build their own.
const Env = "LOCKBREAKER_TEST_BIN"

// Path is the binary named in Env, or else one built from the current sources into dir,
// without debugger tables (a quarter of the link; stack traces do not need them).
func Path(dir string) (string, error) {
	if bin := os.Getenv(Env); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s: %w", Env, err)
		}
		return abs, nil
	}
	bin := filepath.Join(dir, "lockbreaker")
	if out, err := exec.Command("go", "build", "-ldflags=-w", "-o", bin, "github.com/lockbreaker/lockbreaker/cmd/lockbreaker").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build lockbreaker: %v\n%s", err, out)
	}
	return bin, nil
}

// Package exampletest is what the examples' tests share: the lockbreaker binary as a user
// runs it, a lock program's stderr in the test's log, and a suite file's cells run one by
// one as a user would. It never decides what a cell should show: the suite file says that.
package exampletest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/internal/testbin"
	"github.com/lockbreaker/lockbreaker/suite"
	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/execlock"
)

// Long says whether the examples' slower cells and comparisons run too: LOCKBREAKER_LONG=1
// (make test-long). make test runs the cell of each lock that shows the most (its lock
// broken by a paused holder, its data kept by its token where it has one); the rest are
// measured over many seeds by hand (docs/locks-people-run.md, docs/measurements.md).
func Long() bool { return os.Getenv("LOCKBREAKER_LONG") == "1" }

// Lockbreaker is the lockbreaker binary: make test's, or one built into the test's
// temporary directory.
func Lockbreaker(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Path(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Log writes a program's stderr into the test's log.
type Log struct{ T *testing.T }

func (l Log) Write(b []byte) (int, error) {
	l.T.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// Options are the exec client's defaults with the program's stderr in the test's log.
func Options(t *testing.T) execlock.Options {
	opts := execlock.Defaults
	opts.Log = Log{T: t}
	return opts
}

// ConfigRefused fails the test unless cfg's program refuses its configuration, saying says.
func ConfigRefused(t *testing.T, cfg workloads.Config, says string) {
	t.Helper()
	lock, err := execlock.Start(cfg, Options(t))
	if err == nil {
		lock.Close()
	}
	if !errors.Is(err, workloads.ErrBroken) || !strings.Contains(err.Error(), "refused its configuration: "+says) {
		t.Errorf("start: %v, want the configuration refused: %s", err, says)
	}
}

// AcquireIsUnknown starts cfg's program, whose nodes answer nothing, and fails the test
// unless an acquire within the given time is indeterminate (neither busy, lost nor a broken
// client) and its error says one of says (anything when none is given).
func AcquireIsUnknown(t *testing.T, cfg workloads.Config, within time.Duration, says ...string) {
	t.Helper()
	lock, err := execlock.Start(cfg, Options(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	_, err = lock.Acquire(ctx)
	said := len(says) == 0 || err != nil && slices.ContainsFunc(says, func(s string) bool { return strings.Contains(err.Error(), s) })
	if err == nil || errors.Is(err, workloads.ErrBusy) || errors.Is(err, workloads.ErrLost) || errors.Is(err, workloads.ErrBroken) || !said {
		t.Errorf("acquire with no server: %v, want unknown (saying one of %q)", err, says)
	}
}

// MeetCells runs each cell of the suite file that in names (suite --shard i/n, so that each
// stays short), as a subtest that fails unless the suite exits 0 with the cell met. A run
// whose danger never came is unknown (exit 2), the product's honest answer on a busy
// machine and no failure of the lock: the cell is tried again on the next seed
// (--seed-offset), up to dangerTries times, and fails only when every try was unknown, or
// at once when one failed.
func MeetCells(t *testing.T, bin, file string, in func(cell string) bool) {
	t.Helper()
	judgeCells(t, bin, file, in, "MET", 0)
}

// FailCells is MeetCells for cells that must not be met: the suite must exit 1 with the
// cell failed, as a CI job fails on a lock that breaks what the cell requires.
func FailCells(t *testing.T, bin, file string, in func(cell string) bool) {
	t.Helper()
	judgeCells(t, bin, file, in, "FAILED", 1)
}

// judgeCells runs the cells in names, each until the suite exits with code and says status
// of it, or a try neither does nor is unknown.
func judgeCells(t *testing.T, bin, file string, in func(cell string) bool, status string, code int) {
	t.Helper()
	s, err := suite.Load(file, harness.CheckedSpec)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range s.Cells {
		if !in(c.Name) {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			for try := range dangerTries {
				started := time.Now()
				cmd := exec.Command(bin, "suite", file, "--shard", fmt.Sprintf("%d/%d", i+1, len(s.Cells)),
					"--seed-offset", fmt.Sprint(try), "--results", t.TempDir())
				out, err := cmd.CombinedOutput()
				t.Logf("try %d of %d: %s(%s)", try+1, dangerTries, out, time.Since(started).Round(time.Second))
				if cmd.ProcessState == nil {
					t.Fatalf("suite: %v", err)
				}
				got := cmd.ProcessState.ExitCode()
				if got == code && strings.Contains(string(out), fmt.Sprintf("%-8s %s", status, c.Name)) {
					return
				}
				if got != 2 {
					t.Fatalf("suite: exit %d, want %d and the cell %s", got, code, status)
				}
			}
			t.Errorf("suite: the cell was unknown on each of %d seeds: its danger never came (each try's reasons above)", dangerTries)
		})
	}
}

// dangerTries is how many seeds a cell is tried on for its danger to come: five, since a
// Python or Java client beside make test and two busy processes made only a handful of
// requests in a run, three runs in a row, while the rest of make test ran.
const dangerTries = 5

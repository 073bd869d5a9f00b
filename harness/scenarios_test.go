package harness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/results"
)

// The test binary doubles as the worker: the runner starts it again with WorkerEnv set.
func TestMain(m *testing.M) {
	MaybeRunWorker()
	os.Exit(m.Run())
}

func runScenario(t *testing.T, spec Spec) results.Summary {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := Runner{ResultsRoot: t.TempDir(), Progress: testWriter{t}, Worker: []string{exe}}
	dir, summary, err := r.Run(ctx, spec)
	if err != nil {
		t.Fatalf("run %s: %v", spec.Test, err)
	}
	t.Logf("results in %s", dir)
	for _, res := range summary.Results {
		t.Logf("%-18s %-8s %s", res.Checker, res.Verdict, res.Summary)
	}
	return summary
}

// kleppmannSpec is a short version of the default scenario: leases of 1s, holders paused
// for 2.5s right after reading the register, so the lease always expires mid-work.
func kleppmannSpec(fencing bool) Spec {
	s := DefaultSpec()
	s.TTL = Duration(time.Second)
	s.Pause = Duration(2500 * time.Millisecond)
	s.TimeLimit = Duration(12 * time.Second)
	s.Fencing = fencing
	return s
}

func verdicts(s results.Summary) map[string]checkers.Result {
	m := map[string]checkers.Result{}
	for _, r := range s.Results {
		m[r.Checker] = r
	}
	return m
}

func expect(t *testing.T, s results.Summary, want map[string]checkers.Verdict) {
	t.Helper()
	got := verdicts(s)
	for name, v := range want {
		if got[name].Verdict != v {
			t.Errorf("%s: got %s (%s), want %s", name, got[name].Verdict, got[name].Summary, v)
		}
	}
}

func TestRedisPausedHolderWithoutFencingCorruptsStorage(t *testing.T) {
	s := runScenario(t, kleppmannSpec(false))
	expect(t, s, map[string]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
		"data-safety":       checkers.Invalid,
		"lost-updates":      checkers.Invalid,
	})
	if lost := verdicts(s)["lost-updates"].Counts["lost"]; lost < 1 {
		t.Errorf("lost-updates counted %d lost increments, want at least 1", lost)
	}
	if s.Faults < 1 || s.Overall() != checkers.Invalid {
		t.Errorf("faults %d, overall %s: want at least one pause and an invalid run", s.Faults, s.Overall())
	}
}

func TestRedisPausedHolderWithFencingKeepsStorageSafe(t *testing.T) {
	s := runScenario(t, kleppmannSpec(true))
	expect(t, s, map[string]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
		"data-safety":       checkers.Valid,
		"lost-updates":      checkers.Valid,
		"fencing":           checkers.Valid,
	})
	if stale := verdicts(s)["fencing"].Counts["stale-rejected"]; stale < 1 {
		t.Errorf("storage rejected %d stale requests, want at least 1", stale)
	}
}

func TestRedisWithoutFaultsIsSafe(t *testing.T) {
	spec := kleppmannSpec(true)
	spec.Nemesis = []string{"none"}
	spec.TimeLimit = Duration(6 * time.Second)
	s := runScenario(t, spec)
	for _, r := range s.Results {
		if r.Verdict != checkers.Valid {
			t.Errorf("%s: %s (%s), want valid", r.Checker, r.Verdict, r.Summary)
		}
	}
	if s.Ops["acquire:ok"] < 5 || s.Ops["write:ok"] < 5 {
		t.Errorf("too little work to mean anything: %v", s.Ops)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

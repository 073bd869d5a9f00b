package offline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history/histgen"
	"github.com/lockbreaker/lockbreaker/results"
)

// check --timeout is a wall-clock guard, and the verdicts it leaves unknown say so: here
// 1 ms, long before data-safety's search of a hard history (8.5 million steps) could end.
func TestCheckTimeoutIsAWallClockGuard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := histgen.WriteRun(dir, histgen.Config{Ops: 300, Clients: 20, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if code, err := cmdCheck(t.Context(), []string{"--timeout", "1ms", dir}, &stdout); code != 2 || err != nil {
		t.Fatalf("exit %d (%v), want 2 (unknown)\n%s", code, err, stdout.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var s results.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	const why = "search did not finish on key k (stopped by check --timeout 1ms, a wall-clock guard; without it the search is bounded by steps)"
	verdicts := map[checkers.Name]string{}
	for _, r := range s.Results {
		verdicts[r.Checker] = r.Summary
	}
	// data-safety's search cannot end within 1 ms on any machine; lock-linearizable's, of
	// 1,915 steps, might on a fast one.
	if got := verdicts["data-safety"]; !strings.HasPrefix(got, why) {
		t.Errorf("data-safety: %s, want: %s", got, why)
	}
	if got := verdicts["lock-linearizable"]; !strings.HasPrefix(got, why) && !strings.HasPrefix(got, "linearizable") {
		t.Errorf("lock-linearizable: %s, want: %s, or linearizable", got, why)
	}
}

package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/results"
)

// sameBut says whether results.json got is want but for the results of checkers that want
// has none of: a checker added since the run was saved is judged on its own golden files
// (checkers/testdata/golden), and adds nothing here unless it changes the run's verdict.
func sameBut(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	saved := map[any]bool{}
	for _, r := range w["results"].([]any) {
		saved[r.(map[string]any)["checker"]] = true
	}
	g["results"] = slices.DeleteFunc(g["results"].([]any), func(r any) bool { return !saved[r.(map[string]any)["checker"]] })
	return reflect.DeepEqual(g, w)
}

var update = flag.Bool("update", false, "rewrite the saved runs' results.json in testdata/runs")

// Real runs saved from the targeted suite (a failover that could not say, and crashes, a
// clock and a pause that broke their locks): judged again as check judges them, each
// gives its results.json back byte for byte, so a change of the judging code that changes
// a verdict, a count or a story shows here (go test -run TestSavedRuns -update rewrites
// them, and the diff must say why).
func TestSavedRunsAreJudgedTheSame(t *testing.T) {
	runs, _ := filepath.Glob(filepath.Join("testdata", "runs", "*"))
	if len(runs) < 5 {
		t.Fatalf("%d saved runs, want at least 5", len(runs))
	}
	for _, saved := range runs {
		t.Run(filepath.Base(saved), func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{results.HistoryFile, results.SummaryFile} {
				b, err := os.ReadFile(filepath.Join(saved, name))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			summary, err := results.ReadSummary(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := File(context.Background(), dir, filepath.Join(dir, results.HistoryFile), summary, checkers.DefaultLimits); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join(saved, results.SummaryFile)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want, _ := os.ReadFile(golden); !bytes.Equal(got, want) && !sameBut(t, got, want) {
				t.Errorf("results.json differs from %s (go test -run TestSavedRuns -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

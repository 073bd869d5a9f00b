package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Checking a saved run again changes no byte of results.json: the verdicts, their
// evidence and the run's own start and end stay as they were.
func TestCheckingAgainGivesTheSameResults(t *testing.T) {
	dir := runDir(t, "testdata/stale-write.jsonl")
	const saved = `{"test": "redis-pause", "run_id": "20261130T081530Z",
		"spec": {"system": "redis", "nemesis": ["pause-holder"]},
		"started": "2026-11-30T08:15:30Z", "finished": "2026-11-30T08:16:00Z", "verdict": "valid", "faults": 0}`
	if err := os.WriteFile(filepath.Join(dir, "results.json"), []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	var first []byte
	for i := range 3 {
		if code, stdout, stderr := lockbreaker(t, nil, "check", dir); code != exitInvalid {
			t.Fatalf("check %d: exit %d, want %d\n%s%s", i, code, exitInvalid, stdout, stderr)
		}
		got, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
			for _, want := range []string{`"started": "2026-11-30T08:15:30Z"`, `"finished": "2026-11-30T08:16:00Z"`, `"verdict": "invalid"`} {
				if !strings.Contains(string(got), want) {
					t.Errorf("results.json lacks %s:\n%s", want, got)
				}
			}
			continue
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("check %d wrote a different results.json:\n%s\nthen:\n%s", i, first, got)
		}
	}
	report, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(string(report), "took 30s") {
		t.Errorf("the report does not keep the run's own duration")
	}
}

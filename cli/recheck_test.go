package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/results"
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
		if code, stdout, stderr := lockbreaker(t, nil, "check", dir); code != command.ExitInvalid {
			t.Fatalf("check %d: exit %d, want %d\n%s%s", i, code, command.ExitInvalid, stdout, stderr)
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

// A results.json this version did not write (an older version's, another tool's) never
// stops check: what it cannot read is set aside with one line on stderr, what it can (the
// run's own start) is kept, and the history alone decides the verdicts. report, which
// judges nothing, sends the user to check instead.
func TestCheckSetsAsideAForeignResultsFile(t *testing.T) {
	const started = `"started": "2026-11-30T08:15:30Z"`
	tests := []struct {
		name, saved string
		setAside    string // on stderr; "" for no line
		keeps       []string
	}{
		{"a field of another type", `{"test": "redis-pause", ` + started + `, "ops": "x"}`, "set aside: ops", []string{started, `"test": "redis-pause"`}},
		{"a kept field of another type", `{"test": 7, ` + started + `}`, "set aside: test", []string{started}},
		{"a time that is not one", `{"test": "redis-pause", "started": "yesterday"}`, "set aside: started", []string{`"test": "redis-pause"`}},
		{"an older schema", `{"test": "redis-pause", ` + started + `, "results": {"lock": "ok"}, "verdict": 1}`, "results", []string{started}},
		{"not JSON", `verdict: valid`, "set aside: all of it", nil},
		{"not an object", `["valid"]`, "set aside: all of it", nil},
		{"this version's", `{"test": "redis-pause", ` + started + `}`, "", []string{started}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := runDir(t, "testdata/stale-write.jsonl")
			path := filepath.Join(dir, "results.json")
			if err := os.WriteFile(path, []byte(tt.saved), 0o644); err != nil {
				t.Fatal(err)
			}
			// report renders a summary as it is, so it will not render half of one.
			if code, _, stderr := lockbreaker(t, nil, "report", dir); tt.setAside != "" && (code != command.ExitBadInput || !strings.Contains(stderr, "not this version's")) {
				t.Errorf("report: exit %d, %q: want %d and a line saying results.json is not this version's", code, stderr, command.ExitBadInput)
			}
			code, stdout, stderr := lockbreaker(t, nil, "check", dir)
			if code != command.ExitInvalid {
				t.Fatalf("exit %d, want %d\n%s%s", code, command.ExitInvalid, stdout, stderr)
			}
			if tt.setAside == "" && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
			if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); tt.setAside != "" &&
				(len(lines) != 1 || !strings.Contains(lines[0], "results.json") || !strings.Contains(lines[0], tt.setAside)) {
				t.Errorf("stderr %q: want one line naming results.json and %q", stderr, tt.setAside)
			}
			got, err := results.ReadSummary(dir)
			if err != nil {
				t.Fatalf("check left a results.json this version cannot read: %v", err)
			}
			if got.Verdict != checkers.Invalid {
				t.Errorf("results.json says %s, want invalid", got.Verdict)
			}
			written, _ := os.ReadFile(path)
			for _, want := range tt.keeps {
				if !strings.Contains(string(written), want) {
					t.Errorf("results.json lacks %s:\n%s", want, written)
				}
			}
		})
	}
}

// check --whole judges the history as one piece and gives the verdicts check gives it in
// pieces: the reference make bench compares the pieces with.
func TestCheckWholeGivesTheVerdictsOfThePieces(t *testing.T) {
	dir := runDir(t, "testdata/stale-write.jsonl")
	code, pieces, stderr := lockbreaker(t, nil, "check", dir)
	if code != command.ExitInvalid {
		t.Fatalf("check: exit %d\n%s%s", code, pieces, stderr)
	}
	code, whole, stderr := lockbreaker(t, nil, "check", "--whole", dir)
	if code != command.ExitInvalid {
		t.Fatalf("check --whole: exit %d\n%s%s", code, whole, stderr)
	}
	if whole != pieces {
		t.Errorf("check --whole says\n%s\ncheck says\n%s", whole, pieces)
	}
}

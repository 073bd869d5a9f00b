package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newTestRun(t *testing.T, root, test string, now time.Time) *Run {
	t.Helper()
	r, err := NewRun(root, test, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.Path(HistoryFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.MarkLatest(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRunLatestResolve(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 11, 30, 8, 15, 30, 0, time.FixedZone("CET", 3600))
	first := newTestRun(t, root, "pause", at)
	second := newTestRun(t, root, "pause", at) // same second: gets -2
	other := newTestRun(t, root, "clock", at.Add(time.Minute))
	notRun := filepath.Join(root, "pause", "empty")
	if err := os.Mkdir(notRun, 0o755); err != nil {
		t.Fatal(err)
	}

	if first.ID() != "20261130T071530Z" || second.ID() != "20261130T071530Z-2" {
		t.Fatalf("run ids %q, %q; want the UTC timestamp, then -2", first.ID(), second.ID())
	}
	for link, want := range map[string]string{
		filepath.Join(root, Latest):          filepath.Join("clock", other.ID()),
		filepath.Join(root, "pause", Latest): second.ID(),
		filepath.Join(root, "clock", Latest): other.ID(),
	} {
		if got, err := os.Readlink(link); err != nil || got != want {
			t.Errorf("readlink %s = %q, %v; want relative %q", link, got, err, want)
		}
	}

	tests := []struct {
		name, path, want, wantErr string
	}{
		{name: "run dir", path: first.Dir(), want: first.Dir()},
		{name: "test latest link", path: filepath.Join(root, "pause", Latest), want: second.Dir()},
		{name: "test dir", path: filepath.Join(root, "pause"), want: second.Dir()},
		{name: "root latest", path: filepath.Join(root, Latest), want: other.Dir()},
		{name: "root", path: root, want: other.Dir()},
		{name: "not a run", path: notRun, wantErr: "no history.jsonl in " + notRun + ": not a run directory"},
		{name: "missing", path: filepath.Join(root, "nope"), wantErr: "expected a run directory"},
		{name: "a file", path: first.Path(HistoryFile), wantErr: "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%s) error = %v; want it to say %q", tt.path, err, tt.wantErr)
				}
				return
			}
			want, _ := filepath.EvalSymlinks(tt.want)
			if err != nil || got != want {
				t.Fatalf("Resolve(%s) = %q, %v; want %q", tt.path, got, err, want)
			}
		})
	}
}

func TestNewRunErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root, test, wantErr string
	}{
		{name: "root is a file", root: file, test: "pause", wantErr: "results directory " + file + " is not writable: "},
		{name: "root under a file", root: filepath.Join(file, "results"), test: "pause",
			wantErr: "results directory " + filepath.Join(file, "results") + " is not writable: "},
		{name: "empty test", root: dir, test: "", wantErr: "test name is empty"},
		{name: "test with slash", root: dir, test: "a/b", wantErr: "cannot name a results directory"},
		{name: "test named latest", root: dir, test: Latest, wantErr: "cannot name a results directory"},
		{name: "dot dot", root: dir, test: "..", wantErr: "cannot name a results directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRun(tt.root, tt.test, time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewRun(%q, %q) error = %v; want it to say %q", tt.root, tt.test, err, tt.wantErr)
			}
		})
	}
}

package checkers

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Porcupine's pages read like the report: rows named by process and incarnation, times
// in seconds since the history's first event. This fails when a porcupine release changes
// the function secondsInTooltips replaces.
func TestPorcupinePageIsPostProcessed(t *testing.T) {
	tests := []struct {
		checker Checker
		want    []string
	}{
		{lockLinearizable, []string{`"Description":"p0"`, `"Description":"p1"`, `"Description":"p0'1"`,
			`t=0s .. t=10ms`, `"Details":"process 0, its life 1`}},
		{dataSafety, []string{`"Description":"p1'1"`, `t=24ms .. t=30ms`}},
	}
	for _, tt := range tests {
		t.Run(string(tt.checker.Name()), func(t *testing.T) {
			dir := t.TempDir()
			r := tt.checker.Check(t.Context(), readHistory(t, "indeterminate.jsonl"), Options{Dir: dir})
			if len(r.Files) != 1 {
				t.Fatalf("files %q, want one page", r.Files)
			}
			page, err := os.ReadFile(filepath.Join(dir, r.Files[0]))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(page, []byte(porcupineTimes)) || !bytes.Contains(page, []byte("BigInt(t) - 1000000000n")) {
				t.Fatalf("porcupine's page still prints raw times: its formatCallReturn changed, update porcupineTimes")
			}
			for _, want := range tt.want {
				if !bytes.Contains(page, []byte(want)) {
					t.Errorf("page lacks %s", want)
				}
			}
		})
	}
}

func TestSecondsInTooltips(t *testing.T) {
	tests := []struct {
		name, page string
		ok         bool
		want       string
	}{
		{"porcupine's function", "<script>" + porcupineTimes + "</script>", true, "BigInt(t) >= 9000n ? 'never"},
		{"replaced once", porcupineTimes + porcupineTimes, true, "- 1000n) / 1e9).toFixed(6) + 's'"},
		{"another page", "<script>function formatCallReturn(a, b) {}</script>", false, "function formatCallReturn(a, b) {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ok := secondsInTooltips([]byte(tt.page), 1000, 9000)
			if ok != tt.ok || !strings.Contains(string(out), tt.want) {
				t.Errorf("ok %v, page %s; want ok %v and %q", ok, out, tt.ok, tt.want)
			}
			if ok && strings.Count(string(out), porcupineTimes) != strings.Count(tt.page, porcupineTimes)-1 {
				t.Errorf("want exactly the first function replaced: %s", out)
			}
		})
	}
}

package checkers

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenOptions are the options every golden history is judged with: plainly, and as a
// run that asked for faults and a hazard (the stats precondition's other paths).
var goldenOptions = map[string]func(dir string) Options{
	"plain": func(dir string) Options { return Options{Dir: dir} },
	"hazard": func(dir string) Options {
		return Options{Dir: dir, FaultsRequested: true,
			Hazards: map[string]history.Hazard{"pause-holder": history.GrantedInPause}}
	},
}

// goldenJudged is one history's results, judged whole (Judge) and, where it pairs, in
// pieces as small as the stream makes them, for every set of goldenOptions.
type goldenJudged struct {
	Whole    map[string][]Result `json:"whole"`
	Streamed map[string][]Result `json:"streamed,omitempty"`
}

// Every hand-made history, every fuzz seed and a few generated histories get, byte for
// byte, the results in testdata/golden, whole and streamed: what the checkers say does not
// change unless a golden file changes with it (go test -run TestGolden -update rewrites them).
func TestGolden(t *testing.T) {
	t.Parallel()                                      // a CPU-bound search: the fast tier runs them side by side
	inputs := map[string]map[string][]history.Event{} // golden file -> candidate -> events
	jsonl, _ := filepath.Glob("testdata/*.jsonl")
	for _, path := range jsonl {
		inputs[strings.TrimSuffix(filepath.Base(path), ".jsonl")] = map[string][]history.Event{"parsed": readHistory(t, filepath.Base(path))}
	}
	for _, dir := range []string{"testdata/fuzz/FuzzCheckers", "../history/testdata/fuzz/FuzzParse"} {
		seeds, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, path := range seeds {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, quoted, _ := strings.Cut(string(data), "[]byte(")
			unquoted, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(quoted), ")")))
			if err != nil {
				continue
			}
			in := []byte(unquoted)
			candidates := map[string][]history.Event{"loose": looseEvents(in), "compact": compactEvents(in)}
			if file, err := history.Parse(bytes.NewReader(in)); err == nil {
				candidates["parsed"] = file.Events
			}
			inputs["fuzz-"+filepath.Base(dir)+"-"+filepath.Base(path)] = candidates
		}
	}
	for _, cfg := range []histgen.Config{
		{Ops: 300, Clients: 5, Seed: 1},
		{Ops: 300, Clients: 5, Fencing: true, Effects: true, Seed: 2},
		{Ops: 300, Clients: 20, Effects: true, Seed: 3},
		{Ops: 300, Clients: 2, Fencing: true, Seed: 4},
		{Ops: 300, Clients: 5, Fencing: true, Effects: true, Kills: true, Seed: 5},
	} {
		name := fmt.Sprintf("histgen-ops%d-clients%d-fencing%t-effects%t-seed%d", cfg.Ops, cfg.Clients, cfg.Fencing, cfg.Effects, cfg.Seed)
		if cfg.Kills {
			name += "-kills"
		}
		inputs[name] = map[string][]history.Event{"generated": histgen.Generate(cfg)}
	}
	if len(inputs) < 60 {
		t.Fatalf("only %d inputs found", len(inputs))
	}
	for name, candidates := range inputs {
		t.Run(name, func(t *testing.T) {
			judged := map[string]goldenJudged{}
			for candidate, events := range candidates {
				j := goldenJudged{Whole: map[string][]Result{}}
				_, unpairable := history.Pair(events)
				for set, opts := range goldenOptions {
					j.Whole[set] = Judge(t.Context(), events, opts(t.TempDir()))
					if unpairable != nil {
						continue
					}
					if j.Streamed == nil {
						j.Streamed = map[string][]Result{}
					}
					limits := Limits{PieceOps: 1, MaxOps: 1 << 30, LongOps: 1 << 30}
					if len(events) > 200 {
						limits = tinyPieces
					}
					s := NewStream(t.Context(), opts(t.TempDir()), limits)
					for _, e := range events {
						s.Add(e)
					}
					j.Streamed[set] = s.Results()
				}
				judged[candidate] = j
			}
			got, err := json.MarshalIndent(judged, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("results differ from %s:\n%s", path, firstDifference(want, got))
			}
		})
	}
}

// firstDifference shows the first line where got departs from want.
func firstDifference(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want %s\n  got  %s", i+1, wl, gl)
		}
	}
	return "(no line differs)"
}

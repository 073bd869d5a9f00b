package checkers

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenOptions are the options every golden history is judged with: plainly, and as a
// run that asked for faults and a hazard (the stats precondition's other paths) and
// states its lease (lease-safety's; the other checkers read none).
var goldenOptions = map[string]func(dir string) Options{
	"plain": func(dir string) Options { return Options{Dir: dir} },
	"hazard": func(dir string) Options {
		return Options{Dir: dir, FaultsRequested: true, Lease: history.Lease{TTL: time.Second},
			Hazards: map[string]history.Hazard{"pause-holder": history.GrantedInPause}}
	},
}

// goldenJudged is one checker's results on one candidate reading of a history, judged whole
// (Judge) and, where it pairs, in pieces as small as the stream makes them, for every set
// of goldenOptions.
type goldenJudged struct {
	Whole    map[string]Result `json:"whole"`
	Streamed map[string]Result `json:"streamed,omitempty"`
}

// goldenDir holds one directory per checker, named as the checker is, with one file per
// input history, <checker>/<input>.json: a new checker adds its own directory and changes
// no other checker's file.
var goldenDir = filepath.Join("testdata", "golden")

// goldenPath is where a checker's results on an input are kept.
func goldenPath(checker Name, input string) string {
	return filepath.Join(goldenDir, string(checker), input+".json")
}

// Every hand-made history, every fuzz seed and a few generated histories get, byte for
// byte, the results in testdata/golden/<checker>/<input>.json, whole and streamed: what a
// checker says does not change unless its golden file changes with it (go test ./checkers
// -run TestGolden -update rewrites them, and removes those of a checker or input gone).
func TestGolden(t *testing.T) {
	t.Parallel()                                      // a CPU-bound search: the fast tier runs them side by side
	inputs := map[string]map[string][]history.Event{} // input -> candidate -> events
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
	staleGoldens(t, inputs)
	for name, candidates := range inputs {
		t.Run(name, func(t *testing.T) {
			judged := make([]map[string]goldenJudged, len(All())) // by checker, as All lists them
			for i := range judged {
				judged[i] = map[string]goldenJudged{}
			}
			// keep puts each checker's result with the others for its golden file, once the
			// results are known to be one of each checker's in the order of All.
			keep := func(candidate, set string, streamed bool, results []Result) {
				t.Helper()
				if len(results) != len(All()) {
					t.Fatalf("%s %s: %d results, want one of each of the %d checkers", candidate, set, len(results), len(All()))
				}
				for i, r := range results {
					if c := All()[i].Name(); r.Checker != c {
						t.Fatalf("%s %s: result %d is of %s, want %s (the order of All)", candidate, set, i, r.Checker, c)
					}
					j := judged[i][candidate]
					if j.Whole == nil {
						j.Whole = map[string]Result{}
					}
					if streamed {
						if j.Streamed == nil {
							j.Streamed = map[string]Result{}
						}
						j.Streamed[set] = r
					} else {
						j.Whole[set] = r
					}
					judged[i][candidate] = j
				}
			}
			for candidate, events := range candidates {
				_, unpairable := history.Pair(events)
				for set, opts := range goldenOptions {
					keep(candidate, set, false, Judge(t.Context(), events, opts(t.TempDir())))
					if unpairable != nil {
						continue
					}
					limits := Limits{PieceOps: 1, MaxOps: 1 << 30, LongOps: 1 << 30}
					if len(events) > 200 {
						limits = tinyPieces
					}
					s := NewStream(t.Context(), opts(t.TempDir()), limits)
					for _, e := range events {
						s.Add(e)
					}
					keep(candidate, set, true, s.Results())
				}
			}
			for i, c := range All() {
				got, err := json.MarshalIndent(judged[i], "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, '\n')
				path := goldenPath(c.Name(), name)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("%v (go test ./checkers -run TestGolden -update writes it)", err)
					continue
				}
				if !bytes.Equal(got, want) {
					t.Errorf("results differ from %s:\n%s", path, firstDifference(want, got))
				}
			}
		})
	}
}

// staleGoldens fails on anything in testdata/golden that is not the golden of a checker in
// All on one of the inputs (a checker removed or renamed, an input gone), so that goldens
// cannot rot unread; with -update it removes them instead, and says so.
func staleGoldens(t *testing.T, inputs map[string]map[string][]history.Event) {
	t.Helper()
	checkers := map[string]bool{}
	for _, c := range All() {
		checkers[string(c.Name())] = true
	}
	err := filepath.WalkDir(goldenDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == goldenDir {
			return err
		}
		rel, _ := filepath.Rel(goldenDir, path)
		dir, file := filepath.Split(rel)
		var stale string
		switch input, isJSON := strings.CutSuffix(file, ".json"); {
		case dir == "" && d.IsDir() && !checkers[file]:
			stale = "no checker in All is named " + file
		case dir == "" && !d.IsDir():
			stale = "not in a checker's directory (a golden is <checker>/<input>.json)"
		case dir != "" && (d.IsDir() || !isJSON || inputs[input] == nil):
			stale = "no input is named " + strings.TrimSuffix(file, ".json")
		default:
			return nil
		}
		if !*update {
			t.Errorf("%s is stale: %s (go test ./checkers -run TestGolden -update removes it)", path, stale)
		} else {
			t.Logf("removing %s: %s", path, stale)
			if err := os.RemoveAll(path); err != nil {
				return err
			}
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none yet: every golden is missing, and says so
		t.Fatal(err)
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

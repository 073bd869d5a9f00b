package history_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// declared are the files where the names are declared, by the name kind: nowhere else may
// a Go string spell one out.
var declared = map[string]string{
	"history/faults.go":   "fault kind",
	"history/hazard.go":   "hazard",
	"checkers/checker.go": "checker",
}

// notNames are string literals that spell a name but mean something else, by file: the
// word is another program's or another setting's.
var notNames = map[string][]string{
	"clientnet/clientnet.go": {"delay"},   // tc netem's own word
	"nemesis/delay.go":       {"delay"},   // the detail saying how long a delay is
	"results/setup.go":       {"fencing"}, // the spec's fencing setting, a fact on the report
	"system/system.go":       {"none"},    // persistence none
	"nemesis/failover.go":    {"none"},    // a failover's detail: no grant was lost
}

// flagDefiners are the flag.FlagSet methods whose name argument is a flag's name: a flag
// may share its name with a fault kind (--clock-rate) or a checker (--fencing).
var flagDefiners = map[string]int{
	"Bool": 0, "Duration": 0, "Float64": 0, "Int": 0, "Int64": 0, "String": 0, "Uint": 0, "Uint64": 0, "Func": 0,
	"BoolVar": 1, "DurationVar": 1, "Float64Var": 1, "IntVar": 1, "Int64Var": 1, "StringVar": 1, "UintVar": 1,
	"Uint64Var": 1, "Var": 1, "TextVar": 1,
}

// Every fault kind (and none, history.NoFaults), hazard and checker is named in Go by its
// declaration (history.PauseHolder, history.GrantedInPause, checkers.MutualExclusion),
// never spelled out as a string elsewhere: a name spelled out is
// how the story came to tell "delay-client" when the nemesis recorded "delay", and how a
// checker could go missing from the suites' expectations. A fault as recorded, a kind's
// name then a space and what the fault was ("partition-halves n1|n2"), counts as its name.
// The repository's non-test Go files are read (examples/, a user's module, and third_party/
// are not ours to hold to it); tests may spell names, as a history file does.
func TestNamesAreDeclaredOnce(t *testing.T) {
	names := map[string]string{}
	for _, k := range history.FaultKinds() {
		names[k.Name] = "fault kind"
	}
	for _, c := range checkers.All() {
		names[string(c.Name())] = "checker"
	}
	for _, h := range history.KnownHazards() {
		names[string(h)] = "hazard"
	}
	names[history.NoFaults] = "fault kind"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "examples" || rel == "third_party" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		files++
		for _, found := range spelledNames(t, path, names) {
			if declared[rel] == found.kind || slices.Contains(notNames[rel], found.value) {
				continue
			}
			t.Errorf("%s:%d spells out %s %q: use its declaration (%s)", rel, found.line, found.kind, found.value, where(found.kind))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d Go files from %s: not the repository", files, root)
	}
}

// A name spelled out is found, as it is recorded too; a flag of that name and other words
// are not.
func TestSpelledNamesFindsNamesNotFlags(t *testing.T) {
	src := `package p
import "flag"
type s struct{ F bool ` + "`json:\"fencing\"`" + ` }
func f(fs *flag.FlagSet, v *bool) []string {
	fs.BoolVar(v, "fencing", false, "fencing on")
	fs.Float64("clock-rate", 2, "")
	return []string{"delay", "partition-halves " + "n1", "pause-holder-ish", "fencing tokens", "stats"}
}
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"delay": "fault kind", "partition-halves": "fault kind", "pause-holder": "fault kind",
		"clock-rate": "fault kind", "fencing": "checker", "stats": "checker"}
	var got []string
	for _, f := range spelledNames(t, path, names) {
		got = append(got, f.value)
	}
	if want := []string{"delay", "partition-halves ", "stats"}; !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}

type spelled struct {
	value, kind string
	line        int
}

// spelledNames are the string literals in the Go file at path that spell one of names (a
// name, or a name and a space): not import paths, struct tags or flags' names.
func spelledNames(t *testing.T, path string, names map[string]string) []spelled {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[*ast.BasicLit]bool{}
	for _, imp := range file.Imports {
		skip[imp.Path] = true
	}
	var found []spelled
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if n.Tag != nil {
				skip[n.Tag] = true
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if i, ok := flagDefiners[sel.Sel.Name]; ok && i < len(n.Args) {
					if lit, ok := n.Args[i].(*ast.BasicLit); ok {
						skip[lit] = true
					}
				}
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING || skip[n] {
				return true
			}
			value, err := strconv.Unquote(n.Value)
			if err != nil {
				return true
			}
			// A fault kind's name then one word is a fault as recorded; a checker's name is
			// only ever itself (a longer string is prose: "fencing tokens").
			name, rest, spaced := strings.Cut(value, " ")
			if kind, ok := names[name]; ok && (!spaced || kind == "fault kind" && !strings.Contains(rest, " ")) {
				found = append(found, spelled{value: value, kind: kind, line: fset.Position(n.Pos()).Line})
			}
		}
		return true
	})
	return found
}

func where(kind string) string {
	for file, k := range declared {
		if k == kind {
			return file
		}
	}
	return "?"
}

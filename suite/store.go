package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/results"
)

// Reading suite runs back: only suite.json files (and, for runs from before suite.json
// kept their commands, the runs' results.json), found relative to the directory given,
// so a store copied off a CI runner reads as it did where it was made.

// Record is a suite run read back from disk.
type Record struct {
	// ID is where the run lies below the directory it was found from, with slashes
	// (suite-kleppmann/20261130T021700Z), or its own name when that was the run itself.
	ID string
	// Dir is the run's directory: the directory it was found from joined with ID.
	Dir    string
	Result Result
}

// Read reads the suite.json of the suite run in dir and checks what the comparisons and
// links rest on: a suite name, known statuses, reports inside the run's directory.
func Read(dir string) (Result, error) {
	file := filepath.Join(dir, JSONFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return Result{}, fmt.Errorf("read suite run: %w", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("read suite run %s: %w", file, err)
	}
	if err := r.valid(); err != nil {
		return Result{}, fmt.Errorf("read suite run %s: %w", file, err)
	}
	for i := range r.Cells {
		for j := range r.Cells[i].Runs {
			run := &r.Cells[i].Runs[j]
			if run.Command == "" && run.Report != "" {
				run.Command = commandOf(filepath.Join(dir, filepath.FromSlash(path.Dir(run.Report))))
			}
		}
	}
	return r, nil
}

// valid refuses a suite.json no suite run writes.
func (r Result) valid() error {
	if r.Suite == "" {
		return errors.New("no suite name")
	}
	if !known(r.Status) {
		return fmt.Errorf("status %q is not met, failed or unknown", r.Status)
	}
	for _, c := range r.Cells {
		if c.Cell.Name == "" {
			return errors.New("a cell without a name")
		}
		if !known(c.Status) {
			return fmt.Errorf("cell %s: status %q is not met, failed or unknown", c.Cell.Name, c.Status)
		}
		for _, run := range c.Runs {
			if run.Report != "" && (!filepath.IsLocal(filepath.FromSlash(run.Report)) || strings.Contains(run.Report, `\`)) {
				return fmt.Errorf("cell %s, seed %d: report %q lies outside the suite's directory", c.Cell.Name, run.Seed, run.Report)
			}
		}
	}
	return nil
}

func known(s Status) bool { return s == Met || s == Failed || s == Unknown }

// commandOf is the command in a run directory's results.json, "" when it has none.
func commandOf(runDir string) string {
	s, err := results.ReadSummary(runDir)
	if err != nil {
		return ""
	}
	return s.Command
}

// Find reads the suite runs in dir: dir itself when it is one (it holds suite.json), else
// those of a suite's directory (<time>/suite.json) and of a store
// (suite-<name>/<time>/suite.json). Links (latest) are not followed. A suite.json that
// cannot be read is a problem, and the others are read all the same; the error is
// dir's own.
func Find(dir string) (runs []Record, problems []error, err error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("suite runs: %w", err)
	}
	if !info.IsDir() {
		return nil, nil, fmt.Errorf("suite runs: %s is not a directory", dir)
	}
	var ids []string
	if isFile(filepath.Join(dir, JSONFile)) {
		ids = []string{"."}
	} else {
		for _, sub := range subdirs(dir) {
			if isFile(filepath.Join(dir, sub, JSONFile)) {
				ids = append(ids, sub)
			} else if strings.HasPrefix(sub, "suite-") {
				for _, run := range subdirs(filepath.Join(dir, sub)) {
					ids = append(ids, sub+"/"+run)
				}
			}
		}
	}
	for _, id := range ids {
		runDir := filepath.Join(dir, filepath.FromSlash(id))
		if !isFile(filepath.Join(runDir, JSONFile)) {
			continue
		}
		r, err := Read(runDir)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if id == "." {
			id = filepath.Base(filepath.Clean(dir))
			runDir = dir
		}
		runs = append(runs, Record{ID: id, Dir: runDir, Result: r})
	}
	return runs, problems, nil
}

// subdirs lists dir's directories by name, not the links (latest) or hidden ones.
func subdirs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

func isFile(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.Mode().IsRegular()
}

// FindOne is the one suite run dir is or holds; anything else is bad input, which says
// what dir holds instead.
func FindOne(dir string) (Record, error) {
	runs, problems, err := Find(dir)
	switch {
	case err != nil:
		return Record{}, &Error{Reason: err.Error()}
	case len(problems) > 0:
		return Record{}, &Error{Reason: problems[0].Error()}
	case len(runs) == 0:
		return Record{}, errorf("%s: no suite run in it (no %s there, nor in <time>/ or suite-<name>/<time>/ below it)", dir, JSONFile)
	case len(runs) > 1:
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		return Record{}, errorf("%s holds %d suite runs (%s): give the directory of one", dir, len(runs), strings.Join(ids, ", "))
	}
	return runs[0], nil
}

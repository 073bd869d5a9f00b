package results

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// Names inside a run directory.
const (
	SpecFile    = "spec.json"
	HistoryFile = history.FileName
	SummaryFile = "results.json"
	ReportFile  = "report.html"
	JUnitFile   = "junit.xml"
	StorageFile = "storage.jsonl"
	RunLogFile  = "run.log"
	// NodesDir holds the nodes' logs, one file (or directory) per node.
	NodesDir = "nodes"
	// Latest is the symlink, in the root and in each test directory, to the newest run.
	Latest = "latest"
)

// timestampLayout names run directories: sortable, UTC, no characters a shell or a URL minds.
const timestampLayout = "20060102T150405Z"

// Run is one run's directory.
type Run struct {
	root, test, id string
}

// NewRun creates <root>/<test>/<timestamp>/ for a run started at now. When that name is
// taken (two runs in the same second) it adds -2, -3... It does not move the latest links:
// call MarkLatest for that.
func NewRun(root, test string, now time.Time) (*Run, error) {
	if err := checkTestName(test); err != nil {
		return nil, err
	}
	testDir := filepath.Join(root, test)
	if err := os.MkdirAll(testDir, 0o755); err != nil {
		return nil, fmt.Errorf("results directory %s is not writable: %w", root, err)
	}
	base := now.UTC().Format(timestampLayout)
	for n := 1; n <= 1000; n++ {
		id := base
		if n > 1 {
			id += "-" + strconv.Itoa(n)
		}
		err := os.Mkdir(filepath.Join(testDir, id), 0o755)
		if err == nil {
			return &Run{root: root, test: test, id: id}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("results directory %s is not writable: %w", root, err)
		}
	}
	return nil, fmt.Errorf("create run directory in %s: 1000 runs named %s already exist", testDir, base)
}

func checkTestName(test string) error {
	switch {
	case test == "":
		return errors.New("test name is empty")
	case test == Latest, test == ".", test == "..", strings.HasPrefix(test, "."),
		strings.ContainsAny(test, `/\`+"\x00"):
		return fmt.Errorf("test name %s cannot name a results directory: use letters, digits, '-' and '_'", quote.Short(test))
	}
	return nil
}

// Dir is the run's directory.
func (r *Run) Dir() string { return filepath.Join(r.root, r.test, r.id) }

// ID is the run's directory name (its start time), unique within its test.
func (r *Run) ID() string { return r.id }

// Path is the path of a file in the run directory, e.g. r.Path(ReportFile).
func (r *Run) Path(name string) string { return filepath.Join(r.Dir(), name) }

// MarkLatest points <root>/<test>/latest and <root>/latest at this run. Each link is
// replaced atomically (a new symlink under a temporary name, renamed over the old), so a
// reader sees the old run or the new one, never no link. Call it when the run starts, so
// that latest is the newest run, finished or not.
func (r *Run) MarkLatest() error {
	return errors.Join(
		relink(filepath.Join(r.root, r.test), r.id),
		relink(r.root, filepath.Join(r.test, r.id)),
	)
}

// relink makes dir/latest a symlink to target (relative to dir). The temporary name is
// random, so two runs marking at once (or a link a killed run left) never share it.
func relink(dir, target string) error {
	tmp := filepath.Join(dir, fmt.Sprintf(".%s-%016x", Latest, rand.Uint64()))
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("mark latest run in %s: %w", dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, Latest)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mark latest run in %s: %w", dir, err)
	}
	return nil
}

// Resolve turns what a user typed into a run directory: a run directory itself, a latest
// link, a test directory or the results root (then its latest run). The answer has its
// symlinks resolved, so it names the run itself.
func Resolve(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("expected a run directory, a test directory or a latest link: %w", err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is not a directory: expected a run directory, a test directory or a latest link", path)
	}
	if isRun(path) {
		return filepath.EvalSymlinks(path)
	}
	latest := filepath.Join(path, Latest)
	if _, err := os.Lstat(latest); err == nil {
		if !isRun(latest) {
			return "", fmt.Errorf("no %s in %s: the latest link does not lead to a run directory", HistoryFile, latest)
		}
		return filepath.EvalSymlinks(latest)
	}
	return "", fmt.Errorf("no %s in %s: not a run directory (nor a test directory with a latest link)", HistoryFile, path)
}

func isRun(dir string) bool {
	info, err := os.Stat(filepath.Join(dir, HistoryFile))
	return err == nil && info.Mode().IsRegular()
}

// WriteAtomic writes a file under a temporary name and renames it into place, so a reader
// (or a crash) never sees half a file. Its errors name path.
func WriteAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

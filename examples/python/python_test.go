// Package python_test runs the Python lock clients beside it (redis-py's Lock and kazoo's
// Lock, driven over the exec protocol) through their suites, as a user would: the
// lockbreaker binary, each suite file, real containers. They need Debian's python3-redis
// and python3-kazoo, which make deps installs.
package python_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/examples/internal/exampletest"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// needModules fails the test when python3 cannot import what the programs need (skips
// it under -short, where make deps has not run).
func needModules(t *testing.T, modules ...string) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import "+strings.Join(modules, ", ")).CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("/usr/bin/python3 cannot import %s (make deps installs python3-redis, python3-kazoo and python3-etcd3): %v\n%s",
		strings.Join(modules, ", "), err, out)
	if testing.Short() {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// The programs speak the protocol without a server to talk to: redis-py's refuses
// fencing, having no token, and an acquire that cannot reach Redis is unknown, neither a
// broken client nor a lost one.
func TestRedisPyProgramSpeaksTheProtocol(t *testing.T) {
	needModules(t, "redis")
	cfg := workloads.Config{System: "redis", Nodes: []string{"127.0.0.1:1"}, Key: "lock", TTL: 2 * time.Second,
		OpTimeout: 200 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "w0", Program: []string{"./redispy_lock.py"}}
	fenced := cfg
	fenced.Fencing = true
	exampletest.ConfigRefused(t, fenced, "redis-py's Lock hands out no fencing token")
	exampletest.AcquireIsUnknown(t, cfg, time.Second, "ConnectionError")
}

// A cell of each suite, one run each, met: redis-py's Lock broken by a paused holder;
// kazoo's and python-etcd3's broken by a paused holder and their data kept safe by their
// tokens (the lock node's sequence number, the lock key's create revision). With
// LOCKBREAKER_LONG=1 every cell of the three suites (safe without faults on single Redis,
// Sentinel, ZooKeeper and etcd; python-etcd3 unfenced and cut off).
func TestSuites(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real Redis, Sentinel and ZooKeeper")
	}
	needModules(t, "redis", "kazoo", "etcd3")
	bin := exampletest.Lockbreaker(t)
	inTest := []string{"redispy-paused-holder", "kazoo-paused-holder-fenced", "etcd3-py-paused-holder-fenced"}
	for _, file := range []string{"redispy.yaml", "kazoo.yaml", "etcd3.yaml"} {
		t.Run(file, func(t *testing.T) {
			exampletest.MeetCells(t, bin, file, func(cell string) bool { return exampletest.Long() || slices.Contains(inTest, cell) })
		})
	}
}

// python-etcd3's program with no etcd to talk to: an acquire is unknown (the connection
// failed), neither busy nor a broken client.
func TestEtcd3ProgramSpeaksTheProtocol(t *testing.T) {
	needModules(t, "etcd3")
	cfg := workloads.Config{System: "etcd", Nodes: []string{"127.0.0.1:1"}, Key: "lock", TTL: 2 * time.Second,
		OpTimeout: 200 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "w0", Program: []string{"./etcd3_lock.py"}, Fencing: true}
	exampletest.AcquireIsUnknown(t, cfg, 5*time.Second)
}

// The complete example in docs/protocol.md, as it is written there, runs under
// lockbreaker run without faults and under the document's suite file, whose paused holder
// breaks it: the document alone is enough to write a lock client.
func TestProtocolDocumentExample(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a real Redis")
	}
	needModules(t, "redis")
	dir, _ := docExample(t, "protocol.md", "    name: mylock\n")
	bin := exampletest.Lockbreaker(t)
	run := exec.Command(bin, "run", "--system", "redis", "--client", "exec", "--client-cmd", "/usr/bin/python3 mylock.py",
		"--nemesis", "none", "--time-limit", "4s", "--results", filepath.Join(dir, "store"))
	run.Dir = dir
	out, err := run.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Errorf("run without faults: %v, want exit 0 (valid)", err)
	}
	// Its paused holder finds the lock broken, on the first seed whose danger came: beside
	// a busy make test a 4 s run made three grants and no takeover (unknown), once.
	exampletest.MeetCells(t, bin, filepath.Join(dir, "mylock.yaml"), func(string) bool { return true })
}

// docExample writes a page of docs/'s Python lock program and its suite file named mylock
// (the block that starts with suiteStart) into a directory of the test's, as mylock.py
// and mylock.yaml, the suite's programs run by Debian's python3, which has redis-py,
// whatever python3 comes first on PATH. It returns the directory and the suite's text.
func docExample(t *testing.T, page, suiteStart string) (dir, suiteFile string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	program, ok := block(string(doc), "```python\n")
	if !ok {
		t.Fatalf("docs/%s has no python block", page)
	}
	suiteFile, ok = block(string(doc), suiteStart)
	if !ok {
		t.Fatalf("docs/%s has no suite file named mylock", page)
	}
	suiteFile = "name: mylock\n" + strings.ReplaceAll(suiteFile, "[python3,", "[/usr/bin/python3,")
	dir = t.TempDir()
	for file, text := range map[string]string{"mylock.py": program, "mylock.yaml": suiteFile} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, suiteFile
}

// block is the indented or fenced block of text that starts with start, without it for a
// fence, unindented for an indented block.
func block(doc, start string) (string, bool) {
	_, rest, ok := strings.Cut(doc, start)
	if !ok {
		return "", false
	}
	if strings.HasPrefix(start, "```") {
		text, _, ok := strings.Cut(rest, "```")
		return text, ok
	}
	var lines []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "    ") {
			break
		}
		lines = append(lines, strings.TrimPrefix(line, "    "))
	}
	return strings.Join(lines, "\n") + "\n", true
}

// The tutorial's lock and suite (docs/tutorial.md), as they are written there: the suite
// is met, its fenced cell's data kept safe under a paused holder; with the cell's fencing
// taken out, as the tutorial says to try, the same suite fails (exit 1): the CI job it
// ends with fails on the violation and passes on the fenced lock.
func TestTutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a real Redis")
	}
	needModules(t, "redis")
	dir, suiteFile := docExample(t, "tutorial.md", "```yaml\nname: mylock\n")
	if !strings.Contains(suiteFile, "fencing: true}") {
		t.Fatal("docs/tutorial.md's suite file has no fenced cell")
	}
	fenced, unfenced := filepath.Join(dir, "mylock.yaml"), filepath.Join(dir, "mylock-unfenced.yaml")
	if err := os.WriteFile(unfenced, []byte(strings.ReplaceAll(suiteFile, ", fencing: true}", "}")), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := exampletest.Lockbreaker(t)
	fencedCell := func(c string) bool { return c == "mylock-paused-holder-fenced" }
	exampletest.MeetCells(t, bin, fenced, fencedCell)
	exampletest.FailCells(t, bin, unfenced, fencedCell)
}

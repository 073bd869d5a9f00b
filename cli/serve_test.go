package cli

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/cli/command"
)

// storedRun is a run for a test store: its history and the results.json the run began with.
type storedRun struct{ path, history, summary string }

// storeOf makes a run store at root of saved runs, each checked by lockbreaker check,
// with its latest link and an index.
func storeOf(t *testing.T, root string, runs ...storedRun) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, "index.html"), nil, 0o644); err != nil { // check rebuilds it
		t.Fatal(err)
	}
	for _, r := range runs {
		dir := filepath.Join(root, filepath.FromSlash(r.path))
		history, err := os.ReadFile(r.history)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"history.jsonl": history, "results.json": []byte(r.summary)} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, stdout, stderr := lockbreaker(t, nil, "check", dir); code > command.ExitUnknown {
			t.Fatalf("check %s: exit %d\n%s%s", r.path, code, stdout, stderr)
		}
	}
	os.Remove(filepath.Join(root, "latest"))
	if err := os.Symlink(runs[0].path, filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
}

// pausedAndSafe are two runs: a real local run whose paused holders broke the lock (and
// the data), and a safe one on another system.
func pausedAndSafe(t *testing.T, root string) {
	storeOf(t, root,
		storedRun{"local-local-pause-holder-nofence/20261130T130645Z", "testdata/local-paused-holder.jsonl",
			`{"test": "local-local-pause-holder-nofence", "run_id": "20261130T130645Z", "started": "2026-11-30T13:06:45Z", "finished": "2026-11-30T13:06:49Z",
			"spec": {"test": "local-local-pause-holder-nofence", "system": "local", "client": "local", "nemesis": ["pause-holder"], "fencing": false,
			"clients": 4, "ttl": "500ms", "time_limit": "4s", "seed": 7, "work": "100ms", "interval": "1s", "clock_rate": 2, "key": "lock"}}`},
		storedRun{"redis-redis-none-fenced/20261130T120000Z", "testdata/safe.jsonl",
			`{"test": "redis-redis-none-fenced", "run_id": "20261130T120000Z", "started": "2026-11-30T12:00:00Z", "finished": "2026-11-30T12:00:30Z",
			"spec": {"system": "redis", "client": "redis", "nemesis": ["none"], "fencing": true}}`})
}

// serveStore runs lockbreaker serve on a free loopback port and returns its address. When
// the test ends the server is interrupted, and must stop cleanly.
func serveStore(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--results", root)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve did not stop cleanly on SIGINT: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve said nothing: %v", err)
	}
	addr := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(line)
	if addr == "" {
		t.Fatalf("serve did not say where: %q", line)
	}
	go io.Copy(io.Discard, stdout)
	return addr
}

// The store is served read-only, and nothing outside it is, whatever the path or link.
func TestServeIsReadOnlyAndStaysInTheStore(t *testing.T) {
	root := t.TempDir()
	pausedAndSafe(t, root)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := "local-local-pause-holder-nofence/20261130T130645Z"
	for link, target := range map[string]string{"escape": filepath.Dir(outside), run + "/secret.txt": outside} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	before := listing(t, root)
	addr := serveStore(t, root)
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		method, path string
		code         int
		contains     string
	}{
		{"GET", "/", 200, "local-local-pause-holder-nofence"},
		{"GET", "/index.html", 200, "redis-redis-none-fenced"},
		{"GET", "/" + run + "/report.html", 200, "lock safety: VIOLATED"},
		{"GET", "/latest/history.jsonl", 200, `"f":"acquire"`},
		{"HEAD", "/" + run + "/results.json", 200, ""},
		{"GET", "/" + run + "/secret.txt", 403, ""},
		{"GET", "/escape/secret.txt", 403, ""},
		{"GET", "/../" + filepath.Base(filepath.Dir(outside)) + "/secret.txt", 404, ""},
		{"GET", "/nothing-here", 404, ""},
		{"POST", "/", 405, "read-only"},
		{"PUT", "/" + run + "/report.html", 405, "read-only"},
		{"DELETE", "/" + run + "/report.html", 405, "read-only"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, addr, strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tt.path // as written: no cleaning of ".."
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.contains) || strings.Contains(string(body), "secret") {
				t.Errorf("status %d, want %d with %q; body:\n%.300s", resp.StatusCode, tt.code, tt.contains, body)
			}
		})
	}
	if after := listing(t, root); after != before {
		t.Errorf("serving changed the store:\n%s\nthen:\n%s", before, after)
	}
}

// listing is every path under root with its size and time, to see that nothing changed.
func listing(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %s\n", path, info.Size(), info.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

package execlock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Check passes a program that reads its first line, whatever it does next, and refuses,
// in one line quoting its last words on stderr, one that cannot start, ends before
// reading or never reads; it never waits past its bound, and leaves no process behind.
func TestCheck(t *testing.T) {
	script := filepath.Join(t.TempDir(), "mylock.py")
	if err := os.WriteFile(script, []byte("#!/nonexistent/python3\nprint('hi')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		program []string
		says    string // "" passes
	}{
		{"speaks the protocol", config("well", false).Program, ""},
		{"reads, then hangs", config("never-ready", false).Program, ""},
		{"reads, then refuses", config("refuses", false).Program, ""},
		{"exits before reading", config("exits-at-once", false).Program,
			`ended (exit status 3) before it read its configuration: Traceback: ImportError: no module named redis`},
		{"a launcher that exits, its child left", config("spawns-and-exits-at-once", false).Program,
			`before it read its configuration: mylock: no java on PATH: install openjdk-17-jdk-headless`},
		{"never reads", config("never-reads", false).Program,
			`did not read its configuration within 2s (a lock client reads its first line from stdin as it starts; docs/protocol.md): compiling...`},
		{"its interpreter is missing", []string{script},
			`cannot be started: fork/exec ` + script + `: no such file or directory (its interpreter "/nonexistent/python3", on its #! line, is missing)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config("", false)
			cfg.Program = c.program
			// The others have a second to start in on a busy machine. A program that never
			// reads waits out the bound, and must have written its last words before it ends:
			// a test binary (60 MB) started beside make test's containers took over 200 ms.
			bound := time.Second
			if strings.Contains(c.says, "did not read") {
				bound = 2 * time.Second
			}
			started := time.Now()
			err := Check(context.Background(), cfg, bound)
			took := time.Since(started)
			switch {
			case c.says == "" && err != nil:
				t.Errorf("check: %v, want a pass", err)
			case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
				t.Errorf("check: %v, want an error saying %q", err, c.says)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("check: %q is more than one line", err)
			}
			if took > bound+2*time.Second {
				t.Errorf("check took %s, past its bound of %s", took, bound)
			}
			t.Logf("%v (%s)", err, took.Round(time.Millisecond))
		})
	}
}

// A check's program is killed with its whole group once it has read: a launcher's child
// (a JVM it started without exec) does not outlive it.
func TestCheckKillsTheProgramsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := config("", false)
	cfg.Program = []string{"sh", "-c", `sleep 60 & echo $! >` + pidFile + `; read line; wait`}
	if err := Check(context.Background(), cfg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	proc := "/proc/" + strings.TrimSpace(string(b))
	deadline := time.Now().Add(2 * time.Second)
	for {
		stat, err := os.ReadFile(proc + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program's child %s is still running after the check", proc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package execlock

import (
	"context"
	"fmt"
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
			`did not read its configuration within %s (a lock client reads its first line from stdin as it starts; docs/protocol.md): compiling...`},
		{"its interpreter is missing", []string{script},
			`cannot be started: fork/exec ` + script + `: no such file or directory (its interpreter "/nonexistent/python3", on its #! line, is missing)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config("", false)
			cfg.Program = c.program
			// A program has a second to start in, and a program that never reads must
			// have written its last words within it. A test binary (60 MB) beside make
			// test's containers took longer: a program too slow to start is tried again,
			// with twice the bound, three times at most.
			bound := time.Second
			var err error
			var took time.Duration
			for try := 1; ; try++ {
				started := time.Now()
				err = Check(context.Background(), cfg, bound)
				took = time.Since(started)
				if try == 3 || !tooSlowToStart(err, c.says) {
					break
				}
				t.Logf("try %d: too slow to start within %s: %v", try, bound, err)
				bound *= 2
			}
			says := c.says
			if strings.Contains(says, "%s") {
				says = fmt.Sprintf(says, bound)
			}
			switch {
			case says == "" && err != nil:
				t.Errorf("check: %v, want a pass", err)
			case says != "" && (err == nil || !strings.Contains(err.Error(), says)):
				t.Errorf("check: %v, want an error saying %q", err, says)
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

// tooSlowToStart says whether err is a program's not having started within the bound
// rather than the outcome a case wants (says): it did not read its configuration in time,
// or, where not reading is the outcome, had not yet written its last words.
func tooSlowToStart(err error, says string) bool {
	if err == nil || !strings.Contains(err.Error(), "did not read its configuration within") {
		return false
	}
	return !strings.Contains(says, "did not read") || strings.Contains(err.Error(), "wrote nothing on stderr")
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

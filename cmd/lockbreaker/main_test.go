package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var binary string

// TestMain builds the real binary once: these tests run it as a user would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockbreaker-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "lockbreaker")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("build lockbreaker: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func lockbreaker(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

func TestBadInputGetsOneLineAndItsExitCode(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notADir, []byte("x"), 0o644)
	corrupt := t.TempDir()
	os.WriteFile(filepath.Join(corrupt, "history.jsonl"),
		[]byte(`{"index":0,"type":"invoke","process":0,"f":"acquire","key":"lock","time":5}`+"\n{not json\n"), 0o644)
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no command", nil, nil, 254, ""},
		{"unknown command", nil, []string{"explode"}, 254, `unknown command "explode"`},
		{"unknown flag", nil, []string{"run", "--colour", "red"}, 254, "flag provided but not defined"},
		{"unknown system", nil, []string{"run", "--system", "etcd"}, 254, `unknown system "etcd"`},
		{"unknown nemesis", nil, []string{"run", "--nemesis", "meteor"}, 254, `unknown nemesis "meteor"`},
		{"zero ttl", nil, []string{"run", "--ttl", "0s"}, 254, "ttl must be positive"},
		{"bad duration", nil, []string{"run", "--ttl", "soon"}, 254, "invalid value"},
		{"bad fencing", nil, []string{"run", "--fencing", "maybe"}, 254, "--fencing must be on or off"},
		{"unwritable results", nil, []string{"run", "--results", notADir}, 254, "is not writable"},
		{"corrupt history", nil, []string{"check", corrupt}, 254, "history.jsonl:2: not a JSON event"},
		{"not a run", nil, []string{"check", t.TempDir()}, 254, "not a run directory"},
		{"docker unreachable", []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"},
			[]string{"run", "--results", t.TempDir()}, 255, "docker is not reachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := lockbreaker(t, c.env, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if c.want == "" {
				return
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("stderr %q: want one line containing %q", stderr, c.want)
			}
		})
	}
}

// A saved history is checked again with no Docker at all, with the verdict as exit code.
func TestCheckRerunsCheckersOnASavedRun(t *testing.T) {
	for _, c := range []struct {
		history string
		code    int
	}{{"testdata/safe.jsonl", 0}, {"testdata/stale-write.jsonl", 1}} {
		t.Run(c.history, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(c.history)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "history.jsonl"), data, 0o644)
			code, stdout, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "check", dir)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
			}
			for _, f := range []string{"results.json", "report.html", "junit.xml"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("check did not write %s: %v", f, err)
				}
			}
			if !strings.Contains(stdout, "data-safety") {
				t.Errorf("verdicts not printed:\n%s", stdout)
			}
		})
	}
}

func labelled(t *testing.T, what string) []string {
	t.Helper()
	args := []string{what, "ls", "-q", "--filter", "label=org.lockbreaker.project"}
	if what == "container" {
		args = append(args, "-a")
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// A run killed with SIGKILL cannot clean up after itself: its workers die with it
// (Pdeathsig) and `lockbreaker clean` removes its containers and network.
func TestCleanRemovesWhatAKilledRunLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	if len(labelled(t, "container")) > 0 {
		t.Fatal("labelled containers exist before the test; run lockbreaker clean")
	}
	cmd := exec.Command(binary, "run", "--time-limit", "2m", "--results", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !workersRunning(t) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run never started its workers")
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	if len(labelled(t, "container")) == 0 || len(labelled(t, "network")) == 0 {
		t.Fatal("the killed run left nothing behind: the test proves nothing")
	}
	for i := 0; workersRunning(t); i++ {
		if i > 50 {
			t.Fatal("workers outlived the killed harness")
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, stdout, stderr := lockbreaker(t, nil, "clean")
	if code != 0 {
		t.Fatalf("clean: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "removed") {
		t.Errorf("clean said %q", stdout)
	}
	if c, n := labelled(t, "container"), labelled(t, "network"); len(c)+len(n) > 0 {
		t.Errorf("after clean: containers %v networks %v", c, n)
	}
}

// Ctrl-C or SIGTERM stops a run early: faults are healed, workers stopped, containers
// removed, and what was recorded is still checked and reported.
func TestInterruptedRunCleansUpAndKeepsItsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	results := t.TempDir()
	cmd := exec.Command(binary, "run", "--time-limit", "2m", "--results", results)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); !workersRunning(t); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the run never started its workers")
		}
	}
	time.Sleep(3 * time.Second) // let it record something
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %v, stderr %q: want 255 and 'interrupted'", err, stderr.String())
	}
	if c, n := labelled(t, "container"), labelled(t, "network"); len(c)+len(n) > 0 {
		t.Errorf("after SIGTERM: containers %v networks %v left", c, n)
	}
	if workersRunning(t) {
		t.Error("workers outlived the interrupted run")
	}
	data, err := os.ReadFile(filepath.Join(results, "latest", "results.json"))
	if err != nil || !strings.Contains(string(data), "interrupted") || !strings.Contains(string(data), "mutual-exclusion") {
		t.Errorf("results.json of the interrupted run: %v %.200s", err, data)
	}
}

func workersRunning(t *testing.T) bool {
	out, _ := exec.Command("pgrep", "-f", binary+" worker").Output()
	return len(strings.TrimSpace(string(out))) > 0
}

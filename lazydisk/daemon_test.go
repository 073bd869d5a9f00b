package lazydisk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMainBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		says string
	}{
		{nil, "want a command"},
		{[]string{"format"}, "unknown command"},
		{[]string{"drop", "--sock", "s"}, "flag provided but not defined: -sock"},
		{[]string{"counters"}, "--socket is missing"},
		{[]string{"stop", "--socket", "s", "now"}, `unexpected argument "now"`},
		{[]string{"slow", "--socket", "s", "--delay", "soon"}, `--delay "soon" is not a duration`},
		{[]string{"slow", "--socket", "s"}, `--delay "" is not a duration`},
		{[]string{"slow", "--socket", "s", "--delay", "-1s"}, `--delay "-1s" is not a duration`},
		{[]string{"serve", "--socket", "s", "--mount", dir}, "--backing is missing"},
		{[]string{"serve", "--socket", "s", "--backing", filepath.Join(dir, "none"), "--mount", dir}, "--backing " + filepath.Join(dir, "none") + " is not a directory"},
		{[]string{"serve", "--socket", "s", "--backing", dir, "--mount", filepath.Join(dir, "none")}, "is not a directory"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(c.args, &stdout, &stderr)
		if code != 254 || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want 254 and one line saying %q", c.args, code, stdout.String(), stderr.String(), c.says)
		}
	}
}

func TestMainCannotReachTheDaemon(t *testing.T) {
	var stdout, stderr bytes.Buffer
	socket := filepath.Join(t.TempDir(), "none.sock")
	code := Main([]string{"counters", "--socket", socket}, &stdout, &stderr)
	if code != 255 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "reach the lazy disk at "+socket) {
		t.Errorf("Main(stats) = %d, stderr %q; want 255 and one line", code, stderr.String())
	}
}

// daemonDirs makes a backing directory, a mount point, and where the socket and the
// pidfile go, or skips the test where this machine cannot mount.
func daemonDirs(t *testing.T) (backing, mnt, socket, pidfile string) {
	t.Helper()
	dir, backing, mnt := diskDirs(t)
	return backing, mnt, filepath.Join(dir, "disk.sock"), filepath.Join(dir, "disk.pid")
}

// waitServing waits until the daemon on socket answers.
func waitServing(t *testing.T, socket string) {
	t.Helper()
	waitFor(t, "the daemon to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := Ask(ctx, socket, Request{Op: "counters"})
		return err == nil
	})
}

// run runs a client command through Main and decodes what it prints into out.
func run(t *testing.T, out any, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("Main(%q) = %d: %s", args, code, stderr.String())
	}
	if out == nil {
		if stdout.Len() != 0 {
			t.Errorf("Main(%q) printed %q, want nothing", args, stdout.String())
		}
		return
	}
	if strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("Main(%q) printed %q, want one line", args, stdout.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("Main(%q) printed %q: %v", args, stdout.String(), err)
	}
}

// TestDaemon serves a lazy disk with Main in this process and drives it with the
// client commands: drop, slow and its heal, stats, stop.
func TestDaemon(t *testing.T) {
	backing, mnt, socket, pidfile := daemonDirs(t)
	served := make(chan int, 1)
	var serveErr bytes.Buffer
	go func() {
		served <- Main([]string{"serve", "--backing", backing, "--mount", mnt, "--socket", socket, "--pidfile", pidfile}, os.Stdout, &serveErr)
	}()
	waitServing(t, socket)
	if pid, err := os.ReadFile(pidfile); err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pidfile holds %q, %v; want this process's pid", pid, err)
	}

	p := filepath.Join(mnt, "f")
	writeFile(t, p, "pending", false)
	var lost Lost
	run(t, &lost, "drop", "--socket", socket)
	if !slices.Equal(lost.Files, []LostFile{{Path: "f", Bytes: 7}}) || !slices.Equal(lost.Entries, []string{"created f"}) {
		t.Errorf("drop printed %+v, want f's 7 bytes and its creation", lost)
	}
	wantContent(t, p, "<missing>")

	writeFile(t, p, "synced", true)
	run(t, nil, "slow", "--socket", socket, "--delay", "1h")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("!"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	var stats Stats
	waitFor(t, "the sync to wait", func() bool {
		run(t, &stats, "counters", "--socket", socket)
		return stats.SyncsWaiting == 1
	})
	if stats.DirtyBytes != 1 || stats.BytesWritten != 14 || stats.SyncDelay != time.Hour {
		t.Errorf("stats %+v, want 1 dirty byte of 14 written and syncs an hour long", stats)
	}
	run(t, nil, "slow", "--socket", socket, "--delay", "0")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if run(t, &stats, "counters", "--socket", socket); stats.SyncDelay != 0 || stats.SyncsWaiting != 0 {
		t.Errorf("after slow --delay 0: %+v, want no delay and no sync waiting", stats)
	}
	wantContent(t, filepath.Join(backing, "f"), "synced!")

	run(t, nil, "stop", "--socket", socket)
	if code := <-served; code != 0 {
		t.Fatalf("serve exited %d: %s", code, serveErr.String())
	}
	for _, gone := range []string{socket, pidfile} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is left after stop (%v)", gone, err)
		}
	}
	if m, err := isMount(mnt); err != nil || m {
		t.Errorf("%s is still a mount after stop (%v)", mnt, err)
	}
}

func TestServeFailsOnAMount(t *testing.T) {
	_, _, mnt := mounted(t)
	backing := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"serve", "--backing", backing, "--mount", mnt, "--socket", filepath.Join(backing, "s")}, &stdout, &stderr)
	if code != 255 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "is a mount already") {
		t.Errorf("serve on a mount = %d, stderr %q; want 255 and one line", code, stderr.String())
	}
}

// TestKilledDaemonIsUnmounted: a daemon killed by SIGKILL leaves a dead mount, which
// Mounts lists and Unmount takes away, leaving the plain directory.
func TestKilledDaemonIsUnmounted(t *testing.T) {
	backing, mnt, socket, _ := daemonDirs(t)
	cmd := exec.Command(os.Args[0], "serve", "--backing", backing, "--mount", mnt, "--socket", socket)
	cmd.Env = append(os.Environ(), "LAZYDISK_TEST_HELPER=main")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(mnt) })
	waitServing(t, socket)
	mounts, err := Mounts()
	if err != nil || !slices.Contains(mounts, mnt) {
		t.Fatalf("Mounts() = %q, %v; want %s in it", mounts, err, mnt)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.ReadDir(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("reading the dead mount: %v, want ENOTCONN", err)
	}

	var stdout, stderr bytes.Buffer
	code := Main([]string{"serve", "--backing", backing, "--mount", mnt, "--socket", socket}, &stdout, &stderr)
	if code != 255 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "is a mount already") {
		t.Errorf("serve on the dead mount = %d, stderr %q; want 255 and one line", code, stderr.String())
	}

	if err := Unmount(mnt); err != nil {
		t.Fatal(err)
	}
	if mounts, err := Mounts(); err != nil || slices.Contains(mounts, mnt) {
		t.Errorf("Mounts() = %q, %v after Unmount; want %s gone", mounts, err, mnt)
	}
	if names := readDir(t, mnt); len(names) != 0 {
		t.Errorf("the mount point holds %q, want a plain empty directory", names)
	}
	if err := Unmount(mnt); err != nil {
		t.Errorf("Unmount of a plain directory: %v, want nothing done", err)
	}
	if err := Unmount("/proc"); err == nil || !strings.Contains(err.Error(), "not a lazy disk") {
		t.Errorf("Unmount(/proc) = %v, want a refusal", err)
	}
}

package lazydisk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ServeEnv, set to 1, makes a program that calls MaybeServe first (the lockbreaker binary,
// a test binary) run a disk command from its arguments instead of itself.
const ServeEnv = "LOCKBREAKER_DISK"

// MaybeServe runs Main on the process's arguments and exits when ServeEnv is set: how a
// disk's daemon and its commands run as the program that asked for them, on this host or
// on a machine it was copied to.
func MaybeServe() {
	if os.Getenv(ServeEnv) != "1" {
		return
	}
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// serveDetached starts `serve args` (without --detach) again as this program, in a session
// of its own with its output appended to log, and returns once it answers on socket, or
// with the end of its log when it exits first.
func serveDetached(args []string, socket, log string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(self, append([]string{"serve"}, slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return a == "--detach" || a == "-detach"
	})...)...)
	cmd.Env = append(os.Environ(), ServeEnv+"=1")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := Ask(ctx, socket, Request{Op: "counters"}); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the daemon exited (%v): %s", err, lastLine(log))
		case <-ctx.Done():
			return fmt.Errorf("the daemon did not answer on %s within %s: %s", socket, askTimeout, lastLine(log))
		case <-tick.C:
		}
	}
}

// lastLine is the last line of file, for an error.
func lastLine(file string) string {
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// Clean ends what a disk's daemon left, live or killed: a daemon that answers is stopped
// (its disk unmounted cleanly); one that does not is killed, if the pidfile names a
// process serving this socket; then the mount, if it is still one of ours, is unmounted,
// and the socket and pidfile are removed.
func Clean(socket, pidfile, mount string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Ask(ctx, socket, Request{Op: "stop"}); err != nil {
		if pid := servingPID(pidfile, socket); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	err := Unmount(mount)
	for _, f := range []string{socket, pidfile} {
		if rmErr := os.Remove(f); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	return err
}

// servingPID is the pid pidfile names when that process serves socket (its arguments name
// it): a pid a dead daemon left may be another process's now.
func servingPID(pidfile, socket string) int {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	args, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !slices.ContainsFunc(bytes.Split(args, []byte{0}), func(a []byte) bool { return string(a) == socket }) {
		return 0
	}
	return pid
}

// Check says why this host cannot serve a lazy disk (no /dev/fuse, no right to mount);
// nil when it can: it mounts one on a directory of its own and unmounts it.
func Check() error {
	dir, err := os.MkdirTemp("", "lazydisk-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	backing, mount := filepath.Join(dir, "backing"), filepath.Join(dir, "mount")
	if err := errors.Join(os.Mkdir(backing, 0o700), os.Mkdir(mount, 0o700)); err != nil {
		return err
	}
	d, err := Mount(Options{Backing: backing, Mount: mount})
	if err != nil {
		return err
	}
	if err := d.Unmount(); err != nil {
		_ = unix.Unmount(mount, unix.MNT_DETACH)
		return err
	}
	return nil
}

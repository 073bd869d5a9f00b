package execlock

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// Check starts cfg.Program once, before a run has started anything, and says whether it
// can run here: a program whose runtime, interpreter or library is missing ends before it
// reads its first line, and its last line on stderr says what is missing (Python's
// "ModuleNotFoundError: No module named 'kazoo'", a launcher's "no java on PATH").
//
// The program is sent its configuration as the run will send it but with no nodes (they
// do not exist yet), and is killed as soon as it has read from its stdin: the check never
// lets it connect anywhere or answer. It passes once the program has read; it fails when
// the program cannot be started, ends before reading, or reads nothing within limit (the
// protocol's bound on answering the configuration). The program runs in a process group
// of its own, killed whole, so a launcher's compiler or runtime goes with it.
func Check(ctx context.Context, cfg workloads.Config, limit time.Duration) error {
	if len(cfg.Program) == 0 {
		return errors.New("no program to run")
	}
	name := quote.Short(strings.Join(cfg.Program, " "))
	cfg.Nodes, cfg.Sentinels = nil, nil
	first, err := lineOf(configOf(cfg))
	if err != nil {
		return err
	}
	stdin, toProgram, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("program %s: %w", name, err)
	}
	defer toProgram.Close()
	// The line is in the pipe before the program starts (it fits in the pipe's buffer), so
	// what is left of it there says whether the program has read, even once it has ended.
	if _, err := toProgram.Write(first); err != nil {
		stdin.Close()
		return fmt.Errorf("program %s: write its configuration: %w", name, err)
	}
	var stderr lastBytes
	cmd := exec.Command(cfg.Program[0], cfg.Program[1:]...)
	cmd.Stdin, cmd.Stderr = stdin, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	stdin.Close()
	if err != nil {
		return fmt.Errorf("program %s cannot be started: %v%s", name, err, interpreterMissing(cfg.Program[0], err))
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	// stop kills what is left of the program's group and waits for its stderr to be in.
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	read := func() bool {
		n, err := unread(toProgram)
		return err != nil || n < len(first)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	for {
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-exited:
			if read() {
				return nil // it read, then ended: what it did with the line is the run's to see
			}
			return fmt.Errorf("program %s ended (%s) before it read its configuration%s",
				name, cmd.ProcessState, lastLine(stderr.Bytes()))
		case <-deadline:
			ok := read()
			stop()
			if ok {
				return nil
			}
			return fmt.Errorf("program %s did not read its configuration within %s (a lock client reads its first line from stdin as it starts; docs/protocol.md)%s",
				name, limit, lastLine(stderr.Bytes()))
		case <-tick.C:
			if read() {
				stop()
				return nil
			}
		}
	}
}

// lineOf is v as one line of the protocol.
func lineOf(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encode(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// unread is how many bytes wait in the pipe whose write end is f.
func unread(f *os.File) (int, error) {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// lastBytes keeps about the last MaxLine bytes written to it.
type lastBytes struct{ b []byte }

func (l *lastBytes) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 2*MaxLine {
		l.b = append(l.b[:0], l.b[len(l.b)-MaxLine:]...)
	}
	return len(p), nil
}

func (l *lastBytes) Bytes() []byte { return l.b }

// lastLine is ": " and the last non-empty line of a program's stderr, cut short, or "".
func lastLine(stderr []byte) string {
	var last string
	in := bufio.NewScanner(bytes.NewReader(stderr))
	in.Buffer(make([]byte, 0, 4096), MaxLine)
	for in.Scan() {
		if s := strings.TrimSpace(in.Text()); s != "" {
			last = s
		}
	}
	if last == "" {
		return " and wrote nothing on stderr"
	}
	t := &tail{}
	t.add(last)
	return ": " + t.String()
}

// interpreterMissing says which interpreter is missing when a script that exists could
// not be executed for want of its #! line's program, the kernel's ENOENT otherwise says
// only "no such file or directory".
func interpreterMissing(program string, err error) string {
	if !errors.Is(err, syscall.ENOENT) {
		return ""
	}
	path, lookErr := exec.LookPath(program)
	if lookErr != nil {
		return ""
	}
	f, openErr := os.Open(path)
	if openErr != nil {
		return ""
	}
	defer f.Close()
	first, _ := bufio.NewReader(f).ReadString('\n')
	interpreter, ok := strings.CutPrefix(first, "#!")
	if fields := strings.Fields(interpreter); ok && len(fields) > 0 {
		return fmt.Sprintf(" (its interpreter %s, on its #! line, is missing)", quote.Short(fields[0]))
	}
	return ""
}

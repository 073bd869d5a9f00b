package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// pool is the set of running worker processes and the pumps that copy their events into
// the history. It implements nemesis.Workers.
type pool struct {
	rec     *history.Recorder
	workers []*worker
	wg      sync.WaitGroup
}

type worker struct {
	process int
	cmd     *exec.Cmd
	stdin   io.WriteCloser

	mu      sync.Mutex
	pending *history.Event // the invocation that has not completed yet
}

// startPool starts one worker per config. Workers live in their own process group, so a
// Ctrl-C at the terminal reaches only the harness, which then stops them in order. If the
// harness is killed, the kernel kills them (Pdeathsig fires when the thread that started
// them ends; the Go runtime ends only threads locked by a goroutine, which these are not),
// and a worker whose stdin closes stops by itself.
func startPool(command []string, configs []WorkerConfig, rec *history.Recorder, logs io.Writer) (*pool, error) {
	p := &pool{rec: rec}
	for _, cfg := range configs {
		w, err := p.start(command, cfg, logs)
		if err != nil {
			p.stop(time.Second)
			return nil, fmt.Errorf("start worker %d: %w", cfg.Process, err)
		}
		p.workers = append(p.workers, w)
	}
	return p, nil
}

func (p *pool) start(command []string, cfg WorkerConfig, logs io.Writer) (*worker, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = prefixWriter{w: logs, prefix: fmt.Sprintf("worker-%d: ", cfg.Process)}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, _ := json.Marshal(cfg)
	w := &worker{process: cfg.Process, cmd: cmd, stdin: stdin}
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	p.wg.Add(1)
	go p.pump(w, stdout)
	return w, nil
}

// pump records a worker's events until its stdout closes, then reaps it. An operation
// still open when the worker is gone is recorded as indeterminate: it may have happened.
func (p *pool) pump(w *worker, stdout io.Reader) {
	defer p.wg.Done()
	in := bufio.NewScanner(stdout)
	for in.Scan() {
		var e history.Event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Fprintf(w.cmd.Stderr, "unreadable event %q: %v\n", in.Text(), err)
			continue
		}
		e.Process = w.process
		w.mu.Lock()
		if e.Type == history.Invoke {
			w.pending = &e
		} else {
			w.pending = nil
		}
		w.mu.Unlock()
		p.rec.Record(e)
	}
	err := w.cmd.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending != nil {
		lost := *w.pending
		lost.Type, lost.Time = history.Info, history.Now()
		lost.Error = fmt.Sprintf("worker exited during the operation (%v)", exitStatus(err))
		p.rec.Record(lost)
		w.pending = nil
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// Count and Signal make the pool a nemesis.Workers.
func (p *pool) Count() int { return len(p.workers) }

func (p *pool) Signal(process int, sig syscall.Signal) error {
	if process < 0 || process >= len(p.workers) {
		return fmt.Errorf("no worker %d", process)
	}
	w := p.workers[process]
	if err := w.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal worker %d: %w", process, err)
	}
	return nil
}

// stop asks every worker to finish, waits up to grace for them, kills the rest, and waits
// until every pump has recorded its last event. Stopped (paused) workers are thawed first.
func (p *pool) stop(grace time.Duration) {
	for _, w := range p.workers {
		w.cmd.Process.Signal(syscall.SIGCONT)
		io.WriteString(w.stdin, StopLine+"\n")
		w.stdin.Close()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	for _, w := range p.workers {
		w.cmd.Process.Kill()
	}
	<-done
}

// prefixWriter prefixes every line written to it (a worker's log) with the worker's name.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (pw prefixWriter) Write(b []byte) (int, error) {
	text := strings.TrimSuffix(string(b), "\n")
	prefixed := pw.prefix + strings.ReplaceAll(text, "\n", "\n"+pw.prefix) + "\n"
	if _, err := io.WriteString(pw.w, prefixed); err != nil {
		return 0, err
	}
	return len(b), nil
}

// lockedWriter lets the harness's log and every worker's share run.log, one write at a
// time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(b []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(b)
}

package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// pool is the set of worker processes and the pumps that copy their events into the
// history. It implements nemesis.Workers.
//
// A worker that dies before the pool stops (killed by a nemesis, or crashed) is replaced,
// as Jepsen replaces a crashed client: its open operation is recorded as indeterminate,
// and a new process takes its slot under a new process number (the old one plus the
// number of slots) and a new owner name, so the history, the models and the lock service
// see a new client, never a revived one.
type pool struct {
	rec     *history.Recorder
	command []string
	logs    io.Writer
	wg      sync.WaitGroup

	mu       sync.Mutex
	slots    []*worker       // the worker running in each slot now
	all      map[int]*worker // every worker ever started, by process number
	stopping bool
}

type worker struct {
	slot  int
	cfg   WorkerConfig
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	pending *history.Event // the invocation that has not completed yet
}

// startPool starts one worker per config. Workers live in their own process group, so a
// Ctrl-C at the terminal reaches only the harness, which then stops them in order. If the
// harness is killed, the kernel kills them (Pdeathsig fires when the thread that started
// them ends; the Go runtime ends only threads locked by a goroutine, which these are not),
// and a worker whose stdin closes stops by itself.
func startPool(command []string, configs []WorkerConfig, rec *history.Recorder, logs io.Writer) (*pool, error) {
	p := &pool{rec: rec, command: command, logs: logs, slots: make([]*worker, len(configs)), all: map[int]*worker{}}
	for slot, cfg := range configs {
		p.mu.Lock()
		err := p.start(slot, cfg)
		p.mu.Unlock()
		if err != nil {
			p.stop(time.Second)
			return nil, fmt.Errorf("start worker %d: %w", cfg.Process, err)
		}
	}
	return p, nil
}

// start runs a worker in slot; the caller holds p.mu.
func (p *pool) start(slot int, cfg WorkerConfig) error {
	cmd := exec.Command(p.command[0], p.command[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = prefixWriter{w: p.logs, prefix: fmt.Sprintf("worker-%d: ", cfg.Process)}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, _ := json.Marshal(cfg)
	w := &worker{slot: slot, cfg: cfg, cmd: cmd, stdin: stdin}
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	p.slots[slot], p.all[cfg.Process] = w, w
	p.wg.Add(1)
	go p.pump(w, stdout)
	return nil
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
		e.Process = w.cfg.Process
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
	if w.pending != nil {
		lost := *w.pending
		lost.Type, lost.Time = history.Info, history.Now()
		lost.Message = fmt.Sprintf("worker exited during the operation (%v)", exitStatus(err))
		p.rec.Record(lost)
		w.pending = nil
	}
	w.mu.Unlock()
	p.replace(w)
}

// replace starts a new worker in w's slot unless the pool is stopping.
func (p *pool) replace(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return
	}
	next := w.cfg
	next.Process += len(p.slots)
	// A new client of the lock service too: under a name of its own, nothing the dead one
	// left behind (a key, a queued znode) is taken for its own and released by it.
	next.Lock.Owner = fmt.Sprintf("%s-w%d", w.cfg.Lock.Owner, next.Process)
	if err := p.start(w.slot, next); err != nil {
		fmt.Fprintf(p.logs, "worker-%d exited and no worker could take its place: %v\n", w.cfg.Process, err)
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// Processes and Signal make the pool a nemesis.Workers.
func (p *pool) Processes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var running []int
	for _, w := range p.slots {
		if w != nil {
			running = append(running, w.cfg.Process)
		}
	}
	return slices.Clip(running)
}

// Signal signals a worker by its process number. A worker that has already exited takes
// no signal and that is no error: a pause's SIGCONT may come after a kill.
func (p *pool) Signal(process int, sig syscall.Signal) error {
	p.mu.Lock()
	w, ok := p.all[process]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("no worker %d", process)
	}
	if err := w.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal worker %d: %w", process, err)
	}
	return nil
}

// stop asks every worker to finish, waits up to grace for them, kills the rest, and waits
// until every pump has recorded its last event. Stopped (paused) workers are thawed first.
func (p *pool) stop(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	running := slices.DeleteFunc(slices.Clone(p.slots), func(w *worker) bool { return w == nil })
	p.mu.Unlock()
	for _, w := range running {
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
	for _, w := range running {
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

package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/cpucap"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// pool is the set of worker processes and the pumps that copy their events into the
// history. It implements nemesis.Workers.
//
// A worker that dies before the pool stops (killed by a nemesis, or crashed) is replaced,
// as Jepsen replaces a crashed client: its open operation is recorded as indeterminate,
// and a new process takes its slot under a new process number (the old one plus the
// number of slots) and a new owner name, so the history, the models and the lock service
// see a new client, never a revived one. A worker whose lock client was lost (an exec
// client's program that exited or hung) is replaced the same way and counted; one whose
// client broke, or whose program was lost before it was ever ready startsInARow times in
// a row, ends the run (broken).
//
// Each worker leads a process group of its own, which holds its exec client's program:
// signals go to the group, and whatever is left of it when the worker ends is killed.
type pool struct {
	rec     *history.Recorder
	command []string
	logs    io.Writer
	wg      sync.WaitGroup
	// addrs gives each worker an address of its own; nil when they share the host's.
	addrs *clientAddrs

	mu sync.Mutex
	// slots hold the worker running in each slot now. Only those are kept: a long run
	// with a kill a second replaces thousands.
	slots    []*worker
	stopping bool
	// unready counts, per slot, the workers in a row whose client was lost before it was
	// ready (before it recorded anything).
	unready []int
	// lost counts the workers whose client was lost; lastLost says why the last one was.
	lost     int
	lastLost string

	// armed, while a directed fault waits for a worker to stop itself (ArmStop), gets the
	// first that does; nil otherwise.
	armed chan nemesis.SelfStop
	// capped are the cgroups throttled workers are in (Throttle), until Unthrottle.
	capped []*cpucap.Cap

	brokeOnce sync.Once
	broke     chan struct{} // closed when a client broke; brokeErr says how
	brokeErr  error
}

// startsInARow is how many times in a row a slot's program may be lost before it is ready
// before the run says the client broke: once may be bad luck (a fault as it started),
// three is a program that cannot start.
const startsInARow = 3

type worker struct {
	slot  int
	cfg   WorkerConfig
	cmd   *exec.Cmd
	stdin io.WriteCloser

	// stderr is the worker's log; its last line is why the worker ended.
	stderr *lastLine

	mu       sync.Mutex
	pending  *history.Event // the invocation that has not completed yet
	recorded bool           // whether it recorded any event
	exited   bool
}

// clientNet puts workers on addresses of their own on the cluster network, one per slot,
// and cuts their packets (clientnet.Network).
type clientNet interface {
	Isolate(attr *syscall.SysProcAttr)
	Attach(ctx context.Context, pid, slot int) error
	Detach(ctx context.Context, pid int) error
	Addr(slot int) netip.Addr
	DropFrom(ctx context.Context, pid int, sources ...string) error
	DropTo(ctx context.Context, pid int, service netip.AddrPort) error
	Heal(ctx context.Context, pid int) error
	Routed() bool
}

// clientAddrs is a client network and the storage's address on it, which a cut off the
// storage drops.
type clientAddrs struct {
	net     clientNet
	storage netip.AddrPort
}

// startPool starts one worker per config. Workers live in their own process group, so a
// Ctrl-C at the terminal reaches only the harness, which then stops them in order. If the
// harness is killed, the kernel kills them (Pdeathsig fires when the thread that started
// them ends; the Go runtime ends only threads locked by a goroutine, which these are not),
// and a worker whose stdin closes stops by itself.
func startPool(command []string, configs []WorkerConfig, rec *history.Recorder, logs io.Writer) (*pool, error) {
	return startPoolOn(nil, command, configs, rec, logs)
}

// startPoolOn starts the pool with each worker on its own address (addrs; nil: the host's).
// A worker is on its address before it reads its configuration, so it never dials before.
func startPoolOn(addrs *clientAddrs, command []string, configs []WorkerConfig, rec *history.Recorder, logs io.Writer) (*pool, error) {
	p := &pool{rec: rec, command: command, logs: logs, addrs: addrs, slots: make([]*worker, len(configs)),
		unready: make([]int, len(configs)), broke: make(chan struct{})}
	// A run killed with SIGKILL leaves its throttled workers' cgroups, empty: the next sweeps.
	if _, err := cpucap.Sweep(cpucap.Root); err != nil {
		fmt.Fprintf(logs, "could not sweep the cgroups left by killed runs: %v\n", err)
	}
	for slot, cfg := range configs {
		w, stdout, err := p.launch(slot, cfg)
		if err != nil {
			p.stop(time.Second)
			return nil, fmt.Errorf("start worker %d: %w", cfg.Process, err)
		}
		p.mu.Lock()
		p.add(w, stdout)
		p.mu.Unlock()
	}
	return p, nil
}

// launch starts a worker for slot, on its address, and hands it its configuration. It
// takes no lock: a nemesis may signal the other workers meanwhile.
func (p *pool) launch(slot int, cfg WorkerConfig) (*worker, io.Reader, error) {
	cmd := exec.Command(p.command[0], p.command[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"=1", RunEnv+"="+cfg.Run)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if p.addrs != nil {
		p.addrs.net.Isolate(cmd.SysProcAttr)
	}
	stderr := &lastLine{w: prefixWriter{w: p.logs, prefix: fmt.Sprintf("worker-%d: ", cfg.Process)}}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	line, _ := json.Marshal(cfg)
	if p.addrs != nil {
		err = p.addrs.net.Attach(context.Background(), cmd.Process.Pid, slot)
	}
	if err == nil {
		_, err = stdin.Write(append(line, '\n'))
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, err
	}
	return &worker{slot: slot, cfg: cfg, cmd: cmd, stdin: stdin, stderr: stderr}, stdout, nil
}

// add puts a launched worker in its slot and records its events; the caller holds p.mu.
func (p *pool) add(w *worker, stdout io.Reader) {
	p.slots[w.slot] = w
	p.wg.Add(1)
	go p.pump(w, stdout)
}

// pump records a worker's events until its stdout closes, then reaps it. An operation
// still open when the worker is gone is recorded as indeterminate: it may have happened.
func (p *pool) pump(w *worker, stdout io.Reader) {
	defer p.wg.Done()
	in := bufio.NewScanner(stdout)
	for in.Scan() {
		if at, ok := strings.CutPrefix(in.Text(), stoppedPrefix); ok {
			p.stoppedItself(w, at)
			continue
		}
		var e history.Event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Fprintf(w.cmd.Stderr, "unreadable event %s: %v\n", quote.Short(in.Text()), quote.ShortenAll(err.Error()))
			continue
		}
		e.Process = w.cfg.Process
		w.mu.Lock()
		if e.Type == history.Invoke {
			w.pending = &e
		} else {
			w.pending = nil
		}
		w.recorded = true
		w.mu.Unlock()
		p.rec.Record(e)
	}
	err := w.cmd.Wait()
	// What is left of its group (a process its program started) goes with it. The group
	// keeps the worker's pid from being reused while anything is in it.
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	// A slot whose address is still on the bridge takes no new worker: two interfaces
	// with one address would share its packets.
	freed := true
	if p.addrs != nil {
		if derr := p.addrs.net.Detach(context.Background(), w.cmd.Process.Pid); derr != nil {
			fmt.Fprintf(w.cmd.Stderr, "%v; no worker takes its place\n", derr)
			freed = false
		}
	}
	w.mu.Lock()
	w.exited = true
	if w.pending != nil {
		lost := *w.pending
		lost.Type, lost.Time = history.Info, history.Now()
		lost.Message = fmt.Sprintf("worker exited during the operation (%v)", exitStatus(err))
		p.rec.Record(lost)
		w.pending = nil
	}
	recorded := w.recorded
	w.mu.Unlock()
	if p.judgeExit(w, err, recorded) && freed {
		p.replace(w)
	}
}

// judgeExit counts a worker whose lock client was lost and ends the run when its client
// broke, or could not start startsInARow times in a row. It says whether the slot takes
// a new worker.
func (p *pool) judgeExit(w *worker, err error, recorded bool) bool {
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	why := fmt.Sprintf("worker-%d: %s", w.cfg.Process, w.stderr.last())
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case code == exitClientBroke:
		p.fail(errors.New(why))
		return false
	case code != exitClientLost:
		p.unready[w.slot] = 0
		return true
	}
	p.lost++
	p.lastLost = why
	if recorded {
		p.unready[w.slot] = 0
		return true
	}
	if p.unready[w.slot]++; p.unready[w.slot] >= startsInARow {
		p.fail(fmt.Errorf("%v: lost %d times in a row before it was ready; the last time, %s", workloads.ErrBroken, startsInARow, why))
		return false
	}
	return true
}

// fail ends the run: a lock client broke.
func (p *pool) fail(err error) {
	p.brokeOnce.Do(func() {
		p.brokeErr = err
		close(p.broke)
	})
}

// clientErr is why a lock client broke, or nil.
func (p *pool) clientErr() error {
	select {
	case <-p.broke:
		return p.brokeErr
	default:
		return nil
	}
}

// lostNote says how often a lock client was lost, or "" when none was.
func (p *pool) lostNote() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == 0 {
		return ""
	}
	return fmt.Sprintf("a lock client's program was lost %d times (it exited or stopped answering): its operation is "+
		"indeterminate and a new client took its place, as after kill-client; the last: %s", p.lost, p.lastLost)
}

// replace starts a new worker in w's slot unless the pool is stopping. The caller's pump
// is still counted in p.wg, so stop waits for this to end.
func (p *pool) replace(w *worker) {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		return
	}
	next := w.cfg
	next.Process += len(p.slots)
	// A new client of the lock service too: under a name of its own, nothing the dead one
	// left behind (a key, a queued znode) is taken for its own and released by it.
	next.Lock.Owner = fmt.Sprintf("%s-w%d", w.cfg.Lock.Owner, next.Process)
	started, stdout, err := p.launch(w.slot, next)
	if err != nil {
		fmt.Fprintf(p.logs, "worker-%d exited and no worker could take its place: %v\n", w.cfg.Process, err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(started, stdout)
	if p.stopping { // stop began while it started and did not ask it to finish
		started.finish()
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// tellAll writes line to every running worker; the caller holds p.mu. A worker that has
// gone takes nothing, and that is no error.
func (p *pool) tellAll(line string) {
	for _, w := range p.slots {
		if w != nil {
			w.stdin.Write([]byte(line + "\n"))
		}
	}
}

// find is the worker with a process number; nil with no error for one that has exited and
// been replaced. A slot's process numbers are its index plus multiples of the number of
// slots (workerConfigs numbers the first, replace the next), so a number below its slot's
// worker's is one replaced.
func (p *pool) find(process int) (*worker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if process >= 0 && len(p.slots) > 0 {
		switch w := p.slots[process%len(p.slots)]; {
		case w == nil:
		case w.cfg.Process == process:
			return w, nil
		case w.cfg.Process > process:
			return nil, nil
		}
	}
	return nil, fmt.Errorf("no worker %d", process)
}

// signal signals the worker's process group, unless the worker has exited and been
// reaped (then its pid, the group's id, may be another process's).
func (w *worker) signal(sig syscall.Signal) error {
	if err := w.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return err
	}
	if err := syscall.Kill(-w.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// stop asks every worker to finish, waits up to grace for them, kills the rest, and waits
// until every pump has recorded its last event. Stopped (paused) workers are thawed first,
// and throttled ones given their CPU back: no cgroup of theirs outlives the pool.
func (p *pool) stop(grace time.Duration) {
	if err := p.Unthrottle(); err != nil {
		fmt.Fprintf(p.logs, "unthrottle: %v\n", err)
	}
	p.mu.Lock()
	p.stopping = true
	running := slices.DeleteFunc(slices.Clone(p.slots), func(w *worker) bool { return w == nil })
	p.mu.Unlock()
	for _, w := range running {
		w.finish()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	// A worker that replaced a dead one meanwhile is in its slot now, not in running.
	p.mu.Lock()
	running = slices.DeleteFunc(slices.Clone(p.slots), func(w *worker) bool { return w == nil })
	p.mu.Unlock()
	for _, w := range running {
		w.signal(syscall.SIGKILL)
	}
	<-done
}

// finish thaws the worker and asks it to finish its operation and exit.
func (w *worker) finish() {
	w.signal(syscall.SIGCONT)
	io.WriteString(w.stdin, StopLine+"\n")
	w.stdin.Close()
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

// lastLine passes a worker's log on and keeps its last line, which says why it ended.
type lastLine struct {
	w    io.Writer
	mu   sync.Mutex
	line string
}

// maxLastLine bounds the line kept: a reason, not a log.
const maxLastLine = 2048

func (l *lastLine) Write(b []byte) (int, error) {
	if text := strings.TrimRight(string(b), "\n"); text != "" {
		text = text[strings.LastIndexByte(text, '\n')+1:]
		if len(text) > maxLastLine {
			text = text[:maxLastLine] + "…"
		}
		l.mu.Lock()
		l.line = text
		l.mu.Unlock()
	}
	return l.w.Write(b)
}

func (l *lastLine) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line == "" {
		return "(it said nothing)"
	}
	return l.line
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

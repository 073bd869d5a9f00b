package execlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// Name is the exec client's name in the registry (--client exec).
const Name = "exec"

func init() {
	// Every system: the program is told which one it is on and may refuse it. Whether a
	// grant carries a fencing token is the program's to say, grant by grant; with
	// fencing on, a grant without one breaks the client.
	// Extending likewise: a program whose lock cannot refuses a configuration that asks it.
	if err := workloads.Register(workloads.Client{Name: Name, Systems: system.Names(), Tokens: true, Extends: true, New: New}); err != nil {
		panic(err)
	}
}

// Options bound what a program may take; Defaults are a run's.
type Options struct {
	// Ready is how long the program may take to answer its configuration line: it starts
	// its runtime, imports its libraries, perhaps connects.
	Ready time.Duration
	// Grace is how long past a request's own timeout its answer may take.
	Grace time.Duration
	// Stop is how long the program may take to exit once its stdin is closed.
	Stop time.Duration
	// Log receives the program's stderr, line by line.
	Log io.Writer
}

// Defaults are the bounds of a run's programs. A Python program imports its lock library
// in well under a second on an idle machine; ten allow for two busy cores and a JVM.
var Defaults = Options{Ready: 10 * time.Second, Grace: 2 * time.Second, Stop: 2 * time.Second, Log: os.Stderr}

// New starts cfg.Program as a lock client with the Defaults (workloads.Client.New).
func New(cfg workloads.Config) (workloads.Lock, error) { return Start(cfg, Defaults) }

// Lock is one running program, driven as a workloads.Lock. It is not safe for concurrent
// use, as a worker's lock needs not be.
type Lock struct {
	cfg   workloads.Config
	opts  Options
	name  string // how messages name the program
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan line     // the program's stdout, line by line, one read ahead (so a line nobody asked for waits there to be seen); closed at its end
	done  chan struct{} // closed by Close: the readers stop
	// exited is closed once the program has exited; status is then its exit status.
	exited chan struct{}
	status error
	stderr *tail
	// logged is closed once the program's stderr has ended.
	logged chan struct{}
	// gone is the error that ended the client: every call after it returns it.
	gone error
	// kept is what the program said keeps its grants alive; each grant's detail says it.
	kept history.Keeping
}

// line is one line the program wrote, or why no more can be read.
type line struct {
	text []byte
	err  error
}

// Start starts the program, sends it cfg and waits for it to say it is ready. The
// program inherits this process's group, network namespace, environment and working
// directory, and is killed if this process dies.
func Start(cfg workloads.Config, opts Options) (*Lock, error) {
	if len(cfg.Program) == 0 {
		return nil, fmt.Errorf("%w: no program to run", workloads.ErrBroken)
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	l := &Lock{cfg: cfg, opts: opts, name: quote.Short(strings.Join(cfg.Program, " ")),
		lines: make(chan line, 1), done: make(chan struct{}), exited: make(chan struct{}), stderr: &tail{}, logged: make(chan struct{})}
	l.cmd = exec.Command(cfg.Program[0], cfg.Program[1:]...)
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if l.stdin, err = l.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("program %s: %w", l.name, err)
	}
	// Pipes of our own, not StdoutPipe: Wait would close those as soon as the program
	// exits, losing the lines it wrote last.
	stdout, err := l.pipe(&l.cmd.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := l.pipe(&l.cmd.Stderr)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	err = l.cmd.Start()
	// Our copies of the write ends go, so the reads end when the program's do.
	l.cmd.Stdout.(*os.File).Close()
	l.cmd.Stderr.(*os.File).Close()
	if err != nil {
		stdout.Close()
		stderr.Close()
		return nil, fmt.Errorf("%w: start program %s: %v", workloads.ErrBroken, l.name, err)
	}
	go l.wait()
	go l.readLines(stdout)
	go l.readStderr(stderr)

	if err := l.ready(); err != nil {
		l.fail(err)
		l.Close()
		return nil, err
	}
	return l, nil
}

// ready sends the configuration and reads the program's answer to it.
func (l *Lock) ready() error {
	if err := encode(l.stdin, configOf(l.cfg)); err != nil {
		return l.lost("its configuration", fmt.Errorf("write: %w", err))
	}
	a, err := l.answer("its configuration", l.opts.Ready)
	switch {
	case err != nil:
		return err
	case a.Result == Ready && a.Lease != history.KeptUnknown && a.Lease != history.KeptByKey && a.Lease != history.KeptBySession:
		return l.broken("answered its configuration with lease %q; want %q, %q or none", a.Lease, history.KeptByKey, history.KeptBySession)
	case a.Result == Ready:
		l.kept = a.Lease
		return nil
	case a.Result == Refused:
		return fmt.Errorf("%w: program %s refused its configuration: %s", workloads.ErrBroken, l.name, orNothing(a.Message))
	}
	return l.broken("answered its configuration with %q; want %q or %q (did it write before it read the configuration?)",
		a.Result, Ready, Refused)
}

// pipe makes a pipe whose write end goes to the program as *to.
func (l *Lock) pipe(to *io.Writer) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", l.name, err)
	}
	*to = w
	return r, nil
}

func (l *Lock) wait() {
	l.status = l.cmd.Wait()
	close(l.exited)
}

func (l *Lock) readLines(stdout *os.File) {
	defer stdout.Close()
	defer close(l.lines)
	in := bufio.NewScanner(stdout)
	in.Buffer(make([]byte, 0, 4096), MaxLine)
	for in.Scan() {
		select {
		case l.lines <- line{text: append([]byte(nil), in.Bytes()...)}:
		case <-l.done:
			return
		}
	}
	if err := in.Err(); err != nil {
		select {
		case l.lines <- line{err: err}:
		case <-l.done:
		}
	}
}

// readStderr copies the program's stderr to the log, each line marked as the program's,
// and keeps its last lines for the messages that say why it was lost.
func (l *Lock) readStderr(stderr *os.File) {
	defer close(l.logged)
	defer stderr.Close()
	in := bufio.NewReaderSize(stderr, 4096)
	for {
		text, err := in.ReadSlice('\n')
		if len(text) > 0 {
			s := strings.TrimSuffix(string(text), "\n")
			l.stderr.add(s)
			fmt.Fprintf(l.opts.Log, "program: %s\n", s)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (l *Lock) Acquire(ctx context.Context) (workloads.Grant, error) {
	a, err := l.request(ctx, OpAcquire)
	if err != nil {
		return workloads.Grant{}, err
	}
	switch a.Result {
	case Granted:
		return l.grant(a)
	case Busy:
		return workloads.Grant{}, definite(workloads.ErrBusy, a.Message)
	case Unknown:
		return workloads.Grant{}, fmt.Errorf("acquire: %s", orNothing(a.Message))
	}
	return workloads.Grant{}, l.fail(l.broken("answered acquire with %q; want %q, %q or %q", a.Result, Granted, Busy, Unknown))
}

// grant is the Grant an answer stands for.
func (l *Lock) grant(a Answer) (workloads.Grant, error) {
	g := workloads.Grant{Detail: a.Detail}
	if a.Token != nil {
		g.Token, g.HasToken = *a.Token, true
	} else if l.cfg.Fencing {
		return g, l.fail(l.broken("granted the lock with no fencing token, and fencing is on (a lock without tokens refuses the configuration)"))
	}
	if a.Validity != nil || l.kept != history.KeptUnknown {
		if g.Detail == nil {
			g.Detail = map[string]string{}
		}
	}
	if a.Validity != nil {
		g.Detail[history.Validity] = seconds(*a.Validity).String()
	}
	if l.kept != history.KeptUnknown {
		g.Detail[history.KeptDetail] = string(l.kept)
	}
	if a.AttemptStarted != nil {
		g.AttemptStarted = int64(*a.AttemptStarted * float64(time.Second))
	}
	return g, nil
}

func (l *Lock) Release(ctx context.Context) error { return l.held(ctx, OpRelease, Released) }

func (l *Lock) Extend(ctx context.Context) error { return l.held(ctx, OpExtend, Extended) }

// held sends op, a request only the holder may make, whose answer is done when it was.
func (l *Lock) held(ctx context.Context, op, done string) error {
	a, err := l.request(ctx, op)
	if err != nil {
		return err
	}
	switch a.Result {
	case done:
		return nil
	case NotHeld:
		return definite(workloads.ErrNotHeld, a.Message)
	case Unknown:
		return fmt.Errorf("%s: %s", op, orNothing(a.Message))
	}
	return l.fail(l.broken("answered %s with %q; want %q, %q or %q", op, a.Result, done, NotHeld, Unknown))
}

// definite is err, with the program's own words when it gave any.
func definite(err error, message string) error {
	if message == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, message)
}

// request sends op with as long to complete as ctx leaves, and reads its answer.
func (l *Lock) request(ctx context.Context, op string) (Answer, error) {
	if l.gone != nil {
		return Answer{}, l.gone
	}
	timeout := time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(deadline), 0)
	}
	// An answer waiting before the question was asked would be taken for its answer.
	select {
	case ln, ok := <-l.lines:
		if ok && ln.err == nil {
			return Answer{}, l.fail(l.broken("wrote a line nobody asked for: %s", quote.Short(string(ln.text))))
		}
		return Answer{}, l.fail(l.lineError(op, ln, ok))
	default:
	}
	if err := encode(l.stdin, Request{Op: op, Timeout: timeout.Seconds()}); err != nil {
		return Answer{}, l.fail(l.lost(op, fmt.Errorf("write: %w", err)))
	}
	a, err := l.answer(op, timeout+l.opts.Grace)
	if err != nil {
		return Answer{}, l.fail(err)
	}
	return a, nil
}

// answer reads the program's answer to what, for at most limit of awake time.
func (l *Lock) answer(what string, limit time.Duration) (Answer, error) {
	ln, ok, err := l.next(what, limit)
	if err != nil {
		return Answer{}, err
	}
	if !ok || ln.err != nil {
		return Answer{}, l.lineError(what, ln, ok)
	}
	var a Answer
	if err := decode(ln.text, &a); err != nil {
		return Answer{}, l.broken("answering %s: %v", what, err)
	}
	return a, nil
}

// lineError is why no line could be read: the program's end, or a line too long.
func (l *Lock) lineError(what string, ln line, ok bool) error {
	if !ok {
		return l.lost(what, errors.New("it closed its stdout"))
	}
	if errors.Is(ln.err, bufio.ErrTooLong) {
		return l.broken("answering %s: wrote a line longer than %d bytes", what, MaxLine)
	}
	return l.lost(what, ln.err)
}

// awakeTick is how often a wait looks at the clock. A wait counts the time between two
// looks up to twice this: more means this process was stopped (SIGSTOP), and so was the
// program, which cannot be blamed for not answering meanwhile.
const awakeTick = 20 * time.Millisecond

// afterExit is how long the last lines of a program that exited may take to arrive (a
// process it started may still hold its stdout).
const afterExit = 200 * time.Millisecond

// next waits for the program's next line for at most limit of awake time.
func (l *Lock) next(what string, limit time.Duration) (line, bool, error) {
	tick := time.NewTicker(awakeTick)
	defer tick.Stop()
	exited := l.exited
	var waited time.Duration
	last := time.Now()
	for {
		select {
		case ln, ok := <-l.lines:
			return ln, ok, nil
		case <-exited:
			exited, limit = nil, min(limit, waited+afterExit)
		case now := <-tick.C:
			waited += min(now.Sub(last), 2*awakeTick)
			last = now
			if waited < limit {
				continue
			}
			select {
			case <-l.exited:
				return line{}, false, l.lost(what, errors.New("it exited"))
			default:
			}
			return line{}, false, l.lost(what, fmt.Errorf("it did not answer within %s (does it flush stdout after every line?)", limit.Round(time.Millisecond)))
		}
	}
}

// lost is the error of a program that can no longer answer what: it ended, or it hangs.
// It says how the program ended, if it did, and the last lines of its stderr.
func (l *Lock) lost(what string, why error) error {
	var status, last string
	select {
	case <-l.exited:
		status = " (" + exitStatus(l.status) + ")"
		select { // its last words
		case <-l.logged:
		case <-time.After(afterExit):
		}
	case <-time.After(afterExit):
	}
	if s := l.stderr.String(); s != "" {
		last = "; its stderr ended: " + s
	}
	return fmt.Errorf("%w: program %s, during %s: %v%s%s", workloads.ErrLost, l.name, what, why, status, last)
}

// broken is the error of a program that did not speak the protocol.
func (l *Lock) broken(format string, args ...any) error {
	return fmt.Errorf("%w: program %s %s", workloads.ErrBroken, l.name, fmt.Sprintf(format, args...))
}

// fail ends the client with err: the program is killed, and every later call returns err.
func (l *Lock) fail(err error) error {
	l.gone = err
	l.kill()
	return err
}

// kill kills the program and waits a moment for it to go. A process it started and left
// behind is still in the worker's process group, which the harness kills when the worker
// ends.
func (l *Lock) kill() {
	l.cmd.Process.Kill()
	select {
	case <-l.exited:
	case <-time.After(time.Second):
	}
}

// Close closes the program's stdin, which asks it to exit, and kills it if it has not
// within the Stop bound. It returns once the program's last words are in the log.
func (l *Lock) Close() error {
	select {
	case <-l.done:
		return nil
	default:
	}
	l.stdin.Close()
	select {
	case <-l.exited:
	case <-time.After(l.opts.Stop):
		l.kill()
	}
	select {
	case <-l.logged:
	case <-time.After(afterExit):
	}
	close(l.done)
	return nil
}

// exitStatus says how a program ended.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func orNothing(s string) string {
	if s == "" {
		return "(no message)"
	}
	return s
}

// tail keeps the last lines a program wrote to stderr, each cut short.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const (
	tailLines = 3
	tailWidth = 200
)

func (t *tail) add(s string) {
	if len(s) > tailWidth {
		n := tailWidth
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, s)
	if len(t.lines) > tailLines {
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, " | ")
}

package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/cpucap"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/links"
	"github.com/lockbreaker/lockbreaker/nemesis"
)

// The levers' adapters: the worker pool and the proxies on the clients' links as the
// nemesis's levers (nemesis/levers.go), and whether this host can give each lever at all
// (hostLacks), asked before anything of a run exists. The packages that make the levers
// (clientnet, cpucap, links) are imported here and not by the nemesis.

// Variables, so that the tests need not run as root.
var (
	// clientAddrsHere says why lock clients cannot have addresses of their own here.
	clientAddrsHere = clientnet.Supported
	// cpuCapsHere says why no process can be throttled here.
	cpuCapsHere = func() error {
		_, err := cpucap.Find(cpucap.Root)
		return err
	}
)

// hostLacks says why this host cannot give a lever that needs asks for; nil when it can.
func hostLacks(needs nemesis.Needs) error {
	if needs.ClientAddrs {
		if err := clientAddrsHere(); err != nil {
			return err
		}
	}
	if needs.CPUCaps {
		return cpuCapsHere()
	}
	return nil
}

// preflightLevers refuses, naming the nemesis, a nemesis whose levers this host cannot give.
func preflightLevers(names []string) error {
	for _, name := range names {
		nem, err := nemesis.New([]string{name})
		if err != nil {
			return err
		}
		if err := hostLacks(nem.Needs()); err != nil {
			return fmt.Errorf("nemesis %s: %w", nem.Name(), err)
		}
	}
	return nil
}

// openLinks puts the proxies of package links on every client's links when the nemesis
// asks for them (nemesis.Needs.Links), listening where the clients reach the storage
// (listen), and routes each slot's configuration through its own. A client waits for the
// storage as long as a fault may hold its write there (nemesis.HoldBound), so the write is
// delivered, not given up. nil, and the configurations as they were, when no fault asks.
func openLinks(needs nemesis.Needs, listen netip.Addr, nodes []string, storage string, configs []WorkerConfig) (*links.Set, error) {
	if !needs.Links {
		return nil, nil
	}
	set, err := links.Open(listen, len(configs), nodes, storage)
	if err != nil {
		return nil, err
	}
	for slot := range configs {
		c := &configs[slot]
		c.Lock.Nodes, c.Storage = set.Nodes(slot), set.Storage(slot)
		c.OpTimeout += nemesis.HoldBound(c.Lock.TTL)
	}
	return set, nil
}

// linksLever is a run's proxies as the nemesis's lever (nemesis.Links): by process
// number, each found in its slot.
type linksLever struct {
	set     *links.Set
	workers *pool
}

func (l linksLever) Strike(p int, f nemesis.LinkFault) error {
	w, err := l.workers.find(p)
	if w == nil {
		return err // one that has exited sends nothing more
	}
	reach := links.Reach{Node: f.Reach.Node, Answers: f.Reach.Answers, LockOnly: f.Reach.LockOnly}
	switch f.Effect {
	case nemesis.Slow:
		return l.set.Slow(w.slot, reach, f.Latency, f.Jitter)
	case nemesis.Reset:
		return l.set.Break(w.slot, reach, links.Reset())
	case nemesis.Silence:
		return l.set.Break(w.slot, reach, links.Silence(f.CloseAfter))
	}
	return fmt.Errorf("no such link fault: %s", f)
}

func (l linksLever) HoldNextWrite() (nemesis.WriteHold, error) {
	h, err := l.set.HoldNextWrite()
	if err != nil {
		return nil, err
	}
	return newWriteHold(h), nil
}

func (l linksLever) HealLinks() { l.set.Heal() }

// writeHold is a links.Hold as the nemesis's nemesis.WriteHold: the write it catches is
// handed on until it is released.
type writeHold struct {
	*links.Hold
	caught   chan nemesis.HeldWrite
	released chan struct{}
	once     sync.Once
}

func newWriteHold(h *links.Hold) *writeHold {
	w := &writeHold{Hold: h, caught: make(chan nemesis.HeldWrite, 1), released: make(chan struct{})}
	go func() {
		select {
		case held := <-h.Caught():
			w.caught <- nemesis.HeldWrite(held)
		case <-w.released:
		}
	}()
	return w
}

func (w *writeHold) Caught() <-chan nemesis.HeldWrite { return w.caught }

func (w *writeHold) Release() {
	w.once.Do(func() { close(w.released) })
	w.Hold.Release()
}

// ArmStop arms every worker to stop itself after its next read under the lock (the
// worker protocol's "arm"), making the pool a nemesis.SelfStoppers.
func (p *pool) ArmStop() (<-chan nemesis.SelfStop, func()) {
	stopped := make(chan nemesis.SelfStop, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = stopped
	p.tellAll(ArmLine)
	return stopped, func() {
		p.mu.Lock()
		if p.armed == stopped {
			p.armed = nil
			p.tellAll(DisarmLine)
		}
		p.mu.Unlock()
		select {
		case untaken := <-stopped: // it stopped as the fault gave up waiting
			p.Signal(untaken.Process, syscall.SIGCONT)
		default:
		}
	}
}

// stoppedItself takes the line of a worker that is stopping itself (at: when, as it wrote):
// once its process group has stopped, it goes to the fault that armed the workers, and the
// others are disarmed; with no fault waiting any more, it is continued at once.
func (p *pool) stoppedItself(w *worker, at string) {
	t, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		fmt.Fprintf(w.cmd.Stderr, "unreadable stop %s\n", quote.Short(at))
	}
	stopErr := waitStopped(w.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == nil || err != nil || stopErr != nil {
		w.signal(syscall.SIGCONT)
		return
	}
	p.armed <- nemesis.SelfStop{Process: w.cfg.Process, At: t}
	p.armed = nil
	p.tellAll(DisarmLine)
}

// waitStopped waits until process pid is stopped (state T in /proc/PID/stat), for at most
// stopWait.
func waitStopped(pid int) error {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	for deadline := time.Now().Add(stopWait); ; time.Sleep(100 * time.Microsecond) {
		stat, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// The state follows the command, which is in parentheses and may hold anything.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'T' || stat[i+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %d did not stop within %s", pid, stopWait)
		}
	}
}

// stopWait bounds the wait for a worker that said it stops itself: a SIGSTOP to oneself
// takes effect before the call returns, so only a machine that does not run the worker at
// all takes long.
const stopWait = 5 * time.Second

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

// Signal signals a worker by its process number: the whole of its process group, so an
// exec client's program stops, goes on and dies with its worker. A worker that has
// already exited takes no signal and that is no error: a pause's SIGCONT may come after a
// kill.
func (p *pool) Signal(process int, sig syscall.Signal) error {
	w, err := p.find(process)
	if w == nil || err != nil {
		return err
	}
	if err := w.signal(sig); err != nil {
		return fmt.Errorf("signal worker %d: %w", process, err)
	}
	return nil
}

// Throttle and Unthrottle make the pool a nemesis.Throttler: a worker's whole process group,
// its exec client's program too, goes into a cgroup of its own with a CPU quota (package
// cpucap), named after the run and the worker (lockbreaker-<run>-worker-<n>) so that nothing
// of another run's is touched.
func (p *pool) Throttle(process int) error {
	w, err := p.find(process)
	if w == nil || err != nil {
		return err
	}
	c, err := cpucap.Find(cpucap.Root)
	if err != nil {
		return err
	}
	pids, err := cpucap.ProcessGroup(w.cmd.Process.Pid)
	if err != nil || len(pids) == 0 { // none: the worker and its program have exited
		return err
	}
	g, err := c.Cap(fmt.Sprintf("%s-worker-%d", w.cfg.Run, process), pids)
	if err != nil {
		return w.ignoreExited(fmt.Errorf("throttle worker %d: %w", process, err))
	}
	p.mu.Lock()
	p.capped = append(p.capped, g)
	p.mu.Unlock()
	return nil
}

func (p *pool) Tighten() (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	share, tightened := "", false
	var errs []error
	for _, g := range p.capped {
		ok, err := g.Tighten()
		share, tightened, errs = g.Share().String(), tightened || ok, append(errs, err)
	}
	return share, tightened, errors.Join(errs...)
}

func (p *pool) Unthrottle() error {
	p.mu.Lock()
	capped := p.capped
	p.capped = nil
	p.mu.Unlock()
	var errs []error
	for _, g := range capped {
		errs = append(errs, g.Release())
	}
	return errors.Join(errs...)
}

// ClientIP, ClientDropFrom and HealClients make the pool a
// nemesis.ClientNetwork when its workers have addresses of their own.
func (p *pool) ClientIP(process int) (string, error) {
	if _, err := p.worker(process); err != nil {
		return "", err
	}
	return p.addrs.net.Addr(process % len(p.slots)).String(), nil // replaced or not, its slot's
}

func (p *pool) ClientDropFrom(ctx context.Context, process int, sources ...string) error {
	w, err := p.worker(process)
	if w == nil || err != nil {
		return err
	}
	pid := w.cmd.Process.Pid
	if i := slices.Index(sources, nemesis.Storage); i >= 0 {
		sources = slices.Delete(slices.Clone(sources), i, i+1)
		if err := w.ignoreExited(p.addrs.net.DropTo(ctx, pid, p.addrs.storage)); err != nil {
			return err
		}
	}
	if len(sources) == 0 {
		return nil
	}
	return w.ignoreExited(p.addrs.net.DropFrom(ctx, pid, sources...))
}

// HealClients removes every cut from the running workers; a worker that starts
// later has a namespace of its own, with none.
func (p *pool) HealClients(ctx context.Context) error {
	p.mu.Lock()
	running := slices.DeleteFunc(slices.Clone(p.slots), func(w *worker) bool { return w == nil })
	p.mu.Unlock()
	var errs []error
	for _, w := range running {
		errs = append(errs, w.ignoreExited(p.addrs.net.Heal(ctx, w.cmd.Process.Pid)))
	}
	return errors.Join(errs...)
}

// Routed says the workers' addresses are hidden from the nodes behind this host's
// (clientnet.Route).
func (p *pool) Routed() bool { return p.addrs != nil && p.addrs.net.Routed() }

// worker finds a worker by its process number, on a pool whose workers have addresses of
// their own; nil with no error for one that has exited and been replaced.
func (p *pool) worker(process int) (*worker, error) {
	if p.addrs == nil {
		return nil, errors.New("the workers share the host's network address")
	}
	return p.find(process)
}

// ignoreExited drops the error of an act on a worker's namespace that failed because the
// worker has exited: its namespace went with it, and whatever was in it.
func (w *worker) ignoreExited(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exited {
		return nil
	}
	return err
}

// Package histgen generates realistic lock histories, for the checkers' benchmarks and
// tests: one lock key that N clients contend for, run as the real workers run the counter
// workload (acquire, read, write the value read plus one, release, pause), against a
// correct lease lock and the storage it guards. It is a simulation, not a run: no clock,
// no process, deterministic for a seed, so `make bench` measures the checkers on the same
// histories every time.
//
// What makes such histories hard to check is all there:
//   - acquires block and retry every 20 ms until the lock is free or their timeout (twice
//     the lease) runs out, so acquire operations are long and overlap many others;
//   - a pause-holder nemesis stops the holder between its read and its write for longer
//     than its lease: another client is granted the lock, and the holder's write lands late
//     (the violation a lease lock cannot prevent without fencing) or, with fencing, is
//     rejected as stale;
//   - 5-9 % of operations end indeterminate (info): a reply lost on the way back, after the
//     server did or did not act.
//
// With Kills a kill-client nemesis takes pause-holder's place and SIGKILLs the holder now
// and then, just after the storage served its read: the read's reply is still on its way (the harness then records
// the read info as the worker dies) or has just arrived. The dead holder never releases;
// its lease runs out, as a ZooKeeper session expires, and the lock passes to the next
// client. A new client takes its place under a new process number (the old plus Clients),
// as the harness's pool does. No client ever holds the lock while another does: every
// checker must find such a history valid.
//
// With Unreachable a release fails "unreachable" now and then: its request never reaches
// the lock service, which keeps the lease until it runs out, while the client, done with
// the lock, goes on to its next acquire. Nobody holds the lock while another does here
// either: the next grant, the client's own or another's, comes after the lease.
//
// With Effects the completions also carry what the servers saw, as the real workers record
// it: an ok acquire's EffectFrom is when its last, successful attempt started; the storage
// applied (or refused) a read or write at EffectFrom = EffectTo. Without, the history is
// one recorded before workers knew how.
package histgen

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Config shapes a generated history.
type Config struct {
	// Ops is how many client operations to generate (the final read excluded).
	Ops     int
	Clients int
	// Fencing sends each grant's token with the holder's storage requests, and the storage
	// rejects a token lower than the highest it has seen.
	Fencing bool
	// Effects records EffectFrom and EffectTo on completions, as the real workers do.
	Effects bool
	// Kills has the holder killed now and then, while it holds the lock, instead of paused
	// (see the package comment).
	Kills bool
	// Unreachable has a release fail unreachable now and then (see the package comment).
	Unreachable bool
	Seed        uint64
}

// Key is the one lock key every client contends for.
const Key = "k"

// TTL is the lease the simulated lock grants, as the harness asks for it by default: a
// key's time to live (history.KeptByKey), which the lock keeps.
const TTL = 2 * time.Second

// The workload's timing, as the harness sets it up by default.
const (
	ttl            = TTL
	acquireTimeout = 2 * ttl
	retry          = 20 * time.Millisecond
	pace           = 50 * time.Millisecond
	// pauseEvery is the mean time between two pauses of the holder.
	pauseEvery = 5 * time.Second
	// infoRate is the chance that a reply is lost: the operation ends indeterminate.
	infoRate = 0.07
	// killEvery is the mean time between two kills of the holder (Kills), and restart how
	// long a new worker takes to start in the dead one's place.
	killEvery = 3 * time.Second
	restart   = 100 * time.Millisecond
	// unreachableRate is the chance that a release fails unreachable (Unreachable).
	unreachableRate = 0.05
)

// step is what a client does next.
type step int

const (
	invokeAcquire step = iota
	attempt            // an acquire attempt reaches the lock service
	invokeRead
	readServed
	invokeWrite
	writeServed
	invokeRelease
	releaseServed
	complete // the reply of the operation in flight arrives
)

// client is one worker's state.
type client struct {
	process  int
	next     step
	at       int64 // when next happens
	invoked  int64 // the invocation of the operation in flight
	deadline int64 // an acquire's timeout
	tried    int64 // when the last acquire attempt started
	token    int64 // the grant's token, 0 without one
	read     int64 // the value read
	done     history.Event
	// after is the step that follows the reply in flight.
	after step
	// pausedUntil delays everything the client does (SIGSTOP) until then.
	pausedUntil int64
}

type queue []*client

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].process < q[j].process
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*client)) }
func (q *queue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// world is the lock service, the storage and the history being written.
type world struct {
	cfg Config
	rng *rand.Rand
	// pending are the events made and not yet handed over: a paused client's, a lost
	// reply's, a pause's stop come later than the step that made them.
	pending pendingEvents
	made    int // events made so far, which orders those made at the same time
	next    int // the next event's index
	out     func(history.Event) error
	ops     int
	// the lease lock
	holder  int // -1: free
	expires int64
	tokens  int64
	// the storage
	register, highest int64
	// the nemesis
	nextPause, nextKill int64
}

// Generate returns the history: client operations, pause faults and a final read, numbered
// and ordered by time.
func Generate(cfg Config) []history.Event {
	var events []history.Event
	Emit(cfg, func(e history.Event) error {
		events = append(events, e)
		return nil
	})
	return events
}

// Emit hands the history Generate returns to emit event by event, holding only the
// events not yet due, so that a history of any length is made in bounded memory. An
// error from emit stops it and is returned.
func Emit(cfg Config, emit func(history.Event) error) error {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Clients))), holder: -1, out: emit}
	const start = int64(1e9)
	w.nextPause = start + w.exp(pauseEvery)
	if cfg.Kills { // kill-client instead of pause-holder
		w.nextPause, w.nextKill = math.MaxInt64, start+w.exp(killEvery)
	}
	q := make(queue, cfg.Clients)
	for p := range q {
		q[p] = &client{process: p, next: invokeAcquire, at: start + w.rng.Int64N(int64(pace))}
	}
	heap.Init(&q)
	end := start
	for q.Len() > 0 {
		c := q[0]
		end = max(end, c.at)
		if !w.run(c) {
			heap.Pop(&q)
		} else {
			heap.Fix(&q, 0)
		}
		// Every step comes at or after the one before and makes events after its own
		// time less resumeJitter (a paused client's step and its events both come just
		// after the pause, in either order): those before that are final.
		due := int64(math.MaxInt64)
		if q.Len() > 0 {
			due = q[0].at - resumeJitter
		}
		if err := w.flush(due); err != nil {
			return err
		}
	}
	end += int64(time.Millisecond)
	w.add(history.Event{Type: history.Invoke, Process: history.HarnessProcess, Func: history.FinalRead, Key: Key, Time: end})
	w.add(history.Event{Type: history.OK, Process: history.HarnessProcess, Func: history.FinalRead, Key: Key, Time: end + 100e3,
		Value: history.Int64(w.register)})
	return w.flush(math.MaxInt64)
}

// add makes an event, handed over when it is due.
func (w *world) add(e history.Event) {
	heap.Push(&w.pending, made{e, w.made})
	w.made++
}

// flush hands over, numbered, the events before due in the order of their times, those at
// the same time in the order they were made.
func (w *world) flush(due int64) error {
	for w.pending.Len() > 0 && w.pending[0].event.Time < due {
		e := heap.Pop(&w.pending).(made).event
		e.Index = w.next
		w.next++
		if err := w.out(e); err != nil {
			return err
		}
	}
	return nil
}

// made is an event and the order it was made in.
type made struct {
	event history.Event
	order int
}

// pendingEvents is a heap of events by time, then the order made.
type pendingEvents []made

func (p pendingEvents) Len() int { return len(p) }
func (p pendingEvents) Less(i, j int) bool {
	if p[i].event.Time != p[j].event.Time {
		return p[i].event.Time < p[j].event.Time
	}
	return p[i].order < p[j].order
}
func (p pendingEvents) Swap(i, j int) { p[i], p[j] = p[j], p[i] }
func (p *pendingEvents) Push(x any)   { *p = append(*p, x.(made)) }
func (p *pendingEvents) Pop() any {
	old := *p
	e := old[len(old)-1]
	*p = old[:len(old)-1]
	return e
}

// exp is an exponentially distributed duration with mean d, in nanoseconds.
func (w *world) exp(d time.Duration) int64 { return int64(w.rng.ExpFloat64() * float64(d)) }

// latency is one network hop: 100 µs to 600 µs.
func (w *world) latency() int64 { return 100e3 + w.rng.Int64N(500e3) }

// resumeJitter bounds how long after its pause a client's next event or step comes.
const resumeJitter = 100e3

// resumed is a time just after c's pause: its steps and events come then.
func (w *world) resumed(c *client) int64 { return c.pausedUntil + w.rng.Int64N(resumeJitter) + 1 }

// emit records an event of c's at time t; a paused client's events wait for it to resume.
func (w *world) emit(c *client, e history.Event) history.Event {
	e.Process, e.Key = c.process, Key
	if e.Time < c.pausedUntil {
		e.Time = w.resumed(c)
	}
	w.add(e)
	return e
}

// invoke starts an operation; the next step is served at the server one hop later.
func (w *world) invoke(c *client, f history.Func, served step, token, value *int64) {
	inv := w.emit(c, history.Event{Type: history.Invoke, Func: f, Time: c.at, Token: token, Value: value})
	w.ops++
	c.invoked, c.tried = inv.Time, inv.Time
	c.next, c.at = served, inv.Time+w.latency()
}

// reply schedules the reply of the operation in flight, served at time served: it arrives
// one hop later, or is lost (info) and the client gives up after a timeout.
func (w *world) reply(c *client, done history.Event, served int64, then step) {
	done.Time = served + w.latency()
	if w.cfg.Effects && done.Type != history.Info {
		switch done.Func {
		case history.Acquire:
			if done.Type == history.OK {
				done.EffectFrom = c.tried
			}
		case history.Read, history.Write:
			done.EffectFrom, done.EffectTo = served, served
		}
	}
	c.done, c.after, c.next, c.at = done, then, complete, done.Time
}

// lost says whether a reply is lost: the operation's outcome is unknown.
func (w *world) lost() bool { return w.rng.Float64() < infoRate }

func (w *world) tokenOf(c *client) *int64 {
	if !w.cfg.Fencing || c.token == 0 {
		return nil
	}
	return history.Int64(c.token)
}

// run does c's next step and says whether c goes on.
func (w *world) run(c *client) bool {
	if c.next != attempt && c.next != readServed && c.next != writeServed && c.next != releaseServed && c.at < c.pausedUntil {
		c.at = w.resumed(c)
		return true
	}
	now := c.at
	switch c.next {
	case invokeAcquire:
		if w.ops >= w.cfg.Ops {
			return false
		}
		w.invoke(c, history.Acquire, attempt, nil, nil)
		c.deadline = c.invoked + int64(acquireTimeout)
	case attempt:
		w.attempt(c, now)
	case invokeRead:
		w.invoke(c, history.Read, readServed, w.tokenOf(c), nil)
	case readServed:
		done := history.Event{Type: history.OK, Func: history.Read}
		if w.stale(c) {
			done.Type, done.Error = history.Fail, history.ErrStaleToken
			w.reply(c, done, now, invokeRelease)
			break
		}
		c.read = w.register
		done.Value = history.Int64(w.register)
		done = w.maybeLost(done)
		then := invokeWrite
		if done.Type == history.Info { // the worker does not write what it did not read
			then = invokeRelease
		}
		w.reply(c, done, now, then)
		if !w.maybeKill(c, now) {
			w.maybePause(c, now)
		}
	case invokeWrite:
		w.invoke(c, history.Write, writeServed, w.tokenOf(c), history.Int64(c.read+1))
	case writeServed:
		done := history.Event{Type: history.OK, Func: history.Write}
		if w.stale(c) {
			done.Type, done.Error = history.Fail, history.ErrStaleToken
		} else {
			w.register = c.read + 1
			done = w.maybeLost(done)
		}
		w.reply(c, done, now, invokeRelease)
	case invokeRelease:
		w.invoke(c, history.Release, releaseServed, nil, nil)
	case releaseServed:
		done := history.Event{Type: history.OK, Func: history.Release}
		switch {
		case w.cfg.Unreachable && w.rng.Float64() < unreachableRate: // the service never heard of it
			done.Type, done.Error, done.Message = history.Fail, history.ErrUnreachable, "dial tcp: connect: connection refused"
		case w.holder == c.process && now < w.expires:
			w.holder = -1
			done = w.maybeLost(done)
		default:
			done.Type, done.Error = history.Fail, history.ErrNotHeld
		}
		c.token = 0
		w.reply(c, done, now, invokeAcquire)
	case complete:
		done := c.done
		if done.Type == history.Info { // the client gives up after its timeout
			timeout := c.invoked + int64(time.Second)
			if done.Func == history.Acquire {
				timeout = c.deadline
			}
			done.Message = "timeout"
			done.Time = max(done.Time, timeout+w.rng.Int64N(1e6))
		}
		done = w.emit(c, done)
		c.next, c.at = c.after, done.Time+10e3+w.rng.Int64N(100e3)
		if c.after == invokeAcquire {
			c.at = done.Time + int64(pace)/2 + w.rng.Int64N(int64(pace))
		}
	}
	return true
}

// maybeLost turns a reply into info when it is lost.
func (w *world) maybeLost(done history.Event) history.Event {
	if w.lost() {
		done.Type, done.Value, done.Token, done.Error = history.Info, nil, nil, ""
	}
	return done
}

// attempt is one acquire attempt at the lease lock: granted when the lock is free or its
// lease ran out; otherwise tried again after the retry interval, until the timeout.
func (w *world) attempt(c *client, now int64) {
	if w.holder != -1 && now < w.expires {
		next := now + w.latency() + int64(retry)
		if next+w.latency() > c.deadline {
			busy := history.Event{Type: history.Fail, Func: history.Acquire, Error: history.ErrLockBusy}
			w.reply(c, w.maybeLost(busy), now, invokeAcquire)
			return
		}
		c.tried, c.at = next, next+w.latency()
		return
	}
	w.tokens++
	w.holder, w.expires = c.process, now+int64(ttl)
	done := history.Event{Type: history.OK, Func: history.Acquire, Token: history.Int64(w.tokens)}
	if w.lost() { // the grant happened, its reply did not arrive: the lease runs out unused
		done.Type, done.Token = history.Info, nil
		w.reply(c, done, now, invokeAcquire)
		return
	}
	c.token = w.tokens
	w.reply(c, done, now, invokeRead)
}

// stale says whether the storage, fencing, rejects c's request; it remembers c's token.
func (w *world) stale(c *client) bool {
	t := w.tokenOf(c)
	if t == nil {
		return false
	}
	if *t < w.highest {
		return true
	}
	w.highest = *t
	return false
}

// maybePause pauses the holder c after its read when a pause is due: for longer than its
// lease, so that another client is granted the lock before c writes.
func (w *world) maybePause(c *client, now int64) {
	if now < w.nextPause || c.pausedUntil > now {
		return
	}
	start := now + w.rng.Int64N(200e3)
	stop := start + int64(ttl) + int64(ttl)/4 + w.rng.Int64N(int64(ttl))
	c.pausedUntil = stop
	w.nextPause = stop + w.exp(pauseEvery)
	fault := history.Event{Type: history.Info, Process: history.NemesisProcess, Fault: "pause",
		Targets: []string{history.TargetOfClient(c.process)}}
	fault.Func, fault.Time = history.Start, start
	w.add(fault)
	fault.Func, fault.Time = history.Stop, stop
	w.add(fault)
}

// maybeKill kills the holder c after its read was served when a kill is due (Kills), and
// says whether it did: the read's reply is lost with the worker (the harness records the
// read info just after the kill) or arrives just before the kill. A new client takes c's
// place; the lock stays with the dead one until its lease runs out.
func (w *world) maybeKill(c *client, now int64) bool {
	if !w.cfg.Kills || now < w.nextKill || c.pausedUntil > now {
		return false
	}
	read := c.done
	var at int64
	if read.Type == history.OK && w.rng.IntN(2) == 0 { // killed before it invoked its write
		w.emit(c, read)
		at = read.Time + 1 + w.rng.Int64N(10e3)
	} else {
		at = now + 1 + w.rng.Int64N(read.Time-now)
		w.emit(c, history.Event{Type: history.Info, Func: history.Read, Time: at + 50e3 + w.rng.Int64N(450e3),
			Message: "worker exited during the operation (signal: killed)"})
	}
	fault := history.Event{Type: history.Info, Process: history.NemesisProcess, Fault: history.KillClient.Name,
		Targets: []string{history.TargetOfClient(c.process)}, Time: at}
	fault.Func = history.Start
	w.add(fault)
	fault.Func = history.Stop
	w.add(fault)
	w.nextKill = at + w.exp(killEvery)
	c.process += w.cfg.Clients
	c.token, c.read = 0, 0
	c.next, c.at = invokeAcquire, at+int64(restart)+w.rng.Int64N(int64(restart))
	return true
}

// WriteRun writes a run directory that `lockbreaker check` reads: the generated history as
// history.jsonl.
func WriteRun(dir string, cfg Config) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, history.FileName))
	if err != nil {
		return err
	}
	out := bufio.NewWriter(f)
	enc := json.NewEncoder(out)
	if err := Emit(cfg, func(e history.Event) error { return enc.Encode(e) }); err != nil {
		f.Close()
		return err
	}
	if err := out.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

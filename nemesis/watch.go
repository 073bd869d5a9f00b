package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// watcher follows the history as it is recorded, so targeted faults act on what the
// clients do instead of on guessed lengths of time, and see their hazards occur. Whoever
// holds a watcher keeps following it (next, wait, await...) while it acts on what it saw:
// a subscription that is not read drops events.
type watcher struct {
	events <-chan history.Event
	// holding are the grants of the processes that have not started to release the lock,
	// and began when each of those grants' last attempt began.
	holding map[int]history.Event
	began   map[int]int64
	// last is the last grant seen, and lastBegan when its last attempt began.
	last      history.Event
	lastBegan int64
	// acquiring are the latest acquires' invocation times, by process; waiting those of
	// the acquires not yet completed.
	acquiring, waiting map[int]int64
	// writing are the storage writes invoked and not yet answered, by process; lastWrite is
	// the last write the storage accepted.
	writing   map[int]bool
	lastWrite history.Event
	// latest is the index of each process's last event followed.
	latest map[int]int
	// states are the clients' states.
	states history.States
	// granted, when set, sees every grant as it is followed: how a fault sees its hazard.
	granted func(grant history.Event)
	// selfStopped are the clients that stopped themselves for the watcher (nextReader),
	// and when, until a fault takes or lets go of them.
	selfStopped map[int]int64
	// serving are the held grants whose lease a fault watches for its hazard made real:
	// an answer to another client by the lock service in the state the fault left it.
	serving []*served
	// fired is the last deadline next saw fire: a wait that goes on after it is over.
	fired <-chan time.Time
	// seeing, while each follows the history, is its see.
	seeing func(history.Event)
}

func watch(events <-chan history.Event) *watcher {
	return &watcher{events: events, holding: map[int]history.Event{}, began: map[int]int64{}, acquiring: map[int]int64{},
		waiting: map[int]int64{}, writing: map[int]bool{}, latest: map[int]int{}, states: history.States{}, selfStopped: map[int]int64{}}
}

// holds reports whether process p holds the lock by its own account.
func (w *watcher) holds(p int) bool {
	_, ok := w.holding[p]
	return ok
}

// next returns the next event; false once ctx ends or deadline fires (nil: never). A
// fault's goroutine may run long after the events it waits on were recorded (a busy host,
// a run stopping early), so an end never hides them: past the deadline, next still returns
// each event recorded already; once ctx ends, it follows them all (a grant that made a
// hazard is seen, and handed to each's see) and returns false, so that nothing acts anew.
func (w *watcher) next(ctx context.Context, deadline <-chan time.Time) (history.Event, bool) {
	if ctx.Err() == nil && (deadline == nil || deadline != w.fired) {
		select {
		case <-ctx.Done():
		case <-deadline:
			w.fired = deadline
		case e := <-w.events:
			w.follow(e)
			return e, true
		}
	}
	if ctx.Err() == nil {
		return w.queued()
	}
	for {
		e, ok := w.queued()
		if !ok {
			return e, false
		}
		if w.seeing != nil {
			w.seeing(e)
		}
	}
}

// queued follows the next event recorded already, if there is one.
func (w *watcher) queued() (history.Event, bool) {
	select {
	case e := <-w.events:
		w.follow(e)
		return e, true
	default:
		return history.Event{}, false
	}
}

// follow takes e into the watcher's account of the clients.
func (w *watcher) follow(e history.Event) {
	w.latest[e.Process] = e.Index
	w.states.Follow(e)
	if e.Func == history.Acquire && e.IsCompletion() {
		delete(w.waiting, e.Process)
	}
	switch {
	case e.Func == history.Acquire && e.Type == history.Invoke:
		w.acquiring[e.Process] = e.Time
		w.waiting[e.Process] = e.Time
	case e.Func == history.Acquire && e.Type == history.OK:
		// The last attempt's start, when the client knows it: earlier attempts wrote nothing.
		// 0 for an acquire invoked before the watch began.
		began := max(w.acquiring[e.Process], e.EffectFrom)
		w.holding[e.Process], w.began[e.Process], w.last, w.lastBegan = e, began, e, began
		if w.granted != nil {
			w.granted(e)
		}
		w.answered(e)
	case e.Func == history.Acquire && e.IsCompletion():
		w.answered(e) // a busy answer, or on independent nodes any: an attempt was made
	case e.Func == history.Write && e.Type == history.Invoke:
		w.writing[e.Process] = true
	case e.Func == history.Write:
		delete(w.writing, e.Process)
		if e.Type == history.OK {
			w.lastWrite = e
		}
	case e.Func == history.Release && e.Type == history.Invoke:
		w.keptWaiting(e)
		delete(w.holding, e.Process)
		delete(w.began, e.Process)
	}
}

// catchUp follows every event recorded so far and not yet followed, so that what the
// watcher says of the clients is how they are now: a fault aimed at the holder of an event
// read from the channel finds that it has released since.
func (w *watcher) catchUp() {
	for {
		if _, ok := w.queued(); !ok {
			return
		}
	}
}

// wait follows the history for d; false when ctx ended first.
func (w *watcher) wait(ctx context.Context, d time.Duration) bool {
	w.each(ctx, d, func(history.Event) {})
	return ctx.Err() == nil
}

// each follows the history for d, or until ctx ends, and hands see every event.
func (w *watcher) each(ctx context.Context, d time.Duration, see func(history.Event)) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	w.seeing = see
	defer func() { w.seeing = nil }()
	for {
		e, ok := w.next(ctx, timer.C)
		if !ok {
			return
		}
		see(e)
	}
}

// waitUntil follows the history until done says so, at most d; it says whether done did.
func (w *watcher) waitUntil(ctx context.Context, d time.Duration, done func() bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !done() {
		if _, ok := w.next(ctx, timer.C); !ok {
			return false
		}
	}
	return true
}

// schedule calls inject at the schedule's moments (schedule's), following the history
// meanwhile.
func (w *watcher) schedule(ctx context.Context, env Env, inject func(draw) error) error {
	return shots(env, func(d time.Duration) bool { return w.wait(ctx, d) }, func(st history.ClientState) ([]int, bool) {
		var in []int
		ok := w.waitUntil(ctx, never, func() bool {
			in = w.states.In(st, env.Workers.Processes())
			return len(in) > 0
		})
		return in, ok
	}, inject)
}

// never bounds a wait that only the run's end ends.
const never = time.Duration(1<<63 - 1)

// leaseEnd is when process p's lease ends at the earliest, on CLOCK_MONOTONIC: the
// validity its grant states (Redlock clients state it) from the grant on, else a TTL from
// when its granted attempt began, since every server that granted it set its lease after
// that (or from the grant, for an acquire invoked before the watch began). 0 when p holds
// nothing.
func (w *watcher) leaseEnd(p int, ttl time.Duration) int64 {
	grant, ok := w.holding[p]
	if !ok {
		return 0
	}
	if validity, err := time.ParseDuration(grant.Detail[history.Validity]); err == nil {
		return grant.Time + validity.Nanoseconds()
	}
	began := w.began[p]
	if began == 0 {
		began = grant.Time
	}
	return began + ttl.Nanoseconds()
}

// pauseInLease keeps holder p inside its critical section (pause-in-lease) while fault does
// its work, then until another client has taken the lock over or only what p needs to
// finish is left of its lease (its work, and a twentieth of the lease for its last requests),
// whichever comes first; a fault that reports it could not do its work ends the pause at
// once. A correct lock lets nobody in within the lease, so a second holder meanwhile is the
// fault's doing; a holder that overruns its lease after the thaw would be a pause's.
func (w *watcher) pauseInLease(ctx context.Context, env Env, p int, fault func() bool) error {
	thaw := w.leaseEnd(p, env.TTL) - (env.Work + env.TTL/20).Nanoseconds()
	return w.pauseWorker(ctx, env, history.PauseInLease, p, func() {
		if fault() {
			w.awaitTakeover(ctx, p, untilTime(thaw))
		}
	})
}

// untilTime is how long from now until t (CLOCK_MONOTONIC), or 0 when it has passed.
func untilTime(t int64) time.Duration { return max(0, time.Duration(t-history.Now())) }

// awaitTakeover waits until a process other than p has been granted the lock and has then
// completed a storage request, so the storage has seen the new holder (and its token, which
// is what makes fencing reject p's stale write); or until limit has passed. It says whether
// the takeover happened.
func (w *watcher) awaitTakeover(ctx context.Context, p int, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	granted := map[int]bool{}
	for {
		e, ok := w.next(ctx, timer.C)
		if !ok {
			return false
		}
		if e.Process == p || e.Type != history.OK {
			continue
		}
		switch e.Func {
		case history.Acquire:
			granted[e.Process] = true
		case history.Read, history.Write:
			if granted[e.Process] {
				return true
			}
		}
	}
}

// awaitGrant waits for an acquire by process p (any when p < 0) that succeeded at or after
// notBefore.
func (w *watcher) awaitGrant(ctx context.Context, p int, notBefore int64) (history.Event, bool) {
	for {
		e, ok := w.next(ctx, nil)
		if !ok || e.Func == history.Acquire && e.Type == history.OK && e.Time >= notBefore && (p < 0 || e.Process == p) {
			return e, ok
		}
	}
}

// awaitRelease waits until process p starts releasing the lock, or until limit has passed.
func (w *watcher) awaitRelease(ctx context.Context, p int, limit time.Duration) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for w.holds(p) {
		if _, ok := w.next(ctx, timer.C); !ok {
			return
		}
	}
}

// grantBegunAfter waits up to within for a grant whose acquire began at or after t and
// whose holder still holds the lock once every event recorded so far is followed, unless
// the last grant already seen is one.
func (w *watcher) grantBegunAfter(ctx context.Context, t int64, within time.Duration) (history.Event, bool) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		w.catchUp()
		if w.last.Time != 0 && w.lastBegan >= t && w.holds(w.last.Process) && w.holding[w.last.Process].Index == w.last.Index {
			return w.last, true
		}
		if _, ok := w.next(ctx, timer.C); !ok {
			return history.Event{}, false
		}
	}
}

// awaitRefused waits up to within for an acquire answered with a message holding refusal
// (a server's own words for refusing it), and says whether one came.
func (w *watcher) awaitRefused(ctx context.Context, within time.Duration, refusal string) bool {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		e, ok := w.next(ctx, timer.C)
		if !ok {
			return false
		}
		if e.Func == history.Acquire && e.Type != history.Invoke && strings.Contains(e.Message, refusal) {
			return true
		}
	}
}

// awaitAcquire waits up to within for an acquire invoked at or after t, unless one has been
// already.
func (w *watcher) awaitAcquire(ctx context.Context, t int64, within time.Duration) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	invoked := func() bool {
		for _, at := range w.acquiring {
			if at >= t {
				return true
			}
		}
		return false
	}
	for w.catchUp(); !invoked(); {
		if _, ok := w.next(ctx, timer.C); !ok {
			return
		}
	}
}

// readerGrantedAfter waits up to within for a client that reads the register under a
// grant whose acquire began at or after t, while accept says its grant is the one wanted
// (nextReader: directed, it has stopped itself after its read); others are let go.
func (w *watcher) readerGrantedAfter(ctx context.Context, env Env, t int64, within time.Duration,
	accept func() (bool, error)) (history.Event, bool, error) {
	deadline := time.After(within)
	for {
		p, ok := w.nextReader(ctx, env, deadline)
		if !ok {
			return history.Event{}, false, nil
		}
		if w.began[p] >= t {
			switch ok, err := accept(); {
			case err != nil:
				return history.Event{}, false, errors.Join(err, w.letGo(env, p))
			case ok:
				return w.holding[p], true, nil
			}
		}
		if err := w.letGo(env, p); err != nil {
			return history.Event{}, false, err
		}
	}
}

// seeTakeovers records hazard h, seen by fault, each time a client other than p is
// granted the lock while p still holds it by its own account, until stop is called.
func (w *watcher) seeTakeovers(env Env, fault string, h history.Hazard, p int) (stop func()) {
	w.granted = func(grant history.Event) {
		held, ok := w.holding[p]
		if grant.Process == p || !ok {
			return
		}
		recordHazard(env, fault, h, grant.Time, map[string]string{"holder": grantText(held), "granted": grantText(grant)},
			history.TargetOfClient(p), history.TargetOfClient(grant.Process))
	}
	return func() { w.granted = nil }
}

// grantText names a grant for a hazard's detail: "worker-2 #41 token 7".
func grantText(grant history.Event) string {
	s := fmt.Sprintf("%s #%d", history.TargetOfClient(grant.Process), grant.Index)
	if grant.Token != nil {
		s += fmt.Sprintf(" token %d", *grant.Token)
	}
	return s
}

// served watches one held grant, the victim of a fault, for the fault's hazard made real:
// while the fault's condition holds on a node (enough of the grant's nodes are back from a
// crash without it, the primary that made it is down, a node's clock is past its lease),
// that node answers another client's acquire (a grant naming it, a grant or a busy answer
// when answers do not name their nodes, a queued waiter kept waiting) while the victim
// still holds the grant by its own account and within its lease. Conditions are added by
// the fault as they begin and end, from any goroutine; the answers are followed by the
// watcher's, also after the release, for answers given before it and heard of late.
type served struct {
	env    Env
	fault  string
	hazard history.Hazard
	victim history.Event // the grant
	// leaseEnd is when the victim's lease ends; released when it began to release (0:
	// not yet). An answer counts when it was given before both.
	leaseEnd, released int64
	// grantsFrom, when not 0, is when a second grant began to be the fault's doing though
	// no condition holds yet for busy answers: the promoted replica of a failover grants
	// before the old primary, which refuses, is down.
	grantsFrom int64
	mu         sync.Mutex
	on         []condition
	seen       bool // recorded already: once per grant
}

// condition is a fault's condition on node from since until until (0: still on).
type condition struct {
	node         string
	since, until int64
}

// watchServed starts watching grant for hazard h, seen by fault, for as long as its holder
// holds it.
func (w *watcher) watchServed(env Env, fault string, h history.Hazard, grant history.Event) *served {
	s := &served{env: env, fault: fault, hazard: h, victim: grant, leaseEnd: w.leaseEnd(grant.Process, env.TTL)}
	w.serving = append(w.serving, s)
	return s
}

// answerLag is how long after the victim's lease an answer within it may still be heard
// of, in leases: a busy acquire completes up to an acquire timeout (2 TTLs) after the
// last attempt it reports.
const answerLag = 3

// begin notes that the fault's condition holds on node ("": on whichever node answers)
// from t on; end that it stopped at t. Both do nothing on a nil watch (no grant held).
func (s *served) begin(node string, t int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = append(s.on, condition{node: node, since: t})
}

func (s *served) end(node string, t int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.on {
		if s.on[i].node == node && s.on[i].until == 0 {
			s.on[i].until = t
		}
	}
}

// answered takes an acquire's answer (a grant, a fail or an indeterminate end) into every
// served watch,
// and ends the watches no answer can count for any more: recorded already, past their
// lease by answerLag, or whose grant was replaced without a release.
func (w *watcher) answered(e history.Event) {
	w.serving = slices.DeleteFunc(w.serving, func(s *served) bool {
		replaced := s.released == 0 && (!w.holds(s.victim.Process) || w.holding[s.victim.Process].Index != s.victim.Index)
		return s.seen || replaced || e.Time > s.leaseEnd+answerLag*s.env.TTL.Nanoseconds()
	})
	if len(w.serving) == 0 {
		return
	}
	from, to := max(w.acquiring[e.Process], e.EffectFrom), e.Time
	if e.EffectTo != 0 {
		to = e.EffectTo
	}
	named := slices.DeleteFunc(strings.Split(e.Detail[grantNodes], ","), func(n string) bool { return n == "" })
	every, _ := time.ParseDuration(e.Detail[history.BusyEvery])
	for _, s := range w.serving {
		if e.Process == s.victim.Process {
			continue
		}
		if s.env.IndependentMajority && e.Type != history.OK {
			// On a majority of independent nodes a refusal may be other clients' split votes
			// rather than the grant remembered, so no answer but a grant speaks of it. The
			// danger is the asking: another client's attempt, whatever its answer, while
			// enough of the grant's nodes had forgotten it (down, or back without it) for a
			// majority without them, within the victim's lease. A lock that forgets grants it
			// again; one whose killed nodes stay down past the lease (antirez's delayed
			// restart) cannot answer it.
			if node, ok := s.askedIn(w.acquiring[e.Process], e.Time); ok {
				s.record(w, node, e.Process, e.Time, "asked for it while enough of its nodes had forgotten it ("+answerText(e)+")")
			}
			continue
		}
		if e.Type != history.OK && e.Error != history.ErrLockBusy {
			continue // neither a grant nor a busy answer: the service may not have been reached
		}
		busyFrom, busyTo, busyNamed := from, to, named
		if e.Type == history.OK {
			// A second grant while the victim holds within its lease is the danger itself,
			// from whenever its attempt began: a node that remembered the grant refuses.
			if node, ok := s.answeredIn(to, to, 0, named); ok {
				s.record(w, node, e.Process, to, "granted "+grantText(e))
				continue
			}
			if s.grantedIn(to) {
				s.record(w, "", e.Process, to, "granted "+grantText(e))
				continue
			}
			if every == 0 {
				continue
			}
			// The attempts before the granted one found the lock busy.
			busyFrom, busyTo, busyNamed = w.acquiring[e.Process], e.EffectFrom, nil
		}
		if s.env.IndependentMajority {
			continue // a grant outside the condition says nothing there either
		}
		if node, ok := s.answeredIn(busyFrom, busyTo, every, busyNamed); ok {
			s.record(w, node, e.Process, busyTo, "refused it as busy")
		}
	}
}

// record writes the hazard: at t, node (or the service) answered process q as what says,
// while the victim held its grant within its lease. Once per grant.
func (s *served) record(w *watcher, node string, q int, t int64, what string) {
	s.seen = true
	v := s.victim
	targets := []string{history.TargetOfClient(v.Process), history.TargetOfClient(q)}
	if node != "" {
		targets = append([]string{node}, targets...)
	}
	recordHazard(s.env, s.fault, s.hazard, t, map[string]string{"holder": grantText(v), "answer": what,
		"lease left": history.Duration(t, s.leaseEnd).Round(time.Millisecond).String()},
		targets...)
}

// keptWaiting notes the start of a release in its grant's served watches, the end of the
// hold their answers must come within: on a
// queue lock (Env.QueueLock), a client whose acquire was still waiting then, and had been
// while the fault's condition held, was refused by the service in that state: it kept the
// waiter in its queue. A polling client's wait says nothing of the kind (its attempts may
// hang on a dead node), so only its busy answers count.
func (w *watcher) keptWaiting(release history.Event) {
	for _, s := range w.serving {
		v := s.victim
		if release.Process != v.Process || s.released != 0 || w.holding[v.Process].Index != v.Index {
			continue
		}
		s.released = release.Time
		if !s.env.QueueLock || s.seen || release.Time > s.leaseEnd {
			continue
		}
		for _, q := range slices.Sorted(maps.Keys(w.waiting)) {
			if node, ok := s.heldDuring(w.waiting[q], release.Time); ok && q != v.Process {
				s.record(w, node, q, release.Time, "kept it waiting")
				break
			}
		}
	}
}

// heldDuring finds a node on which the condition held at some time in [from, to].
func (s *served) heldDuring(from, to int64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.on {
		if c.since < to && (c.until == 0 || c.until > max(from, c.since)) {
			return c.node, true
		}
	}
	return "", false
}

// askedIn finds a node on which the condition held at some time in [from, to] within the
// victim's hold and lease.
func (s *served) askedIn(from, to int64) (string, bool) {
	end := s.leaseEnd
	if s.released != 0 {
		end = min(end, s.released)
	}
	if from <= 0 || from >= end {
		return "", false
	}
	return s.heldDuring(from, min(to, end))
}

// grantedIn says whether a grant at t falls after grantsFrom, within the victim's hold and
// lease.
func (s *served) grantedIn(t int64) bool {
	end := s.leaseEnd
	if s.released != 0 {
		end = min(end, s.released)
	}
	return s.grantsFrom != 0 && s.grantsFrom <= t && t <= end
}

// answerText is an acquire's answer in words.
func answerText(e history.Event) string {
	switch {
	case e.Type == history.Info:
		return "no answer"
	case e.Error != "":
		return "refused: " + string(e.Error)
	}
	return "refused"
}

// answeredIn finds a node on which the condition held while the service gave an answer,
// within the victim's hold and lease, and which the answer involves: one it names, or any
// when it names none. The answer is one given somewhere in [from, to] (every 0), or, for a
// run of busy answers, one in any stretch of every within [from, to].
func (s *served) answeredIn(from, to int64, every time.Duration, named []string) (string, bool) {
	if from <= 0 {
		return "", false
	}
	end := s.leaseEnd
	if s.released != 0 {
		end = min(end, s.released)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.on {
		until := end
		if c.until != 0 {
			until = min(until, c.until)
		}
		if len(named) > 0 && !slices.Contains(named, c.node) {
			continue
		}
		switch {
		case every == 0 && c.since <= from && to <= until:
			return c.node, true
		case every > 0 && min(to, until)-max(from, c.since) >= every.Nanoseconds():
			return c.node, true
		}
	}
	return "", false
}

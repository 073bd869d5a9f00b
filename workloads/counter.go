package workloads

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// Counter is the lock-counter workload: acquire the lock, read the register, think for a
// while (the window where a GC pause hurts; asleep, or busy on the CPU), write the value
// read plus one, release.
// With a correct lock the register ends equal to the number of acknowledged writes.
type Counter struct {
	Process int
	Key     string
	Lock    Lock
	// Fencing sends the grant's token with every storage request. Without it the token,
	// if the lock hands one out, is recorded with the grant but the storage never sees it.
	Fencing bool
	// Storage connects to the shared storage; it is called again after a connection broke.
	Storage func(context.Context) (*storage.Client, error)
	// Work is the time between reading and writing.
	Work time.Duration
	// Busy makes the work Work of CPU work instead of a sleep: a holder a CPU quota can
	// starve (throttle-holder).
	Busy bool
	// ExtendEvery, when not 0, makes a holder extend its lease (Lock must be an Extender)
	// after each ExtendEvery of its work and once more just before it writes; a holder
	// whose extend did not succeed does not write, and releases.
	ExtendEvery time.Duration
	// AcquireTimeout bounds one Acquire, ExtendTimeout one Extend, OpTimeout one storage
	// request or release.
	AcquireTimeout, ExtendTimeout time.Duration
	OpTimeout                     time.Duration
	// Period is the time from one cycle's start to the next's that the client aims at:
	// one over its rate of lock cycles per second. Zero runs cycles back to back, as fast
	// as they go. With a Period the client pauses at least Yield after every cycle, so a
	// client that just released does not always win over those waiting for the lock (set
	// it to their retry interval).
	Period time.Duration
	Yield  time.Duration
	// Name, when set, is recorded with every grant (history.ClientDetail): the lock
	// client's, in a run whose slots several clients share.
	Name string
	// Emit records events, in order and at once: a worker writes them to the harness in
	// one write. It must not block for long.
	Emit func(...history.Event)
	// Hold, when set, is called between a read under the lock and its write, once the read
	// is emitted: where a worker armed by a fault stops itself.
	Hold func()

	store *storage.Client
	// gone is the error of a lock client that cannot go on (ErrLost, ErrBroken): Run
	// stops at once and returns it.
	gone error
	// done is the last completion, not yet emitted: it goes out with the next invocation
	// (one write for both), or before the client waits for anything but a request, so
	// the harness still hears of every outcome as soon as anyone could act on it. An
	// invocation is never held back: once its request is sent it may take effect, and a
	// client killed after that must have recorded it.
	done *history.Event
}

// Run does cycles until ctx ends, then finishes the cycle under way (a holder still
// writes and releases) and returns. When the lock client itself is gone or broke (an
// error wrapping ErrLost or ErrBroken), it records the operation as indeterminate and
// returns that error at once: nothing the client does afterwards could be recorded
// honestly, so its worker ends and a new client takes its place (or the run stops).
func (w *Counter) Run(ctx context.Context) error {
	defer func() {
		w.flush()
		if w.store != nil {
			w.store.Close()
		}
	}()
	for ctx.Err() == nil && w.gone == nil {
		started := time.Now()
		w.cycle(ctx)
		if w.Period == 0 || w.gone != nil {
			continue
		}
		w.flush()
		select {
		case <-ctx.Done():
		case <-time.After(max(w.Period-time.Since(started), w.Yield)):
		}
	}
	return w.gone
}

func (w *Counter) cycle(ctx context.Context) {
	grant, ok := w.acquire(ctx)
	if !ok {
		return
	}
	var token *int64
	if grant.HasToken && w.Fencing {
		token = history.Int64(grant.Token)
	}
	if value, ok := w.storageOp(history.Read, token, 0); ok {
		if w.Hold != nil {
			w.flush()
			w.Hold()
		}
		if w.work() {
			w.storageOp(history.Write, token, value+1)
		}
	}
	w.release()
}

// work spends Work between a read and its write, extending the lease as it goes when
// the holder extends; it reports whether the holder may still write.
func (w *Counter) work() bool {
	left := w.Work
	for {
		slice := left
		if w.ExtendEvery > 0 {
			slice = min(left, w.ExtendEvery)
		}
		if slice > 0 {
			w.flush()
			if w.Busy {
				Busy(slice)
			} else {
				time.Sleep(slice)
			}
		}
		left -= slice
		if w.ExtendEvery > 0 && !w.extend() {
			return false
		}
		if left <= 0 {
			return true
		}
	}
}

// extend renews the holder's lease, and reports whether it was renewed.
func (w *Counter) extend() bool {
	inv := w.invoke(history.Event{Func: history.Extend})
	ctx, cancel := context.WithTimeout(context.Background(), w.ExtendTimeout)
	defer cancel()
	err := w.Lock.(Extender).Extend(ctx)
	w.noteGone(err)
	w.complete(completion(inv, err, ErrNotHeld, history.ErrNotHeld))
	return err == nil
}

func (w *Counter) acquire(ctx context.Context) (Grant, bool) {
	inv := w.invoke(history.Event{Func: history.Acquire})
	actx, cancel := context.WithTimeout(ctx, w.AcquireTimeout)
	defer cancel()
	grant, err := w.Lock.Acquire(actx)
	w.noteGone(err)
	done := completion(inv, err, ErrBusy, history.ErrLockBusy)
	if busy := (*BusyError)(nil); errors.As(err, &busy) { // when the service said busy
		done.EffectFrom, done.EffectTo = busy.Since, busy.Until
		done.Detail = map[string]string{history.BusyEvery: busy.Every.String()}
	}
	if spent := (*SpentError)(nil); errors.As(err, &spent) {
		done.Detail = map[string]string{history.ValiditySpent: spent.Took.String()}
	}
	if err == nil {
		if grant.HasToken {
			done.Token = history.Int64(grant.Token)
		}
		done.WatchEvents, done.Detail = grant.WatchEvents, grant.Detail
		if grant.BusyEvery > 0 || w.Name != "" {
			done.Detail = maps.Clone(grant.Detail)
			if done.Detail == nil {
				done.Detail = map[string]string{}
			}
		}
		if grant.BusyEvery > 0 {
			done.Detail[history.BusyEvery] = grant.BusyEvery.String()
		}
		if w.Name != "" {
			done.Detail[history.ClientDetail] = w.Name
		}
		done.EffectFrom = grant.AttemptStarted // complete drops it if the lock got it wrong
	}
	w.complete(done)
	return grant, err == nil
}

func (w *Counter) release() {
	inv := w.invoke(history.Event{Func: history.Release})
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	err := w.Lock.Release(ctx)
	w.noteGone(err)
	w.complete(completion(inv, err, ErrNotHeld, history.ErrNotHeld))
}

// noteGone keeps a lock operation's error when it says the client cannot go on.
func (w *Counter) noteGone(err error) {
	if errors.Is(err, ErrLost) || errors.Is(err, ErrBroken) {
		w.gone = err
	}
}

// completion ends inv by err: nil is ok; definite means the operation certainly did not
// happen (fail, recorded as kind); anything else leaves it unknown (info).
func completion(inv history.Event, err, definite error, kind history.ErrorKind) history.Event {
	done := inv
	switch {
	case err == nil:
		done.Type = history.OK
	case errors.Is(err, definite):
		done.Type, done.Error = history.Fail, kind
		if err.Error() != definite.Error() { // keep the client's own words, e.g. "session expired"
			done.Message = err.Error()
		}
	default:
		done.Type, done.Message = history.Info, err.Error()
	}
	return done
}

// storageOp reads (value ignored) or writes value, carrying token when there is one.
// It reports the value read and whether the request was accepted.
func (w *Counter) storageOp(f history.Func, token *int64, value int64) (int64, bool) {
	inv := history.Event{Func: f, Token: token}
	req := storage.Request{Op: storage.OpRead, Key: w.Key, Token: token}
	if f == history.Write {
		inv.Value = history.Int64(value)
		req.Op, req.Value = storage.OpWrite, value
	}
	inv = w.invoke(inv)
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	resp, err := w.do(ctx, req)
	done := inv
	// The storage's own clock says when it applied (or refused) the request.
	done.EffectFrom, done.EffectTo = resp.Applied, resp.Applied
	var rejected *storage.RejectedError
	switch {
	case err == nil:
		done.Type = history.OK
		if f == history.Read {
			done.Value = history.Int64(resp.Value)
		}
	case errors.As(err, &rejected):
		done.Type, done.Error, done.Message = history.Fail, rejected.Reason, rejected.Message
	default:
		done.Type, done.Message = history.Info, err.Error()
	}
	w.complete(done)
	return resp.Value, err == nil
}

func (w *Counter) do(ctx context.Context, req storage.Request) (storage.Response, error) {
	if w.store == nil {
		c, err := w.Storage(ctx)
		if err != nil {
			// Nothing was sent: the request certainly did not happen.
			return storage.Response{}, &storage.RejectedError{Reason: history.ErrUnreachable, Message: err.Error()}
		}
		w.store = c
	}
	resp, err := w.store.Send(ctx, req)
	var rejected *storage.RejectedError
	if err != nil && !errors.As(err, &rejected) {
		w.store = nil // Send closed the broken connection; dial again next time
	}
	return resp, err
}

func (w *Counter) invoke(e history.Event) history.Event {
	e.Type, e.Process, e.Key, e.Time = history.Invoke, w.Process, w.Key, history.Now()
	if w.done != nil {
		w.Emit(*w.done, e)
		w.done = nil
	} else {
		w.Emit(e)
	}
	return e
}

// flush emits the completion held back, if any.
func (w *Counter) flush() {
	if w.done != nil {
		w.Emit(*w.done)
		w.done = nil
	}
}

// complete records a completion built from its invocation, to be emitted with the next
// invocation (see done); the invocation's value and token stay on it unless the
// completion set its own. What the servers saw (EffectFrom, EffectTo) is kept only when
// it lies within the operation, as the history demands: a lock's AttemptStarted read from
// another clock, or a storage on another kernel, would otherwise make the whole history
// unreadable.
func (w *Counter) complete(e history.Event) {
	invoked := e.Time
	e.Time = history.Now()
	if e.EffectFrom < invoked || e.EffectFrom > e.Time {
		e.EffectFrom = 0
	}
	if e.EffectTo < max(invoked, e.EffectFrom) || e.EffectTo > e.Time {
		e.EffectTo = 0
	}
	w.done = &e
}

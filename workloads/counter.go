package workloads

import (
	"context"
	"errors"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// Counter is the lock-counter workload: acquire the lock, read the register, think for a
// while (the window where a GC pause hurts), write the value read plus one, release.
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
	// AcquireTimeout bounds one Acquire; OpTimeout one storage request.
	AcquireTimeout time.Duration
	OpTimeout      time.Duration
	// Pace is the pause between cycles, so a client that just released does not always win.
	Pace time.Duration
	// Emit records an event; it must not block for long.
	Emit func(history.Event)

	store *storage.Client
}

// Run does cycles until ctx ends, then finishes the cycle under way (a holder still
// writes and releases) and returns.
func (w *Counter) Run(ctx context.Context) {
	defer func() {
		if w.store != nil {
			w.store.Close()
		}
	}()
	for ctx.Err() == nil {
		w.cycle(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(w.Pace):
		}
	}
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
		time.Sleep(w.Work)
		w.storageOp(history.Write, token, value+1)
	}
	w.release()
}

func (w *Counter) acquire(ctx context.Context) (Grant, bool) {
	inv := w.invoke(history.Event{Func: history.Acquire})
	actx, cancel := context.WithTimeout(ctx, w.AcquireTimeout)
	defer cancel()
	grant, err := w.Lock.Acquire(actx)
	done := completion(inv, err, ErrBusy, history.ErrLockBusy)
	if err == nil {
		if grant.HasToken {
			done.Token = history.Int64(grant.Token)
		}
		done.WatchEvents, done.Detail = grant.WatchEvents, grant.Detail
	}
	w.complete(done)
	return grant, err == nil
}

func (w *Counter) release() {
	inv := w.invoke(history.Event{Func: history.Release})
	ctx, cancel := context.WithTimeout(context.Background(), w.OpTimeout)
	defer cancel()
	w.complete(completion(inv, w.Lock.Release(ctx), ErrNotHeld, history.ErrNotHeld))
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
		if err != definite { // keep the client's own words, e.g. "session expired"
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
	got, err := w.do(ctx, req)
	done := inv
	var rejected *storage.RejectedError
	switch {
	case err == nil:
		done.Type = history.OK
		if f == history.Read {
			done.Value = history.Int64(got)
		}
	case errors.As(err, &rejected):
		done.Type, done.Error, done.Message = history.Fail, rejected.Reason, rejected.Message
	default:
		done.Type, done.Message = history.Info, err.Error()
	}
	w.complete(done)
	return got, err == nil
}

func (w *Counter) do(ctx context.Context, req storage.Request) (int64, error) {
	if w.store == nil {
		c, err := w.Storage(ctx)
		if err != nil {
			// Nothing was sent: the request certainly did not happen.
			return 0, &storage.RejectedError{Reason: history.ErrUnreachable, Message: err.Error()}
		}
		w.store = c
	}
	v, err := w.store.Do(ctx, req)
	var rejected *storage.RejectedError
	if err != nil && !errors.As(err, &rejected) {
		w.store = nil // Do closed the broken connection; dial again next time
	}
	return v, err
}

func (w *Counter) invoke(e history.Event) history.Event {
	e.Type, e.Process, e.Key, e.Time = history.Invoke, w.Process, w.Key, history.Now()
	w.Emit(e)
	return e
}

// complete records a completion built from its invocation; the invocation's value and
// token stay on it unless the completion set its own.
func (w *Counter) complete(e history.Event) {
	e.Time = history.Now()
	w.Emit(e)
}

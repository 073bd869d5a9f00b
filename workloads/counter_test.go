package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/links"
	"github.com/lockbreaker/lockbreaker/workloads/locksvc"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// The counter workload against the real storage and a lock that needs no server: what it
// records is a history the parser accepts, with what the servers saw on the completions.

// fakeLock grants every acquire after busy refusals, through the shared retry loop, or
// with the AttemptStarted it is told to claim.
type fakeLock struct {
	busy    int   // refusals before each grant
	claim   int64 // when not 0, the AttemptStarted every grant claims
	refused int
}

func (l *fakeLock) Acquire(ctx context.Context) (Grant, error) {
	return retryWhileBusy(ctx, time.Microsecond, func(context.Context) (Grant, error) {
		if l.refused < l.busy {
			l.refused++
			return Grant{}, ErrBusy
		}
		l.refused = 0
		return Grant{AttemptStarted: l.claim}, nil
	})
}

func (l *fakeLock) Release(context.Context) error { return nil }
func (l *fakeLock) Close() error                  { return nil }

// runCounter runs cycles of a counter on lock until it has recorded at least n events,
// and returns them as the history parser reads them back: numbered as the recorder
// numbers them, written as JSON lines.
func runCounter(t *testing.T, lock Lock, n int) []history.Event {
	t.Helper()
	store, err := storage.Listen("127.0.0.1:0", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events []history.Event
	w := Counter{Key: "k", Lock: lock, AcquireTimeout: time.Minute, OpTimeout: time.Minute,
		Storage: func(ctx context.Context) (*storage.Client, error) { return storage.Dial(ctx, store.Addr(), 0) },
		Emit: func(batch ...history.Event) {
			for _, e := range batch {
				e.Index = len(events)
				events = append(events, e)
			}
			if len(events) >= n {
				cancel()
			}
		}}
	if err := w.Run(ctx); err != nil && len(events) < n {
		t.Logf("the counter stopped: %v", err)
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	file, err := history.Parse(&lines)
	if err != nil {
		t.Fatalf("the parser refuses the counter's history: %v", err)
	}
	return file.Events
}

func TestCounterRecordsWhatTheServersSaw(t *testing.T) {
	events := runCounter(t, &fakeLock{busy: 2}, 40)
	ops, err := history.Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	if last := events[len(events)-1]; last.Type == history.Invoke {
		t.Errorf("the history ends with an open %s: the last completion was never emitted", last.Func)
	}
	for _, op := range ops {
		c := op.Complete
		if c != nil && c.Type == history.Fail && c.Error == history.ErrLockBusy {
			continue // the last acquire, given up when the run ended
		}
		if c == nil || c.Type != history.OK {
			t.Fatalf("%s: %+v, want ok", op.Invoke.Func, c)
		}
		switch op.Invoke.Func {
		case history.Acquire:
			// The last attempt began after the call did: two refusals came first.
			if c.EffectFrom <= op.Invoke.Time || c.EffectFrom > c.Time || c.EffectTo != 0 {
				t.Errorf("acquire [%d, %d]: effect [%d, %d], want from the last attempt on", op.Invoke.Time, c.Time, c.EffectFrom, c.EffectTo)
			}
		case history.Read, history.Write:
			if c.EffectFrom == 0 || c.EffectFrom != c.EffectTo {
				t.Errorf("%s: effect [%d, %d], want the storage's own time", op.Invoke.Func, c.EffectFrom, c.EffectTo)
			}
		case history.Release:
			if c.EffectFrom != 0 || c.EffectTo != 0 {
				t.Errorf("release: effect [%d, %d], want none: nothing narrows it", c.EffectFrom, c.EffectTo)
			}
		}
	}
}

// A lock that claims an attempt outside the acquire (another clock, a bug) leaves the
// acquire's window as it was: the history stays readable.
func TestCounterDropsAnAttemptOutsideTheAcquire(t *testing.T) {
	for _, claim := range []int64{1, history.Now() + int64(time.Hour)} {
		for _, e := range runCounter(t, &fakeLock{claim: claim}, 8) {
			if e.Func == history.Acquire && e.EffectFrom != 0 {
				t.Errorf("claim %d: acquire recorded effect_from %d", claim, e.EffectFrom)
			}
		}
	}
}

// retryWhileBusy dates a grant from the attempt that was granted, not from the first.
func TestRetryWhileBusyDatesTheGrantedAttempt(t *testing.T) {
	var entered []int64
	g, err := retryWhileBusy(context.Background(), time.Microsecond, func(context.Context) (Grant, error) {
		entered = append(entered, history.Now())
		if len(entered) < 3 {
			return Grant{}, ErrBusy
		}
		return Grant{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.AttemptStarted < entered[1] || g.AttemptStarted > entered[2] {
		t.Errorf("AttemptStarted %d, want between the second attempt (%d) and the third, granted one (%d)", g.AttemptStarted, entered[1], entered[2])
	}

	// A lock that knows better keeps its own; a failure has none.
	g, _ = retryWhileBusy(context.Background(), time.Microsecond, func(context.Context) (Grant, error) {
		return Grant{AttemptStarted: 42}, nil
	})
	if g.AttemptStarted != 42 {
		t.Errorf("AttemptStarted %d, want the lock's own 42", g.AttemptStarted)
	}
	g, err = retryWhileBusy(context.Background(), time.Microsecond, func(context.Context) (Grant, error) {
		return Grant{}, errors.New("timeout")
	})
	if err == nil || g.AttemptStarted != 0 {
		t.Errorf("failed attempt: %+v, %v; want no grant", g, err)
	}
}

// An acquire whose every attempt asked nothing says why, not that another client holds
// the lock; one the service answered busy, then could not ask, says busy.
func TestRetryWhileBusySaysWhyNothingWasAsked(t *testing.T) {
	unasked := fmt.Errorf("%w (connect to postgres: refused)", ErrBusy)
	for _, answers := range [][]error{{unasked}, {unasked, unasked}, {ErrBusy, unasked}} {
		ctx, cancel := context.WithCancel(context.Background())
		tries := 0
		_, err := retryWhileBusy(ctx, time.Microsecond, func(context.Context) (Grant, error) {
			if tries++; tries >= len(answers) {
				cancel()
			}
			return Grant{}, answers[min(tries, len(answers))-1] // the loop may try once more before it sees ctx end
		})
		busy := (*BusyError)(nil)
		if answered := answers[0] == ErrBusy; answered != errors.As(err, &busy) || !answered && err != unasked {
			t.Errorf("attempts answered %v: got %v", answers, err)
		}
	}
}

// goneLock grants, then its client is gone at release (lost or broken, as err says).
type goneLock struct{ err error }

func (goneLock) Acquire(context.Context) (Grant, error) { return Grant{}, nil }
func (l goneLock) Release(context.Context) error        { return l.err }
func (goneLock) Close() error                           { return nil }

// A lock client that is gone ends the counter at once: its operation is recorded as
// indeterminate, and Run returns the client's error for the worker to exit with.
func TestCounterStopsWhenItsClientIsGone(t *testing.T) {
	for _, gone := range []error{ErrLost, ErrBroken} {
		err := fmt.Errorf("%w: program exited", gone)
		events := runCounter(t, goneLock{err}, 1000)
		last := events[len(events)-1]
		if last.Func != history.Release || last.Type != history.Info || last.Message != err.Error() {
			t.Errorf("%v: the history ends with %+v, want the release indeterminate with the client's words", gone, last)
		}
	}
}

// spentLock refuses every other acquire with a SpentError, through the shared retry loop.
type spentLock struct{ tries int }

func (l *spentLock) Acquire(ctx context.Context) (Grant, error) {
	return retryWhileBusy(ctx, time.Microsecond, func(context.Context) (Grant, error) {
		l.tries++
		if l.tries%2 == 1 {
			return Grant{}, &SpentError{Took: 3 * time.Second, TTL: 2 * time.Second}
		}
		return Grant{}, nil
	})
}

func (*spentLock) Release(context.Context) error { return nil }
func (*spentLock) Close() error                  { return nil }

// A majority granted too late is a definite refusal that the history keeps, attempt by
// attempt: the retry loop ends on it, and the counter records a failed acquire with how
// long the attempt took.
func TestSpentValidityIsAFailedAcquireOfItsOwn(t *testing.T) {
	lock := &spentLock{}
	var spent *SpentError
	if _, err := lock.Acquire(context.Background()); lock.tries != 1 || !errors.Is(err, ErrBusy) || !errors.As(err, &spent) {
		t.Fatalf("after %d tries: %v; want one try ending in a SpentError", lock.tries, err)
	}
	lock.tries = 0
	failed := 0
	for _, e := range runCounter(t, lock, 40) {
		if e.Func != history.Acquire || e.Type != history.Fail {
			continue
		}
		failed++
		if e.Error != history.ErrLockBusy || e.Detail[history.ValiditySpent] != "3s" || !strings.Contains(e.Message, "validity ran out") {
			t.Errorf("failed acquire %+v: want busy, %q 3s and the client's words", e, history.ValiditySpent)
		}
	}
	if failed == 0 {
		t.Error("no failed acquire recorded")
	}
}

// A lock request or a storage write whose connection breaks under it, reset or gone silent
// and then closed (by the proxies of package links, as reset-client and timeout-client
// break a client's links), may have taken effect for all the client can tell: the counter
// records it as indeterminate, never as failed or done. Here every link of the client
// breaks between its read and its write; the write, the release and the next acquire meet
// the break. Once healed, the client carries on: granted again when the lease it could not
// release ran out, it reads the register the dropped write never reached.
func TestCounterRecordsWhatABrokenConnectionCutOffAsIndeterminate(t *testing.T) {
	t.Parallel() // services of its own, waiting out a lease
	for _, b := range []links.Break{links.Reset(), links.Silence(200 * time.Millisecond)} {
		t.Run(b.String(), func(t *testing.T) {
			svc, err := locksvc.Listen("127.0.0.1:0", locksvc.Options{}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			store, err := storage.Listen("127.0.0.1:0", true, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			set, err := links.Open(netip.MustParseAddr("127.0.0.1"), 1, []string{svc.Addr()}, store.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			lock, err := newLocalLock(Config{Nodes: set.Nodes(0), Key: "k", TTL: 300 * time.Millisecond,
				OpTimeout: 5 * time.Second, Retry: 10 * time.Millisecond, Owner: "w0"})
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var done []history.Event
			broken := false
			w := Counter{Key: "k", Lock: lock, Fencing: true, AcquireTimeout: 5 * time.Second, OpTimeout: 5 * time.Second,
				Storage: func(ctx context.Context) (*storage.Client, error) { return storage.Dial(ctx, set.Storage(0), 0) },
				Hold: func() {
					if !broken {
						broken = true
						if err := set.Break(0, links.Reach{}, b); err != nil {
							t.Error(err)
						}
					}
				},
				Emit: func(batch ...history.Event) {
					for _, e := range batch {
						if e.Type == history.Invoke {
							continue
						}
						done = append(done, e)
						switch {
						case e.Func == history.Acquire && e.Type == history.Info:
							set.Heal() // the break met a lock request too: enough
						case e.Func == history.Write && e.Type == history.OK:
							cancel()
						}
					}
				}}
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			want := []string{"acquire ok", "read ok", "write info", "release info", "acquire info",
				"acquire ok", "read ok", "write ok", "release ok"}
			var got []string
			for _, e := range done {
				got = append(got, fmt.Sprintf("%s %s", e.Func, e.Type))
				if e.Type == history.Info {
					t.Logf("%s: %s", e.Func, e.Message)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("completions %q, want %q", got, want)
			}
			if read := done[6]; *read.Value != 0 {
				t.Errorf("after the heal the register read %d, want 0: the write was dropped in the network", *read.Value)
			}
		})
	}
}

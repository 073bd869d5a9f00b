package containers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// busyEngine answers a call only on its answerAt'th try (0: never): before that, a try
// waits until its context ends, as a request to an engine too busy to answer does. It
// remembers each try's again and how long it had.
type busyEngine struct {
	answerAt int
	again    []bool
	had      []time.Duration
}

func (e *busyEngine) try(ctx context.Context, again bool) error {
	e.again = append(e.again, again)
	deadline, _ := ctx.Deadline()
	e.had = append(e.had, time.Until(deadline))
	if len(e.again) == e.answerAt {
		return nil
	}
	<-ctx.Done()
	return fmt.Errorf("post /containers/x/kill: %w", ctx.Err())
}

// Issue 35: under load the engine answered a SIGSTOP late and the fault gave up.
func TestEngineCallTriesAgainWhenTheEngineDoesNotAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &busyEngine{answerAt: 3}
		start := time.Now()
		if err := engineCall(t.Context(), "send SIGSTOP to node n3", e.try); err != nil {
			t.Fatalf("answered on the third try: %v", err)
		}
		if want := []bool{false, true, true}; !slices.Equal(e.again, want) {
			t.Errorf("tries told again = %v, want %v", e.again, want)
		}
		if waited := time.Since(start); waited != 2*engineTimeout {
			t.Errorf("waited %s for two unanswered tries, want %s", waited, 2*engineTimeout)
		}
	})
}

func TestEngineCallSaysWhichCallWasSlowAndHowLongItWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &busyEngine{}
		start := time.Now()
		err := engineCall(t.Context(), "send SIGSTOP to node n3", e.try)
		const want = "send SIGSTOP to node n3: the engine did not answer within 3 tries of 30s"
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %q", err, want)
		}
		var slow *SlowEngineError
		if !errors.As(err, &slow) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %#v: want a *SlowEngineError that is a context.DeadlineExceeded", err)
		}
		if len(e.again) != engineTries || time.Since(start) != engineTries*engineTimeout {
			t.Errorf("%d tries in %s, want %d in %s", len(e.again), time.Since(start), engineTries, engineTries*engineTimeout)
		}
	})
}

// An answer that is not "too late" is the engine's, and asking again would not change it.
func TestEngineCallTakesTheEnginesNoForAnAnswer(t *testing.T) {
	tries := 0
	no := fmt.Errorf("Container x is not running: %w", cerrdefs.ErrConflict)
	err := engineCall(t.Context(), "send SIGCONT to node n1", func(context.Context, bool) error {
		tries++
		return no
	})
	if tries != 1 || !errors.Is(err, no) || err.Error() != "send SIGCONT to node n1: "+no.Error() {
		t.Errorf("%d tries, err = %v: want one try and the engine's answer, named", tries, err)
	}
}

// A heal runs after the run's context has ended, and a fault begun just before the end
// is made whole: each try has its whole deadline whatever the caller's context says.
func TestEngineCallIsNotCutByTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		ended, cancel := context.WithDeadline(context.WithValue(t.Context(), key{}, "run"), time.Now().Add(-time.Second))
		defer cancel()
		e := &busyEngine{answerAt: 2}
		err := engineCall(ended, "send SIGCONT to node n2", func(ctx context.Context, again bool) error {
			if ctx.Value(key{}) != "run" {
				t.Error("a try lost its caller's values")
			}
			return e.try(ctx, again)
		})
		if err != nil {
			t.Fatalf("a call on a context past its deadline: %v", err)
		}
		if want := []time.Duration{engineTimeout, engineTimeout}; !slices.Equal(e.had, want) {
			t.Errorf("tries had %v, want %v each", e.had, engineTimeout)
		}

		// Ended while a try waits: the try goes on to its answer.
		running, endRun := context.WithCancel(t.Context())
		err = engineCall(running, "kill node n1", func(ctx context.Context, _ bool) error {
			endRun()
			time.Sleep(engineTimeout / 2) // the engine answers late, but in time
			return ctx.Err()
		})
		if err != nil {
			t.Errorf("a try whose caller's context ended meanwhile: %v", err)
		}
	})
}

func TestNotRunningIsTheEnginesConflict(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("Cannot kill container: x: Container x is not running: %w", cerrdefs.ErrConflict), true},
		{fmt.Errorf("Container x is paused: %w", cerrdefs.ErrConflict), false},
		{errors.New("Container x is not running"), false},
		{nil, false},
	} {
		if got := notRunning(c.err); got != c.want {
			t.Errorf("notRunning(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

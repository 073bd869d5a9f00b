package containers

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// Calls into the engine that a fault or its heal depends on (a signal to a node's server,
// its kill and its start again, a command run in it to cut its network or move its clock,
// the inspection that finds its process) must not give up because the engine is busy: on
// a loaded machine it has answered a signal seconds late, and a pause-node that gave up
// failed its whole run (issue 35). So each try of such a call has a deadline of its own,
// engineTimeout, whatever the caller's context says: a run's context may be a moment from
// its end, and a heal must happen after it ended. Its end does not cut a try either: a
// fault cut halfway leaves a node in a state nobody knows, and a heal cut halfway leaves
// the fault. A try the engine did not answer in time is made again, up to engineTries
// times; every other error is the engine's answer and ends the call.
const (
	engineTimeout = 30 * time.Second
	engineTries   = 3
)

// SlowEngineError is a call into the engine that went unanswered in every try. It
// unwraps to context.DeadlineExceeded.
type SlowEngineError struct {
	Call  string        // what was asked, e.g. "send SIGSTOP to node n3"
	Tries int           // how many times it was asked
	Each  time.Duration // how long each try waited for an answer
}

func (e *SlowEngineError) Error() string {
	return fmt.Sprintf("%s: the engine did not answer within %d tries of %s", e.Call, e.Tries, e.Each)
}

func (e *SlowEngineError) Unwrap() error { return context.DeadlineExceeded }

// engineCall makes the call named what (an error's prefix: "send SIGSTOP to node n3") in
// up to engineTries tries of engineTimeout each, on contexts that keep ctx's values but
// neither its cancellation nor its deadline. again tells a try that an earlier one went
// unanswered and may have taken effect all the same: a try that is not safe to make twice
// looks at the node's state first.
func engineCall(ctx context.Context, what string, try func(ctx context.Context, again bool) error) error {
	for i := range engineTries {
		tryCtx, cancel := ownDeadline(ctx)
		err := try(tryCtx, i > 0)
		unanswered := tryCtx.Err() != nil // nothing but its own deadline ends tryCtx
		cancel()
		switch {
		case err == nil:
			return nil
		case !unanswered:
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return &SlowEngineError{Call: what, Tries: engineTries, Each: engineTimeout}
}

// ownDeadline is ctx's values with a deadline of engineTimeout from now, and neither ctx's
// cancellation nor its deadline: one try of a call a fault depends on (engineCall), or a
// command this host runs for one (hostRun).
func ownDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), engineTimeout)
}

// notRunning says the engine refused a signal because the container has stopped: after a
// SIGKILL that went unanswered, that SIGKILL's doing.
func notRunning(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is not running")
}

package checkers

// lock-linearizable: was the lock a mutex? A strict model with no notion of time: acquire
// succeeds only when the lock is free, release only when the caller holds it. A lease that
// expires and lets a second client in before the first released is therefore illegal: that
// is the lock-safety verdict, and it is meant to fail under a long pause even when fencing
// keeps the data safe (data-safety judges that).

import (
	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// lockLinearizable checks the lock operations against a strict mutex, key by key.
var lockLinearizable = linearizability{model: func(part, string) porcupine.Model { return strictMutex }, models: isLockOp}.
	checker("lock-linearizable", PropertyLockSafety)

// isLockOp keeps acquires and releases that may have had an effect. A failed acquire
// changed nothing; a release failing "not-held" is kept, as it tells that the caller's
// lease ended.
func isLockOp(op history.Op, o outcome) bool {
	return (op.Func() == history.Acquire || op.Func() == history.Release) && o != rejected
}

// strictMutex's state is the holder: an identity or nobody.
var strictMutex = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{nobody} },
	Step: func(state, in, out any) []any {
		return mutexStep(state.(identity), in.(request), out.(response))
	},
	Hash:                      func(state any) uint64 { return state.(identity).hash() },
	DescribeOperation:         describeRequest,
	DescribeState:             func(state any) string { return describeHolder(state.(identity)) },
	DescribeOperationMetadata: describeEvents,
}).ToModel()

// mutexStep returns every holder the lock may have after the request; none when the
// response is impossible from holder.
func mutexStep(holder identity, req request, resp response) []any {
	caller := req.caller
	switch {
	case req.f == history.Acquire && resp.outcome == succeeded:
		if holder == nobody {
			return []any{caller}
		}
		return nil
	case req.f == history.Acquire: // indeterminate: granted or not
		if holder == nobody {
			return []any{nobody, caller}
		}
		return []any{holder}
	case resp.outcome == succeeded: // release
		if holder == caller {
			return []any{nobody}
		}
		return nil
	case resp.outcome == notHeld: // release: the caller's lease had expired
		if holder == caller {
			return []any{nobody}
		}
		return []any{holder}
	default: // indeterminate release: done or not
		if holder == caller {
			return []any{caller, nobody}
		}
		return []any{holder}
	}
}

package checkers

// lock-linearizable: was the lock a mutex? A strict model with no notion of time: acquire
// succeeds only when the lock is free, release only when the caller holds it. A lease that
// expires and lets a second client in before the first released is therefore illegal: that
// is the lock-safety verdict, and it is meant to fail under a long pause even when fencing
// keeps the data safe (data-safety judges that).
//
// A hold never released lapses: a holder killed while holding (kill-client: SIGKILL, the
// service expires its session and hands the lock on) has no release, and its life ends
// with its last event (the info the harness records for the operation it died in, or its
// last completion when it died between two). Its hold ends there, as mutual-exclusion
// ends it: a model that kept it holding for ever would find every later grant illegal. So
// each hold that mutual-exclusion's holds finds unreleased gets a lapse at its holder's
// last event, a release no event records; a grant to another client before that event is
// still a violation.

import (
	"cmp"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// lockLinearizable checks the lock operations against a strict mutex, key by key.
var lockLinearizable = linearizability{model: func(part, string) porcupine.Model { return strictMutex }, models: isLockOp, extra: lapses}.
	checker("lock-linearizable", PropertyLockSafety)

// lapse is the operation that ends a hold never released, at its holder's last event.
const lapse history.Func = "lapse"

// lapses are the piece's holds never released, each ended by a lapse at its holder's last
// event. A hold open at a cut forbids it (see stream.go), so a hold and its holder's last
// event are in one piece. The lapse's caller is the identity the hold was granted to (see
// operations).
func lapses(p part) []*history.Op {
	var out []*history.Op
	for _, h := range holds(p.ops, lastEvents(p.events)) {
		if h.released {
			continue
		}
		at := history.Event{Index: h.until.Index, Type: history.Invoke, Process: h.process, Func: lapse, Key: h.key, Time: h.until.Time}
		done := at
		done.Type = history.OK
		out = append(out, &history.Op{Invoke: at, Complete: &done})
	}
	// holds hands open ones over in map order: the same history gets the same search.
	slices.SortFunc(out, func(a, b *history.Op) int {
		return cmp.Or(cmp.Compare(a.Invoke.Index, b.Invoke.Index), cmp.Compare(a.Process(), b.Process()), strings.Compare(a.Invoke.Key, b.Invoke.Key))
	})
	return out
}

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
	case req.f == lapse: // the holder never acts again: its hold ends
		if holder == caller {
			return []any{nobody}
		}
		return []any{holder}
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

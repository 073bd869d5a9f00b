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
//
// A hold whose release failed other than "not-held" (unreachable: the request never got
// there) lapses too. The model leaves that release out, as it changed nothing, yet the
// holder is done with the lock and the service's lease runs out: mutual-exclusion ends the
// hold at the release, and so does a lapse there, unless the holder's next lock operation
// on the key is a release that succeeded, which says the service still counted it the
// holder (that release ends the hold). An indeterminate release needs no lapse: the model already lets it free the
// lock from its invocation on.

import (
	"cmp"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// lockLinearizable checks the lock operations against a strict mutex, key by key.
var lockLinearizable = linearizability{model: func(part, string) porcupine.Model { return strictMutex }, models: isLockOp, extra: lapses}.
	checker(LockLinearizable, PropertyLockSafety)

// lapse is the operation that ends a hold no release the model steps ends: at its holder's
// last event, or at its release that was rejected.
const lapse history.Func = "lapse"

// lapses are the piece's holds that end with no release the model steps, each ended by a
// lapse: a hold never released at its holder's last event, one whose release was rejected
// at that release (see failedReleases). A hold open at a cut forbids it (see stream.go),
// and a rejected release leaves its hold open to the cutter, so a hold and where it lapses
// are in one piece. The lapse's caller is the identity the hold was granted to (see
// operations).
func lapses(p part) []*history.Op {
	var out []*history.Op
	failed := failedReleases(p.ops)
	for _, h := range holds(p.ops, lastOf(p.events)) {
		at := history.Event{Index: h.until.Index, Type: history.Invoke, Process: h.process, Func: lapse, Key: h.key, Time: h.until.Time}
		if h.released {
			why, ok := failed[h.release]
			if !ok {
				continue
			}
			// At the release's invocation, where mutual-exclusion ends the hold (the holder
			// stopped believing it held the lock when it let go), so that both judge a
			// grant to another client between the release's invocation and its reply alike.
			at.Message = why
		}
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

// failedReleases are the rejected releases in ops (by their index) after which a hold
// lapses, each with where, as evidence tells it: those after which their process's next
// acquire or release of the key, rejected releases aside, is no release that succeeded. A
// release after it that found the lock not held, or ended indeterminate, steps the model
// from a lapsed hold as well as from one still held.
func failedReleases(ops []history.Op) map[int]string {
	type holding struct {
		process int
		key     string
	}
	pending := map[holding][]int{} // rejected releases since the process's last lock operation on the key
	failed := map[int]string{}
	lapses := func(i int) {
		why := "its release, which failed"
		if err := ops[i].Complete.Error; err != "" {
			why += " (" + string(err) + ")"
		}
		failed[i] = why
	}
	for i := range ops {
		op := &ops[i]
		f, o := op.Func(), outcomeOf(op)
		if f != history.Acquire && f != history.Release {
			continue
		}
		h := holding{op.Process(), op.Invoke.Key}
		if f == history.Release && o == rejected {
			pending[h] = append(pending[h], i)
			continue
		}
		if f == history.Acquire || o != succeeded {
			for _, r := range pending[h] {
				lapses(r)
			}
		}
		delete(pending, h)
	}
	for _, rs := range pending {
		for _, r := range rs {
			lapses(r)
		}
	}
	return failed
}

// isLockOp keeps acquires and releases that may have had an effect. A failed acquire
// changed nothing; a release failing "not-held" is kept, as it tells that the caller's
// lease ended.
func isLockOp(op *history.Op, o outcome) bool {
	return (op.Func() == history.Acquire || op.Func() == history.Release) && o != rejected
}

// strictMutex's state is the holder: an identity or nobody.
var strictMutex = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{nobody} },
	Step: func(state, in, out any) []any {
		return mutexStep(state.(identity), *in.(*request), *out.(*response))
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

package checkers

// data-safety: did the storage stay correct? The model is "a correct lock guarding a
// register": an acquire that succeeded always makes its caller the holder, because a lease
// may legitimately expire and pass on; a storage request the storage accepted is legal only
// from the current holder, and a read returns the register's value; a request the storage
// rejected (a stale fencing token) changed nothing. So a stale holder's accepted write after
// someone else acquired is illegal, and the same write rejected by fencing is fine: with
// fencing, lock-linearizable fails and data-safety passes, which is the lesson a run teaches.
//
// A request that carries a fencing token is judged by the token instead, as Kleppmann's
// storage judges it: it is legal when its token is above every token accepted before it,
// or equal to the highest from the same process (the same grant's next request). The lock
// hands over when the new holder's token reaches the storage, not when it is granted, so
// an old holder's write that lands in between is one the new holder then reads, not a
// corruption; two processes accepted under one token (a failover that granted it twice)
// is one.

import (
	"context"
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// dataSafety checks storage reads and writes against a register guarded by a correct lock.
var dataSafety = checker{name: DataSafety, property: PropertyDataSafety, search: true, start: func(opts Options) accumulator {
	return &safetyState{searchState: linearizability{model: storedModel, models: isGuardedOp}.begin(DataSafety, opts)}
}}

// safetyState is dataSafety's search, and the writes it counts, over the pieces judged so far.
type safetyState struct {
	*searchState
	accepted, rejected int
}

func (st *safetyState) add(ctx context.Context, p part) {
	st.searchState.add(ctx, p)
	for _, e := range p.events {
		if e.Func == history.Write && e.Type == history.OK {
			st.accepted++
		} else if e.Func == history.Write && e.Type == history.Fail {
			st.rejected++
		}
	}
}

func (st *safetyState) result() Result {
	r := st.searchState.result()
	r.Counts["writes-accepted"], r.Counts["writes-rejected"] = st.accepted, st.rejected
	r.Summary += fmt.Sprintf("; %s accepted, %d rejected", plural(st.accepted, "write"), st.rejected)
	return r
}

// isGuardedOp keeps what may have changed the lock or the register, and the reads that
// saw it. Rejected requests and failed acquires changed nothing; a read whose result is
// unknown tells nothing.
func isGuardedOp(op *history.Op, o outcome) bool {
	switch op.Func() {
	case history.Acquire, history.Release, history.Write:
		return o != rejected
	case history.Read, history.FinalRead:
		return o == succeeded
	}
	return false
}

// guarded is the model's state: who holds the lock, what the register holds, and the
// storage's fence: the highest token it accepted (fenced: one was) and whose it was.
type guarded struct {
	holder   identity
	register int64
	highest  int64
	fencer   int
	fenced   bool
}

// admit is s after the storage let req through, and whether the model lets it: a tokened
// request by its token, any other by the holder.
func (s guarded) admit(req request) (guarded, bool) {
	if !req.tokened {
		return s, s.holder == req.caller
	}
	if s.fenced && (req.token < s.highest || req.token == s.highest && s.fencer != req.caller.process) {
		return s, false
	}
	s.highest, s.fencer, s.fenced = req.token, req.caller.process, true
	return s, true
}

// storedModel is guardedRegister from where the pieces before left the key: a piece
// starts where nobody holds the lock, with the register and fence the cutter found.
func storedModel(p part, key string) porcupine.Model {
	if !p.streamed {
		return guardedRegister
	}
	return guardedFrom(p.storage[key])
}

var guardedRegister = guardedFrom(guarded{})

// guardedFrom is the model of a register guarded by a lock, starting from s with nobody
// holding the lock.
func guardedFrom(s guarded) porcupine.Model {
	s.holder = nobody
	return (&porcupine.NondeterministicModel{
		Init: func() []any { return []any{s} },
		Step: func(state, in, out any) []any {
			return guardedStep(state.(guarded), *in.(*request), *out.(*response))
		},
		Hash: func(state any) uint64 {
			s := state.(guarded)
			fence := mix(uint64(s.highest) ^ mix(uint64(s.fencer)))
			return mix(s.holder.hash() ^ mix(uint64(s.register)^fence))
		},
		DescribeOperation: describeRequest,
		DescribeState: func(state any) string {
			s := state.(guarded)
			if s.fenced {
				return fmt.Sprintf("%s, register %d, fenced at token %d of %s", describeHolder(s.holder), s.register, s.highest, processName(s.fencer))
			}
			return fmt.Sprintf("%s, register %d", describeHolder(s.holder), s.register)
		},
		DescribeOperationMetadata: describeEvents,
	}).ToModel()
}

// guardedStep returns every state the request may leave behind; none when the response is
// impossible from s. An indeterminate request may have taken effect or not: both states.
func guardedStep(s guarded, req request, resp response) []any {
	caller, unsure := req.caller, resp.outcome == indeterminate
	after := s
	switch req.f {
	case history.Acquire:
		after.holder = caller
	case history.Release: // ok, not-held or indeterminate: the caller no longer holds it
		if s.holder == caller {
			after.holder = nobody
		}
	case history.Read:
		admitted, ok := s.admit(req)
		if !ok || s.register != resp.value {
			return nil
		}
		after = admitted
	case history.FinalRead: // after every client stopped: whoever holds the lock
		if s.register != resp.value {
			return nil
		}
	case history.Write:
		admitted, ok := s.admit(req)
		if !ok {
			if unsure { // it may have been rejected, the one legal way it can have ended
				return []any{s}
			}
			return nil
		}
		after = admitted
		after.register = req.value
	}
	if unsure && after != s {
		return []any{s, after}
	}
	return []any{after}
}

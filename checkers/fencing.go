package checkers

// fencing: did fencing tokens do their job (Kleppmann)? Two promises, checked per key:
//   - the lock grants tokens that strictly increase in real time: a grant that completed
//     before another was invoked carries a lower token. A regression (Sentinel failover to a
//     replica that missed the INCR) or the same token granted twice defeats fencing, whoever
//     got it;
//   - the storage never accepts a request whose token is lower than one it already accepted
//     (from a request that completed before this one was invoked).
// Stale requests the storage rejected are the mechanism working; they are counted, not
// blamed. Storage requests are judged whenever they carry tokens, even when no grant did
// (a client that invents its tokens is exactly what this must catch). A history with no
// token anywhere (Redlock has none) has no fencing to judge: not applicable.

import (
	"context"
	"strings"

	"github.com/lockbreaker/lockbreaker/history"
)

// CountStaleRejected is the fencing result's count of stale requests the storage rejected;
// the report reads it.
const CountStaleRejected = "stale-rejected"

// fencing checks that tokens increase and that the storage rejects stale ones.
var fencing = checker{name: Fencing, property: PropertyFencing, start: func(Options) accumulator {
	return &fencingState{keys: map[string]*keyFencing{}}
}}

// fencingState is what fencing found, over the pieces judged so far.
type fencingState struct {
	tl                                     timeline // the last piece's
	grants, accepted, staleRejected        int
	keys                                   map[string]*keyFencing
	regressions, duplicates, staleAccepted evidence
	violation                              earliest
}

func (st *fencingState) add(_ context.Context, p part) {
	var grants, accepted []*history.Op // the piece's, shared
	for i := range p.ops {
		op := &p.ops[i]
		storage := op.Func() == history.Read || op.Func() == history.Write
		switch {
		case op.Func() == history.Acquire && op.Type() == history.OK && op.Complete.Token != nil:
			grants = append(grants, op)
		case storage && op.Type() == history.OK && op.Invoke.Token != nil:
			accepted = append(accepted, op)
		case storage && op.Type() == history.Fail && op.Complete.Error == history.ErrStaleToken:
			st.staleRejected++
		}
	}
	st.grants += len(grants)
	st.accepted += len(accepted)
	st.tl = p.tl
	tl := p.tl
	regressions, duplicates, staleAccepted, violation := &st.regressions, &st.duplicates, &st.staleAccepted, &st.violation
	keyOf := func(key string) *keyFencing {
		if st.keys[key] == nil {
			st.keys[key] = &keyFencing{}
		}
		return st.keys[key]
	}
	keys, grantsByKey := byKey(grants, opPointerKey)
	for _, key := range keys {
		k := keyOf(key)
		for _, g := range grantsByKey[key] {
			t := *g.Complete.Token
			before, earlier, known := k.granted.grant(t, grantOf{g.Process(), g.Complete.Index})
			switch {
			case !before:
			case !known:
				violation.see(g.Complete.Time)
				duplicates.addf("key %s: token %d granted to %s (#%d) had been granted before, more than %d grants earlier", key, t,
					processName(g.Process()), g.Complete.Index, recentGrants)
			case earlier.process == g.Process():
				violation.see(g.Complete.Time)
				duplicates.addf("key %s: token %d granted twice to %s (#%d and #%d)", key, t, processName(g.Process()), earlier.index, g.Complete.Index)
			default:
				violation.see(g.Complete.Time)
				duplicates.addf("key %s: token %d granted to %s (#%d) and to %s (#%d)", key, t,
					processName(earlier.process), earlier.index, processName(g.Process()), g.Complete.Index)
			}
		}
		sweepAfter(&k.grant, grantsByKey[key], grantedToken, func(g, best *history.Op, found bool) {
			if found && grantedToken(g) < grantedToken(best) {
				violation.see(g.Complete.Time)
				regressions.addf("key %s: token %d granted to %s at %s after token %d was granted to %s at %s",
					key, grantedToken(g), processName(g.Process()), tl.event(*g.Complete),
					grantedToken(best), processName(best.Process()), tl.event(*best.Complete))
			}
		})
	}
	keys, acceptedByKey := byKey(accepted, opPointerKey)
	for _, key := range keys {
		sweepAfter(&keyOf(key).accepted, acceptedByKey[key], carriedToken, func(req, best *history.Op, found bool) {
			if found && carriedToken(req) < carriedToken(best) {
				violation.see(req.Complete.Time)
				staleAccepted.addf("key %s: storage accepted %s after accepting token %d from %s at %s",
					key, tl.describe(*req), carriedToken(best), processName(best.Process()), tl.event(*best.Complete))
			}
		})
	}
}

func (st *fencingState) result() Result {
	staleRejected, regressions, duplicates, staleAccepted := st.staleRejected, &st.regressions, &st.duplicates, &st.staleAccepted
	if st.grants == 0 && st.accepted == 0 && staleRejected == 0 {
		return Result{Verdict: NotApplicable, Summary: "no fencing tokens in this history: nothing to check",
			Counts: map[string]int{"grants-with-token": 0}}
	}

	r := Result{
		Evidence: append(append(regressions.list(), duplicates.list()...), staleAccepted.list()...),
		Counts: map[string]int{
			"grants-with-token": st.grants,
			CountStaleRejected:  staleRejected,
			"regressions":       regressions.count(),
			"duplicates":        duplicates.count(),
			"stale-accepted":    staleAccepted.count(),
		},
	}
	r.FirstViolation = st.violation.since(st.tl)
	var failures []string
	if n := regressions.count(); n > 0 {
		failures = append(failures, plural(n, "token regression"))
	}
	if n := duplicates.count(); n > 0 {
		failures = append(failures, plural(n, "duplicate token"))
	}
	if n := staleAccepted.count(); n > 0 {
		failures = append(failures, plural(n, "stale request")+" accepted")
	}
	if len(failures) > 0 {
		r.Verdict, r.Summary = Invalid, strings.Join(failures, ", ")
	} else {
		r.Verdict, r.Summary = Valid, "tokens increase; "+plural(staleRejected, "stale request")+" rejected"
		if st.grants == 0 {
			r.Summary = "no grant carried a token; the storage accepted no stale one and rejected " + plural(staleRejected, "stale request")
		}
	}
	return r
}

// keyFencing is one key's tokens: every token granted (a duplicate may come any time
// later), and the highest token granted and accepted so far.
type keyFencing struct {
	granted         grantedTokens
	grant, accepted best
}

func grantedToken(op *history.Op) int64 { return *op.Complete.Token }
func carriedToken(op *history.Op) int64 { return *op.Invoke.Token }

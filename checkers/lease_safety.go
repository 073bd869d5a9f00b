package checkers

// lease-safety: was a client ever told it held the lock (an acquire granted, an extend that
// said yes) while another client's grant surely still ran? Two clients that believed they
// held the lock at once (mutual-exclusion) may be the limit of any lease, Kleppmann's
// paused holder: the lock did right, the holder acted late. A client told while another's
// grant surely ran is the lock's own fault: etcd 3.4's thawed waiter, redsync's late
// extend, a key a crash forgot.
//
// A grant surely runs, at a moment, while its holder has not begun to release it and, as
// the run's lock keeps it (Options.Lease): a key's time to live has not run out since the
// holder's last acquire or extend attempt began (at 9/10 of the TTL, for clocks that do
// not quite agree); a session's client and the service have been untouched by any fault
// since a lease before the grant; where nothing is known, both.
//
// A client records what it was told only while it runs: one stopped (SIGSTOP) just after it
// was told records it when continued, when another's grant may have come since. So a
// client is told at the moment it records, or at the start of any stop within its
// request, and it was told wrong only when another's grant surely ran at every one of
// them; a client starved of CPU may have been told at any moment, and is never blamed.
//
// An extend says the holder held the lock without a break since it was last told so; when
// another client was granted the lock meanwhile, at every moment it may have been told,
// it said that wrong too, whatever became of the other's grant.

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// leaseSafety reports every grant and extend told while another client's grant surely ran.
var leaseSafety = checker{name: LeaseSafety, property: PropertyLockSafety, start: func(opts Options) accumulator {
	return &leaseState{lease: opts.Lease, ongoing: map[string]int{}}
}}

// keySlack is the share of a key's TTL a grant is held to run: the service's clock and the
// harness's need not agree to the millisecond.
const keySlack = 0.9

// leaseState is what lease-safety found, over the pieces judged so far. Holds never span
// pieces (see cutter); faults may, so every fault seen is kept.
type leaseState struct {
	lease   history.Lease
	faults  []faultSpan
	ongoing map[string]int // the faults begun and not yet stopped, by fault and targets: index into faults
	// The faults by what they strike, indexed again for each piece: those that name
	// client p (struck[p]), those of them that stall it (stalls[p]), and those that strike
	// the service, a node or everything.
	struck, stalls map[int]*spans
	service        *spans
	moments        []int64 // toldAt's answer, its room used again
	told           int
	tl             timeline
	found          evidence
	first          earliest
}

// faultSpan is one fault, from its start to its stop (math.MaxInt64 while it runs); its
// own copy, kept past the piece it came in (a stream fills a judged piece again).
type faultSpan struct {
	from, to int64
	targets  []string
	stalls   history.Stall
}

// leaseHold is a hold with what its holder was told within it: the grant (the acquire
// the hold was made from, so every hold has one), then every extend that said yes, in order.
type leaseHold struct {
	hold
	told []*history.Op
}

func (st *leaseState) add(_ context.Context, p part) {
	st.tl = p.tl
	st.seeFaults(p.events)
	if st.lease.TTL <= 0 {
		return
	}
	st.index()
	keys, groups := byKey(st.leaseHolds(p.ops, p.events), func(h leaseHold) string { return h.key })
	for _, key := range keys {
		hs := groups[key]
		slices.SortStableFunc(hs, func(a, b leaseHold) int { return compareInt64(a.granted.Time, b.granted.Time) })
		// untilMax[i] is the latest end of holds[0..i]: no hold granted at or before i runs
		// past it.
		untilMax := make([]int64, len(hs))
		for i, h := range hs {
			untilMax[i] = h.until.Time
			if i > 0 {
				untilMax[i] = max(untilMax[i], untilMax[i-1])
			}
		}
		k := keyLeases{st: st, holds: hs, untilMax: untilMax}
		for i := range hs {
			for j, op := range hs[i].told {
				st.told++
				if why, wrong := k.toldWrong(i, j); wrong {
					st.first.see(op.Complete.Time)
					if st.found.keeps() {
						st.found.addf("%s was told at %s it held %s (%s, #%d) %s", processName(op.Process()), st.tl.at(op.Complete.Time),
							key, op.Func(), op.Complete.Index, why)
					}
				}
			}
		}
	}
}

// seeFaults records the faults that start and stop in events.
func (st *leaseState) seeFaults(events []history.Event) {
	for _, e := range events {
		if e.Process != history.NemesisProcess || (e.Func != history.Start && e.Func != history.Stop) {
			continue
		}
		id := e.Fault + "\x00" + strings.Join(e.Targets, ",")
		if e.Func == history.Stop {
			if i, ok := st.ongoing[id]; ok {
				st.faults[i].to = e.Time
				delete(st.ongoing, id)
			}
			continue
		}
		kind, _ := history.KindOf(e.Fault)
		st.ongoing[id] = len(st.faults)
		st.faults = append(st.faults, faultSpan{from: e.Time, to: math.MaxInt64, targets: slices.Clone(e.Targets), stalls: kind.Stalls})
	}
}

// index sorts the faults seen so far by what they strike.
func (st *leaseState) index() {
	st.struck, st.stalls, st.service = map[int]*spans{}, map[int]*spans{}, &spans{}
	of := func(m map[int]*spans, p int) *spans {
		if m[p] == nil {
			m[p] = &spans{}
		}
		return m[p]
	}
	for _, f := range st.faults {
		service := len(f.targets) == 0
		for _, target := range f.targets {
			p, client := history.ClientTarget(target)
			if !client {
				service = true
				continue
			}
			of(st.struck, p).add(f)
			if f.stalls != history.StallsNone {
				of(st.stalls, p).add(f)
			}
		}
		if service {
			st.service.add(f)
		}
	}
}

// spans are faults in the order they began, with the latest end among each prefix of
// them, so that those within a window are found without looking at the rest.
type spans struct {
	list   []faultSpan
	maxEnd []int64
}

func (s *spans) add(f faultSpan) {
	end := f.to
	if n := len(s.maxEnd); n > 0 {
		end = max(end, s.maxEnd[n-1])
	}
	s.list, s.maxEnd = append(s.list, f), append(s.maxEnd, end)
}

// within are the faults that ran at some moment of [from, to], latest begun first.
func (s *spans) within(from, to int64) iter.Seq[faultSpan] {
	return func(yield func(faultSpan) bool) {
		if s == nil {
			return
		}
		for i := sort.Search(len(s.list), func(i int) bool { return s.list[i].from > to }) - 1; i >= 0 && s.maxEnd[i] >= from; i-- {
			if s.list[i].to >= from && !yield(s.list[i]) {
				return
			}
		}
	}
}

// any says whether a fault ran at some moment of [from, to].
func (s *spans) any(from, to int64) bool {
	for range s.within(from, to) {
		return true
	}
	return false
}

// leaseHolds are the piece's holds, each with what its holder was told within it.
func (st *leaseState) leaseHolds(ops []history.Op, events []history.Event) []leaseHold {
	hs := holds(ops, lastOf(events))
	out := make([]leaseHold, len(hs))
	type holding struct {
		process int
		key     string
	}
	granted := make(map[*history.Event]int, len(hs)) // each hold by its grant
	at := map[holding][]int{}                        // the holds of each process and key, in the order made
	for i, h := range hs {
		out[i].hold = h
		granted[h.granted] = i
		at[holding{h.process, h.key}] = append(at[holding{h.process, h.key}], i)
	}
	for j := range ops {
		op := &ops[j]
		switch {
		case op.Type() != history.OK:
		case op.Func() == history.Acquire:
			if i, ok := granted[op.Complete]; ok {
				out[i].told = append(out[i].told, op)
			}
		case op.Func() == history.Extend:
			// the last hold granted before the extend's answer, if it still ran then
			mine := at[holding{op.Process(), op.Invoke.Key}]
			k := sort.Search(len(mine), func(k int) bool { return out[mine[k]].granted.Time >= op.Complete.Time }) - 1
			if k >= 0 && op.Complete.Time <= out[mine[k]].until.Time {
				out[mine[k]].told = append(out[mine[k]].told, op)
			}
		}
	}
	for i := range out {
		slices.SortFunc(out[i].told, func(a, b *history.Op) int { return compareInt64(a.Complete.Time, b.Complete.Time) })
	}
	return out
}

// keyLeases are one key's holds, ordered by grant.
type keyLeases struct {
	st       *leaseState
	holds    []leaseHold
	untilMax []int64
}

// toldWrong says whether the j-th thing hold i's holder was told was told while another's
// grant surely ran at every moment it may have been told, and why.
func (k keyLeases) toldWrong(i, j int) (why string, wrong bool) {
	h := k.holds[i]
	op := h.told[j]
	var reasons []string
	for n, at := range k.st.toldAt(op) {
		why, ok := k.conflict(i, j, at)
		if !ok {
			return "", false
		}
		if n > 0 { // told as it was stopped
			why = fmt.Sprintf("and, had it been told as it was stopped at %s, %s", k.st.tl.at(at), why)
		}
		reasons = append(reasons, why)
	}
	return strings.Join(reasons, "; "), len(reasons) > 0
}

// toldAt are the moments at which op's client may have been told its answer: when it
// recorded it, and the start of every stop within the request; none when it was starved.
// The answer is good until the next call.
func (st *leaseState) toldAt(op *history.Op) []int64 {
	from, to := op.Invoke.Time, op.Complete.Time
	at := append(st.moments[:0], to)
	for f := range st.stalls[op.Process()].within(from, to) {
		if f.stalls == history.StallStarves {
			return nil
		}
		at = append(at, max(f.from, from))
	}
	st.moments = at
	return at
}

// conflict says why, at moment at, hold i's j-th answer was wrong: another's grant surely
// ran then, or (an extend) another client was granted the lock since its holder was last
// told it held it.
func (k keyLeases) conflict(i, j int, at int64) (string, bool) {
	h := k.holds[i]
	tl := k.st.tl
	granted := sort.Search(len(k.holds), func(g int) bool { return k.holds[g].granted.Time >= at }) // the holds granted before at: [0, granted)
	for g := granted - 1; g >= 0 && k.untilMax[g] > at; g-- {
		other := k.holds[g]
		if other.process == h.process || other.until.Time <= at {
			continue
		}
		if running, how := k.st.running(other, at); running {
			return fmt.Sprintf("while %s's grant of %s surely ran (%s)", processName(other.process), tl.at(other.granted.Time), how), true
		}
	}
	if j == 0 {
		return "", false
	}
	since := h.told[j-1].Complete.Time
	first := sort.Search(len(k.holds), func(g int) bool { return k.holds[g].granted.Time > since })
	for _, other := range k.holds[first:] {
		if other.granted.Time >= at {
			break
		}
		if other.process == h.process || k.st.stalled(other.process, other.asked.Time, other.granted.Time) {
			continue
		}
		return fmt.Sprintf("though %s was granted it at %s, after %s was last told so at %s", processName(other.process),
			tl.at(other.granted.Time), processName(h.process), tl.at(since)), true
	}
	return "", false
}

// running says whether hold h's grant surely ran at moment at, and how that is known.
func (st *leaseState) running(h leaseHold, at int64) (bool, string) {
	var last *history.Op // the last thing its holder was told before at
	for _, op := range h.told {
		if op.Complete.Time < at {
			last = op
		}
	}
	start := last.Invoke.Time
	if last.Complete.EffectFrom != 0 {
		start = last.Complete.EffectFrom
	}
	byKey := at < start+int64(keySlack*float64(st.lease.TTL))
	lease := st.lease.TTL
	if stated, err := time.ParseDuration(h.granted.Detail[history.LeaseTTL]); err == nil {
		lease = max(lease, stated)
	}
	kept := st.lease.Kept
	if said := history.Keeping(h.granted.Detail[history.KeptDetail]); said == history.KeptByKey || said == history.KeptBySession {
		kept = said
	}
	byKey = byKey || kept == history.KeptBySession
	bySession := kept == history.KeptByKey || !st.touched(h.process, h.granted.Time-lease.Nanoseconds(), at)
	if !byKey || !bySession {
		return false, ""
	}
	var how []string
	if kept != history.KeptBySession {
		how = append(how, fmt.Sprintf("its key's TTL of %s from %s", st.lease.TTL, st.tl.at(start)))
	}
	if kept != history.KeptByKey {
		how = append(how, fmt.Sprintf("no fault touched %s or the service from a lease of %s before its grant on", processName(h.process), lease))
	}
	return true, strings.Join(how, ", and ")
}

// touched says whether a fault struck client p or the service (a node, or everything)
// within [from, to].
func (st *leaseState) touched(p int, from, to int64) bool {
	return st.service.any(from, to) || st.struck[p].any(from, to)
}

// stalled says whether client p was stalled within [from, to]: what it recorded then may
// have been told a stall earlier.
func (st *leaseState) stalled(p int, from, to int64) bool {
	return st.stalls[p].any(from, to)
}

func (st *leaseState) result() Result {
	r := Result{Evidence: st.found.list(), Counts: map[string]int{"told": st.told, "told-wrong": st.found.count()}}
	switch {
	case st.lease.TTL <= 0:
		r.Verdict, r.Summary = NotApplicable, "the run states no lease to hold the lock to (a run saved before lease-safety)"
	case st.found.count() > 0:
		r.Verdict, r.Summary = Invalid, plural(st.found.count(), "answer")+" told while another client's grant surely ran"
		r.FirstViolation = st.first.since(st.tl)
	default:
		r.Verdict, r.Summary = Valid, fmt.Sprintf("no client was told it held the lock while another's grant surely ran (%d grants and extends)", st.told)
	}
	return r
}

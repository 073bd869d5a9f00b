package checkers

// What the two porcupine checkers (lock-linearizable, data-safety) share: turning a key's
// operations into porcupine operations, searching each key within one time budget, saying
// where a search got stuck, and drawing porcupine's visualisation (see visualise.go).
//
// The models differ on purpose (see lock_linearizable.go and data_safety.go); the rules for
// indeterminate operations are the same for both and live here, in operations():
//   - an info or never-completed operation returns at "infinity", after every recorded
//     event, because it may take effect at any moment after its invocation; the models step
//     it to every state it could leave behind (porcupine.NondeterministicModel);
//   - the worker then carries on as a new incarnation: a fresh porcupine client id, and a
//     fresh identity in the models. The identity matters: if the worker kept its old one,
//     an unanswered acquire placed late could make "it" the holder again and excuse a
//     stale write it made long after losing the lock.
//
// Every key is its own search (the lock and its register are independent per key) and its
// own visualisation file. A search is bounded by what the history determines, never by the
// clock: one key's search of one piece may take Options.MaxSteps steps of its model
// (DefaultSteps when zero), and a key that needs more is Unknown, "stopped after its bound",
// never a pass. Porcupine searches one key in one goroutine (our models have no Partition),
// in an order fixed by the operations, so the same history takes the same steps and gets
// the same verdict on any machine, idle or busy. A context's end also stops a search (the
// heap guard, guard.go; a user's wall-clock guard, check --timeout): that verdict is
// Unknown too, and its summary gives the context's cause, the guard that stopped it.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// DefaultSteps bounds each porcupine search when Options.MaxSteps is zero: the model steps
// one key's search of one piece may take. What it costs, measured on the 2-core build
// machine: a hard search (histgen, 20 clients without effects, judged whole) takes 375,000
// to 455,000 steps a second of CPU and about 100 bytes of memory a step, so reaching the
// bound costs 22-27 s of CPU and 0.9-1.1 GB: well under a minute, and under the heap
// guard's 2 GiB (its wall time was 22 s to 66 s beside other work, which is why the bound
// is not one in time). An illegal key is searched again to be explained, which can double
// the time.
// What it leaves room for: the hardest history the tests judge (300 operations, 20
// clients, no effects, seed 1, whole) takes 8,505,015 steps; `make bench`'s take at most
// 959,411 (a million operations judged whole); a history the harness records, with its
// effects, about one step per operation.
const DefaultSteps = 10_000_000

// identity is a worker in the models: its process number and which of its lives (see
// operations) made the request. A struct, not a packed number, so no process number and
// no count of lives can make two identities collide.
type identity struct {
	process int
	life    int
}

// nobody holds the lock in a model state when no worker does: lives count from 0, so no
// worker is ever this one.
var nobody = identity{life: -1}

func (id identity) hash() uint64 { return mix(uint64(id.process) ^ mix(uint64(id.life))) }

// String is "p2" for a worker's first life, "p2'1" for its second.
func (id identity) String() string {
	if id == nobody {
		return "nobody"
	}
	name := processName(id.process)
	if id.life > 0 {
		name += fmt.Sprintf("'%d", id.life)
	}
	return name
}

// outcome is how a modelled operation ended.
type outcome uint8

const (
	succeeded outcome = iota
	// notHeld: a release failed because the caller did not hold the lock (any more).
	notHeld
	// indeterminate: info or never completed; it may or may not have taken effect.
	indeterminate
	// rejected: any other failure; it definitely did not take effect.
	rejected
)

func (o outcome) String() string {
	return [...]string{"ok", string(history.ErrNotHeld), "info", "fail"}[o]
}

func outcomeOf(op *history.Op) outcome {
	switch op.Type() {
	case history.OK:
		return succeeded
	case history.Fail:
		if op.Func() == history.Release && op.Complete.Error == history.ErrNotHeld {
			return notHeld
		}
		return rejected
	}
	return indeterminate
}

// request is a porcupine operation's input: who asked for what.
type request struct {
	f      history.Func
	caller identity
	value  int64 // what a write wrote
	// token is the fencing token a storage request carried, when tokened.
	token   int64
	tokened bool
}

// response is a porcupine operation's output: how the request ended, what a read returned.
type response struct {
	outcome outcome
	value   int64
}

// linearizability is one porcupine checker: its model and the operations the model speaks of.
type linearizability struct {
	// model is the model of a key, starting from the state the pieces before left it in
	// (part.storage); a key's first piece starts where a whole history does.
	model func(p part, key string) porcupine.Model
	// models says whether op takes part in the search; any other op is left out.
	models func(op *history.Op, o outcome) bool
	// extra are operations the model needs that no event records, made from the piece
	// (lock-linearizable's lapses); nil: none.
	extra func(p part) []*history.Op
}

// checker is the porcupine checker named name.
func (l linearizability) checker(name Name, property Property) checker {
	return checker{name: name, property: property, search: true, start: func(opts Options) accumulator { return l.begin(name, opts) }}
}

// begin starts the search of one history.
func (l linearizability) begin(name Name, opts Options) *searchState {
	bound := opts.MaxSteps
	if bound <= 0 {
		bound = DefaultSteps
	}
	return &searchState{l: l, name: name, dir: opts.Dir, bound: bound,
		keys: map[string]bool{}, illegal: map[string]bool{}, bounded: map[string]bool{}, stopped: map[string]bool{}, files: fileNames{}}
}

// searchState is what a porcupine checker found, over the pieces judged so far.
type searchState struct {
	l     linearizability
	name  Name
	dir   string // Options.Dir
	bound int64  // the steps of each key's search of each piece
	// why is the cause of the context's end that stopped a search, if one did (guard.go,
	// check --timeout).
	why  string
	keys map[string]bool
	// illegal keys have no legal order; bounded ones needed more than the bound in some
	// piece, stopped ones were cut short by the context's end.
	illegal, bounded, stopped map[string]bool
	operations                int
	proof, doubt              evidence
	files                     fileNames
	drawn                     []string // the pages written
}

// keySearch is one key's search and what is needed to explain it.
type keySearch struct {
	key        string
	model      porcupine.Model
	ops        []*history.Op
	operations []porcupine.Operation
	result     porcupine.CheckResult
	info       porcupine.LinearizationInfo
	verbose    bool  // info holds porcupine's record of the search
	steps      int64 // the model steps the search that gave result took
	// bounded: the search needed more steps than its bound; stopped: the context ended
	// first (or before it could start). Either way result is Unknown.
	bounded, stopped bool
}

// add searches every key of the piece. Any illegal key makes the history invalid, any
// key left undecided makes it unknown.
func (st *searchState) add(ctx context.Context, p part) {
	l, ops := st.l, p.ops
	var modelled []*history.Op // the shared operations, never copied
	for i := range ops {
		if l.models(&ops[i], outcomeOf(&ops[i])) {
			modelled = append(modelled, &ops[i])
		}
	}
	st.operations += len(modelled) // the history's; extra ones are the model's own
	// A key found illegal in a piece before is not searched again (below): a piece of such
	// keys alone needs none of what a search is made from (its extra operations, its page).
	if !slices.ContainsFunc(modelled, func(op *history.Op) bool { return !st.illegal[op.Invoke.Key] }) {
		return
	}
	if l.extra != nil {
		if extra := l.extra(p); len(extra) > 0 {
			// After the history's operations invoked at the same time: operations wants
			// them in the order invoked, with an op's own before what it makes.
			modelled = append(modelled, extra...)
			slices.SortStableFunc(modelled, func(a, b *history.Op) int { return cmp.Compare(a.Invoke.Time, b.Invoke.Time) })
		}
	}
	keys, groups := byKey(modelled, func(op *history.Op) string { return op.Invoke.Key })
	infinity, tl := p.infinity, p.tl
	var page *visualisation // made for the first key drawn

	proof, doubt := &st.proof, &st.doubt
	for _, key := range keys {
		st.keys[key] = true
		// A key found illegal in a piece before is illegal in the whole history, whatever
		// its later pieces hold: they are not searched (an illegal piece can cost porcupine
		// an exhaustive search), and the one page drawn shows why.
		if st.illegal[key] {
			continue
		}
		draw := st.dir != ""
		s := l.search(ctx, st.bound, l.model(p, key), key, groups[key], infinity, draw)
		switch {
		case s.bounded:
			st.bounded[key] = true
			doubt.addf("key %s: no answer within its bound of %s (%d operations)", key, steps(st.bound), len(s.ops))
		case s.stopped:
			st.stopped[key] = true
			st.why = context.Cause(ctx).Error()
			doubt.addf("key %s: no answer before the search was stopped (%d operations)", key, len(s.ops))
		case s.result == porcupine.Illegal:
			st.illegal[key] = true
			for _, line := range l.explain(s, tl) {
				proof.addf("%s", line)
			}
		}
		// A history judged in pieces draws only where a search found it illegal.
		if draw && s.verbose && (!p.streamed || s.result == porcupine.Illegal) {
			if page == nil {
				page = newVisualisation(p.events, tl, infinity)
			}
			name := st.files.next(string(st.name), key)
			if err := page.write(filepath.Join(st.dir, name), s.model, s); err != nil {
				doubt.addf("key %s: %v", key, err)
			} else {
				st.drawn = append(st.drawn, name)
			}
			if len(s.ops) > visualiseLimit {
				lo, hi := s.shown()
				doubt.addf("key %s: %s shows operations %d to %d of %d, where the search got stuck (pages are capped at %d operations)",
					key, name, lo+1, hi, len(s.ops), visualiseLimit)
			}
		}
	}
}

func (st *searchState) result() Result {
	r := Result{Counts: map[string]int{"keys": len(st.keys), "operations": st.operations}, Files: st.drawn}
	illegal := slices.Sorted(maps.Keys(st.illegal))
	bounded, stopped := slices.Sorted(maps.Keys(st.bounded)), slices.Sorted(maps.Keys(st.stopped))
	r.Evidence = append(st.proof.list(), st.doubt.list()...)
	switch {
	case len(illegal) > 0:
		r.Verdict, r.Summary = Invalid, "not linearizable on key "+strings.Join(illegal, ", ")
	case len(bounded) > 0 || len(stopped) > 0:
		var why []string
		if len(bounded) > 0 {
			why = append(why, fmt.Sprintf("search stopped on key %s after its bound of %s", strings.Join(bounded, ", "), steps(st.bound)))
		}
		if len(stopped) > 0 {
			why = append(why, fmt.Sprintf("search did not finish on key %s (%s)", strings.Join(stopped, ", "), st.why))
		}
		r.Verdict, r.Summary = Unknown, strings.Join(why, "; ")
	default:
		r.Verdict, r.Summary = Valid, fmt.Sprintf("linearizable: %s, %s", plural(len(st.keys), "key"), plural(st.operations, "operation"))
	}
	return r
}

// search runs porcupine on one key, each search within bound steps of the model; a
// cancelled context (its cause: a memory limit, see guard.go, or a wall-clock guard) also
// stops a search under way. What a search answers after a step was refused is no verdict:
// the key is Unknown, bounded or stopped.
//
// The first search keeps no record of where it went, which costs porcupine most of its
// time and memory on a long history; only an illegal answer, which must be explained, is
// searched again with the record, within a bound of its own. It takes the steps the first
// took (the record changes no step), so it ends with the same answer unless the context
// ends first; the illegal answer stands either way, explained from what the record holds.
// A key small enough to draw (visualiseLimit) is searched once, with the record, when the
// pages are wanted.
func (l linearizability) search(ctx context.Context, bound int64, model porcupine.Model, key string, ops []*history.Op, infinity int64, draw bool) (s keySearch) {
	s = keySearch{key: key, model: model, ops: ops, operations: operations(ops, infinity), result: porcupine.Unknown}
	if ctx.Err() != nil {
		s.stopped = true
		return s
	}
	if !draw || len(ops) > visualiseLimit {
		b := &budget{bound: bound}
		s.result = porcupine.CheckOperationsTimeout(stoppable(ctx, model, b), s.operations, 0)
		if s.steps = b.taken.Load(); b.refused(&s) || s.result != porcupine.Illegal {
			return s
		}
	}
	b := &budget{bound: bound}
	result, info := porcupine.CheckOperationsVerbose(stoppable(ctx, model, b), s.operations, 0)
	s.info, s.verbose = info, true
	if s.result == porcupine.Illegal { // found by the first search: it stands
		return s
	}
	s.result, s.steps = result, b.taken.Load()
	b.refused(&s)
	return s
}

// budget is a search's bound on its model's steps, and what it refused.
type budget struct {
	bound int64
	taken atomic.Int64
	// spent: a step was refused because the bound was reached; stopped: because the
	// context had ended.
	spent, stopped atomic.Bool
}

// refused says whether the search refused a step, and if so makes s Unknown, bounded or
// stopped.
func (b *budget) refused(s *keySearch) bool {
	switch {
	case b.spent.Load():
		s.result, s.bounded = porcupine.Unknown, true
	case b.stopped.Load():
		s.result, s.stopped = porcupine.Unknown, true
	default:
		return false
	}
	return true
}

// stoppable is m refusing every step once b's bound is reached or ctx is done, which ends
// a search soon after: with every step refused porcupine only backtracks. What such a
// search answers is no verdict (budget.refused). The steps are counted in the one
// goroutine porcupine searches a model without Partition in; atomics only keep the count
// sound if a model ever partitions.
func stoppable(ctx context.Context, m porcupine.Model, b *budget) porcupine.Model {
	step := m.StepContext
	if step == nil {
		plain := m.Step
		step = func(_ context.Context, state, in, out any) (bool, any) { return plain(state, in, out) }
	}
	m.Step, m.StepContext = nil, func(c context.Context, state, in, out any) (bool, any) {
		switch {
		case b.spent.Load() || b.stopped.Load():
			return false, state
		case ctx.Err() != nil:
			b.stopped.Store(true)
			return false, state
		case b.taken.Add(1) > b.bound:
			b.taken.Add(-1)
			b.spent.Store(true)
			return false, state
		}
		return step(c, state, in, out)
	}
	return m
}

// steps is n steps, its thousands separated by commas: "20,000,000 steps", "1 step".
func steps(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if n == 1 {
		return s + " step"
	}
	return s + " steps"
}

// operations converts one key's operations (in invocation order) to porcupine's, applying
// the infinity and fresh-client-id rules described at the top of this file. Operation i is
// ops[i], which porcupine's partial linearizations refer to by index. Its input and output
// are a *request and a *response, into two slices made at once: boxed one by one, they
// were two allocations an operation.
func operations(ops []*history.Op, infinity int64) []porcupine.Operation {
	var clientID, lives history.ByProcess[int] // each process's current porcupine client id, and incarnation
	// granted is who holds by its own account, by process (as holds counts them): a lapse
	// ends that identity's hold, whatever lives came after.
	var granted history.ByProcess[identity]
	fresh := 0
	out := make([]porcupine.Operation, len(ops))
	reqs, resps := make([]request, len(ops)), make([]response, len(ops))
	for i, op := range ops {
		id, ok := clientID.Get(op.Process())
		if !ok {
			id, fresh = fresh, fresh+1
			clientID.Set(op.Process(), id)
		}
		life, _ := lives.Get(op.Process())
		caller := identity{op.Process(), life}
		o := outcomeOf(op)
		switch held, holding := granted.Get(op.Process()); {
		case op.Func() == lapse: // it ends the hold, as a release does
			if holding {
				caller = held
			}
			granted.Delete(op.Process())
		case op.Func() == history.Acquire && o == succeeded && !holding:
			granted.Set(op.Process(), caller)
		case op.Func() == history.Release:
			granted.Delete(op.Process())
		}
		// What the servers saw narrows the operation (Op.Window): the search then tries
		// far fewer orders. An indeterminate operation may take effect at any time after
		// its start; settle bounds when that can matter.
		call, ret := op.Window()
		if o == indeterminate {
			ret = infinity
			clientID.Delete(op.Process())
			lives.Set(op.Process(), life+1)
		}
		var read int64
		if o == succeeded {
			read = valueOf(op.Complete.Value)
		}
		req := &reqs[i]
		*req = request{f: op.Func(), caller: caller, value: valueOf(op.Invoke.Value)}
		if t := op.Invoke.Token; t != nil && (req.f == history.Read || req.f == history.Write) {
			req.token, req.tokened = *t, true
		}
		resps[i] = response{outcome: o, value: read}
		out[i] = porcupine.Operation{
			ClientId: id,
			Input:    req,
			Call:     call,
			Output:   &resps[i],
			Return:   ret,
			Metadata: op,
		}
	}
	settle(out, ops)
	// A piece of a history ends where none of its operations can take effect any more
	// (see cutter): none returns later.
	for i := range out {
		out[i].Return = min(out[i].Return, infinity)
	}
	return out
}

// settle gives indeterminate operations a return before infinity where that loses no
// legal order, which keeps porcupine from trying every place for each of them (the search
// grows exponentially with operations open at once). It rests on the fresh identity an
// indeterminate operation leaves behind (see operations): its caller never acts again.
//   - An acquire or a release: in both models every state it can lead to is no better than
//     the one it leaves when it has no effect (a lock held by, or released by, an identity
//     that never acts again lets no other request through that "no effect" would refuse),
//     and "no effect" is among its outcomes wherever it is placed. So it may be placed
//     anywhere: it returns when it completed (a never-completed one stays at infinity).
//   - A write without a token takes effect only while its caller holds the lock. Once
//     another identity's acquire invoked after the write took effect, nothing makes the
//     dead caller the holder again, so the write took effect before that acquire
//     returned, or never: it returns with the earliest such acquire.
//   - A write with token t takes effect only while no higher token has been accepted, and
//     the storage's highest token never falls. An accepted request with a higher token
//     took effect by its return, so the write took effect before the earliest such
//     return, or never: it returns then.
func settle(out []porcupine.Operation, ops []*history.Op) {
	var acquires, accepted returnsAbove // ok acquires by call; accepted tokened requests by token
	for _, op := range out {
		req, resp := op.Input.(*request), op.Output.(*response)
		switch {
		case resp.outcome != succeeded:
		case req.f == history.Acquire:
			acquires = append(acquires, keyedReturn{op.Call, op.Return})
		case req.tokened:
			accepted = append(accepted, keyedReturn{req.token, op.Return})
		}
	}
	acquires.sort()
	accepted.sort()
	for i := range out {
		op := &out[i]
		req := op.Input.(*request)
		if op.Output.(*response).outcome != indeterminate || ops[i].Complete == nil && req.f != history.Write {
			continue
		}
		bound, ok := int64(0), false
		switch {
		case req.f == history.Acquire, req.f == history.Release:
			op.Return = ops[i].Complete.Time
		case req.f == history.Write && req.tokened:
			bound, ok = accepted.earliestAbove(req.token)
		case req.f == history.Write:
			bound, ok = acquires.earliestAbove(op.Call)
		}
		if ok {
			op.Return = max(op.Call, min(op.Return, bound))
		}
	}
}

// keyedReturn is an operation's return, found by a key: its call, or its token.
type keyedReturn struct{ key, ret int64 }

// returnsAbove answers settle's question: of the operations whose key is above k, which
// returned first?
type returnsAbove []keyedReturn

// sort orders by key and gives each entry the earliest return from it on.
func (r returnsAbove) sort() {
	slices.SortFunc(r, func(a, b keyedReturn) int { return cmp.Compare(a.key, b.key) })
	for i := len(r) - 2; i >= 0; i-- {
		r[i].ret = min(r[i].ret, r[i+1].ret)
	}
}

// earliestAbove is the earliest return of the operations whose key is above k; false when
// there is none.
func (r returnsAbove) earliestAbove(k int64) (int64, bool) {
	i := sort.Search(len(r), func(i int) bool { return r[i].key > k })
	if i == len(r) {
		return 0, false
	}
	return r[i].ret, true
}

// explain says where the search got stuck, from porcupine's longest partial linearization:
// the last operations it could place, the model's state after them, and the operation that
// could not come next (the earliest-returning one left, which had to be placed before
// anything invoked after it returned).
func (l linearizability) explain(s keySearch, tl timeline) []string {
	longest, stuck := s.stuck()
	lapsed := 0
	for _, op := range s.ops {
		if op.Func() == lapse {
			lapsed++
		}
	}
	of := fmt.Sprintf("%d operations", len(s.ops)-lapsed)
	if lapsed > 0 {
		of += fmt.Sprintf(" (and %s)", plural(lapsed, "lapse"))
	}
	lines := []string{fmt.Sprintf("key %s: no order of its %s is legal; the longest legal prefix has %d", s.key, of, len(longest))}
	state := s.model.Init()
	for _, id := range longest {
		_, state = s.model.Step(state, s.operations[id].Input, s.operations[id].Output)
	}
	for _, id := range longest[max(0, len(longest)-3):] {
		lines = append(lines, "  last placed: "+tl.describe(*s.ops[id]))
	}
	lines = append(lines, "  state then: "+s.model.DescribeState(state))
	if stuck >= 0 {
		lines = append(lines, "  cannot come next: "+tl.describe(*s.ops[stuck]))
	}
	return lines
}

// stuck is porcupine's longest partial linearization (operation ids) and the operation
// that could not come next (-1 when none is left).
func (s keySearch) stuck() (longest []int, stuck int) {
	if partials := s.info.PartialLinearizations(); len(partials) > 0 {
		// Porcupine hands the partials over in map order: ties are broken by the ids, so
		// the same history is explained the same way every time.
		for _, p := range partials[0] {
			if len(p) > len(longest) || len(p) == len(longest) && slices.Compare(p, longest) < 0 {
				longest = p
			}
		}
	}
	placed := make([]bool, len(s.ops))
	for _, id := range longest {
		placed[id] = true
	}
	// An indeterminate operation can always come next (settle): it is never the one stuck.
	returns := func(op porcupine.Operation) int64 {
		if op.Output.(*response).outcome == indeterminate {
			return math.MaxInt64
		}
		return op.Return
	}
	stuck = -1
	for id, op := range s.operations {
		if placed[id] {
			continue
		}
		if stuck < 0 || returns(op) < returns(s.operations[stuck]) ||
			returns(op) == returns(s.operations[stuck]) && op.Call < s.operations[stuck].Call {
			stuck = id
		}
	}
	return longest, stuck
}

// fileNames hands out visualisation file names, "<checker>-<key>.html", with the key made
// safe for a file name; two keys that sanitise alike get distinct names.
type fileNames map[string]bool

func (used fileNames) next(checker, key string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, key)
	name := checker + "-" + safe + ".html"
	for n := 2; used[name]; n++ {
		name = fmt.Sprintf("%s-%s-%d.html", checker, safe, n)
	}
	used[name] = true
	return name
}

// describeRequest is the models' DescribeOperation: "p1 write 3 -> info".
func describeRequest(in, out any) string {
	req, resp := in.(*request), out.(*response)
	if req.f == lapse {
		return req.caller.String() + "'s hold lapses"
	}
	s := req.caller.String() + " " + string(req.f)
	if req.f == history.Write {
		s += fmt.Sprintf(" %d", req.value)
	}
	if req.tokened {
		s += fmt.Sprintf(" (token %d)", req.token)
	}
	if resp.outcome == succeeded && (req.f == history.Read || req.f == history.FinalRead) {
		return s + fmt.Sprintf(" -> %d", resp.value)
	}
	return s + " -> " + resp.outcome.String()
}

// describeEvents is the models' DescribeOperationMetadata: where the operation is in the history.
func describeEvents(metadata any) string {
	op := metadata.(*history.Op)
	if op.Complete == nil {
		return fmt.Sprintf("events #%d .. never completed", op.Invoke.Index)
	}
	s := fmt.Sprintf("events #%d .. #%d", op.Invoke.Index, op.Complete.Index)
	if op.Complete.Error != "" {
		s += " (" + string(op.Complete.Error) + ")"
	}
	return s
}

func describeHolder(h identity) string {
	if h == nobody {
		return "free"
	}
	return "held by " + h.String()
}

func valueOf(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// mix spreads the bits of a model state's fields for porcupine's state cache (splitmix64).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Package checkers decides, from a recorded history alone, whether a run kept its promises:
// was the lock a mutex (lock-linearizable, mutual-exclusion), did it keep the leases it
// granted (lease-safety), did the storage it guards stay correct (data-safety,
// lost-updates), did fencing tokens do their job (fencing).
//
// Checkers are pure: they read []history.Event and never import containers, workers or
// anything that touches Docker, so `lockbreaker check DIR` can re-run them on a saved run.
// Each returns its own verdict; they are never collapsed into one bit except for the exit
// code, where invalid beats unknown beats valid (as Jepsen's checker/compose does). A verdict
// of valid is a claim, so Judge holds every verdict to the stats precondition: a history in
// which too little happened proves nothing and is unknown, never valid.
package checkers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Verdict is a checker's answer.
type Verdict string

const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	// Unknown: the checker could not decide (a search stopped at its bound or by a guard, a
	// crash, not enough data). Never a pass.
	Unknown Verdict = "unknown"
	// NotApplicable: the property does not exist for this run (fencing on a lock without
	// tokens, herd on a lock that is not a queue). It proves nothing and counts for nothing.
	NotApplicable Verdict = "not-applicable"
)

// Property is what a checker's verdict speaks for; reports group verdicts by it.
type Property string

const (
	// PropertyLockSafety: did two clients ever hold the lock at once?
	PropertyLockSafety Property = "lock safety"
	// PropertyDataSafety: did the storage the lock guards stay correct?
	PropertyDataSafety Property = "data safety"
	// PropertyFencing: did the tokens increase, and did the storage reject stale ones?
	PropertyFencing Property = "fencing"
	// PropertyPrecondition: did enough happen for the other verdicts to mean anything?
	PropertyPrecondition Property = "precondition"
	// PropertyMetric: a measurement worth watching; it never changes the overall verdict.
	PropertyMetric Property = "metric"
)

// Result is one checker's verdict with the evidence behind it.
type Result struct {
	Checker  Name     `json:"checker"`
	Property Property `json:"property"`
	Verdict  Verdict  `json:"verdict"`
	// Summary is one line a person reads first, e.g. "2 overlapping holds".
	Summary string `json:"summary"`
	// Evidence are concrete lines pointing into the history (event indexes, clients, times).
	Evidence []string `json:"evidence,omitempty"`
	// Counts are the numbers behind the verdict, e.g. "stale-rejected": 3.
	Counts map[string]int `json:"counts,omitempty"`
	// Files are artifacts the checker wrote into Options.Dir (names relative to it).
	Files []string `json:"files,omitempty"`
	// Overlaps are the pairs of overlapping holds mutual-exclusion found, the first
	// overlapLimit of them (Counts["overlaps"] counts all): Evidence shows only the first few.
	Overlaps []Overlap `json:"overlaps,omitempty"`
	// FirstViolation is when the earliest violating event this checker found happened,
	// counted from the history's first event; nil when it found none, and from the
	// porcupine searches, which can say that no order is legal but not from when on. A
	// suite reads it for how long a fault took to break the lock.
	FirstViolation *time.Duration `json:"first_violation_ns,omitempty"`
	// Story tells the first violation in a few plain sentences (package story), on an
	// invalid result whose violation it can tell; the checker leaves it empty.
	Story []Sentence `json:"story,omitempty"`
}

// Sentence is one sentence of a Story, about one event of the history.
type Sentence struct {
	Text string `json:"text"`
	// Event is the index of the event it tells of.
	Event int `json:"event"`
}

// StoryText is a story as one paragraph of text.
func StoryText(story []Sentence) string {
	texts := make([]string, len(story))
	for i, s := range story {
		texts[i] = s.Text
	}
	return strings.Join(texts, " ")
}

// Options are what a checker may use besides the history.
type Options struct {
	// Dir is where a checker may write artifacts (porcupine's visualisation); empty: none.
	Dir string
	// MaxSteps bounds each porcupine search by the steps of its model one key's search may
	// take (DefaultSteps when zero); a history judged in pieces (Stream) gives each key this
	// bound in each piece. A search that needs more is Unknown and says so. A bound in
	// steps, unlike one in time, gives a history the same verdict on any machine; to bound
	// the wall-clock time as well, give the context a deadline (its cause is then the
	// summary's reason).
	MaxSteps int64
	// FaultsRequested says the run asked a nemesis for faults, so a history without any
	// fault did not test what it was meant to (see stats.go).
	FaultsRequested bool
	// Hazards are the hazards the run's nemeses exist to create (history.Hazard), by the
	// nemesis that asked for each: a pass needs every one of them to have occurred at least
	// once (see stats.go). A history checked without its spec is not held to them.
	Hazards map[string]history.Hazard
	// Lease is what the run's lock promised its holders; a zero TTL (a history checked
	// without its run's summary) leaves lease-safety not applicable.
	Lease history.Lease
	// Ops are the history's operations as history.Pair made them, given by a caller that
	// paired it already; nil: RunAll pairs it, once for every checker it runs.
	Ops []history.Op

	// pairErr is why the history did not pair, when RunAll paired it.
	pairErr error
}

// Checker decides one property of a history. Every checker is a checker value (below):
// its name, its property, and the accumulator it judges a history with.
type Checker interface {
	Name() Name
	Property() Property
	// Check judges a whole history: one piece, added to a fresh accumulator.
	Check(ctx context.Context, events []history.Event, opts Options) Result
	// begin starts judging one history, whole or piece by piece (see accumulator).
	begin(opts Options) accumulator
}

// accumulator is one checker judging one history. A history judged whole is one piece;
// one too long to hold is judged piece by piece (stream.go), each piece added in the order
// of the history. What a checker learns from a piece that a later one needs (counts,
// evidence, the highest token so far) lives in its accumulator's fields and nowhere else,
// so the result after the last piece is the one for the whole history.
type accumulator interface {
	// add judges the next piece.
	add(ctx context.Context, p part)
	// result is the verdict on the pieces added so far; it is asked for once, after the last.
	result() Result
}

// part is one piece of a history as a checker judges it.
type part struct {
	// events and ops are lent to add: a Stream fills their room with a later piece once
	// every checker has judged this one, so an accumulator keeps copies, never pointers.
	events []history.Event
	// ops are the piece's operations, paired, shared by every checker: read them, never
	// change them.
	ops []history.Op
	// tl counts times from the history's first event, also in a later piece.
	tl timeline
	// infinity is when an indeterminate operation returns (see operations): no operation
	// of the piece takes effect after it (see cutter). For a whole history, and the last
	// piece, it is the history's last time + 1.
	infinity int64
	// streamed says the history is judged in pieces; storage is then the register and
	// fence of each key at the piece's start (data-safety).
	streamed bool
	storage  map[string]guarded
}

// whole is a history judged whole, as one piece.
func whole(events []history.Event, ops []history.Op) part {
	return part{events: events, ops: ops, tl: newTimeline(events), infinity: history.Span(events) + 1}
}

// checker is what every checker is made of, written once: its name, the property its
// verdict speaks for, and how it begins judging a history.
type checker struct {
	name     Name
	property Property
	// search says its porcupine search takes most of the memory a check needs (see RunAll).
	search bool
	start  func(opts Options) accumulator
}

func (c checker) Name() Name                     { return c.name }
func (c checker) Property() Property             { return c.property }
func (c checker) begin(opts Options) accumulator { return c.start(opts) }

func (c checker) Check(ctx context.Context, events []history.Event, opts Options) Result {
	return RunAll(ctx, []Checker{c}, events, opts)[0]
}

// Name is a checker's name: a Result's Checker, the keys of a suite's expectations, the
// rows of a report.
type Name string

// The checkers' names, declared here once. Everything that names a checker uses these
// (history/names_test.go finds a name spelled out anywhere else).
const (
	LockLinearizable Name = "lock-linearizable"
	MutualExclusion  Name = "mutual-exclusion"
	LeaseSafety      Name = "lease-safety"
	DataSafety       Name = "data-safety"
	LostUpdates      Name = "lost-updates"
	Fencing          Name = "fencing"
	Herd             Name = "herd"
	Stats            Name = "stats"
)

// All returns every checker, in the order reports list them: lock safety first
// (lock-linearizable, mutual-exclusion, lease-safety), then data safety (data-safety, lost-updates),
// then fencing, then the herd metric, then the stats precondition.
func All() []Checker {
	return []Checker{lockLinearizable, mutualExclusion, leaseSafety, dataSafety, lostUpdates, fencing, herd, stats}
}

// Worst merges verdicts: invalid beats unknown beats valid. Metrics and verdicts that are
// not applicable take no part; with nothing left, nothing was proven: unknown.
func Worst(results []Result) Verdict {
	valid, unknown := false, false
	for _, r := range results {
		if r.Property == PropertyMetric {
			continue
		}
		switch r.Verdict {
		case Invalid:
			return Invalid
		case Valid:
			valid = true
		case NotApplicable:
		default:
			unknown = true
		}
	}
	if valid && !unknown {
		return Valid
	}
	return Unknown
}

// Judge runs every checker (All) on the history and holds their verdicts to the stats
// precondition: when too little happened for a pass to mean anything, every valid verdict
// becomes unknown and says why. An invalid verdict stands: a violation found is proven
// however little else happened.
func Judge(ctx context.Context, events []history.Event, opts Options) []Result {
	return precondition(RunAll(ctx, All(), events, opts))
}

// precondition holds the results of every checker to the stats precondition (see Judge).
func precondition(results []Result) []Result {
	var stats Result
	for _, r := range results {
		if r.Property == PropertyPrecondition && r.Verdict != Valid {
			stats = r
		}
	}
	if stats.Checker == "" {
		return results
	}
	for i, r := range results {
		if r.Verdict == Valid && r.Property != PropertyMetric {
			results[i].Verdict = Unknown
			results[i].Summary = "unproven: " + stats.Summary + " (the history alone says: " + r.Summary + ")"
		}
	}
	return results
}

// RunAll runs every checker, each guarded so a crash becomes Unknown, never a pass, and
// returns their results in cs's order. The history is paired once for all of them (unless
// opts.Ops has it paired); one that does not pair is unknown to every checker.
func RunAll(ctx context.Context, cs []Checker, events []history.Event, opts Options) []Result {
	if opts.Ops == nil {
		opts.Ops, opts.pairErr = history.Pair(events)
	}
	js := begin(cs, opts)
	if opts.pairErr != nil {
		results := make([]Result, len(js))
		for i, j := range js {
			results[i] = j.named(corrupt(opts.pairErr))
		}
		return results
	}
	addAll(ctx, js, whole(events, opts.Ops))
	return resultsOf(js)
}

// judging is one checker judging one history: its accumulator, guarded. Once it crashed
// it judges no further piece, and its result is unknown.
type judging struct {
	c     Checker
	acc   accumulator
	crash string // why it crashed; empty while it has not
}

// begin starts judging one history with every checker.
func begin(cs []Checker, opts Options) []*judging {
	js := make([]*judging, len(cs))
	for i, c := range cs {
		js[i] = &judging{c: c}
		js[i].guard(func() { js[i].acc = c.begin(opts) })
	}
	return js
}

// addAll judges the next piece with every checker. The porcupine searches
// (checker.search) run one after another beside the other checkers, as a Stream's two
// judges run them, whatever GOMAXPROCS: checkers only read the piece, and two searches at
// once would need twice the memory of one.
func addAll(ctx context.Context, js []*judging, p part) {
	var wg sync.WaitGroup
	wg.Go(func() { addSome(ctx, js, p, true) })
	addSome(ctx, js, p, false)
	wg.Wait()
}

// addSome judges the next piece with the checkers that search, one after another, or
// with the others.
func addSome(ctx context.Context, js []*judging, p part, search bool) {
	for _, j := range js {
		if c, _ := j.c.(checker); c.search == search {
			j.guard(func() { j.acc.add(ctx, p) })
		}
	}
}

// resultsOf is every checker's result on the pieces added.
func resultsOf(js []*judging) []Result {
	results := make([]Result, len(js))
	for i, j := range js {
		var r Result
		j.guard(func() { r = j.acc.result() })
		results[i] = j.named(r)
	}
	return results
}

// guard runs f unless the checker crashed before, and keeps why if f crashes.
func (j *judging) guard(f func()) {
	if j.crash != "" {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			j.crash = fmt.Sprintf("checker crashed: %v", p)
		}
	}()
	f()
}

// named is r as the checker's: its name and property, and unknown for no verdict or a crash.
func (j *judging) named(r Result) Result {
	if j.crash != "" {
		r = Result{Verdict: Unknown, Summary: j.crash}
	}
	r.Checker, r.Property = j.c.Name(), j.c.Property()
	if r.Verdict == "" {
		r.Verdict = Unknown
	}
	return r
}

package checkers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

// expect is what one checker must say about a history: its verdict, the counts that matter
// and pieces of text that must appear in its summary and evidence.
type expect struct {
	verdict  Verdict
	counts   map[string]int
	summary  string
	evidence []string
}

func TestCheckersOnHandMadeHistories(t *testing.T) {
	tests := []struct {
		file string
		want map[Name]expect // by checker name
	}{{
		file: "clean.jsonl", // one holder at a time, a busy acquire, a harmless partition
		want: map[Name]expect{
			"lock-linearizable": {verdict: Valid, counts: map[string]int{"keys": 1, "operations": 4}},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2, "overlaps": 0}},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 2, "writes-rejected": 0}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "final": 2, "lost": 0}},
			"fencing": {verdict: NotApplicable, counts: map[string]int{"grants-with-token": 0},
				summary: "no fencing tokens in this history: nothing to check"},
			"herd":  {verdict: NotApplicable},
			"stats": {verdict: Valid, counts: map[string]int{"acquires-granted": 2, "writes-accepted": 2, "faults": 1}},
		},
	}, {
		file: "kleppmann-unfenced.jsonl", // A paused past its lease, B took the lock, A's write landed
		want: map[Name]expect{
			"lock-linearizable": {verdict: Invalid, summary: "not linearizable on key k", evidence: []string{
				"key k: no order of its 4 operations is legal; the longest legal prefix has 1",
				"last placed: p0 acquire k -> ok, #0 (t=0s) .. #1 (t=2ms)",
				"state then: {held by p0}",
				"cannot come next: p1 acquire k -> ok, #5 (t=20ms) .. #6 (t=22ms)",
			}},
			"mutual-exclusion": {verdict: Invalid, counts: map[string]int{"holds": 2, "overlaps": 1}, evidence: []string{
				"p0 held k from #1 (t=2ms) to #16 (t=33ms), its release; p1 acquired k at #6 (t=22ms) while p0 still believed it held it; overlap 5ms",
			}},
			"data-safety": {verdict: Invalid, counts: map[string]int{"writes-accepted": 2, "writes-rejected": 0}, evidence: []string{
				"state then: {free, register 1}",
				"cannot come next: p0 write k 1 -> ok, #14 (t=31ms) .. #15 (t=32ms)",
			}},
			"lost-updates": {verdict: Invalid, counts: map[string]int{"acknowledged": 2, "final": 1, "lost": 1},
				summary: "1 acknowledged increment lost", evidence: []string{
					"key k: final counter 1, 2 acknowledged increments: 1 lost",
					"stale overwrite: p0 wrote 1 after p1 had written 1",
				}},
			"fencing": {verdict: NotApplicable, counts: map[string]int{"grants-with-token": 0}},
		},
	}, {
		file: "kleppmann-fenced.jsonl", // the same pause; the storage rejects A's stale token
		want: map[Name]expect{
			"lock-linearizable": {verdict: Invalid, evidence: []string{"cannot come next: p1 acquire k -> ok token=34"}},
			"mutual-exclusion":  {verdict: Invalid, counts: map[string]int{"overlaps": 1}},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 1, "writes-rejected": 1}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 1, "final": 1, "lost": 0}},
			"fencing": {verdict: Valid, summary: "tokens increase; 1 stale request rejected", counts: map[string]int{
				"grants-with-token": 2, "stale-rejected": 1, "regressions": 0, "duplicates": 0, "stale-accepted": 0,
			}},
		},
	}, {
		file: "expired-lease.jsonl", // the lease expired, nobody took it, the release says not-held
		want: map[Name]expect{
			"lock-linearizable": {verdict: Valid},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2, "overlaps": 0}},
			"data-safety":       {verdict: Valid},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "final": 2}},
			"fencing":           {verdict: NotApplicable},
		},
	}, {
		file: "indeterminate.jsonl", // an acquire and a release that timed out, a write that timed out but landed, an op never answered
		want: map[Name]expect{
			"lock-linearizable": {verdict: Valid, counts: map[string]int{"operations": 6}},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2}},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 1}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 1, "indeterminate": 1, "final": 2, "lost": 0}},
			"fencing":           {verdict: NotApplicable},
		},
	}, {
		file: "fencing-duplicate.jsonl",
		want: map[Name]expect{
			"lock-linearizable": {verdict: Valid},
			"fencing": {verdict: Invalid, summary: "1 duplicate token",
				counts:   map[string]int{"grants-with-token": 2, "duplicates": 1, "regressions": 0},
				evidence: []string{"key k: token 34 granted to p0 (#1) and to p1 (#5)"}},
		},
	}, {
		file: "fencing-regression.jsonl", // a failover lost the token counter
		want: map[Name]expect{
			"fencing": {verdict: Invalid, summary: "1 token regression",
				counts:   map[string]int{"regressions": 1, "duplicates": 0},
				evidence: []string{"key k: token 3 granted to p1 at #6 (t=6ms) after token 5 was granted to p0 at #1 (t=2ms)"}},
		},
	}, {
		file: "fencing-stale-accepted.jsonl", // the storage ignores tokens
		want: map[Name]expect{
			"data-safety": {verdict: Invalid},
			"fencing": {verdict: Invalid, summary: "1 stale request accepted",
				counts:   map[string]int{"stale-accepted": 1, "stale-rejected": 0, "regressions": 0},
				evidence: []string{"storage accepted p0 write k 1 token=33 -> ok, #14 (t=31ms) .. #15 (t=32ms) after accepting token 34 from p1 at #8 (t=24ms)"}},
		},
	}, {
		// The lock passes on when the new token reaches the storage: the old holder's write
		// that lands in between is one the new holder reads, not a corruption.
		file: "fenced-handover-at-storage.jsonl",
		want: map[Name]expect{
			"lock-linearizable": {verdict: Invalid},
			"mutual-exclusion":  {verdict: Invalid},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 2}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "final": 2, "lost": 0}},
			"fencing":           {verdict: Valid},
		},
	}, {
		file: "fenced-token-shared.jsonl", // a failover granted one token twice, the storage let both through
		want: map[Name]expect{
			"data-safety": {verdict: Invalid, evidence: []string{"fenced at token 34 of p0", "cannot come next: p1 read k token=34"}},
			"fencing":     {verdict: Invalid, summary: "1 duplicate token"},
		},
	}, {
		// A write that timed out landed after the next grant, before its token reached the
		// storage: the search must still place it there.
		file: "fenced-late-info-write.jsonl",
		want: map[Name]expect{"data-safety": {verdict: Valid}},
	}, {
		file: "fenced-info-write-after-newer-token.jsonl", // it would have to land after the newer token
		want: map[Name]expect{"data-safety": {verdict: Invalid}},
	}, {
		file: "no-final-read.jsonl",
		want: map[Name]expect{
			"lost-updates": {verdict: Unknown, summary: "no final read of key k"},
			"data-safety":  {verdict: Valid},
		},
	}, {
		// A's first acquire went unanswered, so A starts a new life: that old acquire, placed
		// late, must not make the new A the holder again and excuse its stale write.
		file: "stale-after-lost-acquire.jsonl",
		want: map[Name]expect{
			"data-safety":  {verdict: Invalid},
			"lost-updates": {verdict: Invalid, counts: map[string]int{"lost": 1}},
		},
	}, {
		// Two acknowledged writes of 1: an increment was lost, even though an indeterminate
		// write later made the final counter equal to the writes.
		file: "overwrite-hidden-by-info-write.jsonl",
		want: map[Name]expect{
			"lost-updates": {verdict: Invalid, counts: map[string]int{"acknowledged": 2, "final": 2, "lost": 1}},
		},
	}, {
		// ZooKeeper under kill-client: p0 is killed holding the lock, with its write in
		// flight; the ensemble expires its session and p1 is granted seconds later. The
		// hold that was never released lapses at p0's last event (issue 35).
		file: "killed-holder-lapses.jsonl",
		want: map[Name]expect{
			"lock-linearizable": {verdict: Valid, counts: map[string]int{"keys": 1, "operations": 5}},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 3, "overlaps": 0}},
			"data-safety":       {verdict: Valid},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "indeterminate": 1, "final": 3, "lost": 0}},
			"fencing":           {verdict: Valid},
		},
	}, {
		// The same kill, but p1 was granted while p0 still acted (its rejected write, its
		// read the kill cut short): a lapse comes only after the holder's last event.
		file: "killed-holder-still-acting.jsonl",
		want: map[Name]expect{
			"lock-linearizable": {verdict: Invalid, evidence: []string{
				"key k: no order of its 3 operations (and 1 lapse) is legal",
				"state then: {held by p0}",
				"cannot come next: p1 acquire k -> ok token=2, #2 (t=2ms) .. #5 (t=4.01s)",
			}},
			"mutual-exclusion": {verdict: Invalid, counts: map[string]int{"holds": 2, "overlaps": 1}, evidence: []string{
				"p0 held k from #1 (t=1ms) to #15 (t=4.019s), its last event; p1 acquired k at #5 (t=4.01s) while p0 still believed it held it; overlap 9ms",
			}},
			"data-safety": {verdict: Valid},
			"fencing":     {verdict: Valid, counts: map[string]int{"stale-rejected": 1}},
		},
	}, {
		// p0's release fails unreachable (a partition: the request never got there), so the
		// service keeps its lease until it runs out and grants p1 seconds later. p0 let go
		// at its release, and its hold lapses there: every checker finds it valid.
		file: "release-unreachable.jsonl",
		want: map[Name]expect{
			"lock-linearizable": {verdict: Valid, counts: map[string]int{"keys": 1, "operations": 3}},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2, "overlaps": 0}},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 2, "writes-rejected": 0}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "final": 2, "lost": 0}},
			"fencing":           {verdict: Valid},
			"stats":             {verdict: Valid, counts: map[string]int{"acquires-granted": 2, "writes-accepted": 2, "faults": 1}},
		},
	}, {
		file: "three-holders.jsonl", // every overlapping pair is its own line
		want: map[Name]expect{
			"mutual-exclusion": {verdict: Invalid, summary: "3 overlapping holds", counts: map[string]int{"holds": 3, "overlaps": 3},
				evidence: []string{
					"p0 held k from #1 (t=1ms) to #11 (t=21ms), its last event; p1 acquired k at #3 (t=3ms) while p0 still believed it held it; overlap 9ms",
					"p0 held k from #1 (t=1ms) to #11 (t=21ms), its last event; p2 acquired k at #5 (t=5ms) while p0 still believed it held it; overlap 9ms",
					"p1 held k from #3 (t=3ms) to #6 (t=12ms), its release; p2 acquired k at #5 (t=5ms) while p1 still believed it held it; overlap 7ms",
				}},
			"lost-updates": {verdict: Unknown, summary: "no final read"},
		},
	}, {
		// Issue 35: PgBouncer in transaction pooling ran p0's lock statement in the server
		// session (backend 4242) that held p1's, and the server granted it again. p1's reply
		// reached the recorder first, though p0's was read 0.3 ms earlier: the earlier hold
		// is the later grant in the file.
		file: "pooled-session.jsonl",
		want: map[Name]expect{
			"mutual-exclusion": {verdict: Invalid, summary: "1 overlapping hold", counts: map[string]int{"holds": 2, "overlaps": 1},
				evidence: []string{
					"p0 held k from #3 (t=41.6ms) to #13 (t=47ms), its release; p1 acquired k at #2 (t=41.9ms) while p0 still believed it held it; overlap 5.1ms",
				}},
			"lost-updates": {verdict: Invalid, counts: map[string]int{"lost": 1}},
		},
	}}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".jsonl"), func(t *testing.T) {
			events := readHistory(t, tt.file)
			results := map[Name]Result{}
			for _, r := range RunAll(t.Context(), All(), events, Options{}) {
				results[r.Checker] = r
			}
			for name, want := range tt.want {
				r, ok := results[name]
				if !ok {
					t.Fatalf("no checker named %s ran", name)
				}
				t.Run(string(name), func(t *testing.T) { want.assert(t, r) })
			}
		})
	}
}

func (want expect) assert(t *testing.T, r Result) {
	t.Helper()
	if r.Verdict != want.verdict {
		t.Errorf("verdict %s, want %s (%s; %q)", r.Verdict, want.verdict, r.Summary, r.Evidence)
	}
	if !strings.Contains(r.Summary, want.summary) {
		t.Errorf("summary %q, want it to contain %q", r.Summary, want.summary)
	}
	for name, n := range want.counts {
		if got, ok := r.Counts[name]; !ok || got != n {
			t.Errorf("count %s = %d (present: %v), want %d", name, got, ok, n)
		}
	}
	for _, line := range want.evidence {
		if !slices.ContainsFunc(r.Evidence, func(e string) bool { return strings.Contains(e, line) }) {
			t.Errorf("no evidence line contains %q; evidence:\n%s", line, strings.Join(r.Evidence, "\n"))
		}
	}
}

func readHistory(t *testing.T, name string) []history.Event {
	t.Helper()
	file, err := history.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return file.Events
}

// A search that may take no step, or whose context has ended, is Unknown and names why.
func TestSearchesEndUnknownWhenStopped(t *testing.T) {
	cancelled, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("stopped on purpose"))
	tests := []struct {
		name    string
		ctx     context.Context
		steps   int64
		summary string
	}{
		{"one step", t.Context(), 1, "search stopped on key k after its bound of 1 step"},
		{"context cancelled", cancelled, 0, "search did not finish on key k (stopped on purpose)"},
	}
	events := readHistory(t, "clean.jsonl")
	for _, tt := range tests {
		for _, c := range []Checker{lockLinearizable, dataSafety} {
			t.Run(tt.name+"/"+string(c.Name()), func(t *testing.T) {
				r := c.Check(tt.ctx, events, Options{MaxSteps: tt.steps})
				if r.Verdict != Unknown || !strings.HasPrefix(r.Summary, tt.summary) {
					t.Errorf("got %s: %s, want unknown: %s", r.Verdict, r.Summary, tt.summary)
				}
			})
		}
	}
}

// A wall-clock guard (a deadline on the context, as check --timeout gives) stops a search
// under way: the model below takes a millisecond a step, and the history 1,915 steps, far
// more than the deadline leaves; the verdict is Unknown with the deadline's cause, never
// the Illegal that refused steps would make of a legal history.
func TestAWallClockGuardStopsASearch(t *testing.T) {
	slow := linearizability{
		model: func(part, string) porcupine.Model {
			m := strictMutex
			step := m.StepContext
			m.StepContext = func(c context.Context, state, in, out any) (bool, any) {
				time.Sleep(time.Millisecond)
				return step(c, state, in, out)
			}
			return m
		},
		models: isLockOp,
	}
	ctx, cancel := context.WithTimeoutCause(t.Context(), 50*time.Millisecond, errors.New("a wall-clock guard"))
	defer cancel()
	events := histgen.Generate(histgen.Config{Ops: 300, Clients: 20, Seed: 1})
	r := slow.checker("slow", PropertyLockSafety).Check(ctx, events, Options{})
	if r.Verdict != Unknown || r.Summary != "search did not finish on key k (a wall-clock guard)" {
		t.Errorf("got %s: %s, want unknown: search did not finish, a wall-clock guard", r.Verdict, r.Summary)
	}
}

func TestVisualisationFilesAreWritten(t *testing.T) {
	events := readHistory(t, "kleppmann-unfenced.jsonl")
	dir := t.TempDir()
	for _, c := range []Checker{lockLinearizable, dataSafety} {
		r := c.Check(t.Context(), events, Options{Dir: dir})
		want := string(c.Name()) + "-k.html"
		if !slices.Equal(r.Files, []string{want}) {
			t.Fatalf("%s: files %q, want [%s]", c.Name(), r.Files, want)
		}
		html, err := os.ReadFile(filepath.Join(dir, want))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{`"Tag":"nemesis"`, `"Description":"pause worker0"`, "events #16 .. #17 (not-held)"} {
			if !strings.Contains(string(html), s) {
				t.Errorf("%s does not contain %s", want, s)
			}
		}
	}
	if r := lockLinearizable.Check(t.Context(), events, Options{}); len(r.Files) != 0 {
		t.Errorf("files %q written without a Dir", r.Files)
	}
}

func TestVisualisationFileNamesAreSafeAndDistinct(t *testing.T) {
	names := fileNames{}
	for _, tt := range []struct{ key, want string }{
		{"locks/k 1", "data-safety-locks_k_1.html"},
		{"locks:k?1", "data-safety-locks_k_1-2.html"},
		{"../etc", "data-safety-.._etc.html"},
		{"", "data-safety-.html"},
	} {
		if got := names.next("data-safety", tt.key); got != tt.want {
			t.Errorf("key %q: file %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestCorruptHistoryIsUnknown(t *testing.T) {
	events := []history.Event{{Index: 0, Type: history.OK, Process: 0, Func: history.Acquire, Key: "k", Time: 1}}
	for _, r := range RunAll(t.Context(), All(), events, Options{}) {
		if r.Verdict != Unknown || !strings.Contains(r.Summary, "completion without an invocation") {
			t.Errorf("%s: %s: %s, want unknown", r.Checker, r.Verdict, r.Summary)
		}
	}
}

// panicking is a checker whose accumulator crashes on the first piece.
var panicking = checker{name: "panicking", property: PropertyLockSafety, start: func(Options) accumulator { return crashing{} }}

type crashing struct{}

func (crashing) add(context.Context, part) { panic("index out of range") }
func (crashing) result() Result            { return Result{Verdict: Valid} }

func TestRunAllTurnsACrashIntoUnknown(t *testing.T) {
	results := RunAll(t.Context(), []Checker{panicking, fencing}, readHistory(t, "clean.jsonl"), Options{})
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	if r := results[0]; r.Checker != "panicking" || r.Verdict != Unknown || !strings.Contains(r.Summary, "checker crashed: index out of range") {
		t.Errorf("crashed checker: %+v", r)
	}
	if r := results[1]; r.Checker != "fencing" || r.Verdict != NotApplicable {
		t.Errorf("the next checker did not run: %+v", r)
	}
}

func TestWorst(t *testing.T) {
	tests := []struct {
		verdicts []Verdict
		want     Verdict
	}{
		{nil, Unknown},
		{[]Verdict{NotApplicable}, Unknown},
		{[]Verdict{Valid, Valid}, Valid},
		{[]Verdict{Valid, NotApplicable}, Valid},
		{[]Verdict{Valid, Unknown}, Unknown},
		{[]Verdict{Unknown, Invalid, Valid}, Invalid},
		{[]Verdict{Invalid, Unknown}, Invalid},
	}
	for _, tt := range tests {
		var results []Result
		for _, v := range tt.verdicts {
			results = append(results, Result{Verdict: v})
		}
		if got := Worst(results); got != tt.want {
			t.Errorf("Worst(%v) = %s, want %s", tt.verdicts, got, tt.want)
		}
	}
	herd := Result{Property: PropertyMetric, Verdict: Invalid}
	if got := Worst([]Result{{Verdict: Valid}, herd}); got != Valid {
		t.Errorf("a metric changed the verdict: %s", got)
	}
}

func TestAllNamesTheCheckersInReportOrder(t *testing.T) {
	var names []Name
	for _, c := range All() {
		names = append(names, c.Name())
	}
	want := []Name{"lock-linearizable", "mutual-exclusion", "lease-safety", "data-safety", "lost-updates", "fencing", "herd", "stats"}
	if !slices.Equal(names, want) {
		t.Errorf("All() = %q, want %q", names, want)
	}
}

// The herd metric divides notifications by handoffs, the times the lock passed from one
// holder to the next, however the last holder's hold ended: a paused holder whose session
// expired (its release then fails not-held) hands over as surely as one that released.
func TestHerd(t *testing.T) {
	var events []history.Event
	at := func(p int, typ history.Type, f history.Func, key string) *history.Event {
		events = append(events, history.Event{Index: len(events), Type: typ, Process: p, Func: f, Key: key, Time: int64(len(events) + 1)})
		return &events[len(events)-1]
	}
	// Each helper is one whole operation on key k unless a key is given.
	grant := func(p, watches int, key ...string) {
		k := append(key, "k")[0]
		at(p, history.Invoke, history.Acquire, k)
		at(p, history.OK, history.Acquire, k).WatchEvents = history.Int(watches)
	}
	release := func(p int, outcome history.Type, key ...string) {
		k := append(key, "k")[0]
		at(p, history.Invoke, history.Release, k)
		if done := at(p, outcome, history.Release, k); outcome == history.Fail {
			done.Error = history.ErrNotHeld
		}
	}
	// inTurn: client p is granted the lock after watches[p] notifications and releases it.
	inTurn := func(watches ...int) func() {
		return func() {
			for p, w := range watches {
				grant(p, w)
				release(p, history.OK)
			}
		}
	}
	tests := []struct {
		name    string
		history func()
		want    expect
	}{
		{"not a queue lock", func() { release(0, history.OK) }, expect{verdict: NotApplicable,
			summary: "no watch notifications recorded: not a queue-based lock"}},
		{"one per release", inTurn(0, 1, 1), expect{verdict: Valid, summary: "1.00 watch notifications per handoff (2 / 2)",
			counts: map[string]int{"notifications": 2, "handoffs": 2}}},
		{"a herd", inTurn(0, 6), expect{verdict: Invalid, summary: "6.00 watch notifications per handoff (6 / 1): a thundering herd (more than 2)",
			counts: map[string]int{"notifications": 6, "handoffs": 1}}},
		{"handoffs by session expiry", func() {
			grant(0, 0)
			for p := 1; p <= 3; p++ { // each holder paused past its session: the next one is woken, once
				grant(p, 1)
				release(p-1, history.Fail)
			}
			release(3, history.OK)
		}, expect{verdict: Valid, summary: "1.00 watch notifications per handoff (3 / 3)",
			counts: map[string]int{"notifications": 3, "handoffs": 3}}},
		{"handoffs from killed holders", func() {
			grant(0, 0)
			for p := 1; p <= 2; p++ { // the holder's release never answered: its session expired
				at(p-1, history.Invoke, history.Release, "k")
				grant(p, 1)
			}
		}, expect{verdict: Valid, summary: "1.00 watch notifications per handoff (2 / 2)",
			counts: map[string]int{"notifications": 2, "handoffs": 2}}},
		{"keys of their own", func() {
			grant(0, 0, "a")
			grant(1, 0, "b")
			release(0, history.OK, "a")
			grant(2, 1, "a")
		}, expect{verdict: Valid, summary: "1.00 watch notifications per handoff (1 / 1)",
			counts: map[string]int{"notifications": 1, "handoffs": 1}}},
		{"no handoff", func() { grant(0, 1) }, expect{verdict: Unknown,
			summary: "1 notifications but no handoff to divide them by", counts: map[string]int{"notifications": 1, "handoffs": 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events = nil
			tt.history()
			got := herd.Check(context.Background(), events, Options{})
			if got.Verdict != tt.want.verdict || got.Summary != tt.want.summary {
				t.Errorf("got %s (%s), want %s (%s)", got.Verdict, got.Summary, tt.want.verdict, tt.want.summary)
			}
			for name, n := range tt.want.counts {
				if got.Counts[name] != n {
					t.Errorf("count %s = %d, want %d (counts %v)", name, got.Counts[name], n, got.Counts)
				}
			}
		})
	}
}

// Identities in the models cannot collide, whatever the process numbers: two workers that
// both hold the lock are caught even at the extremes of int.
func TestIdentitiesNeverCollide(t *testing.T) {
	for _, pair := range [][2]int{{0, 1 << 47}, {1 << 47, 0}, {math.MaxInt, math.MinInt}, {math.MinInt, 3}, {-3, 1<<48 | 1}} {
		a, b := pair[0], pair[1]
		events := []history.Event{
			{Type: history.Invoke, Process: a, Func: history.Acquire, Key: "k", Time: 10},
			{Type: history.OK, Process: a, Func: history.Acquire, Key: "k", Time: 20},
			{Type: history.Invoke, Process: b, Func: history.Acquire, Key: "k", Time: 30},
			{Type: history.OK, Process: b, Func: history.Acquire, Key: "k", Time: 40},
			{Type: history.Invoke, Process: a, Func: history.Write, Key: "k", Value: history.Int64(1), Time: 50},
			{Type: history.OK, Process: a, Func: history.Write, Key: "k", Time: 60},
		}
		for i := range events {
			events[i].Index = i
		}
		for _, c := range []Checker{lockLinearizable, dataSafety} {
			if r := c.Check(t.Context(), events, Options{}); r.Verdict != Invalid {
				t.Errorf("processes %d and %d: %s says %s (%s), want invalid", a, b, c.Name(), r.Verdict, r.Summary)
			}
		}
	}
}

// Judge holds every pass to the stats precondition; violations found stand.
func TestJudgeGivesNoVacuousPass(t *testing.T) {
	acquireOnly := []history.Event{ // a grant, but nothing ever written
		{Index: 0, Type: history.Invoke, Process: 0, Func: history.Acquire, Key: "k", Time: 10},
		{Index: 1, Type: history.OK, Process: 0, Func: history.Acquire, Key: "k", Time: 20},
	}
	tests := []struct {
		name    string
		events  []history.Event
		opts    Options
		want    map[Name]Verdict
		summary string
	}{
		{"empty history", nil, Options{}, map[Name]Verdict{
			"lock-linearizable": Unknown, "mutual-exclusion": Unknown, "stats": Unknown, "fencing": NotApplicable,
		}, "no acquire succeeded, no storage write was accepted"},
		{"nothing written", acquireOnly, Options{}, map[Name]Verdict{
			"lock-linearizable": Unknown, "stats": Unknown,
		}, "no storage write was accepted"},
		{"faults requested, none injected", readHistory(t, "indeterminate.jsonl"), Options{FaultsRequested: true}, map[Name]Verdict{
			"lock-linearizable": Unknown, "data-safety": Unknown, "stats": Unknown,
		}, "the nemesis injected no fault"},
		{"no faults requested", readHistory(t, "indeterminate.jsonl"), Options{}, map[Name]Verdict{
			"lock-linearizable": Valid, "data-safety": Valid, "stats": Valid,
		}, ""},
		{"the nemesis's hazard never occurred", readHistory(t, "kleppmann-fenced.jsonl"),
			Options{FaultsRequested: true, Hazards: map[string]history.Hazard{"pause-holder": history.GrantedInPause}}, map[Name]Verdict{
				"mutual-exclusion": Invalid, "data-safety": Unknown, "fencing": Unknown, "stats": Unknown,
			}, "pause-holder injected 1 fault and no other client was granted the lock while a paused client still held it"},
		{"the nemesis's hazard occurred", readHistory(t, "kleppmann-fenced-hazard.jsonl"),
			Options{FaultsRequested: true, Hazards: map[string]history.Hazard{"pause-holder": history.GrantedInPause}}, map[Name]Verdict{
				"mutual-exclusion": Invalid, "data-safety": Valid, "fencing": Valid, "stats": Valid,
			}, ""},
		{"a hazard no nemesis asked for proves nothing", readHistory(t, "kleppmann-fenced-hazard.jsonl"),
			Options{FaultsRequested: true, Hazards: map[string]history.Hazard{"failover": history.GrantLost}}, map[Name]Verdict{
				"data-safety": Unknown, "stats": Unknown,
			}, "failover injected 1 fault and no replica was promoted"},
		{"of two targeted nemeses, none's hazard occurred", readHistory(t, "kleppmann-fenced.jsonl"),
			Options{FaultsRequested: true, Hazards: map[string]history.Hazard{"pause-holder": history.GrantedInPause, "failover": history.GrantLost}},
			map[Name]Verdict{"data-safety": Unknown, "stats": Unknown},
			"failover injected 1 fault and no replica was promoted while a grant its primary made after the cut was held, " +
				"pause-holder injected 1 fault and no other client was granted"},
		{"a violation stands", readHistory(t, "kleppmann-unfenced.jsonl"), Options{FaultsRequested: true}, map[Name]Verdict{
			"lock-linearizable": Invalid, "data-safety": Invalid, "stats": Valid,
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := Judge(t.Context(), tt.events, tt.opts)
			for _, r := range results {
				want, ok := tt.want[r.Checker]
				if !ok {
					continue
				}
				if r.Verdict != want {
					t.Errorf("%s: %s (%s), want %s", r.Checker, r.Verdict, r.Summary, want)
				}
				if want == Unknown && !strings.Contains(r.Summary, tt.summary) {
					t.Errorf("%s: summary %q does not say %q", r.Checker, r.Summary, tt.summary)
				}
			}
			if got := Worst(results); tt.summary != "" && got == Valid {
				t.Errorf("overall %s, want no pass", got)
			}
		})
	}
}

// A pass is a claim about the dangers that came: of two targeted nemeses, one whose danger
// came keeps the pass, and the other's is named in a note.
func TestJudgeKeepsAPassOneDangerCameFor(t *testing.T) {
	events := readHistory(t, "kleppmann-fenced-hazard.jsonl")
	results := Judge(t.Context(), events, Options{FaultsRequested: true,
		Hazards: map[string]history.Hazard{"pause-holder": history.GrantedInPause, "failover": history.GrantLost}})
	want := map[Name]Verdict{"mutual-exclusion": Invalid, "data-safety": Valid, "fencing": Valid, "stats": Valid}
	for _, r := range results {
		if v, ok := want[r.Checker]; ok && r.Verdict != v {
			t.Errorf("%s: %s (%s), want %s", r.Checker, r.Verdict, r.Summary, v)
		}
		const note = "; note: failover injected 1 fault and no replica was promoted while a grant its primary made after the cut was held"
		if r.Checker == Stats && !strings.HasSuffix(r.Summary, note) {
			t.Errorf("stats says %q, want it to end %q", r.Summary, note)
		}
	}
}

// The note counts the faults of the nemesis whose danger never came, not the run's: beside
// one pause (a kind no longer declared) and one pause-holder, failover's two.
func TestJudgeCountsTheFaultsOfTheNemesisWhoseDangerNeverCame(t *testing.T) {
	events := readHistory(t, "kleppmann-fenced-hazard.jsonl")
	last := events[len(events)-1].Time
	for _, fault := range []string{history.Failover.Name, history.Failover.Name, history.PauseHolder.Name} {
		for _, f := range []history.Func{history.Start, history.Stop} {
			last++
			events = append(events, history.Event{Index: len(events), Type: history.Info, Process: history.NemesisProcess,
				Func: f, Time: last, Fault: fault, Targets: []string{"n1"}})
		}
	}
	results := Judge(t.Context(), events, Options{FaultsRequested: true,
		Hazards: map[string]history.Hazard{history.PauseHolder.Name: history.GrantedInPause, history.Failover.Name: history.GrantLost}})
	for _, r := range results {
		const note = "4 faults, 1 grant while its holder was paused, 1 lease expired in a pause; note: failover injected 2 faults and no replica was promoted"
		if r.Checker == Stats && (r.Verdict != Valid || !strings.Contains(r.Summary, note)) {
			t.Errorf("stats: %s (%s), want valid saying %q", r.Verdict, r.Summary, note)
		}
	}
}

// Storage requests carrying tokens are judged even when no grant carried one.
func TestFencingJudgesRequestsWithoutGrantTokens(t *testing.T) {
	var events []history.Event
	add := func(typ history.Type, p int, f history.Func, token int64, tm int64) {
		events = append(events, history.Event{Index: len(events), Type: typ, Process: p, Func: f, Key: "k",
			Token: history.Int64(token), Value: history.Int64(1), Time: tm})
	}
	add(history.Invoke, 0, history.Write, 5, 10)
	add(history.OK, 0, history.Write, 5, 20)
	add(history.Invoke, 1, history.Write, 3, 30)
	add(history.OK, 1, history.Write, 3, 40)
	r := fencing.Check(t.Context(), events, Options{})
	if r.Verdict != Invalid || r.Counts["stale-accepted"] != 1 {
		t.Errorf("got %s (%s, %v), want invalid with 1 stale request accepted", r.Verdict, r.Summary, r.Counts)
	}
}

// The same history checked twice says the same thing, to the byte.
func TestVerdictsAreDeterministic(t *testing.T) {
	for _, file := range []string{"kleppmann-unfenced.jsonl", "three-holders.jsonl", "stale-after-lost-acquire.jsonl"} {
		events := readHistory(t, file)
		first, err := json.Marshal(Judge(t.Context(), events, Options{}))
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			again, _ := json.Marshal(Judge(t.Context(), events, Options{}))
			if !bytes.Equal(first, again) {
				t.Fatalf("%s: verdicts differ between checks:\n%s\n%s", file, first, again)
			}
		}
	}
}

// Strings from a history reach porcupine's page, whose tooltips use innerHTML: they must
// arrive there as text.
func TestVisualisationEscapesHistoryStrings(t *testing.T) {
	const hostile = `"><img src=x onerror=alert(1)>`
	events := readHistory(t, "kleppmann-unfenced.jsonl")
	events[6].Error = hostile // p1's grant, which both models place
	dir := t.TempDir()
	for _, c := range []Checker{lockLinearizable, dataSafety} {
		r := c.Check(t.Context(), events, Options{Dir: dir})
		for _, f := range r.Files {
			page, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(page, []byte("<img src=x")) || bytes.Contains(page, []byte(`\u003cimg src=x`)) {
				t.Errorf("%s: the error string reaches the page unescaped", f)
			}
			if !bytes.Contains(page, []byte("img src=x onerror=alert(1)")) {
				t.Errorf("%s: the error string is missing altogether", f)
			}
		}
	}
}

// A search whose context is cancelled while it runs (the heap guard) takes no further
// step of its model and is Unknown, with the cancellation's cause: never the Illegal that
// steps refused would make of a legal history.
func TestSearchStoppedMidwayIsUnknown(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	steps, after := 0, 0
	counting := linearizability{
		model: func(part, string) porcupine.Model {
			m := strictMutex
			step := m.StepContext
			m.StepContext = func(c context.Context, state, in, out any) (bool, any) {
				if steps++; steps == 3 {
					cancel(memoryLimit{limit: 1 << 20})
				} else if steps > 3 {
					after++
				}
				return step(c, state, in, out)
			}
			return m
		},
		models: isLockOp,
	}
	r := counting.checker("counting", PropertyLockSafety).Check(ctx, readHistory(t, "clean.jsonl"), Options{})
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "search did not finish on key k (memory limit reached") {
		t.Errorf("got %s: %s, want unknown: search did not finish, memory limit reached", r.Verdict, r.Summary)
	}
	if steps < 3 || after > 0 {
		t.Errorf("%d steps, %d of them after the cancellation; want the search stopped at the third", steps, after)
	}
}

// A targeted fault whose condition occurred (a grant lost in a failover, a crash under a
// held grant, a clock moved past a held lease) but under which the lock service answered no
// other client within the victim's lease proves nothing: the pass is unknown, and says what
// was seen and what was missing. With that answer recorded, the history is judged on its
// merits.
func TestAConditionWithoutItsDangerIsNoPass(t *testing.T) {
	tests := []struct {
		nemesis string
		served  history.Hazard
		seen    string
	}{
		{"failover", history.LostGrantServed, "1 lost grant, but no other client was answered"},
		{"kill-node", history.RestartServed, "1 crash under a held grant, but no other client was answered"},
		{"clock-bump", history.ClockServed, "1 clock jump past a held lease, but no other client was answered"},
	}
	for _, tt := range tests {
		for _, answered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s answered=%v", tt.nemesis, answered), func(t *testing.T) {
				clean := readHistory(t, "clean.jsonl")
				events := slices.Clone(clean[:20])
				hazards := []history.Hazard{tt.served.Condition()}
				if answered {
					hazards = append(hazards, tt.served)
				}
				for _, h := range hazards {
					events = append(events, history.Event{Index: len(events), Type: history.Info, Process: history.NemesisProcess,
						Func: history.HazardFunc, Time: 1021500000, Fault: tt.nemesis, Hazard: h, Targets: []string{"worker-0"}})
				}
				for _, e := range clean[20:] {
					e.Index = len(events)
					events = append(events, e)
				}
				results := Judge(t.Context(), events, Options{FaultsRequested: true, Hazards: map[string]history.Hazard{tt.nemesis: tt.served}})
				for _, r := range results {
					if r.Checker != "stats" {
						continue
					}
					switch {
					case answered && r.Verdict != Valid:
						t.Errorf("stats %s (%s), want valid", r.Verdict, r.Summary)
					case !answered && (r.Verdict != Unknown || !strings.Contains(r.Summary, tt.seen) || !strings.Contains(r.Summary, tt.served.Absent())):
						t.Errorf("stats %s (%s), want unknown saying %q and %q", r.Verdict, r.Summary, tt.seen, tt.served.Absent())
					}
				}
				if got := Worst(results); answered != (got == Valid) {
					t.Errorf("overall %s with the danger answered=%v", got, answered)
				}
			})
		}
	}
}

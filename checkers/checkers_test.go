package checkers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
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
		want map[string]expect // by checker name
	}{{
		file: "clean.jsonl", // one holder at a time, a busy acquire, a harmless partition
		want: map[string]expect{
			"lock-linearizable": {verdict: Valid, counts: map[string]int{"keys": 1, "operations": 4}},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2, "overlaps": 0}},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 2, "writes-rejected": 0}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "final": 2, "lost": 0}},
			"fencing": {verdict: Valid, counts: map[string]int{"grants-with-token": 0},
				summary: "no fencing tokens in this history: nothing to check"},
		},
	}, {
		file: "kleppmann-unfenced.jsonl", // A paused past its lease, B took the lock, A's write landed
		want: map[string]expect{
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
			"fencing": {verdict: Valid, counts: map[string]int{"grants-with-token": 0}},
		},
	}, {
		file: "kleppmann-fenced.jsonl", // the same pause; the storage rejects A's stale token
		want: map[string]expect{
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
		want: map[string]expect{
			"lock-linearizable": {verdict: Valid},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2, "overlaps": 0}},
			"data-safety":       {verdict: Valid},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 2, "final": 2}},
			"fencing":           {verdict: Valid},
		},
	}, {
		file: "indeterminate.jsonl", // an acquire and a release that timed out, a write that timed out but landed, an op never answered
		want: map[string]expect{
			"lock-linearizable": {verdict: Valid, counts: map[string]int{"operations": 6}},
			"mutual-exclusion":  {verdict: Valid, counts: map[string]int{"holds": 2}},
			"data-safety":       {verdict: Valid, counts: map[string]int{"writes-accepted": 1}},
			"lost-updates":      {verdict: Valid, counts: map[string]int{"acknowledged": 1, "indeterminate": 1, "final": 2, "lost": 0}},
			"fencing":           {verdict: Valid},
		},
	}, {
		file: "fencing-duplicate.jsonl",
		want: map[string]expect{
			"lock-linearizable": {verdict: Valid},
			"fencing": {verdict: Invalid, summary: "1 duplicate token",
				counts:   map[string]int{"grants-with-token": 2, "duplicates": 1, "regressions": 0},
				evidence: []string{"key k: token 34 granted to p0 (#1) and to p1 (#5)"}},
		},
	}, {
		file: "fencing-regression.jsonl", // a failover lost the token counter
		want: map[string]expect{
			"fencing": {verdict: Invalid, summary: "1 token regression",
				counts:   map[string]int{"regressions": 1, "duplicates": 0},
				evidence: []string{"key k: token 3 granted to p1 at #6 (t=6ms) after token 5 was granted to p0 at #1 (t=2ms)"}},
		},
	}, {
		file: "fencing-stale-accepted.jsonl", // the storage ignores tokens
		want: map[string]expect{
			"data-safety": {verdict: Invalid},
			"fencing": {verdict: Invalid, summary: "1 stale request accepted",
				counts:   map[string]int{"stale-accepted": 1, "stale-rejected": 0, "regressions": 0},
				evidence: []string{"storage accepted p0 write k 1 token=33 -> ok, #14 (t=31ms) .. #15 (t=32ms) after accepting token 34 from p1 at #8 (t=24ms)"}},
		},
	}, {
		file: "no-final-read.jsonl",
		want: map[string]expect{
			"lost-updates": {verdict: Unknown, summary: "no final read of key k"},
			"data-safety":  {verdict: Valid},
		},
	}, {
		// A's first acquire went unanswered, so A starts a new life: that old acquire, placed
		// late, must not make the new A the holder again and excuse its stale write.
		file: "stale-after-lost-acquire.jsonl",
		want: map[string]expect{
			"data-safety":  {verdict: Invalid},
			"lost-updates": {verdict: Invalid, counts: map[string]int{"lost": 1}},
		},
	}, {
		// Two acknowledged writes of 1: an increment was lost, even though an indeterminate
		// write later made the final counter equal to the writes.
		file: "overwrite-hidden-by-info-write.jsonl",
		want: map[string]expect{
			"lost-updates": {verdict: Invalid, counts: map[string]int{"acknowledged": 2, "final": 2, "lost": 1}},
		},
	}, {
		file: "three-holders.jsonl", // every overlapping pair is its own line
		want: map[string]expect{
			"mutual-exclusion": {verdict: Invalid, summary: "3 overlapping holds", counts: map[string]int{"holds": 3, "overlaps": 3},
				evidence: []string{
					"p0 held k from #1 (t=1ms) to #11 (t=21ms), its last event; p1 acquired k at #3 (t=3ms) while p0 still believed it held it; overlap 9ms",
					"p0 held k from #1 (t=1ms) to #11 (t=21ms), its last event; p2 acquired k at #5 (t=5ms) while p0 still believed it held it; overlap 9ms",
					"p1 held k from #3 (t=3ms) to #6 (t=12ms), its release; p2 acquired k at #5 (t=5ms) while p1 still believed it held it; overlap 7ms",
				}},
			"lost-updates": {verdict: Unknown, summary: "no final read"},
		},
	}}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".jsonl"), func(t *testing.T) {
			events := readHistory(t, tt.file)
			results := map[string]Result{}
			for _, r := range RunAll(t.Context(), All(), events, Options{}) {
				results[r.Checker] = r
			}
			for name, want := range tt.want {
				r, ok := results[name]
				if !ok {
					t.Fatalf("no checker named %s ran", name)
				}
				t.Run(name, func(t *testing.T) { want.assert(t, r) })
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

func TestSearchesEndUnknownWhenOutOfTime(t *testing.T) {
	big := workload{ops: 60_000, keys: 1, clientsPerKey: 4, seed: 7}.generate()
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		events  []history.Event
		timeout time.Duration
	}{
		{"no time at all", t.Context(), readHistory(t, "clean.jsonl"), time.Nanosecond},
		// Porcupine needs seconds for this key and is stopped after the time left; on a
		// machine slow enough to spend the 100ms before the search starts, the deadline
		// stops it earlier: Unknown either way.
		{"search cut short", t.Context(), big, 100 * time.Millisecond},
		{"context cancelled", cancelled, readHistory(t, "clean.jsonl"), time.Minute},
	}
	for _, tt := range tests {
		for _, c := range []Checker{NewLockLinearizable(), NewDataSafety()} {
			t.Run(tt.name+"/"+c.Name(), func(t *testing.T) {
				start := time.Now()
				r := c.Check(tt.ctx, tt.events, Options{Timeout: tt.timeout})
				if r.Verdict != Unknown || !strings.Contains(r.Summary, "search did not finish") {
					t.Errorf("got %s: %s, want unknown: search did not finish", r.Verdict, r.Summary)
				}
				if took := time.Since(start); took > 10*time.Second {
					t.Errorf("took %v despite a timeout of %v", took, tt.timeout)
				}
			})
		}
	}
}

func TestVisualisationFilesAreWritten(t *testing.T) {
	events := readHistory(t, "kleppmann-unfenced.jsonl")
	dir := t.TempDir()
	for _, c := range []Checker{NewLockLinearizable(), NewDataSafety()} {
		r := c.Check(t.Context(), events, Options{Dir: dir})
		want := c.Name() + "-k.html"
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
	if r := NewLockLinearizable().Check(t.Context(), events, Options{}); len(r.Files) != 0 {
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

type panicking struct{}

func (panicking) Name() string { return "panicking" }
func (panicking) Check(context.Context, []history.Event, Options) Result {
	panic("index out of range")
}

func TestRunAllTurnsACrashIntoUnknown(t *testing.T) {
	results := RunAll(t.Context(), []Checker{panicking{}, NewFencing()}, readHistory(t, "clean.jsonl"), Options{})
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	if r := results[0]; r.Checker != "panicking" || r.Verdict != Unknown || !strings.Contains(r.Summary, "checker crashed: index out of range") {
		t.Errorf("crashed checker: %+v", r)
	}
	if r := results[1]; r.Checker != "fencing" || r.Verdict != Valid {
		t.Errorf("the next checker did not run: %+v", r)
	}
}

func TestWorst(t *testing.T) {
	tests := []struct {
		verdicts []Verdict
		want     Verdict
	}{
		{nil, Valid},
		{[]Verdict{Valid, Valid}, Valid},
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
}

func TestAllNamesTheCheckersInReportOrder(t *testing.T) {
	var names []string
	for _, c := range All() {
		names = append(names, c.Name())
	}
	want := []string{"lock-linearizable", "mutual-exclusion", "data-safety", "lost-updates", "fencing", "herd"}
	if !slices.Equal(names, want) {
		t.Errorf("All() = %q, want %q", names, want)
	}
}

func TestHerd(t *testing.T) {
	grant := func(watches string) []history.Event {
		return []history.Event{
			{Type: history.Invoke, Func: history.Acquire, Key: "k", Time: 1},
			{Type: history.OK, Func: history.Acquire, Key: "k", Time: 2, Detail: map[string]string{"watch-events": watches}},
		}
	}
	release := []history.Event{
		{Type: history.Invoke, Func: history.Release, Key: "k", Time: 3},
		{Type: history.OK, Func: history.Release, Key: "k", Time: 4},
	}
	cases := []struct {
		name   string
		events [][]history.Event
		want   Verdict
	}{
		{"not a queue lock", [][]history.Event{release}, Valid},
		{"one per release", [][]history.Event{grant("0"), release, grant("1"), release, grant("1"), release}, Valid},
		{"herd", [][]history.Event{grant("0"), release, grant("6"), release}, Invalid},
		{"no release", [][]history.Event{grant("1")}, Unknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NewHerd().Check(context.Background(), slices.Concat(c.events...), Options{}); got.Verdict != c.want {
				t.Fatalf("got %s (%s), want %s", got.Verdict, got.Summary, c.want)
			}
		})
	}
}

package analysis

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/results"
)

// pooledSession is issue 35 by hand: through PgBouncer in transaction pooling, p1 and p0
// were granted the lock in one server session (backend 4242), p1's reply reaching the
// recorder first though p0's was read 0.3 ms earlier, and no fault at all.
const pooledSession = "../checkers/testdata/pooled-session.jsonl"

// The hand-made history's hazard is the one the pooler's watcher records: running
// nemesis.PooledSessions over its other events gives its hazard events back exactly.
func TestPooledSessionHistoryHasTheWatchersHazard(t *testing.T) {
	file, err := history.ReadFile(pooledSession)
	if err != nil {
		t.Fatal(err)
	}
	watch := nemesis.NewPooledSessions("pgbouncer-transaction")
	var want, got []history.Event
	for _, e := range file.Events {
		if e.Func == history.HazardFunc {
			e.Index = 0 // the recorder's to give
			got = append(got, e)
			continue
		}
		if h, ok := watch.Follow(e); ok {
			want = append(want, h)
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("hazard events\n%+v\nwant what the watcher records\n%+v", got, want)
	}
}

// Issue 35: two holders through a pooler and no fault, and the story was empty. It names
// the two holders, when each was granted, and the server session the pooler passed from
// one to the other, as the hazard recorded it.
func TestAPooledSessionsStoryNamesTheBackendItPassed(t *testing.T) {
	text, err := os.ReadFile(pooledSession)
	if err != nil {
		t.Fatal(err)
	}
	got, err := analyze(t, t.TempDir(), string(text), results.Summary{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"p0 was granted the lock at 0.04 s.",
		"p1 was granted the lock at 0.04 s (300µs after p0) and wrote 1, while p0 still held it.",
		"p1's lock was taken on server backend 4242, which pgbouncer-transaction then handed to p0: p0's lock statement ran " +
			"in the session that already held the lock, and the server granted it again.",
		"p0 wrote 1 at 0.04 s, and the storage accepted it.",
		"p0 and p1 both wrote 1: 1 update lost.",
	}
	for _, r := range got.Results {
		if r.Checker != "mutual-exclusion" {
			continue
		}
		var texts []string
		for _, s := range r.Story {
			texts = append(texts, s.Text)
		}
		if !slices.Equal(texts, want) {
			t.Errorf("story:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
		}
		if i := slices.IndexFunc(r.Story, func(s checkers.Sentence) bool { return strings.Contains(s.Text, "backend") }); i < 0 || r.Story[i].Event != 4 {
			t.Errorf("the backend's sentence is not about the hazard event #4: %+v", r.Story)
		}
		return
	}
	t.Error("no mutual-exclusion result")
}

// A pooler's watcher records the hazard of the grants it saw pass a session, not of every
// pair: when the first overlap's two grants share a backend that no hazard names, the story
// still tells the session, and names the pooler from another of its hazards (a fresh make
// test's story said "the pooler").
func TestAPooledSessionUntoldByItsHazardNamesThePooler(t *testing.T) {
	text, err := os.ReadFile(pooledSession)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(string(text), `"granted":"worker-0 #3","holder":"worker-1 #2"`, `"granted":"worker-0 #93","holder":"worker-1 #92"`, 1)
	if other == string(text) {
		t.Fatal("the hazard's grants were not found in " + pooledSession)
	}
	got, err := analyze(t, t.TempDir(), other, results.Summary{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Results {
		if r.Checker == "mutual-exclusion" {
			if story := checkers.StoryText(r.Story); !strings.Contains(story, "server backend 4242, which pgbouncer-transaction then handed to") {
				t.Errorf("the story does not name the pooler: %q", story)
			}
			return
		}
	}
	t.Error("no mutual-exclusion result")
}

// Every invalid mutual-exclusion verdict tells its story, naming both holders from their
// grants, over every saved history in the repository (hand-made, fuzz seeds, saved runs)
// and over generated ones, with and without fencing, as generated and numbered again as a
// recorder could have got them: each client's events in its own order, but each reaching
// the recorder late behind other clients' events, by up to 1 ms (a recorder's lot) and by
// up to 10 s, so that the two grants of an overlap, a lease apart in a generated history,
// come in either order as two pooled grants 0.3 ms apart did in issue 35.
func TestEveryOverlapIsTold(t *testing.T) {
	histories := map[string][]byte{}
	for _, pattern := range []string{"../checkers/testdata/*.jsonl", "../cli/testdata/*.jsonl", "testdata/runs/*/" + results.HistoryFile} {
		paths, _ := filepath.Glob(pattern)
		for _, path := range paths {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			histories[path] = b
		}
	}
	for _, pattern := range []string{"../checkers/testdata/fuzz/FuzzCheckers/*", "../history/testdata/fuzz/FuzzParse/*"} {
		paths, _ := filepath.Glob(pattern)
		for _, path := range paths {
			if b, ok := fuzzSeed(t, path); ok {
				histories[path] = b
			}
		}
	}
	if len(histories) < 60 {
		t.Fatalf("only %d saved histories found", len(histories))
	}
	seeds := uint64(24)
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		cfg := histgen.Config{Ops: 150, Clients: 2 + int(seed%5), Fencing: seed%2 == 1, Effects: seed%3 == 0, Seed: seed + 1}
		events := histgen.Generate(cfg)
		name := fmt.Sprintf("histgen-clients%d-fencing%t-effects%t-seed%d", cfg.Clients, cfg.Fencing, cfg.Effects, cfg.Seed)
		histories[name] = jsonLines(t, events)
		for _, late := range []time.Duration{time.Millisecond, 10 * time.Second} {
			histories[fmt.Sprintf("%s-late%s", name, late)] = jsonLines(t, delivered(events, seed, late))
		}
	}

	invalid := 0
	for _, name := range slices.Sorted(maps.Keys(histories)) {
		t.Run(name, func(t *testing.T) {
			text := histories[name]
			file, err := history.Parse(bytes.NewReader(text))
			if err != nil {
				t.Skipf("not a history a run could have written: %v", err)
			}
			got, err := analyze(t, t.TempDir(), string(text), results.Summary{})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(got.Results, func(r checkers.Result) bool { return r.Checker == "mutual-exclusion" })
			if i < 0 {
				t.Fatal("no mutual-exclusion result")
			}
			r := got.Results[i]
			if r.Verdict != checkers.Invalid {
				return
			}
			invalid++
			text = []byte(checkers.StoryText(r.Story))
			o := r.Overlaps[0]
			for _, p := range []int{o.Earlier.Process, o.Later.Process} {
				if !regexp.MustCompile(fmt.Sprintf(`(^|\. )p%d was granted the lock`, p)).Match(text) {
					t.Errorf("the story does not say when p%d was granted the lock: %q", p, text)
				}
			}
			for _, s := range r.Story {
				if s.Event < 0 || s.Event >= len(file.Events) {
					t.Errorf("%q tells of event %d, not in the history", s.Text, s.Event)
				}
			}
		})
	}
	if invalid < 2*int(seeds) {
		t.Errorf("only %d histories broke mutual exclusion: the test proves little", invalid)
	}
}

// fuzzSeed is the history a fuzz corpus file holds, when it holds one.
func fuzzSeed(t *testing.T, path string) ([]byte, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, quoted, _ := strings.Cut(string(data), "[]byte(")
	unquoted, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(quoted), ")")))
	return []byte(unquoted), err == nil
}

// jsonLines is events as a history file holds them.
func jsonLines(t *testing.T, events []history.Event) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// delivered numbers events again in an order a recorder could have got them in: every
// client's event reaches it up to late after its time, never before that client's event
// before it; the nemesis's and the harness's at their times.
func delivered(events []history.Event, seed uint64, late time.Duration) []history.Event {
	rng := rand.New(rand.NewPCG(seed, uint64(late)))
	type arrival struct {
		event history.Event
		at    int64
	}
	arrivals := make([]arrival, len(events))
	last := map[int]int64{}
	for i, e := range events {
		at := e.Time
		if e.Process >= 0 {
			at = max(at+rng.Int64N(int64(late)), last[e.Process])
			last[e.Process] = at
		}
		arrivals[i] = arrival{e, at}
	}
	slices.SortStableFunc(arrivals, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	out := make([]history.Event, len(arrivals))
	for i, a := range arrivals {
		out[i] = a.event
		out[i].Index = i
	}
	return out
}

// An overlap the history file cannot tell again (here, the file is gone) still has a
// story: mutual exclusion's own first line of evidence, which names both holders and when.
func TestAnUntoldOverlapStillHasAStory(t *testing.T) {
	evidence := "p0 held k from #3 (t=41.6ms) to #13 (t=47ms), its release; p1 acquired k at #2 (t=41.9ms) while p0 still believed it held it; overlap 5.1ms"
	rs := []checkers.Result{
		{Checker: "mutual-exclusion", Property: checkers.PropertyLockSafety, Verdict: checkers.Invalid, Evidence: []string{evidence},
			Overlaps: []checkers.Overlap{{Key: "k", Earlier: checkers.Holding{Process: 0, Granted: 3, Until: 13}, Later: checkers.Holding{Process: 1, Granted: 2, Until: 15}}}},
		{Checker: "data-safety", Property: checkers.PropertyDataSafety, Verdict: checkers.Invalid},
	}
	if err := tell(filepath.Join(t.TempDir(), "gone.jsonl"), rs, nil); err == nil {
		t.Error("no error reading a history that is gone")
	}
	want := []checkers.Sentence{{Text: evidence + ".", Event: 2}}
	for _, r := range rs {
		if !reflect.DeepEqual(r.Story, want) {
			t.Errorf("%s's story %+v, want %+v", r.Checker, r.Story, want)
		}
	}
}

// The story File tells, reading the history again only to the overlap's window, is the one
// a whole second reading tells: over the saved histories (the runs' with their hazards) and
// generated ones, numbered in order and delivered late.
func TestAStoryReadToItsWindowIsTheWholeReadingsStory(t *testing.T) {
	histories := map[string][]byte{}
	for _, pattern := range []string{"../checkers/testdata/*.jsonl", "testdata/runs/*/" + results.HistoryFile} {
		paths, _ := filepath.Glob(pattern)
		for _, path := range paths {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			histories[path] = b
		}
	}
	for seed := range uint64(6) {
		events := histgen.Generate(histgen.Config{Ops: 300, Clients: 2 + int(seed%4), Fencing: seed%2 == 1, Effects: seed%3 == 0, Seed: seed + 1})
		histories[fmt.Sprintf("histgen-seed%d", seed+1)] = jsonLines(t, events)
		histories[fmt.Sprintf("histgen-seed%d-late", seed+1)] = jsonLines(t, delivered(events, seed, 10*time.Second))
	}
	told := 0
	for _, name := range slices.Sorted(maps.Keys(histories)) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			got, err := analyze(t, dir, string(histories[name]), results.Summary{})
			if err != nil {
				t.Skipf("not a history a run could have written: %v", err)
			}
			want := slices.Clone(got.Results)
			for i := range want {
				want[i].Story = nil
			}
			if err := tell(filepath.Join(dir, results.HistoryFile), want, nil); err != nil {
				t.Fatal(err)
			}
			for i, r := range got.Results {
				if !reflect.DeepEqual(r.Story, want[i].Story) {
					t.Errorf("%s's story read to its window:\n%+v\nread whole:\n%+v", r.Checker, r.Story, want[i].Story)
				}
				if len(r.Story) > 0 {
					told++
				}
			}
		})
	}
	if told == 0 {
		t.Error("no history told a story: the test proves nothing")
	}
}

package analysis

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
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

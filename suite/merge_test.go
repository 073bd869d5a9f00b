package suite

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// shardOf is a hand-made shard of the suite "nightly" (cells a, b, c, d), started at
// minute i, that ran the named cells, each safe in every one of its seeds.
func shardOf(shard string, seeds int, cells ...string) Record {
	var i int
	fmt.Sscanf(shard, "%d/", &i)
	started := time.Date(2026, 12, 1, 2, i, 0, 0, time.UTC)
	r := Result{Suite: "nightly", Seeds: seeds, Shard: shard, AllCells: []string{"a", "b", "c", "d"}, Definition: "d1",
		Started: started, Finished: started.Add(time.Minute), Status: Met}
	for _, name := range cells {
		c := safeCell
		c.Name = name
		var runs []RunResult
		for s := range seeds {
			runs = append(runs, run(int64(7+s), valid, valid, na, 0))
		}
		r.Cells = append(r.Cells, Judge(c, runs))
	}
	id := started.Format("20060102T150405Z")
	return Record{ID: "suite-nightly/" + id, Dir: "shard" + strings.ReplaceAll(shard, "/", "of"), Result: r}
}

// with is r changed, its cells copied first so r stays as it was.
func with(r Record, change func(*Result)) Record {
	r.Result.Cells = slices.Clone(r.Result.Cells)
	for i := range r.Result.Cells {
		r.Result.Cells[i].Runs = slices.Clone(r.Result.Cells[i].Runs)
	}
	change(&r.Result)
	return r
}

func TestMergeRefusesWhatIsNotOneSuiteRun(t *testing.T) {
	s1, s2 := shardOf("1/2", 2, "a", "b"), shardOf("2/2", 2, "c", "d")
	tests := []struct {
		name   string
		shards []Record
		err    string // "" merges
	}{
		{"two shards that cover the suite", []Record{s2, s1}, ""},
		{"one shard that is the whole suite", []Record{shardOf("1/1", 2, "a", "b", "c", "d")}, ""},
		{"nothing to merge", nil, "give the directories of a suite run's shards"},
		{"different suites", []Record{s1, with(s2, func(r *Result) { r.Suite = "smoke" })},
			"shard1of2 is suite nightly, shard2of2 is suite smoke: shards of different suites"},
		{"a changed expectation", []Record{s1, with(s2, func(r *Result) { r.Definition = "d2" })},
			"shard1of2 and shard2of2 ran different definitions of suite nightly"},
		{"different seeds", []Record{s1, shardOf("2/2", 3, "c", "d")},
			"shard1of2 ran 2 seeds per cell, shard2of2 ran 3: shards of different runs"},
		{"overlapping cells", []Record{s1, shardOf("2/2", 2, "b", "c", "d")},
			"cell b is in both shard1of2 (shard 1/2) and shard2of2 (shard 2/2): the shards overlap"},
		{"one shard given twice", []Record{s1, s1, s2}, "shard1of2 and shard1of2 are the same run of shard 1/2"},
		{"a missing shard", []Record{shardOf("1/4", 2, "a"), shardOf("2/4", 2, "b"), shardOf("4/4", 2, "d")},
			"the shards do not cover suite nightly: shard 3/4 is missing (cell c)"},
		{"two missing shards", []Record{shardOf("1/4", 2, "a"), shardOf("4/4", 2, "d")},
			"shard 2/4 is missing (cell b); shard 3/4 is missing (cell c)"},
		{"a shard that stopped early", []Record{s1, with(shardOf("2/2", 2, "c"), func(r *Result) { r.Error = "interrupted" })},
			"the shards do not cover suite nightly: shard 2/2 (shard2of2) stopped before cell d: interrupted"},
		{"a cell short of seeds", []Record{s1, with(s2, func(r *Result) { r.Cells[1].Runs = r.Cells[1].Runs[:1] })},
			"shard2of2: cell d has 1 of its 2 seeds (shard 2/2 stopped in it): run that shard again"},
		{"shards of different counts that miss cells", []Record{shardOf("1/2", 2, "a", "b"), shardOf("3/4", 2, "c")},
			"no shard ran cell d"},
		{"suite.json from before merging", []Record{s1, with(s2, func(r *Result) { r.AllCells, r.Definition = nil, "" })},
			"shard2of2: its suite.json does not name the whole suite's cells (written before shards could be merged)"},
		{"a cell the suite does not have", []Record{s1, with(s2, func(r *Result) { r.Cells[0].Cell.Name = "z" })},
			"shard2of2: cell z is not one of suite nightly's cells"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Merge(tt.shards)
			if tt.err == "" {
				if err != nil || r.Status != Met || len(r.Cells) != 4 || r.Shard != "1/1" {
					t.Fatalf("merge: %v, %s with %d cells of shard %s; want met, 4 cells, 1/1", err, r.Status, len(r.Cells), r.Shard)
				}
				return
			}
			if _, ok := err.(*Error); !ok || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("merge: %v; want a refusal saying %q", err, tt.err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the refusal is not one line: %q", err)
			}
		})
	}
}

// The merged result is the suite's: cells in its order, each judged again on its runs
// (a shard's own status is not taken on trust), the shards named, the span theirs.
func TestMergeJudgesEveryCellAgainInTheSuitesOrder(t *testing.T) {
	s1 := shardOf("1/2", 2, "a", "b")
	s2 := with(shardOf("2/2", 2, "c", "d"), func(r *Result) {
		r.Cells[0].Runs[1] = run(8, invalid, valid, na, time.Second) // a violation its status hides
		r.Cells[0].Status = Met
		r.Error = "closing the clusters: docker went away"
	})
	r, err := Merge([]Record{s2, s1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range r.Cells {
		got = append(got, c.Cell.Name+":"+string(c.Status))
	}
	if want := []string{"a:met", "b:met", "c:failed", "d:met"}; !slices.Equal(got, want) {
		t.Errorf("cells %q, want %q", got, want)
	}
	if r.Status != Failed || !slices.Equal(r.AllCells, s1.Result.AllCells) || r.Definition != "d1" {
		t.Errorf("status %s, all cells %q, definition %q", r.Status, r.AllCells, r.Definition)
	}
	if len(r.Merged) != 2 || r.Merged[0].Shard != "1/2" || r.Merged[1].ID != "20261201T020200Z" {
		t.Errorf("merged from %+v, want shard 1/2 then 2/2 by their directories' names", r.Merged)
	}
	if !r.Started.Equal(s1.Result.Started) || !r.Finished.Equal(s2.Result.Finished) {
		t.Errorf("span %s to %s, want the first shard's start to the last one's end", r.Started, r.Finished)
	}
	if r.Error != "shard 2/2: closing the clusters: docker went away" {
		t.Errorf("error %q, want the shard's, named", r.Error)
	}
}

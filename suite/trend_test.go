package suite

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testStore is testdata/store: five nightly runs, the oldest from before suite.json named
// every cell or kept commands; a suite run in two shards beside their merge; a suite.json
// cut short.
const testStore = "testdata/store"

func nightly(t *testing.T) []Record {
	t.Helper()
	runs, problems, err := Find(testStore)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), filepath.Join("suite-corrupt", "20261204T000000Z", JSONFile)) {
		t.Errorf("problems %v, want the corrupt suite.json named", problems)
	}
	return History(runs, "nightly")
}

func TestFindReadsAStoreByItsOwnFilesOnly(t *testing.T) {
	runs, _, err := Find(testStore)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	want := []string{"suite-nightly/20261130T021700Z", "suite-nightly/20261201T021700Z", "suite-nightly/20261202T021700Z",
		"suite-nightly/20261203T021700Z", "suite-nightly/20261204T021700Z", "suite-split/20261204T030000Z",
		"suite-split/20261204T030000Z-2", "suite-split/20261204T030100Z"}
	if !slices.Equal(ids, want) {
		t.Errorf("found %q, want %q", ids, want)
	}
	if got := Suites(runs); !slices.Equal(got, []string{"nightly", "split"}) {
		t.Errorf("suites %q", got)
	}
	// The oldest run's suite.json kept no commands: the run's own results.json has it.
	old := runs[0].Result.Cells[0].Runs
	if old[0].Command != "lockbreaker run --system local --seed 11 --test safe" || old[1].Command != "" {
		t.Errorf("commands %q and %q, want the first from its results.json, none for the run without one", old[0].Command, old[1].Command)
	}
	// A suite run's own directory, and a suite's, find the same runs.
	one, _, err := Find(filepath.Join(testStore, "suite-nightly", "20261204T021700Z"))
	if err != nil || len(one) != 1 || one[0].ID != "20261204T021700Z" || one[0].Result.Status != Failed {
		t.Errorf("a suite run's directory: %v, %+v", err, one)
	}
	if all, _, _ := Find(filepath.Join(testStore, "suite-nightly")); len(all) != 5 || all[4].ID != "20261204T021700Z" {
		t.Errorf("a suite's directory: %d runs", len(all))
	}
}

// A shard merged into a run of the same store is shown once, in the merged run.
func TestHistoryIsNewestFirstAndShowsMergedShardsOnce(t *testing.T) {
	runs, _, _ := Find(testStore)
	var ids []string
	for _, r := range History(runs, "split") {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"suite-split/20261204T030000Z-2"}) {
		t.Errorf("split's history %q, want only the merged run", ids)
	}
	h := History(runs, "nightly")
	if len(h) != 5 || h[0].ID != "suite-nightly/20261204T021700Z" || h[4].ID != "suite-nightly/20261130T021700Z" {
		t.Errorf("nightly's history is not newest first: %v", h)
	}
	if b := Before(h[1], runs); len(b) != 3 || b[0].ID != h[2].ID {
		t.Errorf("the runs before %s: %d, want the 3 older ones", h[1].ID, len(b))
	}
	// A hand-made suite.json that claims to have merged itself hides nothing.
	self := runs[0]
	self.Result.Merged = []MergedShard{{Shard: self.Result.Shard, Started: self.Result.Started}}
	if h := History([]Record{self}, "nightly"); len(h) != 1 {
		t.Errorf("a run that claims to merge itself is left out")
	}
}

func TestCompareFlags(t *testing.T) {
	h := nightly(t)
	newest, third := h[0], h[1]
	tests := []struct {
		name   string
		now    Record
		before []Record
		want   []string // kind cell: text, in order
	}{
		{"the newest against all before it", newest, h[1:], []string{
			"regression safe: met in suite-nightly/20261203T021700Z, not met now: seed 12: mutual-exclusion expected valid, got invalid: clients 1 and 2 held the lock at once (#40 (t=1.2s))",
			"flaky safe: seed 12 violated what the cell expects to hold: mutual-exclusion: clients 1 and 2 held the lock at once (#40 (t=1.2s))",
			// The run before could not say: the last that could (and met) is the one before it.
			"regression paused: met in suite-nightly/20261202T021700Z, not met now: expected mutual-exclusion invalid: found in 0 of 2 seeds (0 %), below the threshold 90 %; missed with seed 21, 22",
			"drift paused: found in 0 of 2 seeds (0 %), 100 points below the median 100 % of its last runs",
			// Met, at its own threshold of 50 %, and still a drift from 100 %.
			"drift clock: found in 1 of 2 seeds (50 %), 50 points below the median 100 % of its last runs",
		}},
		{"against one run: too few for a median, and it could not say of paused", newest, h[1:2], []string{
			"regression safe: met in suite-nightly/20261203T021700Z, not met now: seed 12: mutual-exclusion expected valid, got invalid: clients 1 and 2 held the lock at once (#40 (t=1.2s))",
			"flaky safe: seed 12 violated what the cell expects to hold: mutual-exclusion: clients 1 and 2 held the lock at once (#40 (t=1.2s))",
		}},
		{"a cell that could not say is no regression", third, h[2:], []string{
			"drift paused: found in 1 of 2 seeds (50 %), 50 points below the median 100 % of its last runs",
		}},
		{"the first run of a suite", h[4], nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.now, tt.before)
			var got []string
			for _, f := range c.Flags {
				got = append(got, string(f.Kind)+" "+f.Cell+": "+f.Text)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("flags:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
	flaky := Compare(newest, h[1:]).Flags[1]
	if flaky.Seed != 12 || flaky.Report != "runs/safe/20261204T021703Z/report.html" ||
		flaky.Command != "lockbreaker run --system local --client local --nemesis none --fencing off --clients 3 --ttl 500ms --time-limit 2s --seed 12 --key lock-c1s12" {
		t.Errorf("the flaky run is not reproducible from its flag: %+v", flaky)
	}
}

// A drift is judged against the median of up to DriftWindow earlier rates, DriftMinRuns
// at least, and must fall more than DriftMargin below it.
func TestDriftMargin(t *testing.T) {
	tests := []struct {
		now    int   // found of 10 seeds
		before []int // found of 10, newest first
		drift  bool
	}{
		{8, []int{10, 10, 10, 10, 10}, true},
		{9, []int{10, 10, 10, 10, 10}, false}, // exactly 10 points below: not more
		{5, []int{10}, false},                 // one rate is no median
		{5, []int{10, 10}, true},
		{5, []int{6, 6, 6, 6, 6, 10, 10}, false}, // only the last five count
		{6, []int{10, 6, 8}, true},               // median 8
		{7, []int{10, 6, 8}, false},
	}
	cell := func(found int) CellResult {
		c := Judge(pausedCell, nil)
		c.Runs, c.Found = make([]RunResult, 10), &found
		return c
	}
	for _, tt := range tests {
		now := Record{Result: Result{Cells: []CellResult{cell(tt.now)}}}
		var before []Record
		for _, f := range tt.before {
			before = append(before, Record{Result: Result{Cells: []CellResult{cell(f)}}})
		}
		flags := Compare(now, before).Flags
		if drift := slices.ContainsFunc(flags, func(f Flag) bool { return f.Kind == Drift }); drift != tt.drift {
			t.Errorf("%d/10 after %v: drift %v, want %v (%+v)", tt.now, tt.before, drift, tt.drift, flags)
		}
	}
}

func TestComparisonText(t *testing.T) {
	h := nightly(t)
	text := Compare(h[0], h[1:]).Text()
	for _, want := range []string{
		"suite nightly: suite-nightly/20261204T021700Z against suite-nightly/20261203T021700Z and 3 runs before it\n",
		"  safe    met     not met\n",
		// The run before could not say of paused: the column is the last that could.
		"  paused  met     not met  0/2 (0 %)   100 %\n",
		"  clock   met     met      1/2 (50 %)  100 %          4s\n",
		"  REGRESSION  safe: met in suite-nightly/20261203T021700Z, not met now: seed 12",
		"  FLAKY       safe: seed 12 violated what the cell expects to hold",
		"              lockbreaker run --system local --client local --nemesis none --fencing off --clients 3 --ttl 500ms --time-limit 2s --seed 12 --key lock-c1s12\n",
		"  DRIFT       clock: found in 1 of 2 seeds (50 %)",
		"regressions: 2, flaky runs of safe cells: 1, drifts: 2 (a drift: a detection rate more than 10 points below the median of the cell's last 5 runs, with at least 2 of them)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

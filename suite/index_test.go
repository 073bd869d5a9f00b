package suite

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/results"
)

// The index shows each suite's runs newest first, each square judged against the runs
// before its own, the newest run's flags with their commands and reports.
func TestIndexTrendsOfAStore(t *testing.T) {
	trends, problems := StoreTrends(testStore)
	if len(trends) != 2 || len(problems) != 1 {
		t.Fatalf("%d suites, problems %q; want nightly and split, the corrupt suite.json", len(trends), problems)
	}
	if want := "read suite run suite-corrupt/20261204T000000Z/suite.json: unexpected end of JSON input"; problems[0] != want {
		t.Errorf("problem %q, want %q: named from the store's root", problems[0], want)
	}
	nightly, split := trends[0], trends[1]
	var labels []string
	for _, r := range append(nightly.Runs, split.Runs...) {
		labels = append(labels, r.Label+" "+r.Text)
	}
	if want := []string{"2026-12-04 02:17 not met", "2026-12-03 02:17 could not say", "2026-12-02 02:17 met", "2026-12-01 02:17 met",
		"2026-11-30 02:17 met", "2026-12-04 03:00, 2 shards merged met"}; !slices.Equal(labels, want) {
		t.Errorf("columns %q, want %q", labels, want)
	}
	squares := map[string][]string{}
	for _, c := range nightly.Cells {
		for _, sq := range c.Squares {
			squares[c.Name] = append(squares[c.Name], strings.Join(strings.Fields(sq.Text+" "+sq.Rate+" "+sq.Median+" "+strings.Join(sq.Flags, ",")), " "))
		}
	}
	want := map[string][]string{
		"safe":   {"not met regression,flaky", "met", "met", "met", "met"},
		"paused": {"not met 0/2 (0 %) regression,drift", "could not say 1/2 (50 %) 1.5s drift", "met 2/2 (100 %) 2s", "met 2/2 (100 %) 1s", "met 2/2 (100 %) 1s"},
		"clock":  {"met 1/2 (50 %) 4s drift", "met 2/2 (100 %) 3s", "met 2/2 (100 %) 3s", "met 2/2 (100 %) 3s", ""},
	}
	for cell, w := range want {
		if !slices.Equal(squares[cell], w) {
			t.Errorf("cell %s: squares %q, want %q", cell, squares[cell], w)
		}
	}
	if sq := nightly.Cells[1].Squares[0]; sq.Href != "suite-nightly/20261204T021700Z/suite.html#cell-2" || sq.Status != "failed" {
		t.Errorf("paused's newest square links %s (%s)", sq.Href, sq.Status)
	}
	if len(nightly.Flags) != 5 || nightly.Flags[1] != (results.TrendFlag{Kind: "flaky", Cell: "safe",
		Text:    "seed 12 violated what the cell expects to hold: mutual-exclusion: clients 1 and 2 held the lock at once (#40 (t=1.2s))",
		Command: "lockbreaker run --system local --client local --nemesis none --fencing off --clients 3 --ttl 500ms --time-limit 2s --seed 12 --key lock-c1s12",
		Href:    "suite-nightly/20261204T021700Z/runs/safe/20261204T021703Z/report.html"}) {
		t.Errorf("flags %+v", nightly.Flags)
	}
	page, err := results.RenderIndex(testStore, StoreTrends)
	if err != nil || !strings.Contains(string(page), "<h3>suite nightly</h3>") || !strings.Contains(string(page), "<b>regression</b> paused: met in suite-nightly/20261202T021700Z") {
		t.Errorf("the store's index does not show the suites' trends: %v", err)
	}
}

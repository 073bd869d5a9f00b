package suite

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/results"
)

// The store index's suites: each suite's runs as a matrix of cells by run, newest first,
// each square judged against the runs before it, and the flags of the newest run. Whoever
// writes or serves an index passes StoreTrends to results (results.Trends), and the
// suite's own runs do; results renders them.

// maxTrendRuns is how many runs of a suite the index shows; the flags and medians still
// look at all of them.
const maxTrendRuns = 20

// StoreTrends are the suites of the store at root, and the suite runs it could not read:
// a results.Trends.
func StoreTrends(root string) ([]results.SuiteTrend, []string) {
	runs, problems, err := Find(root)
	if err != nil {
		return nil, []string{err.Error()}
	}
	// Files are named from the store's root, as the index's links are: the page may be
	// served, or kept, far from where it was written.
	prefix := filepath.Clean(root) + string(filepath.Separator)
	var bad []string
	for _, p := range problems {
		bad = append(bad, strings.ReplaceAll(p.Error(), prefix, ""))
	}
	var trends []results.SuiteTrend
	for _, name := range Suites(runs) {
		if h := History(runs, name); len(h) > 0 {
			trends = append(trends, trendView(h))
		}
	}
	return trends, bad
}

// trendView is a suite's history, newest first, as the index shows it.
func trendView(h []Record) results.SuiteTrend {
	shown := h[:min(len(h), maxTrendRuns)]
	t := results.SuiteTrend{Suite: h[0].Result.Suite, Rule: DriftRule, Older: len(h) - len(shown)}
	var comparisons []Comparison
	for i, r := range shown {
		comparisons = append(comparisons, Compare(r, h[i+1:]))
		t.Runs = append(t.Runs, results.TrendRun{Label: runLabel(r.Result), Href: href(r.ID, HTMLFile),
			Status: string(r.Result.Status), Text: StatusWord(r.Result.Status)})
	}
	var cells []string
	for _, r := range shown {
		for _, c := range r.Result.Cells {
			if !slices.Contains(cells, c.Cell.Name) {
				cells = append(cells, c.Cell.Name)
			}
		}
	}
	for _, name := range cells {
		row := results.TrendCell{Name: name}
		for _, c := range comparisons {
			row.Squares = append(row.Squares, square(c, name))
		}
		t.Cells = append(t.Cells, row)
	}
	for _, f := range comparisons[0].Flags {
		tf := results.TrendFlag{Kind: string(f.Kind), Cell: f.Cell, Text: f.Text, Command: f.Command}
		if f.Report != "" {
			tf.Href = href(h[0].ID, f.Report)
		}
		t.Flags = append(t.Flags, tf)
	}
	return t
}

// square is how the cell fared in the compared run, with what was flagged there; empty
// when the run did not have the cell.
func square(c Comparison, cell string) results.TrendSquare {
	i := slices.IndexFunc(c.Cells, func(ch CellChange) bool { return ch.Now.Cell.Name == cell })
	if i < 0 {
		return results.TrendSquare{}
	}
	now := c.Cells[i].Now
	sq := results.TrendSquare{Status: string(now.Status), Text: StatusWord(now.Status),
		Href: href(c.Now.ID, HTMLFile) + fmt.Sprintf("#cell-%d", i+1), Rate: foundText(now), Median: medianText(now)}
	for _, f := range c.Flags {
		if f.Cell == cell && !slices.Contains(sq.Flags, string(f.Kind)) {
			sq.Flags = append(sq.Flags, string(f.Kind))
		}
	}
	return sq
}

// runLabel names a run in a column: when it started, and what part of the suite it is.
func runLabel(r Result) string {
	label := r.Started.UTC().Format("2006-01-02 15:04")
	switch {
	case len(r.Merged) > 0:
		label += fmt.Sprintf(", %d shards merged", len(r.Merged))
	case r.Shard != "" && r.Shard != (Shard{1, 1}).String():
		label += ", shard " + r.Shard
	}
	return label
}

// href is a link from the store's root to a file of a suite run (id/rest).
func href(id, rest string) string {
	return (&url.URL{Path: id + "/" + rest}).String()
}

package suite

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// DriftRule says what a drift is, for readers of the text and the index.
var DriftRule = fmt.Sprintf("a detection rate more than %.0f points below the median of the cell's last %d runs, with at least %d of them",
	100*DriftMargin, DriftWindow, DriftMinRuns)

// Text is the comparison for a terminal: each cell's status now and in the last run before
// that could say, its detection rate now, its recent median and its median time to the
// first violation, then the flags.
func (c Comparison) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "suite %s: %s", c.Now.Result.Suite, c.Now.ID)
	switch len(c.Before) {
	case 0:
		b.WriteString(", no run before it\n")
	case 1:
		fmt.Fprintf(&b, " against %s\n", c.Before[0].ID)
	default:
		fmt.Fprintf(&b, " against %s and %d runs before it\n", c.Before[0].ID, len(c.Before)-1)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  cell\tbefore\tnow\tfound\trecent median\tfirst violation (median)")
	for _, ch := range c.Cells {
		before := "-"
		if ch.Previous != nil {
			before = StatusWord(ch.Previous.Status)
		}
		recent := ""
		if ch.HasRecent {
			recent = percent(ch.Recent)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", ch.Now.Cell.Name, before, StatusWord(ch.Now.Status), foundText(ch.Now), recent, medianText(ch.Now))
	}
	tw.Flush()
	table := strings.Split(b.String(), "\n")
	for i := range table {
		table[i] = strings.TrimRight(table[i], " ") // the empty cells at a row's end
	}
	b.Reset()
	b.WriteString(strings.Join(table, "\n"))
	if len(c.Flags) > 0 {
		b.WriteString("\n")
	}
	n := map[FlagKind]int{}
	for _, f := range c.Flags {
		n[f.Kind]++
		fmt.Fprintf(&b, "  %-11s %s: %s\n", strings.ToUpper(string(f.Kind)), f.Cell, f.Text)
		for _, command := range []string{f.Command, f.Shrink} {
			if command != "" {
				fmt.Fprintf(&b, "              %s\n", command)
			}
		}
	}
	fmt.Fprintf(&b, "\nregressions: %d, flaky runs of safe cells: %d, drifts: %d (a drift: %s)\n", n[Regression], n[Flaky], n[Drift], DriftRule)
	return b.String()
}

// StatusWord is a cell's status as the trends say it: met, not met, could not say.
func StatusWord(s Status) string {
	switch s {
	case Met:
		return "met"
	case Failed:
		return "not met"
	}
	return "could not say"
}

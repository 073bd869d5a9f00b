package results

import (
	"fmt"
	"strings"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// How the pages show a run's hazards (history.Hazard): the counts are the Summary's
// (Hazards), as given; the occurrences listed and drawn are the history's hazard events.
// A pass is a claim about the hazards it went through, so a valid safety verdict names
// them ("through 9 lost grants"), and a hazard a nemesis of the run exists to create that
// never occurred is shown as absent, in the words of what the run lacked.

// hazardView is one of a run's hazard counts.
type hazardView struct {
	Hazard string
	Text   string // "9 lost grants"
	// Nemesis is the nemesis of the run that exists to create it; "" for one seen on the way.
	Nemesis string
	// Absent says what the run lacked, for a wanted hazard that never occurred.
	Absent string
}

func hazardViews(counts []HazardCount) []hazardView {
	views := make([]hazardView, 0, len(counts))
	for _, h := range counts {
		v := hazardView{Hazard: string(h.Hazard), Text: h.Hazard.Count(h.Count), Nemesis: h.Nemesis}
		if h.Nemesis != "" && h.Count == 0 {
			v.Absent = h.Hazard.Absent()
		}
		views = append(views, v)
	}
	return views
}

// wantedText is the counts of the hazards the run's nemeses exist to create that occurred,
// "9 lost grants and 2 crashes under a held grant"; "" when none did.
func wantedText(counts []HazardCount) string {
	var parts []string
	for _, h := range counts {
		if h.Nemesis != "" && h.Count > 0 {
			parts = append(parts, h.Hazard.Count(h.Count))
		}
	}
	return strings.Join(parts, " and ")
}

// throughHazards is what a verdict held through: the wanted hazards, for a valid verdict
// of a safety property (lock safety, data safety, fencing); "" for any other.
func throughHazards(r checkers.Result, counts []HazardCount) string {
	switch r.Property {
	case checkers.PropertyLockSafety, checkers.PropertyDataSafety, checkers.PropertyFencing:
	default:
		return ""
	}
	if text := wantedText(counts); r.Verdict == checkers.Valid && text != "" {
		return "through " + text
	}
	return ""
}

// hazardsLine is the run's hazard counts in one line of text: "hazards: 9 lost grants (what
// failover exists to create), 1 lease expired in a pause; absent: grant-lost (what
// failover exists to create): no replica was promoted ..."; "" when the run has none.
func hazardsLine(counts []HazardCount) string {
	var seen, absent []string
	for _, h := range hazardViews(counts) {
		why := ""
		if h.Nemesis != "" {
			why = " (what " + h.Nemesis + " exists to create)"
		}
		if h.Absent != "" {
			absent = append(absent, h.Hazard+why+": "+h.Absent)
		} else {
			seen = append(seen, h.Text+why)
		}
	}
	var parts []string
	if len(seen) > 0 {
		parts = append(parts, "hazards: "+strings.Join(seen, ", "))
	}
	if len(absent) > 0 {
		parts = append(parts, "absent: "+strings.Join(absent, "; "))
	}
	return strings.Join(parts, "; ")
}

// occurrenceRow is one hazard event in the report's list; At links it into the timeline
// (milliseconds, as data-at) when the timeline draws it.
type occurrenceRow struct {
	Time, Hazard, Fault, Targets, Detail string
	At                                   string
}

// occurrenceRows lists the history's hazard events, at most maxEvidence of them, and how
// many more there are; drawn says which the timeline drew (by index).
func occurrenceRows(events []history.Event, drawn map[int]bool) (rows []occurrenceRow, more int) {
	c := newClock(events)
	found := history.Hazards(events)
	if len(found) > maxEvidence {
		found, more = found[:maxEvidence], len(found)-maxEvidence
	}
	for _, h := range found {
		row := occurrenceRow{Time: fmt.Sprintf("%.3f", c.offset(h.Time).Seconds()), Hazard: string(h.Hazard),
			Fault: h.Fault, Targets: strings.Join(h.Targets, ", "), Detail: detailText(h.Detail)}
		if drawn[h.Index] {
			row.At = c.ms(h.Time)
		}
		rows = append(rows, row)
	}
	return rows, more
}

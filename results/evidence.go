package results

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// maxOccurrenceLinks is how many occurrences one grouped evidence line links one by one;
// results.json keeps them all.
const maxOccurrenceLinks = 30

// overlapGroup is one line of grouped evidence: every overlap of one key by one pair of
// clients, linked to its places in the timeline.
type overlapGroup struct {
	Text        string
	First       string // the first occurrence's anchor
	Occurrences []occurrence
	More        int // occurrences not linked one by one
}

// occurrence is one overlap's time, linked to its anchor in the timeline (ID) unless the
// timeline does not draw it (ID empty).
type occurrence struct{ ID, Text string }

// groupOverlaps puts the overlaps into one group per key and pair of clients, the earliest
// group first. The timeline numbers its overlaps' anchors in order, from base; anchored
// says which of them it drew (by that number).
func groupOverlaps(overlaps []checkers.Overlap, events []history.Event, base int, anchored []bool) []overlapGroup {
	c := newClock(events)
	event := byIndex(events)
	anchor := func(i int) string {
		if base+i < len(anchored) && anchored[base+i] {
			return overlapID(base + i)
		}
		return ""
	}
	type pair struct {
		key  string
		a, b int
	}
	type member struct {
		at int64
		i  int
	}
	groups := map[pair][]member{}
	var order []pair
	for i, o := range overlaps {
		p := pair{o.Key, min(o.Earlier.Process, o.Later.Process), max(o.Earlier.Process, o.Later.Process)}
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		groups[p] = append(groups[p], member{at: event(o.Later.Granted).Time, i: i})
	}
	for _, p := range order {
		slices.SortStableFunc(groups[p], func(x, y member) int { return cmp.Compare(x.at, y.at) })
	}
	slices.SortStableFunc(order, func(x, y pair) int { return cmp.Compare(groups[x][0].at, groups[y][0].at) })

	out := make([]overlapGroup, 0, len(order))
	for _, p := range order {
		members := groups[p]
		var longest time.Duration
		for _, m := range members {
			longest = max(longest, overlaps[m.i].Length)
		}
		first := overlaps[members[0].i]
		g := overlapGroup{First: anchor(members[0].i),
			Text: fmt.Sprintf("p%d and p%d both held %s %s, the longest for %v; first: p%d acquired it at %s while p%d held it since %s",
				p.a, p.b, p.key, times(len(members)), longest,
				first.Later.Process, c.event(event(first.Later.Granted)), first.Earlier.Process, c.event(event(first.Earlier.Granted)))}
		for n, m := range members {
			if n == maxOccurrenceLinks {
				g.More = len(members) - n
				break
			}
			g.Occurrences = append(g.Occurrences, occurrence{ID: anchor(m.i), Text: seconds(c.offset(m.at))})
		}
		out = append(out, g)
	}
	return out
}

// times is "once", "twice" or "5 times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

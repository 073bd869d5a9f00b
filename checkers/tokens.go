package checkers

// What fencing remembers of the tokens a key granted, in memory that does not grow with a
// long run's length the way a map of every grant did (110 MB for the 2 million grants of a
// 15-minute run on the in-process lock): every token granted as runs of consecutive tokens
// (a counter's tokens make one run), and who got each of the latest recentGrants tokens,
// which a duplicate's evidence names.

import "sort"

// recentGrants is how many of the latest tokens granted are kept with their grant.
const recentGrants = 100_000

// grantedTokens is every token granted on one key.
type grantedTokens struct {
	runs   []tokenRun // sorted, disjoint and not adjacent
	recent map[int64]grantOf
	order  []int64 // recent's tokens, a ring in the order granted
	next   int     // where order's next token goes
}

// tokenRun is the tokens from lo to hi, both granted.
type tokenRun struct{ lo, hi int64 }

// grantOf is a token's first grant: to whom, at which event.
type grantOf struct{ process, index int }

// grant records token t's grant g, and says whether t was granted before and, when that
// grant is among the recent ones, which it was.
func (k *grantedTokens) grant(t int64, g grantOf) (before bool, earlier grantOf, known bool) {
	if !k.add(t) {
		earlier, known = k.recent[t]
		return true, earlier, known
	}
	if k.recent == nil {
		k.recent = map[int64]grantOf{}
	}
	if len(k.order) < recentGrants {
		k.order = append(k.order, t)
	} else {
		delete(k.recent, k.order[k.next])
		k.order[k.next] = t
		k.next = (k.next + 1) % recentGrants
	}
	k.recent[t] = g
	return false, grantOf{}, false
}

// add puts t in the runs, and says whether it was new.
func (k *grantedTokens) add(t int64) bool {
	n := len(k.runs)
	if n > 0 && k.runs[n-1].hi < t { // the usual case: the highest token yet
		if k.runs[n-1].hi == t-1 {
			k.runs[n-1].hi = t
		} else {
			k.runs = append(k.runs, tokenRun{t, t})
		}
		return true
	}
	i := sort.Search(n, func(i int) bool { return k.runs[i].hi >= t }) // the first run that may hold t
	if i < n && k.runs[i].lo <= t {
		return false
	}
	joinsBelow := i > 0 && k.runs[i-1].hi == t-1
	joinsAbove := i < n && k.runs[i].lo == t+1
	switch {
	case joinsBelow && joinsAbove:
		k.runs[i-1].hi = k.runs[i].hi
		k.runs = append(k.runs[:i], k.runs[i+1:]...)
	case joinsBelow:
		k.runs[i-1].hi = t
	case joinsAbove:
		k.runs[i].lo = t
	default:
		k.runs = append(k.runs, tokenRun{})
		copy(k.runs[i+1:], k.runs[i:])
		k.runs[i] = tokenRun{t, t}
	}
	return true
}

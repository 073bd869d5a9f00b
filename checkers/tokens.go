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
	runs []tokenRun // sorted, disjoint and not adjacent
	// recent are the latest recentGrants grants, a ring in the order granted, whose next
	// one goes at next.
	recent []recentGrant
	next   int
	// byToken finds a recent grant by its token. It is made when a token is first granted
	// again: a history whose tokens never repeat (most) needs none, and filling a map on
	// every grant was most of fencing's time.
	byToken map[int64]grantOf
}

// tokenRun is the tokens from lo to hi, both granted.
type tokenRun struct{ lo, hi int64 }

// grantOf is a token's first grant: to whom, at which event.
type grantOf struct{ process, index int }

// recentGrant is a token and its first grant.
type recentGrant struct {
	token int64
	grantOf
}

// grant records token t's grant g, and says whether t was granted before and, when that
// grant is among the recent ones, which it was.
func (k *grantedTokens) grant(t int64, g grantOf) (before bool, earlier grantOf, known bool) {
	if !k.add(t) {
		if k.byToken == nil {
			k.byToken = make(map[int64]grantOf, len(k.recent))
			for _, r := range k.recent {
				k.byToken[r.token] = r.grantOf
			}
		}
		earlier, known = k.byToken[t]
		return true, earlier, known
	}
	if len(k.recent) < recentGrants {
		k.recent = append(k.recent, recentGrant{t, g})
	} else {
		if k.byToken != nil {
			delete(k.byToken, k.recent[k.next].token)
		}
		k.recent[k.next] = recentGrant{t, g}
		k.next = (k.next + 1) % recentGrants
	}
	if k.byToken != nil {
		k.byToken[t] = g
	}
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

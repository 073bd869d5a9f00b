package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// delayHolderSpec is the seed's delayed write on one Redis: each holder's write after its
// read is held in the network (the proxies on its links) until its lease ran out and
// another client wrote.
func delayHolderSpec(fencing bool) Spec {
	s := DefaultSpec()
	s.Nemesis = []string{history.DelayHolder.Name}
	s.TimeLimit = Duration(12 * time.Second)
	s.Fencing = fencing
	return s
}

// The write arrives after the lease and after the next holder's write: unfenced, the
// storage takes it and an update is lost; fenced, it refuses the stale token. Either way
// the story tells the write held in the network and when the storage received it.
func TestRedisHolderWriteHeldInTheNetwork(t *testing.T) {
	inLane(t, laneRedis)
	for _, fencing := range []bool{false, true} {
		t.Run(map[bool]string{false: "unfenced", true: "fenced"}[fencing], func(t *testing.T) {
			tr := untilDanger(t, delayHolderSpec(fencing), both(overlapped, hazard(history.LateWrite)))
			if fencing {
				expectLockBrokenDataSafe(t, tr.summary)
			} else {
				expect(t, tr.summary, map[string]checkers.Verdict{
					"mutual-exclusion": checkers.Invalid, "data-safety": checkers.Invalid, "lost-updates": checkers.Invalid})
			}
			story := checkers.StoryText(verdicts(tr.summary)["mutual-exclusion"].Story)
			for _, says := range []string{"had its write held in the network (delay-holder)", "received by the storage at"} {
				if !strings.Contains(story, says) {
					t.Errorf("the story does not say %q:\n%s", says, story)
				}
			}
		})
	}
}

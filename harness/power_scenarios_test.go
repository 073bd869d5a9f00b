package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// Redlock under power loss, the Redis page's own warning: masters that sync their log once
// a second (aof-everysec) come back without a grant made within that second, so power lost
// by the holder's majority lets a second client gather a majority within the holder's
// lease; masters that sync before each reply (aof-always) keep it, and the run passes with
// the danger made real. As with kill-node, the masters must serve again within the lease,
// so these run before the lanes.

func redlockPowerSpec(p system.Persistence) Spec {
	s := DefaultSpec()
	s.System, s.Client, s.Nemesis, s.TimeLimit = "redlock", "redlock", []string{history.PowerLoss.Name}, Duration(12*time.Second)
	s.Persistence, s.Seed = string(p), 3
	return s
}

func TestRedlockPowerLossWithALogSyncedEverySecondGivesTwoHolders(t *testing.T) {
	needDisks(t)
	tr := untilDanger(t, redlockPowerSpec(system.PersistAOFEverySec), both(hazard(history.RestartInLease), overlapped))
	expect(t, tr.summary, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid})
	lost := false
	for _, e := range nemesisEvents(tr.events, history.Start, history.PowerLoss.Name) {
		lost = lost || strings.Contains(e.Detail[history.LostDetail], "appendonly")
	}
	if !lost {
		t.Errorf("no power loss lost any of the log's unsynced writes")
	}
	if story := checkers.StoryText(verdicts(tr.summary)["mutual-exclusion"].Story); !strings.Contains(story, "lost its power (power-loss)") || !strings.Contains(story, "its disk lost") {
		t.Errorf("story %q: want it to tell the power loss and what the disk lost", story)
	}
}

func TestRedlockPowerLossWithALogSyncedBeforeEachReplyKeepsTheLock(t *testing.T) {
	needDisks(t)
	tr := untilDanger(t, redlockPowerSpec(system.PersistAOFAlways), hazard(history.RestartServed))
	expectLockKept(t, tr.summary)
	expectHazard(t, tr.summary, history.CrashUnderGrant)
}

// needDisks skips t where this host cannot serve the nodes' disks (not root, no FUSE).
func needDisks(t *testing.T) {
	t.Helper()
	if err := containers.CheckDisks(); err != nil {
		t.Skip(err)
	}
}

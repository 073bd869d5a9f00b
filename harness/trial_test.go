package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/workloads/locksvc"
)

// Whole trials against the lock service the harness serves itself: real worker
// processes, real SIGSTOP and SIGKILL, the real checkers, and no Docker, so they run
// under -short and show the run loop itself works. Each serves its own lock, so they run
// side by side.

// localSpec is a short trial on the in-process lock: leases of 500ms, so a pause of
// twice that always outlives the holder's lease, in a run of four leases.
func localSpec(system string, nemesis []string, fencing bool) Spec {
	s := DefaultSpec()
	s.System, s.Nemesis, s.Fencing = system, nemesis, fencing
	s.Clients = 3
	s.TTL = Duration(500 * time.Millisecond)
	s.Interval = Duration(500 * time.Millisecond)
	s.TimeLimit = Duration(2 * time.Second) // several leases, pauses and kills: the fast tier stays fast
	return s
}

// inMakeTest keeps t out of the fast tier (-short), where the trial named already shows
// what t shows; make test runs it.
func inMakeTest(t *testing.T, shownBy string) {
	t.Helper()
	if testing.Short() {
		t.Skip("make test runs it; the fast tier has " + shownBy)
	}
}

func TestLocalLockWithoutFaultsIsSafe(t *testing.T) {
	inMakeTest(t, "TestKilledWorkerLeavesAnIndeterminateOpAndIsReplaced, every checker valid")
	inLane(t, laneLocal)
	expectAllValid(t, untilDanger(t, localSpec("local", []string{"none"}, true), worked).summary)
}

func TestBrokenLocalLockIsCaught(t *testing.T) {
	inLane(t, laneLocal)
	s := runScenario(t, localSpec("local-broken", []string{"none"}, false))
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
		"stats":             checkers.Valid,
	})
	if s.Verdict != checkers.Invalid {
		t.Errorf("overall %s, want invalid", s.Verdict)
	}
}

func TestLocalPausedHolderWithoutFencingCorruptsStorage(t *testing.T) {
	inMakeTest(t, "TestLocalPausedHolderWithFencingKeepsStorageSafe, the same pauses and overlap")
	inLane(t, laneLocal)
	s := runScenario(t, localSpec("local", []string{"pause-holder"}, false))
	expect(t, s, map[checkers.Name]checkers.Verdict{
		"lock-linearizable": checkers.Invalid,
		"mutual-exclusion":  checkers.Invalid,
		"data-safety":       checkers.Invalid,
	})
}

func TestLocalPausedHolderWithFencingKeepsStorageSafe(t *testing.T) {
	inLane(t, laneLocal)
	expectLockBrokenDataSafe(t, runScenario(t, localSpec("local", []string{"pause-holder"}, true)))
}

// A waiter frozen past its lease on the in-process lock, a lease lock whose waiters ask again
// rather than wait in line: another client is granted meanwhile (the hazard). The thawed
// waiter is refused while that client holds the lock, or, when the freeze caught it just
// after its winning attempt reached the service (a lease granted and run out before the
// client heard of it, as after a GC pause), it is told it holds the lock: two holders, whose
// story tells the frozen waiter (its sentences, or the hazard's). Either way the danger came,
// and what the history shows is said.
func TestLocalFrozenWaiterIsJudgedAndTold(t *testing.T) {
	inMakeTest(t, "pause-waiter's own tests on a recording fake")
	inLane(t, laneLocal)
	tr := untilDanger(t, localSpec("local", []string{history.PauseWaiter.Name}, false), hazard(history.WaiterLapsed))
	for _, f := range history.Faults(tr.events) {
		if !f.Healed {
			t.Errorf("fault %s on %v was never healed: the waiter stayed frozen", f.Description, f.Targets)
		}
	}
	v := verdicts(tr.summary)
	if v[checkers.Stats].Verdict != checkers.Valid {
		t.Errorf("stats: %s (%s), want valid: the danger came", v[checkers.Stats].Verdict, v[checkers.Stats].Summary)
	}
	me := v[checkers.MutualExclusion]
	switch story := checkers.StoryText(me.Story); {
	case me.Verdict == checkers.Valid:
	case me.Verdict != checkers.Invalid:
		t.Errorf("mutual-exclusion: %s (%s), want valid or invalid", me.Verdict, me.Summary)
	case !strings.Contains(story, "("+history.PauseWaiter.Name+")") && !strings.Contains(story, "("+string(history.WaiterLapsed)+")"):
		t.Errorf("two holders, and the story does not tell the frozen waiter:\n%s", story)
	}
}

// A holder that extends asks the lock before it writes: paused past its lease while
// another client was granted, it is told the lock is not its own any more and does not
// write, so unfenced storage stays safe, though it believed it held the lock throughout the
// pause (two holders). The same through the exec protocol.
func TestLocalHolderThatExtendsDoesNotWriteAfterItsLease(t *testing.T) {
	t.Parallel() // each client's run takes its place in the lane
	nemesis := []string{history.PauseHolder.Name}
	for name, spec := range map[string]Spec{"go": localSpec("local", nemesis, false), "exec": localExecSpec(t, nemesis, false, "")} {
		t.Run(name, func(t *testing.T) {
			inLane(t, laneLocal)
			spec.ExtendEvery = spec.TTL / 3
			holdersWhoExtendDoNotWriteLate(t, untilDanger(t, spec, hazard(history.GrantedInPause)))
		})
	}
}

// A holder whose extend is answered after the lease it renewed ran out (delay-extend, on
// the answers of its one node) while another client was granted: the local lock says no,
// and the holder does not write. The same through the exec protocol.
func TestLocalSlowExtendIsRefused(t *testing.T) {
	inMakeTest(t, "TestLocalHolderThatExtendsDoesNotWriteAfterItsLease, a refused extend")
	inLane(t, laneLocal)
	nemesis := []string{history.DelayExtend.Name}
	for name, spec := range map[string]Spec{"go": localSpec("local", nemesis, false), "exec": localExecSpec(t, nemesis, false, "")} {
		t.Run(name, func(t *testing.T) {
			spec.ExtendEvery, spec.LinkNode = spec.TTL/3, "n1"
			tr := untilDanger(t, spec, hazard(history.GrantedInExtend))
			holdersWhoExtendDoNotWriteLate(t, tr)
			story := checkers.StoryText(verdicts(tr.summary)[checkers.MutualExclusion].Story)
			if !regexp.MustCompile(`asked to extend its lease at [0-9.]+ s, heard back at [0-9.]+ s and was told the lock was no longer its own`).MatchString(story) {
				t.Errorf("the story does not tell the slow extend:\n%s", story)
			}
		})
	}
}

// The faults on extends compose with the others: a holder paused past its lease and one
// whose extend is answered late, in one run, are both refused and write nothing late.
func TestLocalExtendFaultsCompose(t *testing.T) {
	inMakeTest(t, "TestLocalSlowExtendIsRefused and TestLocalHolderThatExtendsDoesNotWriteAfterItsLease, each alone")
	inLane(t, laneLocal)
	spec := localSpec("local", []string{history.DelayExtend.Name, history.PauseHolder.Name}, false)
	spec.ExtendEvery = spec.TTL / 3
	holdersWhoExtendDoNotWriteLate(t, untilDanger(t, spec, both(hazard(history.GrantedInExtend), hazard(history.GrantedInPause))))
}

// holdersWhoExtendDoNotWriteLate asserts of a run of holders that extend, paused past
// their leases while another was granted: two holders, safe data, extends granted and
// refused, and no write after a refusal.
func holdersWhoExtendDoNotWriteLate(t *testing.T, tr ran) {
	t.Helper()
	expect(t, tr.summary, map[checkers.Name]checkers.Verdict{
		checkers.MutualExclusion: checkers.Invalid,
		checkers.DataSafety:      checkers.Valid,
		checkers.Stats:           checkers.Valid,
	})
	ops, err := history.Pair(tr.events)
	if err != nil {
		t.Fatal(err)
	}
	extended, refused := 0, 0
	afterRefusal := map[int]bool{} // processes whose last extend was refused, until their release
	for _, op := range ops {
		p := op.Process()
		switch {
		case op.Func() == history.Extend && op.Type() == history.OK:
			extended++
		case op.Func() == history.Extend && op.Type() == history.Fail && op.Complete.Error == history.ErrNotHeld:
			refused++
			afterRefusal[p] = true
		case op.Func() == history.Release:
			delete(afterRefusal, p)
		case op.Func() == history.Write && afterRefusal[p]:
			t.Errorf("p%d wrote after its extend was refused: %s", p, checkers.Describe(op, 0))
		}
	}
	if extended == 0 || refused == 0 {
		t.Errorf("%d extends granted and %d refused; want both: holders extend, and the paused one is refused", extended, refused)
	}
	if story := checkers.StoryText(verdicts(tr.summary)[checkers.MutualExclusion].Story); !strings.Contains(story, "asked to extend its lease") {
		t.Errorf("the story does not tell the paused holder's extend:\n%s", story)
	}
}

// A worker killed while it waits for the lock: its acquire becomes indeterminate, a new
// process takes its place, and the checkers still decide.
func TestKilledWorkerLeavesAnIndeterminateOpAndIsReplaced(t *testing.T) {
	inLane(t, laneLocal)
	spec := localSpec("local", []string{"kill-client"}, true)
	tr := untilDanger(t, spec, worked)
	s := tr.summary
	expectAllValid(t, s)
	lost, replaced := 0, false
	for _, e := range tr.events {
		if e.Type == history.Info && strings.Contains(e.Message, "worker exited during the operation") {
			lost++
		}
		if e.Process >= spec.Clients {
			replaced = true
		}
	}
	if lost == 0 || !replaced {
		t.Errorf("%d operations lost with their worker, replaced: %v; want a lost operation and a new process", lost, replaced)
	}
	// The new process is a new client of the lock service too: the service saw more
	// owners (each named <owner>-<acquisition>) than there are slots.
	log, err := os.ReadFile(filepath.Join(tr.dir, results.NodesDir, "n1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var entry locksvc.LogEntry
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatal(err)
		}
		owners[entry.Owner[:strings.LastIndexByte(entry.Owner, '-')]] = true
	}
	if len(owners) <= spec.Clients {
		t.Errorf("the lock service saw %d owners for %d slots: a replacement took its predecessor's name", len(owners), spec.Clients)
	}
}

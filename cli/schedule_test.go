package cli

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
)

// A steered step, run for real on the harness's own lock: it strikes a client found
// waiting, and the pause holds on past its length until another client was granted the
// lock and used the storage. A run too busy to let another client take over before its
// end proves nothing, and is tried again, longer, on a fresh seed; a pause that ends
// before a takeover every time fails.
func TestASteeredStepStrikesAWaiterAndHoldsOnUntilATakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness's own lock for a few seconds")
	}
	for try := 1; try <= 3; try++ {
		out := t.TempDir()
		code, stdout, stderr := lockbreaker(t, nil, "run", "--system", "local", "--nemesis", "pause-client",
			"--time-limit", strconv.Itoa(4*try)+"s", "--seed", strconv.Itoa(try),
			"--schedule", "pause-client@300ms/1/10ms/waiting/until-takeover", "--results", out)
		if code == 254 || code == 255 {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		file, err := history.ReadFile(filepath.Join(onlyRun(t, filepath.Join(out, "local-local-pause-client-nofence")), "history.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if heldOn(t, file.Events) {
			return
		}
		t.Logf("try %d: the pause ended before another client took the lock over", try)
	}
	t.Fatal("in 3 runs the pause never held on until a takeover")
}

// heldOn says whether the run's one pause, which must strike a waiter, ended only once
// another client was granted the lock and used the storage.
func heldOn(t *testing.T, events []history.Event) bool {
	t.Helper()
	states := history.States{}
	victim, struck, granted := 0, false, false
	for _, e := range events {
		switch {
		case e.Process == history.NemesisProcess && e.Func == history.Start && e.Fault == history.PauseClient.Name:
			victim, _ = history.ClientTarget(e.Targets[0])
			if got := states.Of(victim); got != history.Waiting {
				t.Fatalf("the pause struck p%d, %s, want a waiter", victim, got)
			}
			struck = true
		case struck && e.Process == history.NemesisProcess && e.Func == history.Stop:
			return false
		case struck && e.Process != victim && e.Func == history.Acquire && e.Type == history.OK:
			granted = true
		case granted && e.Process != victim && (e.Func == history.Read || e.Func == history.Write) && e.Type == history.OK:
			return true
		}
		states.Follow(e)
	}
	t.Fatalf("the pause began %v and never ended in the history", struck)
	return false
}

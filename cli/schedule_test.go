package cli

import (
	"path/filepath"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
)

// A steered step, run for real on the harness's own lock: it strikes a client found
// waiting, and the pause holds on past its length until another client was granted the
// lock and used the storage.
func TestASteeredStepStrikesAWaiterAndHoldsOnUntilATakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness's own lock for a few seconds")
	}
	out := t.TempDir()
	code, stdout, stderr := lockbreaker(t, nil, "run", "--system", "local", "--nemesis", "pause-client", "--time-limit", "4s",
		"--schedule", "pause-client@300ms/1/10ms/waiting/until-takeover", "--results", out)
	if code == 254 || code == 255 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	file, err := history.ReadFile(filepath.Join(onlyRun(t, filepath.Join(out, "local-local-pause-client-nofence")), "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	states := history.States{}
	var victim int
	var struck, granted, took bool
	for _, e := range file.Events {
		switch {
		case e.Process == history.NemesisProcess && e.Func == history.Start && e.Fault == history.PauseClient.Name:
			victim, _ = history.ClientTarget(e.Targets[0])
			if got := states.Of(victim); got != history.Waiting {
				t.Fatalf("the pause struck p%d, %s, want a waiter", victim, got)
			}
			struck = true
		case struck && e.Process == history.NemesisProcess && e.Func == history.Stop:
			if !took {
				t.Fatalf("the pause of p%d ended before another client took the lock over (granted %v)", victim, granted)
			}
			return
		case struck && e.Process != victim && e.Func == history.Acquire && e.Type == history.OK:
			granted = true
		case granted && e.Process != victim && (e.Func == history.Read || e.Func == history.Write) && e.Type == history.OK:
			took = true
		}
		states.Follow(e)
	}
	t.Fatalf("the pause began %v and never ended in the history\nstdout %s", struck, stdout)
}

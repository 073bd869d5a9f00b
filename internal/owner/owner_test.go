package owner

import (
	"os"
	"testing"
)

// This process is alive by its own start time, and gone by any other; a pid no process
// has is gone.
func TestGoneTellsAProcessByItsStart(t *testing.T) {
	pid := os.Getpid()
	start := Start(pid)
	switch {
	case start == "":
		t.Fatal("no start time for this process")
	case Gone(pid, start):
		t.Error("this process is gone by its own start time")
	case !Gone(pid, start+"0"):
		t.Error("this process is alive by another start time (a reused pid)")
	case !Gone(1<<30, start):
		t.Error("a pid no process has is alive")
	}
}

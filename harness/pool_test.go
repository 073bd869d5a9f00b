package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// Workers that die as soon as they have read their configuration are replaced again and
// again, until a marker tells the replacements to wait for their stop line instead: stop
// must end every one of them, also one that was starting while stop began, and return
// without waiting out its grace.
func TestStopEndsWorkersThatReplacedDeadOnes(t *testing.T) {
	rec, err := history.Create(filepath.Join(t.TempDir(), history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	configs := make([]WorkerConfig, 3)
	for p := range configs {
		configs[p] = WorkerConfig{Process: p, Lock: workloads.Config{Key: "lock"}}
	}
	marker := filepath.Join(t.TempDir(), "wait")
	workers, err := startPool([]string{"sh", "-c", `read config; if [ -e "$0" ]; then read stop; fi`, marker}, configs, rec, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the slots have been taken over a few times.
	for started(workers) < 30 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	workers.stop(time.Hour)
	for _, w := range workers.slots {
		if w.cmd.ProcessState == nil {
			t.Errorf("worker %d was never reaped", w.cfg.Process)
		}
	}
	t.Logf("%d workers started in all", started(workers))
	// A replaced worker takes no signal, and that is no error; a number never given is one.
	if err := workers.Signal(0, syscall.SIGCONT); err != nil {
		t.Errorf("signal a replaced worker: %v", err)
	}
	if err := workers.Signal(started(workers)*len(configs), syscall.SIGCONT); err == nil {
		t.Error("signalled a worker never started")
	}
}

// started is how many workers a pool has started: its slots' process numbers count them.
func started(p *pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.slots {
		n += w.cfg.Process/len(p.slots) + 1
	}
	return n
}

// stuckNet is a client network whose addresses never leave the bridge.
type stuckNet struct{ clientNet }

func (stuckNet) Isolate(*syscall.SysProcAttr)           {}
func (stuckNet) Attach(context.Context, int, int) error { return nil }
func (stuckNet) Detach(context.Context, int) error {
	return errors.New("link still there")
}

// A worker whose address could not be taken off the bridge is not replaced: its
// successor would share the address with what is left of it.
func TestSlotWhoseAddressStaysTakesNoNewWorker(t *testing.T) {
	rec, logs, logged := poolRecords(t)
	configs := []WorkerConfig{{Process: 0, Lock: workloads.Config{Key: "lock"}}}
	workers, err := startPoolOn(&clientAddrs{net: stuckNet{}}, []string{"sh", "-c", "read config"}, configs, rec, logs)
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(logged(), "no worker takes its place") {
		time.Sleep(10 * time.Millisecond)
	}
	workers.stop(time.Hour)
	if n := started(workers); n != 1 {
		t.Errorf("%d workers started, want only the first", n)
	}
}

// poolRecords is what a pool under test records into: a history, and a log with what it
// holds so far.
func poolRecords(t *testing.T) (rec *history.Recorder, logs *lockedWriter, logged func() string) {
	t.Helper()
	rec, err := history.Create(filepath.Join(t.TempDir(), history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	var buf bytes.Buffer
	logs = &lockedWriter{w: &buf}
	return rec, logs, func() string {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		return buf.String()
	}
}

// Armed, the workers stop themselves (here: at once, as an armed worker does after its
// read under the lock) and the first to have stopped goes to the fault that armed them,
// stopped, with the time it gave; one that stops itself with no fault waiting for it (the
// other, and any after the disarm) is continued at once, so none is left stopped.
func TestArmedWorkersStopThemselvesAndOnlyTheFirstStaysStopped(t *testing.T) {
	rec, err := history.Create(filepath.Join(t.TempDir(), history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	configs := []WorkerConfig{{Process: 0}, {Process: 1}}
	script := `read config; while read line; do case "$line" in arm|disarm) echo "stopped 42"; kill -STOP 0;; stop) exit 0;; esac; done`
	workers, err := startPool([]string{"sh", "-c", script}, configs, rec, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer workers.stop(time.Minute)
	stopped, disarm := workers.ArmStop()
	first := <-stopped
	disarm()
	if first.At != 42 {
		t.Errorf("stopped at %d, want the time the worker gave (42)", first.At)
	}
	other := 1 - first.Process
	if state := procState(t, pidOf(t, workers, first.Process)); state != "T" {
		t.Errorf("worker %d is %s, want it stopped for the fault", first.Process, state)
	}
	for deadline := time.Now().Add(10 * time.Second); procState(t, pidOf(t, workers, other)) == "T"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("worker %d stopped itself with no fault waiting and stayed stopped", other)
		}
	}
	if err := workers.Signal(first.Process, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// pidOf is the pid of a running worker.
func pidOf(t *testing.T, p *pool, process int) int {
	t.Helper()
	w, err := p.find(process)
	if w == nil || err != nil {
		t.Fatalf("worker %d: %v", process, err)
	}
	return w.cmd.Process.Pid
}

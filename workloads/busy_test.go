package workloads

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// Busy work is CPU work, about as much as it was asked for, and it allocates: the
// collector has objects to mark while it goes on.
func TestBusyWorkSpendsCPUAndAllocates(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := cpuTime()
	Busy(100 * time.Millisecond)
	used := cpuTime() - start
	runtime.ReadMemStats(&after)
	// At least what was asked, and at most what one more piece can take.
	if used < 100*time.Millisecond || used > time.Second {
		t.Errorf("100ms of work used %s of CPU", used)
	}
	if objects := after.Mallocs - before.Mallocs; objects < 100_000 {
		t.Errorf("100ms of work allocated %d objects", objects)
	}
	if after.NumGC == before.NumGC {
		t.Error("no collection ran during 100ms of work")
	}
}

// A counter told to work busily spends its work on the CPU; otherwise it sleeps through it.
func TestCounterWorksBusilyOnlyWhenTold(t *testing.T) {
	store, err := storage.Listen("127.0.0.1:0", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cycle := func(busy bool) time.Duration {
		w := Counter{Key: "k", Lock: &fakeLock{}, Work: 100 * time.Millisecond, Busy: busy,
			AcquireTimeout: time.Minute, OpTimeout: time.Minute,
			Storage: func(ctx context.Context) (*storage.Client, error) { return storage.Dial(ctx, store.Addr(), 0) },
			Emit:    func(...history.Event) {}}
		start := cpuTime()
		w.cycle(context.Background())
		return cpuTime() - start
	}
	if used := cycle(false); used > 40*time.Millisecond {
		t.Errorf("a cycle asleep through 100ms of work used %s of CPU", used)
	}
	if used := cycle(true); used < 100*time.Millisecond {
		t.Errorf("a cycle busy through 100ms of work used %s of CPU", used)
	}
}

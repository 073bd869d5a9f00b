package checkers

// A guard on the memory a Stream's judging takes. Operations held are bounded by
// Limits.MaxOps, but porcupine's search of one piece keeps every state it has visited,
// which an illegal piece can make gigabytes within its bound of steps: the guard stops the
// search instead, and the verdicts it leaves undecided are unknown with the reason.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"
)

// guardEvery is how often the guard looks at the heap while a piece is judged.
const guardEvery = 100 * time.Millisecond

// memoryLimit is the cause of a judging context the guard cancelled.
type memoryLimit struct{ limit uint64 }

func (m memoryLimit) Error() string {
	return fmt.Sprintf("memory limit reached: the checkers held more than %d MiB of heap", m.limit>>20)
}

// withinHeap runs judge with a context that is cancelled, with a memoryLimit cause, if the
// process's live heap is over limit when judge begins or while it runs; it returns that
// cause, or nil. A limit of 0 guards nothing.
func withinHeap(ctx context.Context, limit uint64, judge func(context.Context)) *memoryLimit {
	if limit == 0 {
		judge(ctx)
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	if heapOver(limit) {
		cancel(memoryLimit{limit})
	} else {
		go func() {
			tick := time.NewTicker(guardEvery)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					if heapOver(limit) {
						cancel(memoryLimit{limit})
						return
					}
				}
			}
		}()
	}
	judge(ctx)
	var m memoryLimit
	if errors.As(context.Cause(ctx), &m) {
		return &m
	}
	return nil
}

// heapOver says whether the live heap is over limit. Garbage not yet collected does not
// count: past the limit the heap is collected and looked at again.
func heapOver(limit uint64) bool {
	if heapObjects() <= limit {
		return false
	}
	runtime.GC()
	return heapObjects() > limit
}

// heapObjects is the bytes of the heap's objects, live and not yet collected.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

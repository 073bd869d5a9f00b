package workloads

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Busy does d of CPU work, however long the CPU it gets makes that take: a holder's work
// done rather than slept through, for a fault that starves the holder of CPU
// (throttle-holder): a CPU quota bites only a process that wants more than it gets, and a
// holder idle through its work keeps its etcd lease on 1% of a CPU (docs/measurements.md).
// The work is a service's: it allocates, linking small objects into a structure, so its
// garbage collector marks while it works. On a throttled process that is what starves a
// keepalive: the client library's writer allocates as it sends the keepalive, is charged a
// mark assist, and waits for the CPU behind the work (seen in a runtime trace).
//
// It reads the process's CPU clock between pieces of a few milliseconds, since how much CPU
// an object costs swings tenfold with what the collector finds to do, and it reads it
// without telling the Go scheduler (a raw system call): a system call the scheduler knows
// of lets it hand the processor to another goroutine when a throttle lands inside it, and
// read through the scheduler every 1024 objects, it let the keepalive through.
func Busy(d time.Duration) {
	for start := cpuTime(); cpuTime()-start < d; {
		build(piece)
	}
}

// piece is how many objects Busy builds between two readings of the clock: a few
// milliseconds of CPU.
const piece = 1 << 15

// node is one object of the work's structure: pointers only, which the collector traces.
type node struct {
	prev *node
	_    [7]*node // 64 bytes, a small record with a few references
}

// indexSize bounds the structure: a new index begins when one is full and the old one is
// garbage, so the work holds at most about 72 MB however long it lasts.
const indexSize = 1 << 20

// build links n new objects, each to the one before, in indexes of indexSize.
func build(n int) {
	index := make([]*node, 0, min(n, indexSize))
	for range n {
		var prev *node
		if len(index) == cap(index) {
			index = make([]*node, 0, min(n, indexSize))
		} else if len(index) > 0 {
			prev = index[len(index)-1]
		}
		index = append(index, &node{prev: prev})
	}
}

// cpuTime is the CPU this process has used, all its threads together, to the nanosecond
// (CLOCK_PROCESS_CPUTIME_ID), read by a raw system call (see Busy).
func cpuTime() time.Duration {
	var ts unix.Timespec
	if _, _, errno := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_PROCESS_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

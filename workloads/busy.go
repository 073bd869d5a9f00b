package workloads

import (
	"syscall"
	"time"
)

// Busy is a holder's work done as CPU work rather than slept through, for a fault that
// starves the holder of CPU (throttle-holder): a CPU quota bites only a process that wants
// more than it gets, and a holder idle through its work keeps its etcd lease on 1% of a CPU
// (docs/measurements.md). The work is a service's: it allocates, linking small objects into
// a structure, so its garbage collector marks while it works. On a throttled process that is
// what starves a keepalive: the client library's writer allocates as it sends the keepalive,
// is charged a mark assist, and waits for the CPU behind the work (seen in a runtime trace).
//
// Work reads no clock while it works. Reading the process's CPU clock is a system call that
// accounts the CPU used so far, so a throttle lands inside it, and Go's scheduler hands a
// processor stuck in a system call to another goroutine: read every 1024 objects, it let the
// keepalive through. How many objects a duration's work builds is measured instead, in CPU
// time, when Busy is made and after each work.
type Busy struct {
	// perSecond is how many objects a second of CPU builds, their collection included.
	perSecond float64
}

// NewBusy measures how fast this process builds (a few milliseconds of CPU).
func NewBusy() *Busy {
	const n = 1 << 16
	start := cpuTime()
	build(n)
	return &Busy{perSecond: n / max(cpuTime()-start, time.Microsecond).Seconds()}
}

// Work does about d of CPU work, however long the CPU it gets makes that take.
func (b *Busy) Work(d time.Duration) {
	n := int(b.perSecond * d.Seconds())
	start := cpuTime()
	build(n)
	if took := cpuTime() - start; took > 0 {
		b.perSecond = (b.perSecond + float64(n)/took.Seconds()) / 2
	}
}

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

// cpuTime is the CPU this process has used, all its threads together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

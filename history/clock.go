package history

import "golang.org/x/sys/unix"

// Now reads CLOCK_MONOTONIC in nanoseconds. Every process on this kernel (harness,
// workers, storage) reads the same clock, so their event times are comparable; Go's own
// monotonic reading is per process and cannot be compared across processes.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

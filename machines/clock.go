package machines

import (
	"context"
	"fmt"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
)

// Clocks on machines: a server started under libfaketime (StartCluster's clocks) reads its
// wall clock as real time plus the offset in its node's clock file, on every time call, as
// in the node image's containers: glibc's malloc_debug preloaded first (libfaketime
// deadlocks with jemalloc, which Debian's redis-server links), monotonic clocks and the
// timed waits on them left alone (ZooKeeper's sessions, Redis's timers).

// faketimePreload is a shell script that sets $preload to the libraries to preload from
// the machine's own packages (libc6, libfaketime), or fails naming the one it lacks.
const faketimePreload = `preload=
for lib in /usr/lib/*-linux-gnu/libc_malloc_debug.so.0 /usr/lib/*-linux-gnu/faketime/libfaketimeMT.so.1; do
	[ -e "$lib" ] || { echo "$lib is missing (apt-get install libfaketime)" >&2; exit 1; }
	preload="${preload:+$preload:}$lib"
done`

// faketimeEnv is libfaketime's settings besides the preload and the clock file.
const faketimeEnv = "FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0"

// FaketimeLib is what a machine needs for the faults that move clocks: libfaketime's
// library, a path with a glob the preflight expands.
const FaketimeLib = "/usr/lib/*-linux-gnu/faketime/libfaketimeMT.so.1"

// SetClock moves the wall clock of node name's server to real time plus offset: its clock
// file is written anew (a file of this shell's own renamed over it, so that the server
// never reads it half written and two settings at once do not rename each other's away).
func (c *Cluster) SetClock(ctx context.Context, name string, offset time.Duration) error {
	if !c.clocks {
		return fmt.Errorf("set clock of node %s: the servers run without libfaketime", name)
	}
	n, err := c.node(name)
	if err != nil {
		return err
	}
	// libfaketime reads signed seconds ("+500ms" would be 500 minutes).
	file := shellwords.Quote(n.clockFile())
	if _, err := n.m.Sudo(ctx, fmt.Sprintf(`printf '%%s' %+.3f > %s.new.$$ && mv -f %s.new.$$ %s`, offset.Seconds(), file, file, file)); err != nil {
		return fmt.Errorf("set clock of node %s: %w", name, err)
	}
	return nil
}

// ResetClocks puts every server's clock back to real time; nothing when they run without
// libfaketime.
func (c *Cluster) ResetClocks(ctx context.Context) error {
	if !c.clocks {
		return nil
	}
	return c.each(func(_ int, n node) error { return c.SetClock(ctx, n.name, 0) })
}

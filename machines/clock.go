package machines

// Clocks on machines: a server started under libfaketime (StartCluster's clocks, nodes.Clocks) reads its
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

// The system clock's program, its state and the NTP services it stopped live in the node's
// directory, so that the end of the run and Clean (after a run killed with SIGKILL) put the
// clock back and start NTP again from what the machine itself keeps. clockProgram is the
// program as its node's Run names it, under nodeRoot.
const clockProgram = "/lockbreaker/clock"

// systemClockProgram sets the machine's system clock to real time plus $1 seconds (signed,
// fractional), real time being the clock now less the offset it set last, kept beside it.
const systemClockProgram = `#!/bin/sh
# lockbreaker's clock: sets this machine's wall clock to real time plus $1 seconds.
set -eu
dir=$(dirname "$0")
last=$(cat "$dir/clock-offset" 2>/dev/null || echo 0)
now=$(date +%s.%N)
date -s "@$(awk -v now="$now" -v last="$last" -v want="$1" 'BEGIN { printf "%.6f", now - last + want }')" >/dev/null
printf '%s' "$1" > "$dir/clock-offset"
`

// ntpServices are the time services a system clock run stops while it runs.
const ntpServices = "chrony chronyd ntp ntpd ntpsec openntpd systemd-timesyncd"

// takeClock is a shell script that puts the clock program in directory $1 and stops the
// machine's running NTP services, naming each in $1/ntp-stopped.
const takeClock = `: > "$1/ntp-stopped"
if command -v systemctl >/dev/null 2>&1; then
	for s in ` + ntpServices + `; do
		if systemctl is-active --quiet "$s" 2>/dev/null; then systemctl stop "$s" && echo "$s" >> "$1/ntp-stopped"; fi
	done
fi
chmod +x "$1/clock"`

// giveClockBack is a shell script that puts the system clock of directory $1's program
// back to real time and starts the NTP services it stopped again; nothing where there is
// no such program.
const giveClockBack = `if [ -x "$1/clock" ]; then
	"$1/clock" 0 || true
	while read -r s; do systemctl start "$s" || true; done < "$1/ntp-stopped"
	rm -f "$1/clock" "$1/clock-offset" "$1/ntp-stopped"
fi`

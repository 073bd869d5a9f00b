// Package owner tells whether the process that made something on this host (a container,
// a network, a bridge) is still running, so that clean removes only what a dead run left:
// a process is known by its pid and its start time, which a reused pid does not share.
package owner

import (
	"fmt"
	"os"
	"strings"
)

// Start is the start time of process pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat), or "" when there is no such process.
func Start(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// Gone says whether process pid, started at start (Start's), has exited.
func Gone(pid int, start string) bool {
	now := Start(pid)
	return now == "" || now != start
}

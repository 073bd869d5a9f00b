package machines

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The system clock's scripts, run by sh here with date and systemctl played by stubs that
// log what they are asked: the program sets the clock to real time plus its argument, real
// time being the clock less the offset it set last; taking the clock stops the running NTP
// service and names it; giving it back puts the clock at real time, starts that service
// again and removes the program and its state.
func TestSystemClockScripts(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	log := filepath.Join(bin, "log")
	stub := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The clock reads what was set last, from 1000.5 s on.
	stub("date", `now=$(cat "`+bin+`/now" 2>/dev/null || echo 1000.500000000)
case "$1" in
+%s.%N) echo "$now" ;;
-s) echo "date -s $2" >> "`+log+`"; echo "${2#@}" > "`+bin+`/now" ;;
esac
`)
	stub("systemctl", `echo "systemctl $*" >> "`+log+`"
[ "$1" != is-active ] || [ "$3" = chrony ]
`)
	if err := os.WriteFile(filepath.Join(dir, "clock"), []byte(systemClockProgram), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := func(script string, args ...string) {
		t.Helper()
		cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(takeClock, dir)
	sh(`"$1/clock" +5.000000 && "$1/clock" -2.500000`, dir)
	sh(giveClockBack, dir)
	got, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	var wanted []string
	for _, s := range strings.Fields(ntpServices) {
		wanted = append(wanted, "systemctl is-active --quiet "+s)
		if s == "chrony" {
			wanted = append(wanted, "systemctl stop chrony")
		}
	}
	wanted = append(wanted, "date -s @1005.500000", "date -s @998.000000", "date -s @1000.500000", "systemctl start chrony")
	if strings.Join(lines, "\n") != strings.Join(wanted, "\n") {
		t.Errorf("the scripts did:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wanted, "\n"))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("left in the node's directory: %q", left)
	}
}

package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/hunt"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/internal/tier"
	"github.com/lockbreaker/lockbreaker/results"
	runspec "github.com/lockbreaker/lockbreaker/spec"
)

func TestHuntRefusesBadInputInOneLine(t *testing.T) {
	nodocker := []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--budget", "0s"}, "hunt: --budget must be more than 0"},
		{[]string{"--trials", "0"}, "hunt: --trials must be at least 1"},
		{[]string{"--parallel", "0"}, "hunt: --parallel must be between 1 and 8"},
		{[]string{"--parallel", "2", "--nodes-file", "machines.txt"}, "hunt: --parallel runs trials side by side, which one set of machines"},
		{[]string{"--nemesis", "pause-everything"}, "unknown nemesis"},
		{[]string{"--nemesis", "none"}, "hunt: --nemesis names the faults to hunt with"},
		{[]string{"--nemesis", "pause-holder"}, "hunt: nemesis pause-holder draws its own faults, which a hunt cannot steer"},
		{[]string{"--schedule", "pause-client@1s/0/1s"}, "hunt: --schedule is what a hunt writes"},
		{[]string{"--system", "redis", "--nemesis", "delay-extend"}, "needs --extend-every"},
		{[]string{"--for", "stats"}, `no checker "stats" a hunt can look for`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := lockbreaker(t, nodocker, append([]string{"hunt", "--results", out}, c.args...)...)
			if code != 254 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, want 254 with one line holding %q\nstdout %s\nstderr %s", code, c.want, stdout, stderr)
			}
		})
	}
}

func TestHuntStopsAtTheFirstViolationAndKeepsOnlyItsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness's own lock for a few seconds")
	}
	out := t.TempDir()
	code, stdout, stderr := lockbreaker(t, nil, "hunt", "--system", "local-broken", "--nemesis", "pause-client",
		"--time-limit", "2s", "--results", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a violation)\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	dir := onlyRun(t, filepath.Join(out, "hunt-local-broken-local-broken-pause-client-nofence"))
	h, err := hunt.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h.Found != 1 || len(h.Trials) != 1 || len(h.Smallest) != 1 || h.Failing == "" {
		t.Errorf("hunt.json: found in trial %d of %d, smallest %s, failing run %q; want trial 1 of 1, one step, a run",
			h.Found, len(h.Trials), runspec.ScheduleText(h.Smallest), h.Failing)
	}
	if _, err := os.Stat(filepath.Join(dir, h.Failing, results.ReportFile)); err != nil {
		t.Errorf("the failing run is not kept whole: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, hunt.PageName)); err != nil {
		t.Errorf("no page: %v", err)
	}
	again := "run it again: " + h.Command
	if !strings.Contains(stdout, again) || !strings.Contains(h.Command, "--schedule "+runspec.ScheduleText(h.Smallest)) {
		t.Errorf("stdout lacks %q, or its command lacks the smallest schedule\n%s", again, stdout)
	}
	// The command runs as it says: the same schedule, and the lock broken again.
	words, err := shellwords.Split(h.Command)
	if err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := lockbreaker(t, nil, append(words[1:], "--results", t.TempDir())...); code != 1 {
		t.Errorf("%s: exit %d, want 1\nstdout %s\nstderr %s", h.Command, code, stdout, stderr)
	}
}

// Also two trials at once: the third waits for one of them, and none is lost.
func TestHuntThatFindsNothingSaysUnknownAndKeepsNoRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness's own lock for a few seconds")
	}
	out := t.TempDir()
	code, stdout, stderr := lockbreaker(t, nil, "hunt", "--system", "local", "--nemesis", "pause-client",
		"--time-limit", "1s", "--trials", "3", "--parallel", "2", "--random", "--results", out)
	if code != 2 || !strings.Contains(stdout, "no violation in 3 trials") {
		t.Fatalf("exit %d, want 2 and no violation in 3 trials\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	dir := onlyRun(t, filepath.Join(out, "hunt-local-local-pause-client-nofence"))
	h, err := hunt.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Trials) != 3 || h.Feedback || !h.Spent {
		t.Errorf("hunt.json: %d trials, feedback %v, spent %v; want 3, random, spent", len(h.Trials), h.Feedback, h.Spent)
	}
	for i, r := range h.Trials {
		if r.N != i+1 || r.Took == 0 || r.Error != "" {
			t.Errorf("trial %d kept as %+v: want its number, how long it took, no error", i+1, r)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "trials", "*", "2*"))
	if len(runs) != 0 {
		t.Errorf("runs kept %q: a trial with no violation keeps only its line in hunt.json", runs)
	}
}

// onlyRun is the one directory in test's directory, failing t otherwise.
func onlyRun(t *testing.T, test string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(test, "2*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("%s holds %q, want one hunt", test, dirs)
	}
	return dirs[0]
}

// The known bugs a hunt finds with faults not aimed at them (docs/hunting.md): etcd 3.4's
// frozen waiter under pauses of any client, redsync v4.3.0's slow extend under delays of
// any client's traffic and of its extends, at no link in particular; and, with the same
// faults, the versions that fixed them.
var huntedBugs = []struct {
	name        string
	args, fixed []string
	// danger says a trial made the bug's trigger happen, which a fixed version's hunt must
	// have met for its "nothing found" to mean anything.
	danger func(hunt.Score) bool
}{
	{"etcd34", []string{"--system", "etcd", "--client", "exec", "--client-cmd", "../examples/known-bugs/etcdctl_lock.py", "--nemesis", "pause-client"},
		[]string{"--system", "etcd", "--client", "etcd", "--nemesis", "pause-client"},
		waiterLapsed},
	{"redsync430", []string{"--system", "redlock", "--client", "exec", "--client-cmd", "../examples/known-bugs/redsync_lock v4.3.0",
		"--nemesis", "delay,delay-extend", "--ttl", "1s", "--extend-every", "300ms"},
		[]string{"--system", "redlock", "--client", "exec", "--client-cmd", "../examples/known-bugs/redsync_lock v4.4.1",
			"--nemesis", "delay,delay-extend", "--ttl", "1s", "--extend-every", "300ms"},
		// a hunt for the lock's own fault counts granted-in-extend, not a holder's lapse
		func(s hunt.Score) bool { return s.Hazards > 0 }},
}

// waiterLapsed says a waiter was frozen for a lease or more while another client was
// granted the lock: etcd 3.4's trigger (hunt.State, in quarters of the TTL).
func waiterLapsed(s hunt.Score) bool {
	return slices.ContainsFunc(s.States, func(state string) bool {
		for q := 4; q <= 8; q++ {
			if state == hunt.State(history.PauseClient.Name, "waiting", time.Duration(q)*time.Second/4, time.Second, true) {
				return true
			}
		}
		return false
	})
}

// huntTrialCount bounds each hunt of the long tier in trials, not time, so that a busy
// machine runs as many as a quiet one: several times the trials a hunt of a bug took at
// the median (docs/hunting.md).
const huntTrialCount = "40"

// huntTries is how many hunts, each on a fresh seed, a long-tier test gives a known bug.
const huntTries = 3

func TestHuntFindsTheKnownBugsWithFaultsNotAimedAtThem(t *testing.T) {
	tier.Long(t)
	for _, bug := range huntedBugs {
		t.Run(bug.name, func(t *testing.T) {
			for try := 1; try <= huntTries; try++ {
				out := t.TempDir()
				args := append([]string{"hunt", "--trials", huntTrialCount, "--budget", "1h", "--seed", strconv.Itoa(try), "--results", out}, bug.args...)
				code, stdout, stderr := lockbreaker(t, nil, args...)
				if code == 2 {
					t.Logf("try %d: the budget ran out\n%s", try, stdout)
					continue
				}
				if code != 1 {
					t.Fatalf("exit %d, want 1\nstdout %s\nstderr %s", code, stdout, stderr)
				}
				dirs, _ := filepath.Glob(filepath.Join(out, "hunt-*", "2*"))
				h, err := hunt.Read(dirs[0])
				if err != nil {
					t.Fatal(err)
				}
				summary, err := results.ReadSummary(filepath.Join(dirs[0], h.Failing))
				if err != nil {
					t.Fatal(err)
				}
				if summary.Verdict != checkers.Invalid || !strings.Contains(stdout, "what happened first:") {
					t.Errorf("the failing run says %s, and stdout tells no story\n%s", summary.Verdict, stdout)
				}
				t.Logf("danger: %s came on try %d of %d (seed %d): trial %d of the hunt", t.Name(), try, huntTries, try, h.Found)
				return
			}
			t.Logf("danger: %s never came", t.Name())
			t.Errorf("%d hunts found no violation", huntTries)
		})
	}
}

// A fixed version, hunted with the faults that find its bug in the version before, on as
// many trials: no lease-safety violation, and no run kept.
func TestHuntFindsNothingInTheFixedVersions(t *testing.T) {
	tier.Long(t)
	for _, bug := range huntedBugs {
		t.Run(bug.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"hunt", "--trials", huntTrialCount, "--budget", "1h", "--results", out}, bug.fixed...)
			code, stdout, stderr := lockbreaker(t, nil, args...)
			if code != 2 || !strings.Contains(stdout, "no violation in "+huntTrialCount+" trials") {
				t.Fatalf("exit %d, want 2 after %s trials\nstdout %s\nstderr %s", code, huntTrialCount, stdout, stderr)
			}
			if runs, _ := filepath.Glob(filepath.Join(out, "hunt-*", "2*", "trials", "*", "2*")); len(runs) != 0 {
				t.Errorf("runs kept %q", runs)
			}
			dirs, _ := filepath.Glob(filepath.Join(out, "hunt-*", "2*"))
			if len(dirs) != 1 {
				t.Fatalf("%s holds hunts %q, want one", out, dirs)
			}
			h, err := hunt.Read(dirs[0])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(h.Trials, func(r hunt.Record) bool { return bug.danger(r.Score) }) {
				t.Errorf("no trial of %d made the bug's trigger happen: nothing found proves nothing", len(h.Trials))
			}
		})
	}
}

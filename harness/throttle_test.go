package harness

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cpucap"
	"github.com/lockbreaker/lockbreaker/history"
)

// throttle-holder on etcd (issue 37), unfenced: the holder throttled to 1% of a CPU right
// after its read runs on, late (a starved process, not a stopped one: it completes requests
// while throttled), and gets its CPU back; no cgroup of the run's is left. Where another
// client was granted the lock meanwhile (granted-in-throttle), two clients held it at once;
// where none was, the run claims no pass. Measured here at the defaults (TTL 2 s): etcd's
// keepalive gets through on 1% of a CPU, so the hazard did not come (docs/faults.md).
func TestEtcdThrottledHolder(t *testing.T) {
	if _, err := cpucap.Find(cpucap.Root); err != nil {
		t.Skip(err)
	}
	inLane(t, laneEtcd)
	tr := runTrialEvents(t, shortSpec("etcd", "etcd", history.ThrottleHolder.Name, false, 7*time.Second))
	faults := history.Faults(tr.events)
	ran := 0
	for _, f := range faults {
		victim, ok := history.ClientTarget(f.Targets[0])
		if f.Description != history.ThrottleHolder.Name || !ok || !f.Healed {
			t.Fatalf("fault %+v: want throttle-holder on a client, healed", f)
		}
		for _, e := range tr.events {
			if e.Process == victim && e.Type == history.OK && f.Start < e.Time && e.Time < f.Stop {
				ran++
				break
			}
		}
	}
	if len(faults) == 0 || ran == 0 {
		t.Fatalf("%d throttles, in %d of which the victim completed a request: want a throttled holder that ran", len(faults), ran)
	}
	if left, _ := filepath.Glob(filepath.Join(cpucap.Root, "*", cpucap.Prefix+tr.summary.RunID+"-*")); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	n := hazardCount(tr.summary, history.GrantedInThrottle)
	t.Logf("%d throttles, the victim ran in %d; %s", len(faults), ran, history.GrantedInThrottle.Count(n))
	if n > 0 {
		expect(t, tr.summary, map[string]checkers.Verdict{"mutual-exclusion": checkers.Invalid})
	} else {
		expect(t, tr.summary, map[string]checkers.Verdict{"stats": checkers.Unknown})
	}
}

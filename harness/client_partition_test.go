package harness

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/tier"
)

// Partitions that reach single lock clients: each client has its own address on the
// cluster network (package clientnet), which needs root. The run's progress, in the test
// log, says how long the clients took to start on their addresses.

func needClientAddrs(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	if err := clientnet.Supported(); err != nil {
		t.Skip(err)
	}
	before := clientLinks(t)
	t.Cleanup(func() { expectNoClientLinks(t, before) })
}

// clientLinks are the host-side veths of clients (lbc<pid>) now, by pid.
func clientLinks(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]bool{}
	for _, m := range regexp.MustCompile(`: lbc([0-9]+)@`).FindAllStringSubmatch(string(out), -1) {
		links[m[1]] = true
	}
	return links
}

// expectNoClientLinks fails t when a client's veth made since before outlives its process.
// The kernel removes links in the background, so it waits for them to go; the deadline
// only matters when something is broken. Links of live processes belong to runs beside
// this one.
func expectNoClientLinks(t *testing.T, before map[string]bool) {
	t.Helper()
	var orphans []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		orphans = nil
		for pid := range clientLinks(t) {
			if _, err := os.Stat("/proc/" + pid); err != nil && !before[pid] {
				orphans = append(orphans, "lbc"+pid)
			}
		}
		if len(orphans) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(orphans) > 0 {
		t.Errorf("client links outlived their processes: %v", orphans)
	}
}

// ops pairs a history's operations; the history was written by the harness, so it pairs.
func ops(t *testing.T, events []history.Event) []history.Op {
	t.Helper()
	all, err := history.Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// clientFaults are the faults whose description starts with kind, each with the one
// client it targets.
func clientFaults(t *testing.T, events []history.Event, kind string) (faults []history.Fault, clients []int) {
	t.Helper()
	for _, f := range history.Faults(events) {
		if !strings.HasPrefix(f.Description, kind+" ") {
			continue
		}
		var targeted []int
		for _, target := range f.Targets {
			if p, ok := history.ClientTarget(target); ok {
				targeted = append(targeted, p)
			}
		}
		if len(targeted) != 1 || !f.Healed {
			t.Fatalf("fault %+v: want one client targeted, healed", f)
		}
		faults, clients = append(faults, f), append(clients, targeted[0])
	}
	if len(faults) == 0 {
		t.Fatalf("no %s fault in the history", kind)
	}
	return faults, clients
}

// Kleppmann's example as he wrote it, every client live: client 1 cannot reach D and E
// (n4, n5) while the others can. Client 1 is granted the lock by A, B, C; C's clock
// jumps; client 2 is granted C, D, E while client 1 still holds it.
func TestRedlockKleppmannLiveGivesTwoHoldersNamingTheirNodes(t *testing.T) {
	tier.Long(t) // make test has the clock's two majorities with client 1 paused
	inLane(t, laneRedis)
	needClientAddrs(t)
	s := DefaultSpec()
	s.System, s.Client, s.Nemesis = "redlock", "redlock", []string{"kleppmann-clock"}
	s.TimeLimit, s.Seed = Duration(10*time.Second), 3
	tr := untilDanger(t, s, both(overlapped, func(tr ran) string {
		if !twoMajoritiesNamed(t, tr.events) {
			return "no two holders at once with client 1 on n1,n2,n3 and client 2 on n3,n4,n5"
		}
		return ""
	}))
	expect(t, tr.summary, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid})
}

// twoMajoritiesNamed says whether client 1, cut from D and E, held the lock by A, B and C
// while client 2 was granted it by C, D and E.
func twoMajoritiesNamed(t *testing.T, events []history.Event) bool {
	_, cut := clientFaults(t, events, "partition-client-from")
	found := false
	all := ops(t, events)
	for _, one := range all {
		if one.Func() != history.Acquire || one.Type() != history.OK || !slices.Contains(cut, one.Process()) {
			continue
		}
		// Client 1's grant came from A, B and C alone; a grant to another client from C, D
		// and E while client 1 held the lock (until it began to release) is the second holder.
		if one.Complete.Detail["nodes"] != "n1,n2,n3" {
			continue
		}
		held := heldUntil(all, one)
		for _, two := range all {
			if two.Func() != history.Acquire || two.Type() != history.OK || two.Process() == one.Process() {
				continue
			}
			nodes := strings.Split(two.Complete.Detail["nodes"], ",")
			if two.Complete.Time > one.Complete.Time && two.Complete.Time < held &&
				slices.Contains(nodes, "n4") && slices.Contains(nodes, "n5") && slices.Contains(nodes, "n3") {
				t.Logf("client 1 (worker-%d) held %s, client 2 (worker-%d) held %s at once",
					one.Process(), one.Complete.Detail["nodes"], two.Process(), two.Complete.Detail["nodes"])
				found = true
			}
		}
	}
	return found
}

// heldUntil is when the holder granted by acquire began to release, or the end of time.
func heldUntil(all []history.Op, acquire history.Op) int64 {
	for _, op := range all {
		if op.Process() == acquire.Process() && op.Func() == history.Release && op.Invoke.Time > acquire.Complete.Time {
			return op.Invoke.Time
		}
	}
	return 1<<63 - 1
}

// holderCutSpec is ZooKeeper whose holders work three sessions long: safe while each
// holder's session lives, so a second holder is the partition's doing. Each cut lasts
// until another client holds the lock (a session timeout and a grant, about 2 s) and the
// cut holder's work (3 s): 12 s see two of them.
func holderCutSpec(client string, nemesis string, fencing bool) Spec {
	s := zkSpec([]string{nemesis}, fencing, 12*time.Second)
	s.Client, s.Seed = client, 5
	s.TTL, s.Work, s.Pause = Duration(time.Second), Duration(3*time.Second), 0
	return s
}

// A holder partitioned from the ensemble, and from it alone, beyond its session timeout:
// its session expires, the lock moves to a client that was never cut, and the cut holder
// goes on to write. Without fencing the storage is corrupted; with it, it stays safe.
func TestZooKeeperHolderPartitionedFromTheEnsemble(t *testing.T) {
	inLane(t, laneZooKeeper1s)
	needClientAddrs(t)
	t.Run("unfenced", func(t *testing.T) {
		s := untilDanger(t, holderCutSpec("zookeeper", "partition-holder", false), overlapped).summary
		expect(t, s, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid, "data-safety": checkers.Invalid})
	})
	t.Run("fenced", func(t *testing.T) {
		tier.Long(t) // make test has fencing under a cut on PostgreSQL
		expectLockBrokenDataSafe(t, untilDanger(t, holderCutSpec("zookeeper", "partition-holder", true), overlapped).summary)
	})
}

// A holder cut from the lock service but not from the storage writes to the storage while
// it is cut: accepted without fencing (corrupting it), rejected as stale with fencing. The
// reverse, a holder cut from the storage only, cannot write at all and breaks no data.
func TestHolderCutFromTheLockServiceStillReachesTheStorage(t *testing.T) {
	tier.Long(t) // make test cuts a holder from ZooKeeper and from PostgreSQL
	inLane(t, laneZooKeeper1s)
	needClientAddrs(t)
	for _, fencing := range []bool{false, true} {
		t.Run(map[bool]string{false: "unfenced", true: "fenced"}[fencing], func(t *testing.T) {
			s := holderCutSpec("zk-recipe-lib", "partition-holder", fencing)
			s.Pause = Duration(4 * time.Second) // the cut outlasts the holder's work
			tr := untilDanger(t, s, overlapped)
			summary, events := tr.summary, tr.events
			want := map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid, "data-safety": checkers.Invalid}
			wantWrite := history.OK
			if fencing {
				want["data-safety"], want["fencing"] = checkers.Valid, checkers.Valid
				wantWrite = history.Fail
			}
			expect(t, summary, want)
			faults, cut := clientFaults(t, events, "partition-holder")
			seen := false
			for _, op := range ops(t, events) {
				for i, f := range faults {
					if op.Process() == cut[i] && op.Func() == history.Write && op.Complete != nil &&
						op.Invoke.Time > f.Start && op.Complete.Time < f.Stop && op.Type() == wantWrite {
						seen = true
					}
				}
			}
			if !seen {
				t.Errorf("no write of a cut holder reached the storage (%s) while it was cut off the nodes", wantWrite)
			}
		})
	}
	// Kept in its critical section until another client holds the lock, the holder cut off
	// the storage is a second holder, but one that cannot touch the data.
	t.Run("cut from the storage only", func(t *testing.T) {
		s := holderCutSpec("zookeeper", "partition-holder-storage", true)
		s.Work, s.Pause = Duration(100*time.Millisecond), Duration(3*time.Second)
		tr := untilDanger(t, s, overlapped)
		summary, events := tr.summary, tr.events
		expect(t, summary, map[checkers.Name]checkers.Verdict{
			"mutual-exclusion": checkers.Invalid, "data-safety": checkers.Valid, "lost-updates": checkers.Valid})
		faults, cut := clientFaults(t, events, "partition-holder-storage")
		all := ops(t, events)
		// The cut is healed once the holder has begun to release, and its stop recorded when
		// the heal is done: the holder's next cycle may meet the storage in between. What the
		// cut must stop is the holder's own critical section, up to that release.
		released := make([]int64, len(faults))
		for i, f := range faults {
			released[i] = f.Stop
			for _, op := range all {
				if op.Process() == cut[i] && op.Func() == history.Release && op.Invoke.Time > f.Start && op.Invoke.Time < released[i] {
					released[i] = op.Invoke.Time
				}
			}
		}
		tried := 0
		for _, op := range all {
			for i, f := range faults {
				storage := op.Func() == history.Read || op.Func() == history.Write
				if !storage || op.Process() != cut[i] || op.Invoke.Time < f.Start || op.Invoke.Time > released[i] {
					continue
				}
				tried++
				if op.Type() == history.OK {
					t.Errorf("worker-%d, cut off the storage, had %s answered during %s", cut[i], op.Func(), f.Description)
				}
			}
		}
		if tried == 0 {
			t.Errorf("no cut holder asked the storage anything while it was cut off")
		}
	})
}

// A grudge that cuts one client only, on a live cluster: the acquires that client starts
// during the cut fail, while other clients are granted the lock meanwhile. The fault's stop
// is recorded once the heal is done, so the cut client's last acquire of a cut may be
// granted just after the heal; holders work a second, so no later one fits in that gap
// (and within their lease, so the lock holds). A client cut while it holds the lock keeps
// the others out until its lease ends, a TTL after its grant: each cut lasts two TTLs, so
// the others have a TTL to be granted in. A run whose cuts were cut short by its end, or
// whose others a busy machine kept from a grant, falls short: fresh seeds are tried. In
// every run tried, no cut client may be granted during its cut.
func TestGrudgeCutsOneClientOnly(t *testing.T) {
	inLane(t, laneRedis)
	needClientAddrs(t)
	s := spec("redis", "", []string{"partition-client"}, true, 15*time.Second)
	s.TTL, s.Work, s.Pause, s.Interval, s.Seed = Duration(3*time.Second), Duration(time.Second), Duration(6*time.Second), Duration(time.Second), 2
	untilDanger(t, s, func(tr ran) string {
		whole := 0
		for _, c := range grudgeCuts(t, tr.events) {
			t.Logf("%s: worker-%d started %d acquires, %d failed; the others were granted %d times",
				c.fault.Description, c.client, c.started, c.failed, c.othersGranted)
			if c.grantedWithin {
				t.Errorf("worker-%d, cut off every node, was granted the lock during %s", c.client, c.fault.Description)
			}
			// The run's end may cut the last cut short; every whole cut shows both.
			if c.fault.Stop-c.fault.Start < int64(s.Pause) {
				continue
			}
			whole++
			if c.failed == 0 || c.othersGranted == 0 {
				return fmt.Sprintf("during %s %d acquires of worker-%d failed and the others were granted %d times: want both",
					c.fault.Description, c.failed, c.client, c.othersGranted)
			}
		}
		if whole == 0 {
			return fmt.Sprintf("no cut lasted its whole pause (%s): nothing shows a cut client refused", s.Pause.Std())
		}
		return ""
	})
}

// grudgeCut is what the acquires did during one partition-client cut.
type grudgeCut struct {
	fault           history.Fault
	client          int  // the worker cut
	started, failed int  // its acquires begun during the cut, and those not granted
	grantedWithin   bool // one of them, not its last, was granted
	othersGranted   int  // grants to the other clients that came during the cut
}

// grudgeCuts tells, for each partition-client cut of a history, what the acquires did.
func grudgeCuts(t *testing.T, events []history.Event) []grudgeCut {
	t.Helper()
	faults, cut := clientFaults(t, events, "partition-client")
	all := ops(t, events)
	var cuts []grudgeCut
	for i, f := range faults {
		c := grudgeCut{fault: f, client: cut[i]}
		var mine []history.Op
		for _, op := range all {
			if op.Func() != history.Acquire || op.Complete == nil {
				continue
			}
			switch {
			case op.Process() == c.client:
				if op.Invoke.Time >= f.Start && op.Invoke.Time <= f.Stop {
					mine = append(mine, op)
				}
			// A waiting client's acquire may have started before the cut: its grant counts
			// when it came during the cut.
			case op.Type() == history.OK && op.Complete.Time > f.Start && op.Complete.Time < f.Stop:
				c.othersGranted++
			}
		}
		c.started = len(mine)
		for j, op := range mine {
			if op.Type() != history.OK {
				c.failed++
			} else if j < len(mine)-1 {
				c.grantedWithin = true
			}
		}
		cuts = append(cuts, c)
	}
	return cuts
}

// Split brain under Sentinel, at run's defaults: the primary and a minority of the clients
// apart from the replicas, the Sentinels and the other clients. The Sentinels promote a
// replica while the old primary goes on granting the lock to the clients on its side: two
// primaries at once, and clients on both sides holding the lock at once.
func TestSentinelPartitionedPrimaryKeepsGrantingToItsSide(t *testing.T) {
	inLane(t, laneRedis)
	needClientAddrs(t)
	s := sentinelSpec([]string{"partition-primary"}, 8*time.Second)
	s.TTL, s.Seed = DefaultSpec().TTL, 4
	// The hazard is two primaries' grants held at once; the overlap is seen only when the
	// earlier holder acts after the other side's grant.
	tr := untilDanger(t, s, both(hazard(history.TwoPrimaries), overlapped))
	summary, events := tr.summary, tr.events
	expect(t, summary, map[checkers.Name]checkers.Verdict{"mutual-exclusion": checkers.Invalid})
	twoPrimaries := slices.ContainsFunc(history.RoleChanges(events), func(c history.RoleChange) bool {
		primaries := 0
		for _, role := range c.Roles {
			if role == "primary" {
				primaries++
			}
		}
		return primaries > 1
	})
	if !twoPrimaries {
		t.Fatalf("the roles never showed two primaries at once")
	}
	// A hazard names a holder and a client granted meanwhile, on the two sides of the split.
	for _, h := range history.Hazards(events) {
		holder, _ := history.ClientTarget(h.Targets[0])
		granted, _ := history.ClientTarget(h.Targets[1])
		for _, f := range history.Faults(events) {
			if f.Start <= h.Time && h.Time <= f.Stop && strings.HasPrefix(f.Description, "partition-primary ") &&
				oldPrimarySide(f.Description, holder) == oldPrimarySide(f.Description, granted) {
				t.Errorf("hazard %+v: holder and granted client on one side of %s", h, f.Description)
			}
		}
	}
}

// oldPrimarySide says whether a partition-primary fault put worker p on the old primary's
// side: cut off more than one node (every replica), not the old primary alone.
func oldPrimarySide(fault string, p int) bool {
	rest, ok := strings.CutPrefix(fault, "partition-primary ")
	if !ok {
		return false
	}
	for _, part := range strings.Fields(rest) {
		if from, ok := strings.CutPrefix(part, fmt.Sprintf("worker-%d<-", p)); ok {
			return len(strings.Split(from, ",")) > 1
		}
	}
	return false
}

package hunt

import (
	"context"
	"errors"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
)

const ttl = time.Second

func ev(t time.Duration, p int, f history.Func, typ history.Type) history.Event {
	return history.Event{Time: int64(t), Process: p, Func: f, Type: typ}
}

func fault(t time.Duration, f history.Func, kind, target string) history.Event {
	return history.Event{Time: int64(t), Process: history.NemesisProcess, Type: history.Info, Func: f, Fault: kind, Targets: []string{target}}
}

func TestMeasureSaysHowFarAFaultReachedIntoALease(t *testing.T) {
	pause := history.PauseClient.Name
	for _, c := range []struct {
		name     string
		events   []history.Event
		nearness float64
		states   []string
		hazards  int
	}{
		{"a waiter frozen past its lease while another was granted",
			[]history.Event{
				ev(0, 1, history.Acquire, history.Invoke),
				ev(100*time.Millisecond, 0, history.Acquire, history.Invoke),
				ev(200*time.Millisecond, 0, history.Acquire, history.OK),
				fault(300*time.Millisecond, history.Start, pause, history.TargetOfClient(1)),
				ev(400*time.Millisecond, 0, history.Release, history.Invoke),
				ev(500*time.Millisecond, 2, history.Acquire, history.OK),
				fault(1800*time.Millisecond, history.Stop, pause, history.TargetOfClient(1)),
			}, 0.875, []string{"pause-client waiting 6/4 granted-meanwhile"}, 0}, // 0.375 of its length, granted, another holds
		{"a waiter frozen for half its lease while another was granted, thawed beside its holder",
			[]history.Event{
				ev(0, 1, history.Acquire, history.Invoke),
				ev(100*time.Millisecond, 0, history.Acquire, history.OK),
				fault(200*time.Millisecond, history.Start, pause, history.TargetOfClient(1)),
				ev(300*time.Millisecond, 0, history.Release, history.Invoke),
				ev(400*time.Millisecond, 2, history.Acquire, history.OK),
				fault(700*time.Millisecond, history.Stop, pause, history.TargetOfClient(1)),
			}, 0.625, []string{"pause-client waiting 2/4 granted-meanwhile"}, 0}, // 0.125 of its length, granted, another holds
		{"a holder frozen for half its lease",
			[]history.Event{
				ev(0, 0, history.Acquire, history.Invoke),
				ev(100*time.Millisecond, 0, history.Acquire, history.OK),
				fault(200*time.Millisecond, history.Start, pause, history.TargetOfClient(0)),
				fault(700*time.Millisecond, history.Stop, pause, history.TargetOfClient(0)),
			}, 0.125, []string{"pause-client holding 2/4"}, 0}, // of its length only
		{"an idle client frozen long: not near",
			[]history.Event{
				ev(0, 0, history.Acquire, history.Invoke),
				ev(100*time.Millisecond, 0, history.Acquire, history.OK),
				ev(200*time.Millisecond, 0, history.Release, history.Invoke),
				fault(300*time.Millisecond, history.Start, pause, history.TargetOfClient(0)),
				fault(3300*time.Millisecond, history.Stop, pause, history.TargetOfClient(0)),
			}, 0, []string{"pause-client idle 8/4"}, 0},
		{"a node paused under a held lock, and a hazard",
			[]history.Event{
				ev(0, 0, history.Acquire, history.OK),
				fault(100*time.Millisecond, history.Start, history.PauseNode.Name, "n2"),
				fault(600*time.Millisecond, history.Stop, history.PauseNode.Name, "n2"),
				{Time: int64(700 * time.Millisecond), Process: history.NemesisProcess, Type: history.Info, Func: history.HazardFunc,
					Fault: pause, Hazard: history.GrantedInPause, Targets: []string{history.TargetOfClient(0)}},
			}, 0, []string{"pause-node node-under-holding 2/4"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Measure(c.events, ttl, AnyViolation)
			if got.Nearness != c.nearness || !slices.Equal(got.States, c.states) || got.Hazards != c.hazards {
				t.Errorf("Measure = %+v, want nearness %g, states %q, hazards %d", got, c.nearness, c.states, c.hazards)
			}
		})
	}
}

var space = Space{Faults: []string{"pause-client", "pause-node"}, Takes: map[string]Takes{"pause-client": {State: true, HoldOn: true}}, Span: 10 * time.Second, Targets: 15,
	Shortest: 100 * time.Millisecond, Longest: 3 * time.Second, Lease: ttl, MaxSteps: 3}

func TestSchedulesStayInTheirSpace(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := space.fresh(rng)
	for i := range 5000 {
		switch i % 3 {
		case 0:
			s = space.mutate(s, Score{Nearest: Nth{Fault: s[0].Fault, Met: history.Waiting}}, rng)
		case 1:
			s = space.fresh(rng)
		default:
			s = space.blind(rng)
			for _, st := range s {
				if st.When != "" || st.Until != "" {
					t.Fatalf("blind step %s waits for a state or holds on", st)
				}
			}
		}
		base := spec.Spec{Nemesis: space.Faults, TimeLimit: spec.Duration(space.Span), Schedule: s}
		if len(s) < 1 || len(s) > space.MaxSteps {
			t.Fatalf("schedule %s has %d steps, want 1 to %d", spec.ScheduleText(s), len(s), space.MaxSteps)
		}
		for _, st := range s {
			if st.Target >= space.Targets || st.For.Std() < space.Shortest || st.For.Std() > space.Longest {
				t.Fatalf("step %s out of its space", st)
			}
			if takes := space.Takes[st.Fault]; st.When != "" && !takes.State || st.Until != "" && !takes.HoldOn || !slices.Contains(space.states(), st.When) {
				t.Fatalf("step %s waits for a state or holds on where its fault cannot, or for a state not near", st)
			}
		}
		if err := base.Validate(); err != nil && !strings.Contains(err.Error(), "--clients") {
			t.Fatalf("schedule %s: %v", spec.ScheduleText(s), err)
		}
	}
}

// A mutation that takes the nearest step past a lease takes every step that came near
// with it: the score's nearest need not be the step the danger needs. (Other changes of the
// same mutation may change either again, so this holds of most such children, not all.)
func TestTakingTheNearestPastALeaseTakesEveryNearStep(t *testing.T) {
	parent := []spec.Step{
		{Fault: "pause-client", At: spec.Duration(time.Second), Target: 1, For: spec.Duration(100 * time.Millisecond)},
		{Fault: "pause-node", At: spec.Duration(3 * time.Second), Target: 2, For: spec.Duration(100 * time.Millisecond)},
		{Fault: "pause-client", At: spec.Duration(5 * time.Second), Target: 3, For: spec.Duration(100 * time.Millisecond)},
	}
	nearest, other := Nth{Fault: "pause-client", N: 1, Met: history.Waiting}, Nth{Fault: "pause-client", N: 0, Met: history.Extending}
	score := Score{Nearest: nearest, Near: []Nth{other, nearest}}
	past := func(st spec.Step) bool { return st.For.Std() >= ttl && st.For.Std() <= 2*ttl }
	rng := rand.New(rand.NewSource(1))
	var nearestPast, bothPast, thirdPast int
	for range 2000 {
		child := space.mutate(parent, score, rng)
		if len(child) != len(parent) || !past(child[2]) {
			continue
		}
		nearestPast++
		if past(child[0]) {
			bothPast++
		}
		if past(child[1]) {
			thirdPast++
		}
	}
	if nearestPast < 100 || bothPast < nearestPast*8/10 || thirdPast > nearestPast/10 {
		t.Errorf("of %d children whose nearest step went past a lease, the other near step did in %d, the step not near in %d: want most, few",
			nearestPast, bothPast, thirdPast)
	}
}

// deepen takes each step that came near and fell short of a lease past one, and nothing else.
func TestDeepenTakesTheNearStepsPastALease(t *testing.T) {
	parent := []spec.Step{
		{Fault: "pause-client", At: spec.Duration(time.Second), Target: 1, For: spec.Duration(100 * time.Millisecond)},
		{Fault: "pause-node", At: spec.Duration(3 * time.Second), Target: 2, For: spec.Duration(100 * time.Millisecond)},
		{Fault: "pause-client", At: spec.Duration(5 * time.Second), Target: 3, For: spec.Duration(3 * ttl / 2)},
	}
	score := Score{Nearest: Nth{Fault: "pause-client", N: 1}, Near: []Nth{{Fault: "pause-client"}, {Fault: "pause-client", N: 1}}}
	rng := rand.New(rand.NewSource(1))
	for range 100 {
		child := space.deepen(parent, score, rng)
		if d := child[0].For.Std(); d < ttl || d > 2*ttl {
			t.Fatalf("a near step of %s made %s long, want one to two leases", parent[0].For.Std(), d)
		}
		if !slices.Equal(child[1:], parent[1:]) {
			t.Fatalf("deepen changed a step not near or already past a lease: %s from %s", spec.ScheduleText(child), spec.ScheduleText(parent))
		}
	}
}

// With feedback, the trial after one that came near, short of a lease, is that trial with
// its near steps taken past a lease.
func TestATrialThatCameNearIsFirstTakenPastALease(t *testing.T) {
	base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
	checked := 0
	for seed := range int64(40) {
		res, err := Search(context.Background(), base, space, func(ctx context.Context, s spec.Spec) (Outcome, error) { return toyNear(s), nil },
			Options{Feedback: true, Budget: time.Hour, Trials: 2, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		first, second := res.Trials[0], res.Trials[1]
		short := map[int]bool{}
		for _, nth := range first.Score.Near {
			if i, ok := stepOf(first.Schedule, nth); ok && first.Schedule[i].For.Std() < ttl {
				short[i] = true
			}
		}
		if len(short) == 0 {
			continue
		}
		checked++
		if second.Parent != 1 || len(second.Schedule) != len(first.Schedule) {
			t.Fatalf("seed %d: trial 2 is %s from %d, want trial 1's %s deepened", seed, spec.ScheduleText(second.Schedule), second.Parent, spec.ScheduleText(first.Schedule))
		}
		for i, st := range second.Schedule {
			was := first.Schedule[i]
			if short[i] && (st.For.Std() < ttl || st.For.Std() > 2*ttl) || !short[i] && st.For != was.For {
				t.Errorf("seed %d: step %s became %s", seed, was, st)
			}
			st.For, was.For = 0, 0
			if st != was {
				t.Errorf("seed %d: step %s became %s: only a length may change", seed, was, st)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no first trial came near short of a lease")
	}
}

// A hunt whose every trial comes as near as the score can say by one kind of fault, with
// no violation, stops trusting that kind: it draws schedules afresh instead of mutating
// them, but for the first child of each, which takes it past a lease (deepen). Without
// the distrust, a fifth are drawn afresh.
func TestAKindThatCameAsNearAsCanBeInVainIsDrawnAwayFrom(t *testing.T) {
	asNear := func(ctx context.Context, s spec.Spec) (Outcome, error) {
		// worker-0 waits, is paused two leases, worker-1 is granted meanwhile and holds on
		return Outcome{Events: []history.Event{
			ev(0, 0, history.Acquire, history.Invoke),
			fault(100*time.Millisecond, history.Start, "pause-client", history.TargetOfClient(0)),
			ev(200*time.Millisecond, 1, history.Acquire, history.Invoke),
			ev(300*time.Millisecond, 1, history.Acquire, history.OK),
			fault(100*time.Millisecond+2*ttl, history.Stop, "pause-client", history.TargetOfClient(0)),
		}}, nil
	}
	base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
	res, err := Search(context.Background(), base, space, asNear, Options{Feedback: true, Budget: time.Hour, Trials: 60, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if first := res.Trials[0].Score; first.Nearness != 1 {
		t.Fatalf("the trials came %g near, want 1", first.Nearness)
	}
	drawn := 0
	for _, rec := range res.Trials[30:] {
		if rec.Parent == 0 {
			drawn++
		}
	}
	if drawn < 15 {
		t.Errorf("%d of the last 30 trials drawn afresh, want half or more: the kind was spent", drawn)
	}
}

// toy is a lock whose bug needs a client frozen for more than 1.2 of its leases while it
// waits: client c waits from 2c s to 2c+1.5 s of each trial (five clients), and is idle
// otherwise; nobody is ever granted the lock. A step that waits for a state begins once a
// client is in it, on one of those; one that holds on until a takeover waits five leases
// more for one, as the nemesis does. Its trials cost nothing, so a search over it is
// measured in trials.
func toy(ctx context.Context, s spec.Spec) (Outcome, error) {
	var out Outcome
	waits := func(c int, at time.Duration) bool {
		w := time.Duration(c) * 2 * time.Second
		return at >= w && at < w+1500*time.Millisecond
	}
	for c := range 5 {
		out.Events = append(out.Events, ev(time.Duration(c)*2*time.Second, c, history.Acquire, history.Invoke),
			ev(time.Duration(c)*2*time.Second+1500*time.Millisecond, c, history.Acquire, history.Fail))
	}
	for _, st := range s.Schedule {
		if st.Fault != history.PauseClient.Name {
			continue
		}
		from, c, ok := toyVictim(st, waits)
		if !ok {
			continue
		}
		length := st.For.Std()
		if st.Until == spec.Takeover {
			length += 5 * ttl
		}
		out.Events = append(out.Events, fault(from, history.Start, st.Fault, history.TargetOfClient(c)),
			fault(from+length, history.Stop, st.Fault, history.TargetOfClient(c)))
		if waits(c, from) && length > 1200*time.Millisecond {
			out.Invalid = []string{"mutual-exclusion"}
		}
	}
	slices.SortStableFunc(out.Events, func(a, b history.Event) int { return int(a.Time - b.Time) })
	return out, nil
}

// toyVictim is when a step of the toy strikes and whom: at its moment its target, or, if
// it waits for a state, the first moment from then on that a client is in it (waiting or
// idle; nobody holds the toy's lock) and its target among those.
func toyVictim(st spec.Step, waits func(c int, at time.Duration) bool) (time.Duration, int, bool) {
	for at := st.At.Std(); at < 10*time.Second; at += time.Millisecond {
		var in []int
		for c := range 5 {
			if w := waits(c, at); st.When == "" || w && st.When == history.Waiting || !w && st.When == history.Idle {
				in = append(in, c)
			}
		}
		if len(in) > 0 {
			return at, in[st.Target%len(in)], true
		}
		if st.When != history.Waiting {
			return 0, 0, false
		}
	}
	return 0, 0, false
}

func TestFeedbackFindsTheToysBugInFewerTrialsThanChance(t *testing.T) {
	base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
	median := func(feedback bool) int {
		var trials []int
		for seed := range int64(101) {
			res, err := Search(context.Background(), base, space, toy, Options{Feedback: feedback, Budget: time.Hour, Trials: 1000, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			if res.Found == 0 {
				t.Fatalf("seed %d: no violation in 1000 trials", seed)
			}
			trials = append(trials, res.Found)
		}
		slices.Sort(trials)
		return trials[len(trials)/2]
	}
	withFeedback, random := median(true), median(false)
	t.Logf("median trials to the violation: %d with feedback, %d by chance", withFeedback, random)
	if 2*withFeedback > random {
		t.Errorf("feedback took %d trials at the median, chance %d: want at most half", withFeedback, random)
	}
}

func TestSearchNeverRepeatsASchedule(t *testing.T) {
	seen := map[string]bool{}
	none := func(ctx context.Context, s spec.Spec) (Outcome, error) {
		key := spec.ScheduleText(s.Schedule)
		if seen[key] {
			t.Fatalf("schedule %s tried twice", key)
		}
		seen[key] = true
		return toyNear(s), nil
	}
	base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
	res, err := Search(context.Background(), base, space, none, Options{Feedback: true, Budget: time.Hour, Trials: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) != 300 || !res.Spent || res.Found != 0 {
		t.Errorf("%d trials, spent %v, found %d: want 300, spent, none", len(res.Trials), res.Spent, res.Found)
	}
}

// toyNear is the toy's history with no violation, so a search goes on.
func toyNear(s spec.Spec) Outcome {
	out, _ := toy(context.Background(), s)
	out.Invalid = nil
	return out
}

func TestSearchStopsAtItsBudgetAndOnATrialsError(t *testing.T) {
	base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
	res, err := Search(context.Background(), base, space, func(context.Context, spec.Spec) (Outcome, error) { return Outcome{}, nil },
		Options{Budget: -time.Second, Trials: 10})
	if err != nil || len(res.Trials) != 0 || !res.Spent {
		t.Errorf("a budget already spent: %d trials, spent %v, %v; want none, spent", len(res.Trials), res.Spent, err)
	}
	// Trial 2 cannot run while 1 and 3 do: it ends the hunt once they ended, and all three
	// are kept, it with its error. (In a bubble, trials waiting on each other forever are a
	// deadlock the test fails on at once.)
	synctest.Test(t, func(t *testing.T) {
		broken := errors.New("the cluster is gone")
		others := make(chan struct{})
		res, err := Search(context.Background(), base, space, func(_ context.Context, s spec.Spec) (Outcome, error) {
			if s.Seed == 2 {
				close(others)
				return Outcome{}, broken
			}
			<-others
			return toyNear(s), nil
		}, Options{Budget: time.Hour, Trials: 10, Parallel: 3})
		if !errors.Is(err, broken) {
			t.Errorf("a trial's error: %v, want it passed on", err)
		}
		if len(res.Trials) != 3 || res.Trials[1].Error != broken.Error() || res.Trials[0].Error != "" || res.Trials[2].Error != "" {
			t.Errorf("trials kept %+v: want 3, the second with its error", res.Trials)
		}
	})
}

func TestShrinkTakesAwayTheStepsTheViolationDoesNotNeed(t *testing.T) {
	failing := spec.Spec{Schedule: []spec.Step{
		{Fault: "pause-node", At: spec.Duration(time.Second), Target: 0, For: spec.Duration(time.Second)},
		{Fault: "pause-client", At: spec.Duration(2100 * time.Millisecond), Target: 1, For: spec.Duration(2 * time.Second)},
		{Fault: "pause-client", At: spec.Duration(5 * time.Second), Target: 0, For: spec.Duration(time.Second)},
	}}
	got, err := Shrink(context.Background(), failing, toy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := failing.Schedule[1:2]; !slices.Equal(got, want) {
		t.Errorf("shrunk to %s, want %s", spec.ScheduleText(got), spec.ScheduleText(want))
	}
}

// Looking for the lock's own fault, a paused holder and its hazard are no nearer: only a
// fault on a client whose answer is to come is, waiting for the lock or for its extend.
func TestALockFaultIsNearedByWaitersNotHolders(t *testing.T) {
	pause := history.PauseClient.Name
	heldThenWaited := []history.Event{
		ev(0, 0, history.Acquire, history.Invoke),
		ev(100*time.Millisecond, 0, history.Acquire, history.OK),
		fault(200*time.Millisecond, history.Start, pause, history.TargetOfClient(0)),
		fault(1200*time.Millisecond, history.Stop, pause, history.TargetOfClient(0)),
		{Time: int64(1300 * time.Millisecond), Process: history.NemesisProcess, Type: history.Info, Func: history.HazardFunc,
			Fault: pause, Hazard: history.GrantedInPause, Targets: []string{history.TargetOfClient(0)}},
		ev(1400*time.Millisecond, 0, history.Extend, history.Invoke),
		fault(1500*time.Millisecond, history.Start, history.DelayExtend.Name, history.TargetOfClient(0)),
		fault(1900*time.Millisecond, history.Stop, history.DelayExtend.Name, history.TargetOfClient(0)),
		ev(2000*time.Millisecond, 0, history.Extend, history.OK),
	}
	for _, c := range []struct {
		aim      Aim
		hazards  int
		nearness float64
	}{
		{AnyViolation, 1, 0.25}, // the holder's pause of a lease
		{LockFault, 0, 0.1},     // the extend's delay of 400 ms
	} {
		if got := Measure(heldThenWaited, ttl, c.aim); got.Hazards != c.hazards || got.Nearness != c.nearness {
			t.Errorf("aim %d: hazards %d, nearness %g; want %d, %g", c.aim, got.Hazards, got.Nearness, c.hazards, c.nearness)
		}
	}
}

// A fault's victim is taken in the nearest state it was in while struck: a holder whose
// extend began under a delay was extending, which a hunt for the lock's fault comes near.
func TestAHolderWhoseExtendBeganUnderAFaultWasExtending(t *testing.T) {
	delayed := []history.Event{
		ev(0, 0, history.Acquire, history.Invoke),
		ev(100*time.Millisecond, 0, history.Acquire, history.OK),
		fault(200*time.Millisecond, history.Start, history.DelayExtend.Name, history.TargetOfClient(0)),
		ev(300*time.Millisecond, 0, history.Extend, history.Invoke),
		ev(400*time.Millisecond, 1, history.Acquire, history.Invoke),
		ev(1500*time.Millisecond, 1, history.Acquire, history.OK),
		ev(1600*time.Millisecond, 0, history.Extend, history.OK),
		fault(1700*time.Millisecond, history.Stop, history.DelayExtend.Name, history.TargetOfClient(0)),
	}
	got := Measure(delayed, ttl, LockFault)
	if want := (Nth{Fault: history.DelayExtend.Name, Met: history.Extending}); got.Nearest != want || got.Nearness != 0.875 {
		t.Errorf("nearest %+v, nearness %g; want %+v, 0.875 (0.375 of its length, granted, another holds)", got.Nearest, got.Nearness, want)
	}
}

// Trials run up to Parallel at once, never more, and every trial started is scored and kept
// in the order it was started. (In a bubble, so that trials waiting on each other forever
// are a deadlock the test fails on at once, and a trial's second is the bubble's.)
func TestParallelTrialsRunAtOnceAndAreAllKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const parallel, trials = 3, 12
		var mu sync.Mutex
		var once sync.Once
		running, most := 0, 0
		all := make(chan struct{}) // closed once parallel trials ran at once
		trial := func(ctx context.Context, s spec.Spec) (Outcome, error) {
			mu.Lock()
			running++
			most = max(most, running)
			if running == parallel {
				once.Do(func() { close(all) })
			}
			mu.Unlock()
			<-all
			time.Sleep(time.Second)
			mu.Lock()
			running--
			mu.Unlock()
			return toyNear(s), nil
		}
		base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
		res, err := Search(context.Background(), base, space, trial, Options{Feedback: true, Budget: time.Hour, Trials: trials, Parallel: parallel})
		if err != nil {
			t.Fatal(err)
		}
		if most != parallel {
			t.Errorf("at most %d trials ran at once, want %d", most, parallel)
		}
		if len(res.Trials) != trials || !res.Spent {
			t.Fatalf("%d trials, spent %v; want %d, spent", len(res.Trials), res.Spent, trials)
		}
		for i, rec := range res.Trials {
			if rec.N != i+1 || rec.Took != time.Second || rec.At < time.Second || len(rec.Schedule) == 0 {
				t.Errorf("trial %d kept as %+v: want its number, schedule, a second's run and when it ended", i+1, rec)
			}
		}
	})
}

// A violation ends the hunt: no trial starts after it, and those already running are
// awaited and kept.
func TestAViolationStartsNoMoreTrialsButAwaitsThoseRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		firstScored := make(chan struct{})
		progress := writerFunc(func(line string) {
			if strings.HasPrefix(line, "trial 1 (") {
				close(firstScored)
			}
		})
		trial := func(ctx context.Context, s spec.Spec) (Outcome, error) {
			if s.Seed == 1 {
				return Outcome{Invalid: []string{"lease-safety"}}, nil
			}
			<-firstScored
			time.Sleep(time.Second)
			return toyNear(s), nil
		}
		base := spec.Spec{TTL: spec.Duration(ttl), TimeLimit: spec.Duration(10 * time.Second), Clients: 5}
		res, err := Search(context.Background(), base, space, trial, Options{Feedback: true, Budget: time.Hour, Trials: 100, Parallel: 3, Progress: progress})
		if err != nil {
			t.Fatal(err)
		}
		if res.Found != 1 || len(res.Trials) != 3 || res.Spent {
			t.Errorf("found in trial %d, %d trials, spent %v; want trial 1, 3 trials (those running kept), not spent", res.Found, len(res.Trials), res.Spent)
		}
		for _, rec := range res.Trials[1:] {
			if rec.Took != time.Second {
				t.Errorf("trial %d running beside the violation was not kept whole: %+v", rec.N, rec)
			}
		}
	})
}

// writerFunc hands each write, a progress line, to a function.
type writerFunc func(line string)

func (w writerFunc) Write(p []byte) (int, error) {
	w(string(p))
	return len(p), nil
}

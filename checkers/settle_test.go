package checkers

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// settle must lose no legal order: on small random histories, with and without fencing
// tokens, both models give the same answer whether the indeterminate operations return
// where settle puts them or at infinity.
func TestSettleLosesNoLegalOrder(t *testing.T) {
	t.Parallel() // a CPU-bound search: the fast tier runs them side by side
	rng := rand.New(rand.NewSource(1))
	models := []struct {
		name   string
		model  porcupine.Model
		models func(*history.Op, outcome) bool
	}{{"lock-linearizable", strictMutex, isLockOp}, {"data-safety", guardedRegister, isGuardedOp}}
	legal, moved := map[string]int{}, 0
	histories := 10000
	if testing.Short() {
		histories = 2000 // still a thousand legal ones of each model: the fast tier stays fast
	}
	for i := range histories {
		events := randomHistory(rng, i%2 == 0)
		ops, err := history.Pair(events)
		if err != nil {
			t.Fatalf("history %d does not pair: %v", i, err)
		}
		infinity := history.Span(events) + 1
		for _, m := range models {
			var modelled []*history.Op
			for j := range ops {
				if m.models(&ops[j], outcomeOf(&ops[j])) {
					modelled = append(modelled, &ops[j])
				}
			}
			settled := operations(modelled, infinity)
			open := slices.Clone(settled)
			for j := range open {
				if open[j].Output.(*response).outcome == indeterminate {
					open[j].Return = infinity
				}
				if open[j].Return != settled[j].Return {
					moved++
				}
			}
			got, want := porcupine.CheckOperations(m.model, settled), porcupine.CheckOperations(m.model, open)
			if got != want {
				t.Fatalf("history %d, %s: %v settled, %v with every indeterminate operation open:\n%v", i, m.name, got, want, events)
			}
			if got {
				legal[m.name]++
			}
		}
	}
	t.Logf("legal histories: %v; indeterminate operations settle moved: %d", legal, moved)
	if legal["data-safety"] < 200 || legal["lock-linearizable"] < 200 || moved < 200 {
		t.Fatalf("too few legal histories (%v) or settled operations (%d) to show anything", legal, moved)
	}
}

// randomHistory is a few operations of three clients on one key, some timing out. Half
// the time it is run against a simulated lock and storage that obey the data-safety model,
// so that it is legal (and settle must keep it so) even where a timed-out write lands
// long after its client gave up; otherwise its answers are random. With tokens, grants
// carry rising tokens and storage requests carry their grant's.
func randomHistory(rng *rand.Rand, tokens bool) []history.Event {
	type planned struct {
		inv, done history.Event
		effect    int64 // when it takes effect; 0: never
	}
	var plan []planned
	for p := range 3 {
		at := int64(1e9) + int64(rng.Intn(5))
		for range 1 + rng.Intn(8) {
			f := []history.Func{history.Acquire, history.Release, history.Read, history.Read, history.Write, history.Write}[rng.Intn(6)]
			op := planned{inv: history.Event{Type: history.Invoke, Process: p, Func: f, Key: "k", Time: at}}
			if f == history.Write {
				op.inv.Value = history.Int64(int64(rng.Intn(3)))
			}
			end := at + 2 + int64(rng.Intn(6))
			op.done = history.Event{Type: history.OK, Process: p, Func: f, Key: "k", Time: end}
			op.effect = at + 1 + rng.Int63n(end-at-1)
			if rng.Intn(3) == 0 { // timed out: it lands any time later, or never
				op.done.Type = history.Info
				op.effect = []int64{0, op.effect, end + rng.Int63n(30)}[rng.Intn(3)]
			}
			plan = append(plan, op)
			at = end + int64(rng.Intn(3))
		}
	}
	simulated := rng.Intn(2) == 0
	byEffect := make([]int, len(plan))
	for i := range byEffect {
		byEffect[i] = i
	}
	slices.SortStableFunc(byEffect, func(a, b int) int { return cmp.Compare(plan[a].effect, plan[b].effect) })
	// Grants take rising tokens in the order they took effect; a storage request carries
	// the token of its client's last grant before it.
	granted := int64(0)
	for _, i := range byEffect {
		if plan[i].inv.Func == history.Acquire {
			granted += int64(rng.Intn(3))
			plan[i].done.Token = history.Int64(granted)
		}
	}
	token := map[int]int64{}
	for i := range plan {
		op := &plan[i]
		switch {
		case !tokens:
			op.done.Token = nil
		case op.inv.Func == history.Acquire && op.done.Type == history.OK:
			token[op.inv.Process] = *op.done.Token
		case op.inv.Func == history.Acquire:
			op.done.Token = nil
		case op.inv.Func == history.Read || op.inv.Func == history.Write:
			op.inv.Token = history.Int64(token[op.inv.Process])
		}
	}
	state := guarded{holder: nobody}
	lives := map[int]int{}
	for _, i := range byEffect {
		op := &plan[i]
		caller := identity{op.inv.Process, lives[op.inv.Process]}
		if op.done.Type == history.Info {
			lives[caller.process]++
		}
		req := request{f: op.inv.Func, caller: caller, value: valueOf(op.inv.Value)}
		if op.inv.Token != nil {
			req.token, req.tokened = *op.inv.Token, true
		}
		admitted, ok := state.admit(req)
		if !simulated {
			ok = rng.Intn(4) != 0
		}
		switch op.inv.Func {
		case history.Acquire:
			if op.effect != 0 {
				state.holder = caller
			}
		case history.Release:
			if state.holder == caller && op.effect != 0 {
				state.holder = nobody
			} else if op.done.Type == history.OK {
				op.done.Type, op.done.Error = history.Fail, history.ErrNotHeld
			}
		case history.Read, history.Write:
			switch {
			case !ok && op.done.Type == history.OK:
				op.done.Type, op.done.Error = history.Fail, history.ErrStaleToken
			case ok && op.effect != 0:
				read := state.register
				if !simulated {
					read = int64(rng.Intn(3))
				}
				state = admitted
				if op.inv.Func == history.Write {
					state.register = req.value
				} else if op.done.Type == history.OK {
					op.done.Value = history.Int64(read)
				}
			}
		}
	}
	var events []history.Event
	for _, op := range plan {
		events = append(events, op.inv, op.done)
	}
	slices.SortStableFunc(events, func(a, b history.Event) int { return cmp.Compare(a.Time, b.Time) })
	for i := range events {
		events[i].Index = i
	}
	return events
}

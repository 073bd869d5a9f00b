package checkers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
)

// workload shapes a generated history: a correct lock with fencing tokens, used by several
// clients per key that acquire, read, write the read value plus one and release, with now
// and then a busy acquire, an operation that times out (info) and a nemesis fault.
type workload struct {
	ops           int // client operations in all, final reads excluded
	keys          int
	clientsPerKey int
	seed          uint64
}

// generate returns the history, deterministic for a given workload. Each key is simulated
// on its own (its clients touch no other key) and the keys' events are merged by time.
func (w workload) generate() []history.Event {
	const start = int64(1e9)
	var events []history.Event
	end := start
	registers := make([]int64, w.keys)
	for k := range w.keys {
		var keyEvents []history.Event
		keyEvents, registers[k] = w.simulateKey(k, start, w.ops/w.keys)
		end = max(end, keyEvents[len(keyEvents)-1].Time)
		events = append(events, keyEvents...)
	}
	rng := rand.New(rand.NewPCG(w.seed, 0))
	for t := start + 5e6; t+3e6 < end; t += 50e6 + rng.Int64N(50e6) {
		fault := history.Event{Type: history.Info, Process: history.NemesisProcess, Fault: "pause", Targets: []string{"worker0"}}
		fault.Func, fault.Time = history.Start, t
		events = append(events, fault)
		fault.Func, fault.Time = history.Stop, t+1e6+rng.Int64N(2e6)
		events = append(events, fault)
	}
	slices.SortStableFunc(events, func(a, b history.Event) int { return compareInt64(a.Time, b.Time) })
	for k := range w.keys {
		end += 1e6
		key := fmt.Sprintf("key-%d", k)
		events = append(events,
			history.Event{Type: history.Invoke, Process: history.HarnessProcess, Func: history.FinalRead, Key: key, Time: end},
			history.Event{Type: history.OK, Process: history.HarnessProcess, Func: history.FinalRead, Key: key, Time: end + 1e5,
				Value: history.Int64(registers[k])})
	}
	for i := range events {
		events[i].Index = i
	}
	return events
}

// simulateKey plays ops operations of key k's clients, one holder at a time, and returns
// their events and what the storage holds in the end.
func (w workload) simulateKey(k int, t int64, ops int) ([]history.Event, int64) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(k)+1))
	key := fmt.Sprintf("key-%d", k)
	var events []history.Event
	emit := func(typ history.Type, process int, f history.Func, change func(*history.Event)) {
		t += 10e3 + rng.Int64N(200e3) // 10µs to 210µs between events
		e := history.Event{Type: typ, Process: process, Func: f, Key: key, Time: t}
		if change != nil {
			change(&e)
		}
		events = append(events, e)
	}
	withValue := func(v int64) func(*history.Event) { return func(e *history.Event) { e.Value = history.Int64(v) } }
	outcome := func(p float64) history.Type { // ok, or info with probability p
		if rng.Float64() < p {
			return history.Info
		}
		return history.OK
	}
	var register, token int64
	for done := 0; done < ops; {
		holder := k*w.clientsPerKey + rng.IntN(w.clientsPerKey)
		emit(history.Invoke, holder, history.Acquire, nil)
		done++
		if rng.Float64() < 0.02 { // timed out; the lock was not taken
			emit(history.Info, holder, history.Acquire, func(e *history.Event) { e.Message = "timeout" })
			continue
		}
		token++
		fence := func(e *history.Event) { e.Token = history.Int64(token) }
		emit(history.OK, holder, history.Acquire, fence)
		if other := k*w.clientsPerKey + rng.IntN(w.clientsPerKey); other != holder {
			emit(history.Invoke, other, history.Acquire, nil)
			emit(history.Fail, other, history.Acquire, func(e *history.Event) { e.Error = history.ErrLockBusy })
			done++
		}
		emit(history.Invoke, holder, history.Read, fence)
		emit(history.OK, holder, history.Read, withValue(register))
		emit(history.Invoke, holder, history.Write, func(e *history.Event) { fence(e); e.Value = history.Int64(register + 1) })
		typ := outcome(0.03)
		if typ == history.OK || rng.IntN(2) == 0 { // an info write lands half the time
			register++
		}
		emit(typ, holder, history.Write, nil)
		emit(history.Invoke, holder, history.Release, nil)
		emit(outcome(0.02), holder, history.Release, nil) // an info release did free the lock
		done += 3
	}
	return events, register
}

func TestGeneratedHistoryIsValid(t *testing.T) {
	events := workload{ops: 4000, keys: 2, clientsPerKey: 3, seed: 1}.generate()
	for _, r := range Judge(t.Context(), events, Options{FaultsRequested: true, Lease: history.Lease{TTL: time.Second}}) {
		if r.Verdict != Valid && r.Property != PropertyMetric {
			t.Errorf("%s: %s: %s %v", r.Checker, r.Verdict, r.Summary, r.Evidence)
		}
	}
}

// BenchmarkCheckers times every checker on realistic generated histories (histgen: one
// key, 5, 20 or 50 contending clients, pauses of the holder, info operations, effects
// recorded as workers do) of 10k and 100k operations, fencing off and on, with a lease of a
// second for lease-safety. `make bench`
// runs it once per case; figures are printed, never asserted.
func BenchmarkCheckers(b *testing.B) {
	for _, ops := range []int{10_000, 100_000} {
		for _, clients := range []int{5, 20, 50} {
			for _, fencing := range []bool{false, true} {
				events := histgen.Generate(histgen.Config{Ops: ops, Clients: clients, Fencing: fencing, Effects: true, Seed: 1})
				for _, c := range All() {
					b.Run(fmt.Sprintf("ops=%d/clients=%d/fencing=%v/%s", ops, clients, fencing, c.Name()), func(b *testing.B) {
						b.ReportAllocs()
						for b.Loop() {
							if r := c.Check(b.Context(), events, Options{Lease: history.Lease{TTL: time.Second}}); r.Verdict == Unknown {
								b.Fatalf("%s: unknown: %s", c.Name(), r.Summary)
							}
						}
					})
				}
			}
		}
	}
}

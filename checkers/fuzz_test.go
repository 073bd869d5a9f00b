package checkers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/history"
)

// FuzzCheckers: no checker crashes on any history, and none calls a history valid that
// cannot be paired. The input is read two ways, each history checked. As JSON lines: what
// Parse accepts is checked as parsed; the rest is decoded line by line without validation
// (lines that are not JSON are skipped), so histories Parse refuses reach the checkers too,
// as events from elsewhere may. As compact events (see compactEvents), because byte
// mutations of JSON rarely make another history that pairs, and those of compact events do.
// Seeds are in testdata/fuzz/FuzzCheckers; `make fuzz` runs it.
func FuzzCheckers(f *testing.F) {
	// A search needing more model steps than this is left unknown, which keeps the fuzzer
	// quick: under a second here (see DefaultSteps), as its time limit was before.
	const fuzzSteps = 300_000
	f.Fuzz(func(t *testing.T, data []byte) {
		events := looseEvents(data)
		if file, err := history.Parse(bytes.NewReader(data)); err == nil {
			events = file.Events
		}
		for _, events := range [][]history.Event{events, compactEvents(data)} {
			_, unpairable := history.Pair(events)
			for _, r := range RunAll(t.Context(), All(), events, Options{MaxSteps: fuzzSteps}) {
				if strings.HasPrefix(r.Summary, "checker crashed") {
					t.Errorf("%s: %s", r.Checker, r.Summary)
				}
				if unpairable != nil && r.Verdict == Valid {
					t.Errorf("%s: valid (%s) on a history that does not pair: %v", r.Checker, r.Summary, unpairable)
				}
			}
		}
	})
}

// compactEvents reads every 5 bytes as one step in a small world: six clients, the
// harness (final reads) and the nemesis, two keys, small values and tokens. A process with
// no open operation invokes one and a process with one completes it, so most inputs pair and reach
// the checkers' logic; a step whose first byte has its top bit set is taken as it is
// instead (any type and f, a time up to 255 ns back), which may break the pairing.
// Only the first maxSteps count: porcupine's search grows fast with a history's length,
// and short histories keep the fuzzer quick.
func compactEvents(data []byte) []history.Event {
	const maxSteps = 64
	types := []history.Type{history.Invoke, history.OK, history.Fail, history.Info}
	funcs := []history.Func{history.Acquire, history.Release, history.Read, history.Write,
		history.Acquire, history.Release, history.FinalRead, history.Start, history.Stop}
	errs := []history.ErrorKind{"", history.ErrStaleToken, history.ErrNotHeld, history.ErrLockBusy}
	var events []history.Event
	open := map[int]history.Event{} // process -> its open invocation
	t := int64(1e9)
	for b := range slices.Chunk(data, 5) {
		if len(b) < 5 || len(events) == maxSteps {
			break
		}
		e := history.Event{
			Index:   len(events),
			Type:    types[b[0]&3],
			Func:    funcs[int(b[0]>>2&0x1f)%len(funcs)],
			Process: int(b[1]&7) - 2, // the harness, the nemesis and six clients
			Key:     []string{"a", "b"}[b[1]>>3&1],
			Error:   errs[b[1]>>4&3],
			Time:    t - int64(b[4]),
		}
		if b[2]&0x80 != 0 {
			e.Value = history.Int64(int64(b[2] & 0x7f))
		}
		if b[3]&0x80 != 0 {
			e.Token = history.Int64(int64(b[3] & 0x7f))
		}
		if b[0]&0x80 == 0 {
			t += int64(b[4])
			e.Time = t
			switch inv, busy := open[e.Process]; {
			case e.Process == history.NemesisProcess:
				e.Type, e.Func = history.Info, []history.Func{history.Start, history.Stop}[b[0]>>2&1]
				e.Fault, e.Targets = "pause", []string{fmt.Sprintf("worker-%d", b[2]&3)}
			case busy:
				e.Type, e.Func, e.Key = types[1+int(b[0]&3)%3], inv.Func, inv.Key
				delete(open, e.Process)
			default:
				e.Type, e.Func = history.Invoke, funcs[int(b[0]>>2&0x1f)%5]
				if e.Process == history.HarnessProcess {
					e.Func = history.FinalRead
				}
				open[e.Process] = e
			}
		}
		events = append(events, e)
	}
	return events
}

// looseEvents decodes every line that is a JSON event, checking nothing else.
func looseEvents(data []byte) []history.Event {
	var events []history.Event
	for line := range bytes.Lines(data) {
		var e history.Event
		if json.Unmarshal(line, &e) == nil {
			events = append(events, e)
		}
	}
	return events
}

package history

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

func TestRecorderWritesWhatParseReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	rec, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan Event, 8)
	rec.Subscribe(ch)
	rec.Record(Event{Type: Invoke, Process: 0, Func: Acquire, Key: "k", Time: 10})
	rec.Record(Event{Type: OK, Process: 0, Func: Acquire, Key: "k", Token: Int64(3), WatchEvents: Int(1), Time: 20})
	// The file is complete before Close: a crash after Record loses nothing.
	onDisk, err := ReadFile(path)
	if err != nil || len(onDisk.Events) != 2 || onDisk.Events[1].Index != 1 || *onDisk.Events[1].Token != 3 || *onDisk.Events[1].WatchEvents != 1 {
		t.Fatalf("before close: %v %+v", err, onDisk)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(ch); got != 2 {
		t.Errorf("subscriber saw %d events, want 2", got)
	}
	if _, err := Create(path); err == nil {
		t.Error("Create overwrote an existing history")
	}
}

// A recorder keeps counts, not events: what a progress line shows.
func TestRecorderTallies(t *testing.T) {
	rec, err := Create(filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	for _, e := range []Event{
		{Type: Invoke, Process: 0, Func: Acquire, Time: 10},
		{Type: Info, Process: NemesisProcess, Func: Start, Fault: "pause", Time: 11},
		{Type: OK, Process: 0, Func: Acquire, Time: 20},
		{Type: Invoke, Process: 1, Func: Acquire, Time: 21},
		{Type: Fail, Process: 1, Func: Acquire, Time: 22},
		{Type: Info, Process: NemesisProcess, Func: Stop, Fault: "pause", Time: 23},
		{Type: Invoke, Process: 0, Func: Write, Value: Int64(1), Time: 30},
		{Type: Info, Process: 0, Func: Write, Value: Int64(1), Time: 40},
	} {
		rec.Record(e)
	}
	want := Tally{Events: 8, OK: 1, Fail: 1, Info: 1, Faults: 1}
	if got := rec.Tally(); got != want {
		t.Errorf("tally %+v, want %+v", got, want)
	}
}

// ev is one history line.
func ev(index int, typ Type, process int, f Func, time int64) string {
	return fmt.Sprintf(`{"index":%d,"type":%q,"process":%d,"f":%q,"time":%d}`, index, typ, process, f, time)
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestParseNamesTheCorruptLine(t *testing.T) {
	acquire := ev(0, Invoke, 0, Acquire, 10)
	cases := []struct {
		name string
		text string
		line int
		want string
	}{
		{"not json", lines(acquire, "", "{oops"), 3, "not a JSON event"},
		{"torn line in the middle", lines(acquire, `{"type":"ok","proc`, ev(1, OK, 0, Acquire, 20)), 2, "not a JSON event"},
		{"unknown type", lines(`{"type":"maybe","process":0,"f":"read","time":1}`), 1, `unknown event type "maybe"`},
		{"no function", lines("", `{"type":"ok","process":0,"time":1}`), 2, "event has no f"},
		{"unknown function", lines("", "", ev(0, Invoke, 0, "steal", 10)), 3, `unknown operation "steal"`},
		{"nemesis function for a client", lines(ev(0, Info, 2, Start, 10)), 1, `unknown operation "start"`},
		{"roles for a client", lines(ev(0, Info, 2, Roles, 10)), 1, `unknown operation "roles"`},
		{"free text as an error kind", lines(`{"index":0,"type":"invoke","process":0,"f":"read","time":1}`, `{"index":1,"type":"info","process":0,"f":"read","time":2,"error":"i/o timeout"}`), 2, `unknown error kind "i/o timeout"`},
		{"client function for the nemesis", lines(ev(0, Info, NemesisProcess, Acquire, 10)), 1, `unknown nemesis operation "acquire"`},
		{"no time", lines(`{"type":"ok","process":0,"f":"read"}`), 1, "event has no time"},
		{"negative time", lines(acquire, "", ev(1, OK, 0, Acquire, -5)), 3, "time -5 out of range"},
		{"time near the int64 limit", lines(ev(0, Invoke, 0, Acquire, 1<<62)), 1, "out of range"},
		{"largest int64 time", lines(ev(0, Invoke, 0, Acquire, math.MaxInt64)), 1, "out of range"},
		{"completion of another f", lines(acquire, "", ev(1, OK, 0, Release, 20)), 3, `f "release" differs from its invocation's "acquire" (line 1)`},
		{"completion without invocation", lines(acquire, "", ev(1, OK, 1, Acquire, 20)), 3, "completion without an invocation (process 1"},
		{"invoked again", lines("", acquire, ev(1, OK, 0, Acquire, 20), ev(2, Invoke, 0, Read, 30), "", ev(3, Invoke, 0, Write, 40)), 6,
			"process 0 invoked write before completing its read (line 4)"},
		{"duplicate index", lines(acquire, "", ev(0, Info, NemesisProcess, Start, 20)), 3, "index 0 already used on line 1"},
		// Indexes off their own line (index i on line i+1) are kept apart from the others.
		{"duplicate of an index off its line", lines("", ev(7, Invoke, 0, Acquire, 10), ev(7, OK, 0, Acquire, 20)), 3, "index 7 already used on line 2"},
		{"index off its line, then on it", lines(ev(2, Invoke, 0, Acquire, 10), ev(1, OK, 0, Acquire, 20), ev(2, Invoke, 0, Read, 30)), 3,
			"index 2 already used on line 1"},
		{"index on its line, then off it", lines(acquire, ev(1, OK, 0, Acquire, 20), "", ev(1, Invoke, 0, Read, 30)), 4,
			"index 1 already used on line 2"},
		// Index 0 is the first event's: only the field's absence says an index is missing.
		{"no index", lines(acquire, `{"type":"ok","process":0,"f":"acquire","time":20}`), 2, "event has no index"},
		{"no index on the first line", lines(`{"type":"invoke","process":0,"f":"acquire","time":10}`), 1, "event has no index"},
		{"a null index", lines(acquire, `{"index":null,"type":"ok","process":0,"f":"acquire","time":20}`), 2, "event has no index"},
		{"no index, read by encoding/json", lines(acquire, `{"type":"ok","process":0,"f":"acquire","time":20,"message":"a\"b"}`), 2, "event has no index"},
		{"completion before invocation", lines(acquire, ev(1, Invoke, 1, Acquire, 12), "", ev(2, Fail, 0, Acquire, 9)), 4,
			"completed at 9, before its invocation at 10 (line 1)"},
		{"hazard event without its hazard", lines(ev(0, Info, NemesisProcess, HazardFunc, 10)), 1, "hazard event names no hazard"},
		{"hazard on a fault's start", lines(`{"index":0,"type":"info","process":-1,"f":"start","hazard":"grant-lost","time":10}`), 1,
			`hazard "grant-lost" on a start event`},
		{"hazard for a client", lines(`{"index":0,"type":"info","process":2,"f":"hazard","hazard":"grant-lost","time":10}`), 1, `unknown operation "hazard"`},
		{"harness completion without invocation", lines(ev(0, OK, HarnessProcess, FinalRead, 9)), 1, "completion without an invocation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.text))
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Line != c.line || !strings.Contains(ce.Reason, c.want) {
				t.Fatalf("got %v, want line %d: %s", err, c.line, c.want)
			}
		})
	}
}

// A line holding a huge value gives an error of one short line: the value's start and its
// length, not the value.
func TestParseQuotesLongValuesShort(t *testing.T) {
	long := strings.Repeat("a", 102400)
	start := `"` + long[:200] + `…" (102400 bytes)`
	acquire := ev(0, Invoke, 0, Acquire, 10)
	cases := []struct {
		name, text, want string
	}{
		{"an error kind", lines(acquire, `{"index":1,"type":"fail","process":0,"f":"acquire","time":20,"error":"`+long+`"}`), "unknown error kind " + start},
		{"a type", lines(`{"index":0,"type":"` + long + `","process":0,"f":"read","time":1}`), "unknown event type " + start},
		{"a client's f", lines(ev(0, Invoke, 0, Func(long), 10)), "unknown operation " + start},
		{"the nemesis's f", lines(ev(0, Info, NemesisProcess, Func(long), 10)), "unknown nemesis operation " + start},
		{"a number", lines(`{"index":0,"type":"invoke","process":0,"f":"read","time":` + strings.Repeat("9", 102400) + `}`),
			`cannot unmarshal number "` + strings.Repeat("9", 200) + `…" (102400 bytes)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 500 {
				t.Fatalf("got %.600v (%d bytes), want at most 500 bytes holding %.300s", err, len(fmt.Sprint(err)), c.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		events int
	}{
		{"empty file", "", 0},
		{"blank lines", "\n\n", 0},
		{"operations left open by a crash", lines(ev(0, Invoke, 0, Acquire, 10), ev(1, Invoke, 1, Acquire, 11)), 2},
		{"nemesis events are not paired", lines(ev(0, Info, NemesisProcess, Start, 10), ev(1, Info, NemesisProcess, Stop, 11), ev(2, Info, NemesisProcess, Stop, 12)), 3},
		{"roles are recorded by the nemesis", lines(`{"index":0,"type":"info","process":-1,"f":"roles","time":10,"targets":["n1"],"detail":{"n1":"down","n2":"primary"}}`), 1},
		{"hazards are recorded by the nemesis", lines(`{"index":0,"type":"info","process":-1,"f":"hazard","fault":"failover","hazard":"grant-lost","time":10,"targets":["worker-2","n1"],"detail":{"grant":"#4"}}`), 1},
		{"completion at its invocation's time", lines(ev(0, Invoke, 0, Read, 10), ev(1, OK, 0, Read, 10)), 2},
		{"complete last line without a newline", lines(ev(0, Invoke, 0, Read, 10)) + ev(1, OK, 0, Read, 11), 2},
		{"CRLF line ends", ev(0, Invoke, 0, Read, 10) + "\r\n", 1},
		{"index 0 read by encoding/json", lines(`{"index":0,"type":"invoke","process":0,"f":"read","time":10,"message":"a\"b"}`), 1},
		{"an index written in another case", lines(`{"Index":0,"type":"invoke","process":0,"f":"read","time":10}`), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file, err := Parse(strings.NewReader(c.text))
			if err != nil || len(file.Events) != c.events || file.Note != "" {
				t.Fatalf("got %d events, note %q, error %v; want %d events", len(file.Events), file.Note, err, c.events)
			}
		})
	}
}

func TestTornLastLineIsDroppedWithANote(t *testing.T) {
	head := lines(ev(0, Invoke, 0, Acquire, 10), "", ev(1, Invoke, 1, Acquire, 11))
	cases := []struct {
		name    string
		text    string
		events  int
		errLine int // 0: no error
	}{
		{"torn completion", head + `{"index":2,"type":"ok","process":0,"f":"acq`, 2, 0},
		{"torn invocation", head + `{"index":2,"ty`, 2, 0},
		{"torn line alone", `{"index":0`, 0, 0},
		{"same corruption with its newline", head + `{"index":2,"type":"ok","process":0,"f":"acq` + "\n", 0, 4},
		{"corrupt line before a blank last line", head + `{"index":2,"ty` + "\n\n", 0, 4},
		{"bad event without a newline", head + ev(2, OK, 5, Acquire, 12), 0, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			file, err := ReadFile(path)
			if c.errLine != 0 {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Line != c.errLine || ce.Path != path {
					t.Fatalf("got %v, want an error on %s:%d", err, path, c.errLine)
				}
				return
			}
			line := strings.Count(c.text, "\n") + 1
			want := fmt.Sprintf("%s:%d: last line cut short by a crash was dropped; the operation it would have completed counts as indeterminate", path, line)
			if err != nil || len(file.Events) != c.events || file.Note != want {
				t.Fatalf("got %d events, note %q, error %v; want %d events, note %q", len(file.Events), file.Note, err, c.events, want)
			}
			ops, err := Pair(file.Events)
			if err != nil || len(ops) > 0 && ops[0].Complete != nil {
				t.Fatalf("the cut operation must stay open: %+v, %v", ops, err)
			}
		})
	}
}

func TestLineTooLongIsCorrupt(t *testing.T) {
	long := `{"index":1,"type":"invoke","process":0,"f":"read","time":2,"error":"` + strings.Repeat("x", maxLine) + `"}`
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte(lines(ev(0, Invoke, 1, Read, 1), "", long)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), path+":3: line longer than 16 MiB") {
		t.Fatalf("got %v, want %s:3: line longer than 16 MiB", err, path)
	}
}

func TestReadFileAddsThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte("{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":1: ") {
		t.Fatalf("got %v, want it to start with %s:1:", err, path)
	}
}

func TestPairMatchesInvocationsWithCompletions(t *testing.T) {
	events := []Event{
		{Index: 0, Type: Invoke, Process: 1, Func: Acquire, Time: 5},
		{Index: 1, Type: Invoke, Process: 0, Func: Acquire, Time: 1},
		{Index: 2, Type: Info, Process: NemesisProcess, Func: Start, Fault: "pause", Targets: []string{"worker-0"}, Time: 2},
		{Index: 3, Type: OK, Process: 0, Func: Acquire, Time: 6},
		{Index: 4, Type: Info, Process: NemesisProcess, Func: Stop, Fault: "pause", Targets: []string{"worker-0"}, Time: 7},
	}
	ops, err := Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Process() != 0 || ops[0].Type() != OK || ops[1].Complete != nil || ops[1].Type() != Info {
		t.Fatalf("ops %+v", ops)
	}
	if start, end := ops[0].Window(); start != 1 || end != 6 {
		t.Fatalf("window of an operation without effect times: [%d, %d], want [1, 6]", start, end)
	}
	if start, end := ops[1].Window(); start != 5 || end != 0 {
		t.Fatalf("window of an open operation: [%d, %d], want [5, 0]", start, end)
	}
	narrowed := Op{Invoke: events[1], Complete: &Event{Type: OK, Time: 6, EffectFrom: 3, EffectTo: 4}}
	if start, end := narrowed.Window(); start != 3 || end != 4 {
		t.Fatalf("narrowed window: [%d, %d], want [3, 4]", start, end)
	}
	faults := Faults(events)
	if len(faults) != 1 || !faults[0].Healed || faults[0].Start != 2 || faults[0].Stop != 7 {
		t.Fatalf("faults %+v", faults)
	}
}

// Pair takes events from anywhere, so it refuses by itself what Parse refuses.
func TestPairRefusesWhatParseRefuses(t *testing.T) {
	read := Event{Index: 4, Type: Invoke, Process: 3, Func: Read, Time: 10}
	with := func(e Event, change func(*Event)) Event {
		change(&e)
		return e
	}
	cases := []struct {
		name   string
		events []Event
		want   string
	}{
		{"completion without an invocation", []Event{with(read, func(e *Event) { e.Type = OK })}, "event #4: completion without an invocation"},
		{"two open operations", []Event{read, with(read, func(e *Event) { e.Index = 5 })}, "event #5: process 3 invoked read before completing its read (event #4)"},
		{"completion of another f", []Event{read, with(read, func(e *Event) { e.Index, e.Type, e.Func = 6, OK, Write })}, `event #6: f "write" differs`},
		{"completion before invocation", []Event{read, with(read, func(e *Event) { e.Index, e.Type, e.Time = 6, OK, 9 })}, "event #6: completed at 9, before its invocation at 10 (event #4)"},
		{"unknown type", []Event{with(read, func(e *Event) { e.Type = "maybe" })}, `event #4: unknown event type "maybe"`},
		{"unknown f", []Event{with(read, func(e *Event) { e.Func = "steal" })}, `event #4: unknown operation "steal"`},
		{"unknown nemesis f", []Event{with(read, func(e *Event) { e.Process, e.Type = NemesisProcess, Info })}, `event #4: unknown nemesis operation "read"`},
		{"time at the int64 limit", []Event{with(read, func(e *Event) { e.Time = math.MaxInt64 })}, "event #4: time 9223372036854775807 out of range"},
		{"no time", []Event{with(read, func(e *Event) { e.Time = 0 })}, "event #4: event has no time"},
		{"effect on an invocation", []Event{with(read, func(e *Event) { e.EffectFrom = 10 })}, "event #4: effect_from and effect_to belong on a completion"},
		{"effect before the invocation", []Event{read, with(read, func(e *Event) { e.Index, e.Type, e.Time, e.EffectFrom = 6, OK, 20, 9 })}, "event #6: effect_from 9 outside the operation [10, 20]"},
		{"effect after the completion", []Event{read, with(read, func(e *Event) { e.Index, e.Type, e.Time, e.EffectTo = 6, OK, 20, 21 })}, "event #6: effect_to 21 outside"},
		{"effect ending before it starts", []Event{read, with(read, func(e *Event) { e.Index, e.Type, e.Time, e.EffectFrom, e.EffectTo = 6, OK, 20, 15, 12 })}, "event #6: effect_to 12 outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if ops, err := Pair(c.events); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %+v; want an error containing %q", err, ops, c.want)
			}
		})
	}
}

func TestUnhealedFaultLastsToTheEnd(t *testing.T) {
	faults := Faults([]Event{
		{Type: Info, Process: NemesisProcess, Func: Start, Fault: "pause", Time: 3},
		{Type: Invoke, Process: 0, Func: Read, Time: 9},
	})
	if len(faults) != 1 || faults[0].Healed || faults[0].Stop != 9 {
		t.Fatalf("faults %+v", faults)
	}
}

func TestNowIsMonotonic(t *testing.T) {
	a, b := Now(), Now()
	if a <= 0 || b < a {
		t.Fatalf("Now went %d then %d", a, b)
	}
}

func TestHazardsAreListedAndCounted(t *testing.T) {
	text := lines(
		ev(0, Info, NemesisProcess, Start, 10),
		`{"index":1,"type":"info","process":-1,"f":"hazard","fault":"pause-holder","hazard":"granted-in-pause","time":20,"targets":["worker-1","worker-2"]}`,
		ev(2, Info, NemesisProcess, Stop, 30),
		`{"index":3,"type":"info","process":-1,"f":"hazard","fault":"pause-holder","hazard":"granted-in-pause","time":40}`,
		`{"index":4,"type":"info","process":-1,"f":"hazard","fault":"kill-node","hazard":"crash-under-grant","time":50,"detail":{"node":"n1"}}`)
	file, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	found := Hazards(file.Events)
	if len(found) != 3 || found[0].Hazard != GrantedInPause || found[0].Index != 1 || found[0].Fault != "pause-holder" ||
		len(found[0].Targets) != 2 || found[2].Detail["node"] != "n1" {
		t.Fatalf("Hazards = %+v", found)
	}
	counts := CountHazards(file.Events)
	if counts[GrantedInPause] != 2 || counts[CrashUnderGrant] != 1 || len(counts) != 2 {
		t.Errorf("CountHazards = %v", counts)
	}
	if faults := Faults(file.Events); len(faults) != 1 {
		t.Errorf("hazards were taken for faults: %+v", faults)
	}
}

func TestHazardWords(t *testing.T) {
	cases := []struct{ got, want string }{
		{GrantLost.Count(1), "1 lost grant"},
		{GrantLost.Count(9), "9 lost grants"},
		{Hazard("odd").Count(2), "2 × odd"},
		{GrantedInCut.Absent(), "no other client was granted the lock while a cut-off holder was in its critical section"},
		{Hazard("odd").Absent(), "hazard odd never occurred"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for h := range hazards {
		if !h.Known() || h.Absent() == "" || h.Count(2) == "" {
			t.Errorf("hazard %s lacks words", h)
		}
	}
}

func TestClientTarget(t *testing.T) {
	cases := []struct {
		target  string
		process int
		ok      bool
	}{
		{"worker-3", 3, true},
		{"worker-0", 0, true},
		{"n2", 0, false},
		{"worker-", 0, false},
		{"worker-x", 0, false},
		{"worker3", 0, false},
	}
	for _, c := range cases {
		if p, ok := ClientTarget(c.target); p != c.process || ok != c.ok {
			t.Errorf("ClientTarget(%q) = %d, %v; want %d, %v", c.target, p, ok, c.process, c.ok)
		}
	}
	if known := KnownHazards(); len(known) != len(hazards) || !slices.IsSorted(known) {
		t.Errorf("KnownHazards = %v", known)
	}
}

// A visit that panics, to a caller that recovers, leaves no reader behind: in the bubble,
// a goroutine left blocked fails the test.
func TestScanLetsItsReaderGoWhenVisitPanics(t *testing.T) {
	var ls []string
	for i := range (scanAhead + 2) * scanBatch { // more than the reader may read ahead
		ls = append(ls, ev(i, Invoke, i, Acquire, int64(i+1)))
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte(lines(ls...)), 0o644); err != nil {
		t.Fatal(err)
	}
	bug := errors.New("visit's bug")
	synctest.Test(t, func(t *testing.T) {
		defer func() {
			if p := recover(); p != bug {
				t.Errorf("Scan panicked with %v, want visit's panic", p)
			}
		}()
		Scan(path, func(Event) error {
			synctest.Wait() // the reader has read as far ahead as it may
			panic(bug)
		})
	})
}

// Scan reads in a goroutine of its own, batches ahead of visit: visit still sees every
// event before a bad line, in order, and nothing after a visit that failed.
func TestScanVisitsInOrderUpToWhatStopsIt(t *testing.T) {
	const n = 3*scanBatch + 5
	var ls []string
	for i := range n {
		ls = append(ls, ev(i, Invoke, i, Acquire, int64(i+1)))
	}
	stopped := errors.New("visit stops")
	cases := []struct {
		name    string
		bad     int // the line made corrupt; 0: none
		failAt  int // the event whose visit fails; -1: none
		visited int
		err     string
	}{
		{"whole", 0, -1, n, ""},
		{"bad line in the third batch", 2*scanBatch + 7, -1, 2*scanBatch + 6, fmt.Sprintf(":%d: not a JSON event", 2*scanBatch+7)},
		{"visit fails in the second batch", 0, scanBatch + 3, scanBatch + 4, stopped.Error()},
		{"visit fails before a bad line", 2*scanBatch + 7, scanBatch + 3, scanBatch + 4, stopped.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := slices.Clone(ls)
			if c.bad > 0 {
				text[c.bad-1] = "{oops"
			}
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(lines(text...)), 0o644); err != nil {
				t.Fatal(err)
			}
			visited := 0
			_, err := Scan(path, func(e Event) error {
				if e.Index != visited {
					t.Fatalf("visit %d got event #%d", visited, e.Index)
				}
				visited++
				if e.Index == c.failAt {
					return stopped
				}
				return nil
			})
			if visited != c.visited || c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("visited %d events, error %v; want %d, %q", visited, err, c.visited, c.err)
			}
		})
	}
}

package history

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	rec.Record(Event{Type: OK, Process: 0, Func: Acquire, Key: "k", Token: Int64(3), Time: 20})
	// The file is complete before Close: a crash after Record loses nothing.
	onDisk, err := ReadFile(path)
	if err != nil || len(onDisk) != 2 || onDisk[1].Index != 1 || *onDisk[1].Token != 3 {
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

func TestParseNamesTheCorruptLine(t *testing.T) {
	cases := map[string]struct {
		text string
		line int
		want string
	}{
		"not json":     {`{"type":"invoke","process":0,"f":"read","time":1}` + "\n{oops\n", 2, "not a JSON event"},
		"cut short":    {`{"type":"invoke","process":0,"f":"read","time":1}` + "\n" + `{"type":"ok","proc`, 2, "not a JSON event"},
		"unknown type": {`{"type":"maybe","process":0,"f":"read","time":1}`, 1, `unknown event type "maybe"`},
		"no function":  {`{"type":"ok","process":0,"time":1}`, 1, "event has no f"},
		"no time":      {`{"type":"ok","process":0,"f":"read"}`, 1, "event has no time"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.text))
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Line != c.line || !strings.Contains(ce.Reason, c.want) {
				t.Fatalf("got %v, want line %d: %s", err, c.line, c.want)
			}
		})
	}
}

func TestReadFileAddsThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("{\n"), 0o644)
	_, err := ReadFile(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":1: ") {
		t.Fatalf("got %v, want it to start with %s:1:", err, path)
	}
}

func TestPairMatchesInvocationsWithCompletions(t *testing.T) {
	events := []Event{
		{Index: 0, Type: Invoke, Process: 1, Func: Acquire, Time: 5},
		{Index: 1, Type: Invoke, Process: 0, Func: Acquire, Time: 1},
		{Index: 2, Type: Info, Process: NemesisProcess, Func: Start, Fault: "pause", Nodes: []string{"worker-0"}, Time: 2},
		{Index: 3, Type: OK, Process: 0, Func: Acquire, Time: 6},
		{Index: 4, Type: Info, Process: NemesisProcess, Func: Stop, Fault: "pause", Nodes: []string{"worker-0"}, Time: 7},
	}
	ops, err := Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Process() != 0 || ops[0].Type() != OK || ops[1].Complete != nil || ops[1].Type() != Info {
		t.Fatalf("ops %+v", ops)
	}
	faults := Faults(events)
	if len(faults) != 1 || !faults[0].Healed || faults[0].Start != 2 || faults[0].Stop != 7 {
		t.Fatalf("faults %+v", faults)
	}
	if _, err := Pair([]Event{{Type: OK, Process: 3, Func: Read, Time: 1}}); err == nil {
		t.Error("a completion without an invocation was accepted")
	}
	if _, err := Pair([]Event{{Type: Invoke, Process: 3, Func: Read, Time: 1}, {Index: 1, Type: Invoke, Process: 3, Func: Read, Time: 2}}); err == nil {
		t.Error("a process with two open operations was accepted")
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

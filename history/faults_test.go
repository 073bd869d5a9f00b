package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Every fault kind has the words the story, the report and `help run` say of it, and a
// hazard that has words of its own.
func TestFaultKindsHaveTheirWords(t *testing.T) {
	kinds := FaultKinds()
	if len(kinds) == 0 {
		t.Fatal("no fault kind declared")
	}
	for _, k := range kinds {
		switch {
		case k.Name == "" || strings.ContainsAny(k.Name, " \t\n,"):
			t.Errorf("%+v: a name is one word with no comma (a fault records it before a space)", k)
		case k.Does == "":
			t.Errorf("%s: no words for what it does (Does), which help run shows", k.Name)
		case k.Struck == "":
			t.Errorf("%s: no words for what it does to what it strikes (Struck), which a story tells", k.Name)
		case k.Hazard != "" && !k.Hazard.Known():
			t.Errorf("%s: hazard %s has no words (hazard.go)", k.Name, k.Hazard)
		case k.Part && k.Hazard != "":
			t.Errorf("%s: a part of another kind's faults targets no hazard of its own", k.Name)
		case k.Telling != nil && k.Telling.Scene != nil && k.Hazard == "":
			t.Errorf("%s: a scene is set by the kind's hazard, and it targets none", k.Name)
		case k.Telling != nil && k.Telling.Later != (k.Telling.Granted != ""):
			t.Errorf("%s: a scene about the later holder says why its grant was wrong (Granted), and only such a scene", k.Name)
		}
	}
}

// KindOf reads a fault's kind back from what an event records: the name alone, or the
// name and what that one fault was.
func TestKindOfReadsWhatAFaultRecords(t *testing.T) {
	for _, tt := range []struct {
		fault string
		want  FaultKind
		ok    bool
	}{
		{Delay.With(""), Delay, true},
		{"delay", Delay, true},
		{PartitionHalves.With("n1|n2,n3"), PartitionHalves, true},
		{"clock-bump +2.000s", ClockBump, true},
		{"pause-in-section", PauseInSection, true},
		{"pgbouncer-transaction", FaultKind{}, false},
		{"delay-client", FaultKind{}, false},
		{"", FaultKind{}, false},
	} {
		if got, ok := KindOf(tt.fault); got != tt.want || ok != tt.ok {
			t.Errorf("KindOf(%q) = %s, %v; want %s, %v", tt.fault, got.Name, ok, tt.want.Name, tt.ok)
		}
	}
	if got := PartitionHalves.With("n1|n2"); got != "partition-halves n1|n2" {
		t.Errorf("With: %q", got)
	}
}

// A run's notes are its chosen kinds' (Telling.Notes), each note once: kill-node and
// failover restart nodes alike.
func TestNotesAreTheChosenKinds(t *testing.T) {
	settings := Settings{Pause: 4 * time.Second, RestartAfter: 2 * time.Second, RestartAfterTTL: true}
	for _, tt := range []struct {
		faults []string
		want   []string
	}{
		{[]string{PauseHolder.Name}, nil},
		{[]string{KillNode.Name, Failover.Name}, []string{
			"a killed node stays down for 2s, at least one TTL (antirez's delayed restart: every lease it granted has run out when it is back)"}},
		{[]string{Outage.Name, KillNode.Name}, []string{
			"a killed node stays down for 2s, at least one TTL (antirez's delayed restart: every lease it granted has run out when it is back)",
			"an outage keeps every node down for 4s"}},
	} {
		if got := Notes(tt.faults, settings); !slices.Equal(got, tt.want) {
			t.Errorf("notes of %v: %q, want %q", tt.faults, got, tt.want)
		}
	}
	if got := Notes([]string{KillNode.Name}, Settings{}); !slices.Equal(got, []string{"a killed node is started again at once"}) {
		t.Errorf("notes of a restart at once: %q", got)
	}
}

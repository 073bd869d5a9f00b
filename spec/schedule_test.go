package spec

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

func TestScheduleTextParsesBack(t *testing.T) {
	steps := []Step{{Fault: "pause-client", At: Duration(1200 * time.Millisecond), Target: 3, For: Duration(2500 * time.Millisecond)},
		{Fault: "pause-node", At: Duration(4 * time.Second), Target: 0, For: Duration(time.Millisecond)},
		{Fault: "pause-client", At: Duration(5 * time.Second), Target: 1, For: Duration(time.Second), When: history.Waiting, Until: Takeover},
		{Fault: "delay", At: Duration(6 * time.Second), Target: 2, For: Duration(time.Second), When: history.Extending},
		{Fault: "pause-client", At: Duration(7 * time.Second), Target: 0, For: Duration(time.Second), Until: Takeover}}
	text := ScheduleText(steps)
	if text != "pause-client@1.2s/3/2.5s,pause-node@4s/0/1ms,pause-client@5s/1/1s/waiting/until-takeover,delay@6s/2/1s/extending,pause-client@7s/0/1s/until-takeover" {
		t.Errorf("ScheduleText = %q", text)
	}
	got, err := ParseSchedule(text)
	if err != nil || !slices.Equal(got, steps) {
		t.Errorf("ParseSchedule(%q) = %+v, %v; want %+v", text, got, err, steps)
	}
}

func TestBadSchedulesAreRefusedWithTheStepAndWhy(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"pause-client", "want FAULT@AT/TARGET/FOR"},
		{"pause-client@1s/3", "want FAULT@AT/TARGET/FOR"},
		{"pause-client@soon/3/1s", "its moment \"soon\""},
		{"pause-client@1s/third/1s", "its target \"third\" is no number"},
		{"pause-client@1s/3/long", "its length \"long\""},
		{"@1s/3/1s", "want FAULT@AT/TARGET/FOR"},
		{"pause-client@1s/3/1s/asleep", "\"asleep\" is neither a client's state"},
		{"pause-client@1s/3/1s/until-dawn", "it lasts until \"dawn\"; the event it can last until is takeover"},
		{"pause-client@1s/3/1s/until-takeover/waiting", "\"waiting\" is neither a client's state"},
		{"pause-client@1s/3/1s/waiting/holding", "\"holding\" is neither a client's state"},
		{"pause-client@1s/3/1s/waiting/until-takeover/idle", "want FAULT@AT/TARGET/FOR"},
	} {
		if _, err := ParseSchedule(c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSchedule(%q) = %v, want an error saying %q", c.text, err, c.want)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"pause-node@1s/0/1s", "step 1 is a fault of \"pause-node\", which --nemesis does not name"},
		{"pause-client@31s/0/1s", "step 1 begins at 31s, outside the run"},
		{"pause-client@2s/0/1s,pause-client@1s/0/1s", "step 2 begins before the step before it"},
		{"pause-client@1s/-1/1s", "step 1 has target -1"},
		{"pause-client@1s/0/0s", "step 1 lasts 0s"},
	} {
		s := Default()
		s.Nemesis = []string{"pause-client"}
		steps, err := ParseSchedule(c.text)
		if err != nil {
			t.Fatal(err)
		}
		s.Schedule = steps
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error saying %q", c.text, err, c.want)
		}
	}
}

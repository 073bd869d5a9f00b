package results

import (
	"encoding/xml"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// hazardEvent is a hazard event as a nemesis records it, appended to events at time t.
func hazardEvent(events []history.Event, t int64, h history.Hazard, fault string, detail map[string]string, targets ...string) []history.Event {
	return append(events, history.Event{Index: len(events), Type: history.Info, Process: history.NemesisProcess, Func: history.HazardFunc,
		Time: t, Hazard: h, Fault: fault, Targets: targets, Detail: detail})
}

// withHazards is pauseHistory with two lost grants (one naming client 1, one only nodes,
// its detail hostile) and a lease that expired in a pause, which no nemesis asked for.
func withHazards() []history.Event {
	const s = int64(time.Second)
	events := pauseHistory()
	base := events[0].Time
	events = hazardEvent(events, base+11*s+s/10, history.GrantLost, "failover", map[string]string{"grant": "#4", "primary": "n1"}, "worker-1", "n1")
	events = hazardEvent(events, base+12*s, history.LeaseExpiredInPause, "pause-holder", nil, "worker-0")
	return hazardEvent(events, base+16*s, history.GrantLost, "failover "+hostile, map[string]string{"note": hostile}, "n2")
}

func TestReportShowsHazards(t *testing.T) {
	counted := []HazardCount{{Hazard: history.GrantLost, Count: 2, Nemesis: "failover"}, {Hazard: history.LeaseExpiredInPause, Count: 1}}
	tests := []struct {
		name        string
		hazards     []HazardCount
		events      []history.Event
		marks       int
		contains    []string
		notContains []string
	}{
		{
			name: "occurred", hazards: counted, events: withHazards(), marks: 3,
			contains: []string{
				// A valid safety verdict says what it held through; the counts stand beside the table.
				`<td>every accepted request came from the holder<br><span class="through">through 2 lost grants</span></td>`,
				`<td>3 stale requests rejected<br><span class="through">through 2 lost grants</span></td>`,
				`<li><b>2 lost grants</b> <span class="muted">(grant-lost)</span> <span class="muted">· what failover exists to create</span></li>`,
				`<li><b>1 lease expired in a pause</b> <span class="muted">(lease-expired-in-pause)</span> <span class="muted">· seen on the way</span></li>`,
				// The timeline marks each at its time, on the nemesis lane and its clients' lanes, or across every lane.
				`<path class="hazard" d="M11100.000 1V25M11100.000 53V77"><title>1 lost grant (grant-lost) at t=11.1s, seen by failover: worker-1, n1; grant=#4, primary=n1</title></path>`,
				`<path class="hazard" d="M12000.000 1V25M12000.000 27V51"><title>1 lease expired in a pause (lease-expired-in-pause) at t=12s, seen by pause-holder: worker-0</title></path>`,
				`<path class="hazard" d="M16000.000 1V103">`,
				`<i class="hazard"></i>a hazard occurred`,
				// The list of occurrences links each into the timeline.
				`<h2 id="hazards">Hazards</h2>`,
				`<tr><td class="num"><a class="to-timeline" href="#timeline" data-at="11100.000">11.100</a></td><td>grant-lost</td><td>failover</td><td>worker-1, n1</td><td class="mono">grant=#4, primary=n1</td></tr>`,
				`failover &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`, `note=&lt;script&gt;`,
			},
			notContains: []string{`<span class="through">through 2 lost grants and`, `lease expired in a pause</span>`},
		},
		{
			name: "a wanted hazard that never occurred is absent", events: pauseHistory(),
			hazards: []HazardCount{{Hazard: history.GrantLost, Nemesis: "failover"}},
			contains: []string{
				`<li><span class="verdict unknown">absent</span> grant-lost: no replica was promoted while a grant its primary made after the cut was held <span class="muted">· what failover exists to create: without it no verdict of the run is a pass</span></li>`,
				`<h2 id="hazards">Hazards</h2>`, "No hazard occurred.",
			},
			notContains: []string{`class="through"`, `<i class="hazard">`},
		},
		{
			name: "a run without hazards has no word of them", events: pauseHistory(),
			notContains: []string{`id="hazards"`, `class="hazards`, `class="through"`, `<i class="hazard">`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := Summary{Test: "sentinel-failover", Verdict: checkers.Invalid, Results: pauseFencingResults(), Hazards: tt.hazards}
			if err := WriteReport(dir, s, Draw(tt.events)); err != nil {
				t.Fatal(err)
			}
			page := readFile(t, filepath.Join(dir, ReportFile))
			if got := strings.Count(page, `<path class="hazard"`); got != tt.marks {
				t.Errorf("%d hazard marks, want %d", got, tt.marks)
			}
			for _, want := range tt.contains {
				if !strings.Contains(page, want) {
					t.Errorf("report lacks %s", want)
				}
			}
			for _, bad := range append(tt.notContains, "<script>alert") {
				if strings.Contains(page, bad) {
					t.Errorf("report contains %s", bad)
				}
			}
			if t.Failed() {
				t.Log(page)
			}
		})
	}
}

// A long run's timeline draws the hazards of the stretch it draws, and only those; the
// list still names every one (up to maxEvidence), linking only the drawn.
func TestCappedTimelineDrawsItsHazards(t *testing.T) {
	events := kleppmann(4000, 5, true)
	var pauses []int64 // when each paused holder's successor was granted the lock
	for i, e := range events {
		if e.Func == history.Start {
			pauses = append(pauses, events[i+2].Time)
		}
	}
	for _, at := range pauses {
		events = hazardEvent(events, at, history.GrantedInPause, "pause-holder", nil, "worker-1")
	}
	s := judged(events)
	dir := t.TempDir()
	if err := WriteReport(dir, s, Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	marks := strings.Count(page, `<path class="hazard"`)
	if marks == 0 || marks >= len(pauses) {
		t.Errorf("%d hazard marks of %d hazards, want those of the drawn stretch only", marks, len(pauses))
	}
	linked := strings.Count(page, `<a class="to-timeline" href="#timeline" data-at=`)
	if linked == 0 || linked > marks {
		t.Errorf("%d hazards linked into the timeline, %d drawn", linked, marks)
	}
	if want := fmt.Sprintf("and %d more (every one is in history.jsonl, f hazard)", len(pauses)-maxEvidence); !strings.Contains(page, want) {
		t.Errorf("report lacks %s", want)
	}
}

// Hazard events are not faults: the plots shade none for them and read no clock offset
// from their details.
func TestHazardsAreNotFaults(t *testing.T) {
	events := hazardEvent(pauseHistory(), pauseHistory()[3].Time, history.ClockPastLease, "clock-bump", map[string]string{"offset": "+9.000"}, "n1")
	dir := t.TempDir()
	if err := WriteReport(dir, Summary{Test: "t", Results: pauseFencingResults()}, Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	if strings.Contains(page, "<strong>Clock offsets</strong>") || strings.Contains(page, "<td>clock-bump</td><td>n1</td><td class=\"num\">") {
		t.Error("a hazard event was drawn as a fault")
	}
	if got := strings.Count(page, `<rect class="fault lane"`); got != 2 {
		t.Errorf("%d fault bands in the timeline, want the history's 2 faults", got)
	}
}

type junitHazards struct {
	Suites []struct {
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name  string `xml:"name,attr"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Out string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// junit.xml counts the hazards as the testsuite's properties and in each case's output;
// a wanted hazard that never occurred is named in the message of every case it left unknown.
func TestJUnitCarriesHazards(t *testing.T) {
	file, err := history.ReadFile(filepath.Join("..", "checkers", "testdata", "kleppmann-fenced.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	wanted := map[string]history.Hazard{"failover": history.GrantLost}
	unproven := checkers.Judge(t.Context(), file.Events, checkers.Options{FaultsRequested: true, Hazards: wanted})
	absent := history.GrantLost.Absent()
	tests := []struct {
		name       string
		s          Summary
		properties string
		out        map[string]string // case -> its output
		errors     map[string]string // case -> a part of its error's message
	}{
		{
			name: "occurred",
			s: Summary{Test: "t", Results: pauseFencingResults(),
				Hazards: []HazardCount{{Hazard: history.GrantLost, Count: 2, Nemesis: "failover"}, {Hazard: history.LeaseExpiredInPause, Count: 1}}},
			properties: "hazard grant-lost=2 hazard grant-lost nemesis=failover hazard lease-expired-in-pause=1",
			out: map[string]string{
				"data-safety":      "data-safety valid through 2 lost grants\nhazards: 2 lost grants (what failover exists to create), 1 lease expired in a pause",
				"mutual-exclusion": "hazards: 2 lost grants (what failover exists to create), 1 lease expired in a pause",
			},
		},
		{
			name:       "a wanted hazard never occurred",
			s:          Summary{Test: "t", Results: unproven, Hazards: CountHazards(file.Events, wanted)},
			properties: "hazard grant-lost=0 hazard grant-lost nemesis=failover",
			out:        map[string]string{"data-safety": "absent: grant-lost (what failover exists to create): " + absent},
			errors:     map[string]string{"data-safety": "unproven: failover injected 1 fault and " + absent, "stats": absent},
		},
		{name: "none", s: Summary{Test: "t", Results: pauseFencingResults()}, out: map[string]string{"data-safety": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteJUnit(dir, tt.s); err != nil {
				t.Fatal(err)
			}
			raw := readFile(t, filepath.Join(dir, JUnitFile))
			var doc junitHazards
			if err := xml.Unmarshal([]byte(raw), &doc); err != nil || len(doc.Suites) != 1 {
				t.Fatalf("junit.xml: %v\n%s", err, raw)
			}
			var props []string
			for _, p := range doc.Suites[0].Properties {
				props = append(props, p.Name+"="+p.Value)
			}
			if got := strings.Join(props, " "); got != tt.properties {
				t.Errorf("properties %q, want %q", got, tt.properties)
			}
			for _, c := range doc.Suites[0].Cases {
				if want, ok := tt.out[c.Name]; ok && c.Out != want {
					t.Errorf("%s: output %q, want %q", c.Name, c.Out, want)
				}
				if want, ok := tt.errors[c.Name]; ok && (c.Error == nil || !strings.Contains(c.Error.Message, want)) {
					t.Errorf("%s: error %+v, want one saying %q", c.Name, c.Error, want)
				}
			}
			if tt.properties == "" && strings.Contains(raw, "<properties>") {
				t.Errorf("a run without hazards has properties:\n%s", raw)
			}
		})
	}
}

// A fault that struck a lock client is drawn again on that client's lane, as well as
// across the run; one that struck nodes is drawn across the run only.
func TestAFaultOnAClientIsDrawnOnItsLane(t *testing.T) {
	events := pauseHistory()
	for i := range events {
		if events[i].Fault == "pause" {
			events[i].Targets = []string{history.TargetOfClient(0)}
		}
	}
	dir := t.TempDir()
	if err := WriteReport(dir, Summary{Test: "t", Results: pauseFencingResults()}, Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	onClients := regexp.MustCompile(`<rect class="fault client" x="[^"]*" y="([^"]*)"`).FindAllStringSubmatch(page, -1)
	lanes := regexp.MustCompile(`<text class="lane" x="64" y="[^"]*">([^<]*)</text>`).FindAllStringSubmatch(page, -1)
	if len(onClients) != 1 || len(lanes) < 2 || lanes[1][1] != "p0" {
		t.Fatalf("%d fault windows on client lanes (lanes %v), want the pause's one on p0's", len(onClients), lanes)
	}
	if y, _ := strconv.ParseFloat(onClients[0][1], 64); y < laneHeight || y >= 2*laneHeight {
		t.Errorf("the pause's window is drawn at y %v, want within p0's lane (the second, from %v)", y, float64(laneHeight))
	}
}

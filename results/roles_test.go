package results

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// The report lists the nodes' roles as they changed: which node was primary before a
// failover and which after. A node's name comes from the history, so it is escaped.
func TestReportShowsRoleChanges(t *testing.T) {
	events := kleppmann(5, 0, true)
	second := int64(time.Second)
	roles := func(at int64, changed []string, detail map[string]string) history.Event {
		return history.Event{Index: len(events), Type: history.Info, Process: history.NemesisProcess, Func: history.Roles,
			Time: events[0].Time + at, Targets: changed, Detail: detail}
	}
	events = append(events,
		roles(0, []string{"n1", "n2"}, map[string]string{"n2": "replica", "n1": "primary"}),
		roles(2*second, []string{"n1", "n2"}, map[string]string{"n1": "down", "n2": "primary"}),
		roles(3*second, []string{"<n3>"}, map[string]string{"n1": "down", "n2": "primary", "<n3>": "replica"}),
	)
	dir := t.TempDir()
	if err := WriteReport(dir, judged(events), Draw(events)); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, filepath.Join(dir, ReportFile))
	for _, want := range []string{
		`<h2>Roles</h2>`,
		`<tr><td class="num">0.000</td><td>n1, n2</td><td>n1 primary, n2 replica</td></tr>`,
		`<tr><td class="num">2.000</td><td>n1, n2</td><td>n1 down, n2 primary</td></tr>`,
		`<td>&lt;n3&gt;</td><td>&lt;n3&gt; replica, n1 down, n2 primary</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %s", want)
		}
	}
	if err := WriteReport(dir, judged(events[:10]), Draw(events[:10])); err != nil {
		t.Fatal(err)
	}
	if page := readFile(t, filepath.Join(dir, ReportFile)); strings.Contains(page, "<h2>Roles</h2>") {
		t.Error("a history without roles has a roles section")
	}
}

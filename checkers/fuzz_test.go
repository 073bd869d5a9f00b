package checkers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// FuzzCheckers: no checker crashes on any history, and none calls a history valid that
// cannot be paired. The input is JSON lines: what Parse accepts is checked as parsed; the
// rest is decoded line by line without validation (lines that are not JSON are skipped), so
// histories that Parse would refuse reach the checkers too, as events from elsewhere may.
// Seeds are in testdata/fuzz/FuzzCheckers; `make fuzz` runs it.
func FuzzCheckers(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		events := looseEvents(data)
		if file, err := history.Parse(bytes.NewReader(data)); err == nil {
			events = file.Events
		}
		_, unpairable := history.Pair(events)
		for _, r := range RunAll(t.Context(), All(), events, Options{Timeout: time.Second}) {
			if strings.HasPrefix(r.Summary, "checker crashed") {
				t.Errorf("%s: %s", r.Checker, r.Summary)
			}
			if unpairable != nil && r.Verdict == Valid {
				t.Errorf("%s: valid (%s) on a history that does not pair: %v", r.Checker, r.Summary, unpairable)
			}
		}
	})
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

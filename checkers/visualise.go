package checkers

// Porcupine's visualisation of one key, made to read like the report: rows named by
// process (p2, and p2'1 for the incarnation after an indeterminate operation) and times
// in seconds from the history's first event, where porcupine prints rows 0..n in order of
// first appearance and raw CLOCK_MONOTONIC nanoseconds.
//
// Rows are named with porcupine's own API: an annotation in each row, just before its
// first operation. Porcupine has no hook for its times, so the page it writes is
// post-processed in one place, secondsInTooltips: its formatCallReturn function is
// replaced, as text, by one printing seconds. When a porcupine release changes that
// function the page keeps raw times (TestPorcupinePageIsPostProcessed fails loudly), and
// every tooltip still names its events with their times as the report does.

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// visualisation is what every key's page of one history shares.
type visualisation struct {
	faults   []porcupine.Annotation
	tl       timeline
	infinity int64 // an indeterminate operation's return time (see operations)
}

func newVisualisation(events []history.Event, tl timeline, infinity int64) visualisation {
	return visualisation{faults: faultAnnotations(history.Faults(events), tl), tl: tl, infinity: infinity}
}

// write writes porcupine's HTML for one key's search.
func (v visualisation) write(path string, model porcupine.Model, s keySearch) error {
	info := s.info
	info.AddAnnotations(v.faults)
	info.AddAnnotations(rowNames(s.operations))
	var page bytes.Buffer
	if err := porcupine.Visualize(v.forHTML(model), info, &page); err != nil {
		return fmt.Errorf("visualise %s: %w", filepath.Base(path), err)
	}
	out, _ := secondsInTooltips(page.Bytes(), v.tl.start, v.infinity)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("visualise %s: %w", filepath.Base(path), err)
	}
	return nil
}

// forHTML escapes what porcupine's page puts into a tooltip's innerHTML: state
// descriptions and operation metadata, which carry strings from the history (an error
// message, a key). Operation descriptions and annotations are set as textContent there, so
// they stay as they are; escaping them would show the entities. The metadata also gets the
// operation's times as the report prints them, and what its completion said.
func (v visualisation) forHTML(m porcupine.Model) porcupine.Model {
	state, metadata := m.DescribeState, m.DescribeOperationMetadata
	m.DescribeState = func(s any) string { return html.EscapeString(state(s)) }
	m.DescribeOperationMetadata = func(x any) string {
		op := x.(*history.Op)
		described := html.EscapeString(metadata(x)) + "<br>" + v.times(op)
		if op.Complete != nil && op.Complete.Message != "" {
			described += "<br>" + html.EscapeString(op.Complete.Message)
		}
		return described
	}
	return m
}

// times is "t=1.2s .. t=1.3s", or "t=1.2s .. never completed".
func (v visualisation) times(op *history.Op) string {
	if op.Complete == nil {
		return v.tl.at(op.Invoke.Time) + " .. never completed"
	}
	return v.tl.at(op.Invoke.Time) + " .. " + v.tl.at(op.Complete.Time)
}

// rowNames labels each porcupine client row with the identity whose operations it holds,
// by an annotation just before the row's first operation.
func rowNames(ops []porcupine.Operation) []porcupine.Annotation {
	named := map[int]bool{}
	var out []porcupine.Annotation
	for _, op := range ops {
		if named[op.ClientId] {
			continue
		}
		named[op.ClientId] = true
		caller := op.Input.(request).caller
		details := fmt.Sprintf("process %d", caller.process)
		if caller.life > 0 {
			details += fmt.Sprintf(", its life %d: it carries on after an operation whose outcome is unknown", caller.life)
		}
		out = append(out, porcupine.Annotation{ClientId: op.ClientId, Start: op.Call - 1, End: op.Call - 1,
			Description: caller.String(), Details: details, BackgroundColor: "#d0d7de"})
	}
	return out
}

// faultAnnotations draws every nemesis fault as an annotation on the "nemesis" row.
func faultAnnotations(faults []history.Fault, tl timeline) []porcupine.Annotation {
	out := make([]porcupine.Annotation, 0, len(faults))
	for _, f := range faults {
		description := f.Description
		if len(f.Targets) > 0 {
			description += " " + strings.Join(f.Targets, ",")
		}
		details := "healed"
		if !f.Healed {
			details = "never healed: lasted until the history ended"
		}
		out = append(out, porcupine.Annotation{
			Tag: "nemesis", Start: f.Start, End: f.Stop,
			Description: description, Details: tl.at(f.Start) + " .. " + tl.at(f.Stop) + ", " + details, BackgroundColor: "#efaefc",
		})
	}
	return out
}

// porcupineTimes is porcupine's formatCallReturn (v1.3.1), which prints raw times.
const porcupineTimes = `function formatCallReturn(callTime, returnTime) {
  return '<br><br>Call: ' + callTime + '<br><br>Return: ' + returnTime
}`

// secondsInTooltips replaces porcupine's formatCallReturn in a page it wrote by one that
// prints seconds since start, and "never" for a return at infinity. ok is false, and the
// page unchanged, when the page holds no such function.
func secondsInTooltips(page []byte, start, infinity int64) (out []byte, ok bool) {
	if !bytes.Contains(page, []byte(porcupineTimes)) {
		return page, false
	}
	seconds := fmt.Sprintf(`function formatCallReturn(callTime, returnTime) {
  const at = (t) => BigInt(t) >= %dn ? 'never (its outcome is unknown)' : 't=' + (Number(BigInt(t) - %dn) / 1e9).toFixed(6) + 's'
  return '<br><br>Call: ' + at(callTime) + '<br><br>Return: ' + at(returnTime)
}`, infinity, start)
	return bytes.Replace(page, []byte(porcupineTimes), []byte(seconds), 1), true
}

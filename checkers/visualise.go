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
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// visualiseLimit caps the operations a page shows: a key with more is drawn around where
// its search got stuck (keySearch.shown), so that a page stays small enough to open (under
// a megabyte) however long the history.
const visualiseLimit = 1000

// write writes porcupine's HTML for one key's search.
func (v visualisation) write(path string, model porcupine.Model, s keySearch) error {
	info := s.info
	lo, hi := s.shown()
	info.AddAnnotations(v.faults)
	info.AddAnnotations(rowNames(s.operations[lo:hi]))
	var page bytes.Buffer
	if err := porcupine.Visualize(v.forHTML(model), info, &page); err != nil {
		return fmt.Errorf("visualise %s: %w", filepath.Base(path), err)
	}
	cut, err := window(page.Bytes(), lo, hi)
	if err != nil {
		return fmt.Errorf("visualise %s: %w", filepath.Base(path), err)
	}
	out, _ := secondsInTooltips(cut, v.tl.start, v.infinity)
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

// shown is the operations a page of s shows, [lo, hi) by id: all of them, or
// visualiseLimit around the one the search could not place next.
func (s keySearch) shown() (lo, hi int) {
	if len(s.ops) <= visualiseLimit {
		return 0, len(s.ops)
	}
	_, stuck := s.stuck()
	lo = min(max(stuck-visualiseLimit/2, 0), len(s.ops)-visualiseLimit)
	return lo, lo + visualiseLimit
}

// The part of porcupine's page data (v1.3.1) that window cuts: operations by id, the
// partial linearizations as steps naming them, annotations. Fields it does not name
// are dropped, so a porcupine release that adds some fails TestPageWindow.
type (
	pageData struct {
		Partitions  []pagePartition
		Annotations []pageAnnotation
	}
	pagePartition struct {
		History               []pageOperation
		PartialLinearizations [][]pageStep
		Largest               map[int]int
	}
	pageOperation struct {
		ClientId              int
		Start                 int
		OriginalStart         string
		End                   int
		OriginalEnd           string
		Description, Metadata string
	}
	pageStep struct {
		Index            int
		StateDescription string
	}
	pageAnnotation struct {
		ClientId                   int
		Tag                        string
		Start, End                 int
		Description, Details       string
		Annotation                 bool
		TextColor, BackgroundColor string
	}
)

// pageDataStart is where porcupine's page (v1.3.1) puts its data, one line of JSON.
var pageDataStart = []byte("const data = ")

// window cuts the page porcupine drew of a whole search down to the operations with ids in
// [lo, hi): their partial linearizations keep the states the search found, so the page
// shows the same search, only less of it; the annotations kept are those in that stretch
// of time, and every row's name. The page is unchanged when it shows no more than that.
func window(page []byte, lo, hi int) ([]byte, error) {
	at := bytes.Index(page, pageDataStart)
	if at < 0 {
		return nil, errors.New("porcupine's page holds no data: its template changed")
	}
	at += len(pageDataStart)
	end := at + bytes.IndexByte(page[at:], '\n')
	var data pageData
	if err := json.Unmarshal(page[at:end], &data); err != nil {
		return nil, fmt.Errorf("porcupine's page data: %w", err)
	}
	if len(data.Partitions) != 1 || lo == 0 && hi == len(data.Partitions[0].History) {
		return page, nil
	}
	p := &data.Partitions[0]
	p.History = p.History[lo:hi]
	var partials [][]pageStep
	p.Largest = map[int]int{}
	for _, partial := range p.PartialLinearizations { // longest first
		var kept []pageStep
		for _, step := range partial {
			if step.Index >= lo && step.Index < hi {
				step.Index -= lo
				kept = append(kept, step)
				if _, ok := p.Largest[step.Index]; !ok {
					p.Largest[step.Index] = len(partials)
				}
			}
		}
		if len(kept) > 0 {
			partials = append(partials, kept)
		}
	}
	p.PartialLinearizations = partials
	from, to := math.MaxInt, math.MinInt
	for _, op := range p.History {
		from, to = min(from, op.Start), max(to, op.End)
	}
	data.Annotations = slices.DeleteFunc(data.Annotations, func(a pageAnnotation) bool { // rows' names are kept
		return a.Tag != "" && (a.End < from || a.Start > to)
	})
	out, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return slices.Concat(page[:at], out, page[end:]), nil
}

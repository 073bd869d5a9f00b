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
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockbreaker/lockbreaker/history"
)

// visualisation is what every key's page of one history shares.
type visualisation struct {
	faults   []porcupine.Annotation
	tl       timeline
	infinity int64 // an indeterminate operation's return time (see operations)
}

func newVisualisation(events []history.Event, tl timeline, infinity int64) *visualisation {
	return &visualisation{faults: faultAnnotations(history.Faults(events), tl), tl: tl, infinity: infinity}
}

// visualiseLimit caps the operations a page shows: a key with more is drawn around where
// its search got stuck (keySearch.shown), so that a page stays small enough to open (under
// a megabyte) however long the history.
const visualiseLimit = 1000

// write writes porcupine's HTML for one key's search. A key longer than a page shows is
// drawn for the operations shown alone (drawWindow), never whole and then cut.
func (v visualisation) write(path string, model porcupine.Model, s keySearch) error {
	model = v.forHTML(model)
	var page []byte
	var err error
	if lo, hi := s.shown(); lo == 0 && hi == len(s.operations) {
		info := s.info
		info.AddAnnotations(v.faults)
		info.AddAnnotations(rowNames(s.operations))
		var buf bytes.Buffer
		err = porcupine.Visualize(model, info, &buf)
		page = buf.Bytes()
	} else {
		page, err = v.drawWindow(model, s, lo, hi)
	}
	if err != nil {
		return fmt.Errorf("visualise %s: %w", filepath.Base(path), err)
	}
	out, _ := secondsInTooltips(page, v.tl.start, v.infinity)
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
		caller := op.Input.(*request).caller
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

// The page data porcupine (v1.3.1) draws from, as drawWindow makes it: operations by
// id, the partial linearizations as steps naming them, annotations.
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

// drawWindow draws the operations with ids in [lo, hi) of s's search as porcupine would
// draw them on a page of the whole search: their partial linearizations keep the states
// the search found (the model steps through every partial, only the steps shown are
// described), the annotations kept are those in that stretch of time, and every row's
// name. Only what is shown is described and encoded, so a long key's page costs what a
// short one's does. Times are mapped as porcupine maps them (distinct times 100 apart),
// over what is shown.
func (v visualisation) drawWindow(model porcupine.Model, s keySearch, lo, hi int) ([]byte, error) {
	ops := s.operations[lo:hi]
	from, to := int64(math.MaxInt64), int64(math.MinInt64)
	for _, op := range ops {
		from, to = min(from, op.Call), max(to, op.Return)
	}
	var annotations []porcupine.Annotation
	for _, a := range v.faults {
		if max(a.End, a.Start) >= from && a.Start <= to {
			annotations = append(annotations, a)
		}
	}
	annotations = append(annotations, rowNames(ops)...)

	times := make([]int64, 0, 2*len(ops)+2*len(annotations))
	for _, op := range ops {
		times = append(times, op.Call, op.Return)
	}
	for _, a := range annotations {
		times = append(times, a.Start, max(a.End, a.Start))
	}
	slices.Sort(times)
	times = slices.Compact(times)
	at := func(t int64) int {
		i, _ := slices.BinarySearch(times, t)
		return i * 100
	}

	data := pageData{Partitions: []pagePartition{{Largest: map[int]int{}}}}
	p := &data.Partitions[0]
	for _, op := range ops {
		p.History = append(p.History, pageOperation{ClientId: op.ClientId,
			Start: at(op.Call), OriginalStart: strconv.FormatInt(op.Call, 10),
			End: at(op.Return), OriginalEnd: strconv.FormatInt(op.Return, 10),
			Description: model.DescribeOperation(op.Input, op.Output), Metadata: model.DescribeOperationMetadata(op.Metadata)})
	}
	var partials [][]int
	if all := s.info.PartialLinearizations(); len(all) > 0 {
		partials = slices.Clone(all[0])
	}
	slices.SortStableFunc(partials, func(a, b []int) int { return cmp.Compare(len(b), len(a)) }) // longest first
	for _, partial := range partials {
		var kept []pageStep
		state := model.Init()
		for _, id := range partial {
			_, state = model.Step(state, s.operations[id].Input, s.operations[id].Output)
			if id < lo || id >= hi {
				continue
			}
			kept = append(kept, pageStep{Index: id - lo, StateDescription: model.DescribeState(state)})
			if _, ok := p.Largest[id-lo]; !ok {
				p.Largest[id-lo] = len(p.PartialLinearizations)
			}
		}
		if len(kept) > 0 {
			p.PartialLinearizations = append(p.PartialLinearizations, kept)
		}
	}
	for _, a := range annotations {
		data.Annotations = append(data.Annotations, pageAnnotation{ClientId: a.ClientId, Tag: a.Tag,
			Start: at(a.Start), End: at(max(a.End, a.Start)), Description: a.Description, Details: a.Details,
			Annotation: true, TextColor: a.TextColor, BackgroundColor: a.BackgroundColor})
	}
	encoded, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return porcupinePage(model, encoded)
}

// porcupinePage is porcupine's page with data in place of its own: the page it draws of
// no operations, so that its template, style and script stay porcupine's.
func porcupinePage(model porcupine.Model, data []byte) ([]byte, error) {
	_, info := porcupine.CheckOperationsVerbose(model, nil, time.Second)
	var buf bytes.Buffer
	if err := porcupine.Visualize(model, info, &buf); err != nil {
		return nil, err
	}
	page := buf.Bytes()
	at := bytes.Index(page, pageDataStart)
	if at < 0 {
		return nil, errors.New("porcupine's page holds no data: its template changed")
	}
	at += len(pageDataStart)
	end := at + bytes.IndexByte(page[at:], '\n')
	return slices.Concat(page[:at], data, page[end:]), nil
}

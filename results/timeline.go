package results

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// The report's timeline: one lane per lock client (each life after an operation whose
// outcome is unknown labelled where it begins, p2'1, as the checkers name it), the time
// each believed it held the lock as a bar from its grant to its release, every acquire
// and release as a thin line from invocation to completion, every storage read and write
// as a tick at its completion, coloured accepted, rejected or unknown and labelled with
// its token, nemesis faults shaded across every lane, the overlaps mutual-exclusion
// found in red, and each hazard that occurred (history.Hazard) as a dashed black line at
// its time on the nemesis lane and the lanes of the clients it involved (across every lane
// when it names no client).
//
// It is drawn as SVG by the template; the lanes' coordinates are milliseconds since the
// history's first event, so the page's script zooms and pans by changing the viewBox and
// moves nothing else but the labels and the axis. Without the script the page shows the
// whole run. It draws the history and the checkers' overlaps; it decides nothing.

// Layout of the timeline, in the SVG's user units.
const (
	timelineWidth = 1000.0
	laneLabels    = 70.0 // the lane names' column
	plotWidth     = timelineWidth - laneLabels - 10
	axisHeight    = 22.0
	laneHeight    = 26.0
	// maxLabels is how many token labels the page shows at once; more would be a smear.
	maxLabels = 150
	// timelineLimit caps the operations the timeline draws: a longer run is drawn for that
	// many around its first violation (or from its start), and the page says so. Every
	// operation takes some 300 bytes of the page.
	timelineLimit = 10_000
)

type timelineView struct {
	SpanMS              string // the lanes' viewBox width
	Height, LanesTop    float64
	LanesHeight         float64
	X0, Width           float64 // the lanes' place in the outer SVG
	Lanes               []laneView
	Faults              []band
	FaultsOnClients     []band // a fault's window again on each lane of a client it struck
	Holds               []band
	Overlaps            []band
	Attempts            []stroke
	Marks               []stroke
	Hazards             []stroke
	FaultLabels, Tokens []label
	Ticks               []tick
	LabelsHidden        bool
	Operations, Holders int
	// From and To are the drawn stretch (ms) when the run has more operations than the
	// timeline draws, and Capped says so; else all three are empty.
	From, To, Capped string
	// anchored says which overlaps are drawn, with an anchor to link.
	anchored []bool
	// hazards says which hazard events (by index) are drawn, for the list to link.
	hazards map[int]bool
}

type laneView struct {
	Name string
	Y    float64 // top of the lane
	Text float64 // the name's baseline
}

// band is a rectangle in lane coordinates: x and width in milliseconds.
type band struct {
	ID, Class, Title string
	X, Width         string
	Y, Height        float64
}

// stroke is a line in lane coordinates, drawn the same width at every zoom: Path is its
// SVG path ("M0.000 29H1.000"), shorter than a line's four attributes.
type stroke struct{ Class, Title, Path string }

// label is text in the outer SVG at a time (data-t, ms) the script keeps it at: a fault's
// name, or a storage request's token (classed by its outcome).
type label struct {
	Class, Text, T string
	End            string // a fault's end (ms); its label shows while any of it is in view
	X, Y           float64
}

type tick struct {
	X    float64
	Text string
}

// clock turns history times into the timeline's milliseconds.
type clock struct{ start, span int64 }

func newClock(events []history.Event) clock {
	if len(events) == 0 {
		return clock{}
	}
	c := clock{start: events[0].Time}
	for _, e := range events {
		c.start = min(c.start, e.Time)
	}
	c.span = max(history.Span(events)-c.start, int64(time.Millisecond))
	return c
}

func (c clock) offset(t int64) time.Duration { return time.Duration(t - c.start) }

// ms is t in the lanes' coordinates.
func (c clock) ms(t int64) string {
	return strconv.FormatFloat(float64(t-c.start)/1e6, 'f', 3, 64)
}

// width is the milliseconds from a to b, at least a microsecond so that nothing vanishes.
func (c clock) width(a, b int64) string {
	return strconv.FormatFloat(max(float64(b-a)/1e6, 0.001), 'f', 3, 64)
}

// x is t's place in the outer SVG when the whole run is shown.
func (c clock) x(t int64) float64 {
	return math.Round((laneLabels+float64(t-c.start)/float64(c.span)*plotWidth)*10) / 10
}

// event points at one event as the checkers' evidence does: "#12 (t=1.5s)".
func (c clock) event(e history.Event) string {
	return fmt.Sprintf("#%d (%s)", e.Index, seconds(c.offset(e.Time)))
}

// lane is a lock client's life: p2, or p2'1 after its first indeterminate operation. Its
// first life names the client's lane.
type lane struct{ process, life int }

func (l lane) String() string {
	switch l.process {
	case history.HarnessProcess:
		return "harness"
	case history.NemesisProcess:
		return "nemesis"
	}
	name := fmt.Sprintf("p%d", l.process)
	if l.life > 0 {
		name += fmt.Sprintf("'%d", l.life)
	}
	return name
}

// hold is the time a client believed it held a key: from its acquire's ok to its next
// release of that key, or its last event.
type hold struct {
	lane     lane
	key      string
	granted  history.Event
	until    int64
	released bool
}

// newTimeline draws ops (in invocation order) and the overlaps; a run of more than
// timelineLimit operations is drawn for that many around focus (a time).
func newTimeline(events []history.Event, ops []history.Op, overlaps []checkers.Overlap, focus int64) timelineView {
	c := newClock(events)
	tl := timelineView{SpanMS: c.ms(c.start + c.span), X0: laneLabels, Width: plotWidth, Operations: len(ops)}
	ends := func(op history.Op) int64 { // a never completed operation lasts to the end
		if op.Complete == nil {
			return c.start + c.span
		}
		return op.Complete.Time
	}
	drawn := ops
	from, to := int64(math.MinInt64), int64(math.MaxInt64) // what is drawn
	if len(ops) > timelineLimit {
		at, _ := slices.BinarySearchFunc(ops, focus, func(op history.Op, t int64) int { return cmp.Compare(op.Invoke.Time, t) })
		lo := min(max(at-timelineLimit/2, 0), len(ops)-timelineLimit)
		drawn = ops[lo : lo+timelineLimit]
		from = drawn[0].Invoke.Time
		to = from + int64(time.Millisecond)
		for _, op := range drawn {
			to = max(to, ends(op))
		}
		tl.From, tl.To = c.ms(from), c.ms(to)
		tl.Capped = fmt.Sprintf("The run has %d operations; the timeline draws %d of them, from %s to %s, around the first violation "+
			"or from the start (it is capped at %d operations), with the holds, overlaps, faults and hazards of that stretch. "+
			"The plots show the whole run; results.json and the history hold everything.",
			len(ops), len(drawn), seconds(c.offset(from)), seconds(c.offset(to)), timelineLimit)
	}
	inView := func(a, b int64) bool { return b >= from && a <= to }

	lanes, lives := assignLanes(ops)
	nemesis := lane{process: history.NemesisProcess}
	lanes = append([]lane{nemesis}, lanes...)
	y := map[lane]float64{}
	for i, l := range lanes {
		y[l] = float64(i) * laneHeight
		tl.Lanes = append(tl.Lanes, laneView{Name: l.String(), Y: axisHeight + y[l], Text: axisHeight + y[l] + laneHeight/2 + 4})
	}
	tl.LanesTop, tl.LanesHeight = axisHeight, float64(len(lanes))*laneHeight
	tl.Height = tl.LanesTop + tl.LanesHeight + 4

	for _, f := range history.Faults(events) {
		if !inView(f.Start, f.Stop) {
			continue
		}
		title := fmt.Sprintf("%s %s, %s .. %s", f.Description, strings.Join(f.Targets, ","), seconds(c.offset(f.Start)), seconds(c.offset(f.Stop)))
		if !f.Healed {
			title += ", never healed"
		}
		tl.Faults = append(tl.Faults, band{Class: "fault", Title: title, X: c.ms(f.Start), Width: c.width(f.Start, f.Stop), Y: 0, Height: tl.LanesHeight})
		tl.FaultLabels = append(tl.FaultLabels, label{Text: strings.TrimSpace(f.Description + " " + strings.Join(f.Targets, ",")),
			T: c.ms(f.Start), End: c.ms(f.Stop), X: c.x(f.Start), Y: tl.LanesTop + laneHeight/2 + 4})
		for _, l := range lanes {
			if p := l.process; p >= 0 && slices.Contains(f.Targets, history.TargetOfClient(p)) {
				tl.FaultsOnClients = append(tl.FaultsOnClients, band{Class: "fault client", Title: title,
					X: c.ms(f.Start), Width: c.width(f.Start, f.Stop), Y: y[l] + 2, Height: laneHeight - 4})
			}
		}
	}

	holds := findHolds(ops)
	holdLane := map[int]lane{} // grant event index -> lane
	for _, h := range holds {
		if !inView(h.granted.Time, h.until) {
			continue
		}
		holdLane[h.granted.Index] = h.lane
		end := "its last event"
		if h.released {
			end = "its release"
		}
		tl.Holds = append(tl.Holds, band{Class: "hold", X: c.ms(h.granted.Time), Width: c.width(h.granted.Time, h.until),
			Y: y[h.lane] + 7, Height: laneHeight - 14,
			Title: fmt.Sprintf("%s held %s from %s to %s (%s)", h.lane, h.key, c.event(h.granted), seconds(c.offset(h.until)), end)})
	}
	tl.Holders = len(holds)

	event := byIndex(events)
	tl.anchored = make([]bool, len(overlaps))
	for i, o := range overlaps {
		start, end := event(o.Later.Granted).Time, min(event(o.Earlier.Until).Time, event(o.Later.Until).Time)
		if !inView(start, end) {
			continue
		}
		title := fmt.Sprintf("p%d and p%d both held %s for %v from %s", o.Earlier.Process, o.Later.Process, o.Key, o.Length, seconds(c.offset(start)))
		for j, h := range []checkers.Holding{o.Later, o.Earlier} {
			l, ok := holdLane[h.Granted]
			if !ok {
				continue
			}
			b := band{Class: "overlap", Title: title, X: c.ms(start), Width: c.width(start, end), Y: y[l] + 4, Height: laneHeight - 8}
			if j == 0 {
				b.ID, tl.anchored[i] = overlapID(i), true
			}
			tl.Overlaps = append(tl.Overlaps, b)
		}
	}

	for _, op := range drawn {
		l := lane{process: op.Process()}
		end := ends(op)
		class := outcomeClass(op.Type())
		switch op.Func() {
		case history.Acquire, history.Extend, history.Release:
			tl.Attempts = append(tl.Attempts, stroke{Class: "attempt " + class, Title: checkers.Describe(op, c.start),
				Path: fmt.Sprintf("M%s %gH%s", c.ms(op.Invoke.Time), y[l]+3, c.ms(end))})
		default:
			tall := 3.0
			if op.Func() == history.Read {
				tall = 7
			}
			tl.Marks = append(tl.Marks, stroke{Class: class, Title: checkers.Describe(op, c.start),
				Path: fmt.Sprintf("M%s %gV%g", c.ms(end), y[l]+tall, y[l]+laneHeight-tall)})
			if t := op.Invoke.Token; t != nil {
				tl.Tokens = append(tl.Tokens, label{Class: class, Text: strconv.FormatInt(*t, 10), T: c.ms(end),
					X: c.x(end), Y: tl.LanesTop + y[l] + laneHeight - 1})
			}
		}
	}
	tl.hazards = map[int]bool{}
	for _, h := range history.Hazards(events) {
		if inView(h.Time, h.Time) {
			tl.Hazards = append(tl.Hazards, hazardMark(h, c, y, tl.LanesHeight))
			tl.hazards[h.Index] = true
		}
	}
	for _, l := range lives {
		if !inView(l.at, l.at) {
			continue
		}
		tl.Tokens = append(tl.Tokens, label{Class: "life", Text: l.life.String(), T: c.ms(l.at), X: c.x(l.at),
			Y: tl.LanesTop + y[l.lane] + 9})
	}
	tl.LabelsHidden = len(tl.Tokens) > maxLabels
	tl.Ticks = ticks(0, float64(c.span)/1e6, func(ms float64) float64 { return laneLabels + ms*1e6/float64(c.span)*plotWidth })
	return tl
}

// hazardMark is a hazard's line: on the nemesis lane and on the lane of each client among
// its targets (worker-3 is p3), or across every lane when it names no client drawn here.
func hazardMark(h history.Occurrence, c clock, y map[lane]float64, height float64) stroke {
	spans := [][2]float64{{y[lane{process: history.NemesisProcess}], laneHeight}}
	for _, target := range h.Targets {
		if p, ok := history.ClientTarget(target); ok {
			if top, drawn := y[lane{process: p}]; drawn {
				spans = append(spans, [2]float64{top, top + laneHeight})
			}
		}
	}
	if len(spans) == 1 {
		spans[0][1] = height
	}
	var path strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&path, "M%s %gV%g", c.ms(h.Time), s[0]+1, s[1]-1)
	}
	return stroke{Class: "hazard", Title: hazardTitle(h, c), Path: path.String()}
}

// hazardTitle says what a hazard event records: "1 lost grant at t=1.2s, seen by failover:
// worker-2, n1; grant=#4".
func hazardTitle(h history.Occurrence, c clock) string {
	title := fmt.Sprintf("%s (%s) at %s, seen by %s", h.Hazard.Count(1), h.Hazard, seconds(c.offset(h.Time)), h.Fault)
	if len(h.Targets) > 0 {
		title += ": " + strings.Join(h.Targets, ", ")
	}
	if d := detailText(h.Detail); d != "" {
		title += "; " + d
	}
	return title
}

// detailText is an event's detail as "grant=#4, primary=n1", by key.
func detailText(detail map[string]string) string {
	parts := make([]string, 0, len(detail))
	for _, k := range slices.Sorted(maps.Keys(detail)) {
		parts = append(parts, k+"="+detail[k])
	}
	return strings.Join(parts, ", ")
}

// byIndex finds events by their index: by their place when the history is numbered as a
// recorder numbers it, else through a map; an index no event has finds the zero event.
func byIndex(events []history.Event) func(index int) history.Event {
	numbered := true
	for i, e := range events {
		if e.Index != i {
			numbered = false
			break
		}
	}
	if numbered {
		return func(index int) history.Event {
			if index < 0 || index >= len(events) {
				return history.Event{}
			}
			return events[index]
		}
	}
	m := make(map[int]history.Event, len(events))
	for _, e := range events {
		m[e.Index] = e
	}
	return func(index int) history.Event { return m[index] }
}

// overlapID is the anchor of the i-th overlap in the timeline.
func overlapID(i int) string { return fmt.Sprintf("overlap-%d", i) }

// assignLanes gives every client a lane. A process's operations belong to one life until
// one ends with an unknown outcome; the next starts a new life, as the checkers start a
// new identity there. A process completes an operation before it invokes its next (Pair
// sees to it), so its lives follow each other in its lane: lives says where each after
// the first begins, to label it (p2'1). The lanes come sorted.
func assignLanes(ops []history.Op) (lanes []lane, lives []lifeStart) {
	current := map[int]int{}
	seen := map[lane]bool{}
	for _, op := range ops {
		own, life := lane{process: op.Process()}, lane{process: op.Process(), life: current[op.Process()]}
		switch {
		case seen[life]:
		case life.life == 0:
			lanes = append(lanes, own)
		default:
			lives = append(lives, lifeStart{lane: own, life: life, at: op.Invoke.Time})
		}
		seen[life] = true
		if op.Type() == history.Info && op.Process() != history.HarnessProcess {
			current[op.Process()]++
		}
	}
	slices.SortFunc(lanes, func(a, b lane) int {
		// Lock clients first, by number; the harness's final reads last.
		harness := func(l lane) int { return min(0, l.process) }
		return cmp.Or(cmp.Compare(harness(b), harness(a)), cmp.Compare(a.process, b.process))
	})
	return lanes, lives
}

// lifeStart is where a life begins in a lane an earlier life of its process had.
type lifeStart struct {
	lane, life lane
	at         int64
}

// findHolds pairs every granted acquire with the client's next release of the key (its
// invocation) or, lacking one, the client's last event.
func findHolds(ops []history.Op) []hold {
	type holding struct {
		process int
		key     string
	}
	open := map[holding]int{}
	last := map[int]int64{}
	var holds []hold
	for _, op := range ops {
		last[op.Process()] = max(last[op.Process()], op.Invoke.Time)
		if op.Complete != nil {
			last[op.Process()] = max(last[op.Process()], op.Complete.Time)
		}
		h := holding{op.Process(), op.Invoke.Key}
		i, held := open[h]
		switch {
		case op.Func() == history.Acquire && op.Type() == history.OK && !held:
			open[h] = len(holds)
			holds = append(holds, hold{lane: lane{process: h.process}, key: h.key, granted: *op.Complete})
		case op.Func() == history.Release && held:
			holds[i].until, holds[i].released = op.Invoke.Time, true
			delete(open, h)
		}
	}
	for h, i := range open {
		holds[i].until = last[h.process]
	}
	return holds
}

// outcomeClass is the CSS class of an operation's outcome.
func outcomeClass(t history.Type) string {
	switch t {
	case history.OK:
		return "ok"
	case history.Fail:
		return "fail"
	}
	return "info"
}

// ticks are about eight round values between lo and hi (milliseconds), placed by x and
// labelled in seconds.
func ticks(lo, hi float64, x func(ms float64) float64) []tick {
	step := niceStep((hi - lo) / 8)
	var out []tick
	for i := math.Ceil(lo / step); i*step <= hi; i++ {
		v := i * step
		out = append(out, tick{X: x(v), Text: strconv.FormatFloat(math.Round(v*1e6)/1e9, 'f', -1, 64) + "s"})
	}
	return out
}

// niceStep is the smallest of 1, 2 and 5 times a power of ten that is at least raw.
func niceStep(raw float64) float64 {
	if !(raw > 0) {
		return 1
	}
	power := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 5} {
		if m*power >= raw {
			return m * power
		}
	}
	return 10 * power
}

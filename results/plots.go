package results

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lockbreaker/lockbreaker/history"
)

// The report's plots, Jepsen's first look at a fault's effect: lock latency over time,
// throughput over time, fencing tokens over time per client and, when clock faults ran,
// each node's clock offset. Every plot shares the x axis (seconds since the history's
// first event) and shades the nemesis faults. They draw the history; they judge nothing.

// Layout of a plot, in the SVG's user units.
const (
	plotLeft   = 64.0
	plotRight  = 990.0
	plotTop    = 8.0
	plotBottom = 172.0
	plotHeight = 196.0
)

type plotView struct {
	Title, Caption string
	Faults         []plotBand
	XTicks, YTicks []tick // YTicks' X is their y
	Lines          []polyline
	Dots           []dot
	Legend         []legendItem
}

type plotBand struct {
	X, Width float64
	Title    string
}

type polyline struct{ Color, Points string }

// dot is a point of a plot, coloured by its class (an outcome, a function, a client).
type dot struct {
	X, Y   float64
	Class  string
	Square bool
}

type legendItem struct {
	Color, Text string
	Square      bool
}

// Colours: outcomes as the timeline draws them, functions and clients from fixed palettes.
var (
	outcomeColors = map[history.Type]string{history.OK: "#1a7f37", history.Fail: "#8c959f", history.Info: "#bc4c00"}
	funcColors    = map[history.Func]string{history.Acquire: "#0969da", history.Release: "#8250df", history.Read: "#1a7f37", history.Write: "#bf8700"}
	palette       = []string{"#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#bf3989", "#57606a", "#953800", "#0550ae"}
)

// paletteClass is the class of the i-th colour of the palette, which reportStyle defines.
func paletteClass(i int) string { return fmt.Sprintf("c%d", paletteIndex(i)) }

func paletteColor(i int) string { return palette[paletteIndex(i)] }

func paletteIndex(i int) int { return ((i % len(palette)) + len(palette)) % len(palette) }

// frame is what every plot of one history shares: the x axis and the faults.
type frame struct {
	c      clock
	faults []plotBand
	xticks []tick
}

func newFrame(events []history.Event) frame {
	c := newClock(events)
	f := frame{c: c}
	for _, fault := range history.Faults(events) {
		f.faults = append(f.faults, plotBand{X: f.x(fault.Start), Width: max(f.x(fault.Stop)-f.x(fault.Start), 1),
			Title: strings.TrimSpace(fault.Description + " " + strings.Join(fault.Targets, ","))})
	}
	f.xticks = ticks(0, float64(c.span)/1e6, func(ms float64) float64 { return plotLeft + ms*1e6/float64(c.span)*(plotRight-plotLeft) })
	return f
}

func (f frame) x(t int64) float64 {
	return round1(plotLeft + float64(t-f.c.start)/float64(f.c.span)*(plotRight-plotLeft))
}

func (f frame) plot(title, caption string) plotView {
	return plotView{Title: title, Caption: caption, Faults: f.faults, XTicks: f.xticks}
}

// linearY maps 0..top onto the plot's height and gives round ticks.
func linearY(top float64) (func(float64) float64, []tick) {
	top = max(top, 1)
	step := niceStep(top / 4)
	top = math.Ceil(top/step) * step
	y := func(v float64) float64 { return round1(plotBottom - v/top*(plotBottom-plotTop)) }
	var ts []tick
	for i := 0.0; i*step <= top; i++ {
		ts = append(ts, tick{X: y(i * step), Text: strconv.FormatFloat(i*step, 'f', -1, 64)})
	}
	return y, ts
}

// latencyPlot is acquire and release latency against invocation time, log scale.
func latencyPlot(f frame, ops []history.Op) plotView {
	p := f.plot("Lock latency", "Each acquire (circle) and release (square) at its invocation, by how long it took; log scale.")
	type point struct {
		x, ms float64
		t     history.Type
		sq    bool
	}
	var points []point
	open := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, op := range ops {
		if op.Func() != history.Acquire && op.Func() != history.Release {
			continue
		}
		if op.Complete == nil {
			open++
			continue
		}
		ms := max(float64(op.Complete.Time-op.Invoke.Time)/1e6, 0.001)
		lo, hi = min(lo, ms), max(hi, ms)
		points = append(points, point{x: f.x(op.Invoke.Time), ms: ms, t: op.Type(), sq: op.Func() == history.Release})
	}
	if open > 0 {
		p.Caption += fmt.Sprintf(" %d never completed and are not drawn.", open)
	}
	if len(points) == 0 {
		return p
	}
	decadeLo, decadeHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if decadeHi == decadeLo {
		decadeHi++
	}
	y := func(ms float64) float64 {
		return round1(plotBottom - (math.Log10(ms)-decadeLo)/(decadeHi-decadeLo)*(plotBottom-plotTop))
	}
	for d := decadeLo; d <= decadeHi; d++ {
		p.YTicks = append(p.YTicks, tick{X: y(math.Pow(10, d)), Text: formatMS(math.Pow(10, d))})
	}
	for _, pt := range points {
		d := dot{X: pt.x, Y: y(pt.ms), Class: outcomeClass(pt.t), Square: pt.sq}
		if d.Square { // a square's place is its corner
			d.X, d.Y = d.X-2, d.Y-2
		}
		p.Dots = append(p.Dots, d)
	}
	p.Dots = distinct(&p, p.Dots)
	p.Legend = []legendItem{{Color: outcomeColors[history.OK], Text: "ok"}, {Color: outcomeColors[history.Fail], Text: "fail"},
		{Color: outcomeColors[history.Info], Text: "info (unknown)"}, {Color: "#57606a", Text: "release", Square: true}}
	return p
}

// formatMS labels a latency axis: 1ms, 10ms, 1s.
func formatMS(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', -1, 64) + "s"
	}
	if ms >= 1 {
		return strconv.FormatFloat(ms, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(ms*1000, 'f', -1, 64) + "µs"
}

// throughputPlot is successful operations per second by function, counted in buckets of
// about a sixtieth of the run by their completion time.
func throughputPlot(f frame, ops []history.Op) plotView {
	p := f.plot("Throughput", "Operations that completed ok, per second, by function.")
	bucket := int64(niceStep(float64(f.c.span) / 60))
	n := int(f.c.span/bucket) + 1
	counts := map[history.Func][]float64{}
	for _, op := range ops {
		if op.Type() != history.OK || funcColors[op.Func()] == "" {
			continue
		}
		if counts[op.Func()] == nil {
			counts[op.Func()] = make([]float64, n)
		}
		counts[op.Func()][(op.Complete.Time-f.c.start)/bucket]++
	}
	perSecond := 1e9 / float64(bucket)
	top := 0.0
	for _, cs := range counts {
		top = max(top, slices.Max(cs)*perSecond)
	}
	y, yticks := linearY(top)
	p.YTicks = yticks
	for _, fn := range []history.Func{history.Acquire, history.Release, history.Read, history.Write} {
		cs := counts[fn]
		if cs == nil {
			continue
		}
		var pts []string
		for i, v := range cs {
			mid := f.c.start + int64(i)*bucket + bucket/2
			pts = append(pts, fmt.Sprintf("%g,%g", f.x(min(mid, f.c.start+f.c.span)), y(v*perSecond)))
		}
		p.Lines = append(p.Lines, polyline{Color: funcColors[fn], Points: strings.Join(pts, " ")})
		p.Legend = append(p.Legend, legendItem{Color: funcColors[fn], Text: string(fn)})
	}
	return p
}

// tokensPlot is the fencing token every grant carried, by client; nil without tokens.
func tokensPlot(f frame, ops []history.Op) *plotView {
	type grant struct {
		x       float64
		process int
		token   int64
	}
	var grants []grant
	top := 0.0
	for _, op := range ops {
		if op.Func() == history.Acquire && op.Type() == history.OK && op.Complete.Token != nil {
			grants = append(grants, grant{f.x(op.Complete.Time), op.Process(), *op.Complete.Token})
			top = max(top, float64(*op.Complete.Token))
		}
	}
	if len(grants) == 0 {
		return nil
	}
	p := f.plot("Fencing tokens", "The token each granted acquire carried, at its grant, by client: tokens should only go up.")
	y, yticks := linearY(top)
	p.YTicks = yticks
	seen := map[int]bool{}
	var processes []int
	for _, g := range grants {
		p.Dots = append(p.Dots, dot{X: g.x, Y: y(float64(g.token)), Class: paletteClass(g.process)})
		if !seen[g.process] {
			seen[g.process] = true
			processes = append(processes, g.process)
		}
	}
	p.Dots = distinct(&p, p.Dots)
	slices.Sort(processes)
	for _, proc := range processes {
		p.Legend = append(p.Legend, legendItem{Color: paletteColor(proc), Text: lane{process: proc}.String()})
	}
	return &p
}

// clockPlot is each node's clock offset as the clock faults recorded it (the offset at a
// fault's start, the furthest it went by its stop, then none); nil when no fault moved a
// clock. The offsets are read from the events' details, which the nemesis writes in
// seconds ("+2.000").
func clockPlot(f frame, events []history.Event) *plotView {
	type sample struct {
		t      int64
		offset float64
	}
	samples := map[string][]sample{}
	var nodes []string
	lo, hi := 0.0, 0.0
	add := func(node string, t int64, detail string) {
		v, err := strconv.ParseFloat(detail, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return
		}
		if samples[node] == nil {
			nodes = append(nodes, node)
		}
		samples[node] = append(samples[node], sample{t, v})
		lo, hi = min(lo, v), max(hi, v)
	}
	for _, e := range events {
		// Only a fault's start and stop move a clock; a hazard's detail may name an offset too.
		if e.Process != history.NemesisProcess || (e.Func != history.Start && e.Func != history.Stop) || e.Detail["offset"] == "" {
			continue
		}
		for _, node := range e.Targets {
			if furthest := e.Detail["furthest"]; furthest != "" {
				add(node, e.Time, furthest)
			}
			add(node, e.Time, e.Detail["offset"])
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	p := f.plot("Clock offsets", "Each node's clock offset in seconds as the clock faults recorded it: at a fault's start, the furthest it went, and back to none.")
	step := niceStep(max(hi-lo, 1) / 4)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	if hi == lo {
		hi = lo + step
	}
	y := func(v float64) float64 { return round1(plotBottom - (v-lo)/(hi-lo)*(plotBottom-plotTop)) }
	for i := math.Round(lo / step); i*step <= hi; i++ {
		p.YTicks = append(p.YTicks, tick{X: y(i * step), Text: strconv.FormatFloat(i*step, 'f', -1, 64) + "s"})
	}
	slices.Sort(nodes)
	for i, node := range nodes {
		pts := []string{fmt.Sprintf("%g,%g", f.x(f.c.start), y(0))}
		last := 0.0
		for _, s := range samples[node] {
			// A step: the offset holds until the next sample.
			pts = append(pts, fmt.Sprintf("%g,%g %g,%g", f.x(s.t), y(last), f.x(s.t), y(s.offset)))
			last = s.offset
		}
		pts = append(pts, fmt.Sprintf("%g,%g", f.x(f.c.start+f.c.span), y(last)))
		p.Lines = append(p.Lines, polyline{Color: paletteColor(i), Points: strings.Join(pts, " ")})
		p.Legend = append(p.Legend, legendItem{Color: paletteColor(i), Text: node})
	}
	return &p
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// maxDots is how many dots a plot draws at their own places; a plot of more draws them on
// a grid of whole units (a dot is over four wide), and its caption says so.
const maxDots = 10_000

// distinct drops the dots drawn exactly where an earlier one of the same kind is: they
// add nothing to the picture, and a long run has many (coordinates are rounded to a tenth
// of a unit). When more than maxDots are left, dots are moved to the nearest whole unit
// and those that then coincide drawn once, which p's caption says.
func distinct(p *plotView, dots []dot) []dot {
	drop := func(dots []dot) []dot {
		seen := make(map[dot]bool, len(dots))
		return slices.DeleteFunc(dots, func(d dot) bool {
			if seen[d] {
				return true
			}
			seen[d] = true
			return false
		})
	}
	dots = drop(dots)
	if len(dots) <= maxDots {
		return dots
	}
	all := len(dots)
	for i := range dots {
		dots[i].X, dots[i].Y = math.Round(dots[i].X), math.Round(dots[i].Y)
	}
	dots = drop(dots)
	p.Caption += fmt.Sprintf(" Of its %d dots, those within half a unit of each other are drawn once, on whole units: %d are drawn.", all, len(dots))
	return dots
}

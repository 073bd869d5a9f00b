package results

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// The report's plots, Jepsen's first look at a fault's effect: lock latency over time,
// throughput over time, fencing tokens over time per client and, when clock faults ran,
// each node's clock offset. Every plot shares the x axis (seconds since the history's
// first event) and shades the nemesis faults. They draw the whole history, however long,
// from what Plots gathered of it in bounded memory; they judge nothing.

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
	funcColors    = map[history.Func]string{history.Acquire: "#0969da", history.Extend: "#bc4c00", history.Release: "#8250df", history.Read: "#1a7f37", history.Write: "#bf8700"}
	palette       = []string{"#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#bf3989", "#57606a", "#953800", "#0550ae"}
)

// paletteClass is the class of the i-th colour of the palette, which reportStyle defines.
func paletteClass(i int) string { return fmt.Sprintf("c%d", paletteIndex(i)) }

func paletteColor(i int) string { return palette[paletteIndex(i)] }

func paletteIndex(i int) int { return ((i % len(palette)) + len(palette)) % len(palette) }

// Plots is what the plots draw of a history, gathered one event at a time in memory that
// does not grow with the history's length: operations are counted in cells of time (and
// of latency or token) that grow coarser as the history grows longer (grid), so a long
// run's plots are of the whole run at a coarser grain. Only the nemesis's fault events,
// and each process's open operation, are kept as they are.
type Plots struct {
	start, end int64 // the earliest and latest event times
	seen       bool
	open       history.ByProcess[invoked] // each process's invocation not yet completed
	// latency counts acquires and releases by invocation time and latencyBins of their
	// duration, classed by outcome and function (latencyClass); throughput counts ok
	// operations by completion time, classed by funcIndex; tokens counts grants by their
	// time and token, classed by their process's palette colour.
	latency, throughput, tokens grid
	processes                   map[int]bool // the processes tokens were granted to
	nemesis                     []history.Event
}

// NewPlots returns an empty Plots.
func NewPlots() *Plots {
	return &Plots{latency: newGrid(false), throughput: newGrid(false), tokens: newGrid(true),
		processes: map[int]bool{}}
}

// invoked is what the plots need of an invocation: its function and time.
type invoked struct {
	Func history.Func
	Time int64
}

// plotFuncs are the functions the throughput plot draws, in its legend's order.
var plotFuncs = []history.Func{history.Acquire, history.Extend, history.Release, history.Read, history.Write}

// latencyBins is how many cells of latency a decade has: finer than the plot's height shows.
const latencyBins = 200

// Add takes the next event of the history into account.
func (p *Plots) Add(e history.Event) {
	if !p.seen || e.Time < p.start {
		p.start = e.Time
	}
	p.end, p.seen = max(p.end, e.Time), true
	switch {
	case e.Process == history.NemesisProcess:
		if e.Func == history.Start || e.Func == history.Stop {
			p.nemesis = append(p.nemesis, e)
		}
		return
	case e.Type == history.Invoke:
		p.open.Set(e.Process, invoked{e.Func, e.Time})
		return
	}
	inv, ok := p.open.Get(e.Process)
	if !ok {
		return
	}
	p.open.Delete(e.Process)
	f := inv.Func
	if e.Type == history.OK && slices.Contains(plotFuncs, f) {
		p.throughput.add(e.Time, 0, uint8(slices.Index(plotFuncs, f)))
	}
	if f == history.Acquire || f == history.Release {
		ms := max(float64(e.Time-inv.Time)/1e6, 0.001)
		p.latency.add(inv.Time, int64(math.Floor(math.Log10(ms)*latencyBins)), latencyClass(e.Type, f == history.Release))
	}
	if f == history.Acquire && e.Type == history.OK && e.Token != nil {
		p.tokens.add(e.Time, *e.Token, uint8(paletteIndex(e.Process)))
		p.processes[e.Process] = true
	}
}

// latencyClass packs a latency dot's outcome and shape into a cell's class.
func latencyClass(t history.Type, release bool) uint8 {
	c := uint8(slices.Index([]history.Type{history.OK, history.Fail, history.Info}, t)) << 1
	if release {
		c |= 1
	}
	return c
}

// maxCells bounds the cells a grid holds.
const maxCells = 1 << 15

// grid counts points by cell: width nanoseconds of time from origin, by height units of a
// value, and a class. Whenever it holds more than maxCells, the width (and the height,
// when scaled) doubles and neighbouring cells merge, so it holds a history of any length
// in bounded memory, the longer the coarser. Its cells are the same whenever it coarsens,
// as long as it ends with the fewest doublings that leave at most maxCells (counts):
// merging is exact, and a set of points that needs a doubling needs it with more points.
type grid struct {
	origin        int64 // the first point's time
	width, height int64
	scaled        bool
	cells         cellTable
	spare         cellTable // the table coarsen fills next, emptied, so that it allocates none
	// recent are the cells counted last, by slot, with their counts not yet in cells: a
	// history comes in the order of time, so most points fall in a cell counted just
	// before, and cells, whose every access at its size misses the processor's caches, is
	// written only as a cell leaves.
	recent []cellCount
}

type cell struct {
	x, y  int64
	class uint8
}

// hash spreads a cell's fields over the high bits, where recent and cellTable take a slot.
func (c cell) hash() uint64 {
	return (uint64(c.x)*0x9e3779b97f4a7c15^uint64(c.y))*0xc2b2ae3d27d4eb4f ^ uint64(c.class)*0x165667b19e3779f9
}

// cellCount is a cell and the points counted in it; none (n 0) is an empty slot.
type cellCount struct {
	cell
	n int
}

// recentSlots is how many cells grid.recent holds: more than a column of the latency plot has.
const recentSlots = 1 << 12

// cellTable counts points by cell, in a hash table of its own (open addressing, linear
// probing): a Go map of cells, hashing each cell field by field, took most of the plots'
// time at a million operations, in the cells made and merged at every doubling.
type cellTable struct {
	slots []cellCount // a power of two, at most three quarters full
	shift uint        // 64 less the bits of a slot's index
	len   int
}

// add counts n points in c.
func (t *cellTable) add(c cell, n int) {
	if 4*(t.len+1) > 3*len(t.slots) {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := int(c.hash() >> t.shift); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.n == 0 {
			*s, t.len = cellCount{c, n}, t.len+1
			return
		}
		if s.cell == c {
			s.n += n
			return
		}
	}
}

// grow doubles the slots, counting every cell again.
func (t *cellTable) grow() {
	old := t.slots
	size := max(2*len(old), 1<<10)
	t.slots, t.shift, t.len = make([]cellCount, size), uint(64-bits.TrailingZeros(uint(size))), 0
	for _, s := range old {
		if s.n > 0 {
			t.add(s.cell, s.n)
		}
	}
}

// clear empties the table, keeping its slots.
func (t *cellTable) clear() {
	clear(t.slots)
	t.len = 0
}

func newGrid(scaled bool) grid {
	return grid{width: int64(time.Microsecond), height: 1, scaled: scaled}
}

func (g *grid) add(t, v int64, class uint8) {
	if g.recent == nil {
		g.origin, g.recent = t, make([]cellCount, recentSlots)
	}
	c := cell{floorDiv(t-g.origin, g.width), floorDiv(v, g.height), class}
	r := &g.recent[c.hash()>>(64-12)]
	if r.n > 0 && r.cell == c {
		r.n++
		return
	}
	if r.n > 0 {
		g.cells.add(r.cell, r.n)
	}
	*r = cellCount{c, 1}
	for g.cells.len > maxCells {
		g.coarsen()
	}
}

// counts are the grid's cells with their points, every point counted, coarse enough to
// be at most maxCells, in no order.
func (g *grid) counts() []cellCount {
	g.flush()
	for g.cells.len > maxCells {
		g.coarsen()
	}
	var counts []cellCount
	for _, s := range g.cells.slots {
		if s.n > 0 {
			counts = append(counts, s)
		}
	}
	return counts
}

// flush counts the recent cells' points in cells.
func (g *grid) flush() {
	for i, r := range g.recent {
		if r.n > 0 {
			g.cells.add(r.cell, r.n)
			g.recent[i].n = 0
		}
	}
}

// coarsen doubles the cells' width (and height when scaled), merging their counts.
func (g *grid) coarsen() {
	g.flush()
	g.width *= 2
	dy := int64(1)
	if g.scaled {
		g.height, dy = g.height*2, 2
	}
	for _, s := range g.cells.slots {
		if s.n > 0 {
			g.spare.add(cell{floorDiv(s.x, 2), floorDiv(s.y, dy), s.class}, s.n)
		}
	}
	g.cells.clear()
	g.cells, g.spare = g.spare, g.cells
}

// at is the middle of a cell's times and of its values: a value itself in a cell of one.
func (g *grid) at(c cell) (t int64, v float64) {
	return g.origin + c.x*g.width + (g.width-1)/2, float64(c.y*g.height) + float64(g.height-1)/2
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// frame is what every plot of one history shares: the x axis and the faults.
type frame struct {
	c      clock
	faults []plotBand
	xticks []tick
}

func (p *Plots) frame() frame {
	c := clock{start: p.start, span: max(p.end-p.start, int64(time.Millisecond))}
	f := frame{c: c}
	for _, fault := range history.Faults(p.nemesis) {
		f.faults = append(f.faults, plotBand{X: f.x(fault.Start), Width: max(f.x(fault.Stop)-f.x(fault.Start), 1),
			Title: strings.TrimSpace(fault.Description + " " + strings.Join(fault.Targets, ","))})
	}
	f.xticks = ticks(0, float64(c.span)/1e6, func(ms float64) float64 { return plotLeft + ms*1e6/float64(c.span)*(plotRight-plotLeft) })
	return f
}

// x is time t's place, within the plot even for a cell's middle past the history's end.
func (f frame) x(t int64) float64 {
	t = min(max(t, f.c.start), f.c.start+f.c.span)
	return round1(plotLeft + float64(t-f.c.start)/float64(f.c.span)*(plotRight-plotLeft))
}

func (f frame) plot(title, caption string) plotView {
	return plotView{Title: title, Caption: caption, Faults: f.faults, XTicks: f.xticks}
}

// views are the plots to draw; none for a history without events.
func (p *Plots) views() []plotView {
	if !p.seen {
		return nil
	}
	f := p.frame()
	views := []plotView{p.latencyPlot(f), p.throughputPlot(f)}
	for _, v := range []*plotView{p.tokensPlot(f), clockPlot(f, p.nemesis)} {
		if v != nil {
			views = append(views, *v)
		}
	}
	return views
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
func (p *Plots) latencyPlot(f frame) plotView {
	v := f.plot("Lock latency", "Each acquire (circle) and release (square) at its invocation, by how long it took; log scale.")
	open := 0
	for _, inv := range p.open.All() {
		if inv.Func == history.Acquire || inv.Func == history.Release {
			open++
		}
	}
	if open > 0 {
		v.Caption += fmt.Sprintf(" %d never completed and are not drawn.", open)
	}
	g := &p.latency
	cells := g.counts()
	if len(cells) == 0 {
		return v
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, c := range cells {
		lo, hi = min(lo, c.y), max(hi, c.y)
	}
	decadeLo, decadeHi := math.Floor(float64(lo)/latencyBins), math.Ceil(float64(hi+1)/latencyBins)
	if decadeHi == decadeLo {
		decadeHi++
	}
	y := func(decades float64) float64 {
		return round1(plotBottom - (decades-decadeLo)/(decadeHi-decadeLo)*(plotBottom-plotTop))
	}
	for d := decadeLo; d <= decadeHi; d++ {
		v.YTicks = append(v.YTicks, tick{X: y(d), Text: formatMS(math.Pow(10, d))})
	}
	classes := []string{outcomeClass(history.OK), outcomeClass(history.Fail), outcomeClass(history.Info)}
	for _, c := range sortedCells(cells) {
		t, bin := g.at(c.cell)
		d := dot{X: f.x(t), Y: y(bin / latencyBins), Class: classes[c.class>>1], Square: c.class&1 == 1}
		if d.Square { // a square's place is its corner
			d.X, d.Y = d.X-2, d.Y-2
		}
		v.Dots = append(v.Dots, d)
	}
	v.Dots = distinct(&v, v.Dots)
	v.Legend = []legendItem{{Color: outcomeColors[history.OK], Text: "ok"}, {Color: outcomeColors[history.Fail], Text: "fail"},
		{Color: outcomeColors[history.Info], Text: "info (unknown)"}, {Color: "#57606a", Text: "release", Square: true}}
	return v
}

// sortedCells sorts a grid's cells in order of time, value and class, so a plot's dots
// are drawn in the same order every time.
func sortedCells(cells []cellCount) []cellCount {
	slices.SortFunc(cells, func(a, b cellCount) int {
		return cmp.Or(cmp.Compare(a.x, b.x), cmp.Compare(a.y, b.y), cmp.Compare(a.class, b.class))
	})
	return cells
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
func (p *Plots) throughputPlot(f frame) plotView {
	v := f.plot("Throughput", "Operations that completed ok, per second, by function.")
	bucket := int64(niceStep(float64(f.c.span) / 60))
	n := int(f.c.span/bucket) + 1
	counts := make([][]float64, len(plotFuncs))
	g := &p.throughput
	for _, c := range g.counts() {
		if counts[c.class] == nil {
			counts[c.class] = make([]float64, n)
		}
		t, _ := g.at(c.cell)
		counts[c.class][min(max(t-f.c.start, 0)/bucket, int64(n-1))] += float64(c.n)
	}
	perSecond := 1e9 / float64(bucket)
	top := 0.0
	for _, cs := range counts {
		if cs != nil {
			top = max(top, slices.Max(cs)*perSecond)
		}
	}
	y, yticks := linearY(top)
	v.YTicks = yticks
	for i, fn := range plotFuncs {
		if counts[i] == nil {
			continue
		}
		var pts []string
		for j, k := range counts[i] {
			mid := f.c.start + int64(j)*bucket + bucket/2
			pts = append(pts, fmt.Sprintf("%g,%g", f.x(mid), y(k*perSecond)))
		}
		v.Lines = append(v.Lines, polyline{Color: funcColors[fn], Points: strings.Join(pts, " ")})
		v.Legend = append(v.Legend, legendItem{Color: funcColors[fn], Text: string(fn)})
	}
	return v
}

// tokensPlot is the fencing token every grant carried, by client; nil without tokens.
func (p *Plots) tokensPlot(f frame) *plotView {
	g := &p.tokens
	cells := g.counts()
	if len(cells) == 0 {
		return nil
	}
	top := 0.0
	for _, c := range cells {
		_, token := g.at(c.cell)
		top = max(top, token)
	}
	v := f.plot("Fencing tokens", "The token each granted acquire carried, at its grant, by client: tokens should only go up.")
	y, yticks := linearY(top)
	v.YTicks = yticks
	for _, c := range sortedCells(cells) {
		t, token := g.at(c.cell)
		v.Dots = append(v.Dots, dot{X: f.x(t), Y: y(token), Class: paletteClass(int(c.class))})
	}
	v.Dots = distinct(&v, v.Dots)
	processes := slices.Sorted(maps.Keys(p.processes))
	for _, proc := range processes {
		v.Legend = append(v.Legend, legendItem{Color: paletteColor(proc), Text: lane{process: proc}.String()})
	}
	return &v
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

package results

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// A history far longer than a grid's cells is gathered in bounded memory, every operation
// counted, and plotted to its end.
func TestPlotsOfALongHistoryAreBoundedAndWhole(t *testing.T) {
	const cycles = 100_000
	p := NewPlots()
	index := 0
	add := func(typ history.Type, f history.Func, at int64, token *int64) {
		p.Add(history.Event{Index: index, Type: typ, Process: index / 4 % 2, Func: f, Key: "lock", Token: token, Time: at})
		index++
	}
	step := int64(time.Millisecond)
	for i := range int64(cycles) {
		at := i * 4 * step
		// Latencies spread over two decades, so the cells are many.
		add(history.Invoke, history.Acquire, at, nil)
		add(history.OK, history.Acquire, at+step/10+i%100*step/100, history.Int64(i+1))
		add(history.Invoke, history.Release, at+2*step, nil)
		add(history.OK, history.Release, at+3*step, nil)
	}
	for name, g := range map[string]*grid{"latency": &p.latency, "throughput": &p.throughput, "tokens": &p.tokens} {
		cells := g.counts()
		if len(cells) > maxCells {
			t.Errorf("%s holds %d cells, more than %d", name, len(cells), maxCells)
		}
		if g.width == int64(time.Microsecond) {
			t.Errorf("%s never grew coarser", name)
		}
		total := 0
		for _, c := range cells {
			total += c.n
		}
		if want := map[string]int{"latency": 2 * cycles, "throughput": 2 * cycles, "tokens": cycles}[name]; total != want {
			t.Errorf("%s counts %d, want %d", name, total, want)
		}
	}
	views := p.views()
	if len(views) != 3 {
		t.Fatalf("%d plots, want latency, throughput and tokens", len(views))
	}
	f := p.frame()
	last := int64(0)
	for _, d := range views[0].Dots {
		last = max(last, int64(d.X))
	}
	if want := int64(f.x(p.end)) - 5; last < want {
		t.Errorf("the latency plot's last dot is at %d, want the run's end, %d", last, want)
	}
	if top, _ := strconv.Atoi(views[2].YTicks[len(views[2].YTicks)-1].Text); top < cycles || top > 2*cycles {
		t.Errorf("the tokens plot's top tick is %d, want the last token, %d, rounded up", top, cycles)
	}
}

// A short history's cells are its own points: a grant's token is drawn at its value.
func TestGridKeepsAShortHistoryExact(t *testing.T) {
	g := newGrid(true)
	g.add(1000, 7, 0)
	g.add(1000+int64(time.Second), 9, 0)
	for _, c := range g.counts() {
		at, token := g.at(c.cell)
		if (at-1000)%int64(time.Microsecond) != (int64(time.Microsecond)-1)/2 || token != 7 && token != 9 {
			t.Errorf("cell %+v is at %d, token %g", c, at, token)
		}
	}
}

package history

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// A ByProcess holds what a map does, whatever the processes: clients, the harness and the
// nemesis, negative and large numbers.
func TestByProcessIsAMap(t *testing.T) {
	processes := []int{HarnessProcess, NemesisProcess, 0, 1, 7, denseProcesses - 3, denseProcesses - 2, -3, -1000, 1 << 40}
	r := rand.New(rand.NewPCG(1, 2))
	var b ByProcess[int]
	want := map[int]int{}
	for step := range 5000 {
		p := processes[r.IntN(len(processes))]
		switch r.IntN(3) {
		case 0, 1:
			b.Set(p, step)
			want[p] = step
		default:
			b.Delete(p)
			delete(want, p)
		}
		w, had := want[p]
		if v, ok := b.Get(p); v != w || ok != had {
			t.Fatalf("step %d: process %d has %d, %v; want %d, %v", step, p, v, ok, w, had)
		}
		if b.Len() != len(want) {
			t.Fatalf("step %d: %d processes, want %d", step, b.Len(), len(want))
		}
	}
	if got := maps.Collect(b.All()); !maps.Equal(got, want) {
		t.Errorf("All gives %v, want %v", got, want)
	}
	for _, p := range processes {
		v, ok := b.Get(p)
		if w, had := want[p]; ok != had || v != w {
			t.Errorf("process %d: %d, %v; want %d, %v", p, v, ok, w, had)
		}
	}
}

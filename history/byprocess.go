package history

import "iter"

// ByProcess maps processes to values, as a map[int]T would. A run's processes are its
// clients, numbered from 0, the harness and the nemesis: their values lie in a slice by
// number, any other process's in a map. Each operation looked its process up in maps and
// deleted it again in the reader, the stream, the counts and the plots, a tenth of what
// check of a long history spent. Its zero value is empty and ready to use.
type ByProcess[T any] struct {
	dense []processValue[T] // by process - HarnessProcess, for the first denseProcesses
	other map[int]T
	n     int
}

type processValue[T any] struct {
	value T
	set   bool
}

// denseProcesses is how many processes, from HarnessProcess on, are kept in the slice:
// more than the clients a run has.
const denseProcesses = 1 << 12

// place is where process lies in dense, and whether it lies there at all.
func place(process int) (int, bool) {
	i := process - HarnessProcess
	return i, i >= 0 && i < denseProcesses
}

// Get is process's value, and whether it has one.
func (b *ByProcess[T]) Get(process int) (T, bool) {
	if i, ok := place(process); ok {
		if i < len(b.dense) {
			return b.dense[i].value, b.dense[i].set
		}
		var none T
		return none, false
	}
	v, ok := b.other[process]
	return v, ok
}

// Set gives process the value v.
func (b *ByProcess[T]) Set(process int, v T) {
	i, ok := place(process)
	switch {
	case !ok:
		if b.other == nil {
			b.other = map[int]T{}
		}
		if _, had := b.other[process]; !had {
			b.n++
		}
		b.other[process] = v
		return
	case i >= len(b.dense):
		b.dense = append(b.dense, make([]processValue[T], i+1-len(b.dense))...)
	}
	if !b.dense[i].set {
		b.n++
	}
	b.dense[i] = processValue[T]{v, true}
}

// Delete takes process's value away.
func (b *ByProcess[T]) Delete(process int) {
	i, ok := place(process)
	switch {
	case !ok:
		if _, had := b.other[process]; had {
			b.n--
			delete(b.other, process)
		}
	case i < len(b.dense) && b.dense[i].set:
		b.n--
		b.dense[i] = processValue[T]{}
	}
}

// Len is how many processes have a value.
func (b *ByProcess[T]) Len() int { return b.n }

// All is every process with its value, the harness, the nemesis and the clients first, in
// the order of their numbers. A value may be set again or deleted on the way.
func (b *ByProcess[T]) All() iter.Seq2[int, T] {
	return func(yield func(int, T) bool) {
		for i := range b.dense {
			if v := b.dense[i]; v.set && !yield(i+HarnessProcess, v.value) {
				return
			}
		}
		for p, v := range b.other {
			if !yield(p, v) {
				return
			}
		}
	}
}

package lazydisk

import (
	"errors"
	"io"
	"slices"
	"sort"
)

// extents is what one file has been given since its last sync and does not yet hold on
// disk: the bytes written, kept in memory over the durable file like a page cache, a
// pending truncate, and the size the file has now. It knows nothing of FUSE or locks.
type extents struct {
	spans []span // sorted by offset, neither overlapping nor touching
	keep  int64  // durable bytes at keep and past it were cut off by a pending truncate
	cut   bool   // keep is below the durable size: a sync must truncate first
	size  int64  // the file's size as its readers see it
	dirty int64  // bytes held in spans
}

// A span is a run of written bytes at off.
type span struct {
	off  int64
	data []byte
}

func (s span) end() int64 { return s.off + int64(len(s.data)) }

// newExtents starts the pending state of a file whose durable size is size.
func newExtents(size int64) *extents {
	return &extents{keep: size, size: size}
}

// write records p written at off.
func (e *extents) write(off int64, p []byte) {
	if len(p) == 0 {
		return
	}
	end := off + int64(len(p))
	e.size = max(e.size, end)
	// spans[i:j] overlap or touch [off, end) and become one span.
	i := sort.Search(len(e.spans), func(k int) bool { return e.spans[k].end() >= off })
	j := i
	for j < len(e.spans) && e.spans[j].off <= end {
		j++
	}
	if i == j {
		e.spans = slices.Insert(e.spans, i, span{off: off, data: slices.Clone(p)})
		e.dirty += int64(len(p))
		return
	}
	start := min(off, e.spans[i].off)
	last := max(end, e.spans[j-1].end())
	var buf []byte
	if e.spans[i].off == start {
		// Grow the first span in place: appending to a file then costs amortized copies.
		buf = e.spans[i].data
		buf = slices.Grow(buf, int(last-start)-len(buf))[:last-start]
	} else {
		buf = make([]byte, last-start)
		copy(buf[e.spans[i].off-start:], e.spans[i].data)
	}
	for _, s := range e.spans[i+1 : j] {
		copy(buf[s.off-start:], s.data)
	}
	copy(buf[off-start:], p)
	for _, s := range e.spans[i:j] {
		e.dirty -= int64(len(s.data))
	}
	e.dirty += int64(len(buf))
	e.spans[i] = span{off: start, data: buf}
	e.spans = slices.Delete(e.spans, i+1, j)
}

// truncate records the file cut or extended to size.
func (e *extents) truncate(size int64) {
	if size < e.keep {
		e.keep, e.cut = size, true
	}
	i := sort.Search(len(e.spans), func(k int) bool { return e.spans[k].end() > size })
	if i < len(e.spans) && e.spans[i].off < size {
		s := &e.spans[i]
		e.dirty -= s.end() - size
		s.data = s.data[:size-s.off]
		i++
	}
	for _, s := range e.spans[i:] {
		e.dirty -= int64(len(s.data))
	}
	e.spans = e.spans[:i]
	e.size = size
}

// readAt reads what a reader sees at off into p: the durable bytes, read from durable,
// overlaid with the pending ones. It reads nothing past the file's size.
func (e *extents) readAt(p []byte, off int64, durable io.ReaderAt) (int, error) {
	if off >= e.size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), e.size-off)]
	got := 0
	if off < e.keep {
		var err error
		got, err = durable.ReadAt(p[:min(int64(len(p)), e.keep-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
	clear(p[got:])
	end := off + int64(len(p))
	i := sort.Search(len(e.spans), func(k int) bool { return e.spans[k].end() > off })
	for ; i < len(e.spans) && e.spans[i].off < end; i++ {
		s := e.spans[i]
		from := max(s.off, off)
		copy(p[from-off:], s.data[from-s.off:])
	}
	return len(p), nil
}

// durableFile is where a sync writes pending state to.
type durableFile interface {
	io.WriterAt
	Truncate(size int64) error
}

// flush writes the pending state to f, whose content must be the durable one: the
// pending truncate first, then the written bytes, then the size.
func (e *extents) flush(f durableFile) error {
	if e.cut {
		if err := f.Truncate(e.keep); err != nil {
			return err
		}
	}
	end := e.keep
	for _, s := range e.spans {
		if _, err := f.WriteAt(s.data, s.off); err != nil {
			return err
		}
		end = max(end, s.end())
	}
	if e.size > end {
		return f.Truncate(e.size)
	}
	return nil
}

package lazydisk

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// memFile is a durable file in memory, for extents to read from and flush to.
type memFile struct{ data []byte }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, nil
	}
	return copy(p, m.data[off:]), nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-int64(len(m.data)))...)
	}
	return copy(m.data[off:], p), nil
}

func (m *memFile) Truncate(size int64) error {
	if size <= int64(len(m.data)) {
		m.data = m.data[:size]
	} else {
		m.data = append(m.data, make([]byte, size-int64(len(m.data)))...)
	}
	return nil
}

// TestExtentsAgainstModel runs seeded random writes, truncates, reads and flushes on
// extents over a durable file and on a plain byte slice, and holds them to agree: on
// every read, on the size, on the dirty count and, after each flush, on the durable file.
func TestExtentsAgainstModel(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		durable := &memFile{data: randomBytes(rng, rng.IntN(300))}
		model := bytes.Clone(durable.data)
		e := newExtents(int64(len(durable.data)))
		for step := range 400 {
			switch op := rng.IntN(10); {
			case op < 5:
				off := int64(rng.IntN(400))
				p := randomBytes(rng, rng.IntN(80))
				e.write(off, p)
				if len(p) == 0 {
					break // a write of nothing does not extend the file
				}
				if end := off + int64(len(p)); end > int64(len(model)) {
					model = append(model, make([]byte, end-int64(len(model)))...)
				}
				copy(model[off:], p)
			case op < 7:
				size := int64(rng.IntN(400))
				e.truncate(size)
				if size <= int64(len(model)) {
					model = model[:size]
				} else {
					model = append(model, make([]byte, size-int64(len(model)))...)
				}
			case op < 9:
				off := int64(rng.IntN(450))
				p := make([]byte, rng.IntN(120))
				n, err := e.readAt(p, off, durable)
				if err != nil {
					t.Fatalf("seed %d step %d: read: %v", seed, step, err)
				}
				var want []byte
				if off < int64(len(model)) {
					want = model[off:min(off+int64(len(p)), int64(len(model)))]
				}
				if !bytes.Equal(p[:n], want) {
					t.Fatalf("seed %d step %d: read %d at %d: got %x, want %x", seed, step, len(p), off, p[:n], want)
				}
			default:
				if err := e.flush(durable); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(durable.data, model) {
					t.Fatalf("seed %d step %d: flushed %x, want %x", seed, step, durable.data, model)
				}
				e = newExtents(int64(len(durable.data)))
			}
			if e.size != int64(len(model)) {
				t.Fatalf("seed %d step %d: size %d, want %d", seed, step, e.size, len(model))
			}
			var held int64
			for k, s := range e.spans {
				held += int64(len(s.data))
				if k > 0 && e.spans[k-1].end() >= s.off {
					t.Fatalf("seed %d step %d: spans %d and %d overlap or touch", seed, step, k-1, k)
				}
			}
			if held != e.dirty {
				t.Fatalf("seed %d step %d: dirty %d, spans hold %d", seed, step, e.dirty, held)
			}
		}
	}
}

// TestExtentsAppendGrowsInPlace: appending extends one span, as a log file's writes do.
func TestExtentsAppendGrowsInPlace(t *testing.T) {
	e := newExtents(0)
	for i := range 1000 {
		e.write(int64(i*100), bytes.Repeat([]byte{byte(i)}, 100))
	}
	if len(e.spans) != 1 || e.dirty != 100_000 || e.size != 100_000 {
		t.Fatalf("spans %d, dirty %d, size %d; want 1 span of 100000 bytes", len(e.spans), e.dirty, e.size)
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.IntN(255) + 1)
	}
	return p
}

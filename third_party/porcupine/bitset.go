package porcupine

// From the MurmurHash3 64-bit finalizer
const prime uint64 = 0xff51afd7ed558ccd

// bitset is the set of linearized operations. It keeps track of the window of words that
// can differ between the sets a search meets: every word below lo is full and every word
// from hi on is empty, because the search linearizes operations roughly in the order they
// were called. The cache keeps only the window (see snapshot), so what it holds per entry
// grows with the operations open at once, not with the history; hashing and comparing
// cost the same. (Upstream clones and hashes the whole set on every step, which is
// quadratic in time and memory for long histories.)
type bitset struct {
	words  []uint64
	bits   uint
	lo, hi int
}

// data layout:
// bits 0-63 are in words[0], the next are in words[1], etc.

func newBitset(bits uint) bitset {
	extra := uint(0)
	if bits%64 != 0 {
		extra = 1
	}
	chunks := bits/64 + extra
	return bitset{words: make([]uint64, chunks), bits: bits}
}

func bitsetIndex(pos uint) (uint, uint) {
	return pos / 64, pos % 64
}

// full is what word i holds when every bit in it is set.
func (b *bitset) full(i int) uint64 {
	if i == len(b.words)-1 && b.bits%64 != 0 {
		return 1<<(b.bits%64) - 1
	}
	return ^uint64(0)
}

func (b *bitset) set(pos uint) {
	major, minor := bitsetIndex(pos)
	i := int(major)
	b.words[i] |= 1 << minor
	if i >= b.hi {
		b.hi = i + 1
	}
	for b.lo < len(b.words) && b.words[b.lo] == b.full(b.lo) {
		b.lo++
	}
}

func (b *bitset) clear(pos uint) {
	major, minor := bitsetIndex(pos)
	i := int(major)
	b.words[i] &^= 1 << minor
	if i < b.lo {
		b.lo = i
	}
	for b.hi > 0 && b.words[b.hi-1] == 0 {
		b.hi--
	}
}

// window is the words that are neither all full (below) nor all empty (above).
func (b *bitset) window() []uint64 {
	if b.hi <= b.lo {
		return nil
	}
	return b.words[b.lo:b.hi]
}

func (b *bitset) hash() uint64 {
	h := uint64(b.lo) * prime
	for _, v := range b.window() {
		h ^= v
		h *= prime
	}
	return h
}

// snapshot is a bitset as the cache keeps it: its window and where that starts.
type snapshot struct {
	lo    int
	words []uint64
}

func (b *bitset) snapshot() snapshot {
	return snapshot{lo: b.lo, words: append([]uint64(nil), b.window()...)}
}

// equal says whether b holds the set s was taken of. The window is canonical (lo is the
// number of leading full words, hi one past the last word not empty), so equal sets have
// equal windows.
func (s snapshot) equal(b *bitset) bool {
	w := b.window()
	if s.lo != b.lo || len(s.words) != len(w) {
		return false
	}
	for i := range w {
		if s.words[i] != w[i] {
			return false
		}
	}
	return true
}

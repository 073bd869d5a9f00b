package porcupine

import (
	"math/rand"
	"testing"
)

// The windowed bitset answers as a plain one would: after any sequence of sets and clears
// its hash and its snapshots' equality depend only on the bits, and its window is canonical.
func TestBitsetWindowIsCanonical(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, bits := range []uint{1, 63, 64, 65, 200, 1000} {
		b := newBitset(bits)
		plain := make([]bool, bits)
		seen := map[string]snapshot{}
		hashes := map[string]uint64{}
		for step := 0; step < 20000; step++ {
			// mostly near a moving frontier, as a search goes, now and then anywhere
			pos := uint(rng.Intn(int(bits)))
			if rng.Intn(4) > 0 {
				frontier := uint(step) * bits / 20000
				pos = min(frontier+uint(rng.Intn(70)), bits-1)
			}
			if rng.Intn(3) > 0 {
				b.set(pos)
				plain[pos] = true
			} else {
				b.clear(pos)
				plain[pos] = false
			}
			// the bits as text, the key of the set seen: grown in place (adding to a string
			// copies it whole, which was nearly all of the test's time)
			text := make([]byte, len(plain))
			for i, v := range plain {
				text[i] = '.'
				if v {
					text[i] = byte('0' + i%10)
				}
				major, minor := bitsetIndex(uint(i))
				if (b.words[major]>>minor&1 == 1) != v {
					t.Fatalf("bits %d, step %d: bit %d is %v, want %v", bits, step, i, !v, v)
				}
			}
			for i := 0; i < b.lo; i++ {
				if b.words[i] != b.full(i) {
					t.Fatalf("bits %d, step %d: word %d below lo %d is not full", bits, step, i, b.lo)
				}
			}
			if b.lo < len(b.words) && b.words[b.lo] == b.full(b.lo) || b.hi > 0 && b.words[b.hi-1] == 0 {
				t.Fatalf("bits %d, step %d: window [%d, %d) is not the narrowest", bits, step, b.lo, b.hi)
			}
			for i := b.hi; i < len(b.words); i++ {
				if b.words[i] != 0 {
					t.Fatalf("bits %d, step %d: word %d from hi %d on is not empty", bits, step, i, b.hi)
				}
			}
			key := string(text)
			if s, ok := seen[key]; ok && (!s.equal(&b) || hashes[key] != b.hash()) {
				t.Fatalf("bits %d, step %d: the same set compares or hashes differently", bits, step)
			}
			for other, s := range seen {
				if other != key && s.equal(&b) {
					t.Fatalf("bits %d, step %d: different sets compare equal", bits, step)
				}
				break
			}
			seen[key], hashes[key] = b.snapshot(), b.hash()
		}
	}
}

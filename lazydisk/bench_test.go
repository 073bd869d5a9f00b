package lazydisk

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAppendFsync appends 100-byte records with an fsync after every 100th, as a
// database's log does, on a lazy disk and directly on its kind of backing directory, so
// that the cost of the filesystem can be read off: compare the ops/s.
func BenchmarkAppendFsync(b *testing.B) {
	record := append(bytes.Repeat([]byte("r"), 99), '\n')
	for _, where := range []string{"direct", "mount"} {
		b.Run(where, func(b *testing.B) {
			dir := b.TempDir()
			if where == "mount" {
				_, _, dir = mounted(b)
			}
			f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(record)))
			for i := 1; b.Loop(); i++ {
				if _, err := f.Write(record); err != nil {
					b.Fatal(err)
				}
				if i%100 == 0 {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

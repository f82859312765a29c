//go:build linux

package cuda

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// BenchmarkRepack repacks a 235 MB Q4_0 matrix from a file mapped afresh
// each time (in the page cache, as a load reads a model just written or
// read before) into a buffer already faulted in, as a load does after its
// first weight: in row ranges side by side (ranges, what StackedWeight
// does), and on one goroutine (serial).
func BenchmarkRepack(b *testing.B) {
	const rows, K = 28672 * 4, 4096
	n := rows * K / 32 * 18
	path := filepath.Join(b.TempDir(), "matrix")
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	if err := os.WriteFile(path, src, 0o644); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, rows*repackedRow(quant.Q4_0, K))
	for _, c := range []struct {
		name string
		fn   func(typ quant.Type, dst, data []byte, rows, K int64)
	}{{"ranges", repackInto}, {"serial", repackRows}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				data, err := syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ, syscall.MAP_SHARED)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				c.fn(quant.Q4_0, dst, data, rows, K)
				if err := syscall.Munmap(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

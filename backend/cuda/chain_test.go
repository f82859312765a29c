package cuda

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/latent-ai/latent/quant"
)

// BenchmarkLaunchChain reports what one kernel of a recorded one-token step
// costs on the device. It times replayed steps of n and 2n launches of the
// same kernel and divides the difference by n, so that the step's fixed
// costs (the graph launch, the sync) cancel out. The kernels:
//
//   - noop, on one block or on mmv1's grid: it only waits for the kernel
//     before it (PDL), so this is the hand-over alone;
//   - product: mmv1 at the o projection's shape (2048 × 2048, Q4_0), its
//     input rounded by every block, as decode runs it;
//   - normed-product: the same with an RMS norm folded in (q_a, kv_a).
//
// Run it with
//
//	go test -run '^$' -bench LaunchChain ./backend/cuda
func BenchmarkLaunchChain(bm *testing.B) {
	if err := Available(); err != nil {
		bm.Skipf("no GPU here: %v", err)
	}
	b, err := New(0)
	if err != nil {
		bm.Fatal(err)
	}
	defer b.Close()
	const K, N = 2048, 2048
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	bytesOf := func(v []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)) }
	rowBytes, err := quant.Q4_0.RowBytes(K)
	if err != nil {
		bm.Fatal(err)
	}
	data := make([]byte, rowBytes*N)
	if err := quant.Quantize(quant.Q4_0, random(K*N), data); err != nil {
		bm.Fatal(err)
	}
	w, err := b.Weight("w", quant.Q4_0, []uint64{K, N}, data)
	if err != nil {
		bm.Fatal(err)
	}
	ones := make([]float32, K)
	for i := range ones {
		ones[i] = 1
	}
	nw, err := b.Weight("nw", quant.F32, []uint64{K}, bytesOf(ones))
	if err != nil {
		bm.Fatal(err)
	}
	table, err := b.Weight("table", quant.F32, []uint64{K, 1}, bytesOf(random(K)))
	if err != nil {
		bm.Fatal(err)
	}
	if _, err := b.Cache(1, 64, 576); err != nil {
		bm.Fatal(err)
	}
	for _, c := range []struct {
		name string
		step func(n int)
	}{
		{"noop-1-block", func(n int) {
			for range n {
				b.record("noop", grid1(1), [3]uint32{256, 1, 1}, 0)
			}
		}},
		{"noop-mmv1-grid", func(n int) {
			for range n {
				b.record("noop", grid1(mmv1BlocksPerSM*b.info.SMs), [3]uint32{256, 1, 1}, 0)
			}
		}},
		{"product", func(n int) {
			x, y := b.Tensor(1, K), b.Tensor(1, N)
			b.Embed(x, table)
			for range n {
				b.MatMul(y, w, x)
			}
		}},
		{"normed-product", func(n int) {
			x, h, y := b.Tensor(1, K), b.Tensor(1, K), b.Tensor(1, N)
			b.Embed(x, table)
			for range n {
				b.RMSNorm(h, x, nw, 1e-6)
				b.MatMul(y, w, h)
			}
		}},
	} {
		bm.Run(c.name, func(bm *testing.B) {
			const n = 100
			pass := func(n int) time.Duration {
				start := time.Now()
				b.Begin([]int32{0}, []int32{0})
				c.step(n)
				b.flushPass()
				return time.Since(start)
			}
			pass(n) // record and instantiate both graphs
			pass(2 * n)
			var d time.Duration
			for range bm.N {
				d += pass(2*n) - pass(n)
			}
			perKernel := d.Seconds() / float64(bm.N*n)
			bm.ReportMetric(perKernel*1e6, "µs/kernel")
			if c.name == "product" || c.name == "normed-product" {
				bm.ReportMetric(float64(len(data))/perKernel/1e9, "GB/s")
			}
			bm.ReportMetric(0, "ns/op")
		})
	}
}

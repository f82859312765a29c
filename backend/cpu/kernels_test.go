package cpu

import (
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// randomRow quantizes n random values to typ.
func randomRow(t testing.TB, r *rand.Rand, typ quant.Type, n int) []byte {
	t.Helper()
	size, err := typ.RowBytes(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if err := quant.Quantize(typ, randn(r, n, 0.05), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// randomActs quantizes T random rows of k values for weights of typ.
func randomActs(r *rand.Rand, typ quant.Type, T, k int) *acts {
	x := randn(r, T*k, 1)
	a := &acts{}
	a.prepare(&tensor{data: x, rows: T, cols: k, stride: k}, 0, k, typ, true)
	return a
}

// Every SIMD kernel agrees with the pure-Go integer kernel bit for bit (they
// compute in the same float order, ggml's), one token at a time, four at a
// time, four rows at a time; the Go kernels agree with a float64 dot product
// of the dequantized weights and rounded activations.
func TestKernelsAgainstGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	t.Logf("kernel set in use: %s", kernelSet)
	seen := map[string]bool{}
	for _, force := range []string{"", "avx2"} {
		ks, name := chooseKernels(force)
		if !seen[name] {
			seen[name] = true
			t.Run(name, func(t *testing.T) { testKernelSet(t, r, ks) })
		}
	}
}

func testKernelSet(t *testing.T, r *rand.Rand, ks map[quant.Type]kernel) {
	for typ, gen := range genericKernels {
		k := ks[typ]
		sizes := []int{256, 512, 2048 + 256}
		if typ.BlockSize() == 32 {
			sizes = append(sizes, 32, 64, 96, 192) // fewer blocks than a SIMD step
		}
		for _, n := range sizes {
			const R, T = 8, 8
			var w []byte
			for i := 0; i < R; i++ {
				w = append(w, randomRow(t, r, typ, n)...)
			}
			rb := len(w) / R
			if typ == quant.Q8_0 { // the most negative int8, which VPABSB must handle
				w[2], w[len(w)-1] = 0x80, 0x80
			}
			extremeRows(typ, w, rb)
			deq := make([]float32, R*n)
			if err := quant.Dequantize(typ, w, deq); err != nil {
				t.Fatal(err)
			}
			a := randomActs(r, typ, T, n)
			if typ != quant.Q8_0 {
				// Tokens 0 and 1 at the int8 extremes: with the rows of
				// extremeRows, the largest sums the kernels' int16 lanes
				// must hold.
				for tk, v := range []int8{127, -127} {
					row := a.row(tk)
					for i := range row.qs {
						row.qs[i] = v
					}
					for b := range row.b8 {
						row.b8[b] = 8 * 32 * int32(v)
					}
					for b := range row.bsums {
						row.bsums[b] = 16 * int16(v)
					}
				}
			}
			rounded := make([]float32, T*n)
			for tk := 0; tk < T; tk++ {
				row := a.row(tk)
				for b := range row.d {
					bs := len(row.qs) / len(row.d)
					for i := 0; i < bs; i++ {
						rounded[tk*n+b*bs+i] = row.d[b] * float32(row.qs[b*bs+i])
					}
				}
			}
			for ri := 0; ri < R; ri++ {
				wr := w[ri*rb : (ri+1)*rb]
				var four, four2 [4]float32 // tokens 1..4, and 1, 3, 5, 7
				if k.four != nil {
					k.four(wr, a, 1, 1, &four)
					k.four(wr, a, 1, 2, &four2)
				}
				for tk := 0; tk < T; tk++ {
					var want float64
					for i := 0; i < n; i++ {
						want += float64(deq[ri*n+i]) * float64(rounded[tk*n+i])
					}
					g := gen.one(wr, a.row(tk))
					if tol := 1e-3 * (1 + math.Abs(want)); math.Abs(float64(g)-want) > tol {
						t.Errorf("%s n=%d row %d token %d: Go kernel %g, float64 %g", typ, n, ri, tk, g, want)
					}
					if s := k.one(wr, a.row(tk)); s != g {
						t.Errorf("%s n=%d row %d token %d: SIMD kernel %g, Go kernel %g", typ, n, ri, tk, s, g)
					}
					if k.four != nil && tk >= 1 && tk < 5 && four[tk-1] != g {
						t.Errorf("%s n=%d row %d token %d: four-token kernel %g, Go kernel %g", typ, n, ri, tk, four[tk-1], g)
					}
					if k.four != nil && tk%2 == 1 && four2[tk/2] != g {
						t.Errorf("%s n=%d row %d token %d: four-token kernel, step 2: %g, Go kernel %g", typ, n, ri, tk, four2[tk/2], g)
					}
				}
			}
			packed := w
			if k.pack8 != nil {
				packed = make([]byte, len(w))
				k.pack8(packed, w, rb)
			}
			var out [16]float32
			for tk := 0; k.rows4 != nil && tk < T; tk++ {
				k.rows4(w, rb, a.row(tk), &out)
				for ri := 0; ri < 4; ri++ {
					if g := gen.one(w[ri*rb:(ri+1)*rb], a.row(tk)); out[ri] != g {
						t.Errorf("%s n=%d row %d token %d: four-row kernel %g, Go kernel %g", typ, n, ri, tk, out[ri], g)
					}
				}
			}
			for tk := 0; k.rows8 != nil && tk < T; tk++ {
				k.rows8(packed, rb, a.row(tk), &out)
				for ri := 0; ri < 8; ri++ {
					if g := gen.one(w[ri*rb:(ri+1)*rb], a.row(tk)); out[ri] != g {
						t.Errorf("%s n=%d row %d token %d: eight-row kernel %g, Go kernel %g", typ, n, ri, tk, out[ri], g)
					}
				}
			}
			// The tiles for tokens 0..3 and, a step of 2, tokens 1, 3, 5, 7.
			for _, ts := range [][2]int{{0, 1}, {1, 2}} {
				if k.tile8 != nil {
					var out8 [32]float32
					k.tile8(packed, rb, a, ts[0], ts[1], &out8)
					for i, v := range out8 {
						tk, ri := ts[0]+i/8*ts[1], i%8
						if g := gen.one(w[ri*rb:(ri+1)*rb], a.row(tk)); v != g {
							t.Errorf("%s n=%d row %d token %d: 8×4 tile kernel %g, Go kernel %g", typ, n, ri, tk, v, g)
						}
					}
				}
				if k.tile != nil {
					k.tile(w, rb, a, ts[0], ts[1], &out)
					for i, v := range out {
						tk, ri := ts[0]+i/4*ts[1], i%4
						if g := gen.one(w[ri*rb:(ri+1)*rb], a.row(tk)); v != g {
							t.Errorf("%s n=%d row %d token %d: tile kernel %g, Go kernel %g", typ, n, ri, tk, v, g)
						}
					}
				}
			}
		}
	}
}

// extremeRows sets weight rows (rb bytes each, in w) to the largest values
// their encoding holds, keeping the f16 scales: row 1 every quant at its
// maximum (Q4_0 nibbles 15; Q4_K and Q5_K every 6-bit scale and min 63 and
// every value 15 or 31; Q6_K every value 63 with scale 127) and, for Q6_K,
// row 2 every value 0 (−32) with scale −128.
func extremeRows(typ quant.Type, w []byte, rb int) {
	set := func(row, bs, from, to int, v byte) {
		for b := row * rb; b < (row+1)*rb; b += bs {
			for i := b + from; i < b+to; i++ {
				w[i] = v
			}
		}
	}
	switch typ {
	case quant.Q4_0:
		set(1, 18, 2, 18, 0xff)
	case quant.Q4_K:
		set(1, 144, 4, 144, 0xff)
	case quant.Q5_K:
		set(1, 176, 4, 176, 0xff)
	case quant.Q6_K:
		set(1, 210, 0, 192, 0xff)
		set(1, 210, 192, 208, 0x7f)
		set(2, 210, 0, 192, 0)
		set(2, 210, 192, 208, 0x80)
	}
}

// The AVX2 kernels use only the sixteen registers VEX can encode: avo's
// allocator reaches X16-X31/Y16-Y31 when a kernel keeps more than sixteen
// vectors live, which the assembler would encode as AVX-512 (EVEX) and an
// AVX2-only CPU would fault on. Only the VNNI kernels may use them.
func TestAsmRegistersAVX2(t *testing.T) {
	src, err := os.ReadFile("dot_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	high := regexp.MustCompile(`\b[XYZ](1[6-9]|2[0-9]|3[01])\b`)
	fn := ""
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "TEXT ") {
			fn = line
		}
		if !strings.Contains(fn, "VNNI") && high.MatchString(line) {
			t.Errorf("dot_amd64.s:%d (%s): %s", i+1, fn, strings.TrimSpace(line))
		}
	}
}

// The attention's vector operations in assembly agree with the Go ones bit
// for bit, at lengths with and without a tail.
func TestVecOpsAgainstGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	dotS, axpyS := chooseVecOps("")
	for _, n := range []int{1, 8, 31, 32, 64, 100, 576} {
		x, y := randn(r, n, 1), randn(r, n, 1)
		if got, want := dotS(x, y), dotF32VecGo(x, y); got != want {
			t.Errorf("dotF32Vec n=%d: %g, Go %g", n, got, want)
		}
		o1 := randn(r, n, 1)
		o2 := append([]float32(nil), o1...)
		axpyS(o1, x, 0.37)
		fmaAxpyGo(o2, x, 0.37)
		for i := range o1 {
			if o1[i] != o2[i] {
				t.Fatalf("fmaAxpy n=%d [%d]: %g, Go %g", n, i, o1[i], o2[i])
			}
		}
	}
}

// The assembly Q8_0 activation quantizer gives the Go one's bits, on
// random blocks of several magnitudes, an all-zero block and tiny values.
func TestQuantQ8_0AgainstGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	f := chooseQuantQ8_0("")
	const nb = 64
	x := randn(r, 32*nb, 1)
	for b := 0; b < nb; b++ {
		scale := float32(math.Pow(10, float64(b%12-6)))
		for i := 32 * b; i < 32*b+32; i++ {
			x[i] *= scale
		}
	}
	clear(x[32*5 : 32*6])
	x[32*7+3] = -x[32*7+3] * 1000 // the extreme value negative
	qs1, qs2 := make([]int8, 32*nb), make([]int8, 32*nb)
	d1, d2 := make([]float32, nb), make([]float32, nb)
	b1, b2 := make([]int32, nb), make([]int32, nb)
	f(x, qs1, d1, b1)
	quantRowQ8_0Go(x, qs2, d2, b2)
	for b := 0; b < nb; b++ {
		if d1[b] != d2[b] || b1[b] != b2[b] {
			t.Errorf("block %d: d %g b8 %d, Go %g %d", b, d1[b], b1[b], d2[b], b2[b])
		}
	}
	for i := range qs1 {
		if qs1[i] != qs2[i] {
			t.Fatalf("value %d: %d, Go %d", i, qs1[i], qs2[i])
		}
	}
}

// The quantized activations round exactly as roundQ8_0 and roundQ8K do.
func TestPreparedActsMatchRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q6_K} {
		const T, n = 3, 512
		x := randn(r, T*n, 2)
		a := &acts{}
		a.prepare(&tensor{data: x, rows: T, cols: n, stride: n}, 0, n, typ, true)
		want := make([]float32, n)
		for tk := 0; tk < T; tk++ {
			actRounding(typ)(x[tk*n:(tk+1)*n], want)
			row := a.row(tk)
			bs := n / len(row.d)
			for i := range want {
				if got := row.d[i/bs] * float32(row.qs[i]); got != want[i] {
					t.Fatalf("%s token %d value %d: %g, rounding gives %g", typ, tk, i, got, want[i])
				}
			}
		}
	}
}

// BenchmarkKernel reports the weight bytes each kernel streams per second
// for a 2048×2048 matrix: one token (decode, memory-bound) and 64 tokens
// (prefill, compute-bound; GFLOP/s counts a multiply and an add per weight
// per token).
func BenchmarkKernel(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		for _, T := range []int{1, 64} {
			const in, out = 2048, 2048
			c := New(0)
			w, _ := newWeight(b, c, typ, randn(r, in*out, 0.05), in, out)
			x := fill(c, T, in, randn(r, T*in, 1))
			dst := c.Tensor(T, out)
			b.Run(typ.String()+"/T="+strconv.Itoa(T), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					c.MatMul(dst, w, x)
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(len(wt(w).data))*float64(b.N)/sec/1e9, "GB/s")
				b.ReportMetric(2*in*out*float64(T)*float64(b.N)/sec/1e9, "GFLOP/s")
			})
			c.Close()
		}
	}
}

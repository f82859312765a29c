package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

// The oracle for every operation is a direct float64 evaluation of its
// definition on dequantized weights, written without the backend's helpers.

func randn(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// newWeight quantizes vals to typ and adopts them; it returns the weight and
// its dequantized values.
func newWeight(t testing.TB, c *CPU, typ quant.Type, vals []float32, dims ...uint64) (backend.Weight, []float32) {
	t.Helper()
	var data []byte
	if typ == quant.F32 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))
	} else {
		size, err := typ.RowBytes(int64(len(vals)))
		if err != nil {
			t.Fatal(err)
		}
		data = make([]byte, size)
		if err := quant.Quantize(typ, vals, data); err != nil {
			t.Fatal(err)
		}
	}
	deq := make([]float32, len(vals))
	if err := quant.Dequantize(typ, data, deq); err != nil {
		t.Fatal(err)
	}
	w, err := c.Weight("w", typ, dims, data)
	if err != nil {
		t.Fatal(err)
	}
	return w, deq
}

func fill(c *CPU, rows, cols int, vals []float32) backend.Tensor {
	x := c.Tensor(rows, cols)
	copy(x.(*tensor).data, vals)
	return x
}

func read(c *CPU, x backend.Tensor) []float32 {
	out := make([]float32, x.Rows()*x.Cols())
	c.Read(x, out)
	return out
}

func closeTo(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

func TestMatMulEveryType(t *testing.T) {
	c := New(2)
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 2))
	const in, out, T = 512, 24, 3
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			w, deq := newWeight(t, c, typ, randn(r, in*out, 0.05), in, out)
			xs := randn(r, T*in, 1)
			x := fill(c, T, in, xs)
			dst := fill(c, T, out, randn(r, T*out, 1))
			before := read(c, dst)
			c.MatMulAdd(dst, w, x)
			got := read(c, dst)
			c.MatMul(dst, w, x)
			set := read(c, dst)
			round := actRounding(typ)
			want, wantSet := make([]float64, T*out), make([]float64, T*out)
			for tk := 0; tk < T; tk++ {
				a := append([]float32(nil), xs[tk*in:(tk+1)*in]...)
				if round != nil {
					round(a, a)
				}
				for o := 0; o < out; o++ {
					var s float64
					for i := 0; i < in; i++ {
						s += float64(deq[o*in+i]) * float64(a[i])
					}
					wantSet[tk*out+o] = s
					want[tk*out+o] = s + float64(before[tk*out+o])
				}
			}
			closeTo(t, "MatMul", set, wantSet, 1e-4)
			closeTo(t, "MatMulAdd", got, want, 1e-4)
		})
	}
}

// The activation roundings must be what ggml does: 8-bit blocks whose
// largest value maps to ±127 exactly.
func TestActivationRounding(t *testing.T) {
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i%32) - 10.3
	}
	x[7] = -50
	out := make([]float32, 256)
	roundQ8_0(x, out)
	if d := quant.F16ToF32(quant.F32ToF16(float32(20.7) / 127)); out[63] != d*127 {
		t.Errorf("Q8_0: block max 20.7 → %g, want 127·f16(20.7/127) = %g", out[63], d*127)
	}
	roundQ8K(x, out)
	if out[7] != -50 {
		t.Errorf("Q8_K: the largest magnitude −50 → %g, want it exact", out[7])
	}
	for i, v := range out {
		if step := float32(50.0 / 127); math.Abs(float64(v-x[i])) > float64(step)/2*1.0001 {
			t.Fatalf("Q8_K: %g → %g, off by more than half a step", x[i], v)
		}
	}
}

func TestRMSNormAndSwiGLU(t *testing.T) {
	c := New(2)
	defer c.Close()
	r := rand.New(rand.NewPCG(3, 4))
	const T, n = 2, 64
	g := randn(r, n, 1)
	w, _ := newWeight(t, c, quant.F32, g, n)
	xs := randn(r, T*n, 3)
	dst := c.Tensor(T, n)
	c.RMSNorm(dst, fill(c, T, n, xs), w, 1e-6)
	want := make([]float64, T*n)
	for tk := 0; tk < T; tk++ {
		var ss float64
		for _, v := range xs[tk*n : (tk+1)*n] {
			ss += float64(v) * float64(v)
		}
		s := 1 / math.Sqrt(ss/n+1e-6)
		for i := 0; i < n; i++ {
			want[tk*n+i] = float64(xs[tk*n+i]) * s * float64(g[i])
		}
	}
	closeTo(t, "RMSNorm", read(c, dst), want, 1e-5)

	up := randn(r, T*n, 1)
	c.SwiGLU(dst, fill(c, T, n, xs), fill(c, T, n, up))
	for i := range want {
		x := float64(xs[i])
		want[i] = x / (1 + math.Exp(-x)) * float64(up[i])
	}
	closeTo(t, "SwiGLU", read(c, dst), want, 1e-5)
}

func TestRoPE(t *testing.T) {
	c := New(1)
	defer c.Close()
	c.Begin([]int32{0, 0}, []int32{0, 3})
	// Two heads of width 6: 2 untouched values, then 2 rotary pairs.
	x := fill(c, 2, 12, []float32{
		9, 9, 1, 0, 0, 1, 9, 9, 1, 2, 3, 4,
		9, 9, 1, 0, 0, 1, 9, 9, 1, 2, 3, 4,
	})
	// Base 4 over 4 rotary values: pair angles p·1 and p·4^(-1/2) = p·0.5.
	rope := &backend.Rope{Freqs: []float32{1, 0.5}, Base: 4, FreqScale: 1, AttnFactor: 1}
	c.RoPE(x, 6, 2, 4, rope)
	got := read(c, x)
	rot := func(a, b, theta float64) (float64, float64) {
		return a*math.Cos(theta) - b*math.Sin(theta), a*math.Sin(theta) + b*math.Cos(theta)
	}
	want := []float64{9, 9, 1, 0, 0, 1, 9, 9, 1, 2, 3, 4} // position 0: identity
	for h := 0; h < 2; h++ {
		row := []float64{9, 9, 1, 0, 0, 1}
		if h == 1 {
			row = []float64{9, 9, 1, 2, 3, 4}
		}
		row[2], row[3] = rot(row[2], row[3], 3*1)
		row[4], row[5] = rot(row[4], row[5], 3*0.5)
		want = append(want, row...)
	}
	closeTo(t, "RoPE", got, want, 1e-6)
}

func TestAttention(t *testing.T) {
	c := New(2)
	defer c.Close()
	r := rand.New(rand.NewPCG(5, 6))
	const heads, nope, rope, kvLoRA, vdim, T = 3, 32, 8, 32, 32, 4
	width := kvLoRA + rope
	kb, kbv := newWeight(t, c, quant.F32, randn(r, heads*kvLoRA*nope, 0.2), nope, kvLoRA, heads)
	vb, vbv := newWeight(t, c, quant.F32, randn(r, heads*vdim*kvLoRA, 0.2), kvLoRA, vdim, heads)
	kc, err := c.Cache(2, 8, width)
	if err != nil {
		t.Fatal(err)
	}
	rows := randn(r, T*width, 1)
	c.Begin(make([]int32, T), []int32{0, 1, 2, 3})
	c.CacheStore(kc, 1, fill(c, T, width, rows))
	qs := randn(r, T*heads*(nope+rope), 1)
	dst := c.Tensor(T, heads*vdim)
	const scale = 0.125
	c.Attention(dst, fill(c, T, heads*(nope+rope), qs), kb, vb, kc, 1, scale)

	want := make([]float64, T*heads*vdim)
	for tk := 0; tk < T; tk++ {
		for h := 0; h < heads; h++ {
			q := qs[(tk*heads+h)*(nope+rope):]
			query := make([]float64, width)
			for j := 0; j < kvLoRA; j++ {
				for n := 0; n < nope; n++ {
					query[j] += float64(kbv[(h*kvLoRA+j)*nope+n]) * float64(q[n])
				}
			}
			for j := 0; j < rope; j++ {
				query[kvLoRA+j] = float64(q[nope+j])
			}
			p := make([]float64, tk+1)
			var sum float64
			for s := 0; s <= tk; s++ {
				for j := 0; j < width; j++ {
					p[s] += scale * query[j] * float64(rows[s*width+j])
				}
				p[s] = math.Exp(p[s])
				sum += p[s]
			}
			olat := make([]float64, kvLoRA)
			for s := 0; s <= tk; s++ {
				for j := 0; j < kvLoRA; j++ {
					olat[j] += p[s] / sum * float64(rows[s*width+j])
				}
			}
			for v := 0; v < vdim; v++ {
				for j := 0; j < kvLoRA; j++ {
					want[(tk*heads+h)*vdim+v] += float64(vbv[(h*vdim+v)*kvLoRA+j]) * olat[j]
				}
			}
		}
	}
	closeTo(t, "Attention", read(c, dst), want, 1e-4)
}

func TestMoE(t *testing.T) {
	c := New(2)
	defer c.Close()
	r := rand.New(rand.NewPCG(7, 8))
	const dim, ff, experts, T = 64, 32, 6, 3
	router, rv := newWeight(t, c, quant.F32, randn(r, dim*experts, 0.3), dim, experts)
	gate, gv := newWeight(t, c, quant.F32, randn(r, dim*ff*experts, 0.1), dim, ff, experts)
	up, uv := newWeight(t, c, quant.F32, randn(r, dim*ff*experts, 0.1), dim, ff, experts)
	down, dv := newWeight(t, c, quant.F32, randn(r, ff*dim*experts, 0.1), ff, dim, experts)
	biasv := randn(r, experts, 0.5)
	bias, _ := newWeight(t, c, quant.F32, biasv, experts)
	xs := randn(r, T*dim, 1)

	for _, tc := range []struct {
		name string
		r    backend.Routing
		bias bool
	}{
		{"softmax", backend.Routing{Used: 2, Scale: 1}, false},
		{"sigmoid+bias+norm+scale", backend.Routing{Sigmoid: true, Used: 3, Norm: true, Scale: 1.8}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &backend.MoE{Router: router, Gate: gate, Up: up, Down: down}
			if tc.bias {
				w.Bias = bias
			}
			dst := c.Tensor(T, dim)
			c.MoE(dst, fill(c, T, dim, xs), w, &tc.r)
			want := make([]float64, T*dim)
			for tk := 0; tk < T; tk++ {
				x := xs[tk*dim : (tk+1)*dim]
				p := make([]float64, experts)
				var z float64
				for e := range p {
					for i := 0; i < dim; i++ {
						p[e] += float64(rv[e*dim+i]) * float64(x[i])
					}
				}
				if tc.r.Sigmoid {
					for e := range p {
						p[e] = 1 / (1 + math.Exp(-p[e]))
					}
				} else {
					m := math.Inf(-1)
					for _, v := range p {
						m = math.Max(m, v)
					}
					for e := range p {
						p[e] = math.Exp(p[e] - m)
						z += p[e]
					}
					for e := range p {
						p[e] /= z
					}
				}
				// pick the top Used by p (+ bias) with a selection sort
				picked := []int{}
				for len(picked) < tc.r.Used {
					best := -1
					for e := range p {
						taken := false
						for _, q := range picked {
							taken = taken || q == e
						}
						sel := func(e int) float64 {
							if tc.bias {
								return p[e] + float64(biasv[e])
							}
							return p[e]
						}
						if !taken && (best < 0 || sel(e) > sel(best)) {
							best = e
						}
					}
					picked = append(picked, best)
				}
				var sum float64
				for _, e := range picked {
					sum += p[e]
				}
				for _, e := range picked {
					wgt := p[e] * float64(tc.r.Scale)
					if tc.r.Norm {
						wgt /= sum
					}
					act := make([]float64, ff)
					for j := 0; j < ff; j++ {
						var g, u float64
						for i := 0; i < dim; i++ {
							g += float64(gv[(e*ff+j)*dim+i]) * float64(x[i])
							u += float64(uv[(e*ff+j)*dim+i]) * float64(x[i])
						}
						act[j] = g / (1 + math.Exp(-g)) * u
					}
					for o := 0; o < dim; o++ {
						var s float64
						for j := 0; j < ff; j++ {
							s += float64(dv[(e*dim+o)*ff+j]) * act[j]
						}
						want[tk*dim+o] += wgt * s
					}
				}
			}
			closeTo(t, "MoE", read(c, dst), want, 1e-4)
		})
	}
}

// TestMoEMergedGateUp: a merged ffn_gate_up_exps ({dim, 2·ff, experts}, each
// expert's gate rows before its up rows) gives the same bits as separate
// gate and up tensors.
func TestMoEMergedGateUp(t *testing.T) {
	c := New(2)
	defer c.Close()
	r := rand.New(rand.NewPCG(9, 10))
	const dim, ff, experts, T = 64, 32, 6, 3
	router, _ := newWeight(t, c, quant.F32, randn(r, dim*experts, 0.3), dim, experts)
	gv, uv := randn(r, dim*ff*experts, 0.1), randn(r, dim*ff*experts, 0.1)
	gate, _ := newWeight(t, c, quant.F32, gv, dim, ff, experts)
	up, _ := newWeight(t, c, quant.F32, uv, dim, ff, experts)
	down, _ := newWeight(t, c, quant.F32, randn(r, ff*dim*experts, 0.1), ff, dim, experts)
	mv := make([]float32, 0, 2*len(gv))
	for e := 0; e < experts; e++ {
		mv = append(mv, gv[e*ff*dim:(e+1)*ff*dim]...)
		mv = append(mv, uv[e*ff*dim:(e+1)*ff*dim]...)
	}
	merged, _ := newWeight(t, c, quant.F32, mv, dim, 2*ff, experts)
	xs := randn(r, T*dim, 1)
	routing := &backend.Routing{Sigmoid: true, Used: 2, Norm: true, Scale: 1.5}

	c.Begin(make([]int32, T), make([]int32, T))
	separate := c.Tensor(T, dim)
	c.MoE(separate, fill(c, T, dim, xs), &backend.MoE{Router: router, Gate: gate, Up: up, Down: down}, routing)
	joined := c.Tensor(T, dim)
	c.MoE(joined, fill(c, T, dim, xs), &backend.MoE{Router: router, Gate: merged, Down: down}, routing)
	a, b := read(c, separate), read(c, joined)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("value %d: merged gate_up %g, separate %g", i, b[i], a[i])
		}
	}
}

// Past the repacking budget, Q4_0 weights stay unpacked and the matmul,
// through the four-row kernels, gives the same bits as the packed path.
func TestRepackBudget(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const in, out, T = 256, 64, 6
	c := New(2)
	defer c.Close()
	vals := randn(r, in*out, 0.05)
	rowBytes, _ := quant.Q4_0.RowBytes(in)
	c.packBudget = int64(out) * rowBytes // room for one copy
	first, _ := newWeight(t, c, quant.Q4_0, vals, in, out)
	second, _ := newWeight(t, c, quant.Q4_0, vals, in, out)
	if kernels[quant.Q4_0].pack8 != nil && (wt(first).packed == nil || wt(second).packed != nil) {
		t.Fatalf("packed: first %v, second %v; want only the first (budget %d bytes)", wt(first).packed != nil, wt(second).packed != nil, c.packBudget)
	}
	x := fill(c, T, in, randn(r, T*in, 1))
	for _, rows := range []int{1, T} {
		src := c.RowsOf(x, 0, rows)
		a, b := c.Tensor(rows, out), c.Tensor(rows, out)
		c.MatMul(a, first, src)
		c.MatMul(b, second, src)
		if ga, gb := read(c, a), read(c, b); !slices.Equal(ga, gb) {
			t.Errorf("%d tokens: packed and unpacked matmuls differ", rows)
		}
	}
}

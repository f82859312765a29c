package cpu

import (
	"fmt"
	"math"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

func tens(t backend.Tensor) *tensor { return t.(*tensor) }
func wt(w backend.Weight) *weight   { return w.(*weight) }

func same(op string, a, b *tensor) {
	if a.rows != b.rows {
		panic(fmt.Sprintf("cpu: %s: %d rows against %d", op, a.rows, b.rows))
	}
}

// decodeRow writes row r of w (dims[0] values) into out. F32 rows are
// returned in place; other formats decode block by block into out.
func (w *weight) decodeRow(r int, out []float32) []float32 {
	n := int(w.dims[0])
	if w.f32 != nil {
		return w.f32[r*n : (r+1)*n]
	}
	if err := quant.Dequantize(w.typ, w.data[r*w.rowBytes:(r+1)*w.rowBytes], out[:n]); err != nil {
		panic(fmt.Sprintf("cpu: %s row %d: %v", w.name, r, err)) // sizes were checked at load
	}
	return out[:n]
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// scratch returns worker-private buffers of at least n floats each.
func (c *CPU) scratch(n int) [][]float32 {
	if len(c.bufs) < c.pool.n {
		c.bufs = make([][]float32, c.pool.n)
	}
	for i := range c.bufs {
		if len(c.bufs[i]) < n {
			c.bufs[i] = make([]float32, n)
		}
	}
	return c.bufs
}

// Embed copies table rows.
func (c *CPU) Embed(dst backend.Tensor, table backend.Weight) {
	c.launches++
	d, w := tens(dst), wt(table)
	if d.rows != len(c.tokens) {
		panic(fmt.Sprintf("cpu: embed: %d rows for %d tokens", d.rows, len(c.tokens)))
	}
	for i, tok := range c.tokens {
		row := w.decodeRow(int(tok), d.row(i))
		copy(d.row(i), row)
	}
}

// RMSNorm normalises each row and scales by w.
func (c *CPU) RMSNorm(dst, src backend.Tensor, w backend.Weight, eps float32) {
	c.launches++
	d, s, g := tens(dst), tens(src), wt(w).f32
	same("rmsnorm", d, s)
	for i := 0; i < s.rows; i++ {
		x, y := s.row(i), d.row(i)
		var ss float64
		for _, v := range x {
			ss += float64(v * v)
		}
		// As ggml: float32 squares summed in double, the mean and scale in float32.
		mean := float32(ss / float64(len(x)))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		for j, v := range x {
			y[j] = v * scale * g[j]
		}
	}
}

func checkMatMul(op string, d *tensor, w *weight, s *tensor) {
	same(op, d, s)
	if int(w.dims[0]) != s.cols || w.rows() != d.cols {
		panic(fmt.Sprintf("cpu: %s: %s %v against src %d cols, dst %d cols", op, w.name, w.dims, s.cols, d.cols))
	}
}

// MatMul sets dst = src · Wᵀ.
func (c *CPU) MatMul(dst backend.Tensor, w backend.Weight, src backend.Tensor) {
	c.launches++
	d, ww, s := tens(dst), wt(w), tens(src)
	checkMatMul("matmul", d, ww, s)
	c.matmul(d, 0, d.cols, ww, 0, s, 0, false)
}

// MatMulAdd adds src · Wᵀ into dst.
func (c *CPU) MatMulAdd(dst backend.Tensor, w backend.Weight, src backend.Tensor) {
	c.launches++
	d, ww, s := tens(dst), wt(w), tens(src)
	checkMatMul("matmuladd", d, ww, s)
	c.matmul(d, 0, d.cols, ww, 0, s, 0, true)
}

// headMatMul applies one matrix per head: for each head h,
// dst[t][h·dstStride+o] = Σ_i W[h][o][i] · src[t][h·srcStride+i].
func (c *CPU) headMatMul(d *tensor, dstStride int, w *weight, s *tensor, srcStride int) {
	in, out, heads := int(w.dims[0]), int(w.dims[1]), int(w.Dim(2))
	if (heads-1)*srcStride+in > s.cols || (heads-1)*dstStride+out > d.cols {
		panic(fmt.Sprintf("cpu: %s %v does not fit src %d / dst %d cols", w.name, w.dims, s.cols, d.cols))
	}
	if s.stride != heads*srcStride { // the heads' inputs are not one after another
		for h := 0; h < heads; h++ {
			c.matmul(d, h*dstStride, out, w, h*out, s, h*srcStride, false)
		}
		return
	}
	// One pool job for every head (a decode step has two such products per
	// layer, each head's a few hundred KB): head h of token t is row
	// t·heads+h of src seen as rows of srcStride values.
	rows := tensor{data: s.data, rows: s.rows * heads, cols: in, stride: srcStride}
	j := c.prepareMatMul(w, &rows, 0)
	j.d, j.heads, j.per, j.dstStride = d, heads, out, dstStride
	c.runMatMul(heads * out)
}

// Dim is dimension i, 1 past the rank.
func (w *weight) Dim(i int) uint64 {
	if i < len(w.dims) {
		return w.dims[i]
	}
	return 1
}

// RoPE rotates adjacent pairs as ggml_rope_ext does: the angle of pair i is
// built in float32 by repeated multiplication (θ_0 = p, θ_{i+1} = θ_i·base^(-2/n)),
// YaRN mixes interpolated and extrapolated angles per pair, and cos/sin carry
// ggml's magnitude factor. Rotated keys and queries feed the attention, whose
// output is rounded to 8 bits, so they must agree with llama.cpp bit for bit.
func (c *CPU) RoPE(t backend.Tensor, stride, off, n int, r *backend.Rope) {
	c.launches++
	x, pos := tens(t), c.pos
	c.ropeCS = grow(c.ropeCS, n)
	cs := c.ropeCS // cos, sin per pair
	thetaScale := float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(n))))
	for i := 0; i < x.rows; i++ {
		theta := float32(pos[i])
		for k := 0; k < n/2; k++ {
			th, mscale := r.FreqScale*theta, r.AttnFactor
			if r.ExtFactor != 0 {
				y := (float32(k) - r.Corr[0]) / max(0.001, r.Corr[1]-r.Corr[0])
				mix := (1 - min(1, max(0, y))) * r.ExtFactor
				th = th*(1-mix) + theta*mix
				mscale *= 1 + 0.1*float32(math.Log(float64(1/r.FreqScale)))
			}
			cs[2*k] = float32(math.Cos(float64(th))) * mscale
			cs[2*k+1] = float32(math.Sin(float64(th))) * mscale
			theta *= thetaScale
		}
		row := x.row(i)
		for h := 0; h+stride <= x.cols; h += stride {
			v := row[h+off : h+off+n]
			for k := 0; k < n; k += 2 {
				a, b := v[k], v[k+1]
				v[k] = a*cs[k] - b*cs[k+1]
				v[k+1] = a*cs[k+1] + b*cs[k]
			}
		}
	}
}

// CacheStore writes latent rows.
func (c *CPU) CacheStore(kc backend.Cache, layer int, src backend.Tensor) {
	c.launches++
	k, s, pos := kc.(*cache), tens(src), c.pos
	for i := 0; i < s.rows; i++ {
		copy(k.row(layer, int(pos[i])), s.row(i))
	}
}

// Attention runs absorbed MLA in three phases: absorb every head's q_nope
// into the latent space (each k_b row decoded once for the whole batch),
// attend one (token, head) pair per task, then project the latents out
// through v_b.
func (c *CPU) Attention(dst, q backend.Tensor, kb, vb backend.Weight, kc backend.Cache, layer int, scale float32) {
	c.launches++
	d, qq, k, kbw, vbw, pos := tens(dst), tens(q), kc.(*cache), wt(kb), wt(vb), c.pos
	same("attention", d, qq)
	nope, kvLoRA, heads := int(kbw.dims[0]), int(kbw.dims[1]), int(kbw.Dim(2))
	width := k.width
	rope, vdim := width-kvLoRA, int(vbw.dims[1])
	if qq.cols != heads*(nope+rope) || d.cols != heads*vdim || int(vbw.dims[0]) != kvLoRA {
		panic(fmt.Sprintf("cpu: attention: q %d cols, dst %d cols, k_b %v, v_b %v, cache width %d", qq.cols, d.cols, kbw.dims, vbw.dims, width))
	}
	if qq.rows != len(pos) {
		panic(fmt.Sprintf("cpu: attention: %d rows for %d positions", qq.rows, len(pos)))
	}
	T := qq.rows
	j := &c.attn
	// query: per token and head [q_lat | q_pe]; olat: per token and head the latent output.
	j.query.data = grow(j.query.data, T*heads*width)
	j.query.rows, j.query.cols, j.query.stride = T, heads*width, heads*width
	j.olat.data = grow(j.olat.data, T*heads*kvLoRA)
	j.olat.rows, j.olat.cols, j.olat.stride = T, heads*kvLoRA, heads*kvLoRA
	c.headMatMul(&j.query, width, kbw, qq, nope+rope)
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			copy(j.query.row(t)[h*width+kvLoRA:(h+1)*width], qq.row(t)[h*(nope+rope)+nope:(h+1)*(nope+rope)])
		}
	}
	maxPos := 0
	for _, p := range pos {
		maxPos = max(maxPos, int(p))
	}
	j.bufs = c.scratch(maxPos + 1)
	j.k, j.layer, j.pos, j.heads, j.width, j.kvLoRA, j.scale = k, layer, pos, heads, width, kvLoRA, scale
	c.pool.run(T*heads, 1, j)
	c.headMatMul(d, vdim, vbw, &j.olat, kvLoRA)
}

// attnJob is the attention of one (token, head) pair per index, computed as
// ggml's CPU flash attention does (llama.cpp's default): one pass over the
// positions with a running maximum M and sum S, s = (K·q)·scale with
// ggml_vec_dot_f32's order, the output rescaled by expf(M_old − M) when the
// maximum grows, V accumulated with fused multiply-adds, and divided by S at
// the end. Its output is rounded to 8 bits before attn_v_b, so it must agree
// with llama.cpp to the last bit (see ggmlorder.go).
type attnJob struct {
	query, olat tensor
	bufs        [][]float32 // per-worker scores
	k           *cache
	layer       int
	pos         []int32
	heads       int
	width       int
	kvLoRA      int
	scale       float32
}

func (j *attnJob) do(lo, hi, worker int) {
	k, heads, width, kvLoRA := j.k, j.heads, j.width, j.kvLoRA
	for job := lo; job < hi; job++ {
		t, h := job/heads, job%heads
		qv := j.query.row(t)[h*width : (h+1)*width]
		n := int(j.pos[t]) + 1
		out := j.olat.row(t)[h*kvLoRA : (h+1)*kvLoRA]
		clear(out)
		m, sum := float32(math.Inf(-1)), float32(0)
		for p := 0; p < n; p++ {
			row := k.row(j.layer, p)
			s := dotF32Vec(row, qv) * j.scale
			ms, vs := float32(1), float32(1)
			if s > m {
				ms = expf(m - s)
				m = s
				for i := range out {
					out[i] *= ms
				}
			} else {
				vs = expf(s - m)
			}
			fmaAxpy(out, row[:kvLoRA], vs)
			sum = sum*ms + vs
		}
		inv := 1 / sum
		for i := range out {
			out[i] *= inv
		}
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// SwiGLU sets dst = silu(gate) · up.
func (c *CPU) SwiGLU(dst, gate, up backend.Tensor) {
	c.launches++
	d, g, u := tens(dst), tens(gate), tens(up)
	same("swiglu", d, g)
	same("swiglu", d, u)
	c.swiglu = swigluJob{d: d, g: g, u: u}
	// A prompt's rows go to the workers; one token's row (a few thousand
	// exponentials) is not worth waking them.
	c.pool.run(d.rows, 1, &c.swiglu)
}

// swigluJob computes rows [lo, hi) of SwiGLU.
type swigluJob struct{ d, g, u *tensor }

func (j *swigluJob) do(lo, hi, _ int) {
	for i := lo; i < hi; i++ {
		dr, gr, ur := j.d.row(i), j.g.row(i), j.u.row(i)
		for k := range dr {
			dr[k] = silu(gr[k]) * ur[k]
		}
	}
}

// Add sets dst += src.
func (c *CPU) Add(dst, src backend.Tensor) {
	c.launches++
	d, s := tens(dst), tens(src)
	same("add", d, s)
	for i := 0; i < d.rows; i++ {
		dr, sr := d.row(i), s.row(i)
		for j := range dr {
			dr[j] += sr[j]
		}
	}
}

// moeBufs are MoE's per-token buffers, grown to the largest layer.
type moeBufs struct {
	logits, act, upOut, out, xt tensor
	probs                       []float32
	order                       []int
}

// sized points t at n floats of its storage, grown if needed: one row.
func (t *tensor) sized(n int) *tensor {
	t.data = grow(t.data, n)
	t.rows, t.cols, t.stride = 1, n, n
	return t
}

// MoE routes every token and sets dst to its experts' weighted outputs.
func (c *CPU) MoE(dst, h backend.Tensor, w *backend.MoE, r *backend.Routing) {
	c.launches++
	d, x := tens(dst), tens(h)
	same("moe", d, x)
	router, gate, down := wt(w.Router), wt(w.Gate), wt(w.Down)
	experts := int(router.dims[1])
	upW, ff, gateStride, upOff := w.ExpertRows()
	up := wt(upW)
	var bias []float32
	if w.Bias != nil {
		bias = wt(w.Bias).f32
	}
	b := &c.moe
	logits := b.logits.sized(experts)
	act := b.act.sized(ff)
	upOut := b.upOut.sized(ff)
	out := b.out.sized(d.cols)
	b.probs = grow(b.probs, experts)
	b.order = grow(b.order, experts)
	probs, order := b.probs, b.order
	for t := 0; t < x.rows; t++ {
		xt := &b.xt
		*xt = tensor{data: x.row(t), rows: 1, cols: x.cols, stride: x.cols}
		c.matmul(logits, 0, experts, router, 0, xt, 0, false)
		if r.Sigmoid {
			for e, z := range logits.data {
				probs[e] = 1 / (1 + float32(math.Exp(float64(-z))))
			}
		} else {
			softmax(logits.data, probs)
		}
		for e := range order {
			order[e] = e
		}
		picked := topK(order, r.Used, probs, bias)
		var sum float32
		for _, e := range picked {
			sum += probs[e]
		}
		sum = max(sum, 6.103515625e-5)
		dr := d.row(t)
		clear(dr)
		for _, e := range picked {
			c.matmul(act, 0, ff, gate, e*gateStride, xt, 0, false)
			c.matmul(upOut, 0, ff, up, e*gateStride+upOff, xt, 0, false)
			for j := 0; j < ff; j++ {
				act.data[j] = silu(act.data[j]) * upOut.data[j]
			}
			c.matmul(out, 0, d.cols, down, e*d.cols, act, 0, false)
			g := probs[e] // as ggml: divide by the sum, then scale
			if r.Norm {
				g /= sum
			}
			g *= r.Scale
			for j, v := range out.data {
				dr[j] += g * v
			}
		}
	}
}

// topK moves the k experts of highest selection score (probs, plus bias
// when present) to the front of order, highest first and the lower index
// first on ties (the order a stable sort gives), and returns them.
func topK(order []int, k int, probs, bias []float32) []int {
	sel := func(e int) float32 {
		if bias != nil {
			return probs[e] + bias[e]
		}
		return probs[e]
	}
	for i := 0; i < k; i++ {
		best := i
		for j := i + 1; j < len(order); j++ {
			if sel(order[j]) > sel(order[best]) || sel(order[j]) == sel(order[best]) && order[j] < order[best] {
				best = j
			}
		}
		order[i], order[best] = order[best], order[i]
	}
	return order[:k]
}

func softmax(z, p []float32) {
	m := float32(math.Inf(-1))
	for _, v := range z {
		m = max(m, v)
	}
	var s float64
	for i, v := range z {
		e := float32(math.Exp(float64(v - m)))
		p[i] = e
		s += float64(e)
	}
	inv := float32(1 / s)
	for i := range p {
		p[i] *= inv
	}
}

package deepseek2

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/quant"
)

// layer holds one decoder block's weights.
type layer struct {
	attnNorm, ffnNorm backend.Weight
	qA                backend.Weight // q_a with q_lora, else q itself
	qANorm, qB        backend.Weight // with q_lora
	kvA, kvANorm      backend.Weight
	qKV               backend.Weight // qA stacked on kv_a, for a Stacker: then qA and kvA are nil
	kB, vB            backend.Weight // absorbed: {nope, kv_lora, heads}, {kv_lora, v, heads}
	out               backend.Weight

	gate, up, down backend.Weight // dense FFN
	moe            *backend.MoE
	shGate, shUp   backend.Weight // shared experts, as one dense FFN
	shDown         backend.Weight
}

// binder looks tensors up by name, checks their shapes and hands them to the backend.
type binder struct {
	f        *gguf.File
	be       backend.Backend
	err      error
	done     int64            // file bytes handed to the backend
	progress func(done int64) // or nil
	// shapes, when set, makes a dry run (shapesOf): each weight is noted
	// here instead of handed over, and no tensor's data is read
	shapes *[]backend.WeightShape
}

// shapeOnly stands for a weight a dry run noted.
type shapeOnly struct{ s backend.WeightShape }

func (w shapeOnly) Name() string     { return w.s.Name }
func (w shapeOnly) Type() quant.Type { return w.s.Type }
func (w shapeOnly) Dims() []uint64   { return w.s.Dims }

// note records a weight in a dry run in place of handing it over.
func (b *binder) note(name string, typ quant.Type, dims []uint64) backend.Weight {
	s := backend.WeightShape{Name: name, Type: typ, Dims: dims}
	*b.shapes = append(*b.shapes, s)
	return shapeOnly{s}
}

func (b *binder) info(name string, dims ...int) *gguf.TensorInfo {
	if b.err != nil {
		return nil
	}
	t, ok := b.f.Tensor(name)
	if !ok {
		b.err = fmt.Errorf("tensor %s is missing", name)
		return nil
	}
	if want := dims64(dims); !slices.Equal(t.Dims, want) {
		b.err = fmt.Errorf("tensor %s has shape %v, want %v", name, t.Dims, want)
		return nil
	}
	return t
}

// get binds a required tensor of the given shape.
func (b *binder) get(name string, dims ...int) backend.Weight {
	t := b.info(name, dims...)
	if t == nil {
		return nil
	}
	if b.shapes != nil {
		return b.note(name, t.Type, t.Dims)
	}
	data := b.f.TensorData(t)
	w, err := b.be.Weight(name, t.Type, t.Dims, data)
	return b.adopt(w, err, len(data))
}

// adopt keeps what the backend made of n of the file's bytes, counting
// them, or its error.
func (b *binder) adopt(w backend.Weight, err error, n int) backend.Weight {
	if err != nil {
		b.err = err
		return nil
	}
	b.handed(int64(n))
	return w
}

// handed counts n more of the file's bytes as handed to the backend.
func (b *binder) handed(n int64) {
	b.done += n
	if b.progress != nil {
		b.progress(b.done)
	}
}

// opt binds a tensor if the file has it.
func (b *binder) opt(name string, dims ...int) backend.Weight {
	if _, ok := b.f.Tensor(name); !ok {
		return nil
	}
	return b.get(name, dims...)
}

// dims64 is dims in GGUF's type.
func dims64(dims []int) []uint64 {
	u := make([]uint64, len(dims))
	for i, d := range dims {
		u[i] = uint64(d)
	}
	return u
}

func (b *binder) has(name string) bool { _, ok := b.f.Tensor(name); return ok }

// f32 hands the backend a weight computed at load.
func (b *binder) f32(name string, vals []float32, dims ...int) backend.Weight {
	if b.err != nil {
		return nil
	}
	if b.shapes != nil {
		return b.note(name, quant.F32, dims64(dims))
	}
	w, err := b.be.Weight(name, quant.F32, dims64(dims), unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 4*len(vals)))
	if err != nil {
		b.err = err
	}
	return w
}

// bindLayer binds block l, checking every shape against the configuration.
func (b *binder) bindLayer(c *Config, l int) layer {
	p := fmt.Sprintf("blk.%d.", l)
	H, D := c.Heads, c.Dim
	var ly layer
	ly.attnNorm = b.get(p+"attn_norm.weight", D)
	qName, qRows := p+"attn_q.weight", c.firstQ()
	if c.QLoRA > 0 {
		qName = p + "attn_q_a.weight"
	}
	kvName := p + "attn_kv_a_mqa.weight"
	if st, ok := b.be.(backend.Stacker); ok {
		ly.qKV = b.stacked(st, qName, qRows, kvName, c.CacheRow(), D)
	}
	if ly.qKV == nil {
		ly.qA = b.get(qName, D, qRows)
		ly.kvA = b.get(kvName, D, c.CacheRow())
	}
	if c.QLoRA > 0 {
		ly.qANorm = b.get(p+"attn_q_a_norm.weight", c.QLoRA)
		ly.qB = b.get(p+"attn_q_b.weight", c.QLoRA, H*(c.Nope+c.Rope))
	}
	ly.kvANorm = b.get(p+"attn_kv_a_norm.weight", c.KVLoRA)
	if b.has(p+"attn_k_b.weight") || !b.has(p+"attn_kv_b.weight") {
		ly.kB = b.get(p+"attn_k_b.weight", c.Nope, c.KVLoRA, H)
		ly.vB = b.get(p+"attn_v_b.weight", c.KVLoRA, c.VHead, H)
	} else {
		ly.kB, ly.vB = b.splitKVB(c, p)
	}
	ly.out = b.get(p+"attn_output.weight", H*c.VHead, D)
	ly.ffnNorm = b.get(p+"ffn_norm.weight", D)
	if !c.IsMoE(l) {
		ly.gate = b.get(p+"ffn_gate.weight", D, c.FF)
		ly.up = b.get(p+"ffn_up.weight", D, c.FF)
		ly.down = b.get(p+"ffn_down.weight", c.FF, D)
		return ly
	}
	E, F := c.Experts, c.ExpertFF
	m := &backend.MoE{Router: b.get(p+"ffn_gate_inp.weight", D, E), Bias: b.opt(p+"exp_probs_b.bias", E)}
	if b.has(p + "ffn_gate_up_exps.weight") {
		m.Gate = b.get(p+"ffn_gate_up_exps.weight", D, 2*F, E)
	} else {
		m.Gate = b.get(p+"ffn_gate_exps.weight", D, F, E)
		m.Up = b.get(p+"ffn_up_exps.weight", D, F, E)
	}
	m.Down = b.get(p+"ffn_down_exps.weight", F, D, E)
	ly.moe = m
	if c.SharedExperts > 0 {
		S := F * c.SharedExperts
		ly.shGate = b.get(p+"ffn_gate_shexp.weight", D, S)
		ly.shUp = b.get(p+"ffn_up_shexp.weight", D, S)
		ly.shDown = b.get(p+"ffn_down_shexp.weight", S, D)
	}
	return ly
}

// stacked binds tensors first {dim, n1} and second {dim, n2} as one weight
// {dim, n1+n2} of st's: first's rows, then second's. It returns nil,
// binding nothing, when their types differ.
func (b *binder) stacked(st backend.Stacker, first string, n1 int, second string, n2 int, dim int) backend.Weight {
	t1, t2 := b.info(first, dim, n1), b.info(second, dim, n2)
	if t1 == nil || t2 == nil || t1.Type != t2.Type {
		return nil
	}
	if b.shapes != nil {
		return b.note(first+"+"+second, t1.Type, dims64([]int{dim, n1 + n2}))
	}
	d1, d2 := b.f.TensorData(t1), b.f.TensorData(t2)
	w, err := st.StackedWeight(first+"+"+second, t1.Type, dims64([]int{dim, n1 + n2}), d1, d2)
	return b.adopt(w, err, len(d1)+len(d2))
}

// splitKVB turns an older conversion's combined attn_kv_b {kv_lora,
// heads·(nope+v)} into the absorbed k_b {nope, kv_lora, heads} (head h's
// k rows, transposed) and v_b {kv_lora, v, heads} (its v rows as they are).
func (b *binder) splitKVB(c *Config, p string) (kb, vb backend.Weight) {
	H, N, V, L := c.Heads, c.Nope, c.VHead, c.KVLoRA
	t := b.info(p+"attn_kv_b.weight", L, H*(N+V))
	if t == nil {
		return nil, nil
	}
	if b.shapes != nil {
		return b.f32(p+"attn_k_b.weight", nil, N, L, H), b.f32(p+"attn_v_b.weight", nil, L, V, H)
	}
	data := b.f.TensorData(t)
	all := make([]float32, t.Elements())
	if err := quant.Dequantize(t.Type, data, all); err != nil {
		b.err = fmt.Errorf("tensor %s: %w", t.Name, err)
		return nil, nil
	}
	k := make([]float32, H*L*N)
	v := make([]float32, H*V*L)
	for h := 0; h < H; h++ {
		base := h * (N + V) * L
		for n := 0; n < N; n++ {
			for j := 0; j < L; j++ {
				k[(h*L+j)*N+n] = all[base+n*L+j]
			}
		}
		copy(v[h*V*L:(h+1)*V*L], all[base+N*L:base+(N+V)*L])
	}
	kb, vb = b.f32(p+"attn_k_b.weight", k, N, L, H), b.f32(p+"attn_v_b.weight", v, L, V, H)
	if b.err == nil { // as get: a weight the backend refused is not counted
		b.handed(int64(len(data)))
	}
	return kb, vb
}

// ropeOf is the rotation in both forms: ggml_rope_ext's parameters as
// llama.cpp sets them for deepseek2 (with YaRN, attn_factor
// 1/(1+0.1·ln(1/scale)) cancels ggml's magnitude correction; the correction
// dimensions use β_fast 32 and β_slow 1), all in float32 as ggml computes
// them, and the per-pair angles they give.
func ropeOf(c *Config) backend.Rope {
	n := float32(c.Rope)
	r := backend.Rope{Base: float32(c.RopeBase), FreqScale: 1, AttnFactor: 1}
	switch {
	case c.yarn():
		r.FreqScale = float32(1 / c.Scaling.Factor)
		r.ExtFactor = 1
		r.AttnFactor = 1 / (1 + 0.1*logf(1/r.FreqScale))
		corr := func(rot float32) float32 {
			return n * logf(float32(c.Scaling.OrigContext)/(rot*2*float32(math.Pi))) / (2 * logf(r.Base))
		}
		r.Corr[0] = max(0, float32(math.Floor(float64(corr(32)))))
		r.Corr[1] = min(n-1, float32(math.Ceil(float64(corr(1)))))
	case c.Scaling.Type == "linear" && c.Scaling.Factor > 0:
		r.FreqScale = float32(1 / c.Scaling.Factor)
	}
	r.Freqs = ropeFreqs(c, &r)
	return r
}

// ropeFreqs is the angle per position of each rotary pair, with YaRN's
// interpolation over r's correction range folded in (notes §3 step 4).
func ropeFreqs(c *Config, r *backend.Rope) []float32 {
	n := c.Rope
	freqs := make([]float32, n/2)
	lo, hi := float64(r.Corr[0]), float64(r.Corr[1])
	for i := range freqs {
		theta := math.Pow(c.RopeBase, -2*float64(i)/float64(n))
		if c.yarn() {
			ramp := 1 - min(1, max(0, (float64(i)-lo)/max(0.001, hi-lo)))
			theta = theta/c.Scaling.Factor*(1-ramp) + theta*ramp
		} else if c.Scaling.Type == "linear" && c.Scaling.Factor > 0 {
			theta /= c.Scaling.Factor
		}
		freqs[i] = float32(theta)
	}
	return freqs
}

// yarn says whether the rotation is YaRN-extended (a factor of 1 is none).
func (c *Config) yarn() bool { return c.Scaling.Type == "yarn" && c.Scaling.Factor > 1 }

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// attnScale is the softmax scale, with YaRN's magnitude correction (m²),
// computed in float32 as llama.cpp does (mscale²/sqrtf(nope+rope)): for
// nope+rope = 96 the double-precision value rounds one ulp higher.
func attnScale(c *Config) float32 {
	var m float32 = 1
	if c.yarn() {
		m = 1 + float32(c.Scaling.YarnLogMul)*logf(float32(c.Scaling.Factor))
	}
	return m * m / float32(math.Sqrt(float64(float32(c.Nope+c.Rope))))
}

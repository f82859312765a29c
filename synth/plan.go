package synth

import (
	"fmt"
	"math"
	"strings"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/quant"
)

// Format is the weight format of a synthesized file: one type for every
// matrix, or a llama-quantize style mix.
type Format int

// The formats synth writes.
const (
	F32 Format = iota
	F16
	BF16
	Q8_0
	Q4_0
	Q4_K_M
)

var formatNames = [...]string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m"}

func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("format(%d)", int(f))
}

// FormatNames is the format names, comma-separated, for help and errors.
func FormatNames() string { return strings.Join(formatNames[:], ", ") }

// ParseFormat maps a name such as "q4_0" or "Q4_K_M" to its Format.
func ParseFormat(name string) (Format, error) {
	for i, n := range formatNames {
		if strings.EqualFold(n, name) {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("unknown weight type %q (valid: %s)", name, FormatNames())
}

// MaxLayers bounds --layers: far beyond any deepseek2 model, small enough
// that a typo does not start writing terabytes.
const MaxLayers = 256

// Options say what to write.
type Options struct {
	Preset string
	Format Format
	Seed   uint64
	// Layers is the number of decoder layers; 0 keeps the preset's. The count
	// of leading dense layers is capped at it.
	Layers int
	// LegacyKVB writes one combined attn_kv_b per layer and no *_mla keys, as
	// older conversions do.
	LegacyKVB bool
	// MTP appends a multi-token-prediction (NextN) block after the decoder.
	MTP bool
	// ChatTemplate, when not empty, is written as tokenizer.chat_template.
	ChatTemplate string
	// Workers is the number of goroutines generating tensor data (default 2).
	Workers int
	// Progress, when set, is called from the writing goroutine after each
	// chunk with the tensor bytes written so far and in all.
	Progress func(done, total int64)
}

// initKind is how a tensor's values are drawn.
type initKind int

const (
	initGauss  initKind = iota // N(Mean, Std²) through the block pool (matrices)
	initDirect                 // N(Mean, Std²) drawn value by value (norms, biases: small F32 vectors)
)

// Tensor is one tensor of the plan.
type Tensor struct {
	Name string
	Dims []uint64 // innermost first
	Type quant.Type
	Size int64 // bytes of data
	kind initKind
	mean float64
	std  float64
}

// Elements is the number of values in the tensor.
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Model is everything a synthesized file holds except the weight values.
type Model struct {
	Preset  Preset
	Options Options
	Config  deepseek2.Config
	Vocab   *Vocab
	Meta    []gguf.KV
	Tensors []Tensor
}

// DataSize is the number of tensor data bytes (without alignment padding).
func (m *Model) DataSize() int64 {
	var n int64
	for i := range m.Tensors {
		n += m.Tensors[i].Size
	}
	return n
}

// Plan resolves the options into a model: configuration, metadata, and the
// tensors with their shapes and types. It does not draw any weight.
func Plan(opts Options) (*Model, error) {
	p, err := LookupPreset(opts.Preset)
	if err != nil {
		return nil, err
	}
	if opts.Format < 0 || int(opts.Format) >= len(formatNames) {
		return nil, fmt.Errorf("unknown weight type %v (valid: %s)", opts.Format, FormatNames())
	}
	c := p.Config
	if opts.Layers != 0 {
		if opts.Layers < 0 || opts.Layers > MaxLayers {
			return nil, fmt.Errorf("layer count %d is out of range (valid: 1 to %d)", opts.Layers, MaxLayers)
		}
		if c.Experts == 0 || c.LeadingDense >= c.Layers {
			c.LeadingDense = opts.Layers // every layer stays dense
		} else {
			c.LeadingDense = min(c.LeadingDense, opts.Layers)
		}
		c.Layers = opts.Layers
	}
	if opts.MTP {
		c.NextN = 1
		c.Layers++
	}
	if opts.LegacyKVB {
		c.Legacy = true
		c.HeadsKV = c.Heads
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	v, err := BuildVocab(p.Tokenizer, c.Vocab)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	m := &Model{Preset: p, Options: opts, Config: c, Vocab: v}
	m.Meta = m.metadata()
	m.addTensors()
	if err := m.sizeTensors(); err != nil {
		return nil, err
	}
	return m, nil
}

// metadata is the architecture keys (from the Config, as real conversions
// write them), the alignment, and the tokenizer.
func (m *Model) metadata() []gguf.KV {
	arch := m.Config.Metadata()
	kv := make([]gguf.KV, 0, len(arch)+12)
	for i, e := range arch {
		kv = append(kv, e)
		// Real files state the alignment right after the name.
		if e.Key == "general.name" || (i == 0 && m.Config.Name == "") {
			kv = append(kv, gguf.KV{Key: "general.alignment", Value: gguf.Uint32(gguf.DefaultAlignment)})
		}
	}
	return append(kv, m.Vocab.Metadata(m.Options.ChatTemplate)...)
}

// role says which llama-quantize rule picks a matrix's type.
type role int

const (
	roleEmbed  role = iota // token_embd
	roleOutput             // output.weight
	roleAttn               // attention projections
	roleAttnB              // attn_k_b / attn_v_b (per-head absorbed matrices)
	roleGateUp             // ffn_gate, ffn_up, their expert stacks, nextn.eh_proj
	roleDown               // ffn_down and ffn_down_exps
	roleShared             // shared expert
)

// matrixType is the type a matrix of role r with rows of n values gets. The
// mixes follow llama-quantize (and the golden files): Q4_0 keeps the output
// matrix at Q6_K; Q4_K_M is Q4_K with Q6_K down projections and output, Q5_K
// shared experts and Q8_0 per-head attention matrices.
func (f Format) matrixType(r role, n uint64) quant.Type {
	var t quant.Type
	switch f {
	case F32:
		t = quant.F32
	case F16:
		t = quant.F16
	case BF16:
		t = quant.BF16
	case Q8_0:
		t = quant.Q8_0
	case Q4_0:
		t = quant.Q4_0
		if r == roleOutput {
			t = quant.Q6_K
		}
	case Q4_K_M:
		switch r {
		case roleOutput, roleDown:
			t = quant.Q6_K
		case roleShared:
			t = quant.Q5_K
		case roleAttnB:
			t = quant.Q8_0
		default:
			t = quant.Q4_K
		}
	}
	return fallback(t, n)
}

// fallback swaps a type whose block does not divide the row length for the
// next one that does, as llama-quantize does: K-quants → Q8_0 → F16.
func fallback(t quant.Type, n uint64) quant.Type {
	if n%uint64(t.BlockSize()) == 0 {
		return t
	}
	if t.BlockSize() == quant.QK_K && n%uint64(quant.Q8_0.BlockSize()) == 0 {
		return quant.Q8_0
	}
	return quant.F16
}

// add lists a tensor; sizeTensors fills in its size once all are listed.
func (m *Model) add(name string, typ quant.Type, kind initKind, mean, std float64, dims ...uint64) {
	m.Tensors = append(m.Tensors, Tensor{Name: name, Dims: dims, Type: typ, kind: kind, mean: mean, std: std})
}

// matrix adds a weight matrix drawn from N(0, 1/fan_in), fan_in being the
// row length: each output then has about the variance of one input.
func (m *Model) matrix(name string, r role, dims ...uint64) {
	m.add(name, m.Options.Format.matrixType(r, dims[0]), initGauss, 0, 1/math.Sqrt(float64(dims[0])), dims...)
}

// norm adds an RMSNorm weight near 1.
func (m *Model) norm(name string, n uint64) {
	m.add(name, quant.F32, initDirect, 1, 0.1, n)
}

// sizeTensors computes every tensor's data size, failing on the first whose
// shape its type cannot hold.
func (m *Model) sizeTensors() error {
	for i := range m.Tensors {
		t := &m.Tensors[i]
		size, err := t.Type.RowBytes(t.Elements())
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		t.Size = size
	}
	return nil
}

// addTensors lists the tensors in the order real conversions write them.
func (m *Model) addTensors() {
	c := &m.Config
	dim, vocab := uint64(c.Dim), uint64(c.Vocab)
	// Untied embeddings are looked up, not multiplied: unit scale like real
	// ones. Tied ones double as the output matrix, so they get its scale.
	embStd := 1.0
	if m.Preset.Tied {
		embStd = 1 / math.Sqrt(float64(dim))
	}
	m.add("token_embd.weight", m.Options.Format.matrixType(roleEmbed, dim), initGauss, 0, embStd, dim, vocab)
	m.norm("output_norm.weight", dim)
	if !m.Preset.Tied {
		m.matrix("output.weight", roleOutput, dim, vocab)
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if l >= c.DecoderLayers() {
			// The NextN block: it mixes the embedding of the next token with
			// the last hidden state, then runs a full decoder layer.
			m.matrix(p+"nextn.eh_proj.weight", roleGateUp, 2*dim, dim)
			m.norm(p+"nextn.enorm.weight", dim)
			m.norm(p+"nextn.hnorm.weight", dim)
			m.norm(p+"nextn.shared_head_norm.weight", dim)
		}
		m.layer(p, l)
	}
}

func (m *Model) layer(p string, l int) {
	c := &m.Config
	dim := uint64(c.Dim)
	heads, nope, rope, vh := uint64(c.Heads), uint64(c.Nope), uint64(c.Rope), uint64(c.VHead)
	kvl := uint64(c.KVLoRA)
	m.norm(p+"attn_norm.weight", dim)
	if c.QLoRA > 0 {
		ql := uint64(c.QLoRA)
		m.norm(p+"attn_q_a_norm.weight", ql)
		m.matrix(p+"attn_q_a.weight", roleAttn, dim, ql)
		m.matrix(p+"attn_q_b.weight", roleAttn, ql, heads*(nope+rope))
	} else {
		m.matrix(p+"attn_q.weight", roleAttn, dim, heads*(nope+rope))
	}
	m.norm(p+"attn_kv_a_norm.weight", kvl)
	m.matrix(p+"attn_kv_a_mqa.weight", roleAttn, dim, kvl+rope)
	if c.Legacy {
		m.matrix(p+"attn_kv_b.weight", roleAttn, kvl, heads*(nope+vh))
	} else {
		m.matrix(p+"attn_k_b.weight", roleAttnB, nope, kvl, heads)
		m.matrix(p+"attn_v_b.weight", roleAttnB, kvl, vh, heads)
	}
	m.matrix(p+"attn_output.weight", roleAttn, heads*vh, dim)
	m.norm(p+"ffn_norm.weight", dim)
	if !c.IsMoE(l) {
		ff := uint64(c.FF)
		m.matrix(p+"ffn_gate.weight", roleGateUp, dim, ff)
		m.matrix(p+"ffn_up.weight", roleGateUp, dim, ff)
		m.matrix(p+"ffn_down.weight", roleDown, ff, dim)
	} else {
		ne, eff := uint64(c.Experts), uint64(c.ExpertFF)
		// The router stays F32 in real files: its logits decide routing.
		m.add(p+"ffn_gate_inp.weight", quant.F32, initGauss, 0, 1/math.Sqrt(float64(dim)), dim, ne)
		if c.Gating == deepseek2.GatingSigmoid {
			// Selection bias: small and mostly negative, as trained ones are.
			m.add(p+"exp_probs_b.bias", quant.F32, initDirect, -0.03, 0.03, ne)
		}
		m.matrix(p+"ffn_gate_exps.weight", roleGateUp, dim, eff, ne)
		m.matrix(p+"ffn_up_exps.weight", roleGateUp, dim, eff, ne)
		m.matrix(p+"ffn_down_exps.weight", roleDown, eff, dim, ne)
		if c.SharedExperts > 0 {
			sh := eff * uint64(c.SharedExperts)
			m.matrix(p+"ffn_gate_shexp.weight", roleShared, dim, sh)
			m.matrix(p+"ffn_up_shexp.weight", roleShared, dim, sh)
			m.matrix(p+"ffn_down_shexp.weight", roleShared, sh, dim)
		}
	}
}

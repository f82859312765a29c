// Package deepseek2 is the deepseek2 architecture: multi-head latent attention
// with optional mixture-of-experts feed-forward layers (Youtu-LLM, DeepSeek-V2,
// GLM-4.7-Flash, Kimi, ...). This file maps its GGUF metadata to a Config.
package deepseek2

import (
	"fmt"
	"math"

	"github.com/latent-ai/latent/gguf"
)

// Arch is the value of general.architecture for this family.
const Arch = "deepseek2"

// Gating is the router's scoring function.
type Gating int

// The values of deepseek2.expert_gating_func.
const (
	GatingSoftmax Gating = 1
	GatingSigmoid Gating = 2
)

func (g Gating) String() string {
	switch g {
	case GatingSoftmax:
		return "softmax"
	case GatingSigmoid:
		return "sigmoid"
	}
	return fmt.Sprintf("gating(%d)", int(g))
}

// RopeScaling is the context-extension scheme; Type "" or "none" means none.
type RopeScaling struct {
	Type        string  // "yarn", "linear" or ""
	Factor      float64 // context multiplier s
	OrigContext int     // trained context n0 before extension
	YarnLogMul  float64 // yarn_log_multiplier (0.1 · mscale_all_dim)
}

// Config is every hyperparameter the forward pass needs. Dimensions follow
// the notes (§1–3): nope/rope/v are per-head sizes.
type Config struct {
	Name          string // general.name
	Layers        int    // block_count: decoder blocks plus NextN prediction blocks
	NextN         int    // nextn_predict_layers: trailing MTP blocks ordinary decoding skips
	Dim           int    // embedding_length
	FF            int    // feed_forward_length (dense layers)
	Heads         int    // attention.head_count
	HeadsKV       int    // attention.head_count_kv (1 in absorbed-MLA files, Heads in legacy ones)
	QLoRA         int    // attention.q_lora_rank; 0 = attn_q projects directly
	KVLoRA        int    // attention.kv_lora_rank
	Nope          int    // per-head q/k dimensions without position
	Rope          int    // rope.dimension_count: per-head q/k dimensions with RoPE
	VHead         int    // per-head value dimension
	RopeBase      float64
	RMSEps        float64
	Vocab         int
	ContextLength int // trained context
	Scaling       RopeScaling

	LeadingDense  int // leading_dense_block_count: layers before the first MoE layer
	Experts       int // expert_count (0: every layer dense)
	ExpertsUsed   int
	SharedExperts int
	ExpertFF      int
	ExpertScale   float64 // expert_weights_scale
	ExpertNorm    bool    // expert_weights_norm
	Gating        Gating
	ExpertGroups  int // expert_group_count (DeepSeek-V3 group-limited routing); 0 = none
	GroupsUsed    int

	// Legacy is true for older conversions without the *_mla keys, which carry
	// one combined attn_kv_b per layer instead of attn_k_b/attn_v_b.
	Legacy bool
}

// DecoderLayers is the number of blocks that run for every token.
func (c *Config) DecoderLayers() int { return c.Layers - c.NextN }

// IsMoE reports whether layer l has a mixture-of-experts FFN.
func (c *Config) IsMoE(l int) bool { return c.Experts > 0 && l >= c.LeadingDense }

// CacheRow is the number of values one position stores per layer: the latent
// plus the shared RoPE key.
func (c *Config) CacheRow() int { return c.KVLoRA + c.Rope }

// meta reads typed keys under the architecture prefix and remembers the first error.
type meta struct {
	f   *gguf.File
	err error
}

func (m *meta) key(k string) string { return Arch + "." + k }

func (m *meta) uint(k string, def int, required bool) int {
	v, ok := m.f.Get(m.key(k))
	if !ok {
		if required && m.err == nil {
			m.err = fmt.Errorf("metadata %s is missing", m.key(k))
		}
		return def
	}
	u, ok := v.Uint()
	if !ok || u > math.MaxInt32 {
		if m.err == nil {
			m.err = fmt.Errorf("metadata %s is %s, want a non-negative integer", m.key(k), v.Format())
		}
		return def
	}
	return int(u)
}

func (m *meta) float(k string, def float64) float64 {
	v, ok := m.f.Get(m.key(k))
	if !ok {
		return def
	}
	x, ok := v.Float()
	if !ok && m.err == nil {
		m.err = fmt.Errorf("metadata %s is %s, want a number", m.key(k), v.Format())
	}
	return x
}

func (m *meta) has(k string) bool { _, ok := m.f.Get(m.key(k)); return ok }

// ConfigFrom reads the configuration from a GGUF file's metadata, applying the
// defaults real conversions rely on, and checks that it is self-consistent.
func ConfigFrom(f *gguf.File) (*Config, error) {
	arch := ""
	if v, ok := f.Get("general.architecture"); ok {
		arch, _ = v.String()
	}
	if arch != Arch {
		if arch == "" {
			return nil, fmt.Errorf("%s: general.architecture is missing; supported: %s", f.Name, Arch)
		}
		return nil, fmt.Errorf("%s: architecture %q is not supported; supported: %s", f.Name, arch, Arch)
	}
	m := &meta{f: f}
	c := &Config{}
	if v, ok := f.Get("general.name"); ok {
		c.Name, _ = v.String()
	}
	c.Layers = m.uint("block_count", 0, true)
	c.NextN = m.uint("nextn_predict_layers", 0, false)
	c.Dim = m.uint("embedding_length", 0, true)
	c.FF = m.uint("feed_forward_length", 0, false)
	c.Heads = m.uint("attention.head_count", 0, true)
	c.HeadsKV = m.uint("attention.head_count_kv", c.Heads, false)
	c.QLoRA = m.uint("attention.q_lora_rank", 0, false)
	c.KVLoRA = m.uint("attention.kv_lora_rank", 0, true)
	c.Rope = m.uint("rope.dimension_count", 0, true)
	if m.has("attention.key_length_mla") {
		c.Nope = m.uint("attention.key_length_mla", 0, true) - c.Rope
		c.VHead = m.uint("attention.value_length_mla", 0, true)
	} else {
		c.Legacy = true
		c.Nope = m.uint("attention.key_length", 0, true) - c.Rope
		c.VHead = m.uint("attention.value_length", 0, true)
	}
	c.RopeBase = m.float("rope.freq_base", 10000)
	c.RMSEps = m.float("attention.layer_norm_rms_epsilon", 1e-6)
	c.ContextLength = m.uint("context_length", 4096, false)
	c.Vocab = m.uint("vocab_size", 0, false)
	if c.Vocab == 0 {
		if v, ok := f.Get("tokenizer.ggml.tokens"); ok {
			c.Vocab = v.Len()
		}
	}
	if c.Vocab == 0 {
		if t, ok := f.Tensor("token_embd.weight"); ok {
			c.Vocab = int(t.Dim(1))
		}
	}

	if v, ok := f.Get(m.key("rope.scaling.type")); ok {
		c.Scaling.Type, _ = v.String()
	}
	c.Scaling.Factor = m.float("rope.scaling.factor", 1)
	c.Scaling.OrigContext = m.uint("rope.scaling.original_context_length", c.ContextLength, false)
	c.Scaling.YarnLogMul = m.float("rope.scaling.yarn_log_multiplier", 0)

	c.LeadingDense = m.uint("leading_dense_block_count", 0, false)
	c.Experts = m.uint("expert_count", 0, false)
	c.ExpertsUsed = m.uint("expert_used_count", 0, false)
	c.SharedExperts = m.uint("expert_shared_count", 0, false)
	c.ExpertFF = m.uint("expert_feed_forward_length", 0, false)
	c.ExpertScale = m.float("expert_weights_scale", 1)
	if v, ok := f.Get(m.key("expert_weights_norm")); ok {
		var isBool bool
		if c.ExpertNorm, isBool = v.Bool(); !isBool && m.err == nil {
			m.err = fmt.Errorf("metadata %s is %s, want a bool", m.key("expert_weights_norm"), v.Format())
		}
	}
	c.Gating = Gating(m.uint("expert_gating_func", 0, false))
	if c.Gating == 0 {
		// Older GLM-4.7-Flash conversions omit the key but route with sigmoid.
		c.Gating = GatingSoftmax
		if (c.Layers == 47 || c.Layers == 48) && c.Vocab == 154880 {
			c.Gating = GatingSigmoid
		}
	}
	c.ExpertGroups = m.uint("expert_group_count", 0, false)
	c.GroupsUsed = m.uint("expert_group_used_count", 0, false)
	if m.err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, m.err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return c, nil
}

// Validate checks the hyperparameters against each other.
func (c *Config) Validate() error {
	switch {
	case c.Layers <= 0:
		return fmt.Errorf("block_count %d must be positive", c.Layers)
	case c.NextN >= c.Layers:
		return fmt.Errorf("nextn_predict_layers %d leaves no decoder layers of %d", c.NextN, c.Layers)
	case c.Dim <= 0 || c.Heads <= 0 || c.KVLoRA <= 0:
		return fmt.Errorf("embedding_length %d, head_count %d and kv_lora_rank %d must be positive", c.Dim, c.Heads, c.KVLoRA)
	case c.Rope <= 0 || c.Rope%2 != 0:
		return fmt.Errorf("rope.dimension_count %d must be positive and even", c.Rope)
	case c.Nope <= 0:
		return fmt.Errorf("key length minus rope dimension (%d) must be positive", c.Nope)
	case c.VHead <= 0:
		return fmt.Errorf("value length %d must be positive", c.VHead)
	case c.Vocab <= 0:
		return fmt.Errorf("vocabulary size is unknown")
	case c.ContextLength <= 0:
		return fmt.Errorf("context_length %d must be positive", c.ContextLength)
	case c.Gating != GatingSoftmax && c.Gating != GatingSigmoid:
		return fmt.Errorf("expert_gating_func %d is not supported (1 softmax, 2 sigmoid)", int(c.Gating))
	case !positive(c.RMSEps):
		return fmt.Errorf("layer_norm_rms_epsilon %g must be a positive number", c.RMSEps)
	case !positive(c.RopeBase):
		return fmt.Errorf("rope.freq_base %g must be a positive number", c.RopeBase)
	case math.IsNaN(c.Scaling.Factor) || math.IsInf(c.Scaling.Factor, 0):
		return fmt.Errorf("rope.scaling.factor %g must be a finite number", c.Scaling.Factor)
	case c.yarn() && c.Scaling.OrigContext <= 0: // a factor of 1 or less turns YaRN off, as in llama.cpp
		return fmt.Errorf("rope.scaling.original_context_length %d must be positive", c.Scaling.OrigContext)
	case math.IsNaN(c.Scaling.YarnLogMul) || math.IsInf(c.Scaling.YarnLogMul, 0):
		return fmt.Errorf("rope.scaling.yarn_log_multiplier %g must be a finite number", c.Scaling.YarnLogMul)
	}
	if c.Experts > 0 {
		switch {
		case c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts:
			return fmt.Errorf("expert_used_count %d must be between 1 and expert_count %d", c.ExpertsUsed, c.Experts)
		case c.ExpertFF <= 0:
			return fmt.Errorf("expert_feed_forward_length %d must be positive", c.ExpertFF)
		case !positive(c.ExpertScale):
			return fmt.Errorf("expert_weights_scale %g must be a positive number", c.ExpertScale)
		case c.ExpertGroups > 0 && (c.Experts%c.ExpertGroups != 0 || c.GroupsUsed <= 0 || c.GroupsUsed > c.ExpertGroups):
			return fmt.Errorf("expert groups %d (used %d) do not divide %d experts", c.ExpertGroups, c.GroupsUsed, c.Experts)
		}
	}
	if (c.Experts == 0 || c.LeadingDense > 0) && c.FF <= 0 {
		return fmt.Errorf("feed_forward_length %d must be positive for dense layers", c.FF)
	}
	return nil
}

// positive reports whether x is a positive finite number (NaN is not).
func positive(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// firstQ is the width of attention's first product of h: q_a's q_lora with
// q_lora, else q's heads·(nope+rope).
func (c *Config) firstQ() int {
	if c.QLoRA > 0 {
		return c.QLoRA
	}
	return c.Heads * (c.Nope + c.Rope)
}

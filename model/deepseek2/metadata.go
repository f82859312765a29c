package deepseek2

import "github.com/latent-ai/latent/gguf"

// Metadata is the architecture's metadata as real conversions write it (same
// keys, value types and order as llama.cpp's convert_hf_to_gguf.py), so that
// files written from a Config load in any GGUF reader as deepseek2.
func (c *Config) Metadata() []gguf.KV {
	u := func(x int) gguf.Value { return gguf.Uint32(uint32(x)) }
	f := func(x float64) gguf.Value { return gguf.Float32(float32(x)) }
	kv := []gguf.KV{{Key: "general.architecture", Value: gguf.String(Arch)}}
	if c.Name != "" {
		kv = append(kv, gguf.KV{Key: "general.name", Value: gguf.String(c.Name)})
	}
	add := func(k string, v gguf.Value) { kv = append(kv, gguf.KV{Key: Arch + "." + k, Value: v}) }
	add("block_count", u(c.Layers))
	add("context_length", u(c.ContextLength))
	add("embedding_length", u(c.Dim))
	add("feed_forward_length", u(c.FF))
	add("attention.head_count", u(c.Heads))
	if c.Legacy {
		add("attention.head_count_kv", u(c.Heads))
	} else {
		add("attention.head_count_kv", u(1))
	}
	add("rope.freq_base", f(c.RopeBase))
	add("attention.layer_norm_rms_epsilon", f(c.RMSEps))
	add("vocab_size", u(c.Vocab))
	add("attention.kv_lora_rank", u(c.KVLoRA))
	if c.Legacy {
		add("attention.key_length", u(c.Nope+c.Rope))
		add("attention.value_length", u(c.VHead))
	} else {
		// Absorbed MLA attends in the latent space: one KV "head" of kv_lora+rope.
		add("attention.key_length", u(c.KVLoRA+c.Rope))
		add("attention.value_length", u(c.KVLoRA))
		add("attention.key_length_mla", u(c.Nope+c.Rope))
		add("attention.value_length_mla", u(c.VHead))
	}
	add("rope.dimension_count", u(c.Rope))
	add("leading_dense_block_count", u(c.LeadingDense))
	add("expert_feed_forward_length", u(c.ExpertFF))
	add("expert_shared_count", u(c.SharedExperts))
	add("attention.q_lora_rank", u(c.QLoRA))
	if c.Experts > 0 {
		add("expert_count", u(c.Experts))
		add("expert_used_count", u(c.ExpertsUsed))
		add("expert_weights_scale", f(c.ExpertScale))
		add("expert_weights_norm", gguf.Bool(c.ExpertNorm))
		add("expert_gating_func", u(int(c.Gating)))
		if c.ExpertGroups > 0 {
			add("expert_group_count", u(c.ExpertGroups))
			add("expert_group_used_count", u(c.GroupsUsed))
		}
	}
	if c.Scaling.Type != "" {
		add("rope.scaling.type", gguf.String(c.Scaling.Type))
		add("rope.scaling.factor", f(c.Scaling.Factor))
		if c.Scaling.Type == "yarn" {
			add("rope.scaling.original_context_length", u(c.Scaling.OrigContext))
			add("rope.scaling.yarn_log_multiplier", f(c.Scaling.YarnLogMul))
		}
	}
	if c.NextN > 0 {
		add("nextn_predict_layers", u(c.NextN))
	}
	return kv
}

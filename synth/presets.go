// Package synth writes deepseek2 GGUF files with random weights: the three
// target models at their real shapes and tiny test models that mirror the
// golden files. Real weights cannot be downloaded where latent is benchmarked,
// so these files are every benchmark's input: same tensor names, shapes, types
// and metadata as real conversions, a valid byte-level BPE vocabulary, and
// weights scaled so activations stay near unit size.
package synth

import (
	"fmt"
	"strings"

	"github.com/latent-ai/latent/model/deepseek2"
)

// Preset is a model shape synth can write.
type Preset struct {
	Name        string
	Description string
	Config      deepseek2.Config
	Tied        bool // no output.weight: the output projection reuses token_embd
	Tokenizer   TokenizerSpec
}

// TokenizerSpec describes the vocabulary synth builds for a preset.
type TokenizerSpec struct {
	Pre string // tokenizer.ggml.pre
	// Specials are the named control tokens, in order, at the end of the
	// vocabulary; SpecialCount pads them with <|reserved_K|> tokens.
	Specials     []string
	SpecialCount int
	BOS, EOS     int // indices into the special tokens
}

// Presets lists every preset: the tiny test models first, then the real shapes.
func Presets() []Preset {
	ps := []Preset{
		tinyYoutu(), tinyDSV2(), tinyGLM(),
		youtuLLM2B(), deepseekV2Lite(), glm47Flash(),
	}
	for i := range ps {
		roundFloats(&ps[i].Config)
	}
	return ps
}

// roundFloats rounds the Config's real numbers to float32, as GGUF stores
// them, so that a written file reads back to exactly the Config it came from.
func roundFloats(c *deepseek2.Config) {
	for _, x := range []*float64{&c.RopeBase, &c.RMSEps, &c.Scaling.Factor, &c.Scaling.YarnLogMul, &c.ExpertScale} {
		*x = float64(float32(*x))
	}
}

// PresetNames is the preset names, comma-separated, for error messages.
func PresetNames() string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, error) {
	for _, p := range Presets() {
		if p.Name == name {
			return p, nil
		}
	}
	return Preset{}, fmt.Errorf("unknown preset %q (valid: %s)", name, PresetNames())
}

// Special tokens as the golden files (and the real tokenizers) spell them.
// Functions, not variables: every Preset gets its own slice.
func youtuSpecials() []string {
	return []string{"<|begin_of_text|>", "<|end_of_text|>", "<|User|>", "<|Assistant|>", "<think>", "</think>"}
}

func dsv2Specials() []string {
	return []string{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "User:", "Assistant:"}
}

func glmTinySpecials() []string {
	return []string{"[gMASK]", "<|endoftext|>", "<sop>", "<|user|>", "<|assistant|>", "<think>", "</think>"}
}

// glmSpecials starts, like the real GLM-4.7-Flash vocabulary, with
// <|endoftext|> and carries the role tokens llama.cpp treats as end of turn.
func glmSpecials() []string {
	return []string{"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
		"<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>"}
}

// noScaling is what deepseek2.ConfigFrom reports for a file without
// rope.scaling keys; presets spell it out so a written file reads back equal.
func noScaling(ctx int) deepseek2.RopeScaling {
	return deepseek2.RopeScaling{Factor: 1, OrigContext: ctx}
}

// The tiny presets mirror /work/shared/golden/models exactly: hidden 256,
// 3 layers, 4 heads, vocab 1024, context 4096.

func tinyYoutu() Preset {
	return Preset{
		Name:        "tiny-youtu",
		Description: "test size, Youtu-LLM structure: dense FFN everywhere, q_lora, tied embeddings",
		Tied:        true,
		Config: deepseek2.Config{
			Name: "tiny dense MLA", Layers: 3, Dim: 256, FF: 512, Heads: 4, HeadsKV: 1,
			QLoRA: 256, KVLoRA: 256, Nope: 32, Rope: 32, VHead: 32,
			RopeBase: 1e4, RMSEps: 1e-6, Vocab: 1024, ContextLength: 4096, Scaling: noScaling(4096),
			LeadingDense: 3, ExpertFF: 512, ExpertScale: 1, Gating: deepseek2.GatingSoftmax,
		},
		Tokenizer: TokenizerSpec{Pre: "youtu", Specials: youtuSpecials(), SpecialCount: 8, BOS: 0, EOS: 1},
	}
}

func tinyDSV2() Preset {
	return Preset{
		Name:        "tiny-dsv2",
		Description: "test size, DeepSeek-V2-Lite structure: attn_q, softmax MoE 3 of 8 + 2 shared, YaRN",
		Config: deepseek2.Config{
			Name: "tiny MoE MLA, softmax routing, YaRN", Layers: 3, Dim: 256, FF: 512, Heads: 4, HeadsKV: 1,
			KVLoRA: 256, Nope: 32, Rope: 32, VHead: 32,
			RopeBase: 1e4, RMSEps: 1e-6, Vocab: 1024, ContextLength: 4096,
			Scaling:      deepseek2.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 1024, YarnLogMul: 0.0707},
			LeadingDense: 1, Experts: 8, ExpertsUsed: 3, SharedExperts: 2, ExpertFF: 256,
			ExpertScale: 1, Gating: deepseek2.GatingSoftmax,
		},
		Tokenizer: TokenizerSpec{Pre: "deepseek-llm", Specials: dsv2Specials(), SpecialCount: 6, BOS: 0, EOS: 1},
	}
}

func tinyGLM() Preset {
	return Preset{
		Name:        "tiny-glm",
		Description: "test size, GLM-4.7-Flash structure: sigmoid MoE with selection bias, 2 of 8 + 1 shared",
		Config: deepseek2.Config{
			Name: "tiny MoE MLA, sigmoid routing with bias", Layers: 3, Dim: 256, FF: 512, Heads: 4, HeadsKV: 1,
			QLoRA: 256, KVLoRA: 256, Nope: 64, Rope: 32, VHead: 64,
			RopeBase: 1e6, RMSEps: 1e-5, Vocab: 1024, ContextLength: 4096, Scaling: noScaling(4096),
			LeadingDense: 1, Experts: 8, ExpertsUsed: 2, SharedExperts: 1, ExpertFF: 256,
			ExpertScale: 1.8, ExpertNorm: true, Gating: deepseek2.GatingSigmoid,
		},
		Tokenizer: TokenizerSpec{Pre: "glm4", Specials: glmTinySpecials(), SpecialCount: 7, BOS: 0, EOS: 1},
	}
}

func youtuLLM2B() Preset {
	// The rope base is a guess (not published where we could read it): a large
	// base suits plain RoPE over the advertised 128k context.
	const ctx = 131072
	return Preset{
		Name:        "youtu-llm-2b",
		Description: "Youtu-LLM-2B shape: 32 dense layers, 2048 wide, q_lora 1536, vocab 128256, tied (≈2 B weights)",
		Tied:        true,
		Config: deepseek2.Config{
			Name: "Youtu-LLM-2B (synthetic)", Layers: 32, Dim: 2048, FF: 6144, Heads: 16, HeadsKV: 1,
			QLoRA: 1536, KVLoRA: 512, Nope: 128, Rope: 64, VHead: 128,
			RopeBase: 1e6, RMSEps: 1e-6, Vocab: 128256, ContextLength: ctx, Scaling: noScaling(ctx),
			LeadingDense: 32, ExpertFF: 6144, ExpertScale: 1, Gating: deepseek2.GatingSoftmax,
		},
		// Llama-3 style: 128000 ordinary tokens, then 256 specials.
		Tokenizer: TokenizerSpec{Pre: "youtu", Specials: youtuSpecials(), SpecialCount: 256, BOS: 0, EOS: 1},
	}
}

func deepseekV2Lite() Preset {
	const ctx = 163840
	return Preset{
		Name:        "deepseek-v2-lite",
		Description: "DeepSeek-V2-Lite shape: 27 layers, attn_q, 64 experts 6 used + 2 shared, YaRN ×40 (≈16 B weights)",
		Config: deepseek2.Config{
			Name: "DeepSeek-V2-Lite (synthetic)", Layers: 27, Dim: 2048, FF: 10944, Heads: 16, HeadsKV: 1,
			KVLoRA: 512, Nope: 128, Rope: 64, VHead: 128,
			RopeBase: 1e4, RMSEps: 1e-6, Vocab: 102400, ContextLength: ctx,
			Scaling:      deepseek2.RopeScaling{Type: "yarn", Factor: 40, OrigContext: 4096, YarnLogMul: 0.0707},
			LeadingDense: 1, Experts: 64, ExpertsUsed: 6, SharedExperts: 2, ExpertFF: 1408,
			ExpertScale: 1, Gating: deepseek2.GatingSoftmax,
		},
		// 100000 ordinary tokens, the rest (padding in real files) control tokens.
		Tokenizer: TokenizerSpec{Pre: "deepseek-llm", Specials: dsv2Specials(), SpecialCount: 2400, BOS: 0, EOS: 1},
	}
}

func glm47Flash() Preset {
	const ctx = 202752
	return Preset{
		Name:        "glm-4.7-flash",
		Description: "GLM-4.7-Flash shape: 47 layers, 20 heads, 64 experts 4 used + 1 shared, sigmoid routing (≈30 B weights)",
		Config: deepseek2.Config{
			Name: "GLM-4.7-Flash (synthetic)", Layers: 47, Dim: 2048, FF: 10240, Heads: 20, HeadsKV: 1,
			QLoRA: 768, KVLoRA: 512, Nope: 192, Rope: 64, VHead: 256,
			RopeBase: 1e6, RMSEps: 1e-5, Vocab: 154880, ContextLength: ctx,
			// Real files say linear with factor 1: no scaling.
			Scaling:      deepseek2.RopeScaling{Type: "linear", Factor: 1, OrigContext: ctx},
			LeadingDense: 1, Experts: 64, ExpertsUsed: 4, SharedExperts: 1, ExpertFF: 1536,
			ExpertScale: 1.8, ExpertNorm: true, Gating: deepseek2.GatingSigmoid,
		},
		// Ordinary tokens end at 151329 (<|endoftext|>), as in the real vocabulary.
		Tokenizer: TokenizerSpec{Pre: "glm4", Specials: glmSpecials(), SpecialCount: 154880 - 151329, BOS: 2, EOS: 0},
	}
}

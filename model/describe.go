// Package model describes and loads language models from GGUF files.
package model

import (
	"fmt"
	"sort"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/quant"
)

// Info is what a person wants to know about a model file before running it.
type Info struct {
	File         string  `json:"file"`
	FileBytes    int64   `json:"file_bytes"`
	GGUFVersion  uint32  `json:"gguf_version"`
	Name         string  `json:"name,omitempty"`
	Architecture string  `json:"architecture"`
	Params       int64   `json:"parameters"`
	ActiveParams int64   `json:"active_parameters,omitempty"`
	DecodeBytes  int64   `json:"weight_bytes_per_token,omitempty"`
	Deepseek2    *Arch   `json:"deepseek2,omitempty"`
	TensorCount  int     `json:"tensor_count"`
	TensorBytes  int64   `json:"tensor_bytes"`
	Types        []Type  `json:"types"`
	Tokenizer    *Tok    `json:"tokenizer,omitempty"`
	ChatTemplate bool    `json:"chat_template"`
	ArchError    string  `json:"architecture_error,omitempty"`
	Tensors      []Ten   `json:"tensors,omitempty"`
	BitsPerParam float64 `json:"bits_per_parameter"`
}

// Arch is the deepseek2 shape in the words of the notes.
type Arch struct {
	Layers        int     `json:"layers"`
	MTPLayers     int     `json:"mtp_layers"`
	DenseLayers   int     `json:"dense_layers"`
	MoELayers     int     `json:"moe_layers"`
	Dim           int     `json:"embedding_length"`
	Heads         int     `json:"heads"`
	QLoRA         int     `json:"q_lora_rank"`
	KVLoRA        int     `json:"kv_lora_rank"`
	Nope          int     `json:"qk_nope"`
	Rope          int     `json:"qk_rope"`
	VHead         int     `json:"v_head"`
	FF            int     `json:"feed_forward_length"`
	Experts       int     `json:"experts"`
	ExpertsUsed   int     `json:"experts_used"`
	SharedExperts int     `json:"experts_shared"`
	ExpertFF      int     `json:"expert_feed_forward_length"`
	Gating        string  `json:"gating,omitempty"`
	ExpertScale   float64 `json:"expert_weights_scale,omitempty"`
	ExpertNorm    bool    `json:"expert_weights_norm"`
	Context       int     `json:"context_length"`
	RopeBase      float64 `json:"rope_freq_base"`
	RopeScaling   string  `json:"rope_scaling,omitempty"`
	Vocab         int     `json:"vocab_size"`
	Legacy        bool    `json:"legacy_kv_b"`
	CacheBytes    int64   `json:"kv_bytes_per_token"` // f16 latent cache, all decoder layers
}

// Type is one weight type's share of the file.
type Type struct {
	Type    string `json:"type"`
	Tensors int    `json:"tensors"`
	Bytes   int64  `json:"bytes"`
	Params  int64  `json:"parameters"`
}

// Tok is the tokenizer as the metadata declares it.
type Tok struct {
	Model    string    `json:"model"`
	Pre      string    `json:"pre,omitempty"`
	Tokens   int       `json:"tokens"`
	Merges   int       `json:"merges"`
	Control  int       `json:"control_tokens"`
	Special  []Special `json:"special"`
	AddBOS   *bool     `json:"add_bos_token,omitempty"`
	AddEOS   *bool     `json:"add_eos_token,omitempty"`
	Template int       `json:"chat_template_bytes"`
}

// Special is a named special token.
type Special struct {
	Role string `json:"role"`
	ID   int64  `json:"id"`
	Text string `json:"text"`
}

// Ten is one tensor's entry in the listing.
type Ten struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Shape []uint64 `json:"shape"`
	Bytes int64    `json:"bytes"`
}

var specialRoles = []string{"bos", "eos", "eot", "eom", "unknown", "padding", "seperator", "mask"}

// Describe summarises an open GGUF file. A deepseek2 file whose metadata is
// inconsistent is still described; the problem is reported in ArchError.
func Describe(f *gguf.File, withTensors bool) *Info {
	in := &Info{File: f.Name, FileBytes: f.Size, GGUFVersion: f.Version, TensorCount: len(f.Tensors)}
	str := func(k string) string {
		v, _ := f.Get(k)
		s, _ := v.String()
		return s
	}
	in.Name = str("general.name")
	in.Architecture = str("general.architecture")

	byType := map[quant.Type]*Type{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		in.Params += t.Elements()
		in.TensorBytes += t.Size
		e := byType[t.Type]
		if e == nil {
			e = &Type{Type: t.Type.String()}
			byType[t.Type] = e
		}
		e.Tensors++
		e.Bytes += t.Size
		e.Params += t.Elements()
		if withTensors {
			in.Tensors = append(in.Tensors, Ten{Name: t.Name, Type: t.Type.String(), Shape: t.Dims, Bytes: t.Size})
		}
	}
	for _, e := range byType {
		in.Types = append(in.Types, *e)
	}
	sort.Slice(in.Types, func(i, j int) bool { return in.Types[i].Bytes > in.Types[j].Bytes })
	if in.Params > 0 {
		in.BitsPerParam = float64(in.TensorBytes*8) / float64(in.Params)
	}

	if in.Architecture == deepseek2.Arch {
		if c, err := deepseek2.ConfigFrom(f); err != nil {
			in.ArchError = err.Error()
		} else {
			in.Deepseek2 = describeDeepseek2(c)
			fp := deepseek2.FootprintOf(f, c)
			in.ActiveParams, in.DecodeBytes = fp.ActiveParams, fp.DecodeBytes
		}
	}
	in.Tokenizer = describeTokenizer(f)
	in.ChatTemplate = in.Tokenizer != nil && in.Tokenizer.Template > 0
	return in
}

func describeDeepseek2(c *deepseek2.Config) *Arch {
	a := &Arch{Layers: c.DecoderLayers(), MTPLayers: c.NextN, Dim: c.Dim, Heads: c.Heads, QLoRA: c.QLoRA, KVLoRA: c.KVLoRA,
		Nope: c.Nope, Rope: c.Rope, VHead: c.VHead, FF: c.FF, Experts: c.Experts, ExpertsUsed: c.ExpertsUsed,
		SharedExperts: c.SharedExperts, ExpertFF: c.ExpertFF, Context: c.ContextLength, RopeBase: c.RopeBase,
		Vocab: c.Vocab, Legacy: c.Legacy, CacheBytes: int64(c.CacheRow()) * 2 * int64(c.DecoderLayers())}
	for l := 0; l < c.DecoderLayers(); l++ {
		if c.IsMoE(l) {
			a.MoELayers++
		} else {
			a.DenseLayers++
		}
	}
	if c.Experts > 0 {
		a.Gating, a.ExpertScale, a.ExpertNorm = c.Gating.String(), c.ExpertScale, c.ExpertNorm
	}
	switch c.Scaling.Type {
	case "", "none":
	case "yarn":
		a.RopeScaling = fmt.Sprintf("yarn ×%g from %d", c.Scaling.Factor, c.Scaling.OrigContext)
	default:
		a.RopeScaling = fmt.Sprintf("%s ×%g", c.Scaling.Type, c.Scaling.Factor)
	}
	return a
}

func describeTokenizer(f *gguf.File) *Tok {
	mv, ok := f.Get("tokenizer.ggml.model")
	if !ok {
		return nil
	}
	t := &Tok{}
	t.Model, _ = mv.String()
	if v, ok := f.Get("tokenizer.ggml.pre"); ok {
		t.Pre, _ = v.String()
	}
	var tokens []string
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok {
		tokens, _ = v.StringArray()
		t.Tokens = v.Len()
	}
	if v, ok := f.Get("tokenizer.ggml.merges"); ok {
		t.Merges = v.Len()
	}
	if v, ok := f.Get("tokenizer.ggml.token_type"); ok {
		types, _ := v.IntArray()
		for _, ty := range types {
			if ty == 3 {
				t.Control++
			}
		}
	}
	for _, role := range specialRoles {
		v, ok := f.Get("tokenizer.ggml." + role + "_token_id")
		if !ok {
			continue
		}
		id, ok := v.Int()
		if !ok {
			continue
		}
		s := Special{Role: role, ID: id}
		if id >= 0 && id < int64(len(tokens)) {
			s.Text = tokens[id]
		}
		t.Special = append(t.Special, s)
	}
	boolKey := func(k string) *bool {
		v, ok := f.Get(k)
		if !ok {
			return nil
		}
		b, ok := v.Bool()
		if !ok {
			return nil
		}
		return &b
	}
	t.AddBOS = boolKey("tokenizer.ggml.add_bos_token")
	t.AddEOS = boolKey("tokenizer.ggml.add_eos_token")
	if v, ok := f.Get("tokenizer.chat_template"); ok {
		s, _ := v.String()
		t.Template = len(s)
	}
	return t
}

package deepseek2

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
)

const goldenModels = "../../../shared/golden/models"

func openGolden(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(filepath.Join(goldenModels, name))
	if err != nil {
		t.Fatalf("golden model (../shared must sit beside the repository): %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestConfigFromGolden(t *testing.T) {
	tests := []struct {
		file string
		want Config
	}{
		{"tiny-youtu-f32.gguf", Config{Name: "tiny dense MLA", Layers: 3, Dim: 256, FF: 512, Heads: 4, HeadsKV: 1, QLoRA: 256, KVLoRA: 256,
			Nope: 32, Rope: 32, VHead: 32, RopeBase: 10000, RMSEps: 1e-6, Vocab: 1024, ContextLength: 4096,
			Scaling: RopeScaling{Factor: 1, OrigContext: 4096}, LeadingDense: 3, ExpertFF: 512, ExpertScale: 1, Gating: GatingSoftmax}},
		{"tiny-dsv2-f16.gguf", Config{Name: "tiny MoE MLA, softmax routing, YaRN", Layers: 3, Dim: 256, FF: 512, Heads: 4, HeadsKV: 1, KVLoRA: 256,
			Nope: 32, Rope: 32, VHead: 32, RopeBase: 10000, RMSEps: 1e-6, Vocab: 1024, ContextLength: 4096,
			Scaling:      RopeScaling{Type: "yarn", Factor: 4, OrigContext: 1024, YarnLogMul: float64(float32(0.0707))},
			LeadingDense: 1, Experts: 8, ExpertsUsed: 3, SharedExperts: 2, ExpertFF: 256, ExpertScale: 1, Gating: GatingSoftmax}},
		{"tiny-dsv2-legacy-f32.gguf", Config{Name: "tiny MoE MLA, softmax routing, YaRN", Layers: 3, Dim: 256, FF: 512, Heads: 4, HeadsKV: 4, KVLoRA: 256,
			Nope: 32, Rope: 32, VHead: 32, RopeBase: 10000, RMSEps: 1e-6, Vocab: 1024, ContextLength: 4096,
			Scaling:      RopeScaling{Type: "yarn", Factor: 4, OrigContext: 1024, YarnLogMul: float64(float32(0.0707))},
			LeadingDense: 1, Experts: 8, ExpertsUsed: 3, SharedExperts: 2, ExpertFF: 256, ExpertScale: 1, Gating: GatingSoftmax, Legacy: true}},
		{"tiny-glm-nextn-q8_0.gguf", Config{Name: "tiny MoE MLA, sigmoid routing with bias", Layers: 4, NextN: 1, Dim: 256, FF: 512, Heads: 4, HeadsKV: 1,
			QLoRA: 256, KVLoRA: 256, Nope: 64, Rope: 32, VHead: 64, RopeBase: 1e6, RMSEps: float64(float32(1e-5)), Vocab: 1024, ContextLength: 4096,
			Scaling: RopeScaling{Factor: 1, OrigContext: 4096}, LeadingDense: 1, Experts: 8, ExpertsUsed: 2, SharedExperts: 1, ExpertFF: 256,
			ExpertScale: float64(float32(1.8)), ExpertNorm: true, Gating: GatingSigmoid}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			c, err := ConfigFrom(openGolden(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			tc.want.RMSEps = c.RMSEps // float32 rounding of 1e-6 is not worth spelling out
			if !reflect.DeepEqual(*c, tc.want) {
				t.Errorf("config\n got %+v\nwant %+v", *c, tc.want)
			}
		})
	}
}

// Metadata must reproduce, key for key and type for type, what the real
// converter wrote into every golden file.
func TestMetadataMatchesGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenModels, "*.gguf"))
	if len(files) == 0 {
		t.Fatalf("no golden models in %s", goldenModels)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f := openGolden(t, filepath.Base(path))
			c, err := ConfigFrom(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []gguf.KV
			for _, kv := range f.KV {
				if kv.Key == "general.architecture" || kv.Key == "general.name" || strings.HasPrefix(kv.Key, Arch+".") {
					want = append(want, kv)
				}
			}
			got := c.Metadata()
			gotKeys := map[string]gguf.Value{}
			for _, kv := range got {
				gotKeys[kv.Key] = kv.Value
			}
			if len(got) != len(want) {
				t.Errorf("Metadata has %d keys, file has %d", len(got), len(want))
			}
			for _, kv := range want {
				g, ok := gotKeys[kv.Key]
				if !ok {
					t.Errorf("Metadata lacks %s", kv.Key)
					continue
				}
				if g.Type() != kv.Value.Type() || !reflect.DeepEqual(g.Interface(), kv.Value.Interface()) {
					t.Errorf("%s: Metadata %s %s, file %s %s", kv.Key, g.Type(), g.Format(), kv.Value.Type(), kv.Value.Format())
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	base := func() []gguf.KV {
		c := Config{Layers: 2, Dim: 64, FF: 128, Heads: 2, KVLoRA: 32, Nope: 16, Rope: 16, VHead: 16, RopeBase: 1e4, RMSEps: 1e-6,
			Vocab: 100, ContextLength: 256, Gating: GatingSoftmax}
		return c.Metadata()
	}
	set := func(kv []gguf.KV, key string, v gguf.Value) []gguf.KV {
		for i := range kv {
			if kv[i].Key == key {
				kv[i].Value = v
				return kv
			}
		}
		return append(kv, gguf.KV{Key: key, Value: v})
	}
	drop := func(kv []gguf.KV, key string) []gguf.KV {
		out := kv[:0]
		for _, e := range kv {
			if e.Key != key {
				out = append(out, e)
			}
		}
		return out
	}
	tests := []struct {
		name string
		kv   []gguf.KV
		want string
	}{
		{"ok", base(), ""},
		{"other arch", set(base(), "general.architecture", gguf.String("llama")), `architecture "llama" is not supported; supported: deepseek2`},
		{"no arch", drop(base(), "general.architecture"), "general.architecture is missing"},
		{"no layers", drop(base(), "deepseek2.block_count"), "deepseek2.block_count is missing"},
		{"string layers", set(base(), "deepseek2.block_count", gguf.String("two")), `deepseek2.block_count is "two", want a non-negative integer`},
		{"odd rope", set(base(), "deepseek2.rope.dimension_count", gguf.Uint32(15)), "rope.dimension_count 15 must be positive and even"},
		{"gating", set(set(base(), "deepseek2.expert_count", gguf.Uint32(4)), "deepseek2.expert_gating_func", gguf.Uint32(3)), "expert_gating_func 3 is not supported"},
		{"used > experts", set(set(base(), "deepseek2.expert_count", gguf.Uint32(4)), "deepseek2.expert_used_count", gguf.Uint32(5)), "expert_used_count 5 must be between 1 and expert_count 4"},
		{"all nextn", set(base(), "deepseek2.nextn_predict_layers", gguf.Uint32(2)), "leaves no decoder layers"},
		{"zero context", set(base(), "deepseek2.context_length", gguf.Uint32(0)), "context_length 0 must be positive"},
		{"NaN epsilon", set(base(), "deepseek2.attention.layer_norm_rms_epsilon", gguf.Float32(float32(math.NaN()))), "layer_norm_rms_epsilon NaN must be a positive number"},
		{"negative rope base", set(base(), "deepseek2.rope.freq_base", gguf.Float32(-1)), "rope.freq_base -1 must be a positive number"},
		{"infinite yarn factor", set(set(base(), "deepseek2.rope.scaling.type", gguf.String("yarn")), "deepseek2.rope.scaling.factor", gguf.Float32(float32(math.Inf(1)))), "rope.scaling.factor +Inf must be a finite number"},
		{"NaN yarn multiplier", set(base(), "deepseek2.rope.scaling.yarn_log_multiplier", gguf.Float32(float32(math.NaN()))), "yarn_log_multiplier NaN must be a finite number"},
		{"infinite expert scale", set(set(set(set(base(), "deepseek2.expert_count", gguf.Uint32(4)), "deepseek2.expert_used_count", gguf.Uint32(2)), "deepseek2.expert_feed_forward_length", gguf.Uint32(64)), "deepseek2.expert_weights_scale", gguf.Float32(float32(math.Inf(1)))), "expert_weights_scale +Inf must be a positive number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			w := gguf.NewWriter(&buf)
			for _, kv := range tc.kv {
				if err := w.SetKV(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse("m.gguf", []byte(buf.String()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ConfigFrom(f)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "m.gguf: ")):
				t.Fatalf("error %v, want it to name m.gguf and contain %q", err, tc.want)
			}
		})
	}
}

package synth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
)

const goldenDir = "../../shared/golden/models"

func openGolden(t *testing.T, name string) *gguf.File {
	t.Helper()
	path := filepath.Join(goldenDir, name+".gguf")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("golden file missing: %v (the shared/ directory must sit next to the checkout)", err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open golden: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// writeTemp synthesizes opts into a temporary file and opens it.
func writeTemp(t *testing.T, opts Options) (*Model, *gguf.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	m, _, err := WriteFile(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open synthesized file: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return m, f
}

// TestMatchesGolden checks that each tiny preset and format writes a file
// that another reader cannot tell from the golden conversion of the same
// structure: tensor names, shapes and types, metadata keys and value types,
// and every architecture value.
func TestMatchesGolden(t *testing.T) {
	tests := []struct {
		golden string
		opts   Options
	}{
		{"tiny-youtu-f32", Options{Preset: "tiny-youtu", Format: F32}},
		{"tiny-youtu-q4_0", Options{Preset: "tiny-youtu", Format: Q4_0}},
		{"tiny-dsv2-f16", Options{Preset: "tiny-dsv2", Format: F16}},
		{"tiny-dsv2-q8_0", Options{Preset: "tiny-dsv2", Format: Q8_0}},
		{"tiny-dsv2-legacy-f32", Options{Preset: "tiny-dsv2", Format: F32, LegacyKVB: true}},
		{"tiny-glm-f32", Options{Preset: "tiny-glm", Format: F32}},
		{"tiny-glm-q4_0", Options{Preset: "tiny-glm", Format: Q4_0}},
		{"tiny-glm-q4_k_m", Options{Preset: "tiny-glm", Format: Q4_K_M}},
		{"tiny-glm-nextn-q8_0", Options{Preset: "tiny-glm", Format: Q8_0, MTP: true}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			g := openGolden(t, tc.golden)
			m, f := writeTemp(t, tc.opts)

			// Tensors, order-independent.
			want := map[string]string{}
			for _, ti := range g.Tensors {
				want[ti.Name] = tensorSig(ti)
			}
			got := map[string]string{}
			for _, ti := range f.Tensors {
				got[ti.Name] = tensorSig(ti)
			}
			for name, w := range want {
				if gs, ok := got[name]; !ok {
					t.Errorf("tensor %s missing (golden: %s)", name, w)
				} else if gs != w {
					t.Errorf("tensor %s is %s, golden %s", name, gs, w)
				}
			}
			for name, gs := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("extra tensor %s %s", name, gs)
				}
			}

			// Metadata keys, value types, and the architecture's values.
			for _, kv := range g.KV {
				v, ok := f.Get(kv.Key)
				if !ok {
					t.Errorf("metadata %s missing", kv.Key)
					continue
				}
				if v.Type() != kv.Value.Type() || v.ElemType() != kv.Value.ElemType() {
					t.Errorf("metadata %s has type %s/%s, golden %s/%s", kv.Key, v.Type(), v.ElemType(), kv.Value.Type(), kv.Value.ElemType())
					continue
				}
				if archValue(kv.Key) && !reflect.DeepEqual(v.Interface(), kv.Value.Interface()) {
					t.Errorf("metadata %s = %s, golden %s", kv.Key, v.Format(), kv.Value.Format())
				}
				if v.Type() == gguf.TypeArray && strings.HasPrefix(kv.Key, "tokenizer.ggml.") && kv.Key != "tokenizer.ggml.merges" && v.Len() != kv.Value.Len() {
					t.Errorf("metadata %s has %d entries, golden %d", kv.Key, v.Len(), kv.Value.Len())
				}
			}
			for _, kv := range f.KV {
				if _, ok := g.Get(kv.Key); !ok {
					t.Errorf("extra metadata %s = %s", kv.Key, kv.Value.Format())
				}
			}

			// The Config reads back as written, and equals the golden file's.
			c, err := deepseek2.ConfigFrom(f)
			if err != nil {
				t.Fatalf("ConfigFrom(synthesized): %v", err)
			}
			if !reflect.DeepEqual(*c, m.Config) {
				t.Errorf("config read back\n%+v\nwritten\n%+v", *c, m.Config)
			}
			gc, err := deepseek2.ConfigFrom(g)
			if err != nil {
				t.Fatalf("ConfigFrom(golden): %v", err)
			}
			if !reflect.DeepEqual(*c, *gc) {
				t.Errorf("config\n%+v\ngolden\n%+v", *c, *gc)
			}
			emb, _ := f.Tensor("token_embd.weight")
			if tok, _ := f.Get("tokenizer.ggml.tokens"); uint64(tok.Len()) != emb.Dim(1) {
				t.Errorf("%d tokens, token_embd has %d rows", tok.Len(), emb.Dim(1))
			}
		})
	}
}

func tensorSig(t gguf.TensorInfo) string { return fmt.Sprintf("%v %s", t.Dims, t.Type) }

// archValue reports whether a key's value must equal the golden file's (the
// tokenizer's contents and the model's name may differ).
func archValue(key string) bool {
	switch key {
	case "general.architecture", "general.alignment", "tokenizer.ggml.model", "tokenizer.ggml.pre",
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token":
		return true
	}
	return strings.HasPrefix(key, deepseek2.Arch+".")
}

// TestPresetsMatchGoldenConfigs pins every tiny preset's Config to its golden
// file, so drift in either shows here first.
func TestPresetsMatchGoldenConfigs(t *testing.T) {
	for name, golden := range map[string]string{"tiny-youtu": "tiny-youtu-f32", "tiny-dsv2": "tiny-dsv2-f16", "tiny-glm": "tiny-glm-f32"} {
		p, err := LookupPreset(name)
		if err != nil {
			t.Fatal(err)
		}
		gc, err := deepseek2.ConfigFrom(openGolden(t, golden))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Config, *gc) {
			t.Errorf("preset %s\n%+v\ngolden\n%+v", name, p.Config, *gc)
		}
	}
}

package deepseek2

import (
	"math"
	"testing"

	"github.com/latent-ai/latent/backend/cpu"
)

// stacker is the CPU backend asking for stacked products, as the CUDA
// backend does.
type stacker struct{ *cpu.CPU }

func (stacker) StacksProducts() bool { return true }

// A model whose q_a (q) and kv_a are one stacked weight gives the logits of
// the separate products bit for bit: each output row is the same dot
// product, and the views it is read through cover the same values.
func TestStackedProductsAsSeparate(t *testing.T) {
	for _, tc := range []struct {
		file    string
		stacked bool // q_a (q) and kv_a share a type
	}{
		{"tiny-youtu-f32.gguf", true},
		{"tiny-youtu-q4_0.gguf", true},
		{"tiny-dsv2-f16.gguf", true},
		{"tiny-dsv2-q8_0.gguf", true},
		{"tiny-dsv2-legacy-f32.gguf", true},
		{"tiny-glm-q4_0.gguf", true},
		{"tiny-glm-q4_k_m.gguf", true},
		{"tiny-glm-nextn-q8_0.gguf", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f := openGolden(t, tc.file)
			plain, err := Load(f, cpu.New(2), 64)
			if err != nil {
				t.Fatal(err)
			}
			st, err := Load(f, stacker{cpu.New(2)}, 64)
			if err != nil {
				t.Fatal(err)
			}
			if plain.stacked || st.stacked != tc.stacked {
				t.Fatalf("stacked: plain %v, with a Stacker %v, want false and %v", plain.stacked, st.stacked, tc.stacked)
			}
			prompt := []int32{1, 17, 300, 42, 999, 5, 64, 128, 7}
			want, err := plain.Forward(prompt, true)
			if err != nil {
				t.Fatal(err)
			}
			want = append([]float32(nil), want...)
			got, err := st.Forward(prompt, true)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "prompt", got, want)
			for i, tok := range []int32{3, 99, 512, 3} {
				w, err := plain.Forward([]int32{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				w = append([]float32(nil), w...)
				g, err := st.Forward([]int32{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "step "+string(rune('0'+i)), g, w)
			}
		})
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: logit %d is %v, separate products give %v", what, i, got[i], want[i])
		}
	}
}

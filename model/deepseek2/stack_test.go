package deepseek2

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/quant"
)

// stacker is the CPU backend taking stacked weights, as the CUDA backend
// does.
type stacker struct{ *cpu.CPU }

func (s stacker) StackedWeight(name string, typ quant.Type, dims []uint64, parts ...[]byte) (backend.Weight, error) {
	return s.Weight(name, typ, dims, slices.Concat(parts...))
}

// A model whose q_a (q) and kv_a are one stacked weight gives the logits of
// the separate products bit for bit: each output row is the same dot
// product, and the views it is read through cover the same values. A
// layer whose two types differ keeps its two products.
func TestStackedProductsAsSeparate(t *testing.T) {
	mixed := filepath.Join(t.TempDir(), "mixed.gguf") // layer 0's kv_a in float32, its q_a in Q4_0
	asF32(t, filepath.Join(goldenModels, "tiny-youtu-q4_0.gguf"), mixed, "blk.0.attn_kv_a_mqa.weight")
	for _, tc := range []struct {
		path    string
		stacked []bool // per layer
	}{
		{"tiny-youtu-f32.gguf", []bool{true, true, true}},
		{"tiny-glm-f32.gguf", []bool{true, true, true}},
		{"tiny-youtu-q4_0.gguf", []bool{true, true, true}},
		{"tiny-dsv2-f16.gguf", []bool{true, true, true}},
		{"tiny-dsv2-q8_0.gguf", []bool{true, true, true}},
		{"tiny-dsv2-legacy-f32.gguf", []bool{true, true, true}},
		{"tiny-glm-q4_0.gguf", []bool{true, true, true}},
		{"tiny-glm-q4_k_m.gguf", []bool{true, true, true}},
		{"tiny-glm-nextn-q8_0.gguf", []bool{true, true, true}},
		{mixed, []bool{false, true, true}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			path := tc.path
			if !filepath.IsAbs(path) {
				path = filepath.Join(goldenModels, path)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			be, sbe := cpu.New(2), cpu.New(2)
			defer be.Close()
			defer sbe.Close()
			plain, err := Load(f, be, 64)
			if err != nil {
				t.Fatal(err)
			}
			st, err := Load(f, stacker{sbe}, 64)
			if err != nil {
				t.Fatal(err)
			}
			for l := range st.layers {
				if plain.layers[l].qKV != nil || (st.layers[l].qKV != nil) != tc.stacked[l] {
					t.Fatalf("layer %d stacked: plain %v, with a Stacker %v, want false and %v", l, plain.layers[l].qKV != nil, st.layers[l].qKV != nil, tc.stacked[l])
				}
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
				same(t, "step "+strconv.Itoa(i), g, w)
			}
		})
	}
}

// asF32 writes src to dst with tensor name dequantized to float32.
func asF32(t *testing.T, src, dst, name string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = gguf.RewriteTensors(out, f, nil, func(ti *gguf.TensorInfo, data []byte) (quant.Type, []byte, bool, error) {
		if ti.Name != name {
			return 0, nil, false, nil
		}
		vals := make([]float32, ti.Elements())
		err := quant.Dequantize(ti.Type, data, vals)
		return quant.F32, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals)), true, err
	})
	if err != nil {
		t.Fatal(err)
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

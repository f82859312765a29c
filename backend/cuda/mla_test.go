package cuda_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/latent-ai/latent/backend/cuda"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/synth"
)

// mla_decode (all heads of a cache row on tensor cores, f16 queries and
// probabilities) gives the logits of the unfused kernels, which keep every
// sum in float32, over the same f16 cache: at the real models' widths
// (glm's 20 heads take two row tiles), after prompts whose positions fill
// one split, several, and more splits than SMs' worth of the smallest.
func TestMLADecodeAgainstUnfused(t *testing.T) {
	needGPU(t)
	for _, c := range []struct {
		preset string
		prompt int
	}{{"youtu-llm-2b", 40}, {"youtu-llm-2b", 700}, {"glm-4.7-flash", 700}, {"deepseek-v2-lite", 700}, {"youtu-llm-2b", 9000}} {
		t.Run(c.preset+"/"+strconv.Itoa(c.prompt), func(t *testing.T) {
			t.Setenv("LATENT_CACHE_TYPE", "f16")
			path := filepath.Join(t.TempDir(), c.preset+".gguf")
			if _, _, err := synth.WriteFile(context.Background(), path, synth.Options{Preset: c.preset, Format: synth.Q4_0, Layers: 2, Seed: 3, Workers: 8}); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(c.prompt), 7))
			prompt := make([]int32, c.prompt)
			for i := range prompt {
				prompt[i] = int32(rng.IntN(30000))
			}
			run := func(fusion bool) ([][]float32, []string) {
				lm, err := model.Load(path, model.Options{Backend: "cuda", Context: c.prompt + 16})
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Close()
				be := lm.Backend.(*cuda.Backend)
				be.NoFusion = !fusion
				be.MLAFrom = 0
				m := lm.Model
				if _, err := m.Forward(prompt, false); err != nil {
					t.Fatal(err)
				}
				var steps [][]float32
				for i := range 3 {
					logits, err := m.Forward([]int32{int32(100 + i)}, false)
					if err != nil {
						t.Fatal(err)
					}
					steps = append(steps, slices.Clone(logits))
				}
				var names []string
				kt, err := be.Profile(func() {
					if _, err := m.Forward([]int32{7}, false); err != nil {
						t.Fatal(err)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range kt {
					names = append(names, k.Name)
				}
				return steps, names
			}
			fused, names := run(true)
			plain, _ := run(false)
			if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mla_decode") }) {
				t.Fatalf("no mla_decode launch in a fused step: %v", names)
			}
			for i := range fused {
				scale := maxAbs(plain[i])
				d := maxAbsDiff(fused[i], plain[i])
				t.Logf("step %d: max |Δ| %.3g, largest |logit| %.3g", i, d, scale)
				if d > mlaTolerance*scale {
					t.Errorf("step %d: mla_decode and unfused logits differ by %.3g, more than %g of the largest logit %.3g", i, d, mlaTolerance, scale)
				}
			}
		})
	}
}

// mlaTolerance bounds mla_decode's logits' deviation from the float32
// kernels', relative to the largest logit: its f16 pairs carry about 22
// bits of the queries and probabilities.
const mlaTolerance = 0.04

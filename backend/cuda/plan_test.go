package cuda_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/latent-ai/latent/backend/cuda"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/synth"
)

// A load compiles, before it returns, the unit of every kernel that a
// prompt and the decode step after it launch: the plan's recorded step
// picked the one-token products among them (only those), and the other
// one-token products' units compile in the background. Every unit it
// waits for is one Prepare queued beside the upload: told the weights' and
// the cache's shapes, it gave the same sources as the bound model.
func TestPlanCompilesTheDecodeStep(t *testing.T) {
	needGPU(t)
	for _, c := range []struct {
		preset string
		format synth.Format
	}{
		{"youtu-llm-2b", synth.Q4_0}, {"deepseek-v2-lite", synth.Q4_0}, {"glm-4.7-flash", synth.Q4_0}, {"glm-4.7-flash", synth.Q4_K_M},
	} {
		t.Run(fmt.Sprintf("%s-%d", c.preset, c.format), func(t *testing.T) {
			lm, err := model.Load(twoLayersOf(t, c.preset, c.format, 3), model.Options{Backend: "cuda", Context: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			b := lm.Backend.(*cuda.Backend)
			if c := b.Compiled(); c.Ahead != c.Modules {
				t.Errorf("%d of the %d units the load waited for had the source Prepare queued beside the upload: the others differ", c.Ahead, c.Modules)
			}
			loaded, background := b.LoadedUnits(), b.BackgroundUnits()
			if !slices.ContainsFunc(background, func(u string) bool { return strings.HasPrefix(u, "mmv1_") || strings.HasPrefix(u, "mmvk1") }) {
				t.Errorf("no one-token product's unit left to the background (%v): the plan picked nothing out", background)
			}
			m := lm.Model
			var ferr error
			times, err := b.Profile(func() {
				if _, ferr = m.Forward(iota32(20), false); ferr == nil {
					_, ferr = m.ForwardArgmax([]int32{7})
				}
			})
			if err == nil {
				err = ferr
			}
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, k := range times {
				if u := cuda.UnitOf(k.Name); !loaded[u] && !seen[k.Name] {
					seen[k.Name] = true
					t.Errorf("kernel %s ran, but its unit %s was not compiled at load", k.Name, u)
				}
			}
			if len(times) == 0 {
				t.Fatal("the passes launched nothing")
			}
		})
	}
}

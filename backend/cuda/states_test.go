package cuda_test

import (
	"testing"

	"github.com/latent-ai/latent/model"
)

// Prefill attention's queries, split states and merged latents are buffers
// that every layer reuses and a larger pass replaces (freeing the old one
// once the stream has run): passes of 3, 40 and 200 tokens, each larger
// than the buffer before, give what one pass of the 243 tokens gives.
func TestPassesOfGrowingSize(t *testing.T) {
	needGPU(t)
	t.Setenv("LATENT_CACHE_TYPE", "f16")
	path := twoLayers(t, "youtu-llm-2b", 5)
	load := func() *model.Loaded {
		lm, err := model.Load(path, model.Options{Backend: "cuda", Context: 512})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lm.Close() })
		return lm
	}
	toks := make([]int32, 243)
	for i := range toks {
		toks[i] = int32((i*7919 + 11) % 30000)
	}
	one := load().Model
	want, err := one.Forward(toks, true)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]float32(nil), want...)
	V := one.Vocab()
	grown := load().Model
	at := 0
	for _, n := range []int{3, 40, 200} {
		got, err := grown.Forward(toks[at:at+n], true)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			w := want[(at+i)*V : (at+i+1)*V]
			if d := maxAbsDiff(got[i*V:(i+1)*V], w); d > 1e-3*maxAbs(w) {
				t.Fatalf("pass of %d tokens, position %d: logits differ by %g (largest %g)", n, at+i, d, maxAbs(w))
			}
		}
		at += n
	}
}

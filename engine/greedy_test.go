package engine_test

import (
	"slices"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/model/deepseek2"
)

// slowModel hides ForwardArgmax: Generate must sample from the logits.
type slowModel struct{ *deepseek2.Model }

func (slowModel) ForwardArgmax() {} // a different signature: not an engine.Greedy

// fastModel counts the argmax-only passes, waited for or queued.
type fastModel struct {
	*deepseek2.Model
	argmaxes int
}

func (f *fastModel) ForwardArgmax(tokens []int32) (int32, error) {
	f.argmaxes++
	return f.Model.ForwardArgmax(tokens)
}

func (f *fastModel) StartArgmax(tokens []int32) (backend.Pending, error) {
	f.argmaxes++
	return f.Model.StartArgmax(tokens)
}

// Greedy generation on golden models gives the same tokens through the
// argmax-only fast path as through the logits and the sampler, and the fast
// path runs exactly when the sampler is plain greedy.
func TestGreedyFastPathSameTokens(t *testing.T) {
	if _, ok := any(slowModel{}).(engine.Greedy); ok {
		t.Fatal("slowModel is still an engine.Greedy")
	}
	for _, name := range []string{"tiny-youtu-q4_0", "tiny-glm-q4_0", "tiny-dsv2-q8_0"} {
		t.Run(name, func(t *testing.T) {
			slow, fast := slowModel{loadGolden(t, name, "cpu", 128)}, &fastModel{Model: loadGolden(t, name, "cpu", 128)}
			for _, tc := range []struct {
				name     string
				opts     engine.SamplerOptions
				wantFast bool
			}{
				{"greedy", engine.SamplerOptions{}, true},
				{"greedy with top-k and top-p", engine.SamplerOptions{TopK: 40, TopP: 0.9, MinP: 0.05}, true},
				{"penalty", engine.SamplerOptions{RepeatPenalty: 1.5, RepeatLastN: 64}, false},
			} {
				req := engine.Request{Prompt: []int32{1, 17, 42, 99, 7}, MaxTokens: 24, Sampler: tc.opts}
				fast.argmaxes = 0
				want, got := generateIDs(t, slow, req), generateIDs(t, fast, req)
				if !slices.Equal(got, want) {
					t.Errorf("%s: fast path %v, sampler %v", tc.name, got, want)
				}
				if len(want) != req.MaxTokens {
					t.Errorf("%s: %d tokens, want %d", tc.name, len(want), req.MaxTokens)
				}
				if used := fast.argmaxes > 0; used != tc.wantFast {
					t.Errorf("%s: fast path used %v (%d passes), want %v", tc.name, used, fast.argmaxes, tc.wantFast)
				}
			}
		})
	}
}

func TestPlainGreedy(t *testing.T) {
	for _, tc := range []struct {
		o    engine.SamplerOptions
		want bool
	}{
		{engine.SamplerOptions{}, true},
		{engine.SamplerOptions{Temperature: -1, TopK: 5}, true},
		{engine.SamplerOptions{RepeatPenalty: 1, RepeatLastN: 64}, true},
		{engine.SamplerOptions{RepeatPenalty: 1.1, RepeatLastN: 0}, true},
		{engine.SamplerOptions{RepeatPenalty: 1.1, RepeatLastN: 64}, false},
		{engine.SamplerOptions{RepeatPenalty: 1.1, RepeatLastN: -1}, false},
		{engine.SamplerOptions{Temperature: 0.8}, false},
		{engine.DefaultSamplerOptions(), false},
	} {
		if got := tc.o.PlainGreedy(); got != tc.want {
			t.Errorf("%+v: PlainGreedy %v, want %v", tc.o, got, tc.want)
		}
	}
}

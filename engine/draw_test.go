package engine_test

import (
	"math"
	"slices"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/model/deepseek2"
)

// drawModel draws as a Drawing model's backend would: with the draw's
// number, on the host (the device's pick is checked against SampleWith on
// the GPU). It keeps the answer for the next pass and counts its draws.
type drawModel struct {
	*deepseek2.Model
	s            *engine.Sampler
	last         int32
	draws, blind int
}

type drawn int32

func (d drawn) Wait() int32 { return int32(d) }

func (m *drawModel) CanDraw() bool { return true }

func (m *drawModel) StartDraw(tokens []int32, d backend.Draw) (backend.Pending, error) {
	if tokens == nil {
		m.blind++
		tokens = []int32{m.last}
	}
	m.draws++
	logits, err := m.Forward(tokens, false)
	if err != nil {
		return nil, err
	}
	m.last = m.s.SampleWith(logits, nil, d.U)
	return drawn(m.last), nil
}

// A model that draws where its logits are (engine.Drawing) gives the
// tokens of sampling the same logits on the host with the same seed, for
// options a backend.Draw expresses, queueing passes ahead as greedy
// decoding does; for the others Generate samples on the host.
func TestDrawingSameAsHostSampling(t *testing.T) {
	prompt := []int32{1, 17, 42, 99, 7}
	def := engine.DefaultSamplerOptions()
	def.Seed = 7
	hot := engine.SamplerOptions{Temperature: 1.5, TopK: 256, Seed: 3}
	nucleus := engine.SamplerOptions{Temperature: 0.9, TopK: 50, TopP: 0.8, MinP: 0.02, Seed: 11}
	penalty := def
	penalty.RepeatPenalty = 1.3
	noTopK := def
	noTopK.TopK = 0
	for _, tc := range []struct {
		name string
		o    engine.SamplerOptions
		draw bool
	}{
		{"defaults", def, true}, {"hot", hot, true}, {"nucleus", nucleus, true},
		{"repeat penalty", penalty, false}, {"no top-k", noTopK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := engine.Request{Prompt: prompt, MaxTokens: 40, Sampler: tc.o}
			want := generateIDs(t, syncModel{loadGolden(t, "tiny-glm-q4_0", "cpu", 128)}, req)
			s, err := engine.NewSampler(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			dm := &drawModel{Model: loadGolden(t, "tiny-glm-q4_0", "cpu", 128), s: s}
			got := generateIDs(t, dm, req)
			if !slices.Equal(got, want) {
				t.Errorf("drawn %v, host %v", got, want)
			}
			if tc.draw && (dm.draws != len(want) || dm.blind != len(want)-1) {
				t.Errorf("%d draws, %d queued ahead, for %d tokens", dm.draws, dm.blind, len(want))
			}
			if !tc.draw && dm.draws != 0 {
				t.Errorf("%d draws for options a Draw cannot express", dm.draws)
			}
			if distinct := len(slices.Compact(slices.Sorted(slices.Values(want)))); distinct < 5 {
				t.Errorf("only %d distinct tokens in %v: not sampling", distinct, want)
			}
		})
	}
}

// Draw maps sampler options onto a backend.Draw only where it can.
func TestSamplerOptionsDraw(t *testing.T) {
	inf := float32(math.Inf(-1))
	for _, c := range []struct {
		o    engine.SamplerOptions
		want backend.Draw
		ok   bool
	}{
		{engine.DefaultSamplerOptions(), backend.Draw{TopK: 40, TopP: 0.95, LnMinP: float32(math.Log(0.05)), InvTemp: 1 / float64(float32(0.8))}, true},
		{engine.SamplerOptions{Temperature: 2, TopK: 1}, backend.Draw{TopK: 1, LnMinP: inf, InvTemp: 0.5}, true},
		{engine.SamplerOptions{Temperature: 1, TopK: backend.MaxDrawTopK}, backend.Draw{TopK: backend.MaxDrawTopK, LnMinP: inf, InvTemp: 1}, true},
		{engine.SamplerOptions{Temperature: 1, TopK: backend.MaxDrawTopK + 1}, backend.Draw{}, false},
		{engine.SamplerOptions{Temperature: 1}, backend.Draw{}, false}, // no top-k
		{engine.SamplerOptions{TopK: 40}, backend.Draw{}, false},       // greedy: the argmax
		{engine.SamplerOptions{Temperature: 1, TopK: 40, RepeatPenalty: 1.1, RepeatLastN: 64}, backend.Draw{}, false},
		{engine.SamplerOptions{Temperature: 1, TopK: 40, RepeatPenalty: 1.1}, backend.Draw{TopK: 40, LnMinP: inf, InvTemp: 1}, true}, // penalty over no history
	} {
		got, ok := c.o.Draw()
		if ok != c.ok || got != c.want {
			t.Errorf("%+v: %+v %v, want %+v %v", c.o, got, ok, c.want, c.ok)
		}
	}
}

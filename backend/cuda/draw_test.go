package cuda_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/quant"
)

// The device's draw (pick_top, pick_draw) picks the token the engine's
// sampler picks from the same logits with the same uniform number, for
// vocabularies from a few entries to a real model's, sampler options at the
// edges of what a Draw expresses, and logits with ties, NaN and infinities.
func TestDrawMatchesSampler(t *testing.T) {
	be := newGPU(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	r := rand.New(rand.NewPCG(8, 9))
	patterns := []func(x []float32){
		func(x []float32) {}, // random
		func(x []float32) { // coarse values: ties everywhere
			for i := range x {
				x[i] = float32(math.Round(float64(x[i]) * 2))
			}
		},
		func(x []float32) { // NaN scattered, -Inf in a block
			for i := 1; i < len(x); i += 7 {
				x[i] = nan
			}
			for i := len(x) / 2; i < len(x)/2+len(x)/8; i++ {
				x[i] = -inf
			}
		},
		func(x []float32) { x[len(x)-1] = inf; x[len(x)/3] = inf }, // +Inf twice: the first
		func(x []float32) { // nothing finite: 0
			for i := range x {
				x[i] = -inf
			}
			x[len(x)/2] = nan
		},
		func(x []float32) { // one clear winner and a flat tail of equals
			for i := range x {
				x[i] = -3
			}
			x[len(x)*2/3] = 4
		},
	}
	opts := []engine.SamplerOptions{
		engine.DefaultSamplerOptions(),
		{Temperature: 1.5, TopK: 256},
		{Temperature: 0.3, TopK: 1},
		{Temperature: 1, TopK: 7, TopP: 0.5},
		{Temperature: 0.7, TopK: 100, MinP: 0.2},
		{Temperature: 2, TopK: 64, TopP: 0.99, MinP: 0.001},
	}
	colsOf := []int{3, 300, 1024, 1025, 5000, 129280, 151552}
	rows := len(patterns)
	var ws []backend.Weight
	var vals [][]float32
	for _, cols := range colsOf {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(3 * r.NormFloat64())
		}
		for p, f := range patterns {
			f(v[p*cols : (p+1)*cols])
		}
		w, err := be.Weight("x", quant.F32, []uint64{uint64(cols), uint64(rows)}, f32bytes(v))
		if err != nil {
			t.Fatal(err)
		}
		ws, vals = append(ws, w), append(vals, v)
	}
	if _, err := be.Cache(1, 1024, 576); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for c, cols := range colsOf {
		for p := range patterns {
			row := vals[c][p*cols : (p+1)*cols]
			for oi, o := range opts {
				d, ok := o.Draw()
				if !ok {
					t.Fatalf("options %+v: no Draw", o)
				}
				s, err := engine.NewSampler(o)
				if err != nil {
					t.Fatal(err)
				}
				for k := range 4 {
					d.U = r.Float64()
					if k == 0 {
						d.U = 0
					}
					be.Begin([]int32{int32(p)}, []int32{0})
					x := be.Tensor(1, cols)
					be.Embed(x, ws[c])
					got := be.DrawAsync(x, d).Wait()
					want := s.SampleWith(row, nil, d.U)
					if got != want {
						t.Errorf("%d columns, pattern %d, options %d, u %v: device %d, sampler %d", cols, p, oi, d.U, got, want)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d draws compared", checked)
}

// hostSampled is a model with nothing but engine.Model's methods:
// Generate samples each step's logits on the host.
type hostSampled struct{ engine.Model }

// Sampled generation on the GPU, each step drawn on the device and queued
// before the host has seen its token, gives the tokens of reading every
// step's logits back and sampling them on the host with the same seed.
func TestPipelinedDrawGPU(t *testing.T) {
	needGPU(t)
	prompt := []int32{1, 17, 42, 99, 7, 3}
	o := engine.DefaultSamplerOptions()
	o.Seed = 5
	eachGoldenModel(t, func(t *testing.T, m *deepseek2.Model) {
		if !m.CanDraw() {
			t.Fatal("the CUDA backend cannot draw")
		}
		req := engine.Request{Prompt: prompt, MaxTokens: 32, Sampler: o}
		want := generated(t, hostSampled{m}, req)
		got := generated(t, m, req)
		if !slices.Equal(got, want) {
			t.Errorf("drawn on the device %v, on the host %v", got, want)
		}
		if distinct := len(slices.Compact(slices.Sorted(slices.Values(want)))); distinct < 5 {
			t.Errorf("only %d distinct tokens in %v: not sampling", distinct, want)
		}
	})
}

package deepseek2_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// hideArgmax is a backend without the backend.Argmaxer fast path, so that
// ForwardArgmax takes its host fallback.
type hideArgmax struct{ backend.Backend }

// ForwardArgmax picks what engine.Argmax picks from Forward's logits, step
// by step along a greedy decode, through the backend's Argmaxer and through
// the host fallback.
func TestForwardArgmaxMatchesForward(t *testing.T) {
	for _, preset := range []string{"tiny-youtu", "tiny-dsv2", "tiny-glm"} {
		t.Run(preset, func(t *testing.T) {
			ref := loadSynth(t, preset, synth.Q4_0, 64)
			fast := loadSynth(t, preset, synth.Q4_0, 64)
			host := loadSynthOn(t, preset, synth.Q4_0, 64, func(be backend.Backend) backend.Backend { return hideArgmax{be} })
			if _, ok := any(hideArgmax{}).(backend.Argmaxer); ok {
				t.Fatal("hideArgmax still has Argmax")
			}
			next := []int32{1, 2, 3, 4, 5}
			for step := 0; step < 12; step++ {
				logits, err := ref.Forward(next, false)
				if err != nil {
					t.Fatal(err)
				}
				want := engine.Argmax(logits)
				got, err := fast.ForwardArgmax(next)
				if err != nil {
					t.Fatal(err)
				}
				gotHost, err := host.ForwardArgmax(next)
				if err != nil {
					t.Fatal(err)
				}
				if got != want || gotHost != want {
					t.Fatalf("step %d: ForwardArgmax %d (Argmaxer), %d (host), want %d", step, got, gotHost, want)
				}
				next = []int32{want}
			}
		})
	}
}

// loadSynthOn is loadSynth on the CPU backend as wrap returns it.
func loadSynthOn(t testing.TB, preset string, format synth.Format, ctx int, wrap func(backend.Backend) backend.Backend) *deepseek2.Model {
	t.Helper()
	var buf bytes.Buffer
	if _, _, err := synth.Write(context.Background(), &buf, synth.Options{Preset: preset, Format: format, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(preset, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	t.Cleanup(func() { be.Close() })
	m, err := deepseek2.Load(f, wrap(be), ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

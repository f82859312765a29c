package deepseek2_test

import (
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/synth"
)

// ForwardArgmax picks what backend.Argmax picks from Forward's logits, step
// by step along a greedy decode.
func TestForwardArgmaxMatchesForward(t *testing.T) {
	for _, preset := range []string{"tiny-youtu", "tiny-dsv2", "tiny-glm"} {
		t.Run(preset, func(t *testing.T) {
			ref := loadSynth(t, preset, synth.Q4_0, 64)
			fast := loadSynth(t, preset, synth.Q4_0, 64)
			next := []int32{1, 2, 3, 4, 5}
			for step := 0; step < 12; step++ {
				logits, err := ref.Forward(next, false)
				if err != nil {
					t.Fatal(err)
				}
				want := backend.Argmax(logits)
				got, err := fast.ForwardArgmax(next)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("step %d: ForwardArgmax %d, want %d", step, got, want)
				}
				next = []int32{want}
			}
		})
	}
}

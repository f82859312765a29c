package deepseek2_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// synthFile synthesizes a preset in memory, parsed as "tiny.gguf".
func synthFile(tb testing.TB, preset string, format synth.Format) *gguf.File {
	tb.Helper()
	var buf bytes.Buffer
	if _, _, err := synth.Write(context.Background(), &buf, synth.Options{Preset: preset, Format: format, Seed: 1}); err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Parse("tiny.gguf", buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// loadSynth synthesizes a preset in memory and loads it on a CPU backend.
func loadSynth(t testing.TB, preset string, format synth.Format, ctx int) *deepseek2.Model {
	t.Helper()
	f := synthFile(t, preset, format)
	be := cpu.New(2)
	t.Cleanup(func() { be.Close() })
	m, err := deepseek2.Load(f, be, ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A decode step allocates nothing once the first step has sized the
// backend's scratch: dense and mixture-of-experts layers, softmax and
// sigmoid routing, quantized and float weights.
func TestDecodeAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		preset string
		format synth.Format
	}{
		{"tiny-youtu", synth.Q4_0},
		{"tiny-dsv2", synth.Q4_0},
		{"tiny-glm", synth.Q4_K_M},
		{"tiny-glm", synth.Q8_0},
		{"tiny-youtu", synth.F16},
	} {
		t.Run(tc.preset+"-"+tc.format.String(), func(t *testing.T) {
			m := loadSynth(t, tc.preset, tc.format, 96)
			if _, err := m.Forward([]int32{1, 2, 3, 4, 5, 6, 7, 8}, true); err != nil {
				t.Fatal(err)
			}
			tok := []int32{9}
			step := func() {
				logits, err := m.Forward(tok, false)
				if err != nil {
					t.Fatal(err)
				}
				tok[0] = int32(len(logits)/3 + m.Position()) // any token in the vocabulary
			}
			step()
			if n := testing.AllocsPerRun(40, step); n != 0 {
				t.Errorf("%g allocations per decode step, want 0", n)
			}
			greedy := func() {
				id, err := m.ForwardArgmax(tok)
				if err != nil {
					t.Fatal(err)
				}
				tok[0] = id
			}
			greedy()
			if n := testing.AllocsPerRun(40, greedy); n != 0 {
				t.Errorf("%g allocations per greedy decode step (ForwardArgmax), want 0", n)
			}
		})
	}
}

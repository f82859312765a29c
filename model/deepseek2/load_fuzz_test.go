package deepseek2_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// preparing is the CPU backend as a backend.Preparer, so that a load also
// makes its dry run (what Prepare is told).
type preparing struct {
	*cpu.CPU
	told int
}

func (p *preparing) Prepare(ws []backend.WeightShape, _ backend.CacheShape) { p.told = len(ws) }

// A tiny MoE model with one numeric metadata value replaced by any other
// either fails to load with an error or loads and decodes two tokens to a
// vocabulary's worth of logits; it never panics or runs out of memory. A
// file it loads, the dry run for a backend.Preparer takes too.
func FuzzLoadMetadata(f *testing.F) {
	orig := synthFile(f, "tiny-glm", synth.Q4_0)
	var keys []string // the numeric keys of the model (not the file's alignment)
	for _, kv := range orig.KV {
		if _, ok := kv.Value.Uint(); ok && kv.Key != "general.alignment" {
			keys = append(keys, kv.Key)
		}
	}
	for i := range keys {
		for _, v := range []uint64{0, 1, 2, 3, 64, 1 << 31, math.MaxUint32, math.MaxUint64} {
			f.Add(uint8(i), v)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, value uint64) {
		key := keys[int(which)%len(keys)]
		var buf bytes.Buffer
		if err := gguf.Rewrite(&buf, orig, map[string]gguf.Value{key: gguf.Uint64(value)}); err != nil {
			return // the writer's checks
		}
		file, err := gguf.Parse("m.gguf", buf.Bytes())
		if err != nil {
			t.Fatalf("%s = %d: the writer's file does not parse: %v", key, value, err)
		}
		be := &preparing{CPU: cpu.New(1)}
		m, err := deepseek2.Load(file, be, 16)
		if err != nil {
			return
		}
		if be.told == 0 { // the dry run refused what the load took
			t.Fatalf("%s = %d: loaded, but Prepare was not told its weights", key, value)
		}
		logits, err := m.Forward([]int32{1, 2}, false)
		if err != nil {
			return
		}
		if len(logits) != m.Vocab() {
			t.Fatalf("%s = %d: %d logits for a vocabulary of %d", key, value, len(logits), m.Vocab())
		}
	})
}

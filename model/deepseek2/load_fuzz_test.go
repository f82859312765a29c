package deepseek2_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// A tiny MoE model with one numeric metadata value replaced by any other
// either fails to load with an error or loads and decodes two tokens to a
// vocabulary's worth of logits; it never panics or runs out of memory.
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
		m, err := deepseek2.Load(file, cpu.New(1), 16)
		if err != nil {
			return
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

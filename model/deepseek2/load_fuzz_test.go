package deepseek2_test

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// A tiny MoE model with one numeric metadata value replaced by any other
// either fails to load with an error or loads and decodes two tokens to
// finite-length logits; it never panics or runs out of memory.
func FuzzLoadMetadata(f *testing.F) {
	var src bytes.Buffer
	if _, _, err := synth.Write(context.Background(), &src, synth.Options{Preset: "tiny-glm", Format: synth.Q4_0, Seed: 1}); err != nil {
		f.Fatal(err)
	}
	orig, err := gguf.Parse("tiny.gguf", src.Bytes())
	if err != nil {
		f.Fatal(err)
	}
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
		w := gguf.NewWriter(&buf)
		for _, kv := range orig.KV {
			v := kv.Value
			if kv.Key == key {
				v = gguf.Uint64(value)
			}
			if err := w.SetKV(kv.Key, v); err != nil {
				t.Fatal(err)
			}
		}
		for _, ti := range orig.Tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims...); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteHeader(); err != nil {
			t.Fatal(err)
		}
		for i := range orig.Tensors {
			if _, err := w.Write(orig.TensorData(&orig.Tensors[i])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		file, err := gguf.Parse("m.gguf", buf.Bytes())
		if err != nil {
			return // the writer's checks
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

package constrain

import (
	"path/filepath"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/tokenizer"
)

// BenchmarkAllowVocab is the whole vocabulary's check at a step whose
// sampled token was refused, inside a string and after a key: Mask (tokens
// grouped by first byte) and Allow token by token, per vocabulary token.
func BenchmarkAllowVocab(b *testing.B) {
	f, err := gguf.Open(filepath.Join("../../shared/golden/models", "tiny-glm-f32.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	v := NewVocab(tok)
	for _, state := range []struct{ name, text string }{{"in a string", `{"a": "b`}, {"after a key", `{"a"`}} {
		b.Run("mask "+state.name, func(b *testing.B) {
			c := NewJSONTokens(v, nil)
			c.json.FeedString(state.text)
			logits := make([]float32, tok.Vocab())
			n := tok.Vocab()
			for b.Loop() {
				c.Mask(logits)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
		})
		b.Run(state.name, func(b *testing.B) {
			c := NewJSONTokens(v, nil)
			c.json.FeedString(state.text)
			n := tok.Vocab()
			for b.Loop() {
				for id := range n {
					c.Allow(int32(id))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
		})
	}
}

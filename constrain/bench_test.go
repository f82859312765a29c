package constrain

import (
	"path/filepath"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/tokenizer"
)

// BenchmarkAllowVocab is the whole vocabulary's check at a step whose
// sampled token was refused (JSONTokens.Allow over every id, inside a
// string and after a key), per token of the vocabulary.
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
	for _, state := range []struct{ name, text string }{{"in a string", `{"a": "b`}, {"after a key", `{"a"`}} {
		b.Run(state.name, func(b *testing.B) {
			c := NewJSONTokens(tok)
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

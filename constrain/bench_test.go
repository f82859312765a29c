package constrain

import "testing"

// BenchmarkAllowVocab is the whole vocabulary's check at a step whose
// sampled token was refused (inside a string and after a key for a JSON
// answer, while a required call's markup is due): Mask (tokens grouped by
// first byte) and Allow token by token, per vocabulary token.
func BenchmarkAllowVocab(b *testing.B) {
	tok := goldenTokenizer(b, "tiny-glm-f32.gguf")
	v := NewVocab(tok)
	type constraint interface {
		Allow(int32) bool
		Mask([]float32)
	}
	run := func(name string, c constraint) {
		n := tok.Vocab()
		b.Run("mask "+name, func(b *testing.B) {
			logits := make([]float32, n)
			for b.Loop() {
				c.Mask(logits)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
		})
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for id := range n {
					c.Allow(int32(id))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
		})
	}
	for _, state := range []struct{ name, text string }{{"in a string", `{"a": "b`}, {"after a key", `{"a"`}} {
		c := NewJSONTokens(v, nil)
		c.json.FeedString(state.text)
		run(state.name, c)
	}
	call := NewPrefixTokens(v, Prefix{Text: "<tool_call>get_weather", Next: "<\n", End: "</tool_call>"})
	call.Accept(tok.Encode("<tool_call>get", false)[0])
	run("a call due", call)
}

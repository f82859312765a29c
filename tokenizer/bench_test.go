package tokenizer

import (
	"strings"
	"testing"
)

// benchText is about 100 KB of the golden texts (English, code, CJK, emoji,
// numbers, whitespace runs) repeated.
func benchText(b *testing.B) string {
	var sb strings.Builder
	cases := readGoldenCases(b, goldenDir+"/tokenizer/tiny-glm-f32.jsonl")
	for sb.Len() < 100_000 {
		for _, c := range cases {
			sb.WriteString(c.Text)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// BenchmarkEncode reports encoding speed (MB/s) on 100 KB of text, per
// pre-tokenizer of the golden models.
func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, name := range goldenModels {
		tok := loadGolden(b, name)
		b.Run(tok.Pre(), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var n int
			for b.Loop() {
				n = len(tok.Encode(text, true))
			}
			b.ReportMetric(float64(n), "tokens/op")
		})
	}
}

// BenchmarkDecoder reports streaming decode speed (tokens/s).
func BenchmarkDecoder(b *testing.B) {
	tok := loadGolden(b, "tiny-glm-f32")
	ids := tok.Encode(benchText(b), true)
	b.ResetTimer()
	for b.Loop() {
		d := tok.NewDecoder()
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	}
	b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkPreTokenize reports the GPT-2 and Llama 3 pre-tokenizers' speed
// (MB/s: decoding, classifying and splitting) on the same text, without BPE (GPT-2's is in no golden
// model, so BenchmarkEncode does not time it).
func BenchmarkPreTokenize(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"gpt2", "llama3"} {
		p := preTokenizers[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var n int
			for b.Loop() {
				n = len(p.split(text))
			}
			b.ReportMetric(float64(n), "words/op")
		})
	}
}

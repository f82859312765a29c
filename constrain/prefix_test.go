package constrain

import (
	"math"
	"strings"
	"testing"
)

// feedPrefix writes text's tokens through c (the first token refused stops it) and reports how many were
// allowed, of how many.
func feedPrefix(t *testing.T, v *Vocab, c *PrefixTokens, text string) (allowed, total int) {
	t.Helper()
	ids := v.tok.Encode(text, false)
	for i, id := range ids {
		if !c.Allow(id) {
			return i, len(ids)
		}
		c.Accept(id)
	}
	return len(ids), len(ids)
}

func TestPrefixTokens(t *testing.T) {
	tok := goldenTokenizer(t, "tiny-glm-f32.gguf")
	v := NewVocab(tok)
	eos := tok.EOG()[0]
	const call = "<tool_call>get_weather"
	for _, tc := range []struct {
		name, after, text string
		whole             bool // every token allowed
		written           bool
	}{
		{"the call", "", call + "\n<arg_key>city</arg_key>", true, true},
		{"whitespace first", "", " \n " + call, true, true},
		{"text instead", "", "Sunny.", false, false},
		{"another function", "", "<tool_call>get_time", false, false},
		{"too much whitespace first", "", strings.Repeat(" ", maxSpace+1) + call, false, false},
		{"reasoning, then the call", "</think>", "Let me look.</think>" + call + " then anything", true, true},
		{"reasoning, then text", "</think>", "Let me look.</think>Sunny.", false, false},
		{"reasoning not yet ended", "</think>", "Let me look. <tool_call> is what I", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewPrefixTokens(v, tc.after, call)
			n, total := feedPrefix(t, v, c, tc.text)
			if (n == total) != tc.whole || c.Written() != tc.written {
				t.Errorf("%d of %d tokens allowed, written %v; want all %v, written %v", n, total, c.Written(), tc.whole, tc.written)
			}
			if c.Allow(eos) != tc.written {
				t.Errorf("the end allowed %v, want %v (only once the call has begun)", c.Allow(eos), tc.written)
			}
			if c.Done() {
				t.Error("done: the answer should stay open")
			}
			// Mask removes exactly what Allow refuses, ids past the vocabulary included.
			logits := make([]float32, tok.Vocab()+3)
			c.Mask(logits)
			for id := range logits {
				refused := math.IsInf(float64(logits[id]), -1)
				if allowed := id < tok.Vocab() && c.Allow(int32(id)); refused == allowed {
					t.Fatalf("id %d: masked %v, Allow %v", id, refused, allowed)
				}
			}
		})
	}
	if c := NewPrefixTokens(v, "", ""); !c.Written() || !c.Allow(eos) {
		t.Error("nothing to write: the answer is free from the start")
	}
}

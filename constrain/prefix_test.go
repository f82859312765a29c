package constrain

import (
	"math"
	"strings"
	"testing"
)

// feedPrefix writes text's tokens through c (the first token refused stops it) and reports how many were
// allowed, of how many; special: text's special tokens' texts are those tokens.
func feedPrefix(t *testing.T, v *Vocab, c *PrefixTokens, text string, special bool) (allowed, total int) {
	t.Helper()
	ids := v.tok.Encode(text, special)
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
	const call, name = "<tool_call>", "<tool_call>get_weather"
	for _, tc := range []struct {
		name               string
		prefix, next, open string
		inside, special    bool
		text               string
		whole, written     bool // every token allowed; the forced text (and its next byte) written
	}{
		{"the call", call, "", "", false, false, call + "get_weather\n<arg_key>city</arg_key>", true, true},
		{"whitespace first", call, "", "", false, false, " \n " + call, true, true},
		{"text instead", call, "", "", false, false, "Sunny.", false, false},
		{"another function", name, "<\n", "", false, false, "<tool_call>get_time", false, false},
		{"a longer name", name, "<\n", "", false, false, name + "_v2<arg_key>", false, false},
		{"the name, then its markup", name, "<\n", "", false, false, name + "<arg_key>city", true, true},
		{"the name, then a newline", name, "<\n", "", false, false, name + "\n<arg_key>city", true, true},
		{"the name, not yet its markup", name, "<\n", "", false, false, name, true, false},
		{"too much whitespace first", call, "", "", false, false, strings.Repeat(" ", maxSpace+1) + call, false, false},
		{"in the prompt's block, then the call", call, "", "", true, false, "Let me look.</think>" + call + " then anything", true, true},
		{"in the prompt's block, then text", call, "", "", true, false, "Let me look.</think>Sunny.", false, false},
		{"the block not yet closed", call, "", "", true, false, "Let me look. <tool_call> is what I", true, false},
		{"the block's close a special token", call, "", "", true, true, "Let me look.</think>" + call, true, true},
		{"a block the answer opens, then the call", call, "", "<think>", false, false, "<think>Let me look.</think>\n" + call + "x", true, true},
		{"a block the answer opens, then text", call, "", "<think>", false, false, "<think>Let me look.</think>Sunny", false, false},
		{"no block to open", call, "", "", false, false, "<think>Let me look.</think>" + call, false, false},
		{"only one block", call, "", "<think>", false, false, "<think>a</think><think>b</think>" + call, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewPrefixTokens(v, Prefix{Text: tc.prefix, Next: tc.next, Open: tc.open, Close: "</think>", Inside: tc.inside})
			n, total := feedPrefix(t, v, c, tc.text, tc.special)
			if (n == total) != tc.whole || c.written() != tc.written {
				t.Errorf("%d of %d tokens allowed, written %v; want all %v, written %v", n, total, c.written(), tc.whole, tc.written)
			}
			if c.Allow(eos) != tc.written {
				t.Errorf("the end allowed %v, want %v (only once the call has begun)", c.Allow(eos), tc.written)
			}
			if c.Done() {
				t.Error("done: the answer should stay open")
			}
			if c.Allow(int32(tok.Vocab())) || c.Allow(-1) {
				t.Error("an id outside the vocabulary allowed")
			}
		})
	}
	// With End, the answer may end only once End follows the text, and with Again, once End follows each
	// further stretch Again opens.
	c := NewPrefixTokens(v, Prefix{Text: call, End: "</tool_call>", Again: call})
	for _, part := range []struct {
		text string
		end  bool
	}{
		{call + "get_weather<arg_key>a</arg_key><arg_value>1</arg_value></tool", false},
		{"_call>", true},
		{"\n" + call + "get_time", false},
		{"</tool_call>", true},
	} {
		if n, total := feedPrefix(t, v, c, part.text, false); n != total || !c.written() {
			t.Fatalf("%q: %d of %d tokens allowed", part.text, n, total)
		}
		if c.Allow(eos) != part.end {
			t.Errorf("after %q the end allowed %v, want %v", part.text, c.Allow(eos), part.end)
		}
	}
	// What a token writes after the block's close is checked as the start of the text: "S" then "un"
	// closes a block ending "Su" and writes "n", not the text's "x".
	c = NewPrefixTokens(v, Prefix{Text: "x", Close: "Su", Inside: true})
	if n, total := feedPrefix(t, v, c, "Sunny", false); n == total || c.written() {
		t.Errorf("%d of %d tokens of %q allowed", n, total, tok.Encode("Sunny", false))
	}
}

// Whatever the tokens, PrefixTokens does not panic, an output it allowed whole that it counts as written
// holds the text (after whitespace or a reasoning block), the end comes only after every opened call closes,
// and ids past the vocabulary are refused.
func FuzzPrefixTokens(f *testing.F) {
	tok := goldenTokenizer(f, "tiny-glm-f32.gguf")
	v := NewVocab(tok)
	for _, s := range []string{"<tool_call>get", " <think>a</think>\n<tool_call>f<", "Sunny", "</think><tool_call>x", ""} {
		f.Add(s, true, false)
		f.Add(s, false, true)
	}
	f.Fuzz(func(t *testing.T, text string, inside, mayOpen bool) {
		open := ""
		if mayOpen {
			open = "<think>"
		}
		c := NewPrefixTokens(v, Prefix{Text: "<tool_call>get", Next: "<\n", End: "</tool_call>", Again: "<tool_call>", Open: open, Close: "</think>", Inside: inside})
		var out strings.Builder
		for _, id := range tok.Encode(text, true) {
			if !c.Allow(id) {
				break
			}
			c.Accept(id)
			out.WriteString(tok.Piece(id))
		}
		o := out.String()
		if c.written() && !strings.Contains(o, "<tool_call>get") {
			t.Fatalf("written, but the output %q lacks the text", o)
		}
		// the end only once every call opened is closed
		if c.Allow(tok.EOG()[0]) && (!strings.Contains(o, "<tool_call>get") || strings.LastIndex(o, "<tool_call>") > strings.LastIndex(o, "</tool_call>")) {
			t.Fatalf("the end allowed after %q", o)
		}
		if c.Allow(int32(tok.Vocab())) {
			t.Fatal("an id past the vocabulary allowed")
		}
	})
}

// written reports whether the forced text (and its next byte) has been written.
func (c *PrefixTokens) written() bool { return c.st.phase == ending || c.st.phase == free }

// Mask removes exactly the tokens Allow refuses, at every token of outputs that go through each phase:
// whitespace before the text, the text, the byte after it, a reasoning block, End due, free.
func TestPrefixMaskIsAllow(t *testing.T) {
	tok := goldenTokenizer(t, "tiny-glm-f32.gguf")
	v := NewVocab(tok)
	const call = "<tool_call>"
	for _, tc := range []struct {
		p    Prefix
		text string
	}{
		{Prefix{Text: call + "get_weather", Next: "<\n", End: "</tool_call>", Again: call}, "  \n" + call + "get_weather<arg_key>a</arg_key></tool_call> ok"},
		{Prefix{Text: call, Open: "<think>", Close: "</think>"}, "<think>Let me look.</think>\n" + call + "x"},
		{Prefix{Text: call, Close: "</think>", Inside: true}, "hmm</think>" + call},
		{Prefix{Text: "<th" + "x", Open: "<think>", Close: "</think>"}, "<thx then"}, // text and Open share bytes
	} {
		c := NewPrefixTokens(v, tc.p)
		logits := make([]float32, tok.Vocab()+3)
		for step, id := range append([]int32{-1}, tok.Encode(tc.text, false)...) {
			if id >= 0 {
				if !c.Allow(id) {
					t.Fatalf("%q: token %d (%q) refused", tc.text, step, tok.Piece(id))
				}
				c.Accept(id)
			}
			clear(logits)
			c.Mask(logits)
			for i, l := range logits {
				if got, want := !math.IsInf(float64(l), -1), c.Allow(int32(i)); got != want {
					t.Fatalf("%q after %d tokens: token %d (%q) kept %v, Allow says %v", tc.text, step, i, tok.Piece(int32(i)), got, want)
				}
			}
		}
	}
}

package tokenizer

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/latent-ai/latent/gguf"
)

var goldenModels = []string{"tiny-dsv2-f16", "tiny-glm-f32", "tiny-youtu-f32"}

func TestSpecialTokensAndEOG(t *testing.T) {
	for _, tc := range []struct {
		model    string
		bos, eos int32
		eog      []int32
		special  string
		id       int32
	}{
		// GLM: [gMASK] is its BOS; it ends a turn with <|endoftext|>, or by
		// starting the next one with <|user|>.
		{"tiny-glm-f32", 1017, 1018, []int32{1018, 1020}, "<|assistant|>", 1021},
		{"tiny-dsv2-f16", 1018, 1019, []int32{1019}, "Assistant:", 1021},
		{"tiny-youtu-f32", 1016, 1017, []int32{1017}, "<think>", 1020},
	} {
		tok := loadGolden(t, tc.model)
		if tok.BOS() != tc.bos || tok.EOS() != tc.eos || !tok.AddBOS() || tok.AddEOS() {
			t.Errorf("%s: bos %d eos %d add_bos %v add_eos %v", tc.model, tok.BOS(), tok.EOS(), tok.AddBOS(), tok.AddEOS())
		}
		if !slices.Equal(tok.EOG(), tc.eog) {
			t.Errorf("%s: EOG %v, want %v", tc.model, tok.EOG(), tc.eog)
		}
		for id := int32(0); id < int32(tok.Vocab()); id++ {
			if tok.IsEOG(id) != slices.Contains(tc.eog, id) {
				t.Errorf("%s: IsEOG(%d) = %v", tc.model, id, tok.IsEOG(id))
			}
		}
		if tok.Vocab() != 1024 {
			t.Errorf("%s: vocabulary %d", tc.model, tok.Vocab())
		}
		if id, ok := tok.Lookup(tc.special); !ok || id != tc.id || tok.Token(id) != tc.special {
			t.Errorf("%s: Lookup(%q) = %d, %v", tc.model, tc.special, id, ok)
		}
		// Parsed only when asked; as text otherwise, still decoding the same.
		text := "a" + tc.special + "b"
		if got := tok.Encode(text, true); !slices.Equal(got, []int32{97, tc.id, 98}) {
			t.Errorf("%s: Encode(%q, true) = %v", tc.model, text, got)
		}
		plain := tok.Encode(text, false)
		if slices.Contains(plain, tc.id) || tok.Decode(plain) != text {
			t.Errorf("%s: Encode(%q, false) = %v", tc.model, text, plain)
		}
		if _, ok := tok.Lookup("no such token"); ok || tok.Token(-1) != "" || tok.Token(5000) != "" {
			t.Errorf("%s: lookups outside the vocabulary", tc.model)
		}
	}
}

// TestSpecialLongestFirst checks llama.cpp's order: longer special tokens are
// cut out first, wherever they are.
func TestSpecialLongestFirst(t *testing.T) {
	tok := newTestTokenizer(t, []string{"<a>", "<a><b>", "b>x"}, TypeControl)
	ab, _ := tok.Lookup("<a><b>")
	a, _ := tok.Lookup("<a>")
	bx, _ := tok.Lookup("b>x")
	// "<a><b>x": the six-byte "<a><b>" wins over "b>x" although both overlap.
	if got := tok.Encode("<a><b>x<a>", true); !slices.Equal(got[:1], []int32{ab}) || got[len(got)-1] != a || slices.Contains(got, bx) {
		t.Errorf("Encode = %v (want %d first, %d last, no %d)", got, ab, a, bx)
	}
}

// newTestTokenizer makes a tokenizer with the 256 byte tokens, the given
// extra tokens of one type, and no merges.
func newTestTokenizer(t *testing.T, extra []string, typ int64) *Tokenizer {
	t.Helper()
	var toks []string
	var types []int64
	for b := range 256 {
		toks = append(toks, byteChar[b])
		types = append(types, TypeNormal)
	}
	for _, s := range extra {
		toks = append(toks, s)
		types = append(types, typ)
	}
	tok, err := New(Config{Pre: "llama3", Tokens: toks, Types: types, BOS: -1, EOS: -1, EOT: -1, EOM: -1, AddBOS: new(bool)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestUserDefinedAlwaysParsed(t *testing.T) {
	tok := newTestTokenizer(t, []string{"<tool>"}, TypeUserDefined)
	id, _ := tok.Lookup("<tool>")
	for _, parse := range []bool{true, false} {
		if got := tok.Encode("x<tool>", parse); !slices.Equal(got, []int32{'x', id}) {
			t.Errorf("parseSpecial %v: %v", parse, got)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, name := range goldenModels {
		tok := loadGolden(t, name)
		for i := range 400 {
			s := randomText(r, 1+i%80)
			if i%7 == 0 {
				s = "<think>" + s + "<|user|>\xe4\xb8" // special texts and a cut character
			}
			for _, parse := range []bool{true, false} {
				ids := tok.Encode(s, parse)
				if got := tok.Decode(ids); got != s {
					t.Fatalf("%s: Decode(Encode(%q, %v)) = %q", name, s, parse, got)
				}
			}
		}
	}
}

// TestDecoderHoldsSplitCharacters feeds tokens one at a time: the decoder
// must never hand out part of a character, and must lose nothing.
func TestDecoderHoldsSplitCharacters(t *testing.T) {
	tok := loadGolden(t, "tiny-glm-f32")
	// In this vocabulary "中" is three byte tokens and 😀 four.
	for _, text := range []string{"中文测试，你好世界", "emoji 😀👍🏽 end", "ÀÉÎÕÜ ñ", "𝑥² + 𝑦²", "plain ascii", "<|user|>中<think>"} {
		ids := tok.Encode(text, true)
		d := tok.NewDecoder()
		var got strings.Builder
		for i, id := range ids {
			piece := d.Add(id)
			if !utf8.ValidString(piece) {
				t.Errorf("%q: token %d gave invalid UTF-8 %q", text, i, piece)
			}
			got.WriteString(piece)
			if !strings.HasPrefix(text, got.String()) {
				t.Fatalf("%q: after token %d the stream is %q", text, i, got.String())
			}
		}
		got.WriteString(d.Flush())
		if got.String() != text {
			t.Errorf("streamed %q, want %q", got.String(), text)
		}
	}

	// A character cut by the end of the stream comes out at Flush; bytes
	// that can never be a character are not held.
	d := tok.NewDecoder()
	if s := d.Add(228); s != "" { // 0xE4: first of three
		t.Errorf("lead byte: %q", s)
	}
	if s := d.Add(184); s != "" {
		t.Errorf("second byte: %q", s)
	}
	if s := d.Flush(); s != "\xe4\xb8" {
		t.Errorf("Flush = %q", s)
	}
	if s := d.Add(255); s != "\xff" { // never valid
		t.Errorf("invalid byte held: %q", s)
	}
	if s := d.Add(184); s != "\xb8" { // a stray continuation byte
		t.Errorf("stray continuation byte: %q", s)
	}
}

func TestValidUTF8Prefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xe4", 1}, {"a\xe4\xb8", 1}, {"a\xe4\xb8\xad", 4},
		{"\xf0\x9f\x98", 0}, {"\xf0\x9f\x98\x80", 4}, {"a\xff", 2}, {"a\xb8", 2}, {"\xc3", 0},
	} {
		if got := validUTF8Prefix([]byte(tc.in)); got != tc.want {
			t.Errorf("validUTF8Prefix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// memGGUF builds a GGUF image with the given metadata.
func memGGUF(t *testing.T, kvs ...gguf.KV) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	for _, kv := range kvs {
		if err := w.SetKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteHeader(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("test.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFromGGUFErrors(t *testing.T) {
	kv := func(k string, v gguf.Value) gguf.KV { return gguf.KV{Key: k, Value: v} }
	model := kv("tokenizer.ggml.model", gguf.String("gpt2"))
	pre := kv("tokenizer.ggml.pre", gguf.String("qwen2"))
	tokens := kv("tokenizer.ggml.tokens", gguf.Strings([]string{"a", "b", "ab"}))
	merges := kv("tokenizer.ggml.merges", gguf.Strings([]string{"a b"}))
	for _, tc := range []struct {
		kvs  []gguf.KV
		want string
	}{
		{nil, "no tokenizer.ggml.model"},
		{[]gguf.KV{kv("tokenizer.ggml.model", gguf.Bool(true)), pre, tokens, merges}, "tokenizer.ggml.model is bool, not a string"},
		{[]gguf.KV{kv("tokenizer.ggml.model", gguf.String("llama")), pre, tokens, merges}, `unsupported tokenizer model "llama"`},
		{[]gguf.KV{kv("tokenizer.ggml.model", gguf.String("bert")), pre, tokens, merges}, `unsupported tokenizer model "bert"`},
		{[]gguf.KV{model, kv("tokenizer.ggml.pre", gguf.String("tekken")), tokens, merges}, `unsupported pre-tokenizer "tekken"`},
		{[]gguf.KV{model, kv("tokenizer.ggml.pre", gguf.Int32s([]int32{1})), tokens, merges}, "tokenizer.ggml.pre is array"},
		{[]gguf.KV{model, pre, merges}, "no tokenizer.ggml.tokens"},
		{[]gguf.KV{model, pre, kv("tokenizer.ggml.tokens", gguf.Int32s([]int32{1})), merges}, "tokenizer.ggml.tokens is array"},
		{[]gguf.KV{model, pre, kv("tokenizer.ggml.tokens", gguf.Strings(nil)), merges}, "has 0 entries"},
		{[]gguf.KV{model, pre, tokens}, "no tokenizer.ggml.merges"},
		{[]gguf.KV{model, pre, kv("tokenizer.ggml.tokens", gguf.Strings([]string{"a", "a"})), merges}, `token "a" appears twice`},
		{[]gguf.KV{model, pre, tokens, merges, kv("tokenizer.ggml.token_type", gguf.Int32s([]int32{1}))}, "token_type has 1 entries for 3 tokens"},
		{[]gguf.KV{model, pre, tokens, merges, kv("tokenizer.ggml.token_type", gguf.Strings([]string{"x"}))}, "token_type is array"},
		{[]gguf.KV{model, pre, tokens, merges, kv("tokenizer.ggml.add_bos_token", gguf.Bool(true))}, "add_bos_token is true, but there is no BOS token"},
		{[]gguf.KV{model, pre, tokens, merges, kv("tokenizer.ggml.add_bos_token", gguf.Bool(true)), kv("tokenizer.ggml.bos_token_id", gguf.Uint32(99999))},
			"add_bos_token is true, but tokenizer.ggml.bos_token_id 99999 is past the vocabulary of 3 tokens"},
		{[]gguf.KV{model, pre, tokens, merges, kv("tokenizer.ggml.add_eos_token", gguf.Bool(true)), kv("tokenizer.ggml.eos_token_id", gguf.Uint32(3))},
			"add_eos_token is true, but tokenizer.ggml.eos_token_id 3 is past the vocabulary of 3 tokens"},
	} {
		_, err := FromGGUF(memGGUF(t, tc.kvs...))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "test.gguf: tokenizer: ") {
			t.Errorf("error %v, want one naming the file and %q", err, tc.want)
		}
	}

	// The smallest valid one: a merge, an id of -1 read as absent.
	f := memGGUF(t, model, pre, tokens, merges, kv("tokenizer.ggml.eos_token_id", gguf.Int32(-1)), kv("tokenizer.ggml.bos_token_id", gguf.Uint32(2)))
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab", false); !slices.Equal(got, []int32{2}) {
		t.Errorf("Encode(ab) = %v", got)
	}
	if tok.EOS() != -1 || tok.BOS() != 2 || tok.AddBOS() || len(tok.EOG()) != 0 {
		t.Errorf("eos %d bos %d add_bos %v eog %v", tok.EOS(), tok.BOS(), tok.AddBOS(), tok.EOG())
	}
}

// TestMergeOrder checks the BPE rule: the lowest-ranked pair merges first,
// and among equal pairs the leftmost.
func TestMergeOrder(t *testing.T) {
	toks := []string{"a", "b", "c", "ab", "bc", "abc", "aa", "aaa"}
	for _, tc := range []struct {
		merges []string
		text   string
		want   []string
	}{
		{[]string{"a b", "b c", "ab c"}, "abc", []string{"abc"}},
		{[]string{"b c", "a b", "ab c"}, "abc", []string{"a", "bc"}},
		{[]string{"a a", "aa a"}, "aaa", []string{"aaa"}},
		{[]string{"a a"}, "aaa", []string{"aa", "a"}},
		{nil, "abc", []string{"a", "b", "c"}},
	} {
		tok, err := New(Config{Pre: "gpt2", Tokens: toks, Merges: tc.merges, BOS: -1, EOS: -1, EOT: -1, EOM: -1})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, id := range tok.Encode(tc.text, false) {
			got = append(got, tok.Token(id))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("merges %q on %q: %q, want %q", tc.merges, tc.text, got, tc.want)
		}
	}
}

func FuzzEncode(f *testing.F) {
	for _, c := range readGoldenCases(f, goldenDir+"/tokenizer/tiny-glm-f32.jsonl") {
		f.Add(c.Text)
	}
	f.Add("\xff\xfe<|user|>\x00 \u00a0\u3000")
	toks := make([]*Tokenizer, len(goldenModels))
	for i, name := range goldenModels {
		toks[i] = loadGolden(f, name)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			for _, parse := range []bool{true, false} {
				ids := tok.Encode(s, parse)
				if got := tok.Decode(ids); got != s {
					t.Fatalf("%s: Decode(Encode(%q, %v)) = %q", tok.Pre(), s, parse, got)
				}
				if len(ids)*tok.MaxTokenBytes() < len(s) {
					t.Fatalf("%s: %d tokens of at most %d bytes for %d bytes", tok.Pre(), len(ids), tok.MaxTokenBytes(), len(s))
				}
				for _, id := range ids {
					if id < 0 || int(id) >= tok.Vocab() {
						t.Fatalf("%s: id %d outside the vocabulary", tok.Pre(), id)
					}
				}
			}
		}
		for name := range preTokenizers {
			prev := 0
			for _, end := range preTokenizers[name].split(s) {
				if end <= prev {
					t.Fatalf("%s %q: empty or backward word", name, s)
				}
				prev = end
			}
			if prev != len(s) {
				t.Fatalf("%s %q: words end at %d of %d", name, s, prev, len(s))
			}
		}
	})
}

// Byte tokens stand for text (one byte each); control tokens do not.
func TestIsText(t *testing.T) {
	for _, c := range []struct {
		typ  int64
		want bool
	}{{TypeByte, true}, {TypeNormal, true}, {TypeControl, false}, {TypeUserDefined, false}, {TypeUnused, false}} {
		tok := newTestTokenizer(t, []string{"<0xE2>"}, c.typ)
		if got := tok.IsText(256); got != c.want {
			t.Errorf("token type %d: IsText %v, want %v", c.typ, got, c.want)
		}
	}
	if p := newTestTokenizer(t, []string{"<0xE2>"}, TypeByte).Piece(256); p != "\xe2" {
		t.Errorf("byte token's piece %q, want \\xe2", p)
	}
}

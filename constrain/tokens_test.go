package constrain

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/tokenizer"
)

// goldenTokenizer is a golden model's tokenizer (BPE, 1024 tokens, with
// special tokens).
func goldenTokenizer(t testing.TB, file string) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join("../../shared/golden/models", file))
	if err != nil {
		t.Fatalf("golden models (../shared must sit beside the repository): %v", err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestMaskIsAllow: Mask removes exactly the tokens Allow refuses, in every
// kind of state, with and without a schema, and ids past the vocabulary.
func TestMaskIsAllow(t *testing.T) {
	tok := goldenTokenizer(t, "tiny-glm-f32.gguf")
	schema, err := ParseSchema(json.RawMessage(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocab(tok)
	for _, c := range []struct {
		schema *Schema
		text   string
	}{
		{nil, ``}, {nil, `{`}, {nil, `{"a`}, {nil, `{"a":`}, {nil, `{"a": 1`}, {nil, `{"a": [tr`}, {nil, `{"a": 1}`},
		{schema, ``}, {schema, `{`}, {schema, `{"na`}, {schema, `{"name": `}, {schema, `{"name": "A", "age": 3`},
		{schema, `{"kind": "b`}, {schema, `{"name": "A", "age": 3}`},
	} {
		j := NewJSONTokens(v, c.schema)
		if !j.json.FeedString(c.text) {
			t.Fatalf("%q does not feed", c.text)
		}
		logits := make([]float32, tok.Vocab()+5)
		j.Mask(logits)
		allowed := 0
		for id, l := range logits {
			want := j.Allow(int32(id))
			if got := !math.IsInf(float64(l), -1); got != want {
				t.Errorf("after %q: token %d (%q) kept %v, Allow says %v", c.text, id, tok.Piece(int32(id)), got, want)
			}
			if want {
				allowed++
			}
		}
		if allowed == 0 {
			t.Errorf("after %q nothing is allowed", c.text)
		}
	}
}

// A vocabulary with SentencePiece's byte fallback spells a character it has
// no token for with byte tokens, one byte each: a JSON answer may too.
func TestJSONTokensByteFallback(t *testing.T) {
	toks := []string{`{"a":"`, `"}`, "<0xE2>", "<0x82>", "<0xAC>", "<ctl>"}
	types := []int64{tokenizer.TypeNormal, tokenizer.TypeNormal, tokenizer.TypeByte, tokenizer.TypeByte, tokenizer.TypeByte, tokenizer.TypeControl}
	tok, err := tokenizer.New(tokenizer.Config{Pre: "llama3", Tokens: toks, Types: types, BOS: -1, EOS: -1, EOT: -1, EOM: -1, AddBOS: new(bool)})
	if err != nil {
		t.Fatal(err)
	}
	c := NewJSONTokens(NewVocab(tok), nil)
	for i, id := range []int32{0, 2, 3, 4, 1} { // {"a":"€"}
		if !c.Allow(id) {
			t.Fatalf("token %d (%q), the %d-th, refused", id, tok.Piece(id), i+1)
		}
		c.Accept(id)
	}
	if !c.Done() {
		t.Error(`{"a":"€"} written with byte tokens is not a whole object`)
	}
	c = NewJSONTokens(NewVocab(tok), nil)
	c.Accept(0)
	if c.Allow(5) {
		t.Error("a control token allowed inside a string")
	}
}

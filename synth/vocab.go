package synth

import (
	_ "embed"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/tokenizer"
)

// corpus is the text the first merges are learned on: English prose and Go
// source, so that common words and code fragments become single tokens and
// tokenizing real prompts exercises multi-level merges.
//
//go:embed corpus.txt
var corpus string

// Token types of tokenizer.ggml.token_type.
const (
	TokenNormal  int32 = 1
	TokenControl int32 = 3
)

// Vocab is a byte-level BPE vocabulary as GGUF stores it (tokenizer.ggml.model
// "gpt2"): the 256 byte tokens in byte order, one token per merge in merge
// order, then the special tokens.
type Vocab struct {
	Pre      string
	Tokens   []string
	Types    []int32
	Merges   []string // "a b": a and b are earlier tokens, a+b is token 256+i
	BOS, EOS int
}

// Metadata is the tokenizer keys as real conversions write them.
func (v *Vocab) Metadata(chatTemplate string) []gguf.KV {
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.String(v.Pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(v.Tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32s(v.Types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strings(v.Merges)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(uint32(v.BOS))},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(uint32(v.EOS))},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(true)},
	}
	if chatTemplate != "" {
		kv = append(kv, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.String(chatTemplate)})
	}
	return kv
}

// vocabBuilder grows a vocabulary merge by merge.
type vocabBuilder struct {
	tokens []string
	ids    map[string]int32
	merges []string
}

func (b *vocabBuilder) add(s string) int32 {
	id := int32(len(b.tokens))
	b.tokens = append(b.tokens, s)
	b.ids[s] = id
	return id
}

// merge records the merge of tokens a and b into a new token; it reports the
// new id, or false when a+b is already a token (BPE training can reach the
// same string by two splits; the vocabulary keeps one token per string).
func (b *vocabBuilder) merge(a, c int32) (int32, bool) {
	s := b.tokens[a] + b.tokens[c]
	if id, ok := b.ids[s]; ok {
		return id, false
	}
	b.merges = append(b.merges, b.tokens[a]+" "+b.tokens[c])
	return b.add(s), true
}

// BuildVocab builds a vocabulary of size tokens for the spec: byte tokens,
// merges learned by BPE on the embedded corpus, then (to reach real
// vocabulary sizes in milliseconds) merges that extend word-like tokens, and
// the special tokens last.
func BuildVocab(spec TokenizerSpec, size int) (*Vocab, error) {
	nspec := max(spec.SpecialCount, len(spec.Specials))
	ordinary := size - nspec
	if ordinary < 256 {
		return nil, fmt.Errorf("vocabulary of %d tokens has no room for 256 byte tokens and %d special tokens", size, nspec)
	}
	if spec.BOS < 0 || spec.BOS >= nspec || spec.EOS < 0 || spec.EOS >= nspec {
		return nil, fmt.Errorf("bos/eos special token index out of range")
	}
	b := &vocabBuilder{tokens: make([]string, 0, size), ids: make(map[string]int32, size)}
	for c := range 256 {
		b.add(tokenizer.ByteToken(byte(c)))
	}
	// Specials are reserved up front so no learned token can take their text.
	specials := make([]string, nspec)
	for i := range specials {
		if i < len(spec.Specials) {
			specials[i] = spec.Specials[i]
		} else {
			specials[i] = fmt.Sprintf("<|reserved_%d|>", i)
		}
		if _, dup := b.ids[specials[i]]; dup {
			return nil, fmt.Errorf("special token %q is listed twice", specials[i])
		}
		b.ids[specials[i]] = -1
	}
	b.train(ordinary)
	if err := b.grow(ordinary); err != nil {
		return nil, err
	}
	v := &Vocab{Pre: spec.Pre, Merges: b.merges, Tokens: b.tokens, BOS: ordinary + spec.BOS, EOS: ordinary + spec.EOS}
	v.Tokens = append(v.Tokens, specials...)
	v.Types = make([]int32, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = TokenNormal
		if i >= ordinary {
			v.Types[i] = TokenControl
		}
	}
	return v, nil
}

// preTokenize splits text the way byte-level BPE pre-tokenizers do (roughly
// GPT-2's regex): runs of letters, digits or punctuation, each taking one
// leading space, and runs of whitespace. Merges never cross these words.
func preTokenize(text string) []string {
	class := func(r rune) int {
		switch {
		case unicode.IsLetter(r):
			return 1
		case unicode.IsDigit(r):
			return 2
		case unicode.IsSpace(r):
			return 3
		}
		return 4
	}
	var words []string
	for i := 0; i < len(text); {
		start := i
		r, n := utf8.DecodeRuneInString(text[i:])
		if r == ' ' && i+n < len(text) {
			if r2, _ := utf8.DecodeRuneInString(text[i+n:]); class(r2) != 3 {
				i += n // the space joins the word that follows
				r, n = r2, utf8.RuneLen(r2)
			}
		}
		c := class(r)
		i += n
		for i < len(text) {
			r2, n2 := utf8.DecodeRuneInString(text[i:])
			if class(r2) != c {
				break
			}
			if c == 3 && r2 == ' ' && i+n2 < len(text) {
				// Leave a space before a word to that word.
				if r3, _ := utf8.DecodeRuneInString(text[i+n2:]); class(r3) != 3 {
					break
				}
			}
			i += n2
		}
		words = append(words, text[start:i])
	}
	return words
}

// train learns merges on the corpus until the vocabulary has limit tokens or
// no pair occurs twice. Pairs are recounted each round: the corpus is a few
// KB, so this stays in the milliseconds.
func (b *vocabBuilder) train(limit int) {
	type word struct {
		syms []int32
		n    int
	}
	counts := map[string]int{}
	var order []string
	for _, w := range preTokenize(corpus) {
		if counts[w] == 0 {
			order = append(order, w)
		}
		counts[w]++
	}
	words := make([]word, 0, len(order))
	for _, w := range order {
		syms := make([]int32, len(w))
		for i := 0; i < len(w); i++ {
			syms[i] = int32(w[i]) // byte tokens are in byte order
		}
		words = append(words, word{syms, counts[w]})
	}
	pairs := map[uint64]int{}
	banned := map[uint64]bool{} // pairs whose text is a special token
	for len(b.tokens) < limit {
		clear(pairs)
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[uint64(w.syms[i])<<32|uint64(w.syms[i+1])] += w.n
			}
		}
		var best uint64
		bestN := 1
		for p, n := range pairs {
			// Ties go to the lowest pair so the result does not depend on map order.
			if !banned[p] && (n > bestN || (n == bestN && n > 1 && p < best)) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			return
		}
		a, c := int32(best>>32), int32(best&0xffffffff)
		id, _ := b.merge(a, c)
		if id < 0 {
			banned[best] = true
			continue
		}
		for wi := range words {
			s := words[wi].syms
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == a && s[i+1] == c {
					out = append(out, id)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			words[wi].syms = out
		}
	}
}

// grow adds merges until the vocabulary has limit tokens, extending
// word-like tokens (letters, optionally after "Ġ") with short lowercase
// tokens, shortest words first. Every merge joins two existing tokens into a
// new one, so the merge list stays a valid BPE.
func (b *vocabBuilder) grow(limit int) error {
	isWord := func(s string, space bool, maxLen int) bool {
		if space && len(s) >= 2 && s[:2] == "Ġ" {
			s = s[2:]
		}
		if s == "" || len(s) > maxLen {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i] | 0x20
			if c < 'a' || c > 'z' || (!space && s[i] != c) {
				return false
			}
		}
		return true
	}
	var heads, tails []int32
	for id, s := range b.tokens {
		if isWord(s, true, 1<<30) {
			heads = append(heads, int32(id))
		}
		if isWord(s, false, 3) {
			tails = append(tails, int32(id))
		}
	}
	// Shorter heads first: new tokens then read like plausible word pieces.
	slices.SortStableFunc(heads, func(x, y int32) int { return len(b.tokens[x]) - len(b.tokens[y]) })
	for i := 0; len(b.tokens) < limit; i++ {
		if i >= len(heads) {
			return fmt.Errorf("cannot grow the vocabulary past %d tokens", len(b.tokens))
		}
		for _, t := range tails {
			if len(b.tokens) >= limit {
				break
			}
			if id, ok := b.merge(heads[i], t); ok {
				heads = append(heads, id)
			}
		}
	}
	return nil
}

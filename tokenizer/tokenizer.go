// Package tokenizer turns text into token ids and back, as llama.cpp does for
// the byte-level BPE vocabularies (tokenizer.ggml.model "gpt2") that GGUF files
// carry: the same pre-tokenizer splits, merge order, special-token parsing,
// BOS/EOS rules and end-of-generation tokens.
package tokenizer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/latent-ai/latent/gguf"
)

// Token types, as tokenizer.ggml.token_type stores them.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// attr is llama.cpp's per-token attribute set.
type attr uint8

const (
	attrNormal attr = 1 << iota
	attrUnknown
	attrControl
	attrUserDefined
	attrUnused
	attrByte
)

// Tokenizer encodes and decodes text for one vocabulary. It is safe for
// concurrent use.
type Tokenizer struct {
	preName string
	pre     *preTokenizer

	tokens []string         // id -> vocabulary text
	attrs  []attr           // id -> attributes
	pieces []string         // id -> decoded bytes
	byText map[string]int32 // vocabulary text (and extra merge pieces) -> id

	merges    map[uint64]merge
	bytePiece [256]int32 // piece id of each byte's GPT-2 character, -1 if none

	specials []int32 // control, user-defined and unknown tokens, longest text first
	maxText  int     // the longest token text, in bytes

	bos, eos       int32 // -1: none
	addBOS, addEOS bool
	eog            []int32 // sorted
}

// FromGGUF builds the tokenizer a GGUF file describes.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	t, err := fromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer: %w", f.Name, err)
	}
	return t, nil
}

func fromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, ok := f.Get("tokenizer.ggml.model")
	if !ok {
		return nil, fmt.Errorf("no tokenizer.ggml.model in the file")
	}
	model, ok := v.String()
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.model is %s, not a string", v.Type())
	}
	if model != "gpt2" {
		return nil, fmt.Errorf("unsupported tokenizer model %q (latent supports byte-level BPE, \"gpt2\")", model)
	}
	var preName string // absent: llama.cpp's "default"
	if v, ok := f.Get("tokenizer.ggml.pre"); ok {
		if preName, ok = v.String(); !ok {
			return nil, fmt.Errorf("tokenizer.ggml.pre is %s, not a string", v.Type())
		}
	}

	v, ok = f.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("no tokenizer.ggml.tokens in the file")
	}
	tokens, ok := v.StringArray()
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.tokens is %s, not an array of strings", v.Type())
	}
	if len(tokens) == 0 || len(tokens) > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer.ggml.tokens has %d entries", len(tokens))
	}
	var types []int64 // absent: all normal
	if v, ok := f.Get("tokenizer.ggml.token_type"); ok {
		if types, ok = v.IntArray(); !ok {
			return nil, fmt.Errorf("tokenizer.ggml.token_type is %s, not an array of integers", v.Type())
		}
	}
	v, ok = f.Get("tokenizer.ggml.merges")
	if !ok {
		return nil, fmt.Errorf("no tokenizer.ggml.merges in the file")
	}
	merges, ok := v.StringArray()
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.merges is %s, not an array of strings", v.Type())
	}

	c := Config{Pre: preName, Tokens: tokens, Types: types, Merges: merges, BOS: -1, EOS: -1, EOT: -1, EOM: -1}
	c.BOS, _ = getID(f, "tokenizer.ggml.bos_token_id")
	c.EOS, _ = getID(f, "tokenizer.ggml.eos_token_id")
	c.EOT, _ = getID(f, "tokenizer.ggml.eot_token_id")
	c.EOM, _ = getID(f, "tokenizer.ggml.eom_token_id")
	for _, key := range []string{"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"} {
		if id, ok := getID(f, key); ok {
			c.ExtraEOG = append(c.ExtraEOG, id)
		}
	}
	if b, ok := getBool(f, "tokenizer.ggml.add_bos_token"); ok {
		c.AddBOS = &b
	}
	if b, ok := getBool(f, "tokenizer.ggml.add_eos_token"); ok {
		c.AddEOS = &b
	}
	return New(c)
}

// Config is a vocabulary as GGUF metadata describes it; New builds its
// Tokenizer. Ids of -1 are absent.
type Config struct {
	Pre            string   // tokenizer.ggml.pre
	Tokens         []string // tokenizer.ggml.tokens
	Types          []int64  // tokenizer.ggml.token_type (nil: all normal)
	Merges         []string // tokenizer.ggml.merges, "left right"
	BOS, EOS       int32
	EOT, EOM       int32
	ExtraEOG       []int32 // FIM pad/repo/separator ids, which llama.cpp also treats as EOG
	AddBOS, AddEOS *bool   // nil: the pre-tokenizer's default
}

// New builds a byte-level BPE tokenizer from its parts.
func New(c Config) (*Tokenizer, error) {
	pre, ok := preTokenizers[c.Pre]
	if !ok {
		return nil, fmt.Errorf("unsupported pre-tokenizer %q", c.Pre)
	}
	n := len(c.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("the vocabulary is empty")
	}
	if c.Types != nil && len(c.Types) < n {
		return nil, fmt.Errorf("tokenizer.ggml.token_type has %d entries for %d tokens", len(c.Types), n)
	}
	t := &Tokenizer{
		preName: c.Pre, pre: pre,
		tokens: make([]string, n), attrs: make([]attr, n), pieces: make([]string, n),
		byText: make(map[string]int32, n),
		merges: make(map[uint64]merge, len(c.Merges)),
	}
	for i, text := range c.Tokens {
		if text == "" {
			text = fmt.Sprintf("[EMPTY_%d]", i) // as llama.cpp names them
		}
		if j, dup := t.byText[text]; dup {
			return nil, fmt.Errorf("token %q appears twice in the vocabulary (ids %d and %d)", text, j, i)
		}
		t.tokens[i] = text
		t.byText[text] = int32(i)
		typ := int64(TypeNormal)
		if c.Types != nil {
			typ = c.Types[i]
		}
		switch typ {
		case TypeNormal:
			t.attrs[i] = attrNormal
		case TypeUnknown:
			t.attrs[i] = attrUnknown
		case TypeControl:
			t.attrs[i] = attrControl
		case TypeUserDefined:
			t.attrs[i] = attrUserDefined
		case TypeUnused:
			t.attrs[i] = attrUnused
		case TypeByte:
			t.attrs[i] = attrByte
		default:
			t.attrs[i] = 0 // undefined
		}
	}

	// Merge ranks. Pieces that are not tokens get ids past the vocabulary so
	// that merging works on ids; they never reach the output.
	piece := func(s string) int32 {
		if id, ok := t.byText[s]; ok {
			return id
		}
		id := int32(len(t.byText))
		t.byText[s] = id
		return id
	}
	for rank, m := range c.Merges {
		sp := -1
		if len(m) > 1 {
			if i := strings.IndexByte(m[1:], ' '); i >= 0 {
				sp = i + 1
			}
		}
		if sp < 0 {
			continue // llama.cpp keeps it as a pair of empty strings, which never matches
		}
		left, right := m[:sp], m[sp+1:]
		key := pairKey(piece(left), piece(right))
		if _, seen := t.merges[key]; !seen {
			t.merges[key] = merge{rank: int32(rank), result: piece(left + right)}
		}
	}
	for b := range 256 {
		t.bytePiece[b] = -1
		if id, ok := t.byText[byteChar[b]]; ok {
			t.bytePiece[b] = id
		}
	}

	t.bos, t.eos = 11, 11 // llama.cpp's BPE defaults, when in range
	if pre.noBOS {
		t.bos = -1
	}
	if !t.inVocab(t.bos) {
		t.bos = -1
	}
	if !t.inVocab(t.eos) {
		t.eos = -1
	}
	if t.inVocab(c.BOS) {
		t.bos = c.BOS
	}
	if t.inVocab(c.EOS) {
		t.eos = c.EOS
	}
	t.addBOS = pre.addBOS
	if c.AddBOS != nil {
		t.addBOS = *c.AddBOS
	}
	if c.AddEOS != nil {
		t.addEOS = *c.AddEOS
	}
	// An id past the vocabulary is dropped, as llama.cpp drops it; it is
	// named when a prompt would need the token.
	missing := func(what string, id int32) error {
		if id >= 0 {
			return fmt.Errorf("tokenizer.ggml.add_%s_token is true, but tokenizer.ggml.%s_token_id %d is past the vocabulary of %d tokens", what, what, id, n)
		}
		return fmt.Errorf("tokenizer.ggml.add_%s_token is true, but there is no %s token", what, strings.ToUpper(what))
	}
	if t.addBOS && t.bos < 0 {
		return nil, missing("bos", c.BOS)
	}
	if t.addEOS && t.eos < 0 {
		return nil, missing("eos", c.EOS)
	}

	t.findEOG(c)

	for id := range t.tokens {
		if t.attrs[id]&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.specials = append(t.specials, int32(id))
		}
	}
	slices.SortStableFunc(t.specials, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})

	for id, text := range t.tokens {
		t.maxText = max(t.maxText, len(text))
		a := t.attrs[id]
		switch {
		case a&(attrUnknown|attrControl|attrUserDefined) != 0:
			t.pieces[id] = text
		case a&attrNormal != 0:
			t.pieces[id] = decodeBytes(text)
		case a&attrByte != 0:
			t.pieces[id] = byteToken(text)
		}
	}
	return t, nil
}

// findEOG collects the end-of-generation tokens as llama.cpp does: the EOS,
// EOT and EOM ids, FIM padding/repository/separator tokens, and tokens whose
// text says so. Tokens found by their text become control tokens.
func (t *Tokenizer) findEOG(c Config) {
	set := map[int32]bool{}
	add := func(id int32) {
		if t.inVocab(id) {
			set[id] = true
		}
	}
	byText := func(texts ...string) (int32, bool) {
		for _, s := range texts {
			if id, ok := t.byText[s]; ok && t.inVocab(id) {
				return id, true
			}
		}
		return -1, false
	}
	control := func(id int32) { t.attrs[id] |= attrControl }

	eot := c.EOT
	if !t.inVocab(eot) {
		if id, ok := byText("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"); ok {
			eot = id
			control(id)
		}
	}
	eom := c.EOM
	if !t.inVocab(eom) {
		if id, ok := byText("<|eom_id|>"); ok {
			eom = id
			control(id)
		}
	}
	fim := c.ExtraEOG
	if len(fim) == 0 {
		for _, texts := range [][]string{
			{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
			{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
			{"<|file_sep|>"},
		} {
			if id, ok := byText(texts...); ok {
				fim = append(fim, id)
				control(id)
			}
		}
	}
	for _, id := range fim {
		add(id)
	}
	for _, s := range []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[",
	} {
		if id, ok := byText(s); ok {
			add(id)
			control(id)
		}
	}
	// GLM ends a turn by starting the next one: its conversions name
	// <|user|> as EOT and <|observation|> as EOM; older files do not.
	if t.preName == "glm4" || t.preName == "chatglm-bpe" {
		for _, s := range []string{"<|user|>", "<|observation|>"} {
			if id, ok := byText(s); ok {
				add(id)
			}
		}
	}
	// gpt-oss renders these tokens as text.
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := byText(s); ok {
			t.attrs[id] = attrUserDefined
		}
	}
	add(t.eos)
	add(eot)
	add(eom)

	has := func(s string) (int32, bool) {
		id, ok := byText(s)
		return id, ok && set[id]
	}
	// Harmony (gpt-oss) and solar-open: <|end|> ends a message, not the generation.
	_, ret := has("<|return|>")
	_, call := has("<|call|>")
	_, calls := has("<|calls|>")
	_, flush := has("<|flush|>")
	if end, ok := has("<|end|>"); ok && (ret && call || (call || calls) && flush) {
		delete(set, end)
		t.attrs[end] = attrUserDefined
	}
	// Gemma 4: </s> is not the end.
	if _, ok := has("<|tool_response>"); ok {
		if s, ok := has("</s>"); ok {
			delete(set, s)
			t.attrs[s] = attrNormal
		}
	}
	for id := range set {
		t.eog = append(t.eog, id)
	}
	slices.Sort(t.eog)
}

// inVocab reports whether id is a token of the vocabulary (not an extra merge piece).
func (t *Tokenizer) inVocab(id int32) bool { return id >= 0 && int(id) < len(t.tokens) }

// byteToken reads a "<0xXX>" byte token.
func byteToken(text string) string {
	if len(text) != 6 || !strings.HasPrefix(text, "<0x") || text[5] != '>' {
		return ""
	}
	v, err := strconv.ParseUint(text[3:5], 16, 8)
	if err != nil {
		return ""
	}
	return string([]byte{byte(v)})
}

// Encode returns the tokens of text, without BOS or EOS (see AddBOS). With
// parseSpecial, the texts of control and unknown tokens in text become those
// tokens; user-defined tokens are always parsed, as in llama.cpp. Bytes that
// are not valid UTF-8 split like U+FFFD but are kept as the bytes they are
// (llama.cpp encodes U+FFFD instead), so Decode(Encode(s)) == s for every s.
func (t *Tokenizer) Encode(text string, parseSpecial bool) []int32 {
	var out []int32
	var st bpeState
	for _, f := range t.partition(text, parseSpecial) {
		if f.token >= 0 {
			out = append(out, f.token)
			continue
		}
		s := text[f.start:f.end]
		prev := 0
		for _, end := range t.pre.split(s) {
			if end > prev {
				out = t.bpeWord(&st, s[prev:end], out)
			}
			prev = end
		}
	}
	return out
}

// fragment is a special token (token >= 0) or a stretch of plain text.
type fragment struct {
	token      int32
	start, end int
}

// partition cuts special tokens out of text the way llama.cpp does: for each
// special token, longest first, every occurrence in the text not yet claimed
// by a longer one.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{token: -1, start: 0, end: len(text)}}
	for _, id := range t.specials {
		if !parseSpecial && t.attrs[id]&(attrControl|attrUnknown) != 0 {
			continue
		}
		sp := t.tokens[id]
		if !strings.Contains(text, sp) {
			continue
		}
		var next []fragment
		for _, f := range frags {
			if f.token >= 0 {
				next = append(next, f)
				continue
			}
			for f.start < f.end {
				i := strings.Index(text[f.start:f.end], sp)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{token: -1, start: f.start, end: f.start + i})
				}
				next = append(next, fragment{token: id})
				f.start += i + len(sp)
			}
			if f.start < f.end {
				next = append(next, f)
			}
		}
		frags = next
	}
	return frags
}

// MaxTokenBytes bounds the bytes of text one token of Encode stands for (no
// token covers more than its vocabulary text, and a byte of that text covers
// at least one input byte), so a text of n bytes has at least
// n / MaxTokenBytes tokens: a text too long for a context can be refused
// without encoding it.
func (t *Tokenizer) MaxTokenBytes() int { return max(t.maxText, 1) }

// AddBOS reports whether prompts should start with BOS (tokenizer.ggml.add_bos_token).
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether prompts should end with EOS (tokenizer.ggml.add_eos_token).
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// BOS is the beginning-of-sequence token, -1 if the vocabulary has none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence token, -1 if the vocabulary has none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// IsEOG reports whether id ends a generation.
func (t *Tokenizer) IsEOG(id int32) bool {
	_, ok := slices.BinarySearch(t.eog, id)
	return ok
}

// EOG lists the tokens that end a generation, in increasing order.
func (t *Tokenizer) EOG() []int32 { return slices.Clone(t.eog) }

// IsText reports whether id stands for text: an ordinary token or a byte
// token (SentencePiece's <0xXX> fallback, one byte of a character), not a
// control, user-defined, unknown, unused or undefined one.
func (t *Tokenizer) IsText(id int32) bool {
	return t.inVocab(id) && t.attrs[id]&(attrNormal|attrByte) != 0
}

// Token returns id's vocabulary text (GPT-2 characters for normal tokens),
// or "" for an id outside the vocabulary.
func (t *Tokenizer) Token(id int32) string {
	if !t.inVocab(id) {
		return ""
	}
	return t.tokens[id]
}

// Lookup returns the id of a vocabulary text.
func (t *Tokenizer) Lookup(piece string) (int32, bool) {
	id, ok := t.byText[piece]
	if !ok || !t.inVocab(id) {
		return -1, false
	}
	return id, true
}

// Vocab is the number of tokens.
func (t *Tokenizer) Vocab() int { return len(t.tokens) }

// Pre is the pre-tokenizer's name as the file gives it.
func (t *Tokenizer) Pre() string { return t.preName }

func getBool(f *gguf.File, key string) (bool, bool) {
	v, ok := f.Get(key)
	if !ok {
		return false, false
	}
	return v.Bool()
}

// getID reads a token id; a negative or absurd value (some conversions write
// -1 for none) reads as absent.
func getID(f *gguf.File, key string) (int32, bool) {
	v, ok := f.Get(key)
	if !ok {
		return -1, false
	}
	id, ok := v.Uint()
	if !ok || id > math.MaxInt32 {
		return -1, false
	}
	return int32(id), true
}

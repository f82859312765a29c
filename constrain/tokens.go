package constrain

import (
	"math"

	"github.com/latent-ai/latent/tokenizer"
)

// Vocab is a tokenizer's vocabulary as JSONTokens reads it: its text tokens
// grouped by first byte, and the rest (end-of-generation, special, empty).
// Made once per tokenizer, it serves any number of answers.
type Vocab struct {
	tok     *tokenizer.Tokenizer
	byFirst [256][]int32
	rest    []int32
}

// maskRest sets to -Inf the logits of the tokens outside byFirst that allow
// refuses, and of a padded vocabulary's ids past the tokenizer's: the part of
// every Mask that takes no first-byte shortcut.
func (v *Vocab) maskRest(logits []float32, allow func(int32) bool) {
	refuse := float32(math.Inf(-1))
	for _, id := range v.rest {
		if int(id) < len(logits) && !allow(id) {
			logits[id] = refuse
		}
	}
	for id := v.tok.Vocab(); id < len(logits); id++ {
		logits[id] = refuse
	}
}

// NewVocab indexes tok's vocabulary.
func NewVocab(tok *tokenizer.Tokenizer) *Vocab {
	v := &Vocab{tok: tok}
	for id := range int32(tok.Vocab()) {
		if p := tok.Piece(id); tok.IsText(id) && p != "" && !tok.IsEOG(id) {
			v.byFirst[p[0]] = append(v.byFirst[p[0]], id)
		} else {
			v.rest = append(v.rest, id)
		}
	}
	return v
}

// JSONTokens constrains a generation to one JSON object, token by token
// (engine.Constraint): a token may come next when all its bytes continue
// the object, an end-of-generation token only once the object is whole.
// Control and other special tokens never come.
type JSONTokens struct {
	v       *Vocab
	json    JSON
	scratch JSON
	first   JSON // Mask: the state after a group's first byte
}

// NewJSONTokens starts an answer that is one JSON object, one s (from
// ParseSchema) allows when s is not nil.
func NewJSONTokens(v *Vocab, s *Schema) *JSONTokens {
	return &JSONTokens{v: v, json: NewSchemaJSON(s)}
}

// Allow reports whether id may come next.
func (c *JSONTokens) Allow(id int32) bool {
	tok := c.v.tok
	if tok.IsEOG(id) {
		return c.json.Done()
	}
	piece := tok.Piece(id)
	if !tok.IsText(id) || piece == "" {
		return false
	}
	c.json.CopyTo(&c.scratch)
	return c.scratch.FeedString(piece)
}

// Accept moves past id, which Allow allowed.
func (c *JSONTokens) Accept(id int32) {
	if !c.v.tok.IsEOG(id) {
		c.json.FeedString(c.v.tok.Piece(id))
	}
}

// Done reports whether the object is whole.
func (c *JSONTokens) Done() bool { return c.json.Done() }

// Mask sets the logit of every token Allow refuses to -Inf (engine.Masker).
// Tokens are tried by their first byte: a byte the object cannot take next
// removes its whole group (after '{' all but a few bytes), and the others
// are checked from the state after it.
func (c *JSONTokens) Mask(logits []float32) {
	refuse := float32(math.Inf(-1))
	for b, group := range &c.v.byFirst {
		if len(group) == 0 {
			continue
		}
		c.json.CopyTo(&c.first)
		if !c.first.Feed(byte(b)) {
			for _, id := range group {
				if int(id) < len(logits) {
					logits[id] = refuse
				}
			}
			continue
		}
		for _, id := range group {
			if int(id) >= len(logits) {
				continue
			}
			if p := c.v.tok.Piece(id); len(p) > 1 { // the rest of its bytes, after the first
				c.first.CopyTo(&c.scratch)
				if !c.scratch.FeedString(p[1:]) {
					logits[id] = refuse
				}
			}
		}
	}
	c.v.maskRest(logits, c.Allow)
}

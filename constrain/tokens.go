package constrain

import (
	"math"

	"github.com/latent-ai/latent/tokenizer"
)

// JSONTokens constrains a generation to one JSON object, token by token
// (engine.Constraint): a token may come next when all its bytes continue
// the object, an end-of-generation token only once the object is whole.
// Control and other special tokens never come.
type JSONTokens struct {
	tok     *tokenizer.Tokenizer
	json    JSON
	scratch JSON
	// the vocabulary's text tokens by their first byte, and the rest (Mask),
	// made at the first Mask
	byFirst *[256][]int32
	rest    []int32
	first   JSON // Mask: the state after a group's first byte
}

// NewJSONTokens starts an answer that is one JSON object.
func NewJSONTokens(tok *tokenizer.Tokenizer) *JSONTokens { return &JSONTokens{tok: tok} }

// NewSchemaTokens starts an answer that is one JSON object s allows.
func NewSchemaTokens(tok *tokenizer.Tokenizer, s *Schema) *JSONTokens {
	return &JSONTokens{tok: tok, json: NewSchemaJSON(s)}
}

// Allow reports whether id may come next.
func (c *JSONTokens) Allow(id int32) bool {
	if c.tok.IsEOG(id) {
		return c.json.Done()
	}
	piece := c.tok.Piece(id)
	if !c.tok.IsText(id) || piece == "" {
		return false
	}
	c.json.CopyTo(&c.scratch)
	return c.scratch.FeedString(piece)
}

// Accept moves past id, which Allow allowed.
func (c *JSONTokens) Accept(id int32) {
	if !c.tok.IsEOG(id) {
		c.json.FeedString(c.tok.Piece(id))
	}
}

// Done reports whether the object is whole.
func (c *JSONTokens) Done() bool { return c.json.Done() }

// Mask sets the logit of every token Allow refuses to -Inf (engine.Masker).
// Tokens are tried by their first byte: a byte the object cannot take next
// removes its whole group (after '{' all but a few bytes), so a step costs
// 256 one-byte tries and the full check of the tokens that start well.
func (c *JSONTokens) Mask(logits []float32) {
	if c.byFirst == nil {
		c.index()
	}
	refuse := float32(math.Inf(-1))
	for b := range 256 {
		group := c.byFirst[b]
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
			if p := c.tok.Piece(id); len(p) > 1 { // the rest of its bytes, after the first
				c.first.CopyTo(&c.scratch)
				if !c.scratch.FeedString(p[1:]) {
					logits[id] = refuse
				}
			}
		}
	}
	for _, id := range c.rest {
		if int(id) < len(logits) && !c.Allow(id) {
			logits[id] = refuse
		}
	}
	for id := c.tok.Vocab(); id < len(logits); id++ { // a padded vocabulary's ids past the tokenizer's
		logits[id] = refuse
	}
}

// index groups the vocabulary for Mask.
func (c *JSONTokens) index() {
	var by [256][]int32
	for id := range int32(c.tok.Vocab()) {
		if p := c.tok.Piece(id); c.tok.IsText(id) && p != "" && !c.tok.IsEOG(id) {
			by[p[0]] = append(by[p[0]], id)
		} else {
			c.rest = append(c.rest, id)
		}
	}
	c.byFirst = &by
}

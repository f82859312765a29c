package constrain

import (
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

package constrain

import (
	"math"
	"strings"
)

// PrefixTokens makes a generation write a given text next (engine.Constraint), as a required tool call
// starts with the call's opening markup: first anything up to and including after (when set: the end of a
// reasoning block the prompt opened), then at most maxSpace bytes of whitespace, then prefix, then
// anything. Every token counts by the bytes it decodes to, special ones included (a call's markup often is
// one), and the generation may not end before prefix is written.
type PrefixTokens struct {
	v             *Vocab
	after, prefix string
	tail          string // with after: the output's last bytes, to find after in
	phase         int    // 0: before after; 1: writing prefix; 2: free
	matched       int    // prefix's bytes written
	space         int    // whitespace bytes written before prefix
}

// maxSpace bounds the whitespace a model may write before the forced text.
const maxSpace = 16

// NewPrefixTokens starts a generation that writes prefix after after (see PrefixTokens).
func NewPrefixTokens(v *Vocab, after, prefix string) *PrefixTokens {
	c := &PrefixTokens{v: v, after: after, prefix: prefix}
	if after == "" {
		c.phase = 1
	}
	if prefix == "" && c.phase == 1 {
		c.phase = 2
	}
	return c
}

// Allow reports whether id may come next.
func (c *PrefixTokens) Allow(id int32) bool {
	tok := c.v.tok
	switch {
	case tok.IsEOG(id):
		return c.phase == 2
	case c.phase != 1:
		return true
	}
	_, ok := c.step(tok.Piece(id))
	return ok
}

// step is what piece does while prefix is being written: the prefix bytes it matches (and whether it
// completes the prefix, with more bytes after it), and whether it may come at all.
func (c *PrefixTokens) step(piece string) (int, bool) {
	rest := c.prefix[c.matched:]
	if piece == "" { // a token that writes nothing (a control token) would not move on
		return 0, false
	}
	if c.matched == 0 {
		trimmed := strings.TrimLeft(piece, " \t\r\n")
		if c.space+len(piece)-len(trimmed) > maxSpace {
			return 0, false
		}
		piece = trimmed
		if piece == "" {
			return 0, true // whitespace only
		}
	}
	switch {
	case strings.HasPrefix(rest, piece):
		return len(piece), true
	case strings.HasPrefix(piece, rest): // the prefix ends inside the token; what follows is free
		return len(rest), true
	}
	return 0, false
}

// Accept moves past id, which Allow allowed.
func (c *PrefixTokens) Accept(id int32) {
	tok := c.v.tok
	if tok.IsEOG(id) {
		return
	}
	piece := tok.Piece(id)
	switch c.phase {
	case 0:
		c.tail += piece
		if i := strings.Index(c.tail, c.after); i >= 0 {
			c.phase = 1
			if c.prefix == "" {
				c.phase = 2
			}
			c.tail = ""
			return
		}
		if n := len(c.after) - 1; len(c.tail) > n {
			c.tail = c.tail[len(c.tail)-n:]
		}
	case 1:
		n, _ := c.step(piece)
		if c.matched == 0 {
			c.space += len(piece) - len(strings.TrimLeft(piece, " \t\r\n"))
		}
		c.matched += n
		if c.matched == len(c.prefix) {
			c.phase = 2
		}
	}
}

// Done is false: the forced text leaves the answer open, to end as any answer does.
func (c *PrefixTokens) Done() bool { return false }

// Written reports whether the forced text has been written.
func (c *PrefixTokens) Written() bool { return c.phase == 2 }

// Mask sets the logit of every token Allow refuses to -Inf (engine.Masker).
func (c *PrefixTokens) Mask(logits []float32) {
	refuse := float32(math.Inf(-1))
	for id := range logits {
		if id >= c.v.tok.Vocab() || !c.Allow(int32(id)) {
			logits[id] = refuse
		}
	}
}

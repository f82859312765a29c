package constrain

import (
	"math"
	"strings"
)

// PrefixTokens makes a generation write a given text first (engine.Constraint), as a required tool call
// begins with the call's opening markup. Before the text the output may hold one reasoning block: already
// open when the prompt opened it, or opened by the output itself, at its start, when the model may think;
// the block's text is free. The text may follow at most maxSpace bytes of whitespace, and it must be
// followed by one of the bytes in next when that is set (so that a forced name is not the start of a
// longer one); what follows is free. Tokens count by the bytes they decode to, special ones included (a
// call's markup often is one); a token that writes nothing is refused while the text is due, and the
// generation may not end before the text is written.
type PrefixTokens struct {
	v                         *Vocab
	prefix, next, open, close string
	st, scratch               prefixState
}

// prefixState is where an output is: in the reasoning block, writing the text (or the block's opening
// tag), at the byte after the text, or free.
type prefixState struct {
	phase    int    // inBlock, writing, boundary or free
	tail     string // inBlock: the block's last bytes, to find close in
	written  int    // writing: the bytes of the text (and of open, while it may be that) written
	mayOpen  bool   // writing: the bytes written may still be open's
	mayText  bool   // writing: the bytes written may still be the text's
	spaceLen int    // writing: whitespace written before them
}

const (
	inBlock = iota
	writing
	boundary
	free
)

// maxSpace bounds the whitespace a model may write before the forced text.
const maxSpace = 16

// NewPrefixTokens starts a generation that writes prefix first, then one byte of next (when not "").
// inside: the prompt opened a reasoning block, closed by close; else a block may open with open at the
// output's start when open is not "".
func NewPrefixTokens(v *Vocab, prefix, next, open, close string, inside bool) *PrefixTokens {
	c := &PrefixTokens{v: v, prefix: prefix, next: next, open: open, close: close}
	c.st = prefixState{phase: writing, mayOpen: open != "" && !inside, mayText: true}
	if inside {
		c.st.phase = inBlock
	}
	if prefix == "" && next == "" && !inside {
		c.st.phase = free
	}
	return c
}

// feed moves st past piece and reports whether piece may come there.
func (c *PrefixTokens) feed(st *prefixState, piece string) bool {
	for {
		switch st.phase {
		case free:
			return true
		case boundary:
			if piece == "" {
				return false
			}
			st.phase = free
			return strings.IndexByte(c.next, piece[0]) >= 0
		case inBlock:
			st.tail += piece
			i := strings.Index(st.tail, c.close)
			if i < 0 {
				if n := len(c.close) - 1; len(st.tail) > n {
					st.tail = st.tail[len(st.tail)-n:]
				}
				return true
			}
			// closed: what the token writes after it is the start of what is due
			piece = st.tail[i+len(c.close):]
			*st = prefixState{phase: writing, mayText: true}
			if piece == "" {
				return true
			}
		case writing:
			if piece == "" { // writes nothing: would not move on
				return false
			}
			if st.written == 0 {
				trimmed := strings.TrimLeft(piece, " \t\r\n")
				if st.spaceLen += len(piece) - len(trimmed); st.spaceLen > maxSpace {
					return false
				}
				if piece = trimmed; piece == "" {
					return true
				}
			}
			// does piece continue the text, the block's opening tag, or both?
			fits := func(target string) (bool, int) {
				rest := target[min(st.written, len(target)):]
				switch {
				case strings.HasPrefix(rest, piece):
					return true, len(piece)
				case strings.HasPrefix(piece, rest):
					return true, len(rest)
				}
				return false, 0
			}
			textOK, textN := fits(c.prefix)
			openOK, openN := fits(c.open)
			textOK, openOK = textOK && st.mayText, openOK && st.mayOpen
			switch {
			case !textOK && !openOK:
				return false
			case openOK && st.written+openN == len(c.open): // the block opens
				piece = piece[openN:]
				*st = prefixState{phase: inBlock}
				if piece == "" {
					return true
				}
			case textOK && st.written+textN == len(c.prefix): // the text is written
				piece = piece[textN:]
				st.phase = free
				if c.next != "" {
					st.phase = boundary
				}
				if piece == "" {
					return true
				}
			default:
				st.written += len(piece)
				st.mayText, st.mayOpen = textOK, openOK
				return true
			}
		}
	}
}

// Allow reports whether id may come next.
func (c *PrefixTokens) Allow(id int32) bool {
	tok := c.v.tok
	switch {
	case id < 0 || int(id) >= tok.Vocab():
		return false
	case tok.IsEOG(id):
		return c.st.phase == free
	}
	c.scratch = c.st
	return c.feed(&c.scratch, tok.Piece(id))
}

// Accept moves past id, which Allow allowed.
func (c *PrefixTokens) Accept(id int32) {
	if !c.v.tok.IsEOG(id) {
		c.feed(&c.st, c.v.tok.Piece(id))
	}
}

// Done is false: the forced text leaves the answer open, to end as any answer does.
func (c *PrefixTokens) Done() bool { return false }

// Written reports whether the forced text (and its next byte) has been written.
func (c *PrefixTokens) Written() bool { return c.st.phase == free }

// Mask sets the logit of every token Allow refuses to -Inf (engine.Masker).
func (c *PrefixTokens) Mask(logits []float32) {
	refuse := float32(math.Inf(-1))
	for id := range logits {
		if !c.Allow(int32(id)) {
			logits[id] = refuse
		}
	}
}

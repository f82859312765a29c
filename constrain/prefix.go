package constrain

import (
	"math"
	"strings"
)

// PrefixTokens makes a generation write a given text first (engine.Constraint), as a required tool call
// begins with the call's opening markup; see Prefix for what may come around it. Tokens count by the bytes
// they decode to, special ones included (a call's markup often is one); a token that writes nothing is
// refused while the text is due.
type PrefixTokens struct {
	v  *Vocab
	p  Prefix
	st prefixState
}

// Prefix is what PrefixTokens holds an output to.
type Prefix struct {
	Text string // written first, after at most maxSpace bytes of whitespace
	// Next, when set, holds the bytes one of which must follow Text (so that a forced name is not the
	// start of a longer one).
	Next string
	// End, when set, must be written after Text before the output may end (a call's closing markup);
	// Again, when set, is what starts another such stretch after End (a second call), End then due again.
	End, Again string
	// Before Text the output may hold one reasoning block, from Open to Close, whose text is free: Inside,
	// the prompt opened it; else the output may open it at its start when Open is set.
	Open, Close string
	Inside      bool
}

// prefixState is where an output is: in the reasoning block, writing the text (or the block's opening
// tag), at the byte after the text, before End, or free.
type prefixState struct {
	phase    int    // inBlock, writing, boundary, ending or free
	tail     string // inBlock, ending: the last bytes, to find Close or End in
	written  int    // writing: the bytes of the text (and of Open, while it may be that) written
	mayOpen  bool   // writing: the bytes written may still be Open's
	mayText  bool   // writing: the bytes written may still be the text's
	spaceLen int    // writing: whitespace written before them
}

const (
	inBlock = iota
	writing
	boundary
	ending
	free
)

// maxSpace bounds the whitespace (space bytes) a model may write before the forced text.
const maxSpace = 16

// NewPrefixTokens starts a generation held to p, whose Text must not be empty.
func NewPrefixTokens(v *Vocab, p Prefix) *PrefixTokens {
	if p.Text == "" {
		panic("constrain: a Prefix with no text")
	}
	c := &PrefixTokens{v: v, p: p}
	c.st = prefixState{phase: writing, mayOpen: p.Open != "" && !p.Inside, mayText: true}
	if p.Inside {
		c.st.phase = inBlock
	}
	return c
}

// afterText is the phase that follows the text, and afterNext the one that follows its next byte.
func (c *PrefixTokens) afterText() int {
	if c.p.Next != "" {
		return boundary
	}
	return c.afterNext()
}

func (c *PrefixTokens) afterNext() int {
	if c.p.End != "" {
		return ending
	}
	return free
}

// seek appends piece to st's tail and reports the bytes after the first tag in it, keeping only what
// could be the start of a tag when there is none.
func seek(st *prefixState, piece, tag string) (after string, found bool) {
	st.tail += piece
	if i := strings.Index(st.tail, tag); i >= 0 {
		after = st.tail[i+len(tag):]
		st.tail = ""
		return after, true
	}
	if n := len(tag) - 1; len(st.tail) > n {
		st.tail = st.tail[len(st.tail)-n:]
	}
	return "", false
}

// feed moves st past piece and reports whether piece may come there.
func (c *PrefixTokens) feed(st *prefixState, piece string) bool {
	for {
		switch st.phase {
		case free:
			if c.p.Again == "" {
				return true
			}
			rest, found := seek(st, piece, c.p.Again)
			if !found {
				return true
			}
			st.phase, piece = ending, rest // End is due again
		case ending:
			rest, found := seek(st, piece, c.p.End)
			if !found {
				return true
			}
			st.phase, piece = free, rest
		case boundary: // the byte is checked, then read again as what comes after it (End may start with it)
			if piece == "" || strings.IndexByte(c.p.Next, piece[0]) < 0 {
				return false
			}
			st.phase = c.afterNext()
		case inBlock:
			rest, found := seek(st, piece, c.p.Close)
			if !found {
				return true
			}
			// closed: what the token writes after it is the start of what is due
			*st = prefixState{phase: writing, mayText: true}
			if piece = rest; piece == "" {
				return true
			}
		case writing:
			if piece == "" { // writes nothing: would not move on
				return false
			}
			if st.written == 0 {
				trimmed := strings.TrimLeftFunc(piece, func(r rune) bool { return r < 128 && isSpace(byte(r)) })
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
			textOK, textN := fits(c.p.Text)
			openOK, openN := fits(c.p.Open)
			textOK, openOK = textOK && st.mayText, openOK && st.mayOpen
			switch {
			case !textOK && !openOK:
				return false
			case openOK && st.written+openN == len(c.p.Open): // the block opens
				piece = piece[openN:]
				*st = prefixState{phase: inBlock}
			case textOK && st.written+textN == len(c.p.Text): // the text is written
				piece = piece[textN:]
				*st = prefixState{phase: c.afterText()}
			default:
				st.written += len(piece)
				st.mayText, st.mayOpen = textOK, openOK
				return true
			}
			if piece == "" {
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
	case c.st.phase == ending || c.st.phase == free:
		return true // any text (feed would only look for End or Again)
	}
	st := c.st
	return c.feed(&st, tok.Piece(id))
}

// Accept moves past id, which Allow allowed.
func (c *PrefixTokens) Accept(id int32) {
	if !c.v.tok.IsEOG(id) {
		c.feed(&c.st, c.v.tok.Piece(id))
	}
}

// Mask sets the logit of every token Allow refuses to -Inf (engine.Masker). Tokens are tried by their
// first byte: while the text is due (or the byte after it), a group whose first byte cannot come next goes
// at once, and only the others are asked one by one.
func (c *PrefixTokens) Mask(logits []float32) {
	refuse := float32(math.Inf(-1))
	for b, group := range &c.v.byFirst {
		if len(group) == 0 {
			continue
		}
		may := c.mayStart(byte(b))
		for _, id := range group {
			if int(id) < len(logits) && (!may || !c.Allow(id)) {
				logits[id] = refuse
			}
		}
	}
	c.v.maskRest(logits, c.Allow)
}

// mayStart reports whether a token whose text starts with b may come next, as far as that byte tells.
func (c *PrefixTokens) mayStart(b byte) bool {
	st := &c.st
	switch st.phase {
	case writing:
		at := func(s string) bool { return st.written < len(s) && s[st.written] == b }
		return st.written == 0 && isSpace(b) || st.mayText && at(c.p.Text) || st.mayOpen && at(c.p.Open)
	case boundary:
		return strings.IndexByte(c.p.Next, b) >= 0
	}
	return true
}

// Done is false: the forced text leaves the answer open, to end as any answer does.
func (c *PrefixTokens) Done() bool { return false }

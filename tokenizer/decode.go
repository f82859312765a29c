package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids: normal tokens as their bytes, control,
// user-defined and unknown tokens as their text (like llama.cpp with special
// rendering on), unused tokens and ids outside the vocabulary as nothing.
// The result may end in an incomplete UTF-8 sequence; see Decoder.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.Piece(id))
	}
	return b.String()
}

// Piece returns the bytes id decodes to (possibly part of a character).
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Decoder decodes a stream of tokens into text that is always valid UTF-8 as
// far as it goes: a character whose bytes are split across tokens comes out
// whole, once its last byte arrives.
type Decoder struct {
	t       *Tokenizer
	pending []byte
}

// NewDecoder starts a stream.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add takes the next token and returns the text it completes, which may be
// empty while a character is incomplete. Bytes that can never form a valid
// character are passed through as they are.
func (d *Decoder) Add(id int32) string {
	d.pending = append(d.pending, d.t.Piece(id)...)
	n := validUTF8Prefix(d.pending)
	out := string(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out
}

// Flush returns what is held back (an incomplete character at the end of the
// stream) and resets the decoder.
func (d *Decoder) Flush() string {
	out := string(d.pending)
	d.pending = d.pending[:0]
	return out
}

// validUTF8Prefix is the length of the longest prefix of p that does not end
// in an incomplete (but still completable) UTF-8 sequence.
func validUTF8Prefix(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if p[i]&0xC0 != 0x80 { // the last sequence starts here
			if !utf8.FullRune(p[i:]) {
				return i
			}
			return len(p)
		}
	}
	return len(p)
}

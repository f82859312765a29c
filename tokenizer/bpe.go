package tokenizer

import (
	"encoding/hex"
	"slices"
	"strings"
)

// Byte-level BPE works on text in which every byte is shown as one printable
// character (GPT-2's table: printable Latin-1 bytes stand for themselves, the
// other 68 are moved to U+0100 and up), so that vocabulary entries and merges
// are ordinary strings.
var (
	byteChar [256]string       // byte -> its character, UTF-8
	charByte = map[rune]byte{} // and back
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE
		if !printable {
			r = rune(256 + n)
			n++
		}
		byteChar[b] = string(r)
		charByte[r] = byte(b)
	}
}

// ByteToken is the vocabulary text of byte b's token in byte-level BPE: its
// GPT-2 character ("Ġ" for the space).
func ByteToken(b byte) string { return byteChar[b] }

// encodeBytes shows s's bytes as GPT-2 characters.
func encodeBytes(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteString(byteChar[s[i]])
	}
	return b.String()
}

// decodeBytes turns a token's GPT-2 characters back into bytes. A character
// outside the table is kept with a marker, as llama.cpp's llama_decode_text does.
func decodeBytes(text string) string {
	var b strings.Builder
	for _, r := range text {
		if c, ok := charByte[r]; ok {
			b.WriteByte(c)
			continue
		}
		b.WriteString("[UNK_BYTE_0x")
		b.WriteString(hex.EncodeToString([]byte(string(r))))
		b.WriteString(text)
		b.WriteString("]")
	}
	return b.String()
}

// merge is what a pair of adjacent pieces becomes, and how early it merges.
type merge struct {
	rank   int32
	result int32 // piece id
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// symbol is a run of the word's bytes that BPE has merged so far.
type symbol struct {
	piece      int32 // piece id, -1 if the text is in no merge nor the vocabulary
	start, end int32 // bytes of the word
	prev, next int32 // neighbours still alive, -1 at the ends
}

// bigram is a candidate merge of two adjacent symbols.
type bigram struct {
	rank        int32
	left, right int32 // symbol indices
	lp, rp      int32 // their pieces when the candidate was made
}

// less orders candidates as llama.cpp's queue does: lowest rank first, then
// leftmost.
func (a bigram) less(b bigram) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

type bigramHeap []bigram

func (h *bigramHeap) push(b bigram) {
	*h = append(*h, b)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *bigramHeap) pop() bigram {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// bpeState is the scratch space of one Encode call, reused across words.
type bpeState struct {
	syms  []symbol
	queue bigramHeap
}

// try queues the merge of two adjacent symbols, if there is one.
func (t *Tokenizer) try(st *bpeState, left, right int32) {
	if left < 0 || right < 0 {
		return
	}
	lp, rp := st.syms[left].piece, st.syms[right].piece
	if lp < 0 || rp < 0 {
		return
	}
	if m, ok := t.merges[pairKey(lp, rp)]; ok {
		st.queue.push(bigram{rank: m.rank, left: left, right: right, lp: lp, rp: rp})
	}
}

// bpeWord appends the tokens of one pre-tokenized word (raw bytes).
func (t *Tokenizer) bpeWord(st *bpeState, word string, out []int32) []int32 {
	if t.pre.ignoreMerge {
		if id, ok := t.byText[encodeBytes(word)]; ok {
			return append(out, id)
		}
	}
	syms := slices.Grow(st.syms[:0], len(word))[:len(word)]
	st.syms = syms
	for i := range syms {
		syms[i] = symbol{piece: t.bytePiece[word[i]], start: int32(i), end: int32(i + 1), prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[len(syms)-1].next = -1

	st.queue = st.queue[:0]
	for i := 1; i < len(syms); i++ {
		t.try(st, int32(i-1), int32(i))
	}
	for len(st.queue) > 0 {
		b := st.queue.pop()
		l, r := &syms[b.left], &syms[b.right]
		// A candidate is stale once either side has merged since: a symbol
		// only grows, so unchanged pieces mean unchanged text.
		if l.end == l.start || r.end == r.start || l.piece != b.lp || r.piece != b.rp {
			continue
		}
		l.piece = t.merges[pairKey(b.lp, b.rp)].result
		l.end = r.end
		r.start = r.end // emptied
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		t.try(st, l.prev, b.left)
		t.try(st, b.left, l.next)
	}

	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		if s.piece >= 0 && int(s.piece) < len(t.tokens) {
			out = append(out, s.piece)
			continue
		}
		// Not a token (a merge whose result the vocabulary lacks): llama.cpp
		// looks up each byte of the symbol's characters on its own.
		for _, c := range []byte(encodeBytes(word[s.start:s.end])) {
			if id, ok := t.byText[string([]byte{c})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

package tokenizer

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"
)

// Any stream of token ids (in the vocabulary or not) decodes token by token
// to exactly what Decode gives for all of them, and whenever the text so far
// is valid UTF-8, so is every piece handed out for it.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{228, 0, 184, 0, 173, 0})          // 中 as three byte tokens
	f.Add([]byte{0xf0, 0, 0x9f, 0, 0x98, 0, 0x80}) // 😀, cut short
	f.Add([]byte{0xff, 0xff, 0x41, 0, 0xc0, 0})    // out of range, A, a lone lead byte
	toks := make([]*Tokenizer, len(goldenModels))
	for i, name := range goldenModels {
		toks[i] = loadGolden(f, name)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ids := make([]int32, len(raw)/2)
		for i := range ids {
			ids[i] = int32(binary.LittleEndian.Uint16(raw[2*i:])) - 8 // a few negative ids too
		}
		for _, tok := range toks {
			d := tok.NewDecoder()
			var got strings.Builder
			for i, id := range ids {
				piece := d.Add(id)
				if utf8.ValidString(tok.Decode(ids[:i+1])) && !utf8.ValidString(piece) {
					t.Fatalf("%s %v: token %d gave invalid UTF-8 %q inside valid text", tok.Pre(), ids, i, piece)
				}
				got.WriteString(piece)
			}
			got.WriteString(d.Flush())
			if want := tok.Decode(ids); got.String() != want {
				t.Fatalf("%s %v: streamed %q, Decode gives %q", tok.Pre(), ids, got.String(), want)
			}
		}
	})
}

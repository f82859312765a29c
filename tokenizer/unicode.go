package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// cpClass is what the pre-tokenizers know of a codepoint: its general
// category (exactly one) and whether it is whitespace. llama.cpp builds the
// same table from Python's regex module (\p{N}, \p{L}, \p{Z}, \p{M}, \p{P},
// \p{S}, \p{C} with unassigned codepoints in C, and \s for whitespace); Go's
// unicode tables give the same classes for the same Unicode version.
type cpClass uint8

const (
	cNumber cpClass = 1 << iota
	cLetter
	cSeparator
	cAccent // \p{M}
	cPunct
	cSymbol
	cControl // \p{C}: control, format, private use, surrogate, unassigned
	cSpace   // the Unicode White_Space property
)

const categoryMask = cNumber | cLetter | cSeparator | cAccent | cPunct | cSymbol | cControl

func (c cpClass) is(m cpClass) bool { return c&m != 0 }

// classify computes a codepoint's class from the Unicode tables.
func classify(r rune) cpClass {
	var c cpClass
	switch {
	case unicode.Is(unicode.N, r):
		c = cNumber
	case unicode.Is(unicode.L, r):
		c = cLetter
	case unicode.Is(unicode.Z, r):
		c = cSeparator
	case unicode.Is(unicode.M, r):
		c = cAccent
	case unicode.Is(unicode.P, r):
		c = cPunct
	case unicode.Is(unicode.S, r):
		c = cSymbol
	default:
		c = cControl
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= cSpace
	}
	return c
}

var (
	bmpOnce  sync.Once
	bmpClass []cpClass // classes of U+0000..U+FFFF, built on first use (64 KiB)
)

// classOf is classify with a table for the Basic Multilingual Plane.
func classOf(r rune) cpClass {
	if r < 0x10000 {
		bmpOnce.Do(func() {
			bmpClass = make([]cpClass, 0x10000)
			for i := range bmpClass {
				bmpClass[i] = classify(rune(i))
			}
		})
		return bmpClass[r]
	}
	if r > unicode.MaxRune {
		return cControl
	}
	return classify(r)
}

// codepoints splits s into codepoints, with the byte offset where each starts
// (offs has one more entry: len(s)). A byte that is not valid UTF-8 becomes
// U+FFFD, as llama.cpp decodes it, but offs keeps pointing at the real bytes
// so that what is split off is always the caller's own text.
func codepoints(s string) (cps []rune, offs []int) {
	cps = make([]rune, 0, len(s))
	offs = make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		cps = append(cps, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(s))
	return cps, offs
}

package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2"
)

// A pre-tokenizer cuts text into words before BPE, so that merges never cross
// a word boundary. Like llama.cpp, it is a list of steps applied in order:
// each step cuts every piece the previous steps left into the parts a regex
// matches and the gaps between them (gaps are kept as pieces too).
//
// llama.cpp runs most of these regexes with std::regex on a "collapsed" text
// in which every non-ASCII codepoint is replaced by one byte naming its class
// (so \p{L} becomes [\xD2A-Za-z], and \p{Lu} is no different from \p{L}), and
// it replaces the GPT-2 and Llama 3 regexes by hand-written splitters. We do
// exactly the same, with regexp2 (which has the lookahead the regexes need)
// standing in for std::regex, so that the pieces are llama.cpp's, quirks and all.

// preTokenizer is a named list of split steps.
type preTokenizer struct {
	steps       []splitter
	ignoreMerge bool // a word that is itself a token is taken whole (llama.cpp's ignore_merges)
	addBOS      bool // llama.cpp's default for add_bos_token
	noBOS       bool // the BOS id defaults to none (GLM)
}

// splitter refines pieces, given as lengths in codepoints, into smaller ones.
type splitter interface {
	split(t *splitText, pieces []int) []int
}

// splitText is one text being pre-tokenized, in the forms the steps need.
type splitText struct {
	cps       []rune
	cls       []cpClass
	collapsed []rune // each non-ASCII codepoint replaced by its class's stand-in
	wide      []rune // non-ASCII whitespace replaced by \v
}

func newSplitText(cps []rune) *splitText {
	t := &splitText{cps: cps, cls: make([]cpClass, len(cps))}
	for i, r := range cps {
		t.cls[i] = classOf(r)
	}
	return t
}

// Stand-ins for the classes in the collapsed text, as llama.cpp picks them.
const (
	collapsedOther  = 0xD0
	collapsedNumber = 0xD1
	collapsedLetter = 0xD2
	collapsedPunct  = 0xD3
	collapsedAccent = 0xD4
	collapsedSymbol = 0xD5
	collapsedSpace  = 0x0B // \v: std::regex's \s matches it
)

func (t *splitText) collapsedText() []rune {
	if t.collapsed == nil {
		t.collapsed = make([]rune, len(t.cps))
		for i, r := range t.cps {
			c := t.cls[i]
			switch {
			case r < 0x80:
			case c.is(cSpace):
				r = collapsedSpace
			case c.is(cNumber):
				r = collapsedNumber
			case c.is(cLetter):
				r = collapsedLetter
			case c.is(cPunct):
				r = collapsedPunct
			case c.is(cAccent):
				r = collapsedAccent
			case c.is(cSymbol):
				r = collapsedSymbol
			default:
				r = collapsedOther
			}
			t.collapsed[i] = r
		}
	}
	return t.collapsed
}

func (t *splitText) wideText() []rune {
	if t.wide == nil {
		t.wide = make([]rune, len(t.cps))
		for i, r := range t.cps {
			if r >= 0x80 && t.cls[i].is(cSpace) {
				r = collapsedSpace
			}
			t.wide[i] = r
		}
	}
	return t.wide
}

// The regexes, as llama.cpp's llama-vocab.cpp lists them (non-ASCII
// characters written as Go escapes, so the regexes hold the characters).
const (
	// regexGPT2 is run by splitGPT2.
	regexGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// regexLlama3 is run by splitLlama3.
	regexLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

	// DeepSeek LLM (V2): newlines, cased-letter runs, punctuation runs,
	// trailing whitespace, CJK and Hangul runs, digit runs.
	regexDeepSeekNewline = "[\r\n]"
	regexDeepSeekLetters = "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
	regexDeepSeekPunct   = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
	regexDeepSeekCJK     = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"

	// DeepSeek V3: digit groups of at most three, CJK and kana runs, then words.
	regexDeepSeek3Kana  = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	regexDeepSeek3Words = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

	// Youtu: Hangul, CJK punctuation, bopomofo and CJK/kana runs, then words
	// with case-aware letter runs (which the collapsed text cannot tell apart),
	// single digits.
	regexYoutuCJK   = "[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	regexYoutuWords = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

	// llama.cpp's default, for a missing or "default" pre-tokenizer.
	regexDefaultPunct = `[\p{P}\$\+<=>\^~\|]+`
)

// preTokenizers maps tokenizer.ggml.pre names to their pre-tokenizer, with
// the aliases llama.cpp accepts. Built once; the steps are safe for
// concurrent use.
var preTokenizers = func() map[string]*preTokenizer {
	gpt2 := &preTokenizer{steps: []splitter{gpt2Splitter{}}}
	llama3 := &preTokenizer{steps: []splitter{llama3Splitter{}}, ignoreMerge: true, addBOS: true}
	llama3Plain := &preTokenizer{steps: []splitter{llama3Splitter{}}}
	glm4 := &preTokenizer{steps: []splitter{llama3Splitter{}}, noBOS: true}
	qwen2 := &preTokenizer{steps: []splitter{mustRegex(regexQwen2)}}
	// DeepSeek LLM's regexes are simple enough to run by hand (the test
	// checks them against the regexes).
	deepseek := &preTokenizer{steps: []splitter{
		classRun(regexDeepSeekNewline),
		classRun(regexDeepSeekLetters),
		classRun(regexDeepSeekPunct),
		trailingSpace{},
		classRun(regexDeepSeekCJK),
		numberRun{},
	}}
	deepseek3 := &preTokenizer{steps: []splitter{
		mustRegex(`\p{N}{1,3}`),
		mustRegex(regexDeepSeek3Kana),
		mustRegex(regexDeepSeek3Words),
	}}
	youtu := &preTokenizer{steps: []splitter{
		mustRegex(regexYoutuCJK),
		mustRegex(regexYoutuWords),
	}, ignoreMerge: true}
	def := &preTokenizer{steps: []splitter{
		mustRegex(regexDefaultPunct),
		gpt2Splitter{},
		mustRegex(`\p{N}+`),
		mustRegex(`[0-9][0-9][0-9]`),
	}}

	m := map[string]*preTokenizer{"": def, "default": def, "deepseek-llm": deepseek, "youtu": youtu}
	for _, n := range []string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"} {
		m[n] = llama3
	}
	for _, n := range []string{"dbrx", "smaug-bpe"} {
		m[n] = llama3Plain
	}
	for _, n := range []string{"glm4", "chatglm-bpe"} {
		m[n] = glm4
	}
	for _, n := range []string{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"} {
		m[n] = deepseek3
	}
	for _, n := range []string{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"} {
		m[n] = qwen2
	}
	// "gpt2" is not a name llama.cpp knows, but it is what people write.
	for _, n := range []string{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "gigachat", "a.x-4.0", "mellum", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "modern-bert"} {
		m[n] = gpt2
	}
	return m
}()

// split cuts s into words; each word is returned as its end offset in bytes.
func (p *preTokenizer) split(s string) []int {
	cps, offs := codepoints(s)
	if len(cps) == 0 {
		return nil
	}
	t := newSplitText(cps)
	pieces := []int{len(cps)}
	for _, st := range p.steps {
		pieces = st.split(t, pieces)
	}
	ends := make([]int, len(pieces))
	at := 0
	for i, n := range pieces {
		at += n
		ends[i] = offs[at]
	}
	return ends
}

// regexSplit is one regex step, run on the collapsed text when the regex
// names Unicode classes and on the codepoints themselves otherwise.
type regexSplit struct {
	re        *regexp2.Regexp
	collapsed bool
}

func mustRegex(expr string) regexSplit {
	translated, collapsed := collapseRegex(expr)
	re, err := regexp2.Compile(asciiSpace(translated), regexp2.None)
	if err != nil {
		panic(fmt.Sprintf("tokenizer: regex %q: %v", expr, err))
	}
	return regexSplit{re: re, collapsed: collapsed}
}

func (s regexSplit) split(t *splitText, pieces []int) []int {
	text := t.wideText()
	if s.collapsed {
		text = t.collapsedText()
	}
	out := make([]int, 0, len(pieces))
	start := 0
	for _, n := range pieces {
		seg := text[start : start+n]
		start += n
		prev := 0
		m, err := s.re.FindRunesMatch(seg)
		for m != nil && err == nil {
			if m.Index > prev {
				out = append(out, m.Index-prev)
			}
			if m.Length > 0 { // an empty word would give no tokens anyway
				out = append(out, m.Length)
			}
			prev = m.Index + m.Length
			m, err = s.re.FindNextMatch(m)
		}
		if prev < n {
			out = append(out, n-prev)
		}
	}
	return out
}

// The collapsed classes, as llama.cpp writes them: the stand-in plus the
// ASCII members (its table leaves '~' out of \p{S}; so do we).
var collapsedClasses = map[string]string{
	`\p{N}`:  `\u00d10-9`,
	`\p{L}`:  `\u00d2A-Za-z`,
	`\p{Lu}`: `\u00d2A-Za-z`,
	`\p{Ll}`: `\u00d2A-Za-z`,
	`\p{Lt}`: `\u00d2A-Za-z`,
	`\p{Lm}`: `\u00d2A-Za-z`,
	`\p{Lo}`: `\u00d2A-Za-z`,
	`\p{P}`:  `\u00d3\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\x5B-\x5D\x5F\x7B\x7D`,
	`\p{M}`:  `\u00d4`,
	`\p{S}`:  `\u00d5\x24\x2B\x3C-\x3E\x5E\x60\x7C`,
}

// collapseRegex rewrites \p{..} classes for the collapsed text, wrapping
// them in brackets outside a bracket expression. It reports whether the regex
// named any class (and so must run on the collapsed text).
func collapseRegex(expr string) (string, bool) {
	named := false
	for k := range collapsedClasses {
		if strings.Contains(expr, k) {
			named = true
		}
	}
	if !named {
		return expr, false
	}
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '[' && (i == 0 || expr[i-1] != '\\') {
			inside = true
			b.WriteByte(c)
			continue
		}
		if inside && c == ']' && expr[i-1] != '\\' {
			inside = false
			b.WriteByte(c)
			continue
		}
		if c == '\\' && i+3 < len(expr) && expr[i+1] == 'p' && expr[i+2] == '{' {
			if end := strings.IndexByte(expr[i+3:], '}'); end >= 0 {
				if class, ok := collapsedClasses[expr[i:i+3+end+1]]; ok {
					if !inside {
						b.WriteByte('[')
					}
					b.WriteString(class)
					if !inside {
						b.WriteByte(']')
					}
					i += 3 + end
					continue
				}
			}
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// asciiSpace gives \s and \S the meaning they have in llama.cpp's std::regex
// (the C locale: tab, newline, vertical tab, form feed, carriage return and
// space), not regexp2's Unicode one: non-ASCII whitespace has already become
// \v in the text the regexes see.
func asciiSpace(expr string) string {
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '\\' && i+1 < len(expr):
			switch expr[i+1] {
			case 's':
				if inside {
					b.WriteString(`\t\n\v\f\r `)
				} else {
					b.WriteString(`[\t\n\v\f\r ]`)
				}
			case 'S':
				if inside {
					panic("tokenizer: \\S inside a bracket expression")
				}
				b.WriteString(`[^\t\n\v\f\r ]`)
			default:
				b.WriteByte(c)
				b.WriteByte(expr[i+1])
			}
			i++
		case c == '[' && !inside:
			inside = true
			b.WriteByte(c)
		case c == ']' && inside:
			inside = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// gpt2Splitter is llama.cpp's hand-written equivalent of regexGPT2.
type gpt2Splitter struct{}

func (gpt2Splitter) split(t *splitText, pieces []int) []int { return eachWord(t, pieces, gpt2Word) }

func gpt2Word(w *window, pos int) int {
	if end := contractionEnd(w.t.cps, pos, w.hi, false); end > pos { // 's|'t|'re|'ve|'m|'ll|'d
		return w.cut(end)
	}
	spaced := w.t.cps[pos] == ' '
	f := w.t.cls[pos]
	if spaced {
		f = w.class(pos + 1)
	}
	if run := f & (cLetter | cNumber); run != 0 { // ' ?\p{L}+' or ' ?\p{N}+'
		if spaced {
			pos++
		}
		for w.class(pos).is(run) {
			pos++
		}
		return w.cut(pos)
	}
	if end := w.punctEnd(pos); end > pos { // ' ?[^\s\p{L}\p{N}]+'
		return w.cut(end)
	}
	return w.cut(w.spaceEnd(pos, false)) // '\s+(?!\S)'
}

// llama3Splitter is llama.cpp's hand-written equivalent of regexLlama3.
type llama3Splitter struct{}

func (llama3Splitter) split(t *splitText, pieces []int) []int { return eachWord(t, pieces, llama3Word) }

func llama3Word(w *window, pos int) int {
	t := w.t
	c, f := t.cps[pos], t.cls[pos]
	if end := contractionEnd(t.cps, pos, w.hi, true); end > pos { // (?i:'s|'t|'re|'ve|'m|'ll|'d)
		return w.cut(end)
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !(isNewline(c) || f.is(cNumber)) && (f.is(cLetter) || w.class(pos+1).is(cLetter)) {
		pos++
		for w.class(pos).is(cLetter) {
			pos++
		}
		return w.cut(pos)
	}
	if f.is(cNumber) { // \p{N}{1,3}
		from := pos
		for w.class(pos).is(cNumber) {
			pos++
			if pos-from >= 3 {
				w.cut(pos)
				from = pos
			}
		}
		return w.cut(pos)
	}
	if end := w.punctEnd(pos); end > pos { // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
		for end < w.hi && isNewline(t.cps[end]) {
			end++
		}
		return w.cut(end)
	}
	return w.cut(w.spaceEnd(pos, true)) // \s*[\r\n]+|\s+(?!\S)|\s+
}

// punctEnd is the end of ' ?[^\s\p{L}\p{N}]+' starting at pos, or pos
// when none starts there. (llama.cpp's Llama 3 splitter also takes a space
// that ends the piece for such a run: alone, it is the word spaceEnd cuts.)
func (w *window) punctEnd(pos int) int {
	q := pos
	if w.t.cps[q] == ' ' {
		q++
	}
	from := q
	for f := w.class(q); f != 0 && !f.is(cSpace|cLetter|cNumber); f = w.class(q) {
		q++
	}
	if q == from {
		return pos
	}
	return q
}

// spaceEnd is the end of the word at pos that no other rule took:
// whitespace, '\s+(?!\S)' (a run before a word leaves its last space to
// the word) then '\s+', and with newlines '\s*[\r\n]+' (up to the run's
// last newline) first. Anything else is a word of one codepoint, as the
// regexes leave it: a gap between matches.
func (w *window) spaceEnd(pos int, newlines bool) int {
	spaces, lastNewline := 0, 0
	for w.class(pos + spaces).is(cSpace) {
		if newlines && isNewline(w.t.cps[pos+spaces]) {
			lastNewline = pos + spaces + 1
		}
		spaces++
	}
	switch {
	case lastNewline > 0: // \s*[\r\n]+
		return lastNewline
	case spaces > 1 && pos+spaces < w.hi: // \s+(?!\S): leave the last space to the next word
		return pos + spaces - 1
	case spaces > 0: // \s+
		return pos + spaces
	default:
		return pos + 1
	}
}

func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// contractionEnd is the end of the English contraction ('s, 't, 're, 've,
// 'm, 'll or 'd; any case when fold) that starts at pos in a piece ending at
// hi, or pos when none starts there.
func contractionEnd(cps []rune, pos, hi int, fold bool) int {
	if cps[pos] != '\'' || pos+1 >= hi {
		return pos
	}
	lower := func(r rune) rune {
		if fold {
			return unicode.ToLower(r)
		}
		return r
	}
	next := lower(cps[pos+1])
	if next == 's' || next == 't' || next == 'm' || next == 'd' {
		return pos + 2
	}
	if pos+2 < hi {
		nn := lower(cps[pos+2])
		if next == 'r' && nn == 'e' || next == 'v' && nn == 'e' || next == 'l' && nn == 'l' {
			return pos + 3
		}
	}
	return pos
}

// eachWord runs a hand-written splitter's word function through every piece:
// word(w, pos) cuts the word that starts at pos and returns where it ends.
func eachWord(t *splitText, pieces []int, word func(w *window, pos int) int) []int {
	out := make([]int, 0, len(pieces))
	start := 0
	for _, n := range pieces {
		w := window{t, start, start + n, start, &out}
		start += n
		for pos := w.lo; pos < w.hi; {
			pos = word(&w, pos)
		}
	}
	return out
}

// window is the piece a hand-written splitter is working through.
type window struct {
	t      *splitText
	lo, hi int
	prev   int // where the current word starts
	out    *[]int
}

// class is the class at pos, or 0 outside the piece.
func (w *window) class(pos int) cpClass {
	if pos >= w.lo && pos < w.hi {
		return w.t.cls[pos]
	}
	return 0
}

// cut ends the current word at end and returns end.
func (w *window) cut(end int) int {
	if end > w.prev {
		*w.out = append(*w.out, end-w.prev)
	}
	w.prev = end
	return end
}

// runSplitter is a hand-written equivalent of a regex of the form
// `\s?[set]+`, `[set]+` or `[set]` over the codepoints (run on the same text
// the regex would see), which regexp2 runs an order of magnitude slower.
type runSplitter struct {
	ascii     [128]bool   // the set's ASCII members
	set       []runeRange // the rest, sorted and disjoint
	leadSpace bool        // \s? before the run
	many      bool        // + after the set
}

type runeRange struct{ lo, hi rune }

// classRun parses such a regex. The bracket expression may hold only
// characters and ranges of them.
func classRun(expr string) *runSplitter {
	s := &runSplitter{}
	rest := expr
	if strings.HasPrefix(rest, `\s?`) {
		s.leadSpace, rest = true, rest[3:]
	}
	if strings.HasSuffix(rest, "+") {
		s.many, rest = true, rest[:len(rest)-1]
	}
	if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		panic(fmt.Sprintf("tokenizer: %q is not a run of a bracket expression", expr))
	}
	rs := []rune(rest[1 : len(rest)-1])
	for i := 0; i < len(rs); i++ {
		if rs[i] == '\\' || rs[i] == '[' || rs[i] == '^' && i == 0 {
			panic(fmt.Sprintf("tokenizer: %q: escapes and negation are not handled", expr))
		}
		r := runeRange{rs[i], rs[i]}
		if i+2 < len(rs) && rs[i+1] == '-' {
			r.hi = rs[i+2]
			i += 2
		}
		for ; r.lo <= r.hi && r.lo < 128; r.lo++ {
			s.ascii[r.lo] = true
		}
		if r.lo <= r.hi {
			s.set = append(s.set, r)
		}
	}
	slices.SortFunc(s.set, func(a, b runeRange) int { return cmp.Compare(a.lo, b.lo) })
	merged := s.set[:0]
	for _, r := range s.set {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	s.set = merged
	return s
}

func (s *runSplitter) in(r rune) bool {
	if r < 128 {
		return r >= 0 && s.ascii[r]
	}
	_, found := slices.BinarySearchFunc(s.set, r, func(x runeRange, r rune) int {
		switch {
		case x.hi < r:
			return -1
		case x.lo > r:
			return 1
		}
		return 0
	})
	return found
}

// isRegexSpace is \s as llama.cpp's std::regex has it.
func isRegexSpace(r rune) bool { return r == ' ' || r >= '\t' && r <= '\r' }

func (s *runSplitter) split(t *splitText, pieces []int) []int {
	text := t.wideText()
	return cutRuns(pieces, func(p, hi int) int {
		var q int
		switch {
		case s.leadSpace && isRegexSpace(text[p]) && p+1 < hi && s.in(text[p+1]):
			q = p + 2
		case s.in(text[p]):
			q = p + 1
		default:
			return p
		}
		for s.many && q < hi && s.in(text[q]) {
			q++
		}
		return q
	})
}

// cutRuns refines each piece into the runs that runEnd finds and the gaps
// between them, as a regex that matches runs splits a text. runEnd(p, hi)
// is the end of the run that starts at p in a piece ending at hi, or p when
// none starts there.
func cutRuns(pieces []int, runEnd func(p, hi int) int) []int {
	out := make([]int, 0, len(pieces))
	start := 0
	for _, n := range pieces {
		lo, hi := start, start+n
		start = hi
		prev := lo
		for p := lo; p < hi; {
			q := runEnd(p, hi)
			if q == p {
				p++
				continue
			}
			if p > prev {
				out = append(out, p-prev)
			}
			out = append(out, q-p)
			prev, p = q, q
		}
		if prev < hi {
			out = append(out, hi-prev)
		}
	}
	return out
}

// trailingSpace is `\s+$`: the whitespace that ends a piece.
type trailingSpace struct{}

func (trailingSpace) split(t *splitText, pieces []int) []int {
	text := t.wideText()
	out := make([]int, 0, len(pieces))
	start := 0
	for _, n := range pieces {
		lo, hi := start, start+n
		start = hi
		q := hi
		for q > lo && isRegexSpace(text[q-1]) {
			q--
		}
		if q > lo {
			out = append(out, q-lo)
		}
		if q < hi {
			out = append(out, hi-q)
		}
	}
	return out
}

// numberRun is `\p{N}+` on the collapsed text: a run of numbers.
type numberRun struct{}

func (numberRun) split(t *splitText, pieces []int) []int {
	return cutRuns(pieces, func(p, hi int) int {
		q := p
		for q < hi && t.cls[q].is(cNumber) {
			q++
		}
		return q
	})
}

package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// words splits s with the named pre-tokenizer.
func words(t testing.TB, name, s string) []string {
	t.Helper()
	p, ok := preTokenizers[name]
	if !ok {
		t.Fatalf("no pre-tokenizer %q", name)
	}
	var out []string
	prev := 0
	for _, end := range p.split(s) {
		out = append(out, s[prev:end])
		prev = end
	}
	return out
}

// TestPreTokenizerSplits pins each pre-tokenizer's behaviour on the
// constructs that tell them apart, as llama.cpp (and, where it agrees, the
// Hugging Face tokenizer) splits them.
func TestPreTokenizerSplits(t *testing.T) {
	for _, tc := range []struct {
		pre, text string
		want      []string
	}{
		// Digits: runs for GPT-2 and DeepSeek LLM, groups of three for Llama 3,
		// GLM-4 and DeepSeek V3, single digits for Qwen2 and Youtu.
		{"gpt2", "x 1234567", []string{"x", " 1234567"}},
		{"deepseek-llm", "x 1234567", []string{"x", " ", "1234567"}},
		{"llama3", "x 1234567", []string{"x", " ", "123", "456", "7"}},
		{"glm4", "x 1234567", []string{"x", " ", "123", "456", "7"}},
		{"deepseek-v3", "x 1234567", []string{"x", " ", "123", "456", "7"}},
		{"qwen2", "x 1234", []string{"x", " ", "1", "2", "3", "4"}},
		{"youtu", "x 1234", []string{"x", " ", "1", "2", "3", "4"}},
		{"default", "x 12345", []string{"x", " ", "123", "45"}},

		// Contractions: GPT-2 only lower case; Llama 3 any case; DeepSeek LLM
		// splits the apostrophe off; Youtu keeps them on the word.
		{"gpt2", "it's IT'S", []string{"it", "'s", " IT", "'", "S"}},
		{"llama3", "it's IT'S", []string{"it", "'s", " IT", "'S"}},
		{"deepseek-llm", "it's", []string{"it", "'", "s"}},
		{"youtu", "it's we'RE", []string{"it's", " we'RE"}},

		// Punctuation before a letter: Llama 3, Qwen2 and DeepSeek V3 attach it
		// to the word; GPT-2 and DeepSeek LLM do not.
		{"llama3", "fmt.Println(x)", []string{"fmt", ".Println", "(x", ")"}},
		{"qwen2", "fmt.Println(x)", []string{"fmt", ".Println", "(x", ")"}},
		{"deepseek-v3", "fmt.Println(x)", []string{"fmt", ".Println", "(x", ")"}},
		{"gpt2", "fmt.Println(x)", []string{"fmt", ".", "Println", "(", "x", ")"}},
		{"deepseek-llm", "fmt.Println(x)", []string{"fmt", ".", "Println", "(", "x", ")"}},
		{"youtu", "path/to/x", []string{"path", "/to", "/x"}},

		// Whitespace: a run before a word leaves its last space to the word;
		// newlines end a run (\s*[\r\n]+) except in GPT-2; DeepSeek LLM cuts
		// every newline on its own.
		{"gpt2", "a\n\n  b", []string{"a", "\n\n ", " b"}},
		{"llama3", "a\n\n  b  \r\n c   ", []string{"a", "\n\n", " ", " b", "  \r\n", " c", "   "}},
		{"deepseek-llm", "a\n\n  b  \r\n c", []string{"a", "\n", "\n", " ", " b", "  ", "\r", "\n", " c"}},
		{"youtu", "a\n\n  b", []string{"a", "\n\n", " ", " b"}},

		// CJK: DeepSeek LLM, DeepSeek V3 and Youtu cut CJK runs out first, so
		// full-width punctuation and the space before a run stand alone.
		{"deepseek-llm", "中文测试，你好 ひらがな", []string{"中文测试", "，", "你好", " ", "ひらがな"}},
		{"deepseek-v3", "中文测试，你好 ひらがな", []string{"中文测试", "，", "你好", " ", "ひらがな"}},
		{"youtu", "中文，你好 한국어 ㄅㄆ …！", []string{"中文", "，", "你好", " ", "한국어", " ", "ㄅㄆ", " ", "…！"}},
		{"llama3", "中文测试，你好 ひらがな", []string{"中文测试", "，你好", " ひらがな"}},
		{"gpt2", "中文测试，你好", []string{"中文测试", "，", "你好"}},

		// DeepSeek V3: ASCII punctuation and symbols join the letters after them.
		{"deepseek-v3", " $x+y~z", []string{" $", "x", "+y", "~z"}},

		// Non-ASCII whitespace is whitespace to \s, and (being neither letter
		// nor digit) may lead a word.
		{"llama3", "x\u00a0y \u3000z", []string{"x", "\u00a0y", " ", "\u3000z"}},
		{"gpt2", "x\u00a0y", []string{"x", "\u00a0", "y"}},

		// llama.cpp's collapsed classes cannot tell upper from lower case, so
		// Youtu's case-aware rule does not split camel case (Hugging Face would).
		{"youtu", "HelloWorld", []string{"HelloWorld"}},

		// The default splits symbols and punctuation off first.
		{"default", "Hello, world! $x", []string{"Hello", ",", " world", "!", " ", "$", "x"}},
	} {
		if got := words(t, tc.pre, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s %q:\n got %q\nwant %q", tc.pre, tc.text, got, tc.want)
		}
	}
}

// randomText draws from characters of every class the splitters look at.
func randomText(r *rand.Rand, n int) string {
	alphabet := []string{
		"a", "b", "Z", "s", "t", "d", "m", "l", "e", "r", "v", "S", "T", "L", "E", "'", "'", "1", "2", "0",
		" ", " ", " ", "\n", "\r", "\t", "\v", ".", ",", "!", "(", ")", "$", "+", "~", "/", "_", "-",
		"é", "ß", "Ω", "中", "文", "ひ", "カ", "한", "ㄅ", "，", "…", "！", "\u00a0", "\u3000", "\u2028",
		"\u0301", "٣", "½", "😀", "\u200b", "\x00", "\x1f", "\ufffd", "\U000e0001", "\U0010ffff",
		"\u1f7d", "\u2126", "\u212a", "\uff0c", "\u201c", "\uac00", "\u0800", "\U00010400", "\u00b5", "\u3001",
	}
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// TestHandWrittenSplittersMatchRegex checks that the hand-written splitters
// (GPT-2's and Llama 3's, which llama.cpp uses in place of the regexes, and
// ours for DeepSeek LLM's) split as the regexes do, run the way llama.cpp
// runs its other regexes.
func TestHandWrittenSplittersMatchRegex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name  string
		hand  splitter
		regex string
	}{
		{"gpt2", gpt2Splitter{}, regexGPT2},
		{"llama3", llama3Splitter{}, regexLlama3},
		{"deepseek newline", classRun(regexDeepSeekNewline), regexDeepSeekNewline},
		{"deepseek letters", classRun(regexDeepSeekLetters), regexDeepSeekLetters},
		{"deepseek punctuation", classRun(regexDeepSeekPunct), regexDeepSeekPunct},
		{"deepseek trailing space", trailingSpace{}, `\s+$`},
		{"deepseek CJK", classRun(regexDeepSeekCJK), regexDeepSeekCJK},
		{"deepseek numbers", numberRun{}, `\p{N}+`},
	} {
		re := mustRegex(tc.regex)
		for i := range 3000 {
			s := randomText(r, 1+i%40)
			cps, _ := codepoints(s)
			// The whole text, and the text already cut in random places.
			for _, pieces := range [][]int{{len(cps)}, randomPieces(r, len(cps))} {
				splitsAsRegex(t, tc.name, tc.hand, re, cps, pieces)
			}
		}
	}
}

// splitsAsRegex fails t unless hand splits cps, already cut into pieces,
// where re does.
func splitsAsRegex(t *testing.T, name string, hand splitter, re regexSplit, cps []rune, pieces []int) {
	t.Helper()
	got := hand.split(newSplitText(cps), pieces)
	want := re.split(newSplitText(cps), pieces)
	if !slices.Equal(got, want) {
		t.Fatalf("%s %q %v: hand-written %v, regex %v", name, string(cps), pieces, got, want)
	}
}

// randomPieces cuts n codepoints into random pieces.
func randomPieces(r *rand.Rand, n int) []int {
	var out []int
	for n > 0 {
		k := 1 + r.IntN(n)
		out = append(out, k)
		n -= k
	}
	return out
}

// TestSplitCoversText checks that every pre-tokenizer's words put together
// are the text, on random input including invalid UTF-8.
func TestSplitCoversText(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	names := []string{"gpt2", "llama3", "glm4", "qwen2", "deepseek-llm", "deepseek-v3", "youtu", "default"}
	for i := range 500 {
		s := randomText(r, 1+i%60)
		if i%5 == 0 {
			s += "\xff\xc3" + s[:len(s)/2]
		}
		for _, name := range names {
			ws := words(t, name, s)
			if strings.Join(ws, "") != s {
				t.Fatalf("%s %q: words %q do not make up the text", name, s, ws)
			}
			for _, w := range ws {
				if w == "" {
					t.Fatalf("%s %q: empty word", name, s)
				}
			}
		}
	}
}

// FuzzHandWrittenSplitters checks the GPT-2 and Llama 3 splitters against
// their regexes on any text, whole and cut in two.
func FuzzHandWrittenSplitters(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 20 {
		f.Add(randomText(r, 1+i*3), uint(i))
	}
	f.Add("a  \r\n b ! \n", uint(3))
	hands := []struct {
		name string
		hand splitter
		re   regexSplit
	}{
		{"gpt2", gpt2Splitter{}, mustRegex(regexGPT2)},
		{"llama3", llama3Splitter{}, mustRegex(regexLlama3)},
	}
	f.Fuzz(func(t *testing.T, s string, cut uint) {
		cps, _ := codepoints(s)
		if len(cps) == 0 {
			return
		}
		k := 1 + int(cut%uint(len(cps)))
		for _, pieces := range [][]int{{len(cps)}, {k, len(cps) - k}} {
			if pieces[len(pieces)-1] == 0 {
				pieces = pieces[:1]
			}
			for _, h := range hands {
				splitsAsRegex(t, h.name, h.hand, h.re, cps, pieces)
			}
		}
	})
}

package chat

import (
	"strings"
	"testing"
)

func TestSplitReasoning(t *testing.T) {
	tests := []struct {
		name, prompt, output string
		reasoning, answer    string
	}{
		{"no block", "<|assistant|>", "Hello there.", "", "Hello there."},
		{"no block keeps leading space", "", "  Hi", "", "  Hi"},
		{"block at start", "", "<think>\nLet me see.\n</think>\n\nIt is 4.", "Let me see.", "It is 4."},
		{"block after whitespace", "", "\n<think>a</think>b", "a", "b"},
		{"opened by the prompt (GLM-4.7)", "<|user|>hi<|assistant|><think>", "Think hard.</think>Answer.", "Think hard.", "Answer."},
		{"opened by the prompt with newline", "<｜Assistant｜><think>\n", "\nhmm\n</think>\n\nok", "hmm", "ok"},
		{"closed by the prompt (thinking off)", "<|assistant|></think>", "Answer.", "", "Answer."},
		{"Qwen3 thinking off", "<|im_start|>assistant\n<think>\n\n</think>\n\n", "Answer.", "", "Answer."},
		{"think in an older turn", "<think>old</think>answer<|user|>x<|assistant|>", "<think>new</think>reply", "new", "reply"},
		{"user text ending in an open tag is not a block", "say <think> please<|assistant|>", "ok <think> x", "", "ok <think> x"},
		{"tag later in the answer is text", "", "a <think>b</think>", "", "a <think>b</think>"},
		{"unclosed block stays reasoning", "", "<think>still going", "still going", ""},
		{"empty block", "", "<think></think>done", "", "done"},
		{"near-tags inside reasoning", "", "<think>a </thin b</th</think>c", "a </thin b</th", "c"},
		{"second block is answer text", "", "<think>a</think>b<think>c</think>", "a", "b<think>c</think>"},
		{"only whitespace", "", " \n ", "", ""},
		{"partial open tag at the end", "", "<thi", "", "<thi"},
		{"multibyte text", "", "<think>思考</think>答え", "思考", "答え"},
		{"inner whitespace kept", "", "<think>a\n\nb</think>c  d\n", "a\n\nb", "c  d\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, a := SplitReasoning(tc.prompt, tc.output)
			if r != tc.reasoning || a != tc.answer {
				t.Fatalf("whole: got (%q, %q), want (%q, %q)", r, a, tc.reasoning, tc.answer)
			}
			// Every way of cutting the output into three pieces, tags split included, gives the same.
			for i := 0; i <= len(tc.output); i++ {
				for j := i; j <= len(tc.output); j++ {
					s := NewReasoningSplitter(tc.prompt)
					var rb, ab strings.Builder
					for _, piece := range []string{tc.output[:i], tc.output[i:j], tc.output[j:]} {
						r, a := s.Add(piece)
						rb.WriteString(r)
						ab.WriteString(a)
					}
					r, a := s.Flush()
					rb.WriteString(r)
					ab.WriteString(a)
					if rb.String() != tc.reasoning || ab.String() != tc.answer {
						t.Fatalf("cut at %d,%d: got (%q, %q), want (%q, %q)", i, j, rb.String(), ab.String(), tc.reasoning, tc.answer)
					}
				}
			}
		})
	}
}

func TestReasoningSplitterStreams(t *testing.T) {
	// Reasoning flows out as it comes, holding back only what could begin the closing tag.
	s := NewReasoningSplitter("<think>")
	if !s.Thinking() {
		t.Fatal("a prompt ending in <think> starts inside the block")
	}
	steps := []struct{ in, r, a string }{
		{"Let", "Let", ""},
		{" me think", " me think", ""},
		{" </", "", ""},
		{"x", " </x", ""},
		{"</th", "", ""},
		{"ink>", "", ""},
		{"\n\nThe ", "", "The "},
		{"answer", "", "answer"},
	}
	for i, st := range steps {
		r, a := s.Add(st.in)
		if r != st.r || a != st.a {
			t.Fatalf("step %d: Add(%q) = (%q, %q), want (%q, %q)", i, st.in, r, a, st.r, st.a)
		}
	}
	if s.Thinking() {
		t.Error("still thinking after </think>")
	}
	if r, a := s.Flush(); r != "" || a != "" {
		t.Errorf("Flush = (%q, %q), want nothing", r, a)
	}
}

func FuzzReasoningSplitter(f *testing.F) {
	f.Add("<think>", "a</think>b", 3)
	f.Add("", "<think>x</think> y", 5)
	f.Add("", "plain", 1)
	f.Fuzz(func(t *testing.T, prompt, output string, cut int) {
		r, a := SplitReasoning(prompt, output)
		if cut < 0 {
			cut = -cut
		}
		if len(output) > 0 {
			cut %= len(output) + 1
		} else {
			cut = 0
		}
		s := NewReasoningSplitter(prompt)
		r1, a1 := s.Add(output[:cut])
		r2, a2 := s.Add(output[cut:])
		r3, a3 := s.Flush()
		if r1+r2+r3 != r || a1+a2+a3 != a {
			t.Fatalf("split at %d differs: (%q, %q) vs (%q, %q)", cut, r1+r2+r3, a1+a2+a3, r, a)
		}
		// Nothing is invented: both parts come from the output.
		if !strings.Contains(output, a) && a != "" {
			t.Fatalf("answer %q is not part of the output %q", a, output)
		}
		if len(r)+len(a) > len(output) {
			t.Fatalf("parts longer than the output")
		}
	})
}

// PartialSuffix holds back the longest tail that could begin the tag, never the whole tag.
func TestPartialSuffix(t *testing.T) {
	for _, tc := range []struct {
		s, tag string
		want   int
	}{
		{"abc</thi", ThinkClose, 5},
		{"abc<", ThinkClose, 1},
		{"abc", ThinkClose, 0},
		{"</think>", ThinkClose, 0},
		{"", ThinkClose, 0},
		{"xx", "", 0},
		{"aab", "aaba", 3},
		{"ab", "aaba", 0},
	} {
		if got := PartialSuffix(tc.s, tc.tag); got != tc.want {
			t.Errorf("PartialSuffix(%q, %q) = %d, want %d", tc.s, tc.tag, got, tc.want)
		}
	}
}

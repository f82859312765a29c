package chat

import (
	"strings"
	"unicode"
)

// The tags thinking models (DeepSeek-R1 and V3.1, GLM-4.5 and later, Qwen3) put around their reasoning.
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// ReasoningSplitter separates a streamed answer into its reasoning (the text inside <think>…</think>) and the
// answer proper, as text arrives in pieces: a tag split across pieces is recognised, and text that could be
// the start of a tag is held back until the next piece decides it.
//
// The reasoning block is recognised where thinking models put it: at the very start of the output (leading
// whitespace allowed), or already open because the prompt ends inside it, as the templates of GLM-4.7 and
// DeepSeek-V3.1 do when thinking is on (their generation prompt ends with "<think>"). Whitespace between the
// tags and the text is dropped. A <think> anywhere else is ordinary text.
type ReasoningSplitter struct {
	state   splitState
	pending string // text held back: possibly the start of a tag, or leading whitespace
}

type splitState int

const (
	atStart     splitState = iota // nothing but whitespace so far: a <think> may still open
	inReasoning                   // inside the block, before any reasoning text
	reasoning                     // inside the block
	afterClose                    // the block closed, before any answer text
	answering                     // answer text: no more tags
)

// NewReasoningSplitter starts a splitter for the output that follows prompt: inside the reasoning block when
// the prompt ends with an open <think> (followed by nothing but whitespace), else at the start of the output.
func NewReasoningSplitter(prompt string) *ReasoningSplitter {
	s := &ReasoningSplitter{}
	if OpensReasoning(prompt) {
		s.state = inReasoning
	}
	return s
}

// OpensReasoning reports whether prompt ends with an open reasoning block (followed by nothing but
// whitespace): the output starts inside it.
func OpensReasoning(prompt string) bool { return endsWithTag(prompt, ThinkOpen) }

// ClosesReasoning reports whether prompt ends with a closed reasoning block (followed by nothing but
// whitespace): how a thinking template turns thinking off, so that the answer comes without one.
func ClosesReasoning(prompt string) bool { return endsWithTag(prompt, ThinkClose) }

func endsWithTag(prompt, tag string) bool {
	return strings.HasSuffix(strings.TrimRightFunc(prompt, unicode.IsSpace), tag)
}

// Thinking reports whether the output is inside the reasoning block.
func (s *ReasoningSplitter) Thinking() bool {
	return s.state == inReasoning || s.state == reasoning
}

// Add takes the next piece of output and returns the reasoning and answer text it completes.
func (s *ReasoningSplitter) Add(text string) (reasoningText, answer string) {
	s.pending += text
	var r, a strings.Builder
	for s.pending != "" {
		switch s.state {
		case atStart:
			rest := strings.TrimLeftFunc(s.pending, unicode.IsSpace)
			switch {
			case rest == "":
				return r.String(), a.String() // only whitespace: it may come before a tag
			case strings.HasPrefix(rest, ThinkOpen):
				s.pending, s.state = rest[len(ThinkOpen):], inReasoning
			case strings.HasPrefix(ThinkOpen, rest):
				return r.String(), a.String() // a tag's beginning: wait for more
			default:
				s.state = answering // keep the whitespace: there was no block
			}
		case inReasoning, afterClose:
			rest := strings.TrimLeftFunc(s.pending, unicode.IsSpace)
			if rest == "" {
				s.pending = ""
				return r.String(), a.String()
			}
			s.pending = rest
			if s.state == inReasoning {
				s.state = reasoning
			} else {
				s.state = answering
			}
		case reasoning:
			if i := strings.Index(s.pending, ThinkClose); i >= 0 {
				r.WriteString(strings.TrimRightFunc(s.pending[:i], unicode.IsSpace))
				s.pending, s.state = s.pending[i+len(ThinkClose):], afterClose
				continue
			}
			// Hold back a tail that could begin </think>, and trailing whitespace, which is dropped if
			// the tag follows it.
			keep := PartialSuffix(s.pending, ThinkClose)
			body := s.pending[:len(s.pending)-keep]
			ws := len(body) - len(strings.TrimRightFunc(body, unicode.IsSpace))
			r.WriteString(body[:len(body)-ws])
			s.pending = s.pending[len(body)-ws:]
			return r.String(), a.String()
		case answering:
			a.WriteString(s.pending)
			s.pending = ""
		}
	}
	return r.String(), a.String()
}

// Flush returns the text still held back, at the end of the output. An unclosed reasoning block stays
// reasoning.
func (s *ReasoningSplitter) Flush() (reasoningText, answer string) {
	p := s.pending
	s.pending = ""
	switch s.state {
	case reasoning:
		return strings.TrimRightFunc(p, unicode.IsSpace), ""
	case atStart:
		if strings.TrimSpace(p) == "" {
			return "", ""
		}
		s.state = answering
		return "", p
	case answering:
		return "", p
	}
	return "", "" // inReasoning, afterClose: only whitespace is held
}

// SplitReasoning splits a whole output, generated after prompt, into reasoning and answer.
func SplitReasoning(prompt, output string) (reasoningText, answer string) {
	s := NewReasoningSplitter(prompt)
	r, a := s.Add(output)
	fr, fa := s.Flush()
	return r + fr, a + fa
}

// PartialSuffix is the length of the longest tail of s that tag begins with (shorter than tag):
// streamed text to hold back until the next piece says whether tag follows.
func PartialSuffix(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

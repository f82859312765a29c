package main

import (
	"io"
	"strings"
)

// ANSI select graphic rendition codes.
const (
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
	eraseLine = "\r\x1b[K"
)

// replyPrinter writes a streamed reply: reasoning dimmed on a terminal, set
// between <think> tags elsewhere, or left out (hide); then the answer.
type replyPrinter struct {
	w     io.Writer
	color bool // a terminal: ANSI codes allowed
	hide  bool

	state   printState
	lastNL  bool // the last byte written was a newline
	written bool
}

type printState int

const (
	printNothing   printState = iota
	printReasoning            // inside shown reasoning (dim on, or after <think>)
	printHidden               // reasoning hidden; on a terminal "thinking..." is shown
	printAnswer
)

// thinkingNote stands in for hidden reasoning on a terminal until the answer
// starts, so that a long silence is explained.
const thinkingNote = "thinking..."

func (p *replyPrinter) write(s string) error {
	if s == "" {
		return nil
	}
	p.written = true
	p.lastNL = strings.HasSuffix(s, "\n")
	_, err := io.WriteString(p.w, s)
	return err
}

// print writes the next reasoning and answer text.
func (p *replyPrinter) print(reasoning, answer string) error {
	if p.color {
		reasoning, answer = sanitize(reasoning), sanitize(answer)
	}
	if reasoning != "" {
		switch {
		case p.state == printNothing && p.hide:
			p.state = printHidden
			if p.color {
				if err := p.write(ansiDim + thinkingNote + ansiReset); err != nil {
					return err
				}
			}
		case p.state == printNothing:
			p.state = printReasoning
			open := "<think>\n"
			if p.color {
				open = ansiDim
			}
			if err := p.write(open); err != nil {
				return err
			}
		}
		if p.state == printReasoning {
			if err := p.write(reasoning); err != nil {
				return err
			}
		}
	}
	if answer == "" {
		return nil
	}
	if err := p.endReasoning("\n\n"); err != nil {
		return err
	}
	p.state = printAnswer
	return p.write(answer)
}

// endReasoning closes shown reasoning, then writes sep (which sets the
// answer apart from it).
func (p *replyPrinter) endReasoning(sep string) error {
	switch p.state {
	case printReasoning:
		if p.color {
			return p.write(ansiReset + sep)
		}
		return p.write("\n</think>" + sep)
	case printHidden:
		if p.color {
			err := p.write(eraseLine)
			p.lastNL = true // back at the start of an empty line
			return err
		}
	}
	return nil
}

// stoppedThinking replaces "thinking..." when the reply ends before its
// answer, so that hidden reasoning does not look like an empty answer.
const stoppedThinking = "(stopped while thinking)"

// end finishes the reply: reasoning cut short is closed, and the line ends.
func (p *replyPrinter) end() error {
	if p.state == printHidden && p.color {
		p.state = printAnswer
		return p.write(eraseLine + ansiDim + stoppedThinking + ansiReset + "\n")
	}
	if p.state != printAnswer {
		if err := p.endReasoning("\n"); err != nil {
			return err
		}
		p.state = printAnswer
	}
	if p.written && !p.lastNL {
		return p.write("\n")
	}
	return nil
}

// sanitize replaces the control characters of model output, other than tab
// and newline, with U+FFFD before they reach a terminal: a model must not
// move the cursor, clear the screen or send escape sequences.
func sanitize(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r < 0xa0)
}

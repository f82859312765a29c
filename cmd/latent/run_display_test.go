package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReplyPrinter(t *testing.T) {
	type piece struct{ reasoning, answer string }
	think := []piece{{"Let me", ""}, {" think.", ""}, {"", "Hi"}, {"", " there."}}
	tests := []struct {
		name        string
		color, hide bool
		pieces      []piece
		want        string
	}{
		{"plain answer", false, false, []piece{{"", "Hi"}, {"", " there."}}, "Hi there.\n"},
		{"answer ending in a newline", false, false, []piece{{"", "Hi\n"}}, "Hi\n"},
		{"nothing", false, false, nil, ""},
		{"reasoning between tags", false, false, think, "<think>\nLet me think.\n</think>\n\nHi there.\n"},
		{"reasoning dimmed", true, false, think, "\x1b[2mLet me think.\x1b[0m\n\nHi there.\n"},
		{"reasoning hidden", false, true, think, "Hi there.\n"},
		{"reasoning hidden on a terminal", true, true, think, "\x1b[2mthinking...\x1b[0m\r\x1b[KHi there.\n"},
		{"reasoning cut short", false, false, think[:2], "<think>\nLet me think.\n</think>\n"},
		{"reasoning cut short, dimmed", true, false, think[:2], "\x1b[2mLet me think.\x1b[0m\n"},
		{"reasoning cut short, hidden", true, true, think[:2], "\x1b[2mthinking...\x1b[0m\r\x1b[K\x1b[2m(stopped while thinking)\x1b[0m\n"},
		{"reasoning and answer in one piece", false, false, []piece{{"Hm.", "Yes."}}, "<think>\nHm.\n</think>\n\nYes.\n"},
		// A terminal gets no control characters from the model; a pipe gets its bytes.
		{"control characters on a terminal", true, false, []piece{{"a\x1b[2J\r", "\tb\x0b\n\u0085é"}}, "\x1b[2ma\uFFFD[2J\uFFFD\x1b[0m\n\n\tb\uFFFD\n\uFFFDé\n"},
		{"control characters elsewhere", false, false, []piece{{"", "\tb\x0b\x1b\n"}}, "\tb\x0b\x1b\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			p := &replyPrinter{w: &b, color: tc.color, hide: tc.hide}
			for _, x := range tc.pieces {
				if err := p.print(x.reasoning, x.answer); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.end(); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("printed %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func TestCtrlCKeys(t *testing.T) {
	for _, in := range []string{"ab\x03cd\x03", "\x03"} {
		want := strings.ReplaceAll(in, "\x03", string(ctrlC)+"\r")
		// One byte at a time from the terminal, and small reads by x/term.
		k := &ctrlCKeys{r: iotest.OneByteReader(strings.NewReader(in))}
		var got bytes.Buffer
		buf := make([]byte, 2)
		for {
			n, err := k.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if got.String() != want {
			t.Errorf("%q read as %q, want %q", in, got.String(), want)
		}
	}
}

func TestHistory(t *testing.T) {
	var h history
	for _, l := range []string{"a", "", "b", "b", "c"} {
		h.Add(l)
	}
	if h.Len() != 3 || h.At(0) != "c" || h.At(1) != "b" || h.At(2) != "a" {
		t.Errorf("history %q", h.lines)
	}
	for i := range historyMax + 5 {
		h.Add(strings.Repeat("x", i+1))
	}
	if h.Len() != historyMax || h.At(0) != strings.Repeat("x", historyMax+5) {
		t.Errorf("history holds %d lines, newest %d bytes", h.Len(), len(h.At(0)))
	}
}

// Keys x/term does not know reach it as the ones it does, or not at all.
func TestTerminalKeys(t *testing.T) {
	for in, want := range map[string]string{
		"ab\x1b[1~c\x1b[4~":    "ab\x1b[Hc\x1b[F",      // Home, End (tmux, screen)
		"\x1bOH\x1bOF\x1bOA":   "\x1b[H\x1b[F\x1b[A",   // application mode
		"x\x1b[1;5Dy\x1b[1;5C": "x\x1b[1;3Dy\x1b[1;3C", // Ctrl-Left/Right: word moves
		"hello\x1bOP\x1bOS":    "hello",                // F1, F4
		"\x1b[A\x1b[3~":        "\x1b[A\x1b[3~",        // known ones pass
	} {
		k := &ctrlCKeys{r: strings.NewReader(in)}
		got, err := io.ReadAll(k)
		if err != nil || string(got) != want {
			t.Errorf("%q read as %q, %v; want %q", in, got, err, want)
		}
	}
}

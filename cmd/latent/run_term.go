package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// errInterrupt is what reading a line returns when the user presses Ctrl-C.
var errInterrupt = errors.New("Ctrl-C at the prompt")

// lineReader reads the user's input in the chat.
type lineReader interface {
	// ReadLine shows prompt and returns the line typed. pasted reports a
	// line that arrived inside a bracketed paste, with more to follow;
	// errInterrupt means Ctrl-C (line is then the text it discarded), io.EOF
	// Ctrl-D on an empty line or the end of the input.
	ReadLine(prompt string) (line string, pasted bool, err error)
}

// termReader edits lines on a terminal with golang.org/x/term (history,
// cursor keys, bracketed paste). The terminal is in raw mode only while a
// line is read, so that Ctrl-C during an answer is an ordinary SIGINT.
type termReader struct {
	in   *os.File
	size int // the file descriptor whose terminal size wraps the line
	t    *term.Terminal
	keys *ctrlCKeys
}

// ctrlC is the key that ctrlCKeys turns Ctrl-C into: a private-use rune,
// which x/term passes to its completion callback (it ends ReadLine on a raw
// Ctrl-C with io.EOF, the same as Ctrl-D, and keeps the half-typed line).
const ctrlC = '\uE003'

func newTermReader(in *os.File, out io.Writer) *termReader {
	keys := &ctrlCKeys{r: in}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{keys, out}, "")
	t.History = &history{}
	// Ctrl-C clears the line and Enter (queued after it) ends it: ReadLine
	// returns "" and the flag tells it from an empty line.
	t.AutoCompleteCallback = func(line string, pos int, key rune) (string, int, bool) {
		if key != ctrlC {
			return "", 0, false
		}
		keys.interrupted, keys.discarded = true, line
		return "", 0, true
	}
	r := &termReader{in: in, size: int(in.Fd()), t: t, keys: keys}
	if f, ok := terminalFile(out); ok {
		r.size = int(f.Fd())
	}
	return r
}

// Quiet turns the terminal's echo off until restore (noEcho).
func (r *termReader) Quiet() (restore func()) { return noEcho(int(r.in.Fd())) }

func (r *termReader) ReadLine(prompt string) (string, bool, error) {
	fd := int(r.in.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		return "", false, fmt.Errorf("terminal: %w", err)
	}
	defer term.Restore(fd, state)
	fit := func() {
		if w, h, err := term.GetSize(r.size); err == nil {
			r.t.SetSize(w, h)
		}
	}
	fit()
	// A resize while the line is edited reflows it (x/term redraws).
	resized, stopResizes := resizes()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-resized:
				fit()
			case <-done:
				return
			}
		}
	}()
	defer func() { stopResizes(); close(done) }()
	r.t.SetPrompt(prompt)
	r.t.SetBracketedPasteMode(true)
	defer r.t.SetBracketedPasteMode(false)
	r.keys.interrupted = false
	line, err := r.t.ReadLine()
	switch {
	case r.keys.interrupted:
		return r.keys.discarded, false, errInterrupt
	case errors.Is(err, term.ErrPasteIndicator):
		return line, true, nil
	}
	return line, false, err
}

// ctrlCKeys reads the terminal's keys, replacing each Ctrl-C with ctrlC
// and Enter, and the key sequences x/term does not know with the ones it
// does (keyMap).
type ctrlCKeys struct {
	r           io.Reader
	pending     []byte
	interrupted bool   // Ctrl-C was pressed
	discarded   string // the line it cleared
}

func (k *ctrlCKeys) Read(p []byte) (int, error) {
	if len(k.pending) == 0 {
		buf := make([]byte, len(p))
		n, err := k.r.Read(buf)
		if n == 0 {
			return 0, err
		}
		k.pending = []byte(keyMap.Replace(string(buf[:n])))
	}
	n := copy(p, k.pending)
	k.pending = k.pending[n:]
	return n, nil
}

// keyMap maps sequences that terminals send and x/term does not read: Home and
// End as tmux, screen and the Linux console send them, the cursor keys in
// application mode, and Ctrl-Left/Right (word moves, as Alt-Left/Right);
// F1-F4 are dropped (x/term would type their last letter); Ctrl-C becomes
// ctrlC and Enter (ctrlCKeys). A key's sequence arrives in one read, so a
// read is mapped as a whole.
var keyMap = strings.NewReplacer(
	"\x03", string(ctrlC)+"\r",
	"\x1b[1~", "\x1b[H", "\x1b[7~", "\x1b[H", "\x1bOH", "\x1b[H",
	"\x1b[4~", "\x1b[F", "\x1b[8~", "\x1b[F", "\x1bOF", "\x1b[F",
	"\x1bOA", "\x1b[A", "\x1bOB", "\x1b[B", "\x1bOC", "\x1b[C", "\x1bOD", "\x1b[D",
	"\x1b[1;5C", "\x1b[1;3C", "\x1b[1;5D", "\x1b[1;3D",
	"\x1bOP", "", "\x1bOQ", "", "\x1bOR", "", "\x1bOS", "",
)

// history keeps the lines entered, for the up and down keys; empty lines and
// repeats of the last one are left out.
type history struct{ lines []string }

const historyMax = 1000

func (h *history) Add(line string) {
	if line == "" || (len(h.lines) > 0 && h.lines[len(h.lines)-1] == line) {
		return
	}
	if len(h.lines) == historyMax {
		h.lines = h.lines[1:]
	}
	h.lines = append(h.lines, line)
}

func (h *history) Len() int { return len(h.lines) }

// At returns the idx-th most recent line.
func (h *history) At(idx int) string { return h.lines[len(h.lines)-1-idx] }

// terminalFile returns v as a file when it is open on a terminal.
func terminalFile(v any) (*os.File, bool) {
	f, ok := v.(*os.File)
	return f, ok && term.IsTerminal(int(f.Fd()))
}

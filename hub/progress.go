package hub

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/latent-ai/latent/internal/units"
)

// progress reports a download: on a terminal a bar redrawn in place a few
// times a second, elsewhere (logs, pipes) a plain line at every tenth and at
// least every 30 seconds.
type progress struct {
	w           io.Writer
	tty         bool
	name        string
	total       int64
	done        int64
	resumedFrom int64 // bytes already on disk when this run started
	start       time.Time
	last        time.Time
	lastTenth   int64
}

func newProgress(w io.Writer, name string, total, have int64) *progress {
	p := &progress{w: w, tty: isTerminal(w), name: name, total: total, done: have, resumedFrom: have,
		start: time.Now(), lastTenth: have * 10 / max(total, 1)}
	p.last = p.start
	return p
}

// Write counts bytes as they reach the disk.
func (p *progress) Write(b []byte) (int, error) {
	p.add(int64(len(b)))
	return len(b), nil
}

func (p *progress) add(n int64) {
	p.done += n
	if p.w == nil {
		return
	}
	now := time.Now()
	if p.tty {
		if now.Sub(p.last) >= 150*time.Millisecond {
			p.last = now
			fmt.Fprintf(p.w, "\r%s\x1b[K", p.line(now, 30))
		}
		return
	}
	if tenth := p.done * 10 / max(p.total, 1); tenth > p.lastTenth || now.Sub(p.last) >= 30*time.Second {
		p.lastTenth, p.last = tenth, now
		fmt.Fprintln(p.w, p.line(now, 0))
	}
}

// reset starts the count again after the server ignored a resume.
func (p *progress) reset() {
	p.done, p.resumedFrom, p.start, p.lastTenth = 0, 0, time.Now(), 0
}

// finish ends the bar's line so that what follows starts on a fresh one.
func (p *progress) finish() {
	if p.w != nil && p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", p.line(time.Now(), 30))
	}
}

// line is "NAME  45% ▕█████     ▏ 8.1 GB/18 GB  95 MB/s  1m40s" with a bar
// of width cells (none when 0).
func (p *progress) line(now time.Time, width int) string {
	frac := float64(p.done) / float64(max(p.total, 1))
	var b strings.Builder
	fmt.Fprintf(&b, "pulling %s  %3.0f%%", p.name, 100*frac)
	if width > 0 {
		full := int(frac * float64(width))
		fmt.Fprintf(&b, " ▕%s%s▏", strings.Repeat("█", full), strings.Repeat(" ", width-full))
	}
	fmt.Fprintf(&b, " %s/%s", units.Bytes(p.done), units.Bytes(p.total))
	if el := now.Sub(p.start).Seconds(); el > 0.5 && p.done > p.resumedFrom {
		rate := float64(p.done-p.resumedFrom) / el
		fmt.Fprintf(&b, "  %s/s", units.Bytes(int64(rate)))
		if p.done < p.total {
			left := time.Duration(float64(p.total-p.done)/rate) * time.Second
			fmt.Fprintf(&b, "  %s left", left.Round(time.Second))
		}
	}
	return b.String()
}

// isTerminal reports whether w is a character device (a terminal), where a
// line that rewrites itself is welcome.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

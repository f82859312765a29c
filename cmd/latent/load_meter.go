package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/internal/units"
	"github.com/latent-ai/latent/model"
)

// loadMeter shows on a terminal how much of a large model's weights the
// backend has taken (uploaded to the GPU, repacked for the CPU): a
// multi-gigabyte file takes seconds, which a still cursor makes look hung.
type loadMeter struct {
	w     io.Writer
	shown bool
	last  time.Time
}

// loadMeterMin is the smallest file the meter shows: smaller ones load in
// well under a second.
const loadMeterMin = 1 << 30

// newLoadMeter is a meter writing to w, or nil when w is not a terminal
// (logs and pipes get no redrawn lines).
func newLoadMeter(w io.Writer) *loadMeter {
	if _, ok := terminalFile(w); !ok {
		return nil
	}
	return &loadMeter{w: w}
}

// startLoadMeter is opts reporting to a meter on stderr, and the function
// that clears the meter's line once the load returns.
func startLoadMeter(cmd *cobra.Command, opts model.Options) (model.Options, func()) {
	meter := newLoadMeter(cmd.ErrOrStderr())
	return meter.options(opts), meter.clear
}

// options is o reporting to the meter.
func (m *loadMeter) options(o model.Options) model.Options {
	if m != nil {
		o.Progress = m.progress
	}
	return o
}

func (m *loadMeter) progress(done, total int64) {
	now := time.Now()
	if total < loadMeterMin || (m.shown && now.Sub(m.last) < 100*time.Millisecond) {
		return
	}
	m.shown, m.last = true, now
	fmt.Fprintf(m.w, "\rloading weights %3.0f%%  %s/%s\x1b[K", 100*float64(done)/float64(total), units.Bytes(done), units.Bytes(total))
}

// clear erases the meter's line once the model is loaded (or failed to).
func (m *loadMeter) clear() {
	if m != nil && m.shown {
		fmt.Fprint(m.w, "\r\x1b[K")
	}
}

package main

import (
	"bytes"
	"testing"
)

// The meter draws one line in place for files of a gigabyte and more, and
// erases it when the load is over; it stays silent off a terminal.
func TestLoadMeter(t *testing.T) {
	var buf bytes.Buffer
	if newLoadMeter(&buf) != nil {
		t.Fatal("a meter on a buffer, which is no terminal")
	}
	m := &loadMeter{w: &buf}
	m.progress(100, loadMeterMin-1)
	if buf.Len() != 0 {
		t.Fatalf("small file drew %q", buf.String())
	}
	m.progress(1e9, 2e9+loadMeterMin)
	m.progress(1.5e9, 2e9+loadMeterMin) // within 100 ms of the last line: not drawn
	m.clear()
	want := "\rloading weights  33%  1.0 GB/3.1 GB\x1b[K\r\x1b[K"
	if got := buf.String(); got != want {
		t.Errorf("meter wrote %q, want %q", got, want)
	}
}

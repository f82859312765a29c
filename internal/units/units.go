// Package units formats quantities for people: one byte format for every
// command, so that a file's size reads the same in show, synth, pull and list.
package units

import "fmt"

// Bytes formats a byte count in decimal units with two or three significant
// digits, as ollama and the Hugging Face Hub show model sizes: "512 B",
// "1.4 MB", "18 GB".
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	suffixes := []string{"kB", "MB", "GB", "TB", "PB", "EB"}
	v, i := float64(n)/unit, 0
	// Step up before printing would round to 1000 ("1000 kB" is "1.0 MB").
	for v >= unit-0.5 && i < len(suffixes)-1 {
		v /= unit
		i++
	}
	if v < 9.95 {
		return fmt.Sprintf("%.1f %s", v, suffixes[i])
	}
	return fmt.Sprintf("%.0f %s", v, suffixes[i])
}

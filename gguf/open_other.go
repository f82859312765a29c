//go:build !unix

package gguf

import (
	"fmt"
	"os"
)

// Open reads and parses the file at path. Without mmap on this platform the
// file is read into memory; unix systems map it instead.
func Open(path string) (*File, error) {
	// Refuse directories, FIFOs and devices before reading: a FIFO would block.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a GGUF file: not a regular file (mode %v)", path, st.Mode())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: not a GGUF file: the file is empty", path)
	}
	return Parse(path, data)
}

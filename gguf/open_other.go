//go:build !unix

package gguf

import (
	"fmt"
	"os"
)

// Open reads and parses the file at path. Without mmap on this platform the
// file is read into memory; unix systems map it instead.
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: not a GGUF file: the file is empty", path)
	}
	return Parse(path, data)
}

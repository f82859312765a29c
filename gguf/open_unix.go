//go:build unix

package gguf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Open maps the file at path read-only and parses it. The mapping is shared
// with the page cache, so opening a 17 GB model costs only the header's pages.
func Open(path string) (*File, error) {
	// O_NONBLOCK so that a FIFO (or a device) fails the regular-file check
	// below instead of blocking in open until a writer appears.
	fd, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a GGUF file: not a regular file (mode %v)", path, st.Mode())
	}
	size := st.Size()
	if size == 0 {
		return nil, fmt.Errorf("%s: not a GGUF file: the file is empty", path)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s: %d bytes is too large to map", path, size)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	f, err := Parse(path, data)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, err
	}
	f.close = func() error { return unix.Munmap(data) }
	return f, nil
}

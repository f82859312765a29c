//go:build unix

package gguf

import (
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpenSpecialFiles(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		// A blocking open of a FIFO would hang here until a writer came.
		_, err := Open(p)
		wantErr(t, err, p, "not a regular file")
	})
	t.Run("device", func(t *testing.T) {
		_, err := Open("/dev/null")
		wantErr(t, err, "/dev/null", "not a regular file")
	})
}

//go:build unix

package synth

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A pipe (or device) as the output is refused and left as it was: renaming
// the written file over it would replace it.
func TestWriteRefusesSpecialFiles(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteFile(context.Background(), pipe, Options{Preset: "tiny-glm", Format: Q4_0}); err == nil || !strings.Contains(err.Error(), "is not a regular file (a named pipe)") {
		t.Errorf("pipe as output: %v", err)
	}
	if fi, err := os.Lstat(pipe); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the pipe after a refused write: %v, %v", fi, err)
	}
}

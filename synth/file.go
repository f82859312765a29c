package synth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes the model for opts to path. The file appears complete or
// not at all: data goes to a temporary file in the same directory, which is
// synced and renamed over path only when everything is written, and removed
// on any error or cancellation (cancel ctx on Ctrl-C).
func WriteFile(ctx context.Context, path string, opts Options) (*Model, int64, error) {
	m, err := Plan(opts)
	if err != nil {
		return nil, 0, err
	}
	n, err := m.WriteFile(ctx, path)
	return m, n, err
}

// WriteFile writes the model to path atomically; see the package function.
func (m *Model) WriteFile(ctx context.Context, path string) (n int64, err error) {
	// A symbolic link's target is the file replaced; a device, pipe or
	// socket is refused (renaming over /dev/null would replace it).
	mode := fs.FileMode(0o644)
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(path)
		if err != nil { // dangling or a loop: writing would replace the link itself
			return 0, fmt.Errorf("%s is a symbolic link that leads to no file: %w", path, err)
		}
		path = real
	}
	switch fi, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	case fi.IsDir():
		return 0, fmt.Errorf("%s is a directory", path)
	case !fi.Mode().IsRegular():
		return 0, fmt.Errorf("%s is not a regular file (%s)", path, kind(fi.Mode()))
	default:
		mode = fi.Mode().Perm() // an existing file keeps its permissions
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		// The temporary name would only confuse: report the cause alone.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if n, err = m.WriteTo(ctx, f); err != nil {
		if errors.Is(err, context.Canceled) {
			return n, fmt.Errorf("write %s: interrupted", path)
		}
		return n, fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes the file private; a model file is ordinary data.
	if err = f.Chmod(mode); err != nil {
		return n, fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return n, fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return n, fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return n, fmt.Errorf("write %s: %w", path, err)
	}
	// Make the rename itself durable; failing to is not worth failing for.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return n, nil
}

// kind names a file mode that is not a regular file's.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.Type().String()
}

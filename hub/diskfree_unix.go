//go:build linux || darwin || freebsd || dragonfly

package hub

import "golang.org/x/sys/unix"

// diskFree is the number of bytes an unprivileged user may still write on
// the file system holding dir.
func diskFree(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}

package sysmem

import "golang.org/x/sys/unix"

// Physical is the machine's RAM in bytes (0: unknown).
func Physical() uint64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return n
}

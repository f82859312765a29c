package sysmem

import "golang.org/x/sys/unix"

// Physical is the machine's RAM in bytes (0: unknown).
func Physical() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

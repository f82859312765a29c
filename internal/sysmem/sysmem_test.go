package sysmem

import (
	"runtime"
	"testing"
)

func TestPhysicalIsThisMachines(t *testing.T) {
	m := Physical()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		if m != 0 {
			t.Errorf("Physical() = %d where it is not known", m)
		}
		return
	}
	if m < 1<<28 || m > 1<<50 {
		t.Errorf("Physical() = %d bytes: not this machine's", m)
	}
}

package cpu

import (
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct{ value, err string }{
		{"", ""},
		{"generic", ""},
		{"avx512", "unknown kernel set"},
		{"AVX2 ", "unknown kernel set"},
	} {
		err := checkSet(tc.value)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("LATENT_CPU=%q: %v, want %q", tc.value, err, tc.err)
		}
	}
	can := runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasFMA
	if err := checkSet("avx2"); (err == nil) != can {
		t.Errorf("LATENT_CPU=avx2 on a CPU with AVX2 and FMA=%v: %v", can, err)
	}
}

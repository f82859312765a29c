package cpu

//go:generate go run ./asm -out dot_amd64.s -stubs dot_amd64_stub.go -pkg cpu

import (
	"golang.org/x/sys/cpu"

	"github.com/latent-ai/latent/quant"
)

// addSIMDKernels replaces the pure-Go kernels with assembly ones where the
// CPU has the instructions (force "avx2" is accepted and is the only set).
func addSIMDKernels(ks map[quant.Type]kernel, force string) string {
	if !(cpu.X86.HasAVX2 && cpu.X86.HasFMA) {
		return "generic"
	}
	ks[quant.Q4_0] = kernel{one: dotQ4_0AVX2, four: dotQ4_0x4}
	ks[quant.Q8_0] = kernel{one: dotQ8_0AVX2, four: dotQ8_0x4}
	return "avx2"
}

// The wrappers pass a token's blocks to the assembly; k, the bytes from one
// token to the next, is the row length (qs: k int8, sum4: k/4 int32, d: k/32 float32).

func dotQ4_0AVX2(w []byte, a arow) float32 {
	var out float32
	dotQ4_0x1AVX2(&w[0], &a.qs[0], &a.d[0], &a.sum4[0], len(a.d), len(a.qs), &out)
	return out
}

func dotQ8_0AVX2(w []byte, a arow) float32 {
	var out float32
	dotQ8_0x1AVX2(&w[0], &a.qs[0], &a.d[0], &a.sum4[0], len(a.d), len(a.qs), &out)
	return out
}

func dotQ4_0x4(w []byte, a *acts, t int, out *[4]float32) {
	r := a.row(t)
	_ = a.row(t + 3)
	dotQ4_0x4AVX2(&w[0], &r.qs[0], &r.d[0], &r.sum4[0], len(r.d), a.k, &out[0])
}

func dotQ8_0x4(w []byte, a *acts, t int, out *[4]float32) {
	r := a.row(t)
	_ = a.row(t + 3)
	dotQ8_0x4AVX2(&w[0], &r.qs[0], &r.d[0], &r.sum4[0], len(r.d), a.k, &out[0])
}

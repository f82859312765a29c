package cpu

//go:generate go run ./asm -out dot_amd64.s -stubs dot_amd64_stub.go -pkg cpu

import (
	"os"

	"golang.org/x/sys/cpu"

	"github.com/latent-ai/latent/quant"
)

// hasAVX512 is whether the AVX-512 kernels run: the CPU has AVX-512 F and
// BW and LATENT_CPU does not cap the instruction set at AVX2.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX2 && cpu.X86.HasFMA &&
	os.Getenv("LATENT_CPU") != "avx2"

// wideD says whether kernels read arow.d8 (the AVX-512 ones do).
var wideD = hasAVX512

// addSIMDKernels replaces the pure-Go kernels with assembly ones where the
// CPU has the instructions; force "avx2" leaves out the AVX-512 ones.
func addSIMDKernels(ks map[quant.Type]kernel, force string) string {
	if !(cpu.X86.HasAVX2 && cpu.X86.HasFMA) {
		return "generic"
	}
	ks[quant.Q4_0] = kernel{one: dotQ4_0AVX2, four: dotQ4_0x4}
	ks[quant.Q8_0] = kernel{one: dotQ8_0AVX2, four: dotQ8_0x4}
	if !hasAVX512 || force == "avx2" {
		return "avx2"
	}
	ks[quant.Q4_0] = kernel{one: dotQ4_0AVX512, four: dotQ4_0x4_512, tile: dotQ4_0Tile}
	return "avx512"
}

// The AVX-512 kernels take blocks in pairs (one token: two pairs per step);
// rows of another length use the AVX2 kernels.

func dotQ4_0AVX512(w []byte, a arow) float32 {
	if len(a.d)%4 != 0 {
		return dotQ4_0AVX2(w, a)
	}
	var out float32
	dotQ4_0x1AVX512(&w[0], &a.qs[0], &a.d8[0], &a.sum4[0], len(a.d), len(a.qs), &out)
	return out
}

func dotQ4_0x4_512(w []byte, a *acts, t int, out *[4]float32) {
	if a.blocks%2 != 0 {
		dotQ4_0x4(w, a, t, out)
		return
	}
	r := &a.rs[t]
	_ = a.rs[t+3]
	dotQ4_0x4AVX512(&w[0], &r.qs[0], &r.d8[0], &r.sum4[0], len(r.d), a.k, &out[0])
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
	r := &a.rs[t]
	_ = a.rs[t+3]
	dotQ4_0x4AVX2(&w[0], &r.qs[0], &r.d[0], &r.sum4[0], len(r.d), a.k, &out[0])
}

func dotQ8_0x4(w []byte, a *acts, t int, out *[4]float32) {
	r := &a.rs[t]
	_ = a.rs[t+3]
	dotQ8_0x4AVX2(&w[0], &r.qs[0], &r.d[0], &r.sum4[0], len(r.d), a.k, &out[0])
}

func dotQ4_0Tile(w []byte, rowBytes int, a *acts, t int, out *[8]float32) {
	if a.blocks%2 != 0 {
		var q [4]float32
		dotQ4_0x4(w[:rowBytes], a, t, &q)
		copy(out[:4], q[:])
		dotQ4_0x4(w[rowBytes:], a, t, &q)
		copy(out[4:], q[:])
		return
	}
	r := &a.rs[t]
	_ = a.rs[t+3]
	_ = w[2*rowBytes-1]
	dotQ4_0r2x4AVX512(&w[0], rowBytes, &r.qs[0], &r.d8[0], &r.sum4[0], len(r.d), a.k, out)
}

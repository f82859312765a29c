package cpu

import (
	"math"
)

// ggml rounds activations to nearest 8-bit values before each quantized
// matmul, so a value one last bit away from a rounding boundary lands on the
// other side of it; in these models one such flip moves the logits by up to
// 0.05, which put three golden files out of tolerance. Agreeing with
// llama.cpp to the golden tolerances takes its float arithmetic bit for bit
// up to every rounding point: these helpers are the reductions of ggml's x86
// AVX2+FMA CPU kernels, lane by lane.

// fma32 is a float32 fused multiply-add (a·b+c rounded once), as
// _mm256_fmadd_ps computes it.
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// hsum8 is ggml's hsum_float_8: (l4+l0, l5+l1, l6+l2, l7+l3), then pairwise.
func hsum8(a *[8]float32) float32 {
	u0, u1, u2, u3 := a[4]+a[0], a[5]+a[1], a[6]+a[2], a[7]+a[3]
	return (u0 + u2) + (u1 + u3)
}

// dotF32Tiny is llamafile's tinyBLAS F32 kernel on AVX2, which ggml uses for
// F32 weights (the MoE router): one accumulator of 8 lanes, fused
// multiply-adds 8 values at a time, hsum8 at the end.
func dotF32Tiny(x, y []float32) float32 {
	y = y[:len(x)]
	var acc [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		for l := 0; l < 8; l++ {
			acc[l] = fma32(x[i+l], y[i+l], acc[l])
		}
	}
	s := hsum8(&acc)
	for ; i < len(x); i++ {
		s += x[i] * y[i]
	}
	return s
}

// dotF32Vec is ggml_vec_dot_f32 on AVX2 (the flash-attention K·Q product):
// 4 accumulators of 8 lanes over steps of 32, reduced acc0+acc2, acc1+acc3,
// then together, then across lanes; the tail is summed in double.
func dotF32VecGo(x, y []float32) float32 {
	y = y[:len(x)]
	var acc [4][8]float32
	np := len(x) &^ 31
	for i := 0; i < np; i += 32 {
		for j := 0; j < 4; j++ {
			for l := 0; l < 8; l++ {
				k := i + 8*j + l
				acc[j][l] = fma32(x[k], y[k], acc[j][l])
			}
		}
	}
	var r [8]float32
	for l := range r {
		r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]) // x0+=x2, x1+=x3, x0+=x1
	}
	t0, t1, t2, t3 := r[0]+r[4], r[1]+r[5], r[2]+r[6], r[3]+r[7]
	sum := float64((t0 + t1) + (t2 + t3))
	for i := np; i < len(x); i++ {
		sum += float64(x[i] * y[i])
	}
	return float32(sum)
}

// expf is libm's expf (correctly rounded on glibc for these arguments).
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// fmaAxpyGo sets out[i] = fma(v[i], s, out[i]): flash attention's V
// accumulation, one rounding per value as ggml's FMA loop.
func fmaAxpyGo(out, v []float32, s float32) {
	v = v[:len(out)]
	for i := range out {
		out[i] = fma32(v[i], s, out[i])
	}
}

// dotF32Vec and fmaAxpy are the attention's vector operations: assembly
// where the CPU has AVX2 and FMA (same results bit for bit), else the Go
// above; LATENT_CPU=generic forces the Go.
var dotF32Vec, fmaAxpy = chooseVecOps(forcedSet)

func chooseVecOps(force string) (func(x, y []float32) float32, func(out, v []float32, s float32)) {
	if force != "generic" {
		if d, a := simdVecOps(); d != nil {
			return d, a
		}
	}
	return dotF32VecGo, fmaAxpyGo
}

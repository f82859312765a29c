package cpu

import (
	"math"

	"github.com/latent-ai/latent/quant"
)

// Before a dot product with a quantized weight, ggml rounds the activations
// to the 8-bit block format the weight's kernel pairs with (its vec_dot_type),
// and to F16/BF16 for half-precision weights. The CPU backend rounds the same
// way, so its logits agree with llama.cpp's to the golden tolerances, and its
// integer kernels compute on those 8-bit blocks directly.

// actFormat is what activations are turned into before a matmul.
type actFormat int

const (
	actF32  actFormat = iota // used as they are
	actF16                   // rounded through F16
	actBF16                  // rounded through BF16
	actQ8_0                  // blocks of 32: int8 and an f16-rounded scale
	actQ8K                   // blocks of 256: int8, a float32 scale and sums of 16
)

// actFormatOf is the activation format weights of type t pair with.
func actFormatOf(t quant.Type) actFormat {
	switch t {
	case quant.F32:
		return actF32
	case quant.F16:
		return actF16
	case quant.BF16:
		return actBF16
	case quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS:
		return actQ8K
	}
	return actQ8_0 // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 (Q8_1 rounds the same)
}

// actRounding returns the rounding applied to activations multiplied by
// weights of type t, or nil when they are used as they are.
func actRounding(t quant.Type) func(x, out []float32) {
	switch actFormatOf(t) {
	case actF16:
		return roundF16
	case actBF16:
		return roundBF16
	case actQ8_0:
		return roundQ8_0
	case actQ8K:
		return roundQ8K
	}
	return nil
}

func roundF16(x, out []float32) {
	for i, v := range x {
		out[i] = quant.F16ToF32(quant.F32ToF16(v))
	}
}

func roundBF16(x, out []float32) {
	for i, v := range x {
		out[i] = quant.BF16ToF32(quant.F32ToBF16(v))
	}
}

// roundQ8_0 is quantize_row_q8_0 as ggml's x86 kernels compute it: blocks of
// 32, d = absmax/127 stored as F16, q = x·(127/absmax) rounded half to even.
func roundQ8_0(x, out []float32) {
	var qs [32]int8
	for b := 0; b+32 <= len(x); b += 32 {
		d := quantQ8_0(x[b:b+32], qs[:])
		for i, q := range qs {
			out[b+i] = d * float32(q)
		}
	}
}

// quantQ8_0 quantizes one block of 32 into qs and returns its scale.
func quantQ8_0(x []float32, qs []int8) float32 {
	x, qs = x[:32], qs[:32]
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	id := float32(0)
	if amax != 0 {
		id = 127 / amax
	}
	for i, v := range x {
		qs[i] = int8(math.RoundToEven(float64(v * id)))
	}
	return quant.F16ToF32(quant.F32ToF16(amax / 127))
}

// quantRowQ8_0Go quantizes len(d) blocks of x with quantQ8_0 into qs and d,
// and puts 8× each block's sum in b8 (what the Q4_0 kernels subtract).
func quantRowQ8_0Go(x []float32, qs []int8, d []float32, b8 []int32) {
	for b := range d {
		q := qs[32*b : 32*b+32]
		d[b] = quantQ8_0(x[32*b:32*b+32], q)
		var sum int32
		for _, v := range q {
			sum += int32(v)
		}
		b8[b] = 8 * sum
	}
}

// quantRowQ8_0 is quantRowQ8_0Go in assembly where the CPU has AVX2 (the
// same bits); LATENT_CPU=generic forces the Go.
var quantRowQ8_0 = chooseQuantQ8_0(forcedSet)

func chooseQuantQ8_0(force string) func(x []float32, qs []int8, d []float32, b8 []int32) {
	if f := simdQuantQ8_0(); f != nil && force != "generic" {
		return f
	}
	return quantRowQ8_0Go
}

// roundQ8K is quantize_row_q8_K: blocks of 256, the value of largest
// magnitude maps to -127, d kept as float32, q rounded half to even.
func roundQ8K(x, out []float32) {
	var qs [quant.QK_K]int8
	var bs [quant.QK_K / 16]int16
	for b := 0; b+quant.QK_K <= len(x); b += quant.QK_K {
		d := quantQ8K(x[b:b+quant.QK_K], qs[:], bs[:])
		for i, q := range qs {
			out[b+i] = d * float32(q)
		}
	}
}

// quantQ8K quantizes one block of 256 into qs, the sums of each 16 into
// bsums, and returns its scale.
func quantQ8K(x []float32, qs []int8, bsums []int16) float32 {
	x, qs, bsums = x[:quant.QK_K], qs[:quant.QK_K], bsums[:quant.QK_K/16]
	var amax, mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, mx = a, v
		}
	}
	if amax == 0 {
		clear(qs)
		clear(bsums)
		return 0
	}
	iscale := -127 / mx
	for i, v := range x {
		qs[i] = int8(min(127, math.RoundToEven(float64(iscale*v))))
	}
	for j := range bsums {
		var s int16
		for _, q := range qs[16*j : 16*j+16] {
			s += int16(q)
		}
		bsums[j] = s
	}
	return 1 / iscale
}

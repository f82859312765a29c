package cpu

import (
	"math"

	"github.com/latent-ai/latent/quant"
)

// Before a dot product with a quantized weight, ggml rounds the activations
// to the 8-bit block format the weight's kernel pairs with (its vec_dot_type),
// and to F16/BF16 for half-precision weights. The CPU backend rounds the same
// way, so its logits agree with llama.cpp's to the golden tolerances; the
// fast kernels later compute on those 8-bit blocks directly.

// actRounding returns the rounding applied to activations multiplied by
// weights of type t, or nil when they are used as they are.
func actRounding(t quant.Type) func(x, out []float32) {
	switch t {
	case quant.F32:
		return nil
	case quant.F16:
		return roundF16
	case quant.BF16:
		return roundBF16
	case quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS:
		return roundQ8K
	}
	return roundQ8_0 // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 (Q8_1 rounds the same)
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
	for b := 0; b+32 <= len(x); b += 32 {
		var amax float32
		for _, v := range x[b : b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		id := float32(0)
		if amax != 0 {
			id = 127 / amax
		}
		dh := quant.F16ToF32(quant.F32ToF16(amax / 127))
		for i, v := range x[b : b+32] {
			out[b+i] = dh * float32(math.RoundToEven(float64(v*id)))
		}
	}
}

// roundQ8K is quantize_row_q8_K: blocks of 256, the value of largest
// magnitude maps to -127, d kept as float32, q rounded half to even.
func roundQ8K(x, out []float32) {
	for b := 0; b+quant.QK_K <= len(x); b += quant.QK_K {
		var amax, mx float32
		for _, v := range x[b : b+quant.QK_K] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			clear(out[b : b+quant.QK_K])
			continue
		}
		iscale := -127 / mx
		d := 1 / iscale
		for i, v := range x[b : b+quant.QK_K] {
			q := min(127, math.RoundToEven(float64(iscale*v)))
			out[b+i] = d * float32(q)
		}
	}
}

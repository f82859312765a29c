package cpu

import (
	"encoding/binary"

	"github.com/latent-ai/latent/quant"
)

// arow is one token's activations in an 8-bit block format: qs holds the
// int8 values, d the scale of each block, bsums (Q8_K) the sum of each 16
// values, and sum4 (Q8_0) 8× the sum of each 4 consecutive values, which the
// SIMD Q4_0 kernel subtracts instead of re-centring every weight nibble.
type arow struct {
	qs    []int8
	d     []float32
	bsums []int16
	sum4  []int32
	d8    []float32 // d, each repeated 8 times (AVX-512 kernels only)
}

// dotKernel is Σ_i W[i]·a[i] for one weight row in its file encoding and one
// token's quantized activations: the integer products of each block pair,
// scaled once per block, as ggml's vec_dot kernels compute them.
type dotKernel func(w []byte, a arow) float32

// quadKernel is dotKernel for tokens t..t+3 of a batch at once, so that each
// weight block is unpacked once for four tokens.
type quadKernel func(w []byte, a *acts, t int, out *[4]float32)

// tileKernel is dotKernel for two weight rows (rowBytes apart) by tokens
// t..t+3: out[4r+i] is row r times token t+i.
type tileKernel func(w []byte, rowBytes int, a *acts, t int, out *[8]float32)

// kernel is what a weight type's matmul runs; four and tile may be nil.
type kernel struct {
	one  dotKernel
	four quadKernel
	tile tileKernel
}

func f16(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// dotQ4_0Go is ggml_vec_dot_q4_0_q8_0: Σ_b d_w·d_a·Σ_j (nibble_j − 8)·a_j,
// one float per row summed block after block, the order of ggml's repacked
// Q4_0 kernels that llama.cpp runs on x86.
func dotQ4_0Go(w []byte, a arow) float32 {
	var sum float32
	for b, da := range a.d {
		blk := w[b*18 : b*18+18]
		q := a.qs[b*32 : b*32+32]
		var s int32
		for j, v := range blk[2:18] {
			s += (int32(v&15)-8)*int32(q[j]) + (int32(v>>4)-8)*int32(q[j+16])
		}
		sum += float32(s) * (f16(blk) * da)
	}
	return sum
}

// dotQ8_0Go is ggml_vec_dot_q8_0_q8_0 in the float order of the AVX2
// one-token kernel: eight lanes (lane i sums the products of bytes 4i..4i+3
// of a block), even and odd blocks in two accumulators, one fused
// multiply-add per block, then the lanes pairwise. Rounding the same way
// keeps the pure-Go and SIMD paths on the same side of 8-bit rounding ties.
func dotQ8_0Go(w []byte, a arow) float32 {
	var acc [2][8]float32
	for b, da := range a.d {
		blk := w[b*34 : b*34+34]
		q := a.qs[b*32 : b*32+32]
		var p [8]int32
		for j, v := range blk[2:34] {
			p[j/4] += int32(int8(v)) * int32(q[j])
		}
		scale, ac := float64(f16(blk)*da), &acc[b%2]
		if len(a.d)%2 == 1 && b == len(a.d)-1 {
			ac = &acc[0] // the odd last block goes to the first accumulator
		}
		for i, v := range p {
			ac[i] = float32(scale*float64(v) + float64(ac[i])) // exact product, one rounding: an FMA
		}
	}
	var x [8]float32
	for i := range x {
		x[i] = acc[0][i] + acc[1][i]
	}
	// VEXTRACTF128 + VADDPS, then VHADDPS twice.
	r := [4]float32{x[0] + x[4], x[1] + x[5], x[2] + x[6], x[3] + x[7]}
	return (r[0] + r[1]) + (r[2] + r[3])
}

// dotQ6KGo is ggml_vec_dot_q6_K_q8_K: per super-block d_w·d_a·Σ_sub sc·Σ q·a
// with q the 6-bit value − 32 (layout in quant's dequantQ6K).
func dotQ6KGo(w []byte, a arow) float32 {
	var sum float32
	for b, da := range a.d {
		blk := w[b*210 : b*210+210]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		q8 := a.qs[b*256 : b*256+256]
		var sumi int32
		for h := 0; h < 2; h++ {
			for g := 0; g < 2; g++ {
				k := 8*h + g
				l0 := ql[64*h+16*g : 64*h+16*g+16]
				l1 := ql[64*h+32+16*g : 64*h+32+16*g+16]
				hb := qh[32*h+16*g : 32*h+16*g+16]
				y := q8[128*h+16*g : 128*h+16*g+112]
				var s0, s1, s2, s3 int32
				for j, t := range hb {
					x, c := l0[j], l1[j]
					s0 += (int32(x&0xf|(t&3)<<4) - 32) * int32(y[j])
					s1 += (int32(c&0xf|(t>>2&3)<<4) - 32) * int32(y[j+32])
					s2 += (int32(x>>4|(t>>4&3)<<4) - 32) * int32(y[j+64])
					s3 += (int32(c>>4|(t>>6)<<4) - 32) * int32(y[j+96])
				}
				sumi += int32(int8(sc[k]))*s0 + int32(int8(sc[k+2]))*s1 + int32(int8(sc[k+4]))*s2 + int32(int8(sc[k+6]))*s3
			}
		}
		sum += f16(blk[208:]) * da * float32(sumi)
	}
	return sum
}

// kScaleMin unpacks the 6-bit scales and mins of Q4_K and Q5_K.
func kScaleMin(s []byte) (sc, m [8]int32) {
	for k := 0; k < 4; k++ {
		sc[k] = int32(s[k] & 0x3f)
		m[k] = int32(s[4+k] & 0x3f)
		sc[4+k] = int32(s[8+k]&0xf | (s[k]>>2)&0x30)
		m[4+k] = int32(s[8+k]>>4 | (s[4+k]>>2)&0x30)
	}
	return sc, m
}

// dotQ4KGo is ggml_vec_dot_q4_K_q8_K: d_a·(d·Σ sc·Σ q·a − dmin·Σ m·Σ a), the
// sums of a from the activation block's bsums.
func dotQ4KGo(w []byte, a arow) float32 {
	var sum float32
	for b, da := range a.d {
		blk := w[b*144 : b*144+144]
		sc, m := kScaleMin(blk[4:16])
		qs := blk[16:144]
		q8 := a.qs[b*256 : b*256+256]
		bs := a.bsums[b*16 : b*16+16]
		var sumi, summ int32
		for c := 0; c < 4; c++ {
			var s0, s1 int32
			for j, v := range qs[32*c : 32*c+32] {
				s0 += int32(v&0xf) * int32(q8[64*c+j])
				s1 += int32(v>>4) * int32(q8[64*c+32+j])
			}
			sumi += sc[2*c]*s0 + sc[2*c+1]*s1
			summ += m[2*c]*int32(bs[4*c]+bs[4*c+1]) + m[2*c+1]*int32(bs[4*c+2]+bs[4*c+3])
		}
		sum += da * (f16(blk)*float32(sumi) - f16(blk[2:])*float32(summ))
	}
	return sum
}

// dotQ5KGo is ggml_vec_dot_q5_K_q8_K: as Q4_K with a fifth bit from qh.
func dotQ5KGo(w []byte, a arow) float32 {
	var sum float32
	for b, da := range a.d {
		blk := w[b*176 : b*176+176]
		sc, m := kScaleMin(blk[4:16])
		qh, qs := blk[16:48], blk[48:176]
		q8 := a.qs[b*256 : b*256+256]
		bs := a.bsums[b*16 : b*16+16]
		var sumi, summ int32
		for c := 0; c < 4; c++ {
			hshift := uint(2 * c)
			var s0, s1 int32
			for j, v := range qs[32*c : 32*c+32] {
				h := qh[j] >> hshift
				s0 += int32(v&0xf|(h&1)<<4) * int32(q8[64*c+j])
				s1 += int32(v>>4|(h&2)<<3) * int32(q8[64*c+32+j])
			}
			sumi += sc[2*c]*s0 + sc[2*c+1]*s1
			summ += m[2*c]*int32(bs[4*c]+bs[4*c+1]) + m[2*c+1]*int32(bs[4*c+2]+bs[4*c+3])
		}
		sum += da * (f16(blk)*float32(sumi) - f16(blk[2:])*float32(summ))
	}
	return sum
}

// genericKernels are the pure-Go integer kernels: the fallback, and the
// oracle the SIMD kernels are tested against.
var genericKernels = map[quant.Type]kernel{
	quant.Q4_0: {one: dotQ4_0Go},
	quant.Q8_0: {one: dotQ8_0Go},
	quant.Q4_K: {one: dotQ4KGo},
	quant.Q5_K: {one: dotQ5KGo},
	quant.Q6_K: {one: dotQ6KGo},
}

package cpu

import (
	"encoding/binary"

	"github.com/latent-ai/latent/quant"
)

// arow is one token's activations in an 8-bit block format: qs holds the
// int8 values, d the scale of each block, bsums (Q8_K) the sum of each 16
// values, and b8 (Q8_0) 8× the sum of each block, which the SIMD Q4_0
// kernels subtract instead of re-centring every weight nibble.
type arow struct {
	qs    []int8
	d     []float32
	bsums []int16
	b8    []int32
}

// dotKernel is Σ_i W[i]·a[i] for one weight row in its file encoding and one
// token's quantized activations: the integer products of each block pair,
// scaled once per block, as ggml's kernels compute them.
type dotKernel func(w []byte, a arow) float32

// quadKernel is dotKernel for four tokens at once, activation rows t,
// t+step, t+2·step, t+3·step of a batch, so that each weight block is
// unpacked once for four tokens.
type quadKernel func(w []byte, a *acts, t, step int, out *[4]float32)

// rowsKernel is dotKernel for four weight rows (rowBytes apart) and one
// token: out[r] is row r.
type rowsKernel func(w []byte, rowBytes int, a arow, out *[16]float32)

// tileKernel is dotKernel for four weight rows (rowBytes apart) by four
// tokens (activation rows t+i·step): out[4i+r] is row r times token i.
type tileKernel func(w []byte, rowBytes int, a *acts, t, step int, out *[16]float32)

// kernel is what a weight type's matmul runs; all but one may be nil.
// pack8 repacks groups of eight rows at load (src to dst, the same size),
// and rows8 and tile8 read groups in its layout: rows8 is
// rowsKernel for eight rows (out[r], r < 8), tile8 eight rows by tokens
// t..t+3 (out[8i+r]).
type kernel struct {
	one   dotKernel
	four  quadKernel
	rows4 rowsKernel
	tile  tileKernel
	pack8 func(dst, src []byte, rowBytes int)
	rows8 rowsKernel
	tile8 tile8Kernel
}

// tile8Kernel is dotKernel for eight packed weight rows by four tokens
// (activation rows t+i·step): out[8i+r] is row r times token i.
type tile8Kernel func(w []byte, rowBytes int, a *acts, t, step int, out *[32]float32)

func f16(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// dotQ4_0Go is ggml's repacked Q4_0 kernel (ggml_gemv/gemm_q4_0_8x8_q8_0 on
// AVX2, which llama.cpp uses for every Q4_0 matrix): per block the exact
// integer Σ_j (nibble_j − 8)·a_j, accumulated as fma(Σ, d_w·d_a, acc) block
// after block, one chain per output row. The SIMD kernels keep this order
// bit for bit (rows in lanes), see ggmlorder.go for why it matters.
func dotQ4_0Go(w []byte, a arow) float32 {
	var sum float32
	for b, da := range a.d {
		blk := w[b*18 : b*18+18]
		q := a.qs[b*32 : b*32+32]
		var s int32
		for j, v := range blk[2:18] {
			s += (int32(v&15)-8)*int32(q[j]) + (int32(v>>4)-8)*int32(q[j+16])
		}
		sum = fma32(float32(s), f16(blk)*da, sum)
	}
	return sum
}

// dotQ8_0Go is ggml_vec_dot_q8_0_q8_0 on AVX2: lane l of each block holds the
// integer sum of values 4l..4l+3 (VPMADDUBSW then VPMADDWD), accumulated per
// lane as fma(d_w·d_a, lane, acc[l]) and summed across lanes by hsum8.
func dotQ8_0Go(w []byte, a arow) float32 {
	var acc [8]float32
	for b, da := range a.d {
		blk := w[b*34 : b*34+34]
		q := a.qs[b*32 : b*32+32]
		d := f16(blk) * da
		for l := 0; l < 8; l++ {
			var s int32
			for j := 4 * l; j < 4*l+4; j++ {
				s += int32(int8(blk[2+j])) * int32(q[j])
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// kLanes adds, for one super-block, sc[e]·w[e]·a[e] into the AVX2 lane of
// value e: the K-quant kernels work on 32 values a register, lane l holding
// values 4l..4l+3 of each.
func kLanes(lanes *[8]int32, e int, p int32) { lanes[(e&31)>>2] += p }

// dotQ6KGo is ggml_vec_dot_q6_K_q8_K on AVX2: per super-block an integer
// lane sum of sc·(q−32)·a (layout in quant's dequantQ6K), then
// fma(d_a·d_w, lane, acc[l]).
func dotQ6KGo(w []byte, a arow) float32 {
	var acc [8]float32
	for b, da := range a.d {
		blk := w[b*210 : b*210+210]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		q8 := a.qs[b*256 : b*256+256]
		var lanes [8]int32
		for h := 0; h < 2; h++ {
			l8, h8 := ql[64*h:], qh[32*h:]
			for j := 0; j < 32; j++ {
				e := 128*h + j
				t := h8[j]
				q0 := int32(l8[j]&0xf|(t&3)<<4) - 32
				q1 := int32(l8[j+32]&0xf|(t>>2&3)<<4) - 32
				q2 := int32(l8[j]>>4|(t>>4&3)<<4) - 32
				q3 := int32(l8[j+32]>>4|(t>>6)<<4) - 32
				kLanes(&lanes, e, int32(int8(sc[e/16]))*q0*int32(q8[e]))
				kLanes(&lanes, e+32, int32(int8(sc[(e+32)/16]))*q1*int32(q8[e+32]))
				kLanes(&lanes, e+64, int32(int8(sc[(e+64)/16]))*q2*int32(q8[e+64]))
				kLanes(&lanes, e+96, int32(int8(sc[(e+96)/16]))*q3*int32(q8[e+96]))
			}
		}
		d := da * f16(blk[208:])
		for l := range acc {
			acc[l] = fma32(d, float32(lanes[l]), acc[l])
		}
	}
	return hsum8(&acc)
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
// sums of a from the activation block's bsums. Every product is rounded
// before the subtraction and the sum (the explicit conversions keep the
// compiler from fusing them when GOAMD64 ≥ v3; the assembly does not fuse).
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
		sum += float32(da * (float32(f16(blk)*float32(sumi)) - float32(f16(blk[2:])*float32(summ))))
	}
	return sum
}

// dotQ5KGo is ggml_vec_dot_q5_K_q8_K on AVX2: integer lane sums of sc·q·a
// accumulated as fma(d_a·d_w, lane, acc[l]); the mins term
// −d_a·dmin·Σ m·Σa is summed as a scalar (fma, as the compiler contracts it)
// and added after the lanes.
func dotQ5KGo(w []byte, a arow) float32 {
	var acc [8]float32
	var summs float32
	for b, da := range a.d {
		blk := w[b*176 : b*176+176]
		sc, m := kScaleMin(blk[4:16])
		qh, qs := blk[16:48], blk[48:176]
		q8 := a.qs[b*256 : b*256+256]
		bs := a.bsums[b*16 : b*16+16]
		var lanes [8]int32
		var summ int32
		for c := 0; c < 4; c++ {
			hshift := uint(2 * c)
			for j, v := range qs[32*c : 32*c+32] {
				h := qh[j] >> hshift
				e := 64*c + j
				kLanes(&lanes, e, sc[2*c]*int32(v&0xf|(h&1)<<4)*int32(q8[e]))
				kLanes(&lanes, e+32, sc[2*c+1]*int32(v>>4|(h&2)<<3)*int32(q8[e+32]))
			}
			summ += m[2*c]*int32(bs[4*c]+bs[4*c+1]) + m[2*c+1]*int32(bs[4*c+2]+bs[4*c+3])
		}
		d, dmin := da*f16(blk), -da*f16(blk[2:])
		for l := range acc {
			acc[l] = fma32(d, float32(lanes[l]), acc[l])
		}
		summs = fma32(dmin, float32(summ), summs)
	}
	return hsum8(&acc) + summs
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

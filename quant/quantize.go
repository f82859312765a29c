package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// blockEncoder encodes t.BlockSize() weights into one block of t.TypeSize() bytes.
type blockEncoder func(x []float32, block []byte)

// encoders lists the formats Quantize writes. It is never written after
// initialisation.
var encoders = map[Type]blockEncoder{
	F32:  quantF32,
	F16:  quantF16,
	BF16: quantBF16,
	Q4_0: quantQ4_0,
	Q4_1: quantQ4_1,
	Q5_0: quantQ5_0,
	Q5_1: quantQ5_1,
	Q8_0: quantQ8_0,
	Q4_K: quantQ4K,
	Q5_K: quantQ5K,
	Q6_K: quantQ6K,
}

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t Type) bool { _, ok := encoders[t]; return ok }

// Quantize encodes src as type t into dst. len(src) must be a whole number of
// blocks and dst exactly the bytes those blocks take. Block formats need
// finite input (a NaN or Inf would poison a shared block scale) within the
// range their f16 scales can express; plain float formats accept anything.
func Quantize(t Type, src []float32, dst []byte) error {
	enc, ok := encoders[t]
	if !ok {
		return fmt.Errorf("quantize %s: unsupported type (supported: %s)", t, supportedList(encoders))
	}
	if err := checkSizes("quantize", t, len(src), len(dst)); err != nil {
		return err
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if bs == 1 { // plain element types encode whole slices at once, and take any value
		enc(src, dst)
		return nil
	}
	dec := decoders[t] // every block format written here can be read back
	var back [QK_K]float32
	for i := 0; i < len(src)/bs; i++ {
		x := src[i*bs : (i+1)*bs]
		for j, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("quantize %s: weight %d is %v; block formats need finite values", t, i*bs+j, v)
			}
		}
		blk := dst[i*ts : (i+1)*ts]
		enc(x, blk)
		// Scales are stored as f16: weights beyond what that can scale
		// (|w| of roughly 5e5 for Q4_0, more for the others) would decode
		// as Inf/NaN. Decoding the block back is the one check that covers
		// every format.
		dec(blk, back[:bs])
		for _, v := range back[:bs] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("quantize %s: block %d (weights %d..%d) is out of the format's range: its f16 scale overflows", t, i, i*bs, (i+1)*bs-1)
			}
		}
	}
	return nil
}

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func quantF32(x []float32, b []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

func quantF16(x []float32, b []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], F32ToF16(v))
	}
}

func quantBF16(x []float32, b []byte) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], F32ToBF16(v))
	}
}

// The legacy formats follow ggml's quantize_row_*_ref step by step, with each
// float32 operation rounded on its own (no fused multiply-add), which is also
// what gguf-py does; the result is byte-identical to gguf-py's quantizer.

// signedAbsMax returns the value of largest magnitude, keeping its sign; the
// first one wins a tie, as in ggml.
func signedAbsMax(x []float32) float32 {
	var amax, max float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	return max
}

func minMax(x []float32) (mn, mx float32) {
	mn, mx = x[0], x[0]
	for _, v := range x[1:] {
		mn = min(mn, v)
		mx = max(mx, v)
	}
	return mn, mx
}

// roundAway is C's roundf for |v| < 2^23: halves go away from zero. Adding
// ±0.5 is exact in float64, and the conversion truncates toward zero. It
// avoids math.Round, which is not an intrinsic on amd64.
func roundAway(v float32) int {
	// Copysign instead of a branch: the sign of quantized data is random,
	// and a mispredicted branch per weight dominated the cost.
	return int(float64(v) + math.Copysign(0.5, float64(v)))
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// truncClamp is C's (int) cast of a non-negative float, clamped to [0, hi].
func truncClamp(v float32, hi int) uint8 {
	q := int(v) // truncates toward zero, like the C cast
	return uint8(max(0, min(hi, q)))
}

// quantQ4_0: d = (signed abs-max)/-8, so the extreme weight maps to q = 0 and
// the 16 levels cover [-8d, 7d]; q = trunc(x/d + 8.5).
func quantQ4_0(x []float32, b []byte) {
	d := signedAbsMax(x) / -8
	id := inv(d)
	putF16(b[0:], d)
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		q0 := truncClamp(float32(x[j]*id)+8.5, 15)
		q1 := truncClamp(float32(x[j+16]*id)+8.5, 15)
		qs[j] = q0 | q1<<4
	}
}

// quantQ4_1: d = (max-min)/15, m = min; q = trunc((x-min)/d + 0.5).
func quantQ4_1(x []float32, b []byte) {
	mn, mx := minMax(x)
	d := (mx - mn) / 15
	id := inv(d)
	putF16(b[0:], d)
	putF16(b[2:], mn)
	qs := b[4:20]
	for j := 0; j < 16; j++ {
		q0 := truncClamp(float32((x[j]-mn)*id)+0.5, 15)
		q1 := truncClamp(float32((x[j+16]-mn)*id)+0.5, 15)
		qs[j] = q0 | q1<<4
	}
}

// quantQ5_0: as Q4_0 with 32 levels: d = (signed abs-max)/-16, q = trunc(x/d + 16.5).
func quantQ5_0(x []float32, b []byte) {
	d := signedAbsMax(x) / -16
	id := inv(d)
	putF16(b[0:], d)
	var qh uint32
	qs := b[6:22]
	for j := 0; j < 16; j++ {
		q0 := truncClamp(float32(x[j]*id)+16.5, 31)
		q1 := truncClamp(float32(x[j+16]*id)+16.5, 31)
		qs[j] = q0&0xf | (q1&0xf)<<4
		qh |= uint32(q0>>4)<<j | uint32(q1>>4)<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[2:], qh)
}

// quantQ5_1: as Q4_1 with 32 levels.
func quantQ5_1(x []float32, b []byte) {
	mn, mx := minMax(x)
	d := (mx - mn) / 31
	id := inv(d)
	putF16(b[0:], d)
	putF16(b[2:], mn)
	var qh uint32
	qs := b[8:24]
	for j := 0; j < 16; j++ {
		q0 := truncClamp(float32((x[j]-mn)*id)+0.5, 31)
		q1 := truncClamp(float32((x[j+16]-mn)*id)+0.5, 31)
		qs[j] = q0&0xf | (q1&0xf)<<4
		qh |= uint32(q0>>4)<<j | uint32(q1>>4)<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[4:], qh)
}

// quantQ8_0: d = absmax/127, q = round(x/d) with halves away from zero (C roundf).
func quantQ8_0(x []float32, b []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	id := inv(d)
	putF16(b[0:], d)
	qs := b[2:34]
	for j, v := range x[:32] {
		qs[j] = byte(int8(roundAway(v * id)))
	}
}

package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// The decoders below reproduce gguf-py's quants.py bit for bit. numpy does
// every array operation as a separate float32 rounding, so wherever the
// reference multiplies and then adds, the product is wrapped in float32(...):
// the Go spec lets a compiler fuse x*y+z into one FMA (gc may on arm64,
// ppc64, s390x, riscv64), and an explicit conversion is what forbids that.

// blockDecoder decodes one block (t.TypeSize() bytes) into t.BlockSize() weights.
type blockDecoder func(block []byte, out []float32)

// decoders lists the formats Dequantize handles. It is never written after
// initialisation.
var decoders = map[Type]blockDecoder{
	F32:    dequantF32,
	F16:    dequantF16,
	BF16:   dequantBF16,
	Q4_0:   dequantQ4_0,
	Q4_1:   dequantQ4_1,
	Q5_0:   dequantQ5_0,
	Q5_1:   dequantQ5_1,
	Q8_0:   dequantQ8_0,
	Q2_K:   dequantQ2K,
	Q3_K:   dequantQ3K,
	Q4_K:   dequantQ4K,
	Q5_K:   dequantQ5K,
	Q6_K:   dequantQ6K,
	IQ4_NL: dequantIQ4NL,
	IQ4_XS: dequantIQ4XS,
	MXFP4:  dequantMXFP4,
}

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t Type) bool { _, ok := decoders[t]; return ok }

// Dequantize decodes len(dst) weights of type t from src. len(dst) must be a
// whole number of blocks and src exactly the bytes those blocks take.
func Dequantize(t Type, src []byte, dst []float32) error {
	dec, ok := decoders[t]
	if !ok {
		return fmt.Errorf("dequantize %s: unsupported type (supported: %s)", t, supportedList(decoders))
	}
	if err := checkSizes("dequantize", t, len(dst), len(src)); err != nil {
		return err
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if bs == 1 { // plain element types decode whole slices at once: no per-element call
		dec(src, dst)
		return nil
	}
	for i := 0; i < len(dst)/bs; i++ {
		dec(src[i*ts:(i+1)*ts], dst[i*bs:(i+1)*bs])
	}
	return nil
}

// checkSizes verifies that n weights are whole blocks of t and take exactly
// nbytes bytes.
func checkSizes(op string, t Type, n, nbytes int) error {
	want, err := t.RowBytes(int64(n))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if int64(nbytes) != want {
		return fmt.Errorf("%s %s: %d weights take %d bytes, got %d", op, t, n, want, nbytes)
	}
	return nil
}

// supportedList names the types in m in id order, for error messages.
func supportedList[V any](m map[Type]V) string {
	var names []string
	for t := Type(0); t <= MXFP4; t++ {
		if _, ok := m[t]; ok {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ", ")
}

func f16At(b []byte, i int) float32 { return F16ToF32(binary.LittleEndian.Uint16(b[i:])) }

// dequantF32: little-endian float32 values.
func dequantF32(src []byte, out []float32) {
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// dequantF16: little-endian binary16 values.
func dequantF16(src []byte, out []float32) {
	for i := range out {
		out[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// dequantBF16: little-endian bfloat16 values.
func dequantBF16(src []byte, out []float32) {
	for i := range out {
		out[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// dequantQ4_0: f16 d, 16 bytes of nibbles. Low nibbles are weights 0..15,
// high nibbles 16..31; w = d·(q-8).
func dequantQ4_0(b []byte, out []float32) {
	d := f16At(b, 0)
	qs := b[2:18]
	out = out[:32] // lets the compiler drop bounds checks below
	for j := 0; j < 16; j++ {
		out[j] = d * float32(int(qs[j]&0xf)-8)
		out[j+16] = d * float32(int(qs[j]>>4)-8)
	}
}

// dequantQ4_1: f16 d, f16 m, 16 bytes of nibbles as Q4_0; w = d·q + m.
func dequantQ4_1(b []byte, out []float32) {
	d, m := f16At(b, 0), f16At(b, 2)
	qs := b[4:20]
	out = out[:32] // lets the compiler drop bounds checks below
	for j := 0; j < 16; j++ {
		out[j] = float32(d*float32(qs[j]&0xf)) + m
		out[j+16] = float32(d*float32(qs[j]>>4)) + m
	}
}

// dequantQ5_0: f16 d, u32 qh (bit j is the fifth bit of weight j), 16 bytes
// of low nibbles as Q4_0; w = d·(q-16).
func dequantQ5_0(b []byte, out []float32) {
	d := f16At(b, 0)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	out = out[:32] // lets the compiler drop bounds checks below
	for j := 0; j < 16; j++ {
		lo := int(qs[j]&0xf) | int(qh>>j&1)<<4
		hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
		out[j] = d * float32(lo-16)
		out[j+16] = d * float32(hi-16)
	}
}

// dequantQ5_1: f16 d, f16 m, u32 qh, 16 bytes of nibbles as Q5_0; w = d·q + m.
func dequantQ5_1(b []byte, out []float32) {
	d, m := f16At(b, 0), f16At(b, 2)
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	out = out[:32] // lets the compiler drop bounds checks below
	for j := 0; j < 16; j++ {
		lo := qs[j]&0xf | byte(qh>>j&1)<<4
		hi := qs[j]>>4 | byte(qh>>(j+16)&1)<<4
		out[j] = float32(d*float32(lo)) + m
		out[j+16] = float32(d*float32(hi)) + m
	}
}

// dequantQ8_0: f16 d, 32 int8; w = q·d.
func dequantQ8_0(b []byte, out []float32) {
	d := f16At(b, 0)
	qs := b[2:34]
	out = out[:32]
	for j, q := range qs {
		out[j] = float32(int8(q)) * d
	}
}

// dequantQ2K: 16 bytes of scales (low nibble scale, high nibble min, one per
// 16 weights), 64 bytes of 2-bit quants, f16 d, f16 dmin. Quant byte
// qs[32h+j] holds weights 128h+32s+j in bits 2s..2s+1; w = (d·sc)·q - dmin·m.
func dequantQ2K(b []byte, out []float32) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := f16At(b, 80), f16At(b, 82)
	var dl, ml [16]float32
	for i, sc := range scales {
		dl[i] = d * float32(sc&0xf)
		ml[i] = dmin * float32(sc>>4)
	}
	out = out[:QK_K]
	// Each quant byte feeds four weights 32 apart; walking bytes keeps every
	// shift constant. Scale group of weight 128h+32s+16g+j is 8h+2s+g.
	for h := 0; h < 2; h++ {
		for g := 0; g < 2; g++ {
			k := 8*h + g
			o := out[128*h+16*g : 128*h+16*g+112]
			q := qs[32*h+16*g : 32*h+16*g+16]
			for j, v := range q {
				o[j] = float32(dl[k]*float32(v&3)) - ml[k]
				o[j+32] = float32(dl[k+2]*float32(v>>2&3)) - ml[k+2]
				o[j+64] = float32(dl[k+4]*float32(v>>4&3)) - ml[k+4]
				o[j+96] = float32(dl[k+6]*float32(v>>6)) - ml[k+6]
			}
		}
	}
}

// dequantQ3K: 32 bytes hmask, 64 bytes 2-bit quants, 12 bytes of 6-bit
// scales, f16 d. The low two bits come as in Q2_K; bit b of hmask[j] belongs
// to weight 32b+j and, when clear, subtracts 4. Scale i (one per 16 weights)
// has its low nibble in byte i%8 (high half for i >= 8) and its top two bits
// in byte 8+i%4 at bit 2·(i/4); it is stored offset by 32.
// w = (d·(sc-32))·q.
func dequantQ3K(b []byte, out []float32) {
	hmask, qs, sb := b[0:32], b[32:96], b[96:108]
	d := f16At(b, 108)
	var dl [16]float32
	for i := range dl {
		lo := sb[i%8] >> (4 * (i / 8)) & 0xf
		hi := sb[8+i%4] >> (2 * (i / 4)) & 3
		dl[i] = d * float32(int8(lo|hi<<4)-32)
	}
	out = out[:QK_K]
	// Walk quant bytes as in Q2_K; weight 128h+32s+j uses hmask bit 4h+s.
	for h := 0; h < 2; h++ {
		hshift := uint(4*h) & 7
		for g := 0; g < 2; g++ {
			k := 8*h + g
			o := out[128*h+16*g : 128*h+16*g+112]
			q := qs[32*h+16*g : 32*h+16*g+16]
			hm := hmask[16*g : 16*g+16]
			for j, v := range q {
				m := ^hm[j] >> hshift // a set bit here means "subtract 4"
				o[j] = dl[k] * float32(int8(v&3)-int8(m&1)<<2)
				o[j+32] = dl[k+2] * float32(int8(v>>2&3)-int8(m>>1&1)<<2)
				o[j+64] = dl[k+4] * float32(int8(v>>4&3)-int8(m>>2&1)<<2)
				o[j+96] = dl[k+6] * float32(int8(v>>6)-int8(m>>3&1)<<2)
			}
		}
	}
}

// kScaleMin unpacks the eight 6-bit scales and mins shared by Q4_K and Q5_K:
// bytes 0..3 hold scales 0..3 (low 6 bits) and the top bits of scales 4..7,
// bytes 4..7 the same for the mins, bytes 8..11 the low nibbles of scale 4+k
// (low half) and min 4+k (high half).
func kScaleMin(s []byte) (sc, m [8]uint8) {
	for k := 0; k < 4; k++ {
		sc[k] = s[k] & 0x3f
		m[k] = s[4+k] & 0x3f
		sc[4+k] = s[8+k]&0xf | (s[k]>>2)&0x30
		m[4+k] = s[8+k]>>4 | (s[4+k]>>2)&0x30
	}
	return sc, m
}

// dequantQ4K: f16 d, f16 dmin, 12 bytes of scales/mins (kScaleMin), 128 bytes
// of nibbles. Sub-block 2c (weights 64c..64c+31) is the low nibbles of
// qs[32c..32c+31], sub-block 2c+1 the high ones; w = (d·sc)·q - dmin·m.
func dequantQ4K(b []byte, out []float32) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	sc, m := kScaleMin(b[4:16])
	qs := b[16:144]
	out = out[:QK_K]
	for c := 0; c < 4; c++ {
		ds0, dm0 := d*float32(sc[2*c]), dmin*float32(m[2*c])
		ds1, dm1 := d*float32(sc[2*c+1]), dmin*float32(m[2*c+1])
		q := qs[32*c : 32*c+32]
		lo, hi := out[64*c:64*c+32], out[64*c+32:64*c+64]
		for j, v := range q {
			lo[j] = float32(ds0*float32(v&0xf)) - dm0
			hi[j] = float32(ds1*float32(v>>4)) - dm1
		}
	}
}

// dequantQ5K: as Q4_K with 32 bytes qh between the scales and the nibbles;
// bit sub of qh[j] is the fifth bit of weight 32·sub+j.
func dequantQ5K(b []byte, out []float32) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	sc, m := kScaleMin(b[4:16])
	qh, qs := b[16:48], b[48:176]
	out = out[:QK_K]
	for c := 0; c < 4; c++ {
		ds0, dm0 := d*float32(sc[2*c]), dmin*float32(m[2*c])
		ds1, dm1 := d*float32(sc[2*c+1]), dmin*float32(m[2*c+1])
		hshift := uint(2*c) & 7
		q := qs[32*c : 32*c+32]
		lo, hi := out[64*c:64*c+32], out[64*c+32:64*c+64]
		for j, v := range q {
			h := qh[j] >> hshift
			lo[j] = float32(ds0*float32(v&0xf|(h&1)<<4)) - dm0
			hi[j] = float32(ds1*float32(v>>4|(h&2)<<3)) - dm1
		}
	}
}

// dequantQ6K: 128 bytes ql (low nibbles), 64 bytes qh (2-bit tops), 16 int8
// scales (one per 16 weights), f16 d. In each 128-weight half h, weight r
// takes its nibble from ql[64h + r%64] (high nibble when r >= 64) and its top
// bits from qh[32h + r%32] at bit 2·(r/32); w = (d·sc)·(q-32).
func dequantQ6K(b []byte, out []float32) {
	ql, qh, scales := b[0:128], b[128:192], b[192:208]
	d := f16At(b, 208)
	var dl [16]float32
	for i, sc := range scales {
		dl[i] = d * float32(int8(sc))
	}
	out = out[:QK_K]
	// Weights 128h+32s+16g+j for s = 0..3 share qh byte 32h+16g+j; s = 0, 2
	// take the low/high nibble of ql[64h+16g+j], s = 1, 3 those of the byte 32 on.
	for h := 0; h < 2; h++ {
		for g := 0; g < 2; g++ {
			k := 8*h + g
			o := out[128*h+16*g : 128*h+16*g+112]
			l0 := ql[64*h+16*g : 64*h+16*g+16]
			l1 := ql[64*h+32+16*g : 64*h+32+16*g+16]
			hb := qh[32*h+16*g : 32*h+16*g+16]
			for j := range hb {
				a, c, t := l0[j], l1[j], hb[j]
				o[j] = dl[k] * float32(int8(a&0xf|(t&3)<<4)-32)
				o[j+32] = dl[k+2] * float32(int8(c&0xf|(t>>2&3)<<4)-32)
				o[j+64] = dl[k+4] * float32(int8(a>>4|(t>>4&3)<<4)-32)
				o[j+96] = dl[k+6] * float32(int8(c>>4|(t>>6)<<4)-32)
			}
		}
	}
}

// kvaluesIQ4NL is the non-linear 4-bit grid of IQ4_NL and IQ4_XS.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// dequantIQ4NL: f16 d, 16 bytes of nibbles laid out as Q4_0, each an index
// into kvaluesIQ4NL; w = d·kvalue.
func dequantIQ4NL(b []byte, out []float32) {
	d := f16At(b, 0)
	qs := b[2:18]
	out = out[:32] // lets the compiler drop bounds checks below
	for j := 0; j < 16; j++ {
		out[j] = d * float32(kvaluesIQ4NL[qs[j]&0xf])
		out[j+16] = d * float32(kvaluesIQ4NL[qs[j]>>4])
	}
}

// dequantIQ4XS: f16 d, u16 scales_h (2 bits per sub-block), 4 bytes scales_l
// (a nibble per sub-block), 128 bytes of nibbles: sub-block s (32 weights) is
// the low then the high nibbles of qs[16s..16s+15]. Scales are 6-bit, offset
// by 32; w = (d·(sc-32))·kvalue.
func dequantIQ4XS(b []byte, out []float32) {
	d := f16At(b, 0)
	sh := binary.LittleEndian.Uint16(b[2:])
	sl, qs := b[4:8], b[8:136]
	for s := 0; s < 8; s++ {
		lo := sl[s/2] >> (4 * (s % 2)) & 0xf
		hi := uint8(sh>>(2*s)) & 3
		dl := d * float32(int8(lo|hi<<4)-32)
		q := qs[16*s : 16*s+16]
		o := out[32*s : 32*s+32]
		for j := 0; j < 16; j++ {
			o[j] = dl * float32(kvaluesIQ4NL[q[j]&0xf])
			o[j+16] = dl * float32(kvaluesIQ4NL[q[j]>>4])
		}
	}
}

// kvaluesMXFP4 are the e2m1 values doubled; e8m0Half halves the scale back.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is half of the power of two 2^(e-127) that an E8M0 byte encodes,
// built directly as float32 bits (a subnormal for e < 2).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// dequantMXFP4: one E8M0 scale byte, 16 bytes of e2m1 nibbles laid out as
// Q4_0; w = e8m0Half(e)·kvalue.
func dequantMXFP4(b []byte, out []float32) {
	d := e8m0Half(b[0])
	qs := b[1:17]
	out = out[:32] // lets the compiler drop bounds checks below
	for j := 0; j < 16; j++ {
		out[j] = d * float32(kvaluesMXFP4[qs[j]&0xf])
		out[j+16] = d * float32(kvaluesMXFP4[qs[j]>>4])
	}
}

package quant

import "math"

// F16ToF32 widens an IEEE 754 binary16 value to float32. Every half value is
// exactly representable, so this is exact: subnormals are normalised, ±Inf
// stays infinite and a NaN keeps its sign and payload (shifted into the high
// mantissa bits, as numpy and ggml's software path do).
func F16ToF32(h uint16) float32 {
	// Move exponent and mantissa into float32 position and rebias; only
	// Inf/NaN and subnormals need fixing up, which keeps the common path
	// branch-free enough to decode F16 tensors quickly.
	const expMask = 0x7c00 << 13
	o := uint32(h&0x7fff) << 13
	e := o & expMask
	o += (127 - 15) << 23
	switch e {
	case expMask: // Inf/NaN: exponent all ones, mantissa (payload) kept
		o += (128 - 16) << 23
	case 0: // zero or subnormal: m·2^-24, exactly (1.m')·2^-14 - 2^-14
		o += 1 << 23
		o = math.Float32bits(math.Float32frombits(o) - math.Float32frombits(113<<23))
	}
	return math.Float32frombits(o | uint32(h&0x8000)<<16)
}

// F32ToF16 narrows a float32 to binary16, rounding to nearest with ties to
// even. Values too large for a half become ±Inf, tiny ones become subnormals
// or ±0. A NaN stays a NaN of the same sign: it is made quiet and keeps the
// top of its payload, which is what the x86 F16C instruction ggml uses does.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff

	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	// Unbiased exponent rebiased for half.
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is subnormal (or zero): value = (1.mant)·2^(exp-127), the half
		// subnormal unit is 2^-24, so the kept integer is full >> shift.
		if e < -10 {
			// Below half the smallest subnormal (2^-25), even after rounding.
			return sign
		}
		full := mant | 0x800000 // with the implicit bit; exp != 0 here since e >= -10
		shift := uint32(14 - e) // 14..24
		return sign | uint16(roundShift(full, shift))
	}
	// Normal: rebias, then drop 13 mantissa bits rounding to nearest even by
	// adding just under half an ulp plus the kept lowest bit (no data-
	// dependent branch). A carry out of the mantissa correctly bumps the
	// exponent, and into Inf (0x7c00) past the largest half.
	v := uint32(e)<<23 | mant
	v = (v + 0xfff + (v >> 13 & 1)) >> 13
	return sign | uint16(v)
}

// roundShift returns x >> s rounded to nearest, ties to even.
func roundShift(x, s uint32) uint32 {
	q := x >> s
	rem := x & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// BF16ToF32 widens a bfloat16 value: it is the top half of a float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows a float32 to bfloat16 the way ggml (and gguf-py) do:
// round to nearest even, and a NaN is forced quiet so that truncation cannot
// turn it into an infinity.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	// Overflow past the largest finite value rounds into Inf, as it should.
	return uint16((uint64(b) + 0x7fff + uint64(b>>16&1)) >> 16)
}

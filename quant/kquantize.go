package quant

import "math"

// K-quant encoders. These are not ggml's (importance-weighted, heavily
// searched) quantizers, only a straightforward scheme that is close in
// quality: each sub-block gets the least-squares (scale, min) or scale found
// among a small sweep of candidate grids, the sub-block parameters are then
// quantized to 6 or 8 bits against one f16 super-block scale, and every
// weight is finally re-quantized against the parameters as actually stored,
// so the rounding of the stored scales costs as little as possible.

// roundInt rounds half away from zero and clamps to [lo, hi]. It clamps
// before converting, since float-to-int conversion of a value out of int
// range is implementation-defined in Go.
func roundInt(v float32, lo, hi int) int {
	return roundAway(max(float32(lo), min(float32(hi), v)))
}

// f16RoundUp is f rounded through binary16 to the nearest half whose
// magnitude is not below |f|. Super-block scales round this way so that no
// sub-block scale divided by them exceeds the integer range; rounding to
// nearest could cost several percent where d lands among f16 subnormals.
func f16RoundUp(f float32) float32 {
	h := F32ToF16(f)
	if abs32(F16ToF32(h)) < abs32(f) && h&0x7fff < 0x7bff {
		h++ // the next half away from zero
	}
	return F16ToF32(h)
}

// fitAffine finds scale ≥ 0 and mn ≥ 0 with x ≈ scale·q - mn for integers q
// in [0, nmax], minimising the squared error. The range always includes 0
// (mn ≥ 0 because the formats store the min unsigned and subtract it).
func fitAffine(x []float32, nmax int) (scale, mn float32) {
	lo, hi := minMax(x)
	lo = min(lo, 0)
	if hi <= lo {
		return 0, -lo
	}
	n := float32(len(x))
	var sx float32
	for _, v := range x {
		sx += v
	}
	bestErr := float32(math.Inf(1))
	scale, mn = (hi-lo)/float32(nmax), -lo
	var qbuf [32]float32
	q := qbuf[:len(x)]
	// Sweep grids slightly narrower and wider than the min/max one: clipping
	// an outlier often buys a finer step for the rest.
	for step := -10; step <= 10; step++ {
		iscale := (float32(nmax) + 0.1*float32(step)) / (hi - lo)
		var sq, sq2, sqx float32
		for i, v := range x {
			// v-lo >= 0, so adding a half and truncating rounds to nearest.
			qi := float32(min(nmax, int(iscale*(v-lo)+0.5)))
			q[i] = qi
			sq += qi
			sq2 += qi * qi
			sqx += qi * v
		}
		// Least squares for v ≈ s·q + b.
		det := n*sq2 - sq*sq
		if det <= 0 {
			continue
		}
		s := (n*sqx - sq*sx) / det
		b := (sq2*sx - sq*sqx) / det
		if b > 0 { // the format cannot add: refit through the origin
			b = 0
			s = sqx / sq2
		}
		if s <= 0 {
			continue
		}
		var e float32
		for i, v := range x {
			d := s*q[i] + b - v
			e += d * d
		}
		if e < bestErr {
			bestErr, scale, mn = e, s, -b
		}
	}
	return scale, mn
}

// fitSymmetric finds a signed scale with x ≈ scale·q for integers q in
// [-nmax, nmax-1], minimising the squared error. Like Q4_0 it gives the
// extreme weight the level -nmax, which uses the asymmetric range fully.
func fitSymmetric(x []float32, nmax int) float32 {
	mx := signedAbsMax(x)
	if mx == 0 {
		return 0
	}
	base := -float32(nmax) / mx
	best, bestErr := 1/base, float32(math.Inf(1))
	var qbuf [16]float32
	q := qbuf[:len(x)]
	for step := -9; step <= 9; step++ {
		iscale := base * (1 + 0.01*float32(step))
		var sq2, sqx float32
		for i, v := range x {
			qi := float32(roundInt(iscale*v, -nmax, nmax-1))
			q[i] = qi
			sq2 += qi * qi
			sqx += qi * v
		}
		if sq2 == 0 {
			continue
		}
		s := sqx / sq2
		var e float32
		for i, v := range x {
			d := s*q[i] - v
			e += d * d
		}
		if e < bestErr {
			best, bestErr = s, e
		}
	}
	return best
}

// quantKAffine fills the parts Q4_K and Q5_K share: f16 d and dmin, the
// packed 6-bit scales and mins (the inverse of kScaleMin), and the 5- or
// 4-bit weight values q[256] in [0, nmax].
func quantKAffine(x []float32, b []byte, nmax int, q *[QK_K]uint8) {
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for s := 0; s < 8; s++ {
		scales[s], mins[s] = fitAffine(x[32*s:32*s+32], nmax)
		maxScale = max(maxScale, scales[s])
		maxMin = max(maxMin, mins[s])
	}
	d, dmin := f16RoundUp(maxScale/63), f16RoundUp(maxMin/63)
	putF16(b[0:], d)
	putF16(b[2:], dmin)
	var sc, m [8]uint8
	for s := 0; s < 8; s++ {
		if d > 0 {
			sc[s] = uint8(roundInt(scales[s]/d, 0, 63))
		}
		if dmin > 0 {
			m[s] = uint8(roundInt(mins[s]/dmin, 0, 63))
		}
	}
	p := b[4:16]
	for k := 0; k < 4; k++ {
		p[k] = sc[k] | (sc[4+k]>>4)<<6
		p[4+k] = m[k] | (m[4+k]>>4)<<6
		p[8+k] = sc[4+k]&0xf | (m[4+k]&0xf)<<4
	}
	// Re-quantize against the stored parameters.
	for s := 0; s < 8; s++ {
		ds := d * float32(sc[s])
		dm := dmin * float32(m[s])
		for j := 0; j < 32; j++ {
			i := 32*s + j
			if ds == 0 {
				q[i] = 0
				continue
			}
			q[i] = uint8(roundInt((x[i]+dm)/ds, 0, nmax))
		}
	}
}

// quantQ4K writes the layout dequantQ4K reads.
func quantQ4K(x []float32, b []byte) {
	var q [QK_K]uint8
	quantKAffine(x, b, 15, &q)
	qs := b[16:144]
	for c := 0; c < 4; c++ {
		for j := 0; j < 32; j++ {
			qs[32*c+j] = q[64*c+j] | q[64*c+32+j]<<4
		}
	}
}

// quantQ5K writes the layout dequantQ5K reads.
func quantQ5K(x []float32, b []byte) {
	var q [QK_K]uint8
	quantKAffine(x, b, 31, &q)
	qh, qs := b[16:48], b[48:176]
	clear(qh)
	for c := 0; c < 4; c++ {
		for j := 0; j < 32; j++ {
			qs[32*c+j] = q[64*c+j]&0xf | (q[64*c+32+j]&0xf)<<4
		}
	}
	for i, v := range q {
		qh[i%32] |= (v >> 4) << (i / 32)
	}
}

// quantQ6K writes the layout dequantQ6K reads: 16 signed sub-block scales
// against one f16 d, weights in [-32, 31] stored offset by 32.
func quantQ6K(x []float32, b []byte) {
	var scales [16]float32
	for s := range scales {
		scales[s] = fitSymmetric(x[16*s:16*s+16], 32)
	}
	// The scale of largest magnitude maps to -128 (d has the opposite sign),
	// as weights do in Q4_0, to use the asymmetric int8 range fully.
	mx := signedAbsMax(scales[:])
	ql, qh, sb := b[0:128], b[128:192], b[192:208]
	clear(ql)
	clear(qh)
	// An all-zero block keeps d = 0 and every q = 0 (stored as 32).
	var d float32
	if mx != 0 {
		d = f16RoundUp(mx / -128)
	}
	putF16(b[208:], d)
	for s := range scales {
		var sc int8
		if d != 0 {
			sc = int8(roundInt(scales[s]/d, -128, 127))
		}
		sb[s] = byte(sc)
		ds := d * float32(sc)
		for j := 0; j < 16; j++ {
			i := 16*s + j
			q := 0
			if ds != 0 {
				q = roundInt(x[i]/ds, -32, 31)
			}
			packQ6(ql, qh, i, uint8(q+32))
		}
	}
}

// packQ6 stores the 6-bit value v of weight i (see dequantQ6K for the layout).
func packQ6(ql, qh []byte, i int, v uint8) {
	h, r := i/128, i%128
	ql[64*h+r%64] |= (v & 0xf) << (4 * (r / 64))
	qh[32*h+r%32] |= (v >> 4) << (2 * (r / 32))
}

package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// halfValue is the value of a finite binary16 pattern, computed from the
// definition in float64 (independently of the code under test).
func halfValue(h uint16) float64 {
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	var v float64
	if e == 0 {
		v = math.Ldexp(m, -24)
	} else {
		v = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func TestF16ToF32AllValues(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := quant.F16ToF32(h)
		switch e := h >> 10 & 0x1f; {
		case e == 0x1f && h&0x3ff == 0:
			if !math.IsInf(float64(got), 1-2*int(h>>15)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want %sInf", h, got, map[bool]string{true: "-", false: "+"}[h>>15 == 1])
			}
		case e == 0x1f:
			// NaN: sign and payload carried into the top of the float32 mantissa.
			want := uint32(h&0x8000)<<16 | 0x7f800000 | uint32(h&0x3ff)<<13
			if math.Float32bits(got) != want {
				t.Fatalf("F16ToF32(%#04x) = %#08x, want NaN %#08x", h, math.Float32bits(got), want)
			}
		default:
			want := halfValue(h)
			if float64(got) != want || math.Signbit(float64(got)) != (h>>15 == 1) {
				t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, got, want)
			}
		}
	}
}

func TestF16RoundTripAllValues(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := quant.F16ToF32(h)
		back := quant.F32ToF16(f)
		isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
		if !isNaN {
			if back != h {
				t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
			}
			continue
		}
		// A NaN stays a NaN of the same sign, made quiet; a quiet one keeps its payload.
		if back&0x7e00 != 0x7e00 || back&0x8000 != h&0x8000 {
			t.Fatalf("NaN %#04x came back as %#04x", h, back)
		}
		if h&0x0200 != 0 && back != h {
			t.Fatalf("quiet NaN %#04x came back as %#04x", h, back)
		}
	}
}

// refF32ToF16 rounds x to binary16 to nearest, ties to even, by searching
// the ordered finite half values (non-negative patterns 0..0x7bff increase
// with their value). Finite x only.
func refF32ToF16(x float32) uint16 {
	a := math.Abs(float64(x))
	var sign uint16
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	// 65520 is half-way between the largest half, 65504, and 2^16, the next
	// value the format would have: the tie goes to the even neighbour, Inf.
	if a >= 65520 {
		return sign | 0x7c00
	}
	lo, hi := 0, 0x7bff // invariant: halfValue(lo) <= a
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if halfValue(uint16(mid)) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	h := uint16(lo)
	if h == 0x7bff {
		return sign | h
	}
	dlo, dhi := a-halfValue(h), halfValue(h+1)-a
	if dhi < dlo || (dhi == dlo && h&1 == 1) {
		h++
	}
	return sign | h
}

func TestF32ToF16RoundsToNearestEven(t *testing.T) {
	check := func(x float32) {
		t.Helper()
		if got, want := quant.F32ToF16(x), refF32ToF16(x); got != want {
			t.Fatalf("F32ToF16(%v = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	// Every midpoint between neighbouring halves (a tie), and the float32s
	// just either side of it, for both signs. Midpoints need 12 significant
	// bits, so float32 holds them exactly.
	for h := uint16(0); h < 0x7bff; h++ {
		mid := float32((halfValue(h) + halfValue(h+1)) / 2)
		for _, x := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(x)
			check(-x)
		}
	}
	// Hand-picked ties: to even below, to even above, into Inf, into zero.
	for _, tc := range []struct {
		x    float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},           // tie between 1 and 1+2^-10: even is 1
		{1 + 3.0/2048, 0x3c02},           // tie between 1+2^-10 and 1+2^-9: even is the upper
		{65504, 0x7bff},                  // largest half
		{65519.996, 0x7bff},              // just below the tie
		{65520, 0x7c00},                  // tie with 2^16 rounds to Inf
		{float32(math.Ldexp(1, -25)), 0}, // half the smallest subnormal: tie to zero
		{math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 0x0001},
		{float32(math.Ldexp(3, -25)), 0x0002},    // 1.5 subnormal units: tie to 2
		{float32(math.Ldexp(1, -14)), 0x0400},    // smallest normal
		{float32(math.Ldexp(2047, -25)), 0x0400}, // subnormal that rounds up into the normals
		{float32(math.Copysign(0, -1)), 0x8000},
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{1e-30, 0},
		{-1e30, 0xfc00},
	} {
		if got := quant.F32ToF16(tc.x); got != tc.want {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tc.x, got, tc.want)
		}
	}
	// Random bit patterns across the whole float32 range.
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1<<20; i++ {
		x := math.Float32frombits(r.Uint32())
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		check(x)
	}
	// NaNs stay NaNs with their sign.
	for _, b := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff} {
		got := quant.F32ToF16(math.Float32frombits(b))
		if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || uint32(got>>15) != b>>31 {
			t.Errorf("F32ToF16(NaN %#08x) = %#04x, not a NaN of the same sign", b, got)
		}
	}
}

// refF32ToBF16 rounds a finite x to bfloat16, to nearest with ties to even,
// comparing the two candidate neighbours in float64.
func refF32ToBF16(x float32) uint16 {
	b := math.Float32bits(x)
	lo := uint16(b >> 16)
	val := func(h uint16) float64 {
		if h&0x7fff == 0x7f80 { // Inf stands for 2^128 when rounding
			return math.Copysign(math.Ldexp(1, 128), float64(x))
		}
		return float64(math.Float32frombits(uint32(h) << 16))
	}
	a, l, u := math.Abs(float64(x)), math.Abs(val(lo)), math.Abs(val(lo+1))
	if u-a < a-l || (u-a == a-l && lo&1 == 1) {
		return lo + 1
	}
	return lo
}

func TestBF16(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := quant.BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", h, math.Float32bits(f))
		}
		if f != f && h&0x40 == 0 {
			continue // a signalling NaN is made quiet, checked below
		}
		if back := quant.F32ToBF16(f); back != h {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", h, back)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1<<20; i++ {
		x := math.Float32frombits(r.Uint32())
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		if got, want := quant.F32ToBF16(x), refF32ToBF16(x); got != want {
			t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(x), got, want)
		}
	}
	for _, tc := range []struct {
		bits uint32
		want uint16
	}{
		{0x3f808000, 0x3f80}, // tie, lower is even
		{0x3f818000, 0x3f82}, // tie, upper is even
		{0x3f808001, 0x3f81}, // just above the tie
		{0x7f7fffff, 0x7f80}, // largest float32 rounds to Inf
		{0x7f800001, 0x7fc0}, // signalling NaN whose payload is all below the cut: quiet, not Inf
		{0xff800001, 0xffc0},
		{0x7fc00000, 0x7fc0},
	} {
		if got := quant.F32ToBF16(math.Float32frombits(tc.bits)); got != tc.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", tc.bits, got, tc.want)
		}
	}
}

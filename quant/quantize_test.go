package quant_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// quantTypes are the formats Quantize writes.
var quantTypes = []quant.Type{
	quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
	quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K,
}

func gaussian(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// roundTrip quantizes x as t and decodes it again.
func roundTrip(t testing.TB, typ quant.Type, x []float32) ([]byte, []float32) {
	t.Helper()
	n, err := typ.RowBytes(int64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, n)
	if err := quant.Quantize(typ, x, q); err != nil {
		t.Fatalf("Quantize(%s): %v", typ, err)
	}
	y := make([]float32, len(x))
	if err := quant.Dequantize(typ, q, y); err != nil {
		t.Fatalf("Dequantize(%s): %v", typ, err)
	}
	return q, y
}

// relRMS is the RMS of y-x relative to the RMS of x.
func relRMS(x, y []float32) float64 {
	var e, s float64
	for i := range x {
		d := float64(y[i]) - float64(x[i])
		e += d * d
		s += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(e / s)
}

func TestQuantizeRoundTripError(t *testing.T) {
	x := gaussian(64*quant.QK_K, 42)
	for _, tc := range []struct {
		typ   quant.Type
		bound float64
	}{
		{quant.F32, 0},
		{quant.F16, 5e-4},
		{quant.BF16, 4e-3},
		// Bounds sit a few percent above what each scheme gives on unit
		// Gaussians. Q4_0 and Q5_0 follow ggml's reference rounding, whose
		// grid (abs-max/8 and /16) is coarse: about 0.086 and 0.042.
		{quant.Q8_0, 0.006},
		{quant.Q6_K, 0.018},
		{quant.Q5_0, 0.045},
		{quant.Q5_1, 0.040},
		{quant.Q5_K, 0.038},
		{quant.Q4_0, 0.090},
		{quant.Q4_1, 0.082},
		{quant.Q4_K, 0.075},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			// Real weights are small (std ~0.02), which puts K-quant
			// super-block scales near f16's subnormal range; quality must
			// hold there too, and for large values.
			for _, scale := range []float32{1, 0.02, 100} {
				xs := make([]float32, len(x))
				for i, v := range x {
					xs[i] = v * scale
				}
				_, y := roundTrip(t, tc.typ, xs)
				e := relRMS(xs, y)
				t.Logf("%s, std %g: relative RMS error %.5f", tc.typ, scale, e)
				if e > tc.bound || math.IsNaN(e) {
					t.Errorf("%s, std %g: relative RMS error %.5f above %.5f", tc.typ, scale, e, tc.bound)
				}
			}
		})
	}
}

// TestQuantizeReferenceRounding pins ggml's reference rounding on hand-made
// blocks: Q4_0 computes trunc(x/d + 8.5) with d = (signed abs-max)/-8, so a
// half step rounds up in q; Q8_0 uses roundf, halves away from zero.
func TestQuantizeReferenceRounding(t *testing.T) {
	t.Run("Q4_0", func(t *testing.T) {
		x := make([]float32, 32)
		x[0] = -8 // abs-max, negative: d = 1, q = 0
		x[1], x[2], x[3], x[4] = 0.5, -0.5, 1.5, -2.5
		x[16], x[17] = 6.9, 7.6 // 7.6 would be q = 16: clamped to 15
		b := make([]byte, 18)
		if err := quant.Quantize(quant.Q4_0, x, b); err != nil {
			t.Fatal(err)
		}
		if d := uint16(b[0]) | uint16(b[1])<<8; d != 0x3c00 {
			t.Fatalf("d = %#04x, want 1.0 (0x3c00)", d)
		}
		q := func(j int) int {
			if j < 16 {
				return int(b[2+j] & 0xf)
			}
			return int(b[2+j-16] >> 4)
		}
		want := map[int]int{0: 0, 1: 9, 2: 8, 3: 10, 4: 6, 5: 8, 16: 15, 17: 15}
		for j, w := range want {
			if got := q(j); got != w {
				t.Errorf("weight %d (%v): q = %d, want %d", j, x[j], got, w)
			}
		}
		// A positive abs-max gives a negative d; the extreme still maps to q = 0.
		x[0] = 8
		if err := quant.Quantize(quant.Q4_0, x, b); err != nil {
			t.Fatal(err)
		}
		if d := uint16(b[0]) | uint16(b[1])<<8; d != 0xbc00 || q(0) != 0 {
			t.Errorf("abs-max +8: d = %#04x q[0] = %d, want 0xbc00 and 0", d, q(0))
		}
	})
	t.Run("Q8_0", func(t *testing.T) {
		x := make([]float32, 32)
		x[0] = 127 // d = 1
		x[1], x[2], x[3], x[4], x[5] = 2.5, -2.5, 0.5, -0.49, 126.5
		b := make([]byte, 34)
		if err := quant.Quantize(quant.Q8_0, x, b); err != nil {
			t.Fatal(err)
		}
		if d := uint16(b[0]) | uint16(b[1])<<8; d != 0x3c00 {
			t.Fatalf("d = %#04x, want 1.0 (0x3c00)", d)
		}
		for j, w := range []int8{127, 3, -3, 1, 0, 127} {
			if got := int8(b[2+j]); got != w {
				t.Errorf("weight %d (%v): q = %d, want %d", j, x[j], got, w)
			}
		}
	})
}

// TestQuantizeStable checks that a quantized block, decoded and quantized
// again, comes back byte for byte: the decoded values lie on the grid the
// scale defines, and the reference rounding must find that grid again.
func TestQuantizeStable(t *testing.T) {
	x := gaussian(256*32, 7)
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q5_0} {
		t.Run(typ.String(), func(t *testing.T) {
			q1, y := roundTrip(t, typ, x)
			q2, _ := roundTrip(t, typ, y)
			for i := range q1 {
				if q1[i] != q2[i] {
					blk := i / typ.TypeSize()
					t.Fatalf("%s: re-quantizing changed block %d at byte %d: %#02x -> %#02x", typ, blk, i%typ.TypeSize(), q1[i], q2[i])
				}
			}
		})
	}
}

// TestQuantizeSpecialBlocks feeds every quantizer blocks that stress its
// scale handling: all zeros must decode to zeros, a constant block must stay
// close, and a lone outlier must not break the block.
func TestQuantizeSpecialBlocks(t *testing.T) {
	for _, typ := range quantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			n := quant.QK_K
			zeros := make([]float32, n)
			_, y := roundTrip(t, typ, zeros)
			for i, v := range y {
				if v != 0 {
					t.Fatalf("all-zero input decoded to %v at %d", v, i)
				}
			}
			for _, c := range []float32{1, -3.25, 1e-3} {
				xs := make([]float32, n)
				for i := range xs {
					xs[i] = c
				}
				_, y := roundTrip(t, typ, xs)
				for i, v := range y {
					if d := math.Abs(float64(v - c)); d > 0.01*math.Abs(float64(c)) {
						t.Fatalf("constant %v decoded to %v at %d", c, v, i)
					}
				}
			}
			xs := gaussian(n, 9)
			for i := range xs {
				xs[i] *= 0.01
			}
			xs[77] = 50
			_, y = roundTrip(t, typ, xs)
			if d := math.Abs(float64(y[77] - 50)); d > 2 {
				t.Errorf("outlier 50 decoded to %v", y[77])
			}
			for i, v := range y {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("non-finite %v at %d", v, i)
				}
			}
		})
	}
}

func TestSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		contains []string
	}{
		{"dequantize partial block", quant.Dequantize(quant.Q4_0, make([]byte, 18), make([]float32, 31)), []string{"Q4_0", "31"}},
		{"dequantize short src", quant.Dequantize(quant.Q4_K, make([]byte, 143), make([]float32, 256)), []string{"Q4_K", "256", "144", "143"}},
		{"dequantize long src", quant.Dequantize(quant.F16, make([]byte, 10), make([]float32, 4)), []string{"F16", "8", "10"}},
		{"dequantize unsupported", quant.Dequantize(quant.IQ2_XXS, make([]byte, 66), make([]float32, 256)), []string{"IQ2_XXS", "unsupported", "Q4_K", "MXFP4", "IQ4_XS"}},
		{"dequantize unknown", quant.Dequantize(quant.Type(99), nil, nil), []string{"type(99)", "unsupported"}},
		{"quantize partial block", quant.Quantize(quant.Q8_0, make([]float32, 40), make([]byte, 34)), []string{"Q8_0", "40"}},
		{"quantize short dst", quant.Quantize(quant.Q6_K, make([]float32, 512), make([]byte, 419)), []string{"Q6_K", "512", "420", "419"}},
		{"quantize unsupported", quant.Quantize(quant.IQ4_NL, make([]float32, 32), make([]byte, 18)), []string{"IQ4_NL", "unsupported", "Q4_0", "Q6_K"}},
		{"quantize NaN", quant.Quantize(quant.Q4_0, append(make([]float32, 5), float32(math.NaN())), nil), []string{"Q4_0"}},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, s := range tc.contains {
			if !strings.Contains(tc.err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", tc.name, tc.err, s)
			}
		}
	}
	// Non-finite weights are rejected for block formats, kept by float ones.
	x := make([]float32, 32)
	x[3] = float32(math.Inf(1))
	if err := quant.Quantize(quant.Q8_0, x, make([]byte, 34)); err == nil || !strings.Contains(err.Error(), "weight 3") {
		t.Errorf("Q8_0 with +Inf: error %v, want one naming weight 3", err)
	}
	if err := quant.Quantize(quant.F16, x, make([]byte, 64)); err != nil {
		t.Errorf("F16 with +Inf: %v", err)
	}
	// Weights too large for an f16 block scale are an error, not Inf/NaN blocks.
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		big := make([]float32, quant.QK_K)
		big[quant.QK_K-1] = 3e9
		dst := make([]byte, 0, typ.TypeSize()*quant.QK_K/typ.BlockSize())
		dst = dst[:cap(dst)]
		err := quant.Quantize(typ, big, dst)
		if err == nil || !strings.Contains(err.Error(), "f16 scale overflows") {
			t.Errorf("%s with |w| = 3e9: error %v, want a scale overflow", typ, err)
		}
	}
	// Empty input is zero blocks: fine.
	if err := quant.Dequantize(quant.Q4_K, nil, nil); err != nil {
		t.Errorf("empty Dequantize: %v", err)
	}
}

func TestCanQuantizeDequantize(t *testing.T) {
	for _, typ := range goldenTypes {
		if !quant.CanDequantize(typ) {
			t.Errorf("CanDequantize(%s) = false", typ)
		}
	}
	if !quant.CanDequantize(quant.F32) {
		t.Error("CanDequantize(F32) = false")
	}
	for _, typ := range quantTypes {
		if !quant.CanQuantize(typ) {
			t.Errorf("CanQuantize(%s) = false", typ)
		}
	}
	for _, typ := range []quant.Type{quant.IQ2_XXS, quant.Q8_K, quant.TQ1_0, quant.I8, quant.Type(99)} {
		if quant.CanDequantize(typ) || quant.CanQuantize(typ) {
			t.Errorf("%s reported as supported", typ)
		}
	}
	for _, typ := range []quant.Type{quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4} {
		if quant.CanQuantize(typ) {
			t.Errorf("CanQuantize(%s) = true, but there is no encoder", typ)
		}
	}
}

// TestF32PassThrough: F32 data round-trips bit for bit, NaN payloads included.
func TestF32PassThrough(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 1000)
	for i := range x {
		x[i] = math.Float32frombits(r.Uint32())
	}
	_, y := roundTrip(t, quant.F32, x)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			t.Fatalf("F32 weight %d: %#08x -> %#08x", i, math.Float32bits(x[i]), math.Float32bits(y[i]))
		}
	}
}

package quant_test

import (
	"math"
	"math/rand/v2"
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

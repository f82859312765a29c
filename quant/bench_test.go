package quant_test

import (
	"testing"

	"github.com/latent-ai/latent/quant"
)

// benchWeights is the slab the benchmarks convert per iteration: 64 Ki
// weights, so the float32 side (256 KiB) stays in cache and the figures
// measure decoding, not DRAM bandwidth; kernels consume rows the same way.
const benchWeights = 1 << 16

var benchDequantTypes = []quant.Type{
	quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4,
}

// benchBlocks returns realistic packed data for t: quantized Gaussians where
// an encoder exists, otherwise the golden blocks repeated.
func benchBlocks(b *testing.B, typ quant.Type) []byte {
	b.Helper()
	size, err := typ.RowBytes(benchWeights)
	if err != nil {
		b.Fatal(err)
	}
	src := make([]byte, size)
	if quant.CanQuantize(typ) {
		if err := quant.Quantize(typ, gaussian(benchWeights, 11), src); err != nil {
			b.Fatal(err)
		}
		return src
	}
	f := openGolden(b)
	_, blocks := goldenTensor(b, f, lower(typ.String())+".blocks")
	for i := 0; i < len(src); i += len(blocks) {
		copy(src[i:], blocks)
	}
	return src
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// BenchmarkDequantize reports throughput in bytes of packed input.
func BenchmarkDequantize(b *testing.B) {
	for _, typ := range benchDequantTypes {
		b.Run(typ.String(), func(b *testing.B) {
			src := benchBlocks(b, typ)
			dst := make([]float32, benchWeights)
			b.SetBytes(int64(len(src)))
			b.ResetTimer()
			for b.Loop() {
				if err := quant.Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(src))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkQuantize reports throughput in bytes of float32 input.
func BenchmarkQuantize(b *testing.B) {
	for _, typ := range quantTypes {
		b.Run(typ.String(), func(b *testing.B) {
			x := gaussian(benchWeights, 12)
			size, err := typ.RowBytes(benchWeights)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, size)
			b.SetBytes(4 * benchWeights)
			b.ResetTimer()
			for b.Loop() {
				if err := quant.Quantize(typ, x, dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(4*float64(benchWeights)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

package quant_test

import (
	"encoding/binary"
	"math/rand/v2"
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

// scaleFields are the byte offsets of each block's f16 scales, for types
// the benchmark fills with random bytes.
var scaleFields = map[quant.Type][]int{
	quant.Q2_K:   {80, 82},
	quant.Q3_K:   {108},
	quant.IQ4_NL: {0},
	quant.IQ4_XS: {0},
	quant.MXFP4:  {}, // any E8M0 byte is a valid scale
}

// benchBlocks returns packed data for t: quantized Gaussians where an encoder
// exists, otherwise random blocks whose f16 scales are set to a normal
// value (decoding speed does not depend on the values otherwise).
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
	fields, ok := scaleFields[typ]
	if !ok {
		b.Fatalf("no benchmark data for %s", typ)
	}
	r := rand.New(rand.NewPCG(13, 14))
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	d := quant.F32ToF16(0.01)
	for blk := 0; blk < len(src); blk += typ.TypeSize() {
		for _, off := range fields {
			binary.LittleEndian.PutUint16(src[blk+off:], d)
		}
	}
	return src
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

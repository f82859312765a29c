package quant_test

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/quant"
)

// goldenPath is the reference file, relative to this package's directory.
const goldenPath = "../../shared/golden/quants/quants.gguf"

// openGolden opens the golden file or fails the test: it is always present
// on the project's machines, so its absence is a setup error, not a skip.
func openGolden(t testing.TB) *gguf.File {
	t.Helper()
	if _, err := os.Stat(goldenPath); err != nil {
		t.Fatalf("golden dequantization reference missing (expected shared/ next to the checkout): %v", err)
	}
	f, err := gguf.Open(goldenPath)
	if err != nil {
		t.Fatalf("open %s: %v", goldenPath, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// goldenTypes are the formats quants.gguf pins.
var goldenTypes = []quant.Type{
	quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4,
}

// goldenTensor returns a tensor's info and bytes, failing the test when absent.
func goldenTensor(t testing.TB, f *gguf.File, name string) (*gguf.TensorInfo, []byte) {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("%s: tensor %q not in golden file", goldenPath, name)
	}
	return ti, f.TensorData(ti)
}

// sameBits is float32 equality by bit pattern, except that any two NaNs
// match: the reference may or may not quiet a NaN's payload.
func sameBits(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func TestDequantizeGolden(t *testing.T) {
	f := openGolden(t)
	for _, typ := range goldenTypes {
		t.Run(typ.String(), func(t *testing.T) {
			// The file names tensors by the lower-case type name.
			name := strings.ToLower(typ.String())
			blocks, src := goldenTensor(t, f, name+".blocks")
			exp, expData := goldenTensor(t, f, name+".expected")
			if blocks.Type != typ {
				t.Fatalf("%s.blocks has type %s", typ, blocks.Type)
			}
			if exp.Type != quant.F32 {
				t.Fatalf("%s.expected has type %s, want F32", typ, exp.Type)
			}
			n := blocks.Elements()
			if exp.Elements() != n || int64(len(expData)) != 4*n {
				t.Fatalf("%s: %d weights but %d expected values (%d bytes)", typ, n, exp.Elements(), len(expData))
			}
			got := make([]float32, n)
			if err := quant.Dequantize(typ, src, got); err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				w := math.Float32frombits(binary.LittleEndian.Uint32(expData[4*i:]))
				if !sameBits(g, w) {
					t.Fatalf("%s: first mismatch at weight %d (block %d): got %v (%#08x), want %v (%#08x)",
						typ, i, i/typ.BlockSize(), g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		})
	}
}

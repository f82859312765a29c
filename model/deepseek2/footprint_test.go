package deepseek2

import (
	"strings"
	"testing"
)

// The expected figures are worked out from the tensor list by the rule in the
// notes, one golden file per structural case.
func TestFootprint(t *testing.T) {
	tests := []struct {
		file           string
		tied, moe, mtp bool
	}{
		{file: "tiny-youtu-q4_0.gguf", tied: true},
		{file: "tiny-glm-q4_k_m.gguf", moe: true},
		{file: "tiny-glm-nextn-q8_0.gguf", moe: true, mtp: true},
		{file: "tiny-dsv2-legacy-f32.gguf", moe: true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f := openGolden(t, tc.file)
			c, err := ConfigFrom(f)
			if err != nil {
				t.Fatal(err)
			}
			var want, params int64
			for _, ti := range f.Tensors {
				params += ti.Elements()
				switch {
				case tc.mtp && strings.HasPrefix(ti.Name, "blk.3."):
				case ti.Name == "token_embd.weight":
					want += ti.Size / 1024 // one of 1024 rows
					if tc.tied {
						want += ti.Size
					}
				case strings.HasSuffix(ti.Name, "_exps.weight"):
					want += ti.Size / 8 * int64(c.ExpertsUsed) // used of 8 experts
				default:
					want += ti.Size
				}
			}
			fp := FootprintOf(f, c)
			if fp.DecodeBytes != want {
				t.Errorf("DecodeBytes = %d, want %d", fp.DecodeBytes, want)
			}
			if fp.ActiveParams > params || (tc.moe && fp.ActiveParams == params) {
				t.Errorf("ActiveParams = %d of %d", fp.ActiveParams, params)
			}
			if _, tiedOK := f.Tensor("output.weight"); tiedOK == tc.tied {
				t.Errorf("test case says tied=%v but output.weight presence is %v", tc.tied, tiedOK)
			}
		})
	}
}

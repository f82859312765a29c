package model

import (
	"path/filepath"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
)

// Describe counts every weight in the file once, and takes the active share
// and the decode bytes from deepseek2.FootprintOf.
func TestDescribeCounts(t *testing.T) {
	f, err := gguf.Open(filepath.Join(goldenModels, "tiny-glm-q4_k_m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var params int64
	for _, ti := range f.Tensors {
		params += ti.Elements()
	}
	in := Describe(f, false)
	if in.Params != params {
		t.Errorf("Params = %d, want %d", in.Params, params)
	}
	c, err := deepseek2.ConfigFrom(f)
	if err != nil {
		t.Fatal(err)
	}
	fp := deepseek2.FootprintOf(f, c)
	if in.ActiveParams != fp.ActiveParams || in.DecodeBytes != fp.DecodeBytes || in.ActiveParams >= in.Params {
		t.Errorf("ActiveParams, DecodeBytes = %d, %d, want %d, %d (below %d parameters)", in.ActiveParams, in.DecodeBytes, fp.ActiveParams, fp.DecodeBytes, in.Params)
	}
}

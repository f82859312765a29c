package server

import (
	"path/filepath"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model"
)

// TestDescribeBadTokenizer: a file whose tokenizer cannot be read is named
// once in the error (tokenizer.FromGGUF names it itself).
func TestDescribeBadTokenizer(t *testing.T) {
	path := filepath.Join(goldenModels, "tiny-youtu-q4_0.gguf")
	lm, err := model.Load(path, model.Options{Context: 16, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	found := false
	for i := range lm.File.KV {
		if lm.File.KV[i].Key == "tokenizer.ggml.merges" {
			lm.File.KV[i].Value = gguf.Uint32(0)
			found = true
		}
	}
	if !found {
		t.Fatalf("%s has no tokenizer.ggml.merges", path)
	}
	_, err = describe(lm, path, "")
	want := path + ": tokenizer: tokenizer.ggml.merges is uint32, not an array of strings" // the path once
	if err == nil || err.Error() != want {
		t.Errorf("got error %v, want %q", err, want)
	}
}

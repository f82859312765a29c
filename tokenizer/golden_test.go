package tokenizer

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/internal/golden"
)

const goldenDir = "../../shared/golden"

// loadGolden opens a golden model's tokenizer.
func loadGolden(t testing.TB, name string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join(goldenDir, "models", name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// readGoldenCases reads a golden tokenizer/*.jsonl file.
func readGoldenCases(t testing.TB, path string) []golden.Tokenization {
	t.Helper()
	cases, err := golden.ReadTokenizations(path)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestGolden checks every tokenization llama.cpp made (special tokens parsed,
// no BOS) and that decoding gives the text back.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "tokenizer", "*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no golden tokenizations under %s (../shared must sit beside the repository)", goldenDir)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			tok := loadGolden(t, name)
			for _, c := range readGoldenCases(t, path) {
				got := tok.Encode(c.Text, true)
				if !slices.Equal(got, c.IDs) {
					t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
				}
				if back := tok.Decode(c.IDs); back != c.Text {
					t.Errorf("Decode(golden ids of %q) = %q", c.Text, back)
				}
				if len(c.IDs)*tok.MaxTokenBytes() < len(c.Text) {
					t.Errorf("%q: %d golden tokens, yet MaxTokenBytes %d bounds them at %d bytes", c.Text, len(c.IDs), tok.MaxTokenBytes(), len(c.Text))
				}
			}
		})
	}
}

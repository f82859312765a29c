package gguf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// goldenWant is what each golden file holds, from its README and a dump
// cross-checked against the gguf-py reader's listing.
var goldenWant = map[string]struct {
	tensors int
	arch    string
	types   map[quant.Type]int // tensors per type, when checked
}{
	"tiny-dsv2-f16.gguf":        {44, "deepseek2", map[quant.Type]int{quant.F16: 32, quant.F32: 12}},
	"tiny-dsv2-legacy-f32.gguf": {41, "deepseek2", map[quant.Type]int{quant.F32: 41}},
	"tiny-dsv2-q8_0.gguf":       {44, "deepseek2", map[quant.Type]int{quant.Q8_0: 32, quant.F32: 12}},
	"tiny-glm-f32.gguf":         {52, "deepseek2", map[quant.Type]int{quant.F32: 52}},
	"tiny-glm-nextn-q8_0.gguf":  {74, "deepseek2", map[quant.Type]int{quant.Q8_0: 48, quant.F32: 26}},
	"tiny-glm-q4_0.gguf":        {52, "deepseek2", map[quant.Type]int{quant.Q4_0: 34, quant.Q6_K: 1, quant.F32: 17}},
	"tiny-glm-q4_k_m.gguf": {52, "deepseek2", map[quant.Type]int{
		quant.Q4_K: 19, quant.Q5_K: 6, quant.Q6_K: 4, quant.Q8_0: 6, quant.F32: 17}},
	"tiny-youtu-f32.gguf":  {41, "deepseek2", map[quant.Type]int{quant.F32: 41}},
	"tiny-youtu-q4_0.gguf": {41, "deepseek2", map[quant.Type]int{quant.Q4_0: 28, quant.F32: 13}},
	"quants.gguf":          {30, "quanttest", nil},
}

func goldenFiles(tb testing.TB) []string {
	paths := goldenModels(tb)
	q := filepath.Join(goldenRoot, "quants", "quants.gguf")
	if _, err := os.Stat(q); err != nil {
		tb.Fatalf("golden quants file missing: %v", err)
	}
	return append(paths, q)
}

func TestGoldenFilesOpen(t *testing.T) {
	for _, path := range goldenFiles(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want, known := goldenWant[name]
			if !known {
				// a file added to shared/ later: still held to the checks below
				t.Logf("%s is not in goldenWant; checking it generically", name)
			}
			if f.Version != 3 || f.Alignment != DefaultAlignment {
				t.Errorf("version %d alignment %d", f.Version, f.Alignment)
			}
			arch, _ := f.Get("general.architecture")
			if s, ok := arch.String(); !ok || (known && s != want.arch) {
				t.Errorf("general.architecture = %s, want %q", arch.Format(), want.arch)
			}
			if known && len(f.Tensors) != want.tensors {
				t.Errorf("%d tensors, want %d", len(f.Tensors), want.tensors)
			}
			if len(f.Tensors) == 0 {
				t.Errorf("no tensors")
			}
			types := map[quant.Type]int{}
			var end int64
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				types[ti.Type]++
				if d := f.TensorData(ti); int64(len(d)) != ti.Size || ti.Size == 0 {
					t.Errorf("%s: %d bytes of data, size %d", ti.Name, len(d), ti.Size)
				}
				end = max(end, f.DataOffset+int64(ti.Offset)+ti.Size)
			}
			if known && want.types != nil {
				for typ, n := range want.types {
					if types[typ] != n {
						t.Errorf("%d %s tensors, want %d (all: %v)", types[typ], typ, n, types)
					}
				}
				if len(types) != len(want.types) {
					t.Errorf("tensor types %v, want %v", types, want.types)
				}
			}
			// The tensors fill the file: nothing but padding after the last.
			if f.Size-end >= int64(f.Alignment) {
				t.Errorf("file is %d bytes but its last tensor ends at %d", f.Size, end)
			}
			if arch, _ := arch.String(); arch == "deepseek2" {
				toks, _ := f.Get("tokenizer.ggml.tokens")
				if s, ok := toks.StringArray(); !ok || len(s) != 1024 {
					t.Errorf("tokenizer.ggml.tokens: %s, want 1024 strings", toks.Format())
				}
				if n, ok := f.Get("deepseek2.block_count"); !ok {
					t.Errorf("no deepseek2.block_count")
				} else if b, _ := n.Uint(); b < 3 {
					t.Errorf("deepseek2.block_count = %d", b)
				}
				if _, ok := f.Tensor("token_embd.weight"); !ok {
					t.Errorf("no token_embd.weight")
				}
			}
		})
	}
}

// TestGoldenRoundTrip re-encodes each golden file with the Writer: the
// result parses to the same metadata, directory and bytes, and since the
// goldens were written by llama.cpp's own tooling in the same layout, to the
// same bytes as the original.
func TestGoldenRoundTrip(t *testing.T) {
	for _, path := range goldenFiles(t) {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := reencode(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		g, err := Parse("copy of "+path, data)
		if err != nil {
			t.Fatal(err)
		}
		if d := sameContent(f, g); d != "" {
			t.Errorf("%s: %s", path, d)
		}
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(orig) != string(data) {
			t.Errorf("%s: re-encoded bytes differ from the original (%d vs %d bytes)", path, len(data), len(orig))
		}
		f.Close()
	}
}

// BenchmarkParse parses a golden model held in memory; MB/s counts the
// header (metadata and tensor directory) only, since the data is not read.
func BenchmarkParse(b *testing.B) {
	path := filepath.Join(goldenRoot, "models", "tiny-glm-q4_k_m.gguf")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("golden model missing: %v", err)
	}
	f, err := Parse(path, data)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(f.DataOffset)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(path, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen includes the mmap and munmap.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(goldenRoot, "models", "tiny-glm-q4_k_m.gguf")
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

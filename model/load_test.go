package model

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latent-ai/latent/internal/golden"
)

const goldenModels = "../../shared/golden/models"

// Bad load options and files: each a one-line error naming the problem.
func TestLoadErrors(t *testing.T) {
	good := filepath.Join(goldenModels, "tiny-youtu-q4_0.gguf")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	truncated := filepath.Join(dir, "truncated.gguf")
	if err := os.WriteFile(truncated, data[:100000], 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("hello, not a model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		o    Options
		want string
	}{
		{"negative threads", good, Options{Backend: "cpu", Threads: -1}, "threads: -1 is negative"},
		{"huge threads", good, Options{Backend: "cpu", Threads: 1_000_000_000}, "threads: 1000000000 is more than 512"},
		{"unknown backend", good, Options{Backend: "tpu"}, `unknown backend "tpu" (available: auto, cpu, cuda)`},
		{"negative ctx", good, Options{Backend: "cpu", Context: -5}, "context -5 is negative"},
		{"ctx past trained", good, Options{Backend: "cpu", Context: 100_000_000}, "a context of 100000000 positions is more than the model's trained context of 4096"},
		{"truncated", truncated, Options{Backend: "cpu"}, "file is truncated"},
		{"not gguf", text, Options{Backend: "cpu"}, "not a GGUF file"},
		{"missing", filepath.Join(dir, "none.gguf"), Options{Backend: "cpu"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lm, err := Load(tc.path, tc.o)
			if err == nil {
				lm.Close()
				t.Fatalf("loaded; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line with %q", err, tc.want)
			}
		})
	}
	lm, err := Load(good, Options{Backend: "cpu", Threads: MaxThreads, Context: 4096})
	if err != nil {
		t.Fatalf("the most threads and the trained context: %v", err)
	}
	if err := lm.Close(); err != nil {
		t.Fatal(err)
	}
}

// The CPU cache is checked against the machine's memory before it is
// allocated: GLM-4.7-Flash's 47 layers of 576 values at its trained
// 202752 positions are 21.9 GB of float32.
func TestCacheFits(t *testing.T) {
	const GB = 1_000_000_000
	for _, tc := range []struct {
		layers, ctx, row, threads int
		mem                       uint64
		want                      string
	}{
		{47, 202752, 576, 2, 16 * GB, "ctx 202752: the latent cache needs 22.0 GB, more than this machine's 16.0 GB of memory (lower --ctx)"},
		{47, 202752, 576, 2, 32 * GB, ""},
		{47, 202752, 576, 2, 0, ""}, // memory unknown
		{27, 4096, 576, 512, 1 * GB, ""},
		{3, 1 << 40, 288, 1, 64 * GB, "the latent cache needs"},
	} {
		err := cacheFits(tc.layers, tc.ctx, tc.row, tc.threads, tc.mem)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want %q", tc, err, tc.want)
		}
	}
}

// Progress reports the file bytes handed to the backend, tensor by tensor:
// rising, within the file's tensor bytes, and all of them for a file whose
// every tensor is used (an older file's attn_kv_b counts once split).
func TestLoadProgress(t *testing.T) {
	for _, name := range []string{"tiny-youtu-q4_0.gguf", "tiny-glm-q4_k_m.gguf", "tiny-dsv2-legacy-f32.gguf"} {
		var calls int
		var last, total int64
		lm, err := Load(filepath.Join(goldenModels, name), Options{Backend: "cpu", Threads: 1, Context: 64,
			Progress: func(done, all int64) {
				if done <= last || done > all || (total != 0 && all != total) {
					t.Errorf("%s: progress %d of %d after %d of %d", name, done, all, last, total)
				}
				calls++
				last, total = done, all
			}})
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for _, ti := range lm.File.Tensors {
			want += ti.Size
		}
		lm.Close()
		if calls < 10 || total != want || last != want {
			t.Errorf("%s: %d calls, last %d of %d; want %d of %d", name, calls, last, total, want, want)
		}
	}
}

// A LATENT_CACHE_TYPE the CUDA backend would refuse is an error wherever
// that backend may run (auto falls back to the CPU without a GPU, and a
// typo must not pass silently there); the CPU backend's float32 cache
// ignores it.
func TestLoadCacheTypeEnv(t *testing.T) {
	t.Setenv("LATENT_CACHE_TYPE", "q4")
	path := filepath.Join(goldenModels, "tiny-youtu-q4_0.gguf")
	for _, be := range []string{"auto", "cuda"} {
		_, err := Load(path, Options{Backend: be, Context: 64})
		if err == nil || err.Error() != "LATENT_CACHE_TYPE=q4: unknown cache type (f16 or f32)" {
			t.Errorf("--backend %s: error %v", be, err)
		}
	}
	lm, err := Load(path, Options{Backend: "cpu", Context: 64})
	if err != nil {
		t.Fatalf("--backend cpu: %v", err)
	}
	lm.Close()
}

// With Options.Tokenizer the tokenizer is built while the network loads,
// and it tokenizes as llama.cpp does (the golden tokenizations; the
// tokenizer package checks every golden vocabulary); without it
// Loaded.Tokenizer builds one on the spot. A load that fails after the
// build started returns only once the build is done with the file (go test
// -race checks the file is not closed under it).
func TestLoadTokenizer(t *testing.T) {
	for _, name := range []string{"tiny-youtu-f32"} {
		cases, err := golden.ReadTokenizations(filepath.Join(goldenModels, "..", "tokenizer", name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, early := range []bool{true, false} {
			lm, err := Load(filepath.Join(goldenModels, name+".gguf"), Options{Backend: "cpu", Threads: 1, Context: 64, Tokenizer: early})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := lm.Tokenizer()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, c := range cases {
				if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDs) {
					t.Errorf("%s (built early: %v): %q tokenizes as %v, want %v", name, early, c.Text, got, c.IDs)
				}
			}
			if err := lm.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := Load(filepath.Join(goldenModels, "tiny-youtu-q4_0.gguf"), Options{Backend: "cpu", Context: 100_000_000, Tokenizer: true})
	if err == nil || !strings.Contains(err.Error(), "trained context") {
		t.Fatalf("error %v, want the context refused", err)
	}
}

package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cuda"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/internal/golden"
)

// The CPU backend meets golden.Tolerance by reproducing ggml's float order
// up to every 8-bit rounding (backend/cpu/ggmlorder.go), because a single
// value rounded the other way moves these models' logits by up to 0.05.
func TestLogitsMatchLlamaCpp(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "logits", "*.json"))
	if len(files) != len(golden.Tolerance) {
		t.Fatalf("found %d golden logits files under %s, expected %d", len(files), goldenDir, len(golden.Tolerance))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			tol, ok := golden.Tolerance[name]
			if !ok {
				t.Fatalf("no tolerance for golden file %s", name)
			}
			want := readTrace(t, name)
			feed := make([]int32, len(want.Steps))
			for i, s := range want.Steps {
				feed[i] = s.Token
			}
			out, err := runLatent(t, "logits", filepath.Join(goldenDir, "models", name+".gguf"),
				"--tokens", joinInts(want.Prompt), "--steps", strconv.Itoa(len(want.Steps)), "--feed", joinInts(feed), "--backend", "cpu")
			if err != nil {
				t.Fatal(err)
			}
			var got engine.Trace
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			if got.Vocab != want.Vocab || len(got.PromptLogits) != len(want.PromptLogits) || len(got.Steps) != len(want.Steps) {
				t.Fatalf("shape: vocab %d, %d prompt rows, %d steps; want %d, %d, %d",
					got.Vocab, len(got.PromptLogits), len(got.Steps), want.Vocab, len(want.PromptLogits), len(want.Steps))
			}
			worst := 0.0
			check := func(where string, g, w []float32) {
				d := maxAbsDiff(g, w)
				worst = math.Max(worst, d)
				if d > tol {
					t.Errorf("%s: max |Δ| %.4g > tolerance %g", where, d, tol)
				}
				// Greedy choice must agree wherever llama.cpp's top two are
				// further apart than the tolerance (the golden README's rule;
				// the twice the tolerance follows from it).
				if top, second := topTwo(w); float64(top-second) > tol && backend.Argmax(g) != backend.Argmax(w) {
					t.Errorf("%s: argmax %d, llama.cpp %d (margin %.3g)", where, backend.Argmax(g), backend.Argmax(w), top-second)
				}
			}
			for i := range want.PromptLogits {
				check("prompt position "+strconv.Itoa(i), got.PromptLogits[i], want.PromptLogits[i])
			}
			for i := range want.Steps {
				if got.Steps[i].Token != want.Steps[i].Token {
					t.Errorf("step %d consumed token %d, want %d", i, got.Steps[i].Token, want.Steps[i].Token)
				}
				check("step "+strconv.Itoa(i), got.Steps[i].Logits, want.Steps[i].Logits)
			}
			t.Logf("%s: largest deviation %.3g (tolerance %g)", name, worst, tol)
		})
	}
}

// The CPU backend picks its kernels once per process from LATENT_CPU, so the
// golden comparison runs again in a child test process for each forced set:
// the AVX2 kernels (which a CPU with AVX-512 VNNI does not use by default)
// and the pure-Go fallback must each match llama.cpp, as the default set
// does in TestLogitsMatchLlamaCpp.
func TestLogitsMatchLlamaCppEveryKernelSet(t *testing.T) {
	if os.Getenv("LATENT_CPU") != "" {
		t.Skip("already running with a forced kernel set")
	}
	for _, set := range []string{"avx2", "generic"} {
		t.Run(set, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestLogitsMatchLlamaCpp$", "-test.v")
			cmd.Env = append(os.Environ(), "LATENT_CPU="+set)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "deviation") || strings.Contains(line, "FAIL") || strings.Contains(line, "Δ") {
					t.Log(strings.TrimSpace(line))
				}
			}
			if err != nil {
				t.Fatalf("LATENT_CPU=%s: %v", set, err)
			}
		})
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func topTwo(x []float32) (top, second float32) {
	top, second = float32(math.Inf(-1)), float32(math.Inf(-1))
	for _, v := range x {
		if v > top {
			top, second = v, top
		} else if v > second {
			second = v
		}
	}
	return top, second
}

// rewriteGolden copies a golden model through the GGUF writer, letting edit
// change each tensor's declared shape (its data is cut or padded to fit).
func rewriteGolden(t *testing.T, name string, setKV func(key string, v gguf.Value) gguf.Value, edit func(ti *gguf.TensorInfo)) string {
	t.Helper()
	f, err := gguf.Open(filepath.Join(goldenDir, "models", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := filepath.Join(t.TempDir(), name)
	fd, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	w := gguf.NewWriter(fd)
	for _, kv := range f.KV {
		if kv.Key == "general.alignment" {
			continue
		}
		if err := w.SetKV(kv.Key, setKV(kv.Key, kv.Value)); err != nil {
			t.Fatal(err)
		}
	}
	var data [][]byte
	for i := range f.Tensors {
		ti := f.Tensors[i]
		src := f.TensorData(&ti)
		ti.Dims = append([]uint64(nil), ti.Dims...)
		edit(&ti)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims...); err != nil {
			t.Fatal(err)
		}
		size, _ := ti.Type.RowBytes(ti.Elements())
		buf := make([]byte, size)
		copy(buf, src)
		data = append(data, buf)
	}
	if err := w.WriteHeader(); err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		if _, err := w.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLogitsErrors(t *testing.T) {
	model := filepath.Join(goldenDir, "models", "tiny-glm-q4_0.gguf")
	keep := func(_ string, v gguf.Value) gguf.Value { return v }
	same := func(*gguf.TensorInfo) {}
	llama := rewriteGolden(t, "tiny-glm-q4_0.gguf", func(k string, v gguf.Value) gguf.Value {
		if k == "general.architecture" {
			return gguf.String("llama")
		}
		return v
	}, same)
	badShape := rewriteGolden(t, "tiny-glm-q4_0.gguf", keep, func(ti *gguf.TensorInfo) {
		if ti.Name == "blk.1.attn_q_b.weight" {
			ti.Dims[1] = 256
		}
	})
	missing := rewriteGolden(t, "tiny-youtu-f32.gguf", keep, func(ti *gguf.TensorInfo) {
		if ti.Name == "blk.2.ffn_up.weight" {
			ti.Name = "blk.2.ffn_upper.weight"
		}
	})
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	truncated := writeFile(t, t.TempDir(), "truncated.gguf", raw[:len(raw)-1000])
	prompt17 := "1017,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"prompt past context", []string{"logits", model, "--tokens", prompt17, "--ctx", "16", "--steps", "0"}, "17 prompt tokens + 0 steps exceed the context of 16"},
		{"steps past context", []string{"logits", model, "--tokens", "1017,1", "--ctx", "8", "--steps", "7"}, "exceed the context of 8"},
		{"truncated model", []string{"logits", truncated, "--tokens", "1"}, truncated + `: tensor "`},
		{"unknown architecture", []string{"logits", llama, "--tokens", "1"}, `architecture "llama" is not supported; supported: deepseek2`},
		{"wrong shape", []string{"logits", badShape, "--tokens", "1"}, "tensor blk.1.attn_q_b.weight has shape [256 256], want [256 384]"},
		{"missing tensor", []string{"logits", missing, "--tokens", "1"}, "tensor blk.2.ffn_up.weight is missing"},
		{"token outside vocabulary", []string{"logits", model, "--tokens", "1024"}, "token 1024 is outside the vocabulary of 1024"},
		{"bad token list", []string{"logits", model, "--tokens", "1,,2"}, `--tokens: "" is not a token id`},
		{"unknown backend", []string{"logits", model, "--tokens", "1", "--backend", "tpu"}, `unknown backend "tpu"`},
		{"negative ctx", []string{"logits", model, "--tokens", "1", "--ctx", "-5"}, "context -5 is negative"},
		{"ctx past trained", []string{"logits", model, "--tokens", "1", "--ctx", "100000000"}, "a context of 100000000 positions is more than the model's trained context of 4096"},
		{"huge threads", []string{"logits", model, "--tokens", "1", "--threads", "1000000000"}, "threads: 1000000000 is more than 512"},
		{"negative steps", []string{"logits", model, "--tokens", "1", "--steps", "-3"}, "--steps -3: must not be negative"},
		{"bad feed", []string{"logits", model, "--tokens", "1", "--feed", "x"}, `--feed: "x" is not a token id`},
		{"feed past steps", []string{"logits", model, "--tokens", "1", "--steps", "1", "--feed", "1,2"}, "--feed has 2 tokens for 1 --steps"},
		{"feed outside vocabulary", []string{"logits", model, "--tokens", "1", "--steps", "1", "--feed", "5000"}, "step 0: token 5000 is outside the vocabulary of 1024"},
		{"token past int32", []string{"logits", model, "--tokens", "99999999999"}, `--tokens: "99999999999" is not a token id`},
	}
	if cuda.Available() != nil {
		tests = append(tests, struct {
			name string
			args []string
			want string
		}{"cuda without a GPU", []string{"logits", model, "--tokens", "1", "--backend", "cuda"}, "cuda backend: no CUDA device"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runLatent(t, tc.args...)
			checkError(t, tc.name, err, tc.want)
		})
	}
}

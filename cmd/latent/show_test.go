package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/internal/golden"
	"github.com/latent-ai/latent/model"
)

const goldenDir = "../../../shared/golden"

// readTrace reads a golden logits file.
func readTrace(t *testing.T, name string) engine.Trace {
	t.Helper()
	tr, err := golden.ReadTrace(filepath.Join(goldenDir, "logits", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// joinInts writes token ids (or depths) as a flag value: "1,2,3".
func joinInts[T int | int32](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, ",")
}

func TestShowEveryGoldenModel(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "models", "*.gguf"))
	if len(files) == 0 {
		t.Fatalf("no golden models under %s (../shared must sit beside the repository)", goldenDir)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			out, err := runLatent(t, "show", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"architecture   deepseek2", "attention      MLA, 4 heads", "decode reads", "tokenizer      byte-level BPE (gpt2), pre-tokenizer ", "chat template  no"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "problem") {
				t.Errorf("show reports a problem:\n%s", out)
			}

			js, err := runLatent(t, "show", "--json", "--tensors", path)
			if err != nil {
				t.Fatal(err)
			}
			var info model.Info
			if err := json.Unmarshal([]byte(js), &info); err != nil {
				t.Fatalf("--json output is not JSON: %v", err)
			}
			st, _ := os.Stat(path)
			switch {
			case info.Deepseek2 == nil || info.Deepseek2.Layers != 3 || info.Deepseek2.Vocab != 1024 || info.Deepseek2.Dim != 256:
				t.Errorf("deepseek2 shape wrong: %+v", info.Deepseek2)
			case info.FileBytes != st.Size():
				t.Errorf("file_bytes %d, file has %d", info.FileBytes, st.Size())
			case len(info.Tensors) != info.TensorCount || info.TensorCount == 0:
				t.Errorf("--tensors listed %d of %d tensors", len(info.Tensors), info.TensorCount)
			case info.DecodeBytes <= 0 || info.DecodeBytes > info.TensorBytes*2:
				t.Errorf("weight_bytes_per_token %d implausible for %d tensor bytes", info.DecodeBytes, info.TensorBytes)
			case info.Tokenizer == nil || info.Tokenizer.Tokens != 1024 || len(info.Tokenizer.Special) < 2:
				t.Errorf("tokenizer wrong: %+v", info.Tokenizer)
			}
			var typeBytes int64
			for _, ty := range info.Types {
				typeBytes += ty.Bytes
			}
			if typeBytes != info.TensorBytes {
				t.Errorf("bytes per type add up to %d, tensors hold %d", typeBytes, info.TensorBytes)
			}
		})
	}
}

func TestShowDetails(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"tiny-glm-nextn-q8_0.gguf", []string{"3 (1 dense, 2 MoE) + 1 multi-token-prediction", "MoE 8 experts × 256, 2 used + 1 shared, sigmoid routing, normalised, scale 1.8", `bos 1017 "[gMASK]"`}},
		{"tiny-dsv2-legacy-f32.gguf", []string{"legacy combined attn_kv_b", "q_lora none (attn_q)", "yarn ×4 from 1024", "3 used + 2 shared, softmax routing"}},
		{"tiny-youtu-q4_0.gguf", []string{"layers         3\n", "dense 512\n", "Q4_0 28", "F32 13"}},
		{"tiny-glm-q4_k_m.gguf", []string{"Q4_K", "Q6_K", "Q5_K", "Q8_0"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			out, err := runLatent(t, "show", filepath.Join(goldenDir, "models", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestShowTensorList(t *testing.T) {
	out, err := runLatent(t, "show", "--tensors", filepath.Join(goldenDir, "models", "tiny-glm-q4_k_m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			rows[f[0]] = f[1] + " " + f[2]
		}
	}
	for name, want := range map[string]string{"blk.1.ffn_down_exps.weight": "Q6_K 256×256×8", "blk.0.attn_k_b.weight": "Q8_0 64×256×4", "token_embd.weight": "Q4_K 256×1024"} {
		if rows[name] != want {
			t.Errorf("tensor list says %s is %q, want %q", name, rows[name], want)
		}
	}
	if n := strings.Count(out, "\nblk."); n != 49 {
		t.Errorf("tensor list has %d blk rows, want 49", n)
	}
}

func TestShowErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := writeFile(t, dir, "notes.txt", "hello, world\n")
	empty := writeFile(t, dir, "empty.gguf", "")
	golden, err := os.ReadFile(filepath.Join(goldenDir, "models", "tiny-youtu-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := writeFile(t, dir, "truncated.gguf", golden[:len(golden)/2])

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"show", filepath.Join(dir, "missing.gguf")}, "missing.gguf: no such model file"},
		{[]string{"show", notGGUF}, notGGUF + `: not a GGUF file: magic is "hell"`},
		{[]string{"show", empty}, empty + ": not a GGUF file: the file is empty"},
		{[]string{"show", truncated}, truncated + `: tensor "`},
		{[]string{"show", dir}, "not a regular file"},
		{[]string{"show"}, "give a model: latent show MODEL"},
	}
	for _, tc := range tests {
		_, err := runLatent(t, tc.args...)
		checkError(t, fmt.Sprint("latent ", tc.args), err, tc.want)
	}
}

// show, bench and logits take a model reference as run does: a model in the
// store answers to its hf.co name without a path.
func TestModelReferences(t *testing.T) {
	store := t.TempDir()
	t.Setenv("LATENT_MODELS", store)
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1") // nothing is pulled: the model is stored
	data, err := os.ReadFile(filepath.Join(goldenDir, "models", "tiny-glm-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(store, "hf.co", "latent-test", "tiny-glm-GGUF")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tiny-glm-Q4_0.gguf", data)
	const ref = "hf.co/latent-test/tiny-glm-GGUF:Q4_0"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", ref}, "architecture   deepseek2"},
		{[]string{"bench", ref, "--backend", "cpu", "-p", "4", "-n", "2", "--reps", "1"}, "tiny-glm-Q4_0.gguf"},
		{[]string{"logits", ref, "--backend", "cpu", "--tokens", "1017,1", "--steps", "1"}, `"vocab":1024`},
	} {
		out, err := runLatent(t, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: error %v, output lacks %q:\n%.300s", tc.args, err, tc.want, out)
		}
	}
}

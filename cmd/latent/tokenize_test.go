package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/internal/golden"
)

// TestTokenizeGolden runs `latent tokenize` and `--detokenize` on every
// golden tokenization llama.cpp made.
func TestTokenizeGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "tokenizer", "*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no golden tokenizations under %s", goldenDir)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		model := filepath.Join(goldenDir, "models", name+".gguf")
		t.Run(name, func(t *testing.T) {
			cases, err := golden.ReadTokenizations(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				want, _ := json.Marshal(c.IDs)
				out, err := runLatent(t, "tokenize", model, "--text", c.Text)
				if err != nil {
					t.Fatalf("tokenize %q: %v", c.Text, err)
				}
				if out != string(want)+"\n" {
					t.Errorf("tokenize %q:\n got %s want %s", c.Text, out, want)
				}
				out, err = runLatent(t, "tokenize", model, "--detokenize", "--text", string(want))
				if err != nil {
					t.Fatalf("detokenize %s: %v", want, err)
				}
				if out != c.Text {
					t.Errorf("detokenize %s = %q, want %q", want, out, c.Text)
				}
				out, err = runLatent(t, "tokenize", model, "--detokenize", "--text", joinInts(c.IDs))
				if err != nil || out != c.Text {
					t.Errorf("detokenize %s = %q, %v; want %q", joinInts(c.IDs), out, err, c.Text)
				}
			}
		})
	}
}

func TestTokenizeStdinAndSpecial(t *testing.T) {
	model := filepath.Join(goldenDir, "models", "tiny-glm-f32.gguf")
	// From stdin, whole (a trailing newline is part of the text).
	out, err := runLatentIn(t, "Hello world\n", "tokenize", model)
	if err != nil || out != "[706,819,320,10]\n" {
		t.Errorf("stdin: %q, %v", out, err)
	}
	out, err = runLatentIn(t, "", "tokenize", model)
	if err != nil || out != "[]\n" {
		t.Errorf("empty stdin: %q, %v", out, err)
	}
	out, err = runLatentIn(t, " 706, 819,320 \n", "tokenize", model, "--detokenize")
	if err != nil || out != "Hello world" {
		t.Errorf("detokenize from stdin: %q, %v", out, err)
	}
	// <|user|> is token 1020; with --no-special it is plain text.
	out, err = runLatent(t, "tokenize", model, "--text", "<|user|>")
	if err != nil || out != "[1020]\n" {
		t.Errorf("special: %q, %v", out, err)
	}
	out, err = runLatent(t, "tokenize", model, "--no-special", "--text", "<|user|>")
	if err != nil || strings.Contains(out, "1020") || !strings.HasPrefix(out, "[60,") {
		t.Errorf("--no-special: %q, %v", out, err)
	}
}

func TestTokenizeErrors(t *testing.T) {
	model := filepath.Join(goldenDir, "models", "tiny-glm-f32.gguf")
	dir := t.TempDir()
	badPre := filepath.Join(dir, "bad-pre.gguf")
	writeTokenizerGGUF(t, badPre, "gpt2", "no-such-pre")
	badModel := filepath.Join(dir, "bad-model.gguf")
	writeTokenizerGGUF(t, badModel, "llama", "default")
	notGGUF := writeFile(t, dir, "text.gguf", "hello")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tokenize", model, "--detokenize", "--text", "1,x"}, `--detokenize: "x" is not a token id`},
		{[]string{"tokenize", model, "--detokenize", "--text", "[1,2"}, "not a JSON array"},
		{[]string{"tokenize", model, "--detokenize", "--text", "[1,-2]"}, "token id -2 is outside the vocabulary of 1024 tokens"},
		{[]string{"tokenize", model, "--detokenize", "--text", "[5,null]"}, "element 1 of the array is null, not a token id"},
		{[]string{"tokenize", model, "--detokenize", "--text", "1024"}, "token id 1024 is outside the vocabulary of 1024 tokens"},
		{[]string{"tokenize", filepath.Join(dir, "missing.gguf"), "--text", "a"}, "missing.gguf"},
		{[]string{"tokenize", notGGUF, "--text", "a"}, "text.gguf"},
		{[]string{"tokenize", badPre, "--text", "a"}, `unsupported pre-tokenizer "no-such-pre"`},
		{[]string{"tokenize", badModel, "--text", "a"}, `unsupported tokenizer model "llama"`},
		{[]string{"tokenize"}, "give a model: latent tokenize MODEL"},
	} {
		_, err := runLatent(t, tc.args...)
		checkError(t, fmt.Sprint(tc.args), err, tc.want)
	}
}

// writeTokenizerGGUF writes a GGUF file with a two-token vocabulary and
// nothing else.
func writeTokenizerGGUF(t *testing.T, path, model, pre string) {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := gguf.NewWriter(fh)
	for _, kv := range []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String(model)},
		{Key: "tokenizer.ggml.pre", Value: gguf.String(pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings([]string{"a", "b"})},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strings([]string{"a b"})},
	} {
		if err := w.SetKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteHeader(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

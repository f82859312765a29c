package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latent-ai/latent/synth"
)

// writeTiny synthesizes a tiny model file for command tests.
func writeTiny(t *testing.T, preset string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), preset+".gguf")
	if _, _, err := synth.WriteFile(context.Background(), path, synth.Options{Preset: preset, Format: synth.Q4_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBenchJSON(t *testing.T) {
	path := writeTiny(t, "tiny-dsv2")
	out, err := runLatent(t, "bench", path, "--backend", "cpu", "-p", "8", "-n", "4", "--depth", "0,16", "--reps", "3", "--json", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want one per depth (2)", len(rows))
	}
	for i, r := range rows {
		for _, k := range []string{"backend", "model", "depth", "prefill_tok_s", "decode_tok_s", "ms_per_token", "kernels_per_token", "bytes_per_token", "gb_s"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %d has no %q: %v", i, k, r)
			}
		}
		if r["backend"] != "cpu" || r["model"] != "tiny-dsv2.gguf" || r["depth"] != float64([]int{0, 16}[i]) {
			t.Errorf("row %d: backend %v, model %v, depth %v", i, r["backend"], r["model"], r["depth"])
		}
		pre, dec, ms := r["prefill_tok_s"].(float64), r["decode_tok_s"].(float64), r["ms_per_token"].(float64)
		if pre <= 0 || dec <= 0 || ms <= 0 {
			t.Errorf("row %d: rates %v, %v tok/s, %v ms/token: want positive", i, pre, dec, ms)
		}
		if d := ms * dec; d < 999 || d > 1001 {
			t.Errorf("row %d: ms_per_token %v is not 1000/decode_tok_s (%v)", i, ms, dec)
		}
		// tiny-dsv2: 3 layers, 1 dense then 2 MoE; each layer runs the
		// same operations every step: a fixed count, the same at every depth.
		if k := r["kernels_per_token"].(float64); k < 20 || k > 100 || k != rows[0]["kernels_per_token"].(float64) {
			t.Errorf("row %d: %v kernels per token", i, k)
		}
		b := r["bytes_per_token"].(float64)
		if b <= 0 {
			t.Errorf("row %d: %v bytes per token", i, b)
		}
		if g := r["gb_s"].(float64); g < b*dec/1e9*0.999 || g > b*dec/1e9*1.001 {
			t.Errorf("row %d: gb_s %v, want bytes_per_token·decode_tok_s/1e9 = %v", i, g, b*dec/1e9)
		}
	}
}

func TestBenchTableAndErrors(t *testing.T) {
	path := writeTiny(t, "tiny-youtu")
	out, err := runLatent(t, "bench", path, "-p", "4", "-n", "2", "--reps", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "decode tok/s") || !strings.Contains(out, "tiny-youtu.gguf") {
		t.Errorf("table:\n%s", out)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	truncated := writeFile(t, dir, "truncated.gguf", data[:100000])
	text := writeFile(t, dir, "notes.txt", "not a model\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--depth", "x"}, `--depth: "x" is not a token count`},
		{[]string{"--depth", "0,,4"}, `--depth: "" is not a token count`},
		{[]string{"--depth", "999999999999999999"}, "--depth: 999999999999999999 is more than 1073741824 tokens"},
		{[]string{"-p", "0"}, "each must be at least 1"},
		{[]string{"-n", "-1"}, "each must be at least 1"},
		{[]string{"--reps", "0"}, "each must be at least 1"},
		{[]string{"-p", "99999999999999"}, "at most 1073741824 tokens each"},
		// The tiny presets are trained for 4096 positions.
		{[]string{"-p", "100000"}, "--depth 0 + -p 100000 + -n 128 = 100128 tokens, more than the model's trained context of 4096"},
		{[]string{"--depth", "0,4000", "-p", "64", "-n", "64"}, "--depth 4000 + -p 64 + -n 64 = 4128 tokens, more than the model's trained context of 4096"},
		{[]string{"--threads", "1000000000"}, "threads: 1000000000 is more than 512"},
		{[]string{"--backend", "tpu"}, `unknown backend "tpu"`},
	} {
		_, err := runLatent(t, append([]string{"bench", path}, tc.args...)...)
		checkError(t, fmt.Sprint(tc.args), err, tc.want)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.gguf"), "missing.gguf: no such model file"},
		{truncated, "file is truncated"},
		{text, "not a GGUF file"},
		{dir, "not a regular file"},
	} {
		_, err := runLatent(t, "bench", tc.path, "-p", "4", "-n", "2", "--reps", "1")
		checkError(t, "bench "+tc.path, err, tc.want)
	}
}

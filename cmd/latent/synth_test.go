package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
)

// synthCLI runs `latent synth args...` in-process.
func synthCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"synth"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestSynthErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	other := t.TempDir()
	file := writeFile(t, other, "file", "x")
	readOnly := filepath.Join(other, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string // substrings of the one-line error
	}{
		{[]string{"-p", "gpt-5", "-o", out}, []string{`unknown preset "gpt-5"`, "tiny-youtu", "glm-4.7-flash"}},
		{[]string{"-p", "tiny-glm", "-t", "q3_k", "-o", out}, []string{`unknown weight type "q3_k"`, "q4_k_m"}},
		{[]string{"-p", "tiny-glm", "--layers", "0", "-o", out}, []string{"--layers 0", "1 to 256"}},
		{[]string{"-p", "tiny-glm", "--layers", "-3", "-o", out}, []string{"--layers -3", "1 to 256"}},
		{[]string{"-p", "tiny-glm", "--layers", "9999", "-o", out}, []string{"--layers 9999"}},
		{[]string{"-o", out}, []string{"--preset is required", "tiny-dsv2"}},
		{[]string{"-p", "tiny-glm"}, []string{"--output (-o) is required"}},
		{[]string{"-p", "tiny-glm", "-o", filepath.Join(dir, "no", "m.gguf")}, []string{"no such file or directory"}},
		{[]string{"-p", "tiny-glm", "--chat-template", filepath.Join(dir, "absent.jinja"), "-o", out}, []string{"chat template"}},
		{[]string{"-p", "tiny-glm", "-o", dir}, []string{dir + " is a directory"}},
		{[]string{"-p", "tiny-glm", "-o", filepath.Join(file, "m.gguf")}, []string{"not a directory"}},
	}
	// Root writes into a read-only directory anyway, so only others can see
	// the refusal.
	if os.Geteuid() != 0 {
		tests = append(tests, struct {
			args []string
			want []string
		}{[]string{"-p", "tiny-glm", "-o", filepath.Join(readOnly, "m.gguf")}, []string{"permission denied"}})
	}
	for _, tc := range tests {
		_, err := synthCLI(t, tc.args...)
		if err == nil {
			t.Errorf("synth %v: no error", tc.args)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("synth %v: error spans lines: %q", tc.args, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("synth %v: error %q lacks %q", tc.args, msg, w)
			}
		}
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("failed runs left files: %v", names)
	}
	if names, _ := os.ReadDir(readOnly); len(names) != 0 {
		t.Errorf("failed runs left files: %v", names)
	}
}

func TestSynthWrites(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tiny.gguf")
	tmpl := writeFile(t, dir, "chat.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}")
	msg, err := synthCLI(t, "--preset", "tiny-glm", "--type", "q4_k_m", "--seed", "5", "--layers", "2", "--mtp",
		"--chat-template", tmpl, "-o", out)
	if err != nil {
		t.Fatal(err)
	}
	// Not a terminal: one summary line, no progress.
	if lines := strings.Split(strings.TrimSpace(msg), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "wrote "+out) || !strings.Contains(msg, "/s)") {
		t.Errorf("summary: %q", msg)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, _ := f.Get("deepseek2.block_count"); v.Format() != "3" {
		t.Errorf("block_count %s, want 3 (2 layers + MTP)", v.Format())
	}
	if _, ok := f.Tensor("blk.2.nextn.eh_proj.weight"); !ok {
		t.Error("no MTP block")
	}
	if v, ok := f.Get("tokenizer.chat_template"); !ok || !strings.Contains(v.Format(), "messages") {
		t.Errorf("chat template: %v", v.Format())
	}

	list, err := synthCLI(t, "--list")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tiny-youtu", "tiny-dsv2", "tiny-glm", "youtu-llm-2b", "deepseek-v2-lite", "glm-4.7-flash"} {
		if !strings.Contains(list, p) {
			t.Errorf("--list lacks %s:\n%s", p, list)
		}
	}
}

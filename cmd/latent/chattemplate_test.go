package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/internal/golden"
)

// TestChatTemplateGolden renders every golden case through the CLI from the .jinja files.
func TestChatTemplateGolden(t *testing.T) {
	cases, err := golden.ReadTemplateCases(filepath.Join(goldenDir, "templates", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.Template+"/"+c.Case, func(t *testing.T) {
			msgs := writeFile(t, dir, strings.Repeat("m", i+1)+".json", c.Input.Messages)
			args := []string{"chat-template", filepath.Join(goldenDir, "templates", c.Template+".jinja"),
				"--messages", msgs, "--bos-token", c.BOSToken, "--eos-token", c.EOSToken}
			if c.Input.Tools != nil {
				tools := writeFile(t, dir, strings.Repeat("t", i+1)+".json", c.Input.Tools)
				args = append(args, "--tools", tools)
			}
			if !c.Input.AddGenerationPrompt {
				args = append(args, "--no-generation-prompt")
			}
			out, err := runLatent(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if out != c.Output {
				t.Errorf("latent %v\n got %q\nwant %q", args[1:], out, c.Output)
			}
		})
	}
}

// TestChatTemplateFromModel reads the template and the special tokens from a model file.
func TestChatTemplateFromModel(t *testing.T) {
	dir := t.TempDir()
	tmpl := writeFile(t, dir, "t.jinja", "{{ bos_token }}|{% for m in messages %}{{ m.role }}:{{ m.content }}|{% endfor %}"+
		"{% if add_generation_prompt %}assistant:{% endif %}{{ eos_token }}")
	model := filepath.Join(dir, "m.gguf")
	if _, err := runLatent(t, "synth", "--preset", "tiny-glm", "--layers", "1", "--chat-template", tmpl, "-o", model); err != nil {
		t.Fatal(err)
	}
	bos, eos := tokenText(t, model, "bos"), tokenText(t, model, "eos")
	if bos == "" || eos == "" || bos == eos {
		t.Fatalf("synth model has bos %q, eos %q", bos, eos)
	}
	msgs := writeFile(t, dir, "m.json", `[{"role":"user","content":"Hi ✓"}]`)

	out, err := runLatent(t, "chat-template", model, "--messages", msgs)
	if want := bos + "|user:Hi ✓|assistant:" + eos; err != nil || out != want {
		t.Errorf("from the model: %q, %v; want %q", out, err, want)
	}
	out, err = runLatent(t, "chat-template", model, "--messages", msgs, "--bos-token", "", "--eos-token", "E", "--no-generation-prompt")
	if want := "|user:Hi ✓|E"; err != nil || out != want {
		t.Errorf("with overrides: %q, %v; want %q", out, err, want)
	}

	// A model without a template renders with the ChatML default; a note goes to stderr, not into the prompt.
	root := newRootCmd()
	var stdout, stderr strings.Builder
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"chat-template", filepath.Join(goldenDir, "models", "tiny-youtu-f32.gguf"), "--messages", msgs})
	err = root.Execute()
	if want := "<|im_start|>user\nHi ✓<|im_end|>\n<|im_start|>assistant\n"; err != nil || stdout.String() != want {
		t.Errorf("default template: %q, %v; want %q", stdout.String(), err, want)
	}
	if !strings.Contains(stderr.String(), "has no chat template; using the ChatML default") {
		t.Errorf("stderr %q does not say the default is used", stderr.String())
	}
}

// tokenText looks the model's bos or eos token up in its vocabulary.
func tokenText(t *testing.T, path, which string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, ok := f.Get("tokenizer.ggml." + which + "_token_id")
	if !ok {
		t.Fatalf("%s has no %s token", path, which)
	}
	id, _ := v.Uint()
	tv, _ := f.Get("tokenizer.ggml.tokens")
	tokens, _ := tv.StringArray()
	return tokens[id]
}

func TestChatTemplateStdinAndVars(t *testing.T) {
	root := newRootCmd()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(`[{"role":"user","content":"Hi"}]`))
	root.SetArgs([]string{"chat-template", filepath.Join(goldenDir, "templates", "Qwen-Qwen3-0.6B.jinja"), "--messages", "-", "--var", "enable_thinking=false"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	// What jinja2 renders for Qwen3 with enable_thinking=False.
	if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestChatTemplateErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	msgs := write("m.json", `[{"role":"user","content":"Hi"}]`)
	noMsgs := write("empty.json", `[]`)
	badJSON := write("bad.json", `[{"role":"user",`)
	badTools := write("tools.json", `{"not":"an array"}`)
	broken := write("broken.jinja", "{% for m in messages %}\n{{ m.content }\n{% endfor %}")
	raising := write("raise.jinja", "{%- if messages | length == 0 %}\n{{- raise_exception('no messages') }}\n{%- endif %}")
	llama := filepath.Join(goldenDir, "templates", "meta-llama-Llama-3.1-8B-Instruct.jinja")
	notModel := write("notes.txt", "hello")

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"chat-template", llama}, `required flag(s) "messages" not set`},
		{[]string{"chat-template", "--messages", msgs}, "give a template: latent chat-template TEMPLATE"},
		{[]string{"chat-template", filepath.Join(dir, "absent.jinja"), "--messages", msgs}, "no such file"},
		{[]string{"chat-template", llama, "--messages", filepath.Join(dir, "absent.json")}, "--messages: open"},
		{[]string{"chat-template", llama, "--messages", badJSON}, "--messages " + badJSON + ": unexpected end of JSON"},
		{[]string{"chat-template", llama, "--messages", msgs, "--tools", badTools}, "--tools " + badTools + ": the file is a JSON object, want a JSON array"},
		{[]string{"chat-template", llama, "--messages", write("role.json", `[{"role":1,"content":"x"}]`)}, `"role" is a JSON number, want a JSON string`},
		{[]string{"chat-template", llama, "--messages", write("strs.json", `["hi"]`)}, "an element of the array is a JSON string, want a JSON object"},
		{[]string{"chat-template", write("for.jinja", "a\n{% for %}{% endfor %}"), "--messages", msgs}, "chat template line 2: "},
		{[]string{"chat-template", broken, "--messages", msgs}, broken + ": chat template line 2:"},
		{[]string{"chat-template", raising, "--messages", noMsgs}, raising + ": chat template line 2: no messages"},
		{[]string{"chat-template", llama, "--messages", write("sys.json", `[{"role":"system","content":"x"}]`), "--tools", write("t.json", `[{"type":"function"}]`)},
			"line 52: Cannot put tools in the first user message when there's no first user message!"},
		{[]string{"chat-template", notModel, "--messages", msgs}, notModel + `: not a GGUF file`},
		{[]string{"chat-template", llama, "--messages", msgs, "--var", "x"}, `--var "x": want NAME=JSON`},
		{[]string{"chat-template", llama, "--messages", msgs, "--var", "x=hello"}, `--var x: "hello" is not JSON`},
	}
	for _, tc := range tests {
		out, err := runLatent(t, tc.args...)
		checkError(t, fmt.Sprint("latent ", tc.args), err, tc.want)
		if out != "" {
			t.Errorf("latent %v: printed %q on failure", tc.args, out)
		}
	}
}

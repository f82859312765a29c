package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latent-ai/latent/internal/golden"
)

const goldenTemplates = "../../shared/golden/templates"

// goldenDate is the instant the golden renderings' strftime_now returned (golden README).
var goldenDate = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// goldenCase is a golden rendering with its input decoded for Render (Now unset).
type goldenCase struct {
	golden.TemplateCase
	in Input
}

func readGolden(t testing.TB) []goldenCase {
	t.Helper()
	raw, err := golden.ReadTemplateCases(filepath.Join(goldenTemplates, "expected.json"))
	if err != nil {
		t.Fatalf("golden templates (../shared must sit beside the repository): %v", err)
	}
	cases := make([]goldenCase, len(raw))
	for i, c := range raw {
		in := Input{AddGenerationPrompt: c.Input.AddGenerationPrompt, BOSToken: c.BOSToken, EOSToken: c.EOSToken}
		if err := json.Unmarshal(c.Input.Messages, &in.Messages); err != nil {
			t.Fatalf("%s/%s: messages: %v", c.Template, c.Case, err)
		}
		if c.Input.Tools != nil {
			if err := json.Unmarshal(c.Input.Tools, &in.Tools); err != nil {
				t.Fatalf("%s/%s: tools: %v", c.Template, c.Case, err)
			}
		}
		cases[i] = goldenCase{TemplateCase: c, in: in}
	}
	return cases
}

func readTemplate(t testing.TB, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(goldenTemplates, name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

func TestGoldenRenderings(t *testing.T) {
	cases := readGolden(t)
	templates := map[string]*Template{}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.Template+"/"+c.Case, func(t *testing.T) {
			tpl := templates[c.Template]
			if tpl == nil {
				var err error
				if tpl, err = Parse(readTemplate(t, c.Template)); err != nil {
					t.Fatal(err)
				}
				templates[c.Template] = tpl
			}
			in := c.in
			in.Now = goldenDate
			got, err := tpl.Render(in)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Output {
				t.Errorf("rendering differs from jinja2's\n got %q\nwant %q", got, c.Output)
			}
			if c.in.Tools != nil {
				seen["tools"] = true
			}
		})
	}
	if len(templates) != 4 || !seen["tools"] {
		t.Errorf("golden set covered %d templates (tools: %v), want 4 with tools", len(templates), seen["tools"])
	}
}

// TestConcurrentRender renders one template from many goroutines (the server shares a Template).
func TestConcurrentRender(t *testing.T) {
	cases := readGolden(t)
	tpl, err := Parse(readTemplate(t, cases[0].Template))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		if c.Template != cases[0].Template {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := tpl.Render(c.in)
			if err != nil || got != c.Output {
				t.Errorf("%s: concurrent render %q, %v", c.Case, got, err)
			}
		}()
	}
	wg.Wait()
}

func TestDefaultTemplate(t *testing.T) {
	tpl, err := Parse(DefaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Input{Messages: []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, src string
		want      string
	}{
		{"unclosed if", "line one\n{% if x %}\nno end", "chat template line "},
		{"bad expression", "a\nb\n{{ 1 + }}\n", "chat template line 3:"},
		{"unknown tag", "{% frobnicate %}", "chat template line 1:"},
		{"raise_exception", "{%- for m in messages %}\n{%- if m.role == 'bad' %}\n{{- raise_exception('Roles must alternate') }}\n{%- endif %}\n{%- endfor %}",
			"chat template line 3: Roles must alternate"},
		{"unknown method", "ok\n\n{{ messages[0].content.frobnicate() }}", "chat template line 3:"},
		// gonja reports a rejected tag argument without a position.
		{"for without a loop", "a\n{% for %}{% endfor %}", "chat template line 2: "},
		{"for deep inside", "a\nb\n\n{% if x %}\n{% for m in messages %}{% endfor %}\n{% for %}{% endfor %}{% endif %}\nc", "chat template line 6: "},
		{"set without a name", "{% set %}", "chat template line 1: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := Parse(tc.src)
			if err == nil {
				_, err = tpl.Render(Input{Messages: []Message{{Role: "bad", Content: "x"}}})
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// TestHostileTemplates: a template from a model file is untrusted input; what could crash the process or read
// files fails the render instead.
func TestHostileTemplates(t *testing.T) {
	defer func(n int) { maxOutput = n }(maxOutput)
	maxOutput = 1 << 16
	tests := []struct{ name, src, want string }{
		{"macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion deeper than 200"},
		{"include itself", "a\n{% include '" + templateName + "' %}", "line 2: {% include %} is not supported"},
		{"import", "{% import 'x.jinja' as x %}", "{% import %} is not supported"},
		{"from import", "{% from 'x.jinja' import y %}", "{% from %} is not supported"},
		{"extends", "{% extends 'base.jinja' %}", "{% extends %} is not supported"},
		{"recursive loop", "{% for x in [1, [2]] recursive %}{{ loop(x) }}{% endfor %}", "recursive for loops are not supported"},
		{"output flood", "{% for i in range(100) %}{% for j in range(100) %}xxxxxxxxxx{% endfor %}{% endfor %}", "output longer than 65536 bytes"},
		{"huge range", "{% for i in range(10000000) %}{% endfor %}", "range longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := Parse(tc.src)
			if err == nil {
				_, err = tpl.Render(Input{})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Recursion that ends renders as jinja2 would.
	tpl, err := Parse("{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(150) | length }}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tpl.Render(Input{}); err != nil || got != "492" {
		t.Errorf("bounded recursion: %q, %v; want 492 (jinja2)", got, err)
	}
}

func TestLexerErrorLine(t *testing.T) {
	_, err := Parse("{% for m in messages %}\r\n{{ m.content }\n{% endfor %}")
	if err == nil || !strings.HasPrefix(err.Error(), "chat template line 2: ") {
		t.Errorf("error %v, want one naming line 2", err)
	}
}

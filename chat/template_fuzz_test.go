package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: any text either parses or fails with a one-line error, and what parses renders or fails without
// a panic. Seeds are the golden templates (read from ../shared, not copied) and short fragments of the
// constructs they use.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenTemplates, "*.jinja"))
	for _, p := range files {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(string(src))
		}
	}
	for _, s := range []string{
		DefaultTemplate,
		"{%- set ns = namespace(last=-1) %}{%- for m in messages %}{%- if m.role == 'user' %}{% set ns.last = loop.index0 -%}{%- endif %}{%- endfor %}{{ ns.last }}",
		"{%- for message in messages[::-1] %}{{ message.content.split('</think>')[-1].lstrip('\\n') }}{% endfor %}",
		"{{ tools[0] | tojson(indent=4) }}{{ x | tojson(ensure_ascii=False) }}",
		"{%- macro visible_text(content) -%}{%- if content is string -%}{{- content }}{%- endif -%}{%- endmacro -%}{{ visible_text('a') }}",
		"{% for k, v in d.items() %}<{{ k }}>{{ v | tojson if v is not string else v }}{% endfor %}",
		"{% if not x is defined %}{{ raise_exception('no x') }}{% elif y %}{% break %}{% endif %}",
		"{{ strftime_now('%d %b %Y') }}{{ 'a' ~ b | trim }}{{ m['role'] + '\\n' }}",
		"{{ messages | selectattr('role', 'equalto', 'user') | list | length }}{# comment #}",
		"{% raw %}{{ x }}{% endraw %}{{ 'unterminated", "{%", "{{", "{#", "}}", "{% endfor %}", "{{ a[ }}",
	} {
		f.Add(s)
	}
	in := Input{
		Messages: []Message{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "hi"},
			{Role: "assistant", Content: "<think>r</think>ok", ToolCalls: []ToolCall{{ID: "1", Function: FunctionCall{Name: "f", Arguments: []byte(`{"a":1}`)}}}},
			{Role: "tool", Content: "res", ToolCallID: "1"},
		},
		Tools:               []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)},
		AddGenerationPrompt: true,
		BOSToken:            "<s>",
		EOSToken:            "</s>",
		Now:                 goldenDate,
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("parse error spans lines: %q", err)
			}
			return
		}
		// range() and string repetition can make a render take minutes; the parse was the point.
		if len(src) > 4096 || strings.Contains(src, "range") || strings.Contains(src, "*") {
			return
		}
		if _, err := tpl.Render(in); err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("render error spans lines: %q", err)
		}
	})
}

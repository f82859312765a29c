package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// testdata/jinja2.json holds cases beyond the golden set (tool calls and results, reasoning_content, template
// options, tojson's arguments, Python string methods, loop controls, dict order, filters) with what Python
// 3.11's jinja2 3.1.6 rendered in transformers' environment: ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True, extensions=[loopcontrols]), tojson = json.dumps(x, ensure_ascii=False, indent,
// separators, sort_keys), raise_exception, strftime_now at 2026-01-02 12:00:00. A template "@NAME" is the
// golden template NAME.jinja. Variables other than messages, tools, add_generation_prompt, bos_token and
// eos_token go in Input.Extra.
type jinja2Case struct {
	Name     string                     `json:"name"`
	Template string                     `json:"template"`
	Vars     map[string]json.RawMessage `json:"vars"`
	Output   *string                    `json:"output"`
	Error    string                     `json:"error"`
}

func TestJinja2Parity(t *testing.T) {
	raw, err := os.ReadFile("testdata/jinja2.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []jinja2Case
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			src := c.Template
			if name, ok := strings.CutPrefix(src, "@"); ok {
				src = readTemplate(t, name)
			}
			in := Input{Now: goldenDate, Extra: map[string]any{}}
			for k, v := range c.Vars {
				var err error
				switch k {
				case "messages":
					err = json.Unmarshal(v, &in.Messages)
				case "tools":
					err = json.Unmarshal(v, &in.Tools)
				case "add_generation_prompt":
					err = json.Unmarshal(v, &in.AddGenerationPrompt)
				case "bos_token":
					err = json.Unmarshal(v, &in.BOSToken)
				case "eos_token":
					err = json.Unmarshal(v, &in.EOSToken)
				default:
					in.Extra[k] = v
				}
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
			}
			tpl, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(in)
			if c.Output == nil {
				if err == nil || !strings.Contains(err.Error(), c.Error) {
					t.Errorf("error %v, want one containing %q (output %q)", err, c.Error, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != *c.Output {
				t.Errorf("differs from jinja2\n got %q\nwant %q", got, *c.Output)
			}
		})
	}
}

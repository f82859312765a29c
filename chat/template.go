// Package chat turns a conversation into the prompt text a model was trained on, by rendering the model's
// Jinja2 chat template (the GGUF key tokenizer.chat_template) the way Hugging Face transformers does.
//
// Templates run on github.com/nikolalohinski/gonja/v2 configured as transformers configures Python's jinja2:
// trim_blocks and lstrip_blocks on, loop controls ({% break %}, {% continue %}), and the globals and filters
// transformers adds: raise_exception(msg) fails the render with msg, strftime_now(format) formats the current
// time (Input.Now when set), and tojson dumps as Python's json.dumps with ensure_ascii=False by default, keeping
// the keys in the order they arrived. The Python string, dict and list methods templates call (split, strip,
// startswith, items, get, ...) behave as in Python. Templates cannot include, import or extend other files.
//
// A model without a template gets DefaultTemplate, ChatML (<|im_start|>role\ncontent<|im_end|>\n), the same
// fallback llama.cpp uses.
package chat

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/latent-ai/latent/gguf"
)

// DefaultTemplate is the template of a model whose file carries none: ChatML, as llama.cpp falls back to.
const DefaultTemplate = "{%- for message in messages %}" +
	"{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
	"{%- endfor %}" +
	"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"

// Template is a parsed chat template, safe for concurrent Render calls.
type Template struct {
	// Source is the template text.
	Source string
	// BOSToken and EOSToken are the model's special-token strings (bos_token and eos_token in the template);
	// Input.BOSToken and Input.EOSToken override them when not empty.
	BOSToken, EOSToken string
	// Default reports whether Source is DefaultTemplate because the model file carries no template.
	Default bool

	compiled *compiled
}

// Input is what a template renders: the variables transformers' apply_chat_template passes.
type Input struct {
	Messages []Message
	// Tools are the tool (function) definitions, each one JSON object as OpenAI's "tools" array holds them.
	// They stay raw JSON so that tojson reproduces their keys in the caller's order, as Python does.
	Tools []json.RawMessage
	// AddGenerationPrompt ends the prompt with the opening of an assistant turn.
	AddGenerationPrompt bool
	// BOSToken and EOSToken, when not empty, replace the Template's.
	BOSToken, EOSToken string
	// Extra holds further template variables (enable_thinking, date_string, ...). Values are Go values
	// (bool, string, numbers, []any, map[string]any with keys taken in sorted order) or json.RawMessage.
	Extra map[string]any
	// Now is the time strftime_now formats; zero means the current time.
	Now time.Time
}

// Message is one turn of a conversation, as OpenAI's chat API and transformers represent it. It decodes from
// OpenAI's JSON; fields left empty are absent from the template's message dict (templates test
// `'tool_calls' in message` and `message.reasoning_content is defined`), except role and content.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is an assistant's thinking, kept apart from its answer.
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a "tool" message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ToolCall is one function call an assistant made.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments. Arguments is any JSON value: an object becomes a dict
// the template can iterate (what templates written for transformers expect), a string stays a string.
// OpenAI clients send the arguments as a JSON-encoded string; pass the decoded object text here.
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Parse compiles a template. A syntax error names the template line.
func Parse(src string) (*Template, error) {
	c, err := compile(src)
	if err != nil {
		return nil, err
	}
	return &Template{Source: src, compiled: c}, nil
}

// FromGGUF returns the model's chat template (tokenizer.chat_template), or DefaultTemplate when it has none,
// with the model's BOS and EOS token strings (tokenizer.ggml.bos_token_id and eos_token_id looked up in
// tokenizer.ggml.tokens; empty when absent).
func FromGGUF(f *gguf.File) (*Template, error) {
	src, isDefault := DefaultTemplate, true
	if v, ok := f.Get("tokenizer.chat_template"); ok {
		s, ok := v.String()
		if !ok {
			return nil, fmt.Errorf("tokenizer.chat_template is a %s, not a string", v.Type())
		}
		src, isDefault = s, false
	}
	t, err := Parse(src)
	if err != nil {
		return nil, err
	}
	t.Default = isDefault
	if t.BOSToken, err = specialToken(f, "tokenizer.ggml.bos_token_id"); err != nil {
		return nil, err
	}
	if t.EOSToken, err = specialToken(f, "tokenizer.ggml.eos_token_id"); err != nil {
		return nil, err
	}
	return t, nil
}

// specialToken is the text of the token whose id the key holds, or "" when the key is absent.
func specialToken(f *gguf.File, key string) (string, error) {
	v, ok := f.Get(key)
	if !ok {
		return "", nil
	}
	id, ok := v.Uint()
	if !ok {
		return "", fmt.Errorf("%s is a %s, not a token id", key, v.Type())
	}
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return "", fmt.Errorf("%s is %d but the file has no tokenizer.ggml.tokens", key, id)
	}
	tokens, ok := tv.StringArray()
	if !ok {
		return "", fmt.Errorf("tokenizer.ggml.tokens is not an array of strings")
	}
	if id >= uint64(len(tokens)) {
		return "", fmt.Errorf("%s is %d, past the vocabulary of %d tokens", key, id, len(tokens))
	}
	return tokens[id], nil
}

// Render renders the template with the input. An error (a failed raise_exception, a bad operation) names the
// template line where it happened.
func (t *Template) Render(in Input) (string, error) {
	vars, err := t.variables(in)
	if err != nil {
		return "", err
	}
	return t.compiled.render(vars)
}

// variables builds the template's context as transformers does: messages, tools (only when given),
// add_generation_prompt, bos_token, eos_token, then Extra.
func (t *Template) variables(in Input) (map[string]any, error) {
	vars := make(map[string]any, 5+len(in.Extra))
	for k, v := range in.Extra {
		pv, err := pyValue(v)
		if err != nil {
			return nil, fmt.Errorf("template variable %s: %w", k, err)
		}
		vars[k] = pv
	}
	msgs := make([]any, len(in.Messages))
	for i, m := range in.Messages {
		d, err := m.dict()
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		msgs[i] = d
	}
	vars["messages"] = msgs
	if in.Tools != nil {
		tools := make([]any, len(in.Tools))
		for i, raw := range in.Tools {
			v, err := decodeJSON(raw)
			if err != nil {
				return nil, fmt.Errorf("tool %d: %w", i, err)
			}
			tools[i] = v
		}
		vars["tools"] = tools
	}
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	vars["bos_token"] = t.BOSToken
	if in.BOSToken != "" {
		vars["bos_token"] = in.BOSToken
	}
	vars["eos_token"] = t.EOSToken
	if in.EOSToken != "" {
		vars["eos_token"] = in.EOSToken
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars["strftime_now"] = strftimeNow(now)
	return vars, nil
}

package chat

import (
	"encoding/json"
	"strings"
	"unicode"
)

// Tool calls in a model's output. A model that was given tools answers a call by writing it in the syntax
// its chat template uses for calls in the history; the server turns that text back into structured calls
// (OpenAI's tool_calls, Ollama's message.tool_calls), as llama.cpp's server and ollama do.

// ToolSyntax is one way models write tool calls: Begin opens them (the answer's text ends there), and parse
// reads the text from Begin on.
type ToolSyntax struct {
	Name  string // "glm", "deepseek" or "hermes"
	Begin string
	parse func(text string, types paramTypes) ([]ToolCall, bool)
}

// The syntaxes, each named for the family of templates that write it.
var (
	// GLM-4.5 and later: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>, a
	// string value written as is, others as JSON.
	glmTools = &ToolSyntax{Name: "glm", Begin: "<tool_call>", parse: parseGLMCalls}
	// DeepSeek-V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...
	// <｜tool▁calls▁end｜>, ARGS a JSON object.
	deepseekTools = &ToolSyntax{Name: "deepseek", Begin: dsCallsBegin, parse: parseDeepSeekCalls}
	// Hermes (Qwen2.5, Qwen3 and many others): <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
	hermesTools = &ToolSyntax{Name: "hermes", Begin: "<tool_call>", parse: parseHermesCalls}
)

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// DetectToolSyntax returns the syntax a chat template writes tool calls in, or nil when it writes none
// this package reads (then calls stay in the answer's text).
func DetectToolSyntax(src string) *ToolSyntax {
	switch {
	case strings.Contains(src, "tool▁call▁begin"):
		return deepseekTools
	case strings.Contains(src, "<arg_key>"):
		return glmTools
	case strings.Contains(src, "<tool_call>"):
		return hermesTools
	}
	return nil
}

// ParseToolCalls reads text, an answer that starts with syn.Begin, as tool calls. It reports false when no
// call could be read: the text is then an ordinary answer. tools are the request's tool definitions, whose
// parameter types say how to read a GLM value.
func (syn *ToolSyntax) ParseToolCalls(text string, tools []json.RawMessage) ([]ToolCall, bool) {
	calls, ok := syn.parse(text, typesOf(tools))
	if !ok || len(calls) == 0 {
		return nil, false
	}
	for i := range calls {
		calls[i].Type = "function"
	}
	return calls, true
}

// paramTypes is each tool's parameters' JSON schema types: name → parameter → type.
type paramTypes map[string]map[string]string

func typesOf(tools []json.RawMessage) paramTypes {
	types := paramTypes{}
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]struct {
						Type any `json:"type"` // a name, or a list of names
					} `json:"properties"`
				} `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		m := map[string]string{}
		for k, p := range t.Function.Parameters.Properties {
			switch typ := p.Type.(type) {
			case string:
				m[k] = typ
			case []any: // ["string"], as Ollama's clients send it
				if s, ok := typ[0].(string); ok && len(typ) == 1 {
					m[k] = s
				}
			}
		}
		types[t.Function.Name] = m
	}
	return types
}

// blocks splits text into the bodies between open and close (the last may be unclosed: the answer was cut
// off or ended without it), failing when anything but whitespace lies outside them.
func blocks(text, open, close string) ([]string, bool) {
	var out []string
	for {
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
		if text == "" {
			return out, true
		}
		if !strings.HasPrefix(text, open) {
			return nil, false
		}
		text = text[len(open):]
		i := strings.Index(text, close)
		if i < 0 {
			return append(out, text), true
		}
		out = append(out, text[:i])
		text = text[i+len(close):]
	}
}

func parseGLMCalls(text string, types paramTypes) ([]ToolCall, bool) {
	bodies, ok := blocks(text, "<tool_call>", "</tool_call>")
	if !ok {
		return nil, false
	}
	var calls []ToolCall
	for _, body := range bodies {
		name, rest := body, ""
		if i := strings.Index(body, "<arg_key>"); i >= 0 {
			name, rest = body[:i], body[i:]
		}
		name = strings.TrimSpace(name)
		if !isName(name) {
			return nil, false
		}
		args := map[string]json.RawMessage{}
		var keys []string
		for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
			k, after, ok := between(rest, "<arg_key>", "</arg_key>")
			if !ok {
				return nil, false
			}
			v, after2, ok := between(strings.TrimLeftFunc(after, unicode.IsSpace), "<arg_value>", "</arg_value>")
			if !ok {
				return nil, false
			}
			k = strings.TrimSpace(k)
			if _, dup := args[k]; !dup {
				keys = append(keys, k)
			}
			args[k] = glmValue(v, types[name][k])
			rest = after2
		}
		calls = append(calls, ToolCall{Function: FunctionCall{Name: name, Arguments: objectOf(keys, args)}})
	}
	return calls, true
}

// isName reports whether s can be a function's name: not empty, no spaces, no markup.
func isName(s string) bool {
	return s != "" && strings.IndexFunc(s, unicode.IsSpace) < 0 && !strings.ContainsAny(s, "<>")
}

// glmValue reads a GLM argument value: the template writes a string as is and anything else as JSON, so a
// value is JSON unless its parameter is a string or it is not valid JSON.
func glmValue(v, typ string) json.RawMessage {
	if typ != "string" {
		if t := strings.TrimSpace(v); t != "" && json.Valid([]byte(t)) {
			return json.RawMessage(t)
		}
	}
	b, _ := json.Marshal(v) // a string always marshals
	return b
}

// between returns the text between open (which s must start with) and close, and what follows close.
func between(s, open, close string) (inside, after string, ok bool) {
	if !strings.HasPrefix(s, open) {
		return "", "", false
	}
	s = s[len(open):]
	i := strings.Index(s, close)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(close):], true
}

// objectOf writes args as a JSON object, its keys in the order written.
func objectOf(keys []string, args map[string]json.RawMessage) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(args[k])
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

func parseDeepSeekCalls(text string, _ paramTypes) ([]ToolCall, bool) {
	text = strings.TrimPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), dsCallsBegin)
	if i := strings.Index(text, dsCallsEnd); i >= 0 {
		if strings.TrimSpace(text[i+len(dsCallsEnd):]) != "" {
			return nil, false
		}
		text = text[:i]
	}
	bodies, ok := blocks(text, dsCallBegin, dsCallEnd)
	if !ok {
		return nil, false
	}
	var calls []ToolCall
	for _, body := range bodies {
		name, args, ok := strings.Cut(body, dsSep)
		name = strings.TrimSpace(name)
		if !ok || !isName(name) {
			return nil, false
		}
		obj, ok := argumentsObject(args)
		if !ok {
			return nil, false
		}
		calls = append(calls, ToolCall{Function: FunctionCall{Name: name, Arguments: obj}})
	}
	return calls, true
}

// argumentsObject reads a call's arguments: a JSON object, or a JSON string holding one (the DeepSeek-V3.1
// template writes the history's arguments through tojson).
func argumentsObject(s string) (json.RawMessage, bool) {
	s = strings.TrimSpace(s)
	var str string
	if strings.HasPrefix(s, `"`) && json.Unmarshal([]byte(s), &str) == nil {
		s = strings.TrimSpace(str)
	}
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return nil, false
	}
	return json.RawMessage(s), true
}

func parseHermesCalls(text string, _ paramTypes) ([]ToolCall, bool) {
	bodies, ok := blocks(text, "<tool_call>", "</tool_call>")
	if !ok {
		return nil, false
	}
	var calls []ToolCall
	for _, body := range bodies {
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(body)), &c) != nil || c.Name == "" {
			return nil, false
		}
		obj := json.RawMessage("{}")
		if len(c.Arguments) > 0 && string(c.Arguments) != "null" {
			var ok bool
			if obj, ok = argumentsObject(string(c.Arguments)); !ok {
				return nil, false
			}
		}
		calls = append(calls, ToolCall{Function: FunctionCall{Name: c.Name, Arguments: obj}})
	}
	return calls, true
}

// ToolCallSplitter separates streamed answer text from the tool calls that follow it: text before the
// syntax's Begin passes (a tail that could begin it, and trailing whitespace, are held back until the next
// piece decides), text from Begin on is kept for Flush, which reads it as calls, or, when it holds none,
// returns it as text.
type ToolCallSplitter struct {
	syn     *ToolSyntax
	tools   []json.RawMessage
	pending string // a tail that may begin syn.Begin
	calls   strings.Builder
	in      bool
}

// NewToolCallSplitter starts a splitter for an answer to a request that offered tools.
func NewToolCallSplitter(syn *ToolSyntax, tools []json.RawMessage) *ToolCallSplitter {
	return &ToolCallSplitter{syn: syn, tools: tools}
}

// Add takes the next piece of the answer and returns the text that is final.
func (s *ToolCallSplitter) Add(text string) string {
	if s.in {
		s.calls.WriteString(text)
		return ""
	}
	s.pending += text
	if i := strings.Index(s.pending, s.syn.Begin); i >= 0 {
		out := strings.TrimRightFunc(s.pending[:i], unicode.IsSpace)
		s.calls.WriteString(s.pending[len(out):]) // the whitespace too, should the calls not read
		s.pending, s.in = "", true
		return out
	}
	keep := PartialSuffix(s.pending, s.syn.Begin)
	out := strings.TrimRightFunc(s.pending[:len(s.pending)-keep], unicode.IsSpace)
	s.pending = s.pending[len(out):]
	return out
}

// Flush ends the answer: it returns the text still held and the calls (the calls' text, and the whitespace
// before it, dropped), or, when what followed Begin holds no call, that text.
func (s *ToolCallSplitter) Flush() (string, []ToolCall) {
	if !s.in {
		out := s.pending
		s.pending = ""
		return out, nil
	}
	text := s.calls.String()
	s.calls.Reset()
	s.in = false
	calls, ok := s.syn.ParseToolCalls(text, s.tools)
	if !ok {
		return text, nil
	}
	return "", calls
}

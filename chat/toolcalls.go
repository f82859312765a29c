package chat

import (
	"encoding/json"
	"strings"
	"unicode"
)

// Tool calls in a model's output. A model that was given tools answers a call by writing it in the syntax
// its chat template uses for calls in the history; the server turns that text back into structured calls
// (OpenAI's tool_calls, Ollama's message.tool_calls), as llama.cpp's server and ollama do.

// ToolSyntax is one way models write tool calls: Begin opens them (the answer's text ends there); each call
// lies between open and close (DeepSeek's inside Begin … end).
type ToolSyntax struct {
	Name             string // "glm", "deepseek", "deepseek-v3.1" or "hermes"
	Begin            string
	end, open, close string
	call             func(body string, tools toolSet) (ToolCall, bool)
	// viable reports whether the text after Begin can still be the start of a call.
	viable func(after string) bool
	// named is how a call of function name begins, as the templates write it (CallPrefix).
	named func(name string) (prefix, next string)
	// toolsPrompt, where set, describes the tools offered for the system prompt: its templates leave
	// them out (ToolsPrompt).
	toolsPrompt func(tools []json.RawMessage) string
}

// The syntaxes, each named for the family of templates that write it.
var (
	// GLM-4.5 and later: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>, a
	// string value written as is, others as JSON.
	glmTools = &ToolSyntax{Name: "glm", Begin: "<tool_call>", open: "<tool_call>", close: "</tool_call>", call: glmCall, viable: glmViable,
		named: func(name string) (string, string) { return "<tool_call>" + name, "<\n" }}
	// DeepSeek-V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...
	// <｜tool▁calls▁end｜>, ARGS a JSON object; DeepSeek-V3 and R1 wrote "function<｜tool▁sep｜>NAME" and the
	// arguments in a ```json block.
	deepseekTools = &ToolSyntax{Name: "deepseek", Begin: dsCallsBegin, end: dsCallsEnd, open: dsCallBegin, close: dsCallEnd,
		call: deepseekCall, viable: deepseekViable,
		named: func(name string) (string, string) {
			return dsCallsBegin + dsCallBegin + "function" + dsSep + name + "\n", ""
		}}
	// DeepSeek-V3.1's templates, which write the calls but leave the tools to the system prompt. (V3's and
	// R1's do not show them either, but their models were taught the ```json form, not ToolsPrompt's.)
	deepseekV31Tools = func() *ToolSyntax {
		s := *deepseekTools
		s.Name, s.toolsPrompt = "deepseek-v3.1", deepseekToolsPrompt
		s.named = func(name string) (string, string) { return dsCallsBegin + dsCallBegin + name + dsSep, "" }
		return &s
	}()
	// Hermes (Qwen2.5, Qwen3 and many others): <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
	hermesTools = &ToolSyntax{Name: "hermes", Begin: "<tool_call>", open: "<tool_call>", close: "</tool_call>", call: hermesCall, viable: hermesViable,
		named: func(name string) (string, string) {
			quoted, _ := json.Marshal(name) // a string always marshals
			return "<tool_call>\n{\"name\": " + string(quoted), ""
		}}
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
	case strings.Contains(src, "tool▁call▁begin") && !strings.Contains(src, "```json"):
		return deepseekV31Tools
	case strings.Contains(src, "tool▁call▁begin"):
		return deepseekTools
	case strings.Contains(src, "<arg_key>"):
		return glmTools
	case strings.Contains(src, "<tool_call>"):
		return hermesTools
	}
	return nil
}

// ParseToolCalls reads text, an answer's tail that starts with syn.Begin, as tool calls, and returns them
// with the text around them. It reports false when the text is not whole calls (a call cut off, one of a
// tool not offered, markup that does not read): the text is then an ordinary answer. tools are the
// request's tool definitions: the names a call may have, and the parameter types that say how to read a
// GLM value.
func (syn *ToolSyntax) ParseToolCalls(text string, tools []json.RawMessage) (calls []ToolCall, content string, ok bool) {
	ts := toolSetOf(tools)
	var rest strings.Builder
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if syn.end != "" { // the calls' own brackets: text may follow the closing one (which may be left out)
		text = strings.TrimPrefix(text, syn.Begin)
		if i := strings.Index(text, syn.end); i >= 0 {
			rest.WriteString(text[i+len(syn.end):])
			text = text[:i]
		}
	}
	for {
		i := strings.Index(text, syn.open)
		if i < 0 {
			if syn.end != "" && strings.TrimSpace(text) != "" {
				return nil, "", false // DeepSeek's brackets hold nothing but calls
			}
			rest.WriteString(text)
			break
		}
		if syn.end != "" && strings.TrimSpace(text[:i]) != "" {
			return nil, "", false
		}
		rest.WriteString(text[:i])
		text = text[i+len(syn.open):]
		j := strings.Index(text, syn.close)
		if j < 0 {
			return nil, "", false // cut off: not a call to run
		}
		c, ok := syn.call(text[:j], ts)
		if !ok || !ts.offers(c.Function.Name) {
			return nil, "", false
		}
		c.Type = "function"
		calls = append(calls, c)
		text = text[j+len(syn.close):]
	}
	if len(calls) == 0 {
		return nil, "", false
	}
	return calls, strings.TrimSpace(rest.String()), true
}

// toolSet is what the offered tools say about calls: their names, and which parameters are strings.
type toolSet struct {
	names   map[string]bool
	strings map[string]map[string]bool // tool → parameter → its value is a string
}

// offers reports whether a call may name name: any name when the tools named none.
func (t toolSet) offers(name string) bool { return len(t.names) == 0 || t.names[name] }

// schema is the part of a parameter's JSON schema that says whether it is a string.
type schema struct {
	Type  any      `json:"type"` // a name, or a list of names
	AnyOf []schema `json:"anyOf"`
	OneOf []schema `json:"oneOf"`
	Enum  []any    `json:"enum"`
}

// isString reports whether a value of the schema is written as a string: its type, one of its types, or
// one of its alternatives is "string", or its values are strings.
func (s schema) isString() bool {
	switch typ := s.Type.(type) {
	case string:
		return typ == "string"
	case []any:
		for _, t := range typ {
			if t == "string" {
				return true
			}
		}
	}
	for _, alt := range append(s.AnyOf, s.OneOf...) {
		if alt.isString() {
			return true
		}
	}
	if len(s.Enum) == 0 {
		return false
	}
	for _, v := range s.Enum {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

func toolSetOf(tools []json.RawMessage) toolSet {
	ts := toolSet{names: map[string]bool{}, strings: map[string]map[string]bool{}}
	for _, raw := range tools {
		t, err := ParseToolDef(raw)
		if err != nil {
			continue // the server refused it already
		}
		ts.names[t.Function.Name] = true
		var params struct {
			Properties map[string]schema `json:"properties"`
		}
		if len(t.Function.Parameters) > 0 && json.Unmarshal(t.Function.Parameters, &params) != nil {
			params.Properties = nil // not an object schema: no argument is known to be a string
		}
		m := map[string]bool{}
		for k, p := range params.Properties {
			m[k] = p.isString()
		}
		ts.strings[t.Function.Name] = m
	}
	return ts
}

// isName reports whether s can be a function's name: not empty, no spaces, no markup.
func isName(s string) bool {
	return s != "" && strings.IndexFunc(s, unicode.IsSpace) < 0 && !strings.ContainsAny(s, "<>{}")
}

func glmCall(body string, ts toolSet) (ToolCall, bool) {
	name, rest := body, ""
	if i := strings.Index(body, "<arg_key>"); i >= 0 {
		name, rest = body[:i], body[i:]
	}
	name = strings.TrimSpace(name)
	if !isName(name) {
		return ToolCall{}, false
	}
	args := map[string]json.RawMessage{}
	var keys []string
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		k, after, ok := between(rest, "<arg_key>", "</arg_key>")
		if !ok {
			return ToolCall{}, false
		}
		v, after2, ok := between(strings.TrimLeftFunc(after, unicode.IsSpace), "<arg_value>", "</arg_value>")
		if !ok {
			return ToolCall{}, false
		}
		k = strings.TrimSpace(k)
		if _, dup := args[k]; !dup {
			keys = append(keys, k)
		}
		args[k] = glmValue(v, ts.strings[name][k])
		rest = after2
	}
	return ToolCall{Function: FunctionCall{Name: name, Arguments: objectOf(keys, args)}}, true
}

// glmViable: the name, up to the first markup, has no space inside.
func glmViable(after string) bool {
	name, marked := after, false
	if i := strings.IndexByte(after, '<'); i >= 0 {
		name, marked = after[:i], true
	}
	if !marked && len(name) > 256 {
		return false
	}
	name = strings.TrimSpace(name)
	return name == "" || isName(name)
}

// glmValue reads a GLM argument value: the template writes a string as is and anything else as JSON, so a
// value is JSON unless its parameter is a string or it is not valid JSON.
func glmValue(v string, str bool) json.RawMessage {
	if !str {
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

func deepseekCall(body string, _ toolSet) (ToolCall, bool) {
	name, args, ok := strings.Cut(body, dsSep)
	name = strings.TrimSpace(name)
	if name == "function" { // V3 and R1: NAME, then the arguments in a ```json block
		var fence bool
		name, args, fence = strings.Cut(strings.TrimLeftFunc(args, unicode.IsSpace), "\n")
		name, args = strings.TrimSpace(name), strings.TrimSpace(args)
		if !fence || !strings.HasPrefix(args, "```json") || !strings.HasSuffix(args, "```") || len(args) < len("```json```") {
			return ToolCall{}, false
		}
		args = args[len("```json") : len(args)-len("```")]
	}
	if !ok || !isName(name) {
		return ToolCall{}, false
	}
	obj, ok := argumentsObject(args)
	if !ok {
		return ToolCall{}, false
	}
	return ToolCall{Function: FunctionCall{Name: name, Arguments: obj}}, true
}

// deepseekViable: the calls' bracket is followed by a call's.
func deepseekViable(after string) bool {
	t := strings.TrimLeftFunc(after, unicode.IsSpace)
	return strings.HasPrefix(t, dsCallBegin) || strings.HasPrefix(dsCallBegin, t)
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

func hermesCall(body string, _ toolSet) (ToolCall, bool) {
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"` // what some models write instead
	}
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &c) != nil || !isName(c.Name) {
		return ToolCall{}, false
	}
	args := c.Arguments
	if len(args) == 0 {
		args = c.Parameters
	}
	obj := json.RawMessage("{}")
	if len(args) > 0 && string(args) != "null" {
		var ok bool
		if obj, ok = argumentsObject(string(args)); !ok {
			return ToolCall{}, false
		}
	}
	return ToolCall{Function: FunctionCall{Name: c.Name, Arguments: obj}}, true
}

// hermesViable: the call is a JSON object.
func hermesViable(after string) bool {
	t := strings.TrimLeftFunc(after, unicode.IsSpace)
	return t == "" || t[0] == '{'
}

// ToolCallSplitter separates streamed answer text from the tool calls that follow it: text before the
// syntax's Begin passes (a tail that could begin it, and trailing whitespace, are held back until the next
// piece decides); from Begin on, text is kept for Flush, which reads it as calls, unless what follows Begin
// stops looking like a call, and then it passes too.
type ToolCallSplitter struct {
	syn   *ToolSyntax
	tools []json.RawMessage
	held  string
	in    bool // held is whitespace, Begin, and what followed
	at    int  // where Begin starts in held
	said  bool // text has passed
}

// NewToolCallSplitter starts a splitter for an answer to a request that offered tools.
func NewToolCallSplitter(syn *ToolSyntax, tools []json.RawMessage) *ToolCallSplitter {
	return &ToolCallSplitter{syn: syn, tools: tools}
}

// Add takes the next piece of the answer and returns the text that is final.
func (s *ToolCallSplitter) Add(text string) string {
	var out strings.Builder
	s.held += text
	begin := s.syn.Begin
	for {
		if !s.in {
			i := strings.Index(s.held, begin)
			if i < 0 {
				keep := PartialSuffix(s.held, begin)
				body := strings.TrimRightFunc(s.held[:len(s.held)-keep], unicode.IsSpace)
				out.WriteString(body)
				s.held = s.held[len(body):]
				return s.pass(out.String())
			}
			body := strings.TrimRightFunc(s.held[:i], unicode.IsSpace)
			out.WriteString(body)
			s.held, s.in, s.at = s.held[len(body):], true, i-len(body)
		}
		after := s.held[s.at+len(begin):]
		if s.syn.viable(after) || strings.Contains(after, s.syn.close) { // viable first: it is short on a call's text
			return s.pass(out.String()) // a call, or may still be one
		}
		// Not a call: its text passes, and a later Begin may still open one.
		out.WriteString(s.held[:s.at+len(begin)])
		s.held, s.in = after, false
	}
}

// pass returns text that goes out, noting whether any has.
func (s *ToolCallSplitter) pass(text string) string {
	s.said = s.said || text != ""
	return text
}

// Flush ends the answer: it returns the text still held and the calls: the text after the calls (on a line
// of its own after the text before them), or, when what followed Begin is not whole calls, that text.
func (s *ToolCallSplitter) Flush() (string, []ToolCall) {
	held := s.held
	s.held = ""
	if !s.in {
		return held, nil
	}
	s.in = false
	calls, content, ok := s.syn.ParseToolCalls(held, s.tools)
	if !ok {
		return held, nil
	}
	if content != "" && s.said {
		content = "\n" + content
	}
	return content, calls
}

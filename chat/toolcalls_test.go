package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// weatherTools are the tool definitions the tests offer, as OpenAI's "tools" array holds them.
var weatherTools = []json.RawMessage{
	json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"zip":{"type":"string"}}}}}`),
	json.RawMessage(`{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string"},"filters":{"type":"object"}}}}}`),
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func checkCalls(t *testing.T, got, want []ToolCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Type != "function" || got[i].Function.Name != want[i].Function.Name || !sameJSON(t, got[i].Function.Arguments, want[i].Function.Arguments) {
			t.Errorf("call %d: %s %s %s, want function %s %s", i, got[i].Type, got[i].Function.Name, got[i].Function.Arguments,
				want[i].Function.Name, want[i].Function.Arguments)
		}
	}
}

// TestToolCallsRoundTrip writes calls into a conversation's history with each real template that has a
// syntax for them, then reads the text the template wrote back: what a model trained on the template writes
// when it calls a tool.
func TestToolCallsRoundTrip(t *testing.T) {
	calls := []ToolCall{
		{Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":3,"zip":"75001"}`)}},
		{Type: "function", Function: FunctionCall{Name: "search", Arguments: json.RawMessage(`{"query":"café \"au lait\"","filters":{"year":[2024,2025],"open":true}}`)}},
	}
	cases := []struct {
		file, syntax, end string
	}{
		{"GLM-4.7-Flash.jinja", "glm", "</tool_call>"},
		{"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek", dsCallsEnd},
		{"Qwen-Qwen3-0.6B.jinja", "hermes", "</tool_call>"},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "", ""},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(goldenTemplates, c.file))
			if err != nil {
				t.Fatalf("golden templates (../shared must sit beside the repository): %v", err)
			}
			syn := DetectToolSyntax(string(src))
			if c.syntax == "" {
				if syn != nil {
					t.Fatalf("syntax %s, want none", syn.Name)
				}
				return
			}
			if syn == nil || syn.Name != c.syntax {
				t.Fatalf("syntax %v, want %s", syn, c.syntax)
			}
			tmpl, err := Parse(string(src))
			if err != nil {
				t.Fatal(err)
			}
			out, err := tmpl.Render(Input{Messages: []Message{
				{Role: "user", Content: "What is the weather in Paris?"},
				{Role: "assistant", ToolCalls: calls},
				{Role: "tool", Content: `{"temp": 21}`, ToolCallID: "call_1"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			i, j := strings.Index(out, syn.Begin), strings.LastIndex(out, c.end)
			if i < 0 || j < i {
				t.Fatalf("no calls in the rendering:\n%s", out)
			}
			text := out[i : j+len(c.end)]
			got, ok := syn.ParseToolCalls(text, weatherTools)
			if !ok {
				t.Fatalf("calls not read from %q", text)
			}
			checkCalls(t, got, calls)
		})
	}
}

func TestParseToolCalls(t *testing.T) {
	weather := func(args string) []ToolCall {
		return []ToolCall{{Function: FunctionCall{Name: "get_weather", Arguments: json.RawMessage(args)}}}
	}
	cases := []struct {
		name string
		syn  *ToolSyntax
		text string
		want []ToolCall // nil: not calls
	}{
		{"glm as generated", glmTools, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
			weather(`{"city":"Paris","days":3}`)},
		{"glm string parameter stays a string", glmTools, "<tool_call>get_weather<arg_key>zip</arg_key><arg_value>75001</arg_value></tool_call>",
			weather(`{"zip":"75001"}`)},
		{"glm unknown parameter read as JSON", glmTools, "<tool_call>get_weather<arg_key>n</arg_key><arg_value>[1, 2]</arg_value></tool_call>",
			weather(`{"n":[1,2]}`)},
		{"glm text not JSON is a string", glmTools, "<tool_call>get_weather<arg_key>days</arg_key><arg_value>three</arg_value></tool_call>",
			weather(`{"days":"three"}`)},
		{"glm no arguments", glmTools, "<tool_call>get_weather</tool_call>", weather(`{}`)},
		{"glm cut off after a whole call", glmTools, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>", weather(`{"city":"Oslo"}`)},
		{"glm cut off inside a value", glmTools, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Os", nil},
		{"glm no name", glmTools, "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", nil},
		{"glm prose", glmTools, "<tool_call>I would call it</tool_call>", nil},
		{"glm text after the calls", glmTools, "<tool_call>get_weather</tool_call> and then", nil},
		{"deepseek", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `{"city": "Paris"}` + dsCallEnd + dsCallsEnd,
			weather(`{"city":"Paris"}`)},
		{"deepseek arguments as a JSON string", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `"{\"city\": \"Paris\"}"` + dsCallEnd + dsCallsEnd,
			weather(`{"city":"Paris"}`)},
		{"deepseek without the closing marker", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `{"city": "Paris"}` + dsCallEnd,
			weather(`{"city":"Paris"}`)},
		{"deepseek arguments not an object", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `[1]` + dsCallEnd + dsCallsEnd, nil},
		{"hermes", hermesTools, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", weather(`{"city":"Paris"}`)},
		{"hermes no arguments", hermesTools, `<tool_call>{"name": "get_weather"}</tool_call>`, weather(`{}`)},
		{"hermes not JSON", hermesTools, `<tool_call>get_weather(city="Paris")</tool_call>`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.syn.ParseToolCalls(c.text, weatherTools)
			if c.want == nil {
				if ok {
					t.Fatalf("read %+v from %q, want no calls", got, c.text)
				}
				return
			}
			if !ok {
				t.Fatalf("no calls read from %q", c.text)
			}
			checkCalls(t, got, c.want)
		})
	}
}

// TestToolCallSplitter feeds answers in every split into pieces that a stream could bring.
func TestToolCallSplitter(t *testing.T) {
	call := "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
	cases := []struct {
		name, text, content string
		calls               int
	}{
		{"text then a call", "Let me look.\n" + call, "Let me look.", 1},
		{"a call alone", call, "", 1},
		{"two calls", call + "\n" + call, "", 2},
		{"no call", "It is sunny <tool in Paris.  ", "It is sunny <tool in Paris.  ", 0},
		{"a call that does not read", "Sure: <tool_call>not a call", "Sure: <tool_call>not a call", 0},
		{"a marker's beginning at the end", "Sure <tool_ca", "Sure <tool_ca", 0},
	}
	for _, c := range cases {
		for _, size := range []int{1, 2, 5, len(c.text)} {
			s := NewToolCallSplitter(glmTools, weatherTools)
			var got strings.Builder
			for i := 0; i < len(c.text); i += size {
				got.WriteString(s.Add(c.text[i:min(i+size, len(c.text))]))
			}
			rest, calls := s.Flush()
			got.WriteString(rest)
			if got.String() != c.content || len(calls) != c.calls {
				t.Errorf("%s, pieces of %d: %q and %d calls, want %q and %d", c.name, size, got.String(), len(calls), c.content, c.calls)
			}
		}
	}
}

func FuzzParseToolCalls(f *testing.F) {
	f.Add("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>")
	f.Add(dsCallsBegin + dsCallBegin + "f" + dsSep + `{"a":1}` + dsCallEnd + dsCallsEnd)
	f.Add(`<tool_call>{"name": "f", "arguments": "{\"a\": [1]}"}</tool_call>`)
	f.Fuzz(func(t *testing.T, text string) {
		for _, syn := range []*ToolSyntax{glmTools, deepseekTools, hermesTools} {
			calls, ok := syn.ParseToolCalls(text, weatherTools)
			if !ok {
				continue
			}
			for _, c := range calls {
				var obj map[string]any
				if c.Function.Name == "" || c.Type != "function" || json.Unmarshal(c.Function.Arguments, &obj) != nil {
					t.Fatalf("%s read %q as %+v", syn.Name, text, c)
				}
			}
			s := NewToolCallSplitter(syn, weatherTools)
			got := s.Add(text)
			rest, _ := s.Flush()
			if !strings.HasPrefix(text, got) || (rest != "" && !strings.HasSuffix(text, rest)) {
				t.Fatalf("%s split %q into %q and %q", syn.Name, text, got, rest)
			}
		}
	})
}

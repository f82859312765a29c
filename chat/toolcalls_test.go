package chat

import (
	"bytes"
	"encoding/json"
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
		{"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek-v3.1", dsCallsEnd},
		{"Qwen-Qwen3-0.6B.jinja", "hermes", "</tool_call>"},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "", ""},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			src := readTemplate(t, strings.TrimSuffix(c.file, ".jinja"))
			syn := DetectToolSyntax(src)
			if c.syntax == "" {
				if syn != nil {
					t.Fatalf("syntax %s, want none", syn.Name)
				}
				return
			}
			if syn == nil || syn.Name != c.syntax {
				t.Fatalf("syntax %v, want %s", syn, c.syntax)
			}
			tmpl, err := Parse(src)
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
			// A required call begins as the template writes one (CallPrefix), named or not.
			if !strings.Contains(text[len(syn.Begin):], syn.CallEnd()) || syn.CallEnd() == "" {
				t.Errorf("the template's call %q does not hold CallEnd %q", text, syn.CallEnd())
			}
			p, next := syn.CallPrefix(calls[0].Function.Name)
			q, _ := syn.CallPrefix("")
			if !strings.HasPrefix(text, p) || !strings.HasPrefix(p, q) || q == "" || next != "" && !strings.ContainsAny(text[len(p):len(p)+1], next) {
				t.Errorf("the template's call %q does not begin with CallPrefix %q, then one of %q (unnamed %q)", text, p, next, q)
			}
			got, content, ok := syn.ParseToolCalls(text, weatherTools)
			if !ok || content != "" {
				t.Fatalf("calls not read from %q (content %q)", text, content)
			}
			checkCalls(t, got, calls)
		})
	}
}

func TestParseToolCalls(t *testing.T) {
	weather := func(args string) []ToolCall {
		return []ToolCall{{Function: FunctionCall{Name: "get_weather", Arguments: json.RawMessage(args)}}}
	}
	typed := append([]json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"typed","parameters":{"properties":{
		"opt":{"type":["string","null"]},"any":{"anyOf":[{"type":"string"},{"type":"null"}]},"enum":{"enum":["1","2"]},"n":{"type":["integer","null"]},"bad":{"type":[]}}}}}`)},
		weatherTools...)
	cases := []struct {
		name    string
		syn     *ToolSyntax
		text    string
		want    []ToolCall // nil: not calls
		content string
	}{
		{"glm as generated", glmTools, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
			weather(`{"city":"Paris","days":3}`), ""},
		{"glm string parameter stays a string", glmTools, "<tool_call>get_weather<arg_key>zip</arg_key><arg_value>75001</arg_value></tool_call>",
			weather(`{"zip":"75001"}`), ""},
		{"glm a value over lines", glmTools, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Saint\nDenis</arg_value></tool_call>",
			weather(`{"city":"Saint\nDenis"}`), ""},
		{"glm unknown parameter read as JSON", glmTools, "<tool_call>get_weather<arg_key>n</arg_key><arg_value>[1, 2]</arg_value></tool_call>",
			weather(`{"n":[1,2]}`), ""},
		{"glm text not JSON is a string", glmTools, "<tool_call>get_weather<arg_key>days</arg_key><arg_value>three</arg_value></tool_call>",
			weather(`{"days":"three"}`), ""},
		{"glm no arguments", glmTools, "<tool_call>get_weather</tool_call>", weather(`{}`), ""},
		{"glm text after the calls", glmTools, "<tool_call>get_weather</tool_call>\nI will wait.", weather(`{}`), "I will wait."},
		{"glm cut off after a whole value", glmTools, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>", nil, ""},
		{"glm cut off inside a value", glmTools, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Os", nil, ""},
		{"glm a tool not offered", glmTools, "<tool_call>get_time</tool_call>", nil, ""},
		{"glm no name", glmTools, "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", nil, ""},
		{"glm prose", glmTools, "<tool_call>I would call it</tool_call>", nil, ""},
		{"deepseek", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `{"city": "Paris"}` + dsCallEnd + dsCallsEnd,
			weather(`{"city":"Paris"}`), ""},
		{"deepseek arguments as a JSON string", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `"{\"city\": \"Paris\"}"` + dsCallEnd + dsCallsEnd,
			weather(`{"city":"Paris"}`), ""},
		{"deepseek without the closing bracket", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `{"city": "Paris"}` + dsCallEnd,
			weather(`{"city":"Paris"}`), ""},
		{"deepseek V3 and R1", deepseekTools, dsCallsBegin + dsCallBegin + "function" + dsSep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + dsCallEnd + dsCallsEnd,
			weather(`{"city":"Paris"}`), ""},
		{"deepseek cut off", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `{"city": "Par`, nil, ""},
		{"deepseek arguments not an object", deepseekTools, dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `[1]` + dsCallEnd + dsCallsEnd, nil, ""},
		{"deepseek text inside the brackets", deepseekTools, dsCallsBegin + "so" + dsCallBegin + "get_weather" + dsSep + `{}` + dsCallEnd + dsCallsEnd, nil, ""},
		{"hermes", hermesTools, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", weather(`{"city":"Paris"}`), ""},
		{"hermes parameters for arguments", hermesTools, `<tool_call>{"name": "get_weather", "parameters": {"city": "P"}}</tool_call>`, weather(`{"city":"P"}`), ""},
		{"hermes no arguments", hermesTools, `<tool_call>{"name": "get_weather"}</tool_call>`, weather(`{}`), ""},
		{"hermes text after", hermesTools, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>\nI will wait.", weather(`{}`), "I will wait."},
		{"hermes not JSON", hermesTools, `<tool_call>get_weather(city="Paris")</tool_call>`, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, content, ok := c.syn.ParseToolCalls(c.text, weatherTools)
			if c.want == nil {
				if ok {
					t.Fatalf("read %+v from %q, want no calls", got, c.text)
				}
				return
			}
			if !ok || content != c.content {
				t.Fatalf("from %q: calls %v, content %q; want content %q", c.text, ok, content, c.content)
			}
			checkCalls(t, got, c.want)
		})
	}

	t.Run("glm schema types", func(t *testing.T) {
		text := "<tool_call>typed<arg_key>opt</arg_key><arg_value>75001</arg_value><arg_key>any</arg_key><arg_value>true</arg_value>" +
			"<arg_key>enum</arg_key><arg_value>1</arg_value><arg_key>n</arg_key><arg_value>7</arg_value><arg_key>bad</arg_key><arg_value>null</arg_value></tool_call>"
		got, _, ok := glmTools.ParseToolCalls(text, typed)
		if !ok {
			t.Fatal("not read")
		}
		checkCalls(t, got, []ToolCall{{Function: FunctionCall{Name: "typed", Arguments: json.RawMessage(`{"opt":"75001","any":"true","enum":"1","n":7,"bad":null}`)}}})
	})

	// parameters that are no object schema leave the tool offered, its values read as JSON
	t.Run("glm parameters not a schema", func(t *testing.T) {
		loose := append([]json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"loose","parameters":"any"}}`)}, weatherTools...)
		got, _, ok := glmTools.ParseToolCalls("<tool_call>loose<arg_key>n</arg_key><arg_value>2</arg_value></tool_call>", loose)
		if !ok {
			t.Fatal("a call to a tool whose parameters are not an object schema was not read")
		}
		checkCalls(t, got, []ToolCall{{Function: FunctionCall{Name: "loose", Arguments: json.RawMessage(`{"n":2}`)}}})
	})
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
		{"text after the calls", call + " Done.", "Done.", 1},
		{"text around the calls", "Let me look. " + call + " Done. ", "Let me look.\nDone.", 1},
		{"a call cut off", "Sure: " + call[:40], "Sure: " + call[:40], 0},
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
	f.Add("Sure. " + dsCallsBegin + dsCallBegin + "get_weather" + dsSep + `{"a":1}` + dsCallEnd + dsCallsEnd + " Done.")
	f.Add(`<tool_call>{"name": "search", "arguments": "{\"a\": [1]}"}</tool_call>`)
	f.Fuzz(func(t *testing.T, text string) {
		for _, syn := range []*ToolSyntax{glmTools, deepseekTools, hermesTools} {
			calls, _, ok := syn.ParseToolCalls(text, weatherTools)
			for _, c := range calls {
				var obj map[string]any
				if !ok || c.Type != "function" || (c.Function.Name != "get_weather" && c.Function.Name != "search") || json.Unmarshal(c.Function.Arguments, &obj) != nil {
					t.Fatalf("%s read %q as %+v", syn.Name, text, c)
				}
			}
			s := NewToolCallSplitter(syn, weatherTools)
			got := s.Add(text)
			rest, found := s.Flush()
			if !strings.HasPrefix(text, got) || (len(found) == 0 && got+rest != text) {
				t.Fatalf("%s split %q into %q, %q and %d calls", syn.Name, text, got, rest, len(found))
			}
		}
	})
}

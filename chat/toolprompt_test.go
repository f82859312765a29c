package chat

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The text DeepSeek-V3.1's model card gives for tools after the system prompt (as ollama's DeepSeek renderer
// writes it), for three tools: one without a description or parameters, one with null parameters.
func TestToolsPromptDeepSeek(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"get_weather","description":"Today's weather",
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`),
		json.RawMessage(`{"type":"function","function":{"name":"now"}}`),
		json.RawMessage(`{"type":"function","function":{"name":"ping","description":"Ping.","parameters":null}}`),
		json.RawMessage(`{"type":"function","function":{"description":"no name: left out"}}`),
	}
	want := "\n\n## Tools\nYou have access to the following tools:\n" +
		"\n### get_weather\nDescription: Today's weather\n\n" +
		`Parameters: {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}` + "\n" +
		"\n### now\nDescription: \n\nParameters: {}\n" +
		"\n### ping\nDescription: Ping.\n\nParameters: {}\n" +
		"\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n" +
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\n" +
		"Where:\n\n" +
		"- `tool_call_name` must be an exact match to one of the available tools\n" +
		"- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n" +
		"- For multiple tool calls, chain them directly without separators or spaces\n"
	got := deepseekV31Tools.ToolsPrompt(tools)
	if got != want {
		t.Errorf("prompt\n%s\nwant\n%s", got, want)
	}

	// A call written as the prompt says reads back as one.
	line := got[strings.Index(got, "<｜tool▁calls▁begin｜>"):]
	line = line[:strings.Index(line, "\n")]
	call := strings.NewReplacer("tool_call_name", "get_weather", "tool_call_arguments", `{"city":"Paris"}`, "{{additional_tool_calls}}", "").Replace(line)
	calls, content, ok := deepseekV31Tools.ParseToolCalls(call, tools)
	if !ok || len(calls) != 1 || calls[0].Function.Name != "get_weather" || string(calls[0].Function.Arguments) != `{"city":"Paris"}` || content != "" {
		t.Errorf("the prompt's format %q read as %+v, %q, %v", call, calls, content, ok)
	}

	// GLM's and Hermes' templates show the tools; V3's and R1's models were taught another form; nil: no
	// syntax at all.
	for _, syn := range []*ToolSyntax{glmTools, hermesTools, deepseekTools, nil} {
		if p := syn.ToolsPrompt(tools); p != "" {
			t.Errorf("%v: ToolsPrompt gave %q", syn, p)
		}
	}
	if p := deepseekV31Tools.ToolsPrompt(nil); p != "" {
		t.Errorf("no tools, prompt %q", p)
	}
}

func TestWithSystem(t *testing.T) {
	user := Message{Role: "user", Content: "hi"}
	for _, tc := range []struct {
		name string
		in   []Message
		want []Message
	}{
		{"a system message", []Message{{Role: "system", Content: "Be brief."}, user}, []Message{{Role: "system", Content: "Be brief.T"}, user}},
		{"an empty one", []Message{{Role: "system"}, user}, []Message{{Role: "system", Content: "T"}, user}},
		{"none", []Message{user}, []Message{{Role: "system", Content: "T"}, user}},
		{"two: the last", []Message{{Role: "system", Content: "a"}, user, {Role: "system", Content: "b"}}, []Message{{Role: "system", Content: "a"}, user, {Role: "system", Content: "bT"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.in)
			got := WithSystem(tc.in, "T")
			if !slices.EqualFunc(got, tc.want, func(a, b Message) bool { return a.Role == b.Role && a.Content == b.Content }) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !slices.EqualFunc(tc.in, before, func(a, b Message) bool { return a.Role == b.Role && a.Content == b.Content }) {
				t.Errorf("the input changed: %+v", tc.in)
			}
		})
	}
}

// DeepSeek-V3's and R1's templates write a call's arguments in a ```json block: their models learned that
// form, so they read calls in it and get no ToolsPrompt (V3.1's form).
func TestDeepSeekV3TemplatesGetNoToolsPrompt(t *testing.T) {
	v3 := "{%- for tool in message['tool_calls'] %}{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + " +
		"tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endfor %}"
	if syn := DetectToolSyntax(v3); syn != deepseekTools || syn.ToolsPrompt(weatherTools) != "" {
		t.Errorf("a V3 template: syntax %v", syn)
	}
	call := dsCallsBegin + dsCallBegin + "function" + dsSep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + dsCallEnd + dsCallsEnd
	if p, _ := deepseekTools.CallPrefix("get_weather"); !strings.HasPrefix(call, p) {
		t.Errorf("a V3 call %q does not begin with CallPrefix %q", call, p)
	}
}

// CallPrefix's texts, pinned: the template round trips (TestToolCallsRoundTrip) check that a named
// prefix begins the templates' calls, and an unnamed one only that it begins the named one. Where calls
// sit in their own brackets (DeepSeek) the unnamed prefix opens the first call too, so that the answer
// cannot write text inside the brackets, which reads as no call.
func TestCallPrefix(t *testing.T) {
	for _, c := range []struct {
		syn                *ToolSyntax
		name, prefix, next string
	}{
		{glmTools, "", "<tool_call>", ""},
		{glmTools, "f", "<tool_call>f", "<\n"},
		{deepseekTools, "", dsCallsBegin + dsCallBegin, ""},
		{deepseekTools, "f", dsCallsBegin + dsCallBegin + "function" + dsSep + "f\n", ""},
		{deepseekV31Tools, "", dsCallsBegin + dsCallBegin, ""},
		{deepseekV31Tools, "f", dsCallsBegin + dsCallBegin + "f" + dsSep, ""},
		{hermesTools, "", "<tool_call>", ""},
		{hermesTools, `f"g`, "<tool_call>\n{\"name\": \"f\\\"g\"", ""},
		{nil, "f", "", ""},
	} {
		if p, n := c.syn.CallPrefix(c.name); p != c.prefix || n != c.next {
			t.Errorf("%v.CallPrefix(%q) = %q, %q; want %q, %q", c.syn, c.name, p, n, c.prefix, c.next)
		}
	}
	if _, _, ok := deepseekTools.ParseToolCalls(dsCallsBegin+"text"+dsCallBegin+"get_weather"+dsSep+"{}"+dsCallEnd+dsCallsEnd, weatherTools); ok {
		t.Error("text inside DeepSeek's brackets read as calls; the unnamed prefix need not open the first call")
	}
}

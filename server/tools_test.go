package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
)

const goldenTemplates = "../../shared/golden/templates"

// toolsRequest is the chat both APIs send: one question and a weather tool.
const toolsRequest = `{"model":"glm","messages":[{"role":"user","content":"Weather in Paris?"}],
 "tools":[{"type":"function","function":{"name":"get_weather","description":"Today's weather",
  "parameters":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]}`

// toolModel is a golden model answering with text in GLM-4.7-Flash's real
// template: a reasoning block (the template's prompt opens it), a sentence,
// then a call as GLM models write one.
func toolModel(t *testing.T, answer string) *Model {
	return templateModel(t, "GLM-4.7-Flash", answer)
}

// templateModel is a golden model answering with text in a golden template
// (a name under ../shared/golden/templates, without .jinja).
func templateModel(t *testing.T, template, answer string) *Model {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(goldenTemplates, template+".jinja"))
	if err != nil {
		t.Fatalf("golden templates (../shared must sit beside the repository): %v", err)
	}
	m := goldenModel(t, "tiny-glm-f32.gguf", 1024)
	return withTemplate(t, newScriptedNet(m, answer, 1024).on(m), string(src))
}

const glmCall = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>75001</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"

func checkWeatherArgs(t *testing.T, args map[string]any) {
	t.Helper()
	if args["city"] != "Paris" || args["zip"] != "75001" || args["days"] != float64(2) || len(args) != 3 {
		t.Errorf("arguments %v, want city Paris, zip \"75001\" (a string parameter), days 2", args)
	}
}

func TestOpenAIToolCalls(t *testing.T) {
	ts := startServer(t, Config{Model: toolModel(t, "The user wants weather.</think>Let me look.\n"+glmCall)})
	client := openAIClient(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var params openai.ChatCompletionNewParams
	if err := json.Unmarshal([]byte(toolsRequest), &params); err != nil {
		t.Fatal(err)
	}

	t.Run("content null beside the calls", func(t *testing.T) {
		ts := startServer(t, Config{Model: toolModel(t, "</think>"+glmCall)})
		var resp struct {
			Choices []struct {
				Message map[string]json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		postJSON(t, ts.url+"/v1/chat/completions", toolsRequest, 200, &resp)
		if c, ok := resp.Choices[0].Message["content"]; !ok || string(c) != "null" {
			t.Errorf("content %q (present %v), want null", c, ok)
		}
	})

	check := func(t *testing.T, c openai.ChatCompletionChoice) {
		t.Helper()
		if c.FinishReason != "tool_calls" || c.Message.Content != "Let me look." {
			t.Errorf("finish %q content %q", c.FinishReason, c.Message.Content)
		}
		if len(c.Message.ToolCalls) != 1 {
			t.Fatalf("%d tool calls, want 1", len(c.Message.ToolCalls))
		}
		tc := c.Message.ToolCalls[0]
		if tc.Type != "function" || tc.Function.Name != "get_weather" || !strings.HasPrefix(tc.ID, "call_") {
			t.Errorf("call %+v", tc)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
			t.Fatalf("arguments %q: %v", tc.Function.Arguments, err)
		}
		checkWeatherArgs(t, args)
	}

	t.Run("whole", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		check(t, resp.Choices[0])
	})
	t.Run("streamed", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			chunk := stream.Current()
			acc.AddChunk(chunk)
			if len(chunk.Choices) > 0 && strings.Contains(chunk.Choices[0].Delta.Content, "<") {
				t.Errorf("markup streamed as content: %q", chunk.Choices[0].Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		check(t, acc.Choices[0])
	})
}

func TestOllamaToolCalls(t *testing.T) {
	ts := startServer(t, Config{Model: toolModel(t, "</think>"+glmCall)})
	client := ollamaClient(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, streamed := range []bool{true, false} {
		var req api.ChatRequest
		if err := json.Unmarshal([]byte(toolsRequest), &req); err != nil {
			t.Fatal(err)
		}
		req.Stream = &streamed
		var calls []api.ToolCall
		var content strings.Builder
		err := client.Chat(ctx, &req, func(r api.ChatResponse) error {
			calls = append(calls, r.Message.ToolCalls...)
			content.WriteString(r.Message.Content)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) != 1 || calls[0].Function.Name != "get_weather" || content.String() != "" {
			t.Fatalf("stream %v: calls %+v, content %q", streamed, calls, content.String())
		}
		checkWeatherArgs(t, calls[0].Function.Arguments.ToMap())
	}
}

// TestToolCallsStayText: without tools in the request, or with an answer
// whose markup holds no whole call, the text is the answer.
func TestToolCallsStayText(t *testing.T) {
	for _, c := range []struct{ name, answer, body string }{
		{"a call cut off", "</think>" + glmCall, strings.Replace(toolsRequest, `"tools":`, `"max_tokens":40,"tools":`, 1)},
		{"no tools offered", "</think>" + glmCall, `{"messages":[{"role":"user","content":"Weather in Paris?"}]}`},
		{"not a call", "</think>Use <tool_call>a b c</tool_call>.", toolsRequest},
		{"tool_choice none", "</think>" + glmCall, strings.Replace(toolsRequest, `"tools":`, `"tool_choice":"none","tools":`, 1)},
		// in a JSON answer a call's markup is the object's text, not a call
		{"JSON answer", `{"a": "` + strings.ReplaceAll(glmCall, "\n", " ") + `"}`,
			strings.Replace(toolsRequest, `"tools":`, `"response_format":{"type":"json_object"},"tools":`, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, Config{Model: toolModel(t, c.answer)})
			var resp chatAnswer
			postJSON(t, ts.url+"/v1/chat/completions", c.body, 200, &resp)
			got := resp.Choices[0]
			want, finish := strings.TrimPrefix(c.answer, "</think>"), "stop"
			if strings.Contains(c.body, "max_tokens") {
				want, finish = got.Message.Content, "length"
				if !strings.HasPrefix(glmCall, want) || len(want) < len("<tool_call>get_weather") || want == glmCall {
					t.Errorf("content %q is not the call's beginning", want)
				}
			}
			if got.Message.Content != want || len(got.Message.ToolCalls) != 0 || got.FinishReason != finish {
				t.Errorf("content %q, %d calls, finish %q; want the text %q, %s", got.Message.Content, len(got.Message.ToolCalls), got.FinishReason, want, finish)
			}
		})
	}
}

// DeepSeek-V3.1's template writes calls but never the tools: they go into
// the system prompt in its model card's text (after the caller's own system
// message), and a call written in its syntax comes back as a tool call.
func TestDeepSeekToolsInSystemPrompt(t *testing.T) {
	const call = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" +
		`{"city": "Paris", "zip": "75001", "days": 2}` + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	ts := startServer(t, Config{Model: templateModel(t, "deepseek-ai-DeepSeek-V3.1", call)})
	// Ollama's /api/show lists tools among its capabilities
	var show struct{ Capabilities []string }
	postJSON(t, ts.url+"/api/show", `{"model":"`+ts.model.Name+`"}`, 200, &show)
	if !slices.Contains(show.Capabilities, "tools") {
		t.Errorf("capabilities %v, want tools among them", show.Capabilities)
	}

	var req struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal([]byte(toolsRequest), &req); err != nil {
		t.Fatal(err)
	}
	// the prompt a chat request renders: its tools placed (chatInput), then the template
	render := func(msgs []chat.Message, tools []json.RawMessage, extra map[string]any) (string, error) {
		msgs, extra, err := ts.chatInput(msgs, tools, extra)
		if err != nil {
			return "", err
		}
		return ts.render(msgs, tools, extra)
	}
	prompt, err := render([]chat.Message{{Role: "system", Content: "Be"}, {Role: "system", Content: "brief."}, {Role: "user", Content: "Weather in Paris?"}}, req.Tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	head := "Be\n\nbrief.\n\n## Tools\nYou have access to the following tools:\n\n### get_weather\nDescription: Today's weather\n\nParameters: {\"type\":\"object\""
	if i, j := strings.Index(prompt, head), strings.Index(prompt, "<｜User｜>Weather in Paris?"); i < 0 || j < i ||
		!strings.Contains(prompt[i:j], "IMPORTANT: ALWAYS adhere to this exact format for tool use:") {
		t.Errorf("the tools are not described in the system prompt, before the user's turn:\n%s", prompt)
	}
	if plain, err := render([]chat.Message{{Role: "user", Content: "hi"}}, nil, nil); err != nil || strings.Contains(plain, "## Tools") {
		t.Errorf("without tools: %q, %v", plain, err)
	}
	// calls come only without thinking (the model card): asked to think,
	// the prompt still closes the reasoning block when tools are offered
	think := map[string]any{"thinking": true}
	user := []chat.Message{{Role: "user", Content: "hi"}}
	if p, err := render(user, nil, think); err != nil || !strings.HasSuffix(p, "<｜Assistant｜><think>") {
		t.Errorf("thinking without tools: %q, %v", p, err)
	}
	if p, err := render(user, req.Tools, think); err != nil || !strings.HasSuffix(p, "<｜Assistant｜><think></think>") || think["thinking"] != true {
		t.Errorf("thinking with tools: %q, %v (the request's options %v)", p, err, think)
	}

	var params openai.ChatCompletionNewParams
	if err := json.Unmarshal([]byte(toolsRequest), &params); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := openAIClient(ts)
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Choices[0]
	if got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 1 || got.Message.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("finish %q, calls %+v", got.FinishReason, got.Message.ToolCalls)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(got.Message.ToolCalls[0].Function.Arguments), &args); err != nil {
		t.Fatal(err)
	}
	checkWeatherArgs(t, args)
}

// A template that never names the tools cannot show them to the model: a
// request offering some is refused, as ollama refuses it, unless OpenAI's
// tool_choice is "none".
func TestToolsRefusedWithoutTemplateSupport(t *testing.T) {
	base := goldenModel(t, "tiny-glm-f32.gguf", 1024)
	// DeepSeek-V3's form (a ```json block): calls are read, but its model was not taught ToolsPrompt's text
	v3 := withTemplate(t, base, "{% for m in messages %}{{ m.content }}{% endfor %}{{'<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json'}}")
	ts3 := startServer(t, Config{Model: v3})
	postJSON(t, ts3.url+"/v1/chat/completions", toolsRequest, 400, nil)

	m := withTemplate(t, newScriptedNet(base, "Sunny.", 1024).on(base), "{% for m in messages %}{{ m.content }}{% endfor %}")
	ts := startServer(t, Config{Model: m})
	for _, path := range []string{"/v1/chat/completions", "/api/chat"} {
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		postJSON(t, ts.url+path, toolsRequest, 400, &e)
		if !strings.Contains(string(e.Error), "does not support tools: its chat template does not show them to the model") {
			t.Errorf("%s: error %s", path, e.Error)
		}
	}
	var resp chatAnswer
	postJSON(t, ts.url+"/v1/chat/completions", strings.Replace(toolsRequest, `"tools":`, `"tool_choice":"none","tools":`, 1), 200, &resp)
	if resp.Choices[0].Message.Content != "Sunny." {
		t.Errorf("tool_choice none: %+v", resp.Choices[0])
	}
	postJSON(t, ts.url+"/api/chat", `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}]}`, 200, nil)
}

// tool_choice "required" or a named function makes the answer begin with a
// call (after the reasoning the prompt opens): a model that would answer
// with text writes the call's opening markup instead; one that calls is
// left alone. Choices that cannot be met are refused.
func TestRequiredToolCall(t *testing.T) {
	withChoice := func(choice string) string {
		return strings.Replace(toolsRequest, `"tools":`, `"max_tokens":60,"temperature":0,"tool_choice":`+choice+`,"tools":`, 1)
	}
	for _, c := range []struct{ name, choice, want string }{
		{"required", `"required"`, "<tool_call>"},
		{"named", `{"type":"function","function":{"name":"get_weather"}}`, "<tool_call>get_weather"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, Config{Model: toolModel(t, "I know.</think>Sunny.")})
			var resp chatAnswer
			postJSON(t, ts.url+"/v1/chat/completions", withChoice(c.choice), 200, &resp)
			got := resp.Choices[0].Message
			if got.ReasoningContent != "I know." || !strings.HasPrefix(strings.TrimSpace(got.Content), c.want) {
				t.Errorf("reasoning %q, answer %q: want the answer to begin with %q", got.ReasoningContent, got.Content, c.want)
			}
		})
	}
	// Qwen3's model opens its reasoning itself: a required call comes after it.
	t.Run("reasoning the model opens", func(t *testing.T) {
		ts := startServer(t, Config{Model: templateModel(t, "Qwen-Qwen3-0.6B", "<think>\nI know.\n</think>\n\nSunny.")})
		var resp chatAnswer
		postJSON(t, ts.url+"/v1/chat/completions", withChoice(`"required"`), 200, &resp)
		got := resp.Choices[0].Message
		if got.ReasoningContent != "I know." || !strings.HasPrefix(strings.TrimSpace(got.Content), "<tool_call>") {
			t.Errorf("reasoning %q, answer %q: want the reasoning, then a call", got.ReasoningContent, got.Content)
		}
	})
	// GLM's markup has no end to the name: a longer one is not the one named.
	t.Run("a longer name", func(t *testing.T) {
		body := strings.Replace(withChoice(`{"type":"function","function":{"name":"get_weather"}}`), `"tools":[`,
			`"tools":[{"type":"function","function":{"name":"get_weather_v2"}},`, 1)
		ts := startServer(t, Config{Model: toolModel(t, "</think><tool_call>get_weather_v2</tool_call>")})
		var resp chatAnswer
		postJSON(t, ts.url+"/v1/chat/completions", body, 200, &resp)
		got := resp.Choices[0].Message
		if calls, _ := json.Marshal(got.ToolCalls); strings.Contains(got.Content+string(calls), "get_weather_v2") {
			t.Errorf("answer %q, calls %s: another function", got.Content, calls)
		}
	})
	t.Run("a call anyway", func(t *testing.T) {
		ts := startServer(t, Config{Model: toolModel(t, "</think>"+glmCall)})
		var resp chatAnswer
		postJSON(t, ts.url+"/v1/chat/completions", strings.Replace(withChoice(`"required"`), `"max_tokens":60`, `"max_tokens":200`, 1), 200, &resp)
		if got := resp.Choices[0]; got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 1 {
			t.Errorf("finish %q, %d calls, content %q", got.FinishReason, len(got.Message.ToolCalls), got.Message.Content)
		}
	})

	ts := startServer(t, Config{Model: toolModel(t, "</think>Sunny.")})
	for _, c := range []struct{ name, body, want string }{
		{"an unknown choice", withChoice(`"maybe"`), `tool_choice "maybe" is not`},
		{"a function not offered", withChoice(`{"type":"function","function":{"name":"get_time"}}`), `names the function "get_time", which is not among the tools`},
		{"a malformed function", withChoice(`{"type":"function"}`), `tool_choice must be`},
		{"no tools", `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}`, "offers no tools"},
		{"with a JSON answer", strings.Replace(withChoice(`"required"`), `"tools":`, `"response_format":{"type":"json_object"},"tools":`, 1), "JSON response_format excludes"},
	} {
		var e struct {
			Error struct{ Message, Param string } `json:"error"`
		}
		postJSON(t, ts.url+"/v1/chat/completions", c.body, 400, &e)
		if !strings.Contains(e.Error.Message, c.want) || e.Error.Param != "tool_choice" {
			t.Errorf("%s: %+v, want %q", c.name, e.Error, c.want)
		}
	}
	// Llama 3.1's template shows the tools, but its calls are in no syntax latent reads.
	llama := startServer(t, Config{Model: templateModel(t, "meta-llama-Llama-3.1-8B-Instruct", "Sunny.")})
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	postJSON(t, llama.url+"/v1/chat/completions", withChoice(`"required"`), 400, &e)
	if !strings.Contains(e.Error.Message, "writes calls in no syntax latent reads") {
		t.Errorf("Llama 3.1: %q", e.Error.Message)
	}
}

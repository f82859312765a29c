package server

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// jsonReply is what the scripted model writes: an object, then a remark
// the JSON mode must cut (only the end of generation may follow the object).
const (
	jsonObject = `{"city": "Paris", "days": [1, 2], "sunny": true}`
	jsonReply  = jsonObject + "\nHope this helps!"
)

func TestOpenAIJSONMode(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 512)
	ts := startServer(t, Config{Model: newScriptedNet(m, jsonReply, 512).on(m)})
	client := openAIClient(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{
		Model:          "tiny",
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris, as JSON?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if c.Message.Content != jsonObject || c.FinishReason != "stop" || !json.Valid([]byte(c.Message.Content)) {
		t.Errorf("content %q, finish %q; want %q and stop", c.Message.Content, c.FinishReason, jsonObject)
	}

	// Without JSON mode the remark stays.
	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{}
	if resp, err = client.Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != jsonReply {
		t.Errorf("without JSON mode: %q, want %q", got, jsonReply)
	}
}

// TestJSONModeRandomModel: a real (random) model in JSON mode starts its
// answer with the object, with nothing before it.
func TestJSONModeRandomModel(t *testing.T) {
	ts := startServer(t, Config{Model: goldenModel(t, "tiny-youtu-f32.gguf", 512)})
	var resp chatAnswer
	postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"JSON please"}],"response_format":{"type":"json_object"},"max_tokens":24,"seed":3}`, 200, &resp)
	got := resp.Choices[0].Message.Content
	if !strings.HasPrefix(got, "{") || (resp.Choices[0].FinishReason == "stop" && !json.Valid([]byte(got))) {
		t.Errorf("content %q, finish %q", got, resp.Choices[0].FinishReason)
	}
}

func TestOllamaJSONFormat(t *testing.T) {
	// A thinking template: JSON mode turns its reasoning off.
	ts := startServer(t, Config{Model: toolModel(t, jsonReply)})
	client := ollamaClient(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, streamed := range []bool{true, false} {
		req := &api.ChatRequest{Model: "glm", Format: json.RawMessage(`"json"`), Stream: &streamed,
			Messages: []api.Message{{Role: "user", Content: "Weather in Paris, as JSON?"}}}
		var content strings.Builder
		var last api.ChatResponse
		if err := client.Chat(ctx, req, func(r api.ChatResponse) error {
			content.WriteString(r.Message.Content)
			last = r
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if content.String() != jsonObject || last.DoneReason != "stop" {
			t.Errorf("stream %v: content %q, done reason %q; want %q, stop", streamed, content.String(), last.DoneReason, jsonObject)
		}
	}
}

// TestJSONModeCompletions: /v1/completions takes response_format too. (A
// JSON answer to a chat that offers tools: TestToolCallsStayText.)
func TestJSONModeCompletions(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 512)
	ts := startServer(t, Config{Model: newScriptedNet(m, jsonReply, 512).on(m)})
	var resp struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	postJSON(t, ts.url+"/v1/completions", `{"prompt":"Weather:","response_format":{"type":"json_object"}}`, 200, &resp)
	if c := resp.Choices[0]; c.Text != jsonObject || c.FinishReason != "stop" {
		t.Errorf("text %q, finish %q; want %q, stop", c.Text, c.FinishReason, jsonObject)
	}
	var e struct{ Error struct{ Param string } }
	postJSON(t, ts.url+"/v1/completions", `{"prompt":"x","response_format":{"type":"json_schema"}}`, 400, &e)
	if e.Error.Param != "response_format" {
		t.Errorf("param %q", e.Error.Param)
	}
}

const weatherSchema = `{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"]}`

// TestJSONSchema: an answer that follows the schema passes as written; one
// that does not is held to it (the script's "two" cannot be an integer).
func TestJSONSchema(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 512)
	for _, c := range []struct{ name, script, want string }{
		{"follows", `{"city": "Paris", "days": 2}` + "\nDone.", `{"city": "Paris", "days": 2}`},
		{"strays", `{"city": "Paris", "days": "two", "sunny": true}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, Config{Model: newScriptedNet(m, c.script, 512).on(m)})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			check := func(api, content, finish string) {
				t.Helper()
				var got struct {
					City string
					Days json.Number
				}
				dec := json.NewDecoder(strings.NewReader(content))
				dec.UseNumber()
				err := dec.Decode(&got)
				integer := regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`).MatchString(got.Days.String())
				if err != nil || !integer || got.City != "Paris" || finish != "stop" || (c.want != "" && content != c.want) {
					t.Errorf("%s: %q (finish %s) does not follow the schema or the script", api, content, finish)
				}
			}

			var params openai.ChatCompletionNewParams
			body := `{"model":"tiny","messages":[{"role":"user","content":"Weather?"}],"max_tokens":120,"temperature":0,
			 "response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,"schema":` + weatherSchema + `}}}`
			if err := json.Unmarshal([]byte(body), &params); err != nil {
				t.Fatal(err)
			}
			client := openAIClient(ts)
			resp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			check("openai", resp.Choices[0].Message.Content, resp.Choices[0].FinishReason)

			stream := false
			req := &api.ChatRequest{Model: "tiny", Format: json.RawMessage(weatherSchema), Stream: &stream, Options: map[string]any{"num_predict": 120, "temperature": 0},
				Messages: []api.Message{{Role: "user", Content: "Weather?"}}}
			var last api.ChatResponse
			if err := ollamaClient(t, ts).Chat(ctx, req, func(r api.ChatResponse) error { last = r; return nil }); err != nil {
				t.Fatal(err)
			}
			check("ollama", last.Message.Content, last.DoneReason)
		})
	}
}

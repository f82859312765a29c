package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/latent-ai/latent/chat"
)

func TestBadInputs(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 64)
	ts := startServer(t, Config{Model: m})
	long := strings.Repeat("word ", 200)
	ids := func(n int, id string) string { // a completion of one token after n copies of id
		return `{"max_tokens":1,"prompt":[` + strings.TrimSuffix(strings.Repeat(id+",", n), ",") + `]}`
	}
	tests := []struct {
		name, path, body string
		status           int    // 200: no error object
		param            string // OpenAI's param, when one field is at fault
		says             string // in the message
		code             string // OpenAI's code ("": absent)
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "", "malformed JSON", ""},
		{"not JSON", "/v1/chat/completions", `hello`, 400, "", "malformed JSON", ""},
		{"empty body", "/v1/chat/completions", ``, 400, "", "empty", ""},
		{"array body", "/v1/chat/completions", `[1,2]`, 400, "", "JSON object", ""},
		{"messages a string", "/v1/chat/completions", `{"messages":"hi"}`, 400, "messages", "messages must be an array, not a string", ""},
		{"temperature a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, 400, "temperature", "must be a number", ""},
		{"max_tokens a float", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1.5}`, 400, "max_tokens", "must be an integer", ""},
		{"stream a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, 400, "stream", "must be a boolean", ""},
		{"role a number", "/v1/chat/completions", `{"messages":[{"role":1,"content":"hi"}]}`, 400, "messages.role", "must be a string", ""},
		{"content a number", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", "not a number", ""},
		{"stop a number", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stop":5}`, 400, "stop", "string or an array", ""},
		{"stop too long", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stop":["x","` + strings.Repeat("y", 1025) + `"]}`, 400, "stop", "stop[1] is 1025 bytes long; at most 1024", ""},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "at least one message", ""},
		{"no messages", "/v1/chat/completions", `{"model":"x"}`, 400, "messages", "missing", ""},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role", `"wizard" is not one of`, ""},
		{"missing role", "/v1/chat/completions", `{"messages":[{"content":"hi"}]}`, 400, "messages[0].role", "missing", ""},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content", "only text", ""},
		{"n = 2", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":2}`, 400, "n", "n = 1", ""},
		{"temperature too high", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":3}`, 400, "temperature", "outside [0, 2]", ""},
		{"top_p too high", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_p":1.5}`, 400, "top_p", "outside [0, 1]", ""},
		{"max_tokens zero", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400, "max_tokens", "at least 1", ""},
		{"a tool not an object", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[1]}`, 400, "tools[0]", "tools[0] must be an object", ""},
		{"a tool not a function", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{}]}`, 400, "tools[1]", `tools[1] type must be "function"`, ""},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_logprobs":5}`, 400, "top_logprobs", "top_logprobs needs logprobs", ""},
		{"top_logprobs 0 without logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"top_logprobs":0}`, 200, "", "", ""},
		{"stream_options without stream, completion", "/v1/completions", `{"prompt":"hi","stream_options":{"include_usage":true}}`, 400, "stream_options", "only allowed with stream: true", ""},
		{"stream_options without stream", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "stream_options", "only allowed with stream: true", ""},
		{"presence penalty past 2", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"presence_penalty":3}`, 400, "presence_penalty", "presence_penalty 3 is outside [-2, 2]", ""},
		{"frequency penalty a string", "/v1/completions", `{"prompt":"hi","frequency_penalty":"x"}`, 400, "frequency_penalty", "frequency_penalty must be a number", ""},
		{"response format not an object", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":"json"}`, 400, "response_format", "response_format must be an object, not a string", ""},
		{"json schema not held", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"allOf":[]}}}}}}`, 400, "response_format", "a: allOf is not supported", ""},
		{"json schema missing", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema"}}`, 400, "response_format", "needs json_schema.schema", ""},
		{"json with thinking", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"chat_template_kwargs":{"enable_thinking":true}}`, 400, "chat_template_kwargs", "thinking with a JSON answer is not supported", ""},
		{"json with thinking, DeepSeek-V3.1's switch", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"chat_template_kwargs":{"thinking":true}}`, 400, "chat_template_kwargs", "thinking with a JSON answer is not supported", ""},
		{"prompt longer than the context", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "", "more than fit in the context of 64", "context_length_exceeded"},
		{"prompt too many bytes to tokenize", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("ab cd ", 1<<18) + `"}]}`, 400, "",
			"bytes are at least", "context_length_exceeded"},
		{"completion without prompt", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "missing", ""},
		{"completion of two prompts", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", "2 prompts", ""},
		{"completion prompt an object", "/v1/completions", `{"prompt":{"a":1}}`, 400, "prompt", "must be a string", ""},
		{"completion prompt nested twice", "/v1/completions", `{"prompt":[["a"]]}`, 400, "prompt", "must be a string", ""},
		{"completion too long", "/v1/completions", `{"prompt":"` + long + `"}`, 400, "", "tokens, more than fit in the context of 64", "context_length_exceeded"},
		// Around each limit that engine.CheckPrompt enforces, with the
		// server's room for the answer.
		{"room for one token", "/v1/completions", ids(63, "1"), 200, "", "", ""},
		{"prompt fills the context", "/v1/completions", ids(64, "1"), 400, "",
			"the prompt has 64 tokens, more than fit in the context of 64 (leave room for the answer, or serve with a larger --ctx)", "context_length_exceeded"},
		{"prompt beyond the context", "/v1/completions", ids(65, "1"), 400, "", "the prompt has 65 tokens", "context_length_exceeded"},
		{"the last token of the vocabulary", "/v1/completions", ids(2, "1023"), 200, "", "", ""},
		{"token beyond the vocabulary", "/v1/completions", ids(2, "1024"), 400, "prompt", "prompt token 1024 is outside the vocabulary of 1024", ""},
		{"negative token", "/v1/completions", ids(1, "-1"), 400, "prompt", "prompt token -1 is outside the vocabulary of 1024", ""},
		{"unknown endpoint", "/v1/embeddings", `{}`, 404, "", "no endpoint", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e struct {
				Error *struct {
					Message *string `json:"message"`
					Type    *string `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			postJSON(t, ts.url+tc.path, tc.body, tc.status, &e)
			if tc.status == http.StatusOK {
				if e.Error != nil {
					t.Errorf("error %+v with status 200", e.Error)
				}
				return
			}
			if e.Error == nil || e.Error.Message == nil || e.Error.Type == nil {
				t.Fatalf("not an OpenAI error object: %+v", e)
			}
			if !strings.Contains(*e.Error.Message, tc.says) {
				t.Errorf("message %q does not say %q", *e.Error.Message, tc.says)
			}
			for _, f := range []struct {
				name string
				got  *string
				want string
			}{{"param", e.Error.Param, tc.param}, {"code", e.Error.Code, tc.code}} {
				got := ""
				if f.got != nil {
					got = *f.got
				}
				if got != f.want {
					t.Errorf("%s %q, want %q", f.name, got, f.want)
				}
			}
		})
	}

	// The raw error object has all four keys, as OpenAI's does.
	var raw map[string]map[string]any
	postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[]}`, 400, &raw)
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error object lacks %q: %v", k, raw)
		}
	}

	ollama := []struct{ name, path, body, says string }{
		{"malformed JSON", "/api/chat", `{"messages":`, "malformed JSON"},
		{"unknown role", "/api/chat", `{"messages":[{"role":"robot","content":"x"}]}`, `"robot" is not one of`},
		{"options not an object", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":3}`, "options"},
		{"num_predict a string", "/api/generate", `{"prompt":"x","options":{"num_predict":"ten"}}`, "options.num_predict: must be an integer"},
		{"a tool without a name", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools[0] function.name is missing"},
		{"thinking on a model without it", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"think":true}`, `"tiny-glm-f32" does not support thinking`},
		{"show without a model", "/api/show", `{}`, "model is required"},
		{"presence_penalty a string", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"presence_penalty":"x"}}`, "options.presence_penalty: must be a number"},
		{"negative temperature", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"temperature":-1}}`, "options.temperature -1 is not a number from 0 up"},
		{"repeat_penalty past float32", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"repeat_penalty":1e300}}`, "options.repeat_penalty 1e+300 is too large"},
		{"seed past float64", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"seed":1e400}}`, "options.seed: 1e400 is outside"},
		{"top_k a fraction", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"top_k":2.5}}`, "options.top_k: must be an integer"},
		{"seed past 64 bits", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"seed":9223372036854775808}}`, "options.seed: 9223372036854775808 is outside [-9223372036854775808, 9223372036854775807]"},
		{"top_k past 32 bits", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"options":{"top_k":5e9}}`, "options.top_k: 5e9 is outside [-2147483648, 2147483647]"},
		{"images", "/api/generate", `{"prompt":"x","images":["aGk="]}`, "images are not supported"},
		{"format schema not held", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"format":{"type":"object","patternProperties":{}}}`, "format: patternProperties is not supported"},
		{"format not json", "/api/generate", `{"prompt":"x","format":"yaml"}`, `format must be "json" or a JSON schema`},
		{"format with think", "/api/chat", `{"messages":[{"role":"user","content":"x"}],"format":"json","think":true}`, "does not support thinking"},
		{"too long", "/api/generate", `{"prompt":"` + long + `","raw":true}`, "more than fit in the context of 64"},
	}
	for _, tc := range ollama {
		t.Run("ollama "+tc.name, func(t *testing.T) {
			var e map[string]any
			postJSON(t, ts.url+tc.path, tc.body, 400, &e)
			msg, ok := e["error"].(string)
			if !ok || len(e) != 1 {
				t.Fatalf("not an Ollama error object: %v", e)
			}
			if !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not say %q", msg, tc.says)
			}
		})
	}

	// Ollama's seeds are 64-bit.
	var seeded map[string]any
	postJSON(t, ts.url+"/api/chat", `{"messages":[{"role":"user","content":"x"}],"stream":false,"options":{"seed":9223372036854775807,"num_predict":1}}`, 200, &seeded)
	if seeded["done"] != true {
		t.Errorf("a 64-bit seed: %v", seeded)
	}

	// And the server still answers.
	var ok chatAnswer
	postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"seed":1}`, 200, &ok)
	if len(ok.Choices) != 1 || ok.Choices[0].FinishReason != "length" {
		t.Errorf("after the bad requests: %+v", ok)
	}
}

// An empty prompt cannot come through the APIs (they refuse an empty
// prompt, and these models begin every prompt with BOS), so checkPrompt's
// mapping of it is checked here; TestBadInputs asks for completions around
// every other limit engine.CheckPrompt enforces.
func TestEmptyPromptCheck(t *testing.T) {
	var e *apiError
	if !errors.As(checkPrompt(nil, 16, 4), &e) || e.status != http.StatusBadRequest || e.param != "prompt" || e.code != "" || !strings.HasPrefix(e.msg, "the prompt is empty") {
		t.Errorf("%+v, want a 400 with param prompt, no code, saying the prompt is empty", e)
	}
}

func TestAPIKey(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	ts := startServer(t, Config{Model: m, APIKey: "s3cret"})
	get := func(path, auth string) (int, string) {
		req, err := http.NewRequest("GET", ts.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, auth string
		status     int
		body       string
	}{
		{"/v1/models", "", 401, `"type":"authentication_error"`},
		{"/v1/models", "Bearer wrong", 401, `"code":"invalid_api_key"`},
		{"/v1/models", "s3cret", 401, "Bearer KEY"},
		{"/api/tags", "", 401, `{"error":"missing or wrong API key`},
		{"/metrics", "", 401, "API key"},
		{"/v1/models", "Bearer s3cret", 200, `"id":"tiny-glm-f32"`},
		{"/v1/models", "bearer s3cret", 200, `"id":"tiny-glm-f32"`},
		{"/v1/models", "Basic s3cret", 401, "Bearer KEY"},
		{"/v1/models", "Bearer s3cret2", 401, "Bearer KEY"},
		{"/api/tags", "Bearer s3cret", 200, `"models"`},
		{"/health", "", 200, `"status":"ok"`},
		{"/", "", 200, "<title>latent</title>"},
	} {
		status, body := get(tc.path, tc.auth)
		if status != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s with %q: %d %s, want %d with %s", tc.path, tc.auth, status, body, tc.status, tc.body)
		}
	}
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(2)}
	without, with := openAIClient(ts), openAIClient(ts, option.WithAPIKey("s3cret"))
	if _, err := without.Chat.Completions.New(ctx, params); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the key: %v", err)
	}
	if _, err := with.Chat.Completions.New(ctx, params); err != nil {
		t.Errorf("with the key: %v", err)
	}
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

const endless = `{"stream":true,"messages":[{"role":"user","content":"go on"}]}`

func TestQueueFullAnswers429(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	net := endlessNet(m, "and on", 2*time.Millisecond)
	ts := startServer(t, Config{Model: net.on(m), QueueSize: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	resp, _ := openStream(t, ctx, ts.url+"/v1/chat/completions", endless) // holds the model
	defer resp.Body.Close()
	waiting := make(chan int, 1)
	go func() { // waits in the queue's one place
		req, err := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions", strings.NewReader(endless))
		if err != nil {
			waiting <- 0
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			waiting <- 0
			return
		}
		resp.Body.Close()
		waiting <- resp.StatusCode
	}()
	if !waitFor(5*time.Second, func() bool { return ts.queue.depth() == 1 }) {
		t.Fatal("the second request never queued")
	}
	var e struct {
		Error struct {
			Type, Message string
			Code          string
		}
	}
	h := postJSON(t, ts.url+"/v1/chat/completions", endless, 429, &e)
	if h.Get("Retry-After") == "" || e.Error.Code != "queue_full" || !strings.Contains(e.Error.Message, "1 requests are already waiting") {
		t.Errorf("429 with Retry-After %q and %+v", h.Get("Retry-After"), e)
	}
	var oe map[string]string
	postJSON(t, ts.url+"/api/generate", `{"prompt":"x"}`, 503, &oe) // Ollama's status for a full queue
	if !strings.Contains(oe["error"], "busy") {
		t.Errorf("ollama 503: %v", oe)
	}
	cancel()
	if code := <-waiting; code == 429 {
		t.Error("the queued request was refused")
	}
}

func TestDisconnectCancelsGeneration(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	net := endlessNet(m, "and on", time.Millisecond)
	ts := startServer(t, Config{Model: net.on(m)})

	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", endless},
		{"/api/chat", `{"messages":[{"role":"user","content":"go on"}]}`},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		resp, _ := openStream(t, ctx, ts.url+c.path, c.body)
		defer resp.Body.Close()
		if !ts.queue.busy() {
			t.Fatal("not generating")
		}
		cancel() // the client goes away
		if !waitFor(2*time.Second, func() bool { return !ts.queue.busy() }) {
			t.Fatalf("%s: the generation went on after the client left", c.path)
		}
		before := net.calls()
		time.Sleep(50 * time.Millisecond)
		if after := net.calls(); after != before {
			t.Errorf("%s: %d forward passes after the generation ended", c.path, after-before)
		}
	}
	// The server goes on serving.
	net.eos = m.Tokenizer.EOS()
	postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 200, nil)
}

func TestDrain(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)

	t.Run("streams in flight finish", func(t *testing.T) {
		net := newScriptedNet(m, strings.Repeat("word ", 30), 1<<20)
		net.delay = 3 * time.Millisecond
		ts := startServer(t, Config{Model: net.on(m), DrainTimeout: 20 * time.Second})
		resp, r := openStream(t, context.Background(), ts.url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"x"}]}`)
		defer resp.Body.Close()
		stopped := make(chan struct{})
		go func() { ts.stop(); close(stopped) }()
		rest, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || !strings.Contains(string(rest), `"finish_reason":"stop"`) {
			t.Errorf("the stream was cut: %q", rest)
		}
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after the stream ended")
		}
		if resp, err := http.Get(ts.url + "/health"); err == nil {
			resp.Body.Close()
			t.Error("still accepting connections after the drain")
		}
	})

	t.Run("bounded", func(t *testing.T) {
		net := endlessNet(m, "and on", time.Millisecond)
		ts := startServer(t, Config{Model: net.on(m), DrainTimeout: 300 * time.Millisecond})
		resp, r := openStream(t, context.Background(), ts.url+"/v1/chat/completions", endless)
		defer resp.Body.Close()
		start := time.Now()
		ts.stop()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("drain took %v with a bound of 300ms", d)
		}
		_, _ = io.ReadAll(r) // the stream ends, cut: an error is expected
		if ts.queue.busy() {
			t.Error("still generating after the drain")
		}
	})

	t.Run("waits for a forward pass under way", func(t *testing.T) {
		// A prefill cannot be interrupted: Serve returns after it, so that
		// the model may be freed, however short the drain bound.
		net := newScriptedNet(m, "x", 1<<20)
		net.delay = 2500 * time.Millisecond
		ts := startServer(t, Config{Model: net.on(m), DrainTimeout: 100 * time.Millisecond})
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := httpClient().Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(endless)); err == nil {
				resp.Body.Close()
			}
		}()
		if !waitFor(5*time.Second, func() bool { return net.running.Load() == 1 }) {
			t.Fatal("the prefill did not start")
		}
		ts.stop()
		if n := net.running.Load(); n != 0 {
			t.Errorf("Serve returned with %d forward passes under way", n)
		}
		<-done
	})
}

func TestMetrics(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	ts := startServer(t, Config{Model: m})
	for i := 0; i < 2; i++ {
		postSSE(t, ts.url+"/v1/chat/completions", `{"stream":true,"max_tokens":5,"seed":1,"messages":[{"role":"user","content":"hi"}]}`)
	}
	postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[]}`, 400, nil)
	postJSON(t, ts.url+"/api/generate", `{"prompt":"hi","raw":true,"stream":false,"options":{"num_predict":3,"seed":1}}`, 200, nil)

	resp, err := httpClient().Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels ...string) float64 {
		f, ok := fams[name]
		if !ok {
			t.Fatalf("no metric %s", name)
		}
	next:
		for _, mt := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range mt.Label {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue next
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s with %v", name, labels)
		return 0
	}
	bos := 0
	if m.Tokenizer.AddBOS() {
		bos = 1
	}
	prompt := len(chat.PromptTokens(m.Tokenizer, chatPrompt(t, m, userMsg("hi"))))
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"latent_requests_total", []string{"endpoint", "chat_completions", "code", "200"}, 2},
		{"latent_requests_total", []string{"endpoint", "chat_completions", "code", "400"}, 1},
		{"latent_requests_total", []string{"endpoint", "ollama_generate", "code", "200"}, 1},
		{"latent_generated_tokens_total", nil, 5 + 5 + 3},
		{"latent_prompt_tokens_total", nil, float64(2*prompt + len(chat.PromptTokens(m.Tokenizer, "hi")))},
		// The second chat reuses all but the last prompt token; the raw
		// prompt shares only the BOS with it.
		{"latent_prompt_tokens_cached_total", nil, float64(prompt - 1 + bos)},
		{"latent_queue_depth", nil, 0},
		{"latent_time_to_first_token_seconds", nil, 3},
		{"latent_tokens_per_second", nil, 3},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestLoad64Clients(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	ts := startServer(t, Config{Model: m})
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	client := openAIClient(ts, option.WithHTTPClient(&http.Client{Transport: transport}))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const clients = 64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:         "m",
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
				MaxTokens:     openai.Int(3),
				Seed:          openai.Int(int64(i)),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			defer stream.Close()
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			switch {
			case stream.Err() != nil:
				errs <- fmt.Errorf("client %d: %w", i, stream.Err())
			case len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != 3:
				errs <- fmt.Errorf("client %d: %+v", i, acc.ChatCompletion)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ts.queue.busy() || ts.queue.depth() != 0 {
		t.Error("the queue did not empty")
	}
	transport.CloseIdleConnections()
	ts.stop()
}

// A browser's preflight gets the headers its page's client asked for:
// openai-node sends X-Stainless-* besides Authorization.
func TestCORSPreflight(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	ts := startServer(t, Config{Model: m, APIKey: "s3cret"})
	for _, tc := range []struct{ asked, want string }{
		{"authorization,content-type,x-stainless-os", "authorization,content-type,x-stainless-os"},
		{"", "Authorization, Content-Type"},
	} {
		req, err := http.NewRequest("OPTIONS", ts.url+"/v1/chat/completions", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", "http://page.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		if tc.asked != "" {
			req.Header.Set("Access-Control-Request-Headers", tc.asked)
		}
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Headers") != tc.want {
			t.Errorf("preflight asking %q: %d, origin %q, headers %q; want 204, *, %q", tc.asked, resp.StatusCode,
				resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Headers"), tc.want)
		}
	}
}

// A body shorter than its Content-Length gets an answer once BodyTimeout
// has passed, whichever handler has it (one that reads it, and one that
// answers without reading it), instead of holding the connection for ever.
func TestShortBodyTimesOut(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 128)
	ts := startServer(t, Config{Model: m, BodyTimeout: 200 * time.Millisecond})
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/v1/chat/completions", 400, "reading the request body"},
		{"/v1/nothing", 404, "no endpoint"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mes", tc.path); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer to a short body: %v", tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s with a short body: %d %s, want %d saying %q", tc.path, resp.StatusCode, body, tc.status, tc.says)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the answer took %v", tc.path, d)
		}
	}
	// A stream that lasts longer than BodyTimeout is not cut.
	slow := startServer(t, Config{Model: endlessNet(m, "and on", 5*time.Millisecond).on(m), BodyTimeout: 100 * time.Millisecond})
	start := time.Now()
	events := postSSE(t, slow.url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"go on"}],"max_tokens":60}`)
	if d := time.Since(start); d < 200*time.Millisecond || !strings.Contains(events[len(events)-1], `"finish_reason":"length"`) {
		t.Errorf("a %v stream: %d events, the last %s", d, len(events), events[len(events)-1])
	}
}

package server

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/latent-ai/latent/chat"
)

func ollamaClient(t *testing.T, ts *testServer) *api.Client {
	u, err := url.Parse(ts.url)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, httpClient())
}

func checkCounters(t *testing.T, m api.Metrics, promptTokens, generated int) {
	t.Helper()
	if m.PromptEvalCount != promptTokens || m.EvalCount != generated {
		t.Errorf("prompt_eval_count %d eval_count %d, want %d and %d", m.PromptEvalCount, m.EvalCount, promptTokens, generated)
	}
	if m.TotalDuration <= 0 || m.LoadDuration <= 0 || m.PromptEvalDuration <= 0 || m.EvalDuration <= 0 {
		t.Errorf("a duration is missing: %+v", m)
	}
	if m.TotalDuration < m.PromptEvalDuration+m.EvalDuration {
		t.Errorf("total %v is less than prompt %v + eval %v", m.TotalDuration, m.PromptEvalDuration, m.EvalDuration)
	}
}

func TestOllamaClient(t *testing.T) {
	const file = "tiny-youtu-f32.gguf"
	m := goldenModel(t, file, 512)
	ts := startServer(t, Config{Model: m, Version: "1.2.3"})
	client := ollamaClient(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Name a Go keyword."}}
	want, ref := reference(t, file, chatPrompt(t, m, msgs...), 9, 5)
	options := map[string]any{"num_predict": 9, "seed": 5}
	req := &api.ChatRequest{Model: "tiny-youtu-f32", Options: options,
		Messages: []api.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Name a Go keyword."}}}

	for _, streamed := range []bool{true, false} {
		req.Stream = &streamed
		var text strings.Builder
		var last api.ChatResponse
		lines := 0
		err := client.Chat(ctx, req, func(r api.ChatResponse) error {
			if last.Done {
				t.Error("a line after done")
			}
			text.WriteString(r.Message.Content)
			last = r
			lines++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if text.String() != want {
			t.Errorf("stream=%v: %q, the engine alone gives %q", streamed, text.String(), want)
		}
		if streamed && lines < 4 || !streamed && lines != 1 {
			t.Errorf("stream=%v: %d lines", streamed, lines)
		}
		if !last.Done || last.DoneReason != "length" || last.Model != "tiny-youtu-f32" || last.Message.Role != "assistant" || last.CreatedAt.IsZero() {
			t.Errorf("stream=%v: final %+v", streamed, last)
		}
		checkCounters(t, last.Metrics, ref.PromptTokens, 9)
	}

	t.Run("generate", func(t *testing.T) {
		want, ref := reference(t, file, chatPrompt(t, m, chat.Message{Role: "user", Content: "package main"}), 7, 2)
		rawWant, rawRef := reference(t, file, "package main", 7, 2)
		for _, raw := range []bool{false, true} {
			var text strings.Builder
			var last api.GenerateResponse
			err := client.Generate(ctx, &api.GenerateRequest{Prompt: "package main", Raw: raw, Options: map[string]any{"num_predict": 7, "seed": 2}},
				func(r api.GenerateResponse) error {
					text.WriteString(r.Response)
					last = r
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			w, n := want, ref.PromptTokens
			if raw {
				w, n = rawWant, rawRef.PromptTokens
			}
			if text.String() != w || !last.Done || last.DoneReason != "length" {
				t.Errorf("raw=%v: %q (done %v %q), want %q", raw, text.String(), last.Done, last.DoneReason, w)
			}
			checkCounters(t, last.Metrics, n, 7)
		}
	})

	t.Run("load request", func(t *testing.T) {
		// Ollama's CLI loads a model with an empty chat.
		var got api.ChatResponse
		if err := client.Chat(ctx, &api.ChatRequest{Model: "tiny-youtu-f32"}, func(r api.ChatResponse) error { got = r; return nil }); err != nil {
			t.Fatal(err)
		}
		if !got.Done || got.DoneReason != "load" {
			t.Errorf("%+v", got)
		}
	})

	t.Run("tags show version", func(t *testing.T) {
		list, err := client.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Models) != 1 || list.Models[0].Name != "tiny-youtu-f32" || list.Models[0].Size <= 0 || list.Models[0].Details.Format != "gguf" ||
			list.Models[0].Details.Family != "deepseek2" || list.Models[0].Details.QuantizationLevel != "F32" {
			t.Fatalf("tags %+v", list.Models)
		}
		show, err := client.Show(ctx, &api.ShowRequest{Model: "tiny-youtu-f32:latest"})
		if err != nil {
			t.Fatal(err)
		}
		if show.Template != m.Template.Source || show.ModelInfo["general.architecture"] != "deepseek2" || show.Details.ParameterSize == "" {
			t.Errorf("show %+v", show)
		}
		if _, err := client.Show(ctx, &api.ShowRequest{Model: "llama3"}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("show of an unknown model: %v", err)
		}
		v, err := client.Version(ctx)
		if err != nil || v != "1.2.3" {
			t.Errorf("version %q %v", v, err)
		}
		ps, err := client.ListRunning(ctx)
		if err != nil || len(ps.Models) != 1 || ps.Models[0].ContextLength != 512 {
			t.Errorf("ps %+v %v", ps, err)
		}
	})

	t.Run("thinking", func(t *testing.T) {
		net := newScriptedNet(m, "<think>Hmm.</think>Yes.", 512)
		ts := startServer(t, Config{Model: net.on(m)})
		client := ollamaClient(t, ts)
		var thinking, content strings.Builder
		err := client.Chat(ctx, &api.ChatRequest{Messages: []api.Message{{Role: "user", Content: "ok?"}}}, func(r api.ChatResponse) error {
			thinking.WriteString(r.Message.Thinking)
			content.WriteString(r.Message.Content)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if thinking.String() != "Hmm." || content.String() != "Yes." {
			t.Errorf("thinking %q content %q", thinking.String(), content.String())
		}
	})
}

// A chat too long for the context loses its oldest messages on Ollama's API,
// as Ollama does (the system message and the question stay); OpenAI's API
// refuses it, as OpenAI does. A last message too long alone is refused.
func TestOllamaChatDropsOldMessages(t *testing.T) {
	ts := startServer(t, Config{Model: goldenModel(t, "tiny-glm-f32.gguf", 64)})
	long := strings.Repeat("word ", 40)
	chat := `[{"role":"system","content":"Be brief."},{"role":"user","content":"` + long + `"},{"role":"assistant","content":"` + long + `"},{"role":"user","content":"and now?"}]`

	var got map[string]any
	postJSON(t, ts.url+"/api/chat", `{"stream":false,"options":{"num_predict":2},"messages":`+chat+`}`, 200, &got)
	if n, _ := got["prompt_eval_count"].(float64); got["done"] != true || n == 0 || n > 63 {
		t.Errorf("a chat past the context: %v", got)
	}
	// A chat of many messages keeps its latest exchanges.
	var many []string
	for i := range 3000 {
		many = append(many, fmt.Sprintf(`{"role":"user","content":"q%d"},{"role":"assistant","content":"a%d"}`, i, i))
	}
	body := `{"stream":false,"options":{"num_predict":2},"messages":[{"role":"system","content":"Be brief."},` + strings.Join(many, ",") + `,{"role":"user","content":"last"}]}`
	postJSON(t, ts.url+"/api/chat", body, 200, &got)
	if n, _ := got["prompt_eval_count"].(float64); got["done"] != true || n < 32 || n > 63 {
		t.Errorf("a chat of 6002 messages: %v", got)
	}

	var e map[string]any
	postJSON(t, ts.url+"/v1/chat/completions", `{"max_tokens":2,"messages":`+chat+`}`, 400, &e)
	postJSON(t, ts.url+"/api/chat", `{"stream":false,"messages":[{"role":"user","content":"`+long+long+`"}]}`, 400, &e)
	if msg, _ := e["error"].(string); !strings.Contains(msg, "more than fit in the context of 64") {
		t.Errorf("a last message too long alone: %v", e)
	}
}

// fitChat's binary search keeps what keeping the most recent user turns
// that fit, tried one after another, keeps: for chats of turns of many
// lengths, the same prompt.
func TestFitChatKeepsTheLongestPartThatFits(t *testing.T) {
	ts := startServer(t, Config{Model: goldenModel(t, "tiny-glm-f32.gguf", 256)})
	m := ts.model
	trimmed, middle := 0, 0 // chats that lose turns; of those, ones that keep more than the last
	for seed := range 20 {
		msgs := []chat.Message{{Role: "system", Content: "Be brief."}}
		for i := range 4 + seed%9 {
			msgs = append(msgs, chat.Message{Role: "user", Content: strings.Repeat("w ", 1+(seed*7+i*3)%17)},
				chat.Message{Role: "assistant", Content: strings.Repeat("a ", 1+(seed*5+i)%11)})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: "last"})
		whole, err := ts.render(msgs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ids, err := ts.fitChat(msgs, nil, nil, whole)
		if err != nil {
			t.Fatal(err)
		}
		want := whole // one after another from the oldest: the first part that fits
		for start := 0; start < len(msgs); start++ {
			if start > 0 && msgs[start].Role != "user" {
				continue
			}
			kept := msgs[start:]
			if start > 0 {
				kept = append([]chat.Message{msgs[0]}, kept...)
			}
			p, err := ts.render(kept, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(chat.PromptTokens(m.Tokenizer, p))+answerRoom <= m.Net.Context() {
				want = p
				break
			}
		}
		if got != want || !slices.Equal(ids, chat.PromptTokens(m.Tokenizer, got)) {
			t.Errorf("seed %d (%d messages): kept\n%q\nwant\n%q", seed, len(msgs), got, want)
		}
		if want != whole {
			trimmed++
			if strings.Contains(want, "w ") { // a user turn before the last kept
				middle++
			}
		}
	}
	if trimmed < 5 || middle < 3 {
		t.Errorf("%d chats trimmed, %d of them to more than the last turn: the cases do not test the search", trimmed, middle)
	}
}

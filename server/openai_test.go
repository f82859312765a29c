package server

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/model"
)

// reference generates what the server should answer, through the engine
// directly on a fresh copy of the model (no cache, no server): the text of
// the tokens it emits and how many it sampled.
func reference(t *testing.T, file, prompt string, maxTokens int, seed uint64, tweak ...func(*engine.SamplerOptions)) (string, *engine.Result) {
	t.Helper()
	m, lm, err := Load(goldenModels+"/"+file, "", model.Options{Context: 512, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	ids := chat.PromptTokens(m.Tokenizer, prompt)
	o := engine.DefaultSamplerOptions()
	o.Seed = seed
	for _, f := range tweak {
		f(&o)
	}
	var out []int32
	res, err := engine.Generate(context.Background(), m.Net, engine.Request{Prompt: ids, MaxTokens: maxTokens, EOG: m.Tokenizer.EOG(), Sampler: o},
		func(tok engine.Token) error { out = append(out, tok.ID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return asJSONText(m.Tokenizer.Decode(out)), res
}

// asJSONText is s as it reads after a trip through JSON, which replaces
// each byte of invalid UTF-8 (random models make them) with U+FFFD.
func asJSONText(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

func chatPrompt(t *testing.T, m *Model, msgs ...chat.Message) string {
	t.Helper()
	p, err := m.Template.Render(chat.Input{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openAIClient(ts *testServer, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(ts.url + "/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0)}, opts...)...)
}

func TestOpenAIClient(t *testing.T) {
	const file = "tiny-glm-f32.gguf"
	m := goldenModel(t, file, 512)
	ts := startServer(t, Config{Model: m})
	client := openAIClient(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	question := chat.Message{Role: "user", Content: "Write a Go function."}
	want, ref := reference(t, file, chatPrompt(t, m, question), 12, 7)
	promptTokens := ref.PromptTokens

	// the chat every subtest sends, with what it adds
	base := openai.ChatCompletionNewParams{
		Model:     "tiny",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question.Content)},
		MaxTokens: openai.Int(12),
		Seed:      openai.Int(7),
	}

	t.Run("chat", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("%d choices", len(resp.Choices))
		}
		c := resp.Choices[0]
		if c.Message.Content != want {
			t.Errorf("content %q, the engine alone gives %q", c.Message.Content, want)
		}
		if c.FinishReason != "length" || c.Message.Role != "assistant" {
			t.Errorf("finish %q role %q", c.FinishReason, c.Message.Role)
		}
		if resp.Usage.PromptTokens != int64(promptTokens) || resp.Usage.CompletionTokens != 12 || resp.Usage.TotalTokens != int64(promptTokens+12) {
			t.Errorf("usage %+v, want %d prompt + 12", resp.Usage, promptTokens)
		}
		if resp.Model != "tiny" || resp.Object != "chat.completion" || !strings.HasPrefix(resp.ID, "chatcmpl-") {
			t.Errorf("model %q object %q id %q", resp.Model, resp.Object, resp.ID)
		}
	})

	t.Run("presence and frequency penalties", func(t *testing.T) {
		penalised, _ := reference(t, file, chatPrompt(t, m, question), 12, 7, func(o *engine.SamplerOptions) {
			o.PresencePenalty, o.FrequencyPenalty = 1.5, 0.75
		})
		if penalised == want {
			t.Fatalf("the penalties change nothing in the reference (%q): pick others", want)
		}
		p := base
		p.PresencePenalty, p.FrequencyPenalty = openai.Float(1.5), openai.Float(0.75)
		resp, err := client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != penalised {
			t.Errorf("content %q, the engine with the penalties gives %q", got, penalised)
		}
	})

	t.Run("chat streamed", func(t *testing.T) {
		p := base
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != want {
			t.Errorf("streamed %q, want %q", got, want)
		}
		if chunks < 4 {
			t.Errorf("only %d chunks: not streamed token by token", chunks)
		}
		if acc.Choices[0].FinishReason != "length" {
			t.Errorf("finish %q", acc.Choices[0].FinishReason)
		}
		if acc.Usage.PromptTokens != int64(promptTokens) || acc.Usage.CompletionTokens != 12 {
			t.Errorf("usage %+v", acc.Usage)
		}
		// The same prompt again: all but its last token come from the cache.
		if cached := acc.Usage.PromptTokensDetails.CachedTokens; cached != int64(promptTokens-1) {
			t.Errorf("cached tokens %d, want %d", cached, promptTokens-1)
		}
	})

	t.Run("completion", func(t *testing.T) {
		want, ref := reference(t, file, "func main() {", 10, 3)
		resp, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     "tiny",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("func main() {")},
			MaxTokens: openai.Int(10),
			Seed:      openai.Int(3),
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Choices[0].Text != want || resp.Choices[0].FinishReason != "length" {
			t.Errorf("text %q finish %q, want %q", resp.Choices[0].Text, resp.Choices[0].FinishReason, want)
		}
		if resp.Usage.PromptTokens != int64(ref.PromptTokens) || resp.Usage.CompletionTokens != 10 {
			t.Errorf("usage %+v", resp.Usage)
		}

		stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model:         "tiny",
			Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String("func main() {")},
			MaxTokens:     openai.Int(10),
			Seed:          openai.Int(3),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var text strings.Builder
		var finish string
		var usage openai.CompletionUsage
		for stream.Next() {
			c := stream.Current()
			if len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Text)
				if c.Choices[0].FinishReason != "" {
					finish = string(c.Choices[0].FinishReason)
				}
			}
			if c.Usage.TotalTokens > 0 {
				usage = c.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != want || finish != "length" || usage.CompletionTokens != 10 {
			t.Errorf("streamed %q finish %q usage %+v, want %q", text.String(), finish, usage, want)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "tiny-glm-f32" {
			t.Fatalf("models %+v", page.Data)
		}
		got, err := client.Models.Get(ctx, "tiny-glm-f32")
		if err != nil || got.ID != "tiny-glm-f32" {
			t.Fatalf("get: %v %+v", err, got)
		}
		if _, err := client.Models.Get(ctx, "gpt-4"); err == nil {
			t.Fatal("an unknown model was found")
		}
	})

	t.Run("stop string", func(t *testing.T) {
		// Stop at text from the middle of the known answer: the answer ends
		// just before it.
		cut := len(want) / 2
		for cut < len(want) && (want[cut] == ' ' || want[cut]&0xC0 == 0x80) {
			cut++
		}
		stop := want[cut:min(cut+3, len(want))]
		if strings.TrimSpace(stop) == "" {
			t.Fatalf("answer %q has no usable stop text: pick another prompt or seed", want)
		}
		p := base
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"never appears", stop}}
		resp, err := client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got, w := resp.Choices[0].Message.Content, want[:strings.Index(want, stop)]; got != w || resp.Choices[0].FinishReason != "stop" {
			t.Errorf("with stop %q: %q (finish %q), want %q", stop, got, resp.Choices[0].FinishReason, w)
		}
	})
}

func TestMultiTurnReusesCache(t *testing.T) {
	const file = "tiny-dsv2-f16.gguf"
	m := goldenModel(t, file, 512)
	ts := startServer(t, Config{Model: m})
	client := openAIClient(ts)
	ctx := context.Background()

	ask := func(msgs []openai.ChatCompletionMessageParamUnion) *openai.ChatCompletion {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: msgs, MaxTokens: openai.Int(6), Seed: openai.Int(1)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := ask([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")})
	answer := first.Choices[0].Message.Content
	second := ask([]openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello"), openai.AssistantMessage(answer), openai.UserMessage("And then?")})

	// The second turn starts with the first turn's prompt: those tokens are
	// not run again, and the answer is what an uncached run gives.
	if c := second.Usage.PromptTokensDetails.CachedTokens; c < first.Usage.PromptTokens {
		t.Errorf("second turn reused %d cached tokens, want at least the first prompt's %d", c, first.Usage.PromptTokens)
	}
	prompt := chatPrompt(t, m, chat.Message{Role: "user", Content: "Hello"}, chat.Message{Role: "assistant", Content: answer}, chat.Message{Role: "user", Content: "And then?"})
	if want, _ := reference(t, file, prompt, 6, 1); second.Choices[0].Message.Content != want {
		t.Errorf("cached run answered %q, an uncached run %q", second.Choices[0].Message.Content, want)
	}
}

func TestReasoningContent(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 512)
	answer := "<think>Two and two.</think>\n\nIt is **4**."

	t.Run("block in the output", func(t *testing.T) {
		net := newScriptedNet(m, answer, 512)
		ts := startServer(t, Config{Model: net.on(m)})
		body := `{"messages":[{"role":"user","content":"2+2?"}]}`
		var resp chatAnswer
		postJSON(t, ts.url+"/v1/chat/completions", body, 200, &resp)
		if c := resp.Choices[0]; c.Message.ReasoningContent != "Two and two." || c.Message.Content != "It is **4**." || c.FinishReason != "stop" {
			t.Errorf("got %+v", c)
		}

		// Streamed: reasoning deltas, then content deltas.
		events := postSSE(t, ts.url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"2+2?"}]}`)
		var reasoning, content strings.Builder
		for _, e := range events {
			var c struct {
				Choices []struct {
					Delta struct {
						Content          string `json:"content"`
						ReasoningContent string `json:"reasoning_content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatalf("event %q: %v", e, err)
			}
			if len(c.Choices) > 0 {
				if content.Len() > 0 && c.Choices[0].Delta.ReasoningContent != "" {
					t.Error("reasoning after the answer began")
				}
				reasoning.WriteString(c.Choices[0].Delta.ReasoningContent)
				content.WriteString(c.Choices[0].Delta.Content)
			}
		}
		if reasoning.String() != "Two and two." || content.String() != "It is **4**." {
			t.Errorf("streamed reasoning %q content %q", reasoning.String(), content.String())
		}
	})

	t.Run("block opened by the template", func(t *testing.T) {
		// GLM-4.7's generation prompt ends with <think>: the output starts inside the block.
		net := newScriptedNet(m, "Two and two.</think>It is 4.", 512)
		tm := withTemplate(t, net.on(m), "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|><think>")
		ts := startServer(t, Config{Model: tm})
		var resp chatAnswer
		postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"2+2?"}]}`, 200, &resp)
		if c := resp.Choices[0].Message; c.ReasoningContent != "Two and two." || c.Content != "It is 4." {
			t.Errorf("got %+v", c)
		}
		// A completion keeps the text as it is.
		var comp struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		postJSON(t, ts.url+"/v1/completions", `{"prompt":"x"}`, 200, &comp)
		if comp.Choices[0].Text != "Two and two.</think>It is 4." {
			t.Errorf("completion %q", comp.Choices[0].Text)
		}
	})
}

// llama.cpp's timings split the prompt's time from the generation's:
// predicted_ms is the decoding after the first token, not the whole request.
func TestTimings(t *testing.T) {
	r := &genResult{Result: &engine.Result{PromptTokens: 10, Cached: 2, Generated: 4,
		PrefillDuration: 100 * time.Millisecond, DecodeDuration: 300 * time.Millisecond}}
	got := *timingsOf(r)
	want := timings{CacheN: 2, PromptN: 8, PromptMS: 100, PromptPerSecond: 80, PredictedN: 4, PredictedMS: 300, PredictedPerSecond: 10}
	if math.Abs(got.PromptPerSecond-want.PromptPerSecond) < 1e-9 && math.Abs(got.PredictedPerSecond-want.PredictedPerSecond) < 1e-9 {
		got.PromptPerSecond, got.PredictedPerSecond = want.PromptPerSecond, want.PredictedPerSecond
	}
	if got != want {
		t.Errorf("timings %+v, want %+v", got, want)
	}
}

// top_p 0 keeps only the most likely token, as llama.cpp and OpenAI read
// it: a hot, seeded answer is then the greedy one, on both APIs.
func TestTopPZeroIsGreedy(t *testing.T) {
	ts := startServer(t, Config{Model: goldenModel(t, "tiny-youtu-f32.gguf", 512)})
	answer := func(sampling string) string {
		var resp chatAnswer
		postJSON(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":12,"seed":3,`+sampling+`}`, 200, &resp)
		return resp.Choices[0].Message.Content
	}
	greedy := answer(`"temperature":0`)
	if hot := answer(`"temperature":1.5,"top_p":1`); hot == greedy {
		t.Fatalf("a hot answer is the greedy one (%q): the test cannot tell", hot)
	}
	if got := answer(`"temperature":1.5,"top_k":40,"top_p":0`); got != greedy {
		t.Errorf("top_p 0 answered %q, want the greedy %q", got, greedy)
	}
	var o struct {
		Message struct{ Content string } `json:"message"`
	}
	postJSON(t, ts.url+"/api/chat", `{"stream":false,"messages":[{"role":"user","content":"Hello"}],"options":{"num_predict":12,"seed":3,"temperature":1.5,"top_p":0}}`, 200, &o)
	if o.Message.Content != greedy {
		t.Errorf("Ollama's top_p 0 answered %q, want the greedy %q", o.Message.Content, greedy)
	}
}

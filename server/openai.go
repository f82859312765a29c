package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/constrain"
)

// chatCompletionRequest is OpenAI's chat completion request, with the
// sampling extensions llama.cpp's server accepts (top_k, min_p,
// repeat_penalty, chat_template_kwargs).
type chatCompletionRequest struct {
	Model               string            `json:"model"`
	Messages            []openAIMessage   `json:"messages"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	N                   *int              `json:"n"`
	Stop                stopList          `json:"stop"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
	Logprobs            *bool             `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	ResponseFormat      *responseFormat   `json:"response_format"`
	openAISampling
}

type openAISampling struct {
	Temperature      *float64 `json:"temperature"`
	TopP             *float64 `json:"top_p"`
	TopK             *int     `json:"top_k"`
	MinP             *float64 `json:"min_p"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	Seed             *int64   `json:"seed"`
}

func (o openAISampling) sampling() sampling {
	return sampling{Temperature: o.Temperature, TopP: o.TopP, TopK: o.TopK, MinP: o.MinP, RepeatPenalty: o.RepeatPenalty,
		PresencePenalty: o.PresencePenalty, FrequencyPenalty: o.FrequencyPenalty, penaltyRange: 2, Seed: o.Seed}
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type openAIMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Name             string          `json:"name"`
	ToolCalls        []chat.ToolCall `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
}

// completionRequest is OpenAI's legacy text completion request.
type completionRequest struct {
	Model          string          `json:"model"`
	Prompt         json.RawMessage `json:"prompt"`
	Stream         bool            `json:"stream"`
	StreamOptions  *streamOptions  `json:"stream_options"`
	MaxTokens      *int            `json:"max_tokens"`
	N              *int            `json:"n"`
	BestOf         *int            `json:"best_of"`
	Stop           stopList        `json:"stop"`
	Echo           bool            `json:"echo"`
	Suffix         *string         `json:"suffix"`
	Logprobs       *int            `json:"logprobs"`
	ResponseFormat *responseFormat `json:"response_format"`
	openAISampling
}

// responseFormat is OpenAI's response_format: "text", "json_object" for an
// answer that is one JSON object, "json_schema" for one its schema allows.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// wantsJSON reads a response_format: what JSON it asks for, if any.
func (f *responseFormat) wantsJSON() (*jsonAnswer, error) {
	switch {
	case f == nil || f.Type == "" || f.Type == "text":
		return nil, nil
	case f.Type == "json_object":
		return &jsonAnswer{}, nil
	case f.Type == "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return nil, badRequest("response_format", "response_format json_schema needs json_schema.schema")
		}
		s, err := constrain.ParseSchema(f.JSONSchema.Schema)
		if err != nil {
			return nil, badRequest("response_format", "response_format json_schema: "+err.Error())
		}
		return &jsonAnswer{schema: s}, nil
	}
	return nil, badRequest("response_format", fmt.Sprintf("response_format %q is not supported (only \"text\", \"json_object\" and \"json_schema\")", f.Type))
}

// usage is OpenAI's token accounting.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// timings are llama.cpp's server timings: what the chat page shows.
type timings struct {
	CacheN             int     `json:"cache_n"`
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
}

func usageOf(r *genResult) *usage {
	return &usage{PromptTokens: r.PromptTokens, CompletionTokens: r.Generated, TotalTokens: r.PromptTokens + r.Generated,
		PromptTokensDetails: promptDetails{CachedTokens: r.Cached}}
}

func timingsOf(r *genResult) *timings {
	return &timings{CacheN: r.Cached, PromptN: r.PromptTokens - r.Cached, PromptMS: ms(r.PrefillDuration), PromptPerSecond: r.PromptRate(),
		PredictedN: r.Generated, PredictedMS: ms(r.DecodeDuration), PredictedPerSecond: r.DecodeRate()}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
	Timings           *timings     `json:"timings,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *fullMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Text         *string      `json:"text,omitempty"` // text completions
	FinishReason *string      `json:"finish_reason"`
	Logprobs     *struct{}    `json:"logprobs"`
}

type chatMessage struct {
	Role             string           `json:"role,omitempty"`
	Content          *string          `json:"content,omitempty"`
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	ToolCalls        []openAIToolCall `json:"tool_calls,omitempty"`
}

// fullMessage is a whole answer's message: content is there, null beside
// tool calls, as OpenAI writes it (a delta leaves out what it lacks).
type fullMessage struct {
	Role             string           `json:"role"`
	Content          *string          `json:"content"`
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	ToolCalls        []openAIToolCall `json:"tool_calls,omitempty"`
}

// openAIToolCall is a call as OpenAI's answers carry it: the arguments a
// JSON text in a string; in a stream, with its index.
type openAIToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openAICalls converts calls read from an answer, numbering them for a
// stream.
func openAICalls(calls []chat.ToolCall, stream bool) []openAIToolCall {
	out := make([]openAIToolCall, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = newID("call_"), "function"
		out[i].Function.Name, out[i].Function.Arguments = c.Function.Name, string(c.Function.Arguments)
		if stream {
			out[i].Index = &i
		}
	}
	return out
}

const fingerprint = "latent"

// reply is what every object of one OpenAI answer repeats.
type reply struct {
	id, object, model string
	created           int64
}

func (rp reply) with(choices ...chatChoice) chatCompletion {
	return chatCompletion{ID: rp.id, Object: rp.object, Created: rp.created, Model: rp.model, SystemFingerprint: fingerprint,
		Choices: append([]chatChoice{}, choices...)} // [] rather than null in the usage chunk
}

// endStream sends a stream's last choice (with its finish reason, and the
// timings unless a usage chunk follows), the usage chunk when asked for,
// and [DONE].
func (rp reply) endStream(st *stream, last chatChoice, res *genResult, o *streamOptions) error {
	final := rp.with(last)
	wantsUsage := o != nil && o.IncludeUsage
	if !wantsUsage {
		final.Timings = timingsOf(res)
	}
	if err := st.send(final); err != nil {
		return err
	}
	if wantsUsage {
		u := rp.with()
		u.Usage, u.Timings = usageOf(res), timingsOf(res)
		if err := st.send(u); err != nil {
			return err
		}
	}
	return st.done()
}

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req chatCompletionRequest
	if err := decodeBody(r, &req); err != nil {
		openAIErrors.write(w, err)
		return
	}
	gen, err := s.chatRequest(&req)
	if err != nil {
		openAIErrors.write(w, err)
		return
	}
	gen.arrived = arrived
	rp := reply{id: newID("chatcmpl-"), object: "chat.completion", created: arrived.Unix(), model: s.responseModel(req.Model)}

	if !req.Stream {
		all, res, err := s.collect(r.Context(), gen)
		if err != nil {
			s.failed(w, r, err, openAIErrors)
			return
		}
		msg := &fullMessage{Role: "assistant", Content: &all.content, ReasoningContent: all.reasoning}
		if len(res.toolCalls) > 0 {
			msg.ToolCalls, res.reason = openAICalls(res.toolCalls, false), "tool_calls"
			if all.content == "" {
				msg.Content = nil // OpenAI: no content beside the calls
			}
		}
		c := rp.with(chatChoice{Message: msg, FinishReason: &res.reason})
		c.Usage, c.Timings = usageOf(res), timingsOf(res)
		writeJSON(w, http.StatusOK, c)
		return
	}

	rp.object = "chat.completion.chunk"
	st := newStream(w, true, s.cfg.WriteTimeout)
	delta := func(d *chatMessage) chatChoice { return chatChoice{Delta: d} }
	// OpenAI's first chunk names the role, with empty content.
	begin := func() error {
		if st.started {
			return nil
		}
		empty := ""
		return st.send(rp.with(delta(&chatMessage{Role: "assistant", Content: &empty})))
	}
	res, err := s.generate(r.Context(), gen, func(p piece) error {
		if err := begin(); err != nil {
			return err
		}
		d := &chatMessage{ReasoningContent: p.reasoning}
		if p.content != "" {
			d.Content = &p.content
		}
		return st.send(rp.with(delta(d)))
	})
	if err == nil {
		err = begin()
	}
	if err == nil && len(res.toolCalls) > 0 {
		res.reason = "tool_calls"
		err = st.send(rp.with(delta(&chatMessage{ToolCalls: openAICalls(res.toolCalls, true)})))
	}
	if err == nil {
		err = rp.endStream(st, chatChoice{Delta: &chatMessage{}, FinishReason: &res.reason}, res, req.StreamOptions)
	}
	if err != nil {
		s.streamFailed(w, r, st, err, openAIErrors)
	}
}

// errStreamOptions is OpenAI's answer to stream_options without a stream.
var errStreamOptions = badRequest("stream_options", "stream_options is only allowed with stream: true")

// chatRequest checks a chat completion request and renders its prompt.
func (s *Server) chatRequest(req *chatCompletionRequest) (*genRequest, error) {
	if err := checkN(req.N); err != nil {
		return nil, err
	}
	if req.Logprobs != nil && *req.Logprobs {
		return nil, badRequest("logprobs", "logprobs are not supported")
	}
	if req.TopLogprobs != nil && *req.TopLogprobs != 0 { // OpenAI's rule: only with logprobs
		return nil, badRequest("top_logprobs", "top_logprobs needs logprobs, which are not supported")
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, errStreamOptions
	}
	asJSON, err := req.ResponseFormat.wantsJSON()
	if err != nil {
		return nil, err
	}
	if asJSON != nil {
		if req.ChatTemplateKwargs, err = s.noThinking(req.ChatTemplateKwargs, "chat_template_kwargs"); err != nil {
			return nil, err
		}
	}
	if req.Messages == nil {
		return nil, badRequest("messages", "messages is missing: send at least one message")
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		role, err := checkRole(i, m.Role)
		if err != nil {
			return nil, err
		}
		content, err := textContent(i, m.Content)
		if err != nil {
			return nil, err
		}
		msgs[i] = chat.Message{Role: role, Content: content, ReasoningContent: m.ReasoningContent, Name: m.Name,
			ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		for j := range msgs[i].ToolCalls {
			msgs[i].ToolCalls[j].Function.Arguments = toolArguments(msgs[i].ToolCalls[j].Function.Arguments)
		}
	}
	// tool_choice "none": the model is not told of the tools, and its answer
	// is text; "required" or a named function: the answer begins with a
	// call (of that function), after any reasoning.
	choice, err := toolChoiceOf(req.ToolChoice)
	if err != nil {
		return nil, err
	}
	if choice.none {
		req.Tools = nil
	}
	msgs, extra, err := s.chatInput(msgs, req.Tools, req.ChatTemplateKwargs)
	if err != nil {
		return nil, err
	}
	if choice.required {
		if err := s.checkCall(req.Tools, choice.name, asJSON != nil); err != nil {
			return nil, err
		}
	}
	prompt, err := s.render(msgs, req.Tools, extra)
	if err != nil {
		return nil, err
	}
	limit := req.MaxTokens
	param := "max_tokens"
	if req.MaxCompletionTokens != nil {
		limit, param = req.MaxCompletionTokens, "max_completion_tokens"
	}
	maxTokens, err := maxTokensOf(param, limit)
	if err != nil {
		return nil, err
	}
	if err := req.Stop.check(); err != nil {
		return nil, err
	}
	opts, err := req.sampling().options("", 2)
	if err != nil {
		return nil, err
	}
	gen := &genRequest{prompt: prompt, maxTokens: maxTokens, sampler: opts, stop: req.Stop}
	if err := s.readAnswer(gen, req.Tools, asJSON, "response_format"); err != nil {
		return nil, err
	}
	if choice.required {
		s.requireCall(gen, choice.name)
	}
	return gen, nil
}

// toolChoice is what OpenAI's tool_choice asks: no tools, or a call (of
// name, when set) required; neither is "auto".
type toolChoice struct {
	none, required bool
	name           string
}

func toolChoiceOf(raw json.RawMessage) (toolChoice, error) {
	bad := func(msg string) (toolChoice, error) {
		return toolChoice{}, badRequest("tool_choice", "tool_choice "+msg)
	}
	raw = bytes.TrimSpace(raw)
	var c toolChoice
	var word string
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case json.Unmarshal(raw, &word) == nil:
		switch word {
		case "none":
			c.none = true
		case "required":
			c.required = true
		case "auto":
		default:
			return bad(fmt.Sprintf("%q is not \"none\", \"auto\", \"required\" or a function", word))
		}
	default: // a tool definition's shape: {"type": "function", "function": {"name": ...}}
		t, err := chat.ParseToolDef(raw)
		if err != nil {
			return bad(`must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
		}
		c.required, c.name = true, t.Function.Name
	}
	return c, nil
}

// toolName is a tool definition's function name ("" when it has none).
func toolName(raw json.RawMessage) string {
	t, _ := chat.ParseToolDef(raw) // a shape error leaves the name it read, or ""
	return t.Function.Name
}

// checkCall checks that a request requiring a call (of name, when set) can
// have one: it offers tools (already checked), that one among them, the
// answer is not JSON (a call's markup would be inside a string), and the
// model writes calls in a syntax latent reads. Done once the messages and
// tools are checked (chatInput), before the prompt is rendered.
func (s *Server) checkCall(tools []json.RawMessage, name string, asJSON bool) error {
	bad := func(msg string) error { return badRequest("tool_choice", "tool_choice "+msg) }
	switch {
	case len(tools) == 0:
		return bad("requires a call, but the request offers no tools")
	case name != "" && !slices.ContainsFunc(tools, func(t json.RawMessage) bool { return toolName(t) == name }):
		return bad(fmt.Sprintf("names the function %q, which is not among the tools", name))
	case asJSON:
		return bad("requires a call, which a JSON response_format excludes")
	case s.toolSyntax == nil:
		return bad(fmt.Sprintf("requires a call, but %q writes calls in no syntax latent reads", s.model.Name))
	}
	return nil
}

// requireCall makes gen's answer begin with a call (of name, when set), as
// checkCall allowed: it must write the call's opening markup as its
// template writes it first, after a reasoning block its prompt opens or,
// when the model may think, the answer itself opens (constrain.PrefixTokens).
func (s *Server) requireCall(gen *genRequest, name string) {
	syn := s.toolSyntax
	prefix, next := syn.CallPrefix(name)
	c := constrain.Prefix{Text: prefix, Next: next, End: syn.CallEnd(), Again: syn.Begin, Close: chat.ThinkClose, Inside: gen.opensReasoning()}
	if !c.Inside && s.thinks && !chat.ClosesReasoning(gen.prompt) {
		c.Open = chat.ThinkOpen // the model may open its reasoning itself (Qwen3, R1); a prompt that closed it turned it off
	}
	gen.constraint = constrain.NewPrefixTokens(s.vocab(), c)
}

func checkN(n *int) error {
	if n != nil && *n != 1 {
		return badRequest("n", fmt.Sprintf("n = %d is not supported: the server makes one choice per request (n = 1)", *n))
	}
	return nil
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req completionRequest
	if err := decodeBody(r, &req); err != nil {
		openAIErrors.write(w, err)
		return
	}
	gen, err := s.completionRequest(&req)
	if err != nil {
		openAIErrors.write(w, err)
		return
	}
	gen.arrived = arrived
	rp := reply{id: newID("cmpl-"), object: "text_completion", created: arrived.Unix(), model: s.responseModel(req.Model)}
	text := func(t string, finish *string) chatChoice { return chatChoice{Text: &t, FinishReason: finish} }

	if !req.Stream {
		all, res, err := s.collect(r.Context(), gen)
		if err != nil {
			s.failed(w, r, err, openAIErrors)
			return
		}
		c := rp.with(text(all.content, &res.reason))
		c.Usage, c.Timings = usageOf(res), timingsOf(res)
		writeJSON(w, http.StatusOK, c)
		return
	}
	st := newStream(w, true, s.cfg.WriteTimeout)
	res, err := s.generate(r.Context(), gen, func(p piece) error {
		return st.send(rp.with(text(p.content, nil)))
	})
	if err == nil {
		err = rp.endStream(st, text("", &res.reason), res, req.StreamOptions)
	}
	if err != nil {
		s.streamFailed(w, r, st, err, openAIErrors)
	}
}

func (s *Server) completionRequest(req *completionRequest) (*genRequest, error) {
	if err := checkN(req.N); err != nil {
		return nil, err
	}
	switch {
	case req.BestOf != nil && *req.BestOf != 1:
		return nil, badRequest("best_of", "best_of other than 1 is not supported")
	case req.Echo:
		return nil, badRequest("echo", "echo is not supported")
	case req.Suffix != nil && *req.Suffix != "":
		return nil, badRequest("suffix", "suffix (fill in the middle) is not supported")
	case req.Logprobs != nil:
		return nil, badRequest("logprobs", "logprobs are not supported")
	case req.StreamOptions != nil && !req.Stream:
		return nil, errStreamOptions
	}
	// A completion has no place for reasoning: it stays in the text.
	gen := &genRequest{rawReasoning: true}
	if err := parsePrompt(req.Prompt, gen); err != nil {
		return nil, err
	}
	var err error
	if gen.maxTokens, err = maxTokensOf("max_tokens", req.MaxTokens); err != nil {
		return nil, err
	}
	if err := req.Stop.check(); err != nil {
		return nil, err
	}
	if gen.sampler, err = req.sampling().options("", 2); err != nil {
		return nil, err
	}
	gen.stop = req.Stop
	asJSON, err := req.ResponseFormat.wantsJSON()
	if err == nil {
		err = s.readAnswer(gen, nil, asJSON, "response_format")
	}
	return gen, err
}

// parsePrompt reads a completion prompt as OpenAI's API takes one: a
// string or token ids, or a list holding one of those.
func parsePrompt(raw json.RawMessage, gen *genRequest) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return badRequest("prompt", "prompt is missing")
	}
	if ok, err := parseOnePrompt(raw, gen); ok {
		return err
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		if len(list) != 1 {
			return badRequest("prompt", fmt.Sprintf("prompt holds %d prompts: send one per request", len(list)))
		}
		if ok, err := parseOnePrompt(bytes.TrimSpace(list[0]), gen); ok {
			return err
		}
	}
	return badRequest("prompt", "prompt must be a string, an array of token ids, or an array holding one of those")
}

// parseOnePrompt reads one prompt, a string or token ids, reporting whether
// raw is one (empty, it is still an error).
func parseOnePrompt(raw json.RawMessage, gen *genRequest) (bool, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return true, badRequest("prompt", "prompt is empty")
		}
		gen.prompt = text
		return true, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return true, badRequest("prompt", "prompt is empty")
		}
		gen.tokens = ids
		return true, nil
	}
	return false, nil
}

// responseModel is the model name a response carries: the one the client
// asked for (any name reaches the one model served), else the served name.
func (s *Server) responseModel(asked string) string {
	if asked != "" {
		return asked
	}
	return s.model.Name
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); !s.isModel(id) {
		openAIErrors.write(w, &apiError{status: http.StatusNotFound, kind: "invalid_request_error", param: "model", code: "model_not_found",
			msg: fmt.Sprintf("the model %q does not exist; this server serves %q", id, s.model.Name)})
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

func (s *Server) modelObject() map[string]any {
	created := s.started.Unix()
	if !s.model.Info.Modified.IsZero() {
		created = s.model.Info.Modified.Unix()
	}
	return map[string]any{"id": s.model.Name, "object": "model", "created": created, "owned_by": "latent",
		"meta": map[string]any{"n_ctx": s.model.Net.Context(), "n_vocab": s.model.Net.Vocab(), "size": s.model.Info.Size}}
}

// isModel reports whether name names the served model (Ollama's ":latest"
// tag allowed).
func (s *Server) isModel(name string) bool {
	return name == s.model.Name || strings.TrimSuffix(name, ":latest") == s.model.Name
}

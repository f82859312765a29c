package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/constrain"
)

// ollamaMessage is a message of Ollama's chat API.
type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking,omitempty"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
}

type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaChatRequest struct {
	Model    string            `json:"model"`
	Messages []ollamaMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Format   json.RawMessage   `json:"format"`
	Options  ollamaOptions     `json:"options"`
	Stream   *bool             `json:"stream"`
	Think    json.RawMessage   `json:"think"`
}

type ollamaGenerateRequest struct {
	Model   string          `json:"model"`
	Prompt  string          `json:"prompt"`
	Suffix  string          `json:"suffix"`
	System  string          `json:"system"`
	Raw     bool            `json:"raw"`
	Images  []string        `json:"images"`
	Format  json.RawMessage `json:"format"`
	Options ollamaOptions   `json:"options"`
	Stream  *bool           `json:"stream"`
	Think   json.RawMessage `json:"think"`
}

// ollamaOptions are the model options Ollama requests carry; those that
// concern loading (num_gpu, num_thread, ...) are accepted and ignored.
type ollamaOptions struct {
	sampling
	numPredict *int
	stop       stopList
}

func (o *ollamaOptions) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return &fieldError{"options", "must be an object"}
	}
	float := func(key string, dst **float64) error {
		raw, ok := m[key]
		if !ok || string(raw) == "null" {
			return nil
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return &fieldError{"options." + key, "must be a number"}
		}
		*dst = &v
		return nil
	}
	// integer reads an integer of the given bits (5.0 and 5e3 too).
	integer := func(key string, bits int) (*int64, error) {
		raw, ok := m[key]
		if !ok || string(raw) == "null" {
			return nil, nil
		}
		text := string(bytes.TrimSpace(raw))
		outside := func() error {
			return &fieldError{"options." + key, fmt.Sprintf("%.40s is outside [%d, %d]", text, int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)}
		}
		n, err := strconv.ParseInt(text, 10, bits)
		if err == nil {
			return &n, nil
		}
		if errors.Is(err, strconv.ErrRange) {
			return nil, outside()
		}
		var num json.Number // 5.0 or 5e3: a JSON number, read as a float
		if json.Unmarshal(raw, &num) != nil {
			return nil, &fieldError{"options." + key, "must be an integer"}
		}
		v, err := strconv.ParseFloat(string(num), 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return nil, outside()
		case err != nil || v != math.Trunc(v):
			return nil, &fieldError{"options." + key, "must be an integer"}
		case v >= math.Ldexp(1, bits-1) || v < -math.Ldexp(1, bits-1):
			return nil, outside()
		}
		n = int64(v)
		return &n, nil
	}
	small := func(key string, dst **int) error {
		n, err := integer(key, 32)
		if n != nil {
			v := int(*n)
			*dst = &v
		}
		return err
	}
	seed, err := integer("seed", 64)
	for _, e := range []error{
		err, float("temperature", &o.Temperature), float("top_p", &o.TopP), float("min_p", &o.MinP), float("repeat_penalty", &o.RepeatPenalty),
		float("presence_penalty", &o.PresencePenalty), float("frequency_penalty", &o.FrequencyPenalty),
		small("top_k", &o.TopK), small("repeat_last_n", &o.RepeatLastN), small("num_predict", &o.numPredict),
	} {
		if e != nil {
			return e
		}
	}
	if seed != nil && *seed >= 0 { // Ollama: a negative seed means a random one
		o.Seed = seed
	}
	if raw, ok := m["stop"]; ok {
		if err := o.stop.UnmarshalJSON(raw); err != nil {
			return &fieldError{"options.stop", "must be a string or an array of strings"}
		}
	}
	return nil
}

// generation turns the options into the request's limits and sampler.
func (o *ollamaOptions) apply(gen *genRequest) error {
	if n := o.numPredict; n != nil && *n > 0 {
		gen.maxTokens = *n
	} else if n != nil && *n != -1 && *n != -2 {
		return badRequest("options.num_predict", fmt.Sprintf("num_predict %d must be positive, or -1 for no limit", *n))
	}
	if err := o.stop.check(); err != nil {
		return err
	}
	gen.stop = o.stop
	var err error
	gen.sampler, err = o.options("options.", 0)
	return err
}

// thinkOption is parseThink, refusing to turn thinking on for a model that
// does not think, as Ollama does; for a JSON answer thinking is turned off
// (noThinking).
func (s *Server) thinkOption(raw json.RawMessage, asJSON bool) (map[string]any, error) {
	extra, err := parseThink(raw)
	if err == nil && extra["enable_thinking"] == true && !s.thinks {
		return nil, badRequest("think", fmt.Sprintf("%q does not support thinking", s.model.Name))
	}
	if err == nil && asJSON {
		extra, err = s.noThinking(extra, "think")
	}
	return extra, err
}

// parseThink reads Ollama's think field: true, false, or "high", "medium",
// "low". Templates get enable_thinking; absent leaves the template's default.
func parseThink(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return map[string]any{"enable_thinking": b}, nil
	}
	var level string
	if json.Unmarshal(raw, &level) == nil && (level == "high" || level == "medium" || level == "low") {
		return map[string]any{"enable_thinking": true, "reasoning_effort": level}, nil
	}
	return nil, badRequest("think", "think must be true, false, \"high\", \"medium\" or \"low\"")
}

// jsonFormat reads Ollama's format: "json" asks for an answer that is one
// JSON object, a JSON schema for one that schema allows.
func jsonFormat(raw json.RawMessage) (*jsonAnswer, error) {
	switch f := string(bytes.TrimSpace(raw)); {
	case f == "" || f == "null" || f == `""`:
		return nil, nil
	case f == `"json"`:
		return &jsonAnswer{}, nil
	case strings.HasPrefix(f, "{"):
		s, err := constrain.ParseSchema(raw)
		if err != nil {
			return nil, badRequest("format", "format: "+err.Error())
		}
		return &jsonAnswer{schema: s}, nil
	}
	return nil, badRequest("format", `format must be "json" or a JSON schema`)
}

// ollamaResponse is one line of an Ollama stream, or the whole answer.
type ollamaResponse struct {
	Model     string         `json:"model"`
	CreatedAt string         `json:"created_at"`
	Message   *ollamaMessage `json:"message,omitempty"`
	Response  *string        `json:"response,omitempty"`
	Thinking  string         `json:"thinking,omitempty"`
	Done      bool           `json:"done"`
	ollamaCounters
}

type ollamaCounters struct {
	DoneReason         string `json:"done_reason,omitempty"`
	TotalDuration      int64  `json:"total_duration,omitempty"`
	LoadDuration       int64  `json:"load_duration,omitempty"`
	PromptEvalCount    int    `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64  `json:"prompt_eval_duration,omitempty"`
	EvalCount          int    `json:"eval_count,omitempty"`
	EvalDuration       int64  `json:"eval_duration,omitempty"`
}

// countersOf maps a generation onto Ollama's counters. load_duration is the
// wait for the model, as Ollama's includes its scheduler's.
func countersOf(r *genResult) ollamaCounters {
	return ollamaCounters{
		DoneReason: r.reason, TotalDuration: int64(r.total), LoadDuration: int64(max(r.queued, 1)),
		PromptEvalCount: r.PromptTokens, PromptEvalDuration: int64(max(r.PrefillDuration, 1)),
		EvalCount: r.Generated, EvalDuration: int64(max(r.DecodeDuration, 1)),
	}
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req ollamaChatRequest
	if err := decodeBody(r, &req); err != nil {
		ollamaErrors.write(w, err)
		return
	}
	model := s.responseModel(req.Model)
	line := func(p piece) ollamaResponse {
		return ollamaResponse{Model: model, CreatedAt: now(), Message: &ollamaMessage{Role: "assistant", Content: p.content, Thinking: p.reasoning}}
	}
	if len(req.Messages) == 0 {
		// Ollama's clients load a model with an empty chat.
		writeOllamaLoaded(w, line)
		return
	}
	gen, err := s.ollamaChatRequest(&req)
	if err != nil {
		ollamaErrors.write(w, err)
		return
	}
	gen.arrived = arrived
	s.ollamaRespond(w, r, req.Stream, gen, line)
}

func (s *Server) ollamaChatRequest(req *ollamaChatRequest) (*genRequest, error) {
	asJSON, err := jsonFormat(req.Format)
	if err != nil {
		return nil, err
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		role, err := checkRole(i, m.Role)
		if err != nil {
			return nil, err
		}
		if len(m.Images) > 0 {
			return nil, badRequest(fmt.Sprintf("messages[%d].images", i), "images are not supported: the model reads text only")
		}
		msgs[i] = chat.Message{Role: role, Content: m.Content, ReasoningContent: m.Thinking, Name: m.ToolName}
		for _, tc := range m.ToolCalls {
			call := chat.ToolCall{Type: "function"}
			call.Function.Name, call.Function.Arguments = tc.Function.Name, toolArguments(tc.Function.Arguments)
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, call)
		}
	}
	extra, err := s.thinkOption(req.Think, asJSON != nil)
	if err != nil {
		return nil, err
	}
	if msgs, extra, err = s.chatInput(msgs, req.Tools, extra); err != nil {
		return nil, err
	}
	prompt, err := s.render(msgs, req.Tools, extra)
	if err != nil {
		return nil, err
	}
	gen := &genRequest{}
	if gen.prompt, gen.tokens, err = s.fitChat(msgs, req.Tools, extra, prompt); err != nil {
		return nil, err
	}
	if err := req.Options.apply(gen); err != nil { // before readAnswer builds a constraint
		return nil, err
	}
	if err := s.readAnswer(gen, req.Tools, asJSON, "format"); err != nil {
		return nil, err
	}
	return gen, nil
}

// fitChat is the prompt and its tokens, with the oldest messages dropped
// when the chat does not fit the context, as Ollama does: the system
// messages and the latest messages that fit stay, starting with a user's
// message (templates refuse others). A chat that cannot be made to fit
// comes back as it was (with its tokens, when they were counted), for
// generate to refuse as too long.
func (s *Server) fitChat(msgs []chat.Message, tools []json.RawMessage, extra map[string]any, whole string) (string, []int32, error) {
	// fit tokenizes prompt, unless it is surely too long, and reports
	// whether it fits
	fit := func(prompt string) ([]int32, bool) {
		ids, err := s.promptTokens(prompt)
		return ids, err == nil && len(ids)+answerRoom <= s.model.Net.Context()
	}
	wholeIDs, ok := fit(whole)
	if ok {
		return whole, wholeIDs, nil
	}
	var system []chat.Message // in order, with their places
	var at []int
	for i, msg := range msgs {
		if msg.Role == "system" {
			system, at = append(system, msg), append(at, i)
		}
	}
	var starts []int // the user messages a kept part may start at (0 is the whole chat)
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Role == "user" {
			starts = append(starts, i)
		}
	}
	// A later start keeps less, so whether it fits only grows along starts.
	// The search goes back from the last start in doubling steps, then
	// halves the gap between the last start that fit and the first that did
	// not: a few renderings, none holding much more than twice what fits,
	// however long the chat.
	best, bestIDs := whole, wholeIDs
	hi := len(starts) // the earliest start known to fit (len: none yet); the earliest of all is in [lo, hi]
	try := func(i int) (bool, error) {
		kept := append(slices.Clone(system[:sort.SearchInts(at, starts[i])]), msgs[starts[i]:]...)
		prompt, err := s.render(kept, tools, extra)
		if err != nil {
			return false, err
		}
		ids, ok := fit(prompt)
		if ok {
			best, bestIDs, hi = prompt, ids, i
		}
		return ok, nil
	}
	lo := 0
	for step := 1; lo < hi; step *= 2 {
		i := max(lo, hi-step)
		ok, err := try(i)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			lo = i + 1
			break
		}
	}
	for lo < hi {
		mid := (lo + hi) / 2
		ok, err := try(mid)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			lo = mid + 1
		}
	}
	return best, bestIDs, nil
}

func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var req ollamaGenerateRequest
	if err := decodeBody(r, &req); err != nil {
		ollamaErrors.write(w, err)
		return
	}
	model := s.responseModel(req.Model)
	line := func(p piece) ollamaResponse {
		return ollamaResponse{Model: model, CreatedAt: now(), Response: &p.content, Thinking: p.reasoning}
	}
	if req.Prompt == "" && req.System == "" {
		// Ollama's clients load a model with an empty prompt.
		writeOllamaLoaded(w, line)
		return
	}
	gen, err := s.ollamaGenerateRequest(&req)
	if err != nil {
		ollamaErrors.write(w, err)
		return
	}
	gen.arrived = arrived
	s.ollamaRespond(w, r, req.Stream, gen, line)
}

func (s *Server) ollamaGenerateRequest(req *ollamaGenerateRequest) (*genRequest, error) {
	switch {
	case len(req.Images) > 0:
		return nil, badRequest("images", "images are not supported: the model reads text only")
	case req.Suffix != "":
		return nil, badRequest("suffix", "suffix (fill in the middle) is not supported")
	}
	asJSON, err := jsonFormat(req.Format)
	if err != nil {
		return nil, err
	}
	gen := &genRequest{prompt: req.Prompt, rawReasoning: true}
	if !req.Raw {
		var msgs []chat.Message
		if req.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: req.Prompt})
		extra, err := s.thinkOption(req.Think, asJSON != nil)
		if err != nil {
			return nil, err
		}
		if gen.prompt, err = s.render(msgs, nil, extra); err != nil {
			return nil, err
		}
		gen.rawReasoning = false
	}
	if err := req.Options.apply(gen); err != nil { // before readAnswer builds a constraint
		return nil, err
	}
	if err := s.readAnswer(gen, nil, asJSON, "format"); err != nil {
		return nil, err
	}
	return gen, nil
}

// writeOllamaLoaded answers a request that only asks for the model to be
// loaded (it always is).
func writeOllamaLoaded(w http.ResponseWriter, line func(piece) ollamaResponse) {
	out := line(piece{})
	out.Done, out.DoneReason = true, "load"
	writeJSON(w, http.StatusOK, out)
}

// ollamaRespond runs gen and answers in NDJSON lines (stream absent or
// true) or one object, written by line; the last, or only, one is done and
// carries the counters.
func (s *Server) ollamaRespond(w http.ResponseWriter, r *http.Request, streamed *bool, gen *genRequest, line func(piece) ollamaResponse) {
	final := func(res *genResult, p piece) ollamaResponse {
		out := line(p)
		out.Done, out.ollamaCounters = true, countersOf(res)
		if out.Message != nil {
			out.Message.ToolCalls = ollamaCalls(res.toolCalls)
		}
		return out
	}
	if streamed != nil && !*streamed {
		all, res, err := s.collect(r.Context(), gen)
		if err != nil {
			s.failed(w, r, err, ollamaErrors)
			return
		}
		writeJSON(w, http.StatusOK, final(res, all))
		return
	}
	st := newStream(w, false, s.cfg.WriteTimeout)
	res, err := s.generate(r.Context(), gen, func(p piece) error { return st.send(line(p)) })
	if err == nil {
		err = st.send(final(res, piece{}))
	}
	if err != nil {
		s.streamFailed(w, r, st, err, ollamaErrors)
	}
}

// ollamaCalls converts calls read from an answer: Ollama's arguments are
// an object.
func ollamaCalls(calls []chat.ToolCall) []ollamaToolCall {
	var out []ollamaToolCall
	for i, c := range calls {
		var oc ollamaToolCall
		oc.ID = newID("call_")
		oc.Function.Index, oc.Function.Name, oc.Function.Arguments = i, c.Function.Name, c.Function.Arguments
		out = append(out, oc)
	}
	return out
}

func (s *Server) ollamaModel() map[string]any {
	return map[string]any{
		"name": s.model.Name, "model": s.model.Name, "modified_at": s.model.Info.Modified.UTC().Format(time.RFC3339Nano),
		"size": s.model.Info.Size, "digest": "", "details": s.details(),
	}
}

func (s *Server) details() map[string]any {
	in := s.model.Info
	return map[string]any{"parent_model": "", "format": "gguf", "family": in.Family, "families": []string{in.Family},
		"parameter_size": in.ParameterSize, "quantization_level": in.Quantization}
}

func (s *Server) handleOllamaTags(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{s.ollamaModel()}})
}

func (s *Server) handleOllamaPS(w http.ResponseWriter, r *http.Request) {
	m := s.ollamaModel()
	m["expires_at"] = time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)
	m["size_vram"] = 0
	m["context_length"] = s.model.Net.Context()
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{m}})
}

func (s *Server) handleOllamaShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // older clients
	}
	if err := decodeBody(r, &req); err != nil {
		ollamaErrors.write(w, err)
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if name == "" {
		ollamaErrors.write(w, badRequest("model", "model is required"))
		return
	}
	if !s.isModel(name) {
		ollamaErrors.write(w, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model '%s' not found (this server serves '%s')", name, s.model.Name)})
		return
	}
	tmpl := s.model.Template.Source
	caps := []string{"completion"}
	if s.thinks {
		caps = append(caps, "thinking")
	}
	if s.takesTools() {
		caps = append(caps, "tools")
	}
	info := s.model.Info
	writeJSON(w, http.StatusOK, map[string]any{
		"license":      "",
		"modelfile":    fmt.Sprintf("# served by latent\nFROM %s\n", info.Path),
		"parameters":   "",
		"template":     tmpl,
		"details":      s.details(),
		"model_info":   info.Metadata,
		"capabilities": caps,
		"modified_at":  info.Modified.UTC().Format(time.RFC3339Nano),
	})
}

func (s *Server) handleOllamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
}

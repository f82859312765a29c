package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/engine"
)

// genRequest is one generation, in the terms both APIs share.
type genRequest struct {
	prompt    string // text, tokenized by chat.PromptTokens
	tokens    []int32
	maxTokens int // ≤ 0: until the end of generation or a full context
	sampler   engine.SamplerOptions
	stop      []string
	arrived   time.Time
	// rawReasoning keeps <think> blocks in the text (completions, raw
	// prompts) instead of separating them.
	rawReasoning bool
	// tools are the tool definitions a chat request offered, whose calls
	// are read in the syntax the model's template writes (Server.toolSyntax).
	tools []json.RawMessage
	// constraint, when set, holds the answer to one JSON object
	// (readAnswer) or to a required call (requireCall).
	constraint engine.Constraint
}

// opensReasoning reports whether the answer starts inside a reasoning block
// its prompt opened (and the block is read apart from the answer).
func (g *genRequest) opensReasoning() bool {
	return !g.rawReasoning && chat.OpensReasoning(g.prompt)
}

// genResult is how a generation ended and what it cost: the engine's
// account, with the waits only the server sees.
type genResult struct {
	*engine.Result
	// reason is "stop" (end of generation or a stop string) or "length"
	// (max tokens or a full context), as both APIs name them.
	reason string
	// queued is the wait for the model; total everything since arrival.
	queued, total time.Duration
	// toolCalls are the calls the answer ended with, read from its text.
	toolCalls []chat.ToolCall
}

// piece is a part of the answer as it streams: reasoning or answer text.
type piece struct {
	reasoning, content string
}

// answerRoom is the context a prompt must leave free. The engine would
// answer a prompt that fills the context with one token, cut off; the server
// refuses it instead, as llama.cpp's server does.
const answerRoom = 1

// checkPrompt is engine.CheckPrompt with room for the answer, as the
// client's mistake (400) that the engine would find only once the model is
// free.
func checkPrompt(ids []int32, vocab, context int) error {
	err := engine.CheckPrompt(ids, vocab, context, answerRoom)
	if err == nil {
		return nil
	}
	var pe *engine.PromptError
	if errors.As(err, &pe) && pe.TooLong {
		return contextExceeded(pe.Error())
	}
	return badRequest("prompt", err.Error())
}

// checkText refuses a prompt text that has more tokens than fit whatever
// they are, before it is tokenized: tokenizing megabytes takes seconds and
// memory, and requests do it before they queue for the model.
func checkText(text string, maxTokenBytes, context int) error {
	if least := (len(text) + maxTokenBytes - 1) / maxTokenBytes; least+answerRoom > context {
		return contextExceeded(fmt.Sprintf("the prompt's %d bytes are at least %d tokens, more than fit in the context of %d", len(text), least, context))
	}
	return nil
}

func contextExceeded(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "invalid_request_error", code: "context_length_exceeded",
		msg: msg + " (leave room for the answer, or serve with a larger --ctx)"}
}

// promptTokens is a prompt's tokens, unless its text surely holds more
// than fit the context (the client's mistake, 400).
func (s *Server) promptTokens(text string) ([]int32, error) {
	m := s.model
	if err := checkText(text, m.Tokenizer.MaxTokenBytes(), m.Net.Context()); err != nil {
		return nil, err
	}
	return chat.PromptTokens(m.Tokenizer, text), nil
}

// generate runs req when the model is free, calling emit with each piece of
// text as soon as it is final. It returns an *apiError for the client's
// mistakes (prompt too long: 400) and for a full queue (429), the context's
// error when the client went away, and other errors for failures.
func (s *Server) generate(ctx context.Context, req *genRequest, emit func(piece) error) (*genResult, error) {
	m := s.model
	ids := req.tokens
	if ids == nil {
		var err error
		if ids, err = s.promptTokens(req.prompt); err != nil {
			return nil, err
		}
	}
	if err := checkPrompt(ids, m.Net.Vocab(), m.Net.Context()); err != nil {
		return nil, err
	}
	if err := req.sampler.Validate(); err != nil {
		return nil, badRequest("", err.Error())
	}

	if !s.begin() {
		return nil, context.Canceled // the server is shutting down
	}
	defer s.inflight.Done()
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()

	release, err := s.queue.acquire(ctx)
	if errors.Is(err, errQueueFull) {
		s.metrics.rejected.Inc()
		return nil, &apiError{status: http.StatusTooManyRequests, kind: "rate_limit_error", code: "queue_full", retryAfter: 1,
			msg: fmt.Sprintf("the server is busy: %d requests are already waiting; retry later", s.cfg.QueueSize)}
	}
	if err != nil {
		return nil, err
	}
	defer release()
	queued := time.Since(req.arrived)

	// A stop string cancels the generation through gctx; a client that goes
	// away cancels ctx.
	gctx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	var (
		dec      = m.Tokenizer.NewDecoder()
		stops    = newStopMatcher(req.stop)
		split    = newSplitter(req)
		calls    *chat.ToolCallSplitter
		stopped  bool // a stop string matched
		writeErr error
		first    = true
	)
	if len(req.tools) > 0 && s.toolSyntax != nil {
		calls = chat.NewToolCallSplitter(s.toolSyntax, req.tools)
	}
	// answered marks the answer's first text or calls: the time to first token
	answered := func() {
		if first {
			first = false
			s.metrics.ttft.Observe(time.Since(req.arrived).Seconds())
		}
	}
	send := func(text string) {
		if text == "" || writeErr != nil {
			return
		}
		r, c := split.Add(text)
		if calls != nil {
			c = calls.Add(c)
		}
		if r == "" && c == "" {
			return
		}
		answered()
		if err := emit(piece{reasoning: r, content: c}); err != nil {
			writeErr = err
			stopGen()
		}
	}
	ereq := engine.Request{Prompt: ids, MaxTokens: req.maxTokens, EOG: m.Tokenizer.EOG(), Sampler: req.sampler.AsUserGave(),
		Constraint: req.constraint}
	out, err := s.session.Generate(gctx, ereq, func(t engine.Token) error {
		if stopped {
			return nil
		}
		text, hit := stops.add(dec.Add(t.ID))
		send(text)
		if hit {
			stopped = true
			stopGen()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("generation failed: %w", err)
	}
	res := &genResult{Result: out, queued: queued}
	s.metrics.promptTokens.Add(float64(out.PromptTokens))
	s.metrics.cachedTokens.Add(float64(out.Cached))
	s.metrics.generatedTokens.Add(float64(out.Generated))

	switch {
	case stopped:
		res.reason = "stop"
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case writeErr != nil:
		return nil, writeErr
	case out.StopReason == engine.StopEOS || out.StopReason == engine.StopSequence,
		out.StopReason == engine.StopConstraint: // the JSON object is whole
		res.reason = "stop"
	default:
		res.reason = "length"
	}
	if !stopped {
		send(stops.flush(dec.Flush()))
	}
	if writeErr != nil {
		return nil, writeErr
	}
	r, c := split.Flush()
	if calls != nil {
		c = calls.Add(c)
		rest, found := calls.Flush()
		c, res.toolCalls = c+rest, found
	}
	if r != "" || c != "" || len(res.toolCalls) > 0 {
		answered()
	}
	if r != "" || c != "" {
		if err := emit(piece{reasoning: r, content: c}); err != nil {
			return nil, err
		}
	}
	res.total = time.Since(req.arrived)
	if rate := res.DecodeRate(); rate > 0 {
		s.metrics.tokensPerSecond.Observe(rate)
	}
	return res, nil
}

// collect runs req to its end and returns the whole answer, for responses
// that are not streamed.
func (s *Server) collect(ctx context.Context, req *genRequest) (piece, *genResult, error) {
	var reasoning, content strings.Builder
	res, err := s.generate(ctx, req, func(p piece) error {
		reasoning.WriteString(p.reasoning)
		content.WriteString(p.content)
		return nil
	})
	return piece{reasoning: reasoning.String(), content: content.String()}, res, err
}

// splitter separates reasoning from the answer, or passes everything as
// the answer.
type splitter interface {
	Add(text string) (reasoning, answer string)
	Flush() (reasoning, answer string)
}

type noSplit struct{}

func (noSplit) Add(text string) (string, string) { return "", text }
func (noSplit) Flush() (string, string)          { return "", "" }

func newSplitter(req *genRequest) splitter {
	if req.rawReasoning {
		return noSplit{}
	}
	return chat.NewReasoningSplitter(req.prompt)
}

// stopMatcher finds stop strings in streamed text, holding back text that
// could be the start of one until the next piece decides it.
type stopMatcher struct {
	stops   []string
	pending string
}

func newStopMatcher(stops []string) *stopMatcher {
	var s []string
	for _, x := range stops {
		if x != "" {
			s = append(s, x)
		}
	}
	return &stopMatcher{stops: s}
}

// add takes the next text and returns what may be output, and whether a stop
// string ended the output (the text before it is returned; it and what
// follows are not).
func (m *stopMatcher) add(text string) (string, bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	m.pending += text
	cut := -1
	for _, s := range m.stops {
		if i := strings.Index(m.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out := m.pending[:cut]
		m.pending = ""
		return out, true
	}
	keep := 0
	for _, s := range m.stops {
		keep = max(keep, chat.PartialSuffix(m.pending, s))
	}
	out := m.pending[:len(m.pending)-keep]
	m.pending = m.pending[len(m.pending)-keep:]
	return out, false
}

// flush returns the held text at the end of the output, with tail.
func (m *stopMatcher) flush(tail string) string {
	out, hit := m.add(tail)
	if hit {
		return out
	}
	out += m.pending
	m.pending = ""
	return out
}

package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latent-ai/latent/backend"
)

// Why a generation ended (Result.StopReason).
const (
	StopEOS       = "eos"       // the model produced an end-of-generation token
	StopSequence  = "stop"      // the output ended with a stop sequence
	StopLength    = "length"    // MaxTokens were generated
	StopCancelled = "cancelled" // the context was cancelled
	StopContext   = "context"   // the model's context is full
	// StopConstraint: the request's Constraint is done (the output is
	// complete).
	StopConstraint = "constraint"
	// StopRefused: the request's Constraint allowed no token before it was
	// done.
	StopRefused = "refused"
)

// PrefillChunk is the most prompt tokens Generate gives the model in one
// call: a request is cancelled between calls (Forward takes no context).
// How many tokens one pass may take for memory's sake is the model's own
// bound (deepseek2 splits longer inputs itself).
const PrefillChunk = 512

// Request is one generation.
type Request struct {
	Prompt    []int32   // token ids, BOS included if the model wants one
	MaxTokens int       // tokens to generate at most; ≤ 0: until another stop
	Stop      [][]int32 // token sequences that end the output (not emitted)
	EOG       []int32   // end-of-generation ids (not emitted)
	Sampler   SamplerOptions
	// Constraint, when set, says which tokens may come next (structured
	// output): each step samples from the logits, and when the token is not
	// allowed, again with every token it does not allow removed. The output
	// ends when the constraint is done.
	Constraint Constraint
}

// Constraint limits what a generation may write next.
type Constraint interface {
	// Allow reports whether id may come next.
	Allow(id int32) bool
	// Accept moves past id, an allowed token that was generated.
	Accept(id int32)
	// Done reports whether the output is complete.
	Done() bool
}

// Masker is a Constraint that removes every token it does not allow from
// logits at once (setting them to -Inf), faster than asking token by token.
type Masker interface {
	Mask(logits []float32)
}

// sampleAllowed samples the next token from logits; with a constraint c, one
// c allows (sampled again from the allowed tokens alone when the first draw
// is not), which c then accepts. It reports false when c allows none.
func sampleAllowed(s *Sampler, c Constraint, logits []float32, history []int32) (int32, bool) {
	tok := s.Sample(logits, history)
	if c == nil {
		return tok, true
	}
	if !c.Allow(tok) {
		if mk, ok := c.(Masker); ok {
			mk.Mask(logits)
		} else {
			for id := range logits {
				if !c.Allow(int32(id)) {
					logits[id] = float32(math.Inf(-1))
				}
			}
		}
		if tok = s.Sample(logits, history); !c.Allow(tok) {
			return 0, false // every token was removed
		}
	}
	c.Accept(tok)
	return tok, true
}

// Token is one generated token, streamed once it is certain to be output:
// tokens that could begin a stop sequence are held back until they cannot.
type Token struct {
	ID int32
}

// Result describes a finished generation.
type Result struct {
	PromptTokens int
	// Cached counts the prompt's first tokens that were already in the
	// model's cache (see Session) and were not evaluated again.
	Cached int
	// Generated counts the sampled tokens, including an end-of-generation
	// token or stop sequence that ended the output without being emitted.
	Generated  int
	StopReason string // one of the Stop constants
	// PrefillDuration is the prompt's forward pass and the first token's
	// sampling (the time to the first token); DecodeDuration is the rest,
	// in which the other Generated−1 tokens were made.
	PrefillDuration, DecodeDuration time.Duration
}

// PromptRate is evaluated prompt tokens (those not taken from the cache)
// per second of prefill.
func (r *Result) PromptRate() float64 {
	return rate(r.PromptTokens-r.Cached, r.PrefillDuration)
}

// DecodeRate is generated tokens per second after the first one.
func (r *Result) DecodeRate() float64 {
	return rate(r.Generated-1, r.DecodeDuration)
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate prefills req.Prompt in passes of PrefillChunk tokens, from an
// empty cache, then samples and decodes one token at a time, passing each to emit as soon as
// it is known to be output, until an end-of-generation token, a stop
// sequence, MaxTokens, a full context or the cancellation of ctx.
//
// Stopping is not a failure: a cancelled ctx returns StopReason "cancelled"
// and a nil error, without emitting anything more (tokens held back for a
// possible stop sequence are dropped); the other reasons emit the held-back
// tokens that turned out not to be a stop sequence first. An error from emit
// ends the generation and is returned as it is.
func Generate(ctx context.Context, m Model, req Request, emit func(Token) error) (*Result, error) {
	res, _, err := generate(ctx, m, req, 0, emit)
	return res, err
}

// Truncater is a model whose cache can be cut back to a prefix (Generate
// reuses a common prefix; latent bench returns to its depth).
type Truncater interface {
	// Truncate keeps only the first n cached positions.
	Truncate(n int)
}

// generate is Generate keeping the first cached positions of the model's
// cache (m must be a Truncater unless they are all it holds) and
// prefilling only the rest of the prompt. It also returns the tokens that the cache holds
// afterwards, position by position (meaningless after an error).
func generate(ctx context.Context, m Model, req Request, cached int, emit func(Token) error) (*Result, []int32, error) {
	V, C := m.Vocab(), m.Context()
	if err := req.check(V, C); err != nil {
		return nil, nil, err
	}
	if cached < 0 || cached >= len(req.Prompt) {
		return nil, nil, fmt.Errorf("generate: %d cached tokens of a prompt of %d (at least one must be evaluated)", cached, len(req.Prompt))
	}
	s, err := NewSampler(req.Sampler)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{PromptTokens: len(req.Prompt), Cached: cached}
	if ctx.Err() != nil {
		res.StopReason = StopCancelled
		return res, nil, nil
	}

	// The history feeds the repetition penalty; it is sized for the most
	// tokens the context allows so that decoding does not reallocate it.
	most := C - len(req.Prompt) + 1
	if req.MaxTokens > 0 {
		most = min(most, req.MaxTokens)
	}
	history := make([]int32, len(req.Prompt), len(req.Prompt)+most)
	copy(history, req.Prompt)
	var held []int32 // generated, not yet emitted: the start of a stop sequence
	next := make([]int32, 1)

	start := time.Now()
	if t, ok := m.(Truncater); ok && cached > 0 {
		t.Truncate(cached)
	} else if cached == 0 {
		m.Reset()
	}
	// Plain greedy decoding asks a Greedy model for the argmax only; a
	// Pipelined one queues the pass over each token before the token is
	// looked at (ahead), so the device never waits for the host's checks.
	// A Drawing model draws sampled tokens the same way, with the
	// sampler's numbers.
	g, fast := m.(Greedy)
	fast = fast && req.Sampler.PlainGreedy() && req.Constraint == nil
	pipe, _ := m.(Pipelined)
	queue := func(toks []int32) (backend.Pending, error) { return pipe.StartArgmax(toks) }
	if d, ok := req.Sampler.Draw(); ok && req.Constraint == nil {
		if dm, ok := m.(Drawing); ok && dm.CanDraw() {
			fast, pipe = true, dm
			queue = func(toks []int32) (backend.Pending, error) {
				d.U = s.rng.Float64()
				return dm.StartDraw(toks, d)
			}
		}
	}
	if !fast {
		pipe = nil
	}
	var logits []float32
	var tok int32
	var ahead backend.Pending // the pass over tok, queued before tok was looked at
	forward := func(toks []int32) (err error) {
		switch {
		case ahead != nil: // toks is tok, already on its way
			tok, ahead = ahead.Wait(), nil
		case pipe != nil:
			var p backend.Pending
			if p, err = queue(toks); err == nil {
				tok = p.Wait()
			}
		case fast:
			tok, err = g.ForwardArgmax(toks)
		default:
			logits, err = m.Forward(toks, false)
		}
		return err
	}
	// discard drops a queued pass whose token turned out to end the output.
	discard := func() {
		if ahead != nil {
			ahead.Wait()
			ahead = nil
			pipe.Truncate(m.Position() - 1)
		}
	}
	defer discard()
	emitAll := func(toks []int32) error {
		for _, t := range toks {
			if err := emit(Token{ID: t}); err != nil {
				return err
			}
		}
		return nil
	}
	finish := func(reason string) (*Result, []int32, error) {
		discard()
		res.StopReason = reason
		if res.Generated == 0 {
			res.PrefillDuration = time.Since(start)
		} else {
			res.DecodeDuration = time.Since(start)
		}
		// The cache holds the prompt and every sampled token fed back.
		return res, history[:m.Position()], nil
	}
	// The prompt goes in passes of at most PrefillChunk tokens, so that a
	// cancelled request (a client gone) stops between them instead of
	// holding the model for the whole prompt.
	rest := req.Prompt[cached:]
	for ; len(rest) > PrefillChunk; rest = rest[PrefillChunk:] {
		if ctx.Err() != nil {
			return finish(StopCancelled)
		}
		if _, err := m.Forward(rest[:PrefillChunk], false); err != nil {
			return nil, nil, fmt.Errorf("prefill of %d tokens: %w", len(req.Prompt)-cached, err)
		}
	}
	if err := forward(rest); err != nil {
		return nil, nil, fmt.Errorf("prefill of %d tokens: %w", len(req.Prompt)-cached, err)
	}
	for {
		if ctx.Err() != nil {
			return finish(StopCancelled)
		}
		if !fast {
			var ok bool
			if tok, ok = sampleAllowed(s, req.Constraint, logits, history); !ok {
				return finish(StopRefused) // nothing may come
			}
		}
		history = append(history, tok)
		if res.Generated++; res.Generated == 1 {
			res.PrefillDuration = time.Since(start)
			start = time.Now()
		}
		full := m.Position() >= C // before a pass is queued ahead, which it does not count
		if pipe != nil && (req.MaxTokens <= 0 || res.Generated < req.MaxTokens) && !full {
			var err error
			if ahead, err = queue(nil); err != nil {
				return nil, nil, fmt.Errorf("decode step %d: %w", res.Generated, err)
			}
		}

		if slices.Contains(req.EOG, tok) {
			if err := emitAll(held); err != nil {
				return nil, nil, err
			}
			return finish(StopEOS)
		}
		held = append(held, tok)
		if n := matchStop(req.Stop, held); n > 0 {
			if err := emitAll(held[:len(held)-n]); err != nil {
				return nil, nil, err
			}
			return finish(StopSequence)
		}
		keep := partialStop(req.Stop, held)
		if err := emitAll(held[:len(held)-keep]); err != nil {
			return nil, nil, err
		}
		held = append(held[:0], held[len(held)-keep:]...)

		// the output is complete, or may not grow: what is held goes out
		reason := ""
		switch {
		case req.Constraint != nil && req.Constraint.Done():
			reason = StopConstraint
		case req.MaxTokens > 0 && res.Generated >= req.MaxTokens:
			reason = StopLength
		case full:
			reason = StopContext
		}
		if reason != "" {
			if err := emitAll(held); err != nil {
				return nil, nil, err
			}
			return finish(reason)
		}
		if ctx.Err() != nil {
			return finish(StopCancelled)
		}
		next[0] = tok
		if err := forward(next); err != nil {
			return nil, nil, fmt.Errorf("decode step %d: %w", res.Generated, err)
		}
	}
}

// check rejects what would fail or mislead only once generation is under
// way.
func (r *Request) check(vocab, context int) error {
	if err := CheckPrompt(r.Prompt, vocab, context, 0); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	for i, s := range r.Stop {
		if len(s) == 0 {
			return fmt.Errorf("generate: stop sequence %d is empty", i+1)
		}
	}
	return nil
}

// PromptError is a prompt that no generation can take: a mistake of
// whoever made the request rather than a failure of the model, which a
// server answers with 400.
type PromptError struct {
	// TooLong: more tokens than fit in the context, which a server reports
	// apart (OpenAI's context_length_exceeded). Otherwise the prompt is
	// empty or has a token outside the vocabulary.
	TooLong bool
	msg     string
}

func (e *PromptError) Error() string { return e.msg }

// CheckPrompt returns a *PromptError if a model of the given vocabulary and
// context cannot take prompt, else nil. reserve is how many positions the
// prompt must leave free in the context. Generate needs none: it samples
// the first token from the prompt's last position, so a prompt that fills
// the context still gets a one-token answer (StopContext).
func CheckPrompt(prompt []int32, vocab, context, reserve int) error {
	if len(prompt) == 0 {
		return &PromptError{msg: "the prompt is empty"}
	}
	if len(prompt)+reserve > context {
		return &PromptError{TooLong: true, msg: fmt.Sprintf("the prompt has %d tokens, more than fit in the context of %d", len(prompt), context)}
	}
	for _, t := range prompt {
		if t < 0 || int(t) >= vocab {
			return &PromptError{msg: fmt.Sprintf("prompt token %d is outside the vocabulary of %d", t, vocab)}
		}
	}
	return nil
}

// matchStop returns the length of the longest stop sequence that held ends
// with (the one starting earliest), or 0.
func matchStop(stops [][]int32, held []int32) int {
	n := 0
	for _, s := range stops {
		if len(s) > n && len(s) <= len(held) && slices.Equal(held[len(held)-len(s):], s) {
			n = len(s)
		}
	}
	return n
}

// partialStop returns the length of the longest tail of held that some stop
// sequence begins with (and is longer than), or 0: those tokens must wait.
func partialStop(stops [][]int32, held []int32) int {
	n := 0
	for _, s := range stops {
		for k := min(len(s)-1, len(held)); k > n; k-- {
			if slices.Equal(held[len(held)-k:], s[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

package engine

import "context"

// Session is one sequence kept in a model's cache across generations: a
// chat, whose every turn's prompt repeats the conversation so far. Each
// generation keeps the cached positions that the new prompt begins with and
// prefills only the rest. A Session must be the model's only user.
type Session struct {
	m      Model
	tokens []int32 // what the cache holds, position by position
}

// NewSession starts a session on m with an empty cache. A model that cannot
// truncate its cache (has no Truncate(n int) method) is prefilled in full
// every time unless the new prompt extends the cache exactly.
func NewSession(m Model) *Session {
	m.Reset()
	return &Session{m: m}
}

// Generate is Generate reusing the cached prefix that req.Prompt shares
// with what the session's cache holds (Result.Cached says how much).
func (s *Session) Generate(ctx context.Context, req Request, emit func(Token) error) (*Result, error) {
	if ctx.Err() != nil {
		return &Result{PromptTokens: len(req.Prompt), StopReason: StopCancelled}, nil
	}
	cached := s.Reusable(req.Prompt)
	res, tokens, err := generate(ctx, s.m, req, cached, emit)
	if err != nil {
		// A failed forward pass may have written part of the cache.
		s.Reset()
		return nil, err
	}
	s.tokens = append(s.tokens[:0], tokens...)
	return res, nil
}

// Reusable is how many of prompt's first tokens a generation would take
// from the cache: the common prefix, less one when it is the whole prompt
// (the last prompt token must be evaluated for its logits), or none when the
// cache cannot be cut back to it.
func (s *Session) Reusable(prompt []int32) int {
	if len(s.tokens) != s.m.Position() {
		return 0 // someone else moved the cache
	}
	n := 0
	for n < len(prompt) && n < len(s.tokens) && prompt[n] == s.tokens[n] {
		n++
	}
	if n == len(prompt) {
		n--
	}
	if _, ok := s.m.(Truncater); !ok && n < len(s.tokens) {
		return 0
	}
	return max(n, 0)
}

// Tokens returns what the cache holds (the session's last prompt and the
// generated tokens fed back); the caller must not change it.
func (s *Session) Tokens() []int32 { return s.tokens }

// Reset empties the cache.
func (s *Session) Reset() {
	s.m.Reset()
	s.tokens = s.tokens[:0]
}

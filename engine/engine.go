// Package engine drives a model: prefill and decode steps over its cache,
// sampling, stopping, and the streaming API the CLI and the server share.
package engine

import "github.com/latent-ai/latent/backend"

// Model is what the engine needs of a network: a batched forward pass over
// the next positions of one sequence, and control of its cache.
type Model interface {
	// Forward runs tokens at the next positions and returns their logits
	// (Vocab values per token; only the last token's unless all is set).
	// The logits may be the model's buffer: valid until the next Forward.
	Forward(tokens []int32, all bool) ([]float32, error)
	Vocab() int
	Context() int  // positions the cache holds
	Position() int // positions already filled
	Reset()
}

// Greedy is implemented by models that can pick the argmax of the last
// token's logits where they are computed (on a GPU: 4 bytes copied back per
// token instead of the vocabulary's logits). Generate uses it whenever the
// sampler's answer is the plain argmax (SamplerOptions.PlainGreedy).
type Greedy interface {
	// ForwardArgmax runs tokens like Forward and returns the index of the
	// last token's largest logit, the first on ties (backend.Argmax's rules).
	ForwardArgmax(tokens []int32) (int32, error)
}

// Pipelined is a Greedy model that can queue a pass before the host knows
// its token. Generate uses it for plain greedy decoding (and, through
// Drawing, for drawn tokens): it queues the pass over token N, then checks
// token N for the end of the output, then waits for token N+1; a queued
// pass that turns out not to be needed is waited for and cut off the cache
// (Truncate), so the output and the cache are those of one ForwardArgmax
// after another.
type Pipelined interface {
	Greedy
	// StartArgmax is ForwardArgmax returning once the pass is queued; the
	// answer comes from Wait. With tokens nil the pass is over one token,
	// the answer of the previous pass (a StartArgmax), wherever it is.
	StartArgmax(tokens []int32) (backend.Pending, error)
	Truncater
}

// Drawing is a Pipelined model that can also draw sampled tokens where its
// logits are (backend.Draw). Generate uses it for the sampler options a
// Draw expresses (top-k on, no repetition penalty): the engine's sampler
// still supplies each step's random number, so the tokens are those of
// sampling the same logits on the host, and only 4 bytes come back a token.
type Drawing interface {
	Pipelined
	// CanDraw reports whether StartDraw works (a backend may not draw).
	CanDraw() bool
	// StartDraw is StartArgmax with the Draw's pick instead of the argmax.
	StartDraw(tokens []int32, d backend.Draw) (backend.Pending, error)
}

package deepseek2

import (
	"fmt"

	"github.com/latent-ai/latent/backend"
)

// ErrContextFull is returned when a batch would run past the cache.
type ErrContextFull struct{ Have, Need, Context int }

func (e *ErrContextFull) Error() string {
	return fmt.Sprintf("context full: %d tokens cached + %d new > context of %d (raise --ctx)", e.Have, e.Need-e.Have, e.Context)
}

// acts are one pass's activations, T rows each, shared by every layer: a
// pass asks the backend for them once, so a decode step allocates nothing.
type acts struct {
	x      backend.Tensor // the residual stream [T, dim]
	h      backend.Tensor // a block's normalised input [T, dim]
	qa     backend.Tensor // [T, q_lora], with q_lora only
	q      backend.Tensor // [T, heads·(nope+rope)]
	kv     backend.Tensor // [c | k_pe] [T, kv_lora+rope]
	qkv    backend.Tensor // [q_a (or q) | c | k_pe] [T, …] of stacked weights, read through views
	o      backend.Tensor // attention output [T, heads·v]
	g, u   backend.Tensor // dense FFN [T, ff]
	moe    backend.Tensor // routed experts' sum [T, dim]
	sg, su backend.Tensor // shared experts [T, expert_ff·shared]
}

func (m *Model) newActs(T int) *acts {
	c, be := m.Config, m.be
	a := &m.acts
	*a = acts{
		x:  be.Tensor(T, c.Dim),
		h:  be.Tensor(T, c.Dim),
		q:  be.Tensor(T, c.Heads*(c.Nope+c.Rope)),
		kv: be.Tensor(T, c.CacheRow()),
		o:  be.Tensor(T, c.Heads*c.VHead),
	}
	if c.QLoRA > 0 {
		a.qa = be.Tensor(T, c.QLoRA)
	}
	if m.stacked { // the layers whose q_a (q) and kv_a share a type
		a.qkv = be.Tensor(T, c.firstQ()+c.CacheRow())
	}
	if m.dense {
		a.g, a.u = be.Tensor(T, c.FF), be.Tensor(T, c.FF)
	}
	if m.moe {
		a.moe = be.Tensor(T, c.Dim)
		if c.SharedExperts > 0 {
			a.sg, a.su = be.Tensor(T, c.ExpertFF*c.SharedExperts), be.Tensor(T, c.ExpertFF*c.SharedExperts)
		}
	}
	return a
}

// Forward runs tokens at the next positions through the network (batched
// passes of up to maxPass tokens: prefill for many, decode for one) and
// returns their logits, vocab values per token: every token's when all is
// set, else the last one's. The logits are the model's buffer: valid until
// the next Forward. After an error, Position says how far the input went
// (a failing pass moves nothing; the passes before it stay).
func (m *Model) Forward(tokens []int32, all bool) ([]float32, error) {
	last, err := m.lead(tokens, all)
	if err != nil {
		return nil, err
	}
	logits, _, err := m.pass(last, all, nil)
	if err != nil {
		return nil, err
	}
	V, done := m.Config.Vocab, len(tokens)-len(last)
	if !all {
		done = 0
	}
	n := done*V + logits.Rows()*logits.Cols()
	if cap(m.out) < n { // (lead made room for the leading passes' logits)
		m.out = make([]float32, n)
	}
	m.be.Read(logits, m.out[done*V:n])
	return m.out[:n], nil
}

// maxPass is the most tokens one pass takes. A pass's activations grow with
// its tokens (glm-4.7-flash's at 4608 tokens wanted more than an H200's 140
// GB), so a longer input goes in passes of maxPass, as llama.cpp's
// micro-batches do.
const maxPass = 512

// lead runs the passes of tokens but the last maxPass or fewer, which it
// returns; with all, their logits go to m.out. The whole input is checked
// first, so that a bad token or a full cache changes nothing.
func (m *Model) lead(tokens []int32, all bool) ([]int32, error) {
	if len(tokens) <= maxPass {
		return tokens, nil
	}
	if err := m.check(tokens); err != nil {
		return nil, err
	}
	V := m.Config.Vocab
	if all && cap(m.out) < len(tokens)*V {
		m.out = make([]float32, len(tokens)*V)
	}
	done := 0
	for ; len(tokens)-done > maxPass; done += maxPass {
		logits, _, err := m.pass(tokens[done:done+maxPass], all, nil)
		if err != nil {
			return nil, err
		}
		if all {
			m.be.Read(logits, m.out[done*V:(done+maxPass)*V])
		}
	}
	return tokens[done:], nil
}

// ForwardArgmax runs tokens like Forward and returns the index of the last
// token's largest logit, the first on ties (backend.Argmax's rules). The
// backend makes the choice where the logits are, and only the id comes back
// (4 bytes from a GPU instead of the vocabulary's logits).
func (m *Model) ForwardArgmax(tokens []int32) (int32, error) {
	p, err := m.StartArgmax(tokens)
	if err != nil {
		return 0, err
	}
	return p.Wait(), nil
}

// StartArgmax is ForwardArgmax returning as soon as the pass is queued:
// Wait gives the answer. With tokens nil the pass is over one token, the
// answer of the previous pass (which was a StartArgmax), taken where the
// backend computed it: a greedy decode queues step N+1 before it reads
// step N's token, so a GPU runs step after step while the host checks
// stop conditions one step behind.
func (m *Model) StartArgmax(tokens []int32) (backend.Pending, error) {
	return m.start(tokens, m.be.ArgmaxAsync)
}

// start queues a pass over tokens that ends in pick, whose answer the next
// pass may take as its token.
func (m *Model) start(tokens []int32, pick func(backend.Tensor) backend.Pending) (backend.Pending, error) {
	last, err := m.lead(tokens, false)
	if err != nil {
		return nil, err
	}
	_, p, err := m.pass(last, false, pick)
	if err != nil {
		return nil, err
	}
	m.chained = true
	return p, nil
}

// CanDraw reports whether the backend draws sampled tokens itself
// (backend.Drawer), so that StartDraw works.
func (m *Model) CanDraw() bool {
	_, ok := m.be.(backend.Drawer)
	return ok
}

// StartDraw is StartArgmax with a sampled pick (backend.Draw) made where
// the logits are; its answer feeds the next pass the same way.
func (m *Model) StartDraw(tokens []int32, d backend.Draw) (backend.Pending, error) {
	dr, ok := m.be.(backend.Drawer)
	if !ok {
		return nil, fmt.Errorf("forward: the %s backend cannot draw tokens", m.be.Name())
	}
	return m.start(tokens, func(logits backend.Tensor) backend.Pending { return dr.DrawAsync(logits, d) })
}

// pass records (or runs) the network over tokens (nil: the last
// StartArgmax's answer) and returns the logits tensor [T or 1, vocab],
// valid until the next pass, and what pick (if given) makes of it. A
// backend out of memory (backend.OutOfMemory, the one failure its
// operations raise rather than a bug) is the pass's error, and the model's
// position stays.
func (m *Model) pass(tokens []int32, all bool, pick func(backend.Tensor) backend.Pending) (logits backend.Tensor, p backend.Pending, err error) {
	defer func() {
		if r := recover(); r != nil {
			oom, ok := r.(backend.OutOfMemory)
			if !ok {
				panic(r)
			}
			logits, p, err = nil, nil, fmt.Errorf("forward pass of %d tokens: %w", len(tokens), oom)
		}
	}()
	T, err := m.begin(tokens)
	if err != nil {
		return nil, nil, err
	}
	a := m.newActs(T)
	m.be.Embed(a.x, m.embd) // x = token_embd[tokens] [T, dim]
	for l := range m.layers {
		m.attention(l, a)
		m.feedForward(l, a)
	}
	logits = m.logits(a, T, all)
	if pick != nil {
		p = pick(logits)
	}
	m.pos += T
	return logits, p, nil
}

// begin checks the pass's tokens against the vocabulary and the cache and
// starts the backend's pass at the next positions; it returns the number of
// tokens T (1 when tokens is nil: the last StartArgmax's answer).
func (m *Model) begin(tokens []int32) (int, error) {
	fed := tokens == nil
	T := len(tokens)
	if fed {
		if !m.chained {
			return 0, fmt.Errorf("forward: no token given and no StartArgmax answer to take")
		}
		T = 1
	}
	if T == 0 {
		return 0, fmt.Errorf("forward: no tokens")
	}
	if err := m.check(tokens); err != nil {
		return 0, err
	}
	if cap(m.posBuf) < T {
		m.posBuf = make([]int32, T)
	}
	pos := m.posBuf[:T]
	for i := range pos {
		pos[i] = int32(m.pos + i)
	}
	if fed {
		m.be.BeginNext(pos[0])
	} else {
		m.be.Begin(tokens, pos)
	}
	m.chained = false
	return T, nil
}

// check refuses tokens that the cache has no room for after the model's
// position, or that are outside the vocabulary (nil: one token, the last
// StartArgmax's answer).
func (m *Model) check(tokens []int32) error {
	if T := max(len(tokens), 1); m.pos+T > m.ctx {
		return &ErrContextFull{Have: m.pos, Need: m.pos + T, Context: m.ctx}
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= m.Config.Vocab {
			return fmt.Errorf("token %d is outside the vocabulary of %d", t, m.Config.Vocab)
		}
	}
	return nil
}

// logits is output · rms(x, output_norm) [T or 1, vocab] (notes §3 step 11):
// every token's row when all is set, else the last one's.
func (m *Model) logits(a *acts, T int, all bool) backend.Tensor {
	be := m.be
	x, h := a.x, a.h
	if !all {
		x, h = be.RowsOf(x, T-1, 1), be.RowsOf(h, T-1, 1)
	}
	be.RMSNorm(h, x, m.outNorm, float32(m.Config.RMSEps))
	logits := be.Tensor(x.Rows(), m.Config.Vocab)
	be.MatMul(logits, m.output, h)
	return logits
}

// attention adds layer l's multi-head latent attention to x (notes §3, 1–8).
func (m *Model) attention(l int, a *acts) {
	c, be, ly := m.Config, m.be, &m.layers[l]
	eps := float32(c.RMSEps)

	be.RMSNorm(a.h, a.x, ly.attnNorm, eps) // 1. h = rms(x, attn_norm)

	// 2–3. h's first q product (q_a with q_lora, else q itself) and
	// [c | k_pe] [T, kv_lora+rope]: one product where the weights are stacked
	first, kv := a.q, a.kv
	if c.QLoRA > 0 {
		first = a.qa
	}
	if ly.qKV != nil {
		be.MatMul(a.qkv, ly.qKV, a.h)
		first, kv = be.View(a.qkv, 0, c.firstQ()), be.View(a.qkv, c.firstQ(), c.CacheRow())
	} else {
		be.MatMul(first, ly.qA, a.h)
	}
	q := first // [T, heads·(nope+rope)]
	if c.QLoRA > 0 {
		be.RMSNorm(first, first, ly.qANorm, eps)
		q = a.q
		be.MatMul(q, ly.qB, first)
	}
	if ly.qKV == nil {
		be.MatMul(kv, ly.kvA, a.h)
	}
	latent := be.View(kv, 0, c.KVLoRA)
	be.RMSNorm(latent, latent, ly.kvANorm, eps)

	be.RoPE(q, c.Nope+c.Rope, c.Nope, c.Rope, &m.rope) // 4. RoPE on q_pe and k_pe
	be.RoPE(kv, c.CacheRow(), c.KVLoRA, c.Rope, &m.rope)

	be.CacheStore(m.cache, l, kv) // 5. one cache row per position

	be.Attention(a.o, q, ly.kB, ly.vB, m.cache, l, m.scale) // 6–8. absorbed attention [T, heads·v]
	be.MatMulAdd(a.x, ly.out, a.o)
}

// feedForward adds layer l's dense or mixture-of-experts FFN to x (steps 9–10).
func (m *Model) feedForward(l int, a *acts) {
	c, be, ly := m.Config, m.be, &m.layers[l]
	be.RMSNorm(a.h, a.x, ly.ffnNorm, float32(c.RMSEps))
	if ly.moe == nil {
		m.denseFFN(a.x, a.h, ly.gate, ly.up, ly.down, a.g, a.u)
		return
	}
	// Σ_e w_e·expert_e(h) + shared(h), then the residual
	be.MoE(a.moe, a.h, ly.moe, &m.routing)
	if ly.shGate != nil {
		m.denseFFN(a.moe, a.h, ly.shGate, ly.shUp, ly.shDown, a.sg, a.su)
	}
	be.Add(a.x, a.moe)
}

// denseFFN adds down(silu(gate·h) · up·h) to x, through g and u [T, ff].
func (m *Model) denseFFN(x, h backend.Tensor, gate, up, down backend.Weight, g, u backend.Tensor) {
	be := m.be
	be.MatMul(g, gate, h)
	be.MatMul(u, up, h)
	be.SwiGLU(g, g, u)
	be.MatMulAdd(x, down, g)
}

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

// Forward runs tokens at the next positions through the network (one batched
// pass: prefill for many tokens, decode for one) and returns their logits,
// vocab values per token: every token's when all is set, else the last one's.
func (m *Model) Forward(tokens []int32, all bool) ([]float32, error) {
	c, be := m.Config, m.be
	T := len(tokens)
	if T == 0 {
		return nil, fmt.Errorf("forward: no tokens")
	}
	if m.pos+T > m.ctx {
		return nil, &ErrContextFull{Have: m.pos, Need: m.pos + T, Context: m.ctx}
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= c.Vocab {
			return nil, fmt.Errorf("token %d is outside the vocabulary of %d", t, c.Vocab)
		}
	}
	pos := make([]int32, T)
	for i := range pos {
		pos[i] = int32(m.pos + i)
	}

	x := be.Tensor(T, c.Dim) // the residual stream [T, dim]
	be.Embed(x, m.embd, tokens)
	for l := range m.layers {
		m.attention(l, x, pos)
		m.feedForward(l, x)
	}
	m.pos += T

	if !all {
		x = be.RowsOf(x, T-1, 1)
	}
	h := be.Tensor(x.Rows(), c.Dim)
	be.RMSNorm(h, x, m.outNorm, float32(c.RMSEps))
	logits := be.Tensor(x.Rows(), c.Vocab) // [T or 1, vocab]
	be.MatMul(logits, m.output, h)
	out := make([]float32, x.Rows()*c.Vocab)
	be.Read(logits, out)
	return out, nil
}

// attention adds layer l's multi-head latent attention to x (notes §3, 1–8).
func (m *Model) attention(l int, x backend.Tensor, pos []int32) {
	c, be, ly := m.Config, m.be, &m.layers[l]
	T, eps := x.Rows(), float32(c.RMSEps)

	h := be.Tensor(T, c.Dim) // 1. h = rms(x, attn_norm)
	be.RMSNorm(h, x, ly.attnNorm, eps)

	q := be.Tensor(T, c.Heads*(c.Nope+c.Rope)) // 2. q [T, heads·(nope+rope)]
	if ly.qA != nil {
		qa := be.Tensor(T, c.QLoRA)
		be.MatMul(qa, ly.qA, h)
		be.RMSNorm(qa, qa, ly.qANorm, eps)
		be.MatMul(q, ly.qB, qa)
	} else {
		be.MatMul(q, ly.q, h)
	}

	kv := be.Tensor(T, c.CacheRow()) // 3. [c | k_pe] [T, kv_lora+rope]
	be.MatMul(kv, ly.kvA, h)
	latent := be.View(kv, 0, c.KVLoRA)
	be.RMSNorm(latent, latent, ly.kvANorm, eps)

	be.RoPE(q, c.Nope+c.Rope, c.Nope, c.Rope, pos, &m.rope) // 4. RoPE on q_pe and k_pe
	be.RoPE(kv, c.CacheRow(), c.KVLoRA, c.Rope, pos, &m.rope)

	be.CacheStore(m.cache, l, pos, kv) // 5. one cache row per position

	o := be.Tensor(T, c.Heads*c.VHead) // 6–8. absorbed attention [T, heads·v]
	be.Attention(o, q, ly.kB, ly.vB, m.cache, l, pos, m.scale)
	be.MatMulAdd(x, ly.out, o)
}

// feedForward adds layer l's dense or mixture-of-experts FFN to x (steps 9–10).
func (m *Model) feedForward(l int, x backend.Tensor) {
	c, be, ly := m.Config, m.be, &m.layers[l]
	T := x.Rows()
	h := be.Tensor(T, c.Dim)
	be.RMSNorm(h, x, ly.ffnNorm, float32(c.RMSEps))
	if ly.moe == nil {
		m.denseFFN(x, h, ly.gate, ly.up, ly.down, c.FF)
		return
	}
	moe := be.Tensor(T, c.Dim) // Σ_e w_e·expert_e(h) + shared(h), then the residual
	be.MoE(moe, h, ly.moe, &backend.Routing{
		Sigmoid: c.Gating == GatingSigmoid, Used: c.ExpertsUsed, Norm: c.ExpertNorm, Scale: float32(c.ExpertScale)})
	if ly.shGate != nil {
		m.denseFFN(moe, h, ly.shGate, ly.shUp, ly.shDown, c.ExpertFF*c.SharedExperts)
	}
	be.Add(x, moe)
}

// denseFFN adds down(silu(gate·h) · up·h) to x.
func (m *Model) denseFFN(x, h backend.Tensor, gate, up, down backend.Weight, ff int) {
	be, T := m.be, x.Rows()
	g, u := be.Tensor(T, ff), be.Tensor(T, ff)
	be.MatMul(g, gate, h)
	be.MatMul(u, up, h)
	be.SwiGLU(g, g, u)
	be.MatMulAdd(x, down, g)
}

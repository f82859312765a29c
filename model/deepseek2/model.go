package deepseek2

import (
	"fmt"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/gguf"
)

// Model is a loaded deepseek2 network with its latent cache. It is not safe
// for concurrent use: one sequence at a time.
type Model struct {
	Config *Config
	be     backend.Backend

	embd, outNorm, output backend.Weight
	layers                []layer

	cache   backend.Cache
	ctx     int // positions the cache holds
	pos     int // the next position to fill
	rope    backend.Rope
	scale   float32
	routing backend.Routing
	dense   bool // some layer has a dense FFN
	moe     bool // some layer has routed experts
	stacked bool // some layer has q_a (q) stacked on kv_a

	// Reused by every Forward, so that a decode step allocates nothing.
	acts    acts
	posBuf  []int32
	out     []float32 // the logits Forward returns
	chained bool      // the last pass was a StartArgmax: its answer can feed the next
}

// ErrContextTrained is returned when the context asked for is more than the
// model was trained for: positions past it are not what the model learned,
// and an unbounded --ctx would allocate a cache of any size.
type ErrContextTrained struct{ Asked, Trained int }

func (e *ErrContextTrained) Error() string {
	return fmt.Sprintf("a context of %d positions is more than the model's trained context of %d", e.Asked, e.Trained)
}

// Load reads the file's configuration and binds its network (see New).
func Load(f *gguf.File, be backend.Backend, ctx int) (*Model, error) {
	c, err := ConfigFrom(f)
	if err != nil {
		return nil, err
	}
	return New(f, c, be, ctx, nil)
}

// New binds the tensors of f, whose configuration c is, on be and allocates
// the latent cache for ctx positions (0: the smaller of the trained context
// and 4096). A negative ctx, or one past the trained context, is an error.
// progress, when set, is called after each tensor the backend adopts with
// the bytes of the file's tensors adopted so far.
func New(f *gguf.File, c *Config, be backend.Backend, ctx int, progress func(done int64)) (*Model, error) {
	switch {
	case ctx < 0:
		return nil, fmt.Errorf("context %d is negative (0: the smaller of the trained context and 4096)", ctx)
	case ctx == 0:
		ctx = min(c.ContextLength, 4096)
	case ctx > c.ContextLength:
		return nil, fmt.Errorf("%s: %w", f.Name, &ErrContextTrained{Asked: ctx, Trained: c.ContextLength})
	}
	if p, ok := be.(backend.Preparer); ok {
		// a file the dry run refuses, the real one refuses with the same error
		if shapes, err := shapesOf(f, c, be); err == nil {
			p.Prepare(shapes, backend.CacheShape{Layers: c.DecoderLayers(), Positions: ctx, Width: c.CacheRow()})
		}
	}
	b := &binder{f: f, be: be, progress: progress}
	m := &Model{Config: c, be: be, ctx: ctx, rope: ropeOf(c), scale: attnScale(c)}
	if err := m.bind(b); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	for l := range m.layers {
		if m.layers[l].moe != nil {
			m.moe = true
		} else {
			m.dense = true
		}
		m.stacked = m.stacked || m.layers[l].qKV != nil
	}
	m.routing = backend.Routing{Sigmoid: c.Gating == GatingSigmoid, Used: c.ExpertsUsed, Norm: c.ExpertNorm, Scale: float32(c.ExpertScale)}
	var err error
	if m.cache, err = be.Cache(c.DecoderLayers(), ctx, c.CacheRow()); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if p, ok := be.(backend.Planner); ok {
		if err := p.Plan(m.planStep); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return m, nil
}

// bind hands every weight of the network to the backend through b.
func (m *Model) bind(b *binder) error {
	c := m.Config
	m.embd = b.get("token_embd.weight", c.Dim, c.Vocab)
	m.outNorm = b.get("output_norm.weight", c.Dim)
	m.output = b.opt("output.weight", c.Dim, c.Vocab)
	if m.output == nil {
		m.output = m.embd // tied embeddings
	}
	for l := 0; l < c.DecoderLayers() && b.err == nil; l++ {
		m.layers = append(m.layers, b.bindLayer(c, l))
	}
	return b.err
}

// shapesOf are the weights New will hand be for f, in order, without their
// data: a dry run of the binding (backend.Preparer).
func shapesOf(f *gguf.File, c *Config, be backend.Backend) ([]backend.WeightShape, error) {
	var shapes []backend.WeightShape
	dry := &Model{Config: c}
	err := dry.bind(&binder{f: f, be: be, shapes: &shapes})
	return shapes, err
}

// planStep records a decode step for a backend.Planner (a pass over one
// token at position 0 that nothing reads, so it never runs) and leaves the
// sequence as it was.
func (m *Model) planStep() error {
	pos, chained := m.pos, m.chained
	defer func() { m.pos, m.chained = pos, chained }()
	_, _, err := m.pass([]int32{0}, false, nil)
	return err
}

// Context is the number of positions the cache holds.
func (m *Model) Context() int { return m.ctx }

// Position is the number of tokens already in the cache.
func (m *Model) Position() int { return m.pos }

// Reset forgets the sequence.
func (m *Model) Reset() { m.pos, m.chained = 0, false }

// Truncate keeps only the first n cached positions (to reuse a common prefix).
func (m *Model) Truncate(n int) {
	if n < m.pos {
		m.pos = max(n, 0)
	}
}

// Vocab is the number of logits per token.
func (m *Model) Vocab() int { return m.Config.Vocab }

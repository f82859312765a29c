// Package backend is the boundary between a model's forward pass and the
// hardware that runs it. The model is written once against the small set of
// fused operations in Ops; the CPU backend runs each directly, the CUDA backend
// records a whole decode step and replays it.
package backend

import "github.com/latent-ai/latent/quant"

// Tensor is an activation buffer on the backend: Rows × Cols float32, row
// major. A row is one token of a batch. Views share storage with their parent.
// Tensors and views are scratch of one forward pass: valid until the next Begin.
type Tensor interface {
	Rows() int
	Cols() int
}

// Weight is a model parameter held by the backend in its file encoding.
// Dims are innermost first, as in GGUF: Dims[0] is the row length.
type Weight interface {
	Name() string
	Type() quant.Type
	Dims() []uint64
}

// Cache is the latent attention cache: for every layer and position one row
// of Width values (kv_lora latent followed by the rope key).
type Cache interface {
	Layers() int
	Positions() int
	Width() int
}

// Rope describes rotary position embedding over adjacent pairs (x[2i], x[2i+1]).
// Freqs[i] is the angle per position of pair i, YaRN already folded in.
type Rope struct {
	Freqs []float32

	// The same rotation as ggml_rope_ext's parameters, for backends that
	// compute the angles as ggml does (float32, bit for bit): the base, YaRN's
	// frequency scale (1/factor), extrapolation mix (0 without YaRN), the
	// correction range of pair indices, and the magnitude factor on cos/sin.
	Base, FreqScale, ExtFactor, AttnFactor float32
	Corr                                   [2]float32
}

// Routing describes how a mixture-of-experts layer scores and weights experts.
type Routing struct {
	Sigmoid bool    // sigmoid scores; otherwise softmax
	Used    int     // experts picked per token
	Norm    bool    // divide the picked weights by their sum
	Scale   float32 // multiply the picked weights
}

// MoE is one mixture-of-experts layer's weights. Gate/Up/Down hold every
// routed expert ({in, out, experts}); Bias, when present, only shifts selection.
type MoE struct {
	Router Weight // {dim, experts}
	Bias   Weight // {experts} or nil
	Gate   Weight // {dim, ff, experts}
	Up     Weight
	Down   Weight // {ff, dim, experts}
}

// ExpertRows says where expert e's matrices lie: its gate rows start at row
// e·stride of Gate and its up rows at row e·stride+upOff of up. Up is nil
// when the file merges them (ffn_gate_up_exps {dim, 2·ff, experts}); then
// Gate is up too and each expert's ff gate rows precede its ff up rows.
func (m *MoE) ExpertRows() (up Weight, ff, stride, upOff int) {
	ff = int(m.Gate.Dims()[1])
	if m.Up != nil {
		return m.Up, ff, ff, 0
	}
	return m.Gate, ff / 2, ff, ff / 2
}

// OutOfMemory is what a backend panics with when it cannot get memory for
// a pass's activations (the operations return no errors: their other
// failures are bugs); the model's pass returns it as its error.
type OutOfMemory struct{ Err error }

func (e OutOfMemory) Error() string { return e.Err.Error() }
func (e OutOfMemory) Unwrap() error { return e.Err }

// Backend allocates and runs.
//
// A forward pass is Begin, then the operations on Tensors from Tensor. The
// weights and the cache live as long as the backend; a pass's tensors are
// recycled at the next Begin, so a steady decode step allocates nothing and
// the same sequence of calls can be recorded once and replayed.
type Backend interface {
	Name() string
	// Weight adopts a parameter. data is the tensor's bytes in the model file
	// (or bytes the model made at load) and stays valid for the backend's
	// life (the file is memory-mapped).
	Weight(name string, typ quant.Type, dims []uint64, data []byte) (Weight, error)
	// Begin starts a forward pass over len(tokens) tokens, token i at
	// position pos[i] (len(pos) = len(tokens)). The backend copies both to
	// where its operations read them (Embed, RoPE, CacheStore, Attention), so
	// the caller may reuse the slices, and recycles the previous pass's tensors.
	Begin(tokens, pos []int32)
	// Tensor is a rows × cols activation buffer from the pass's scratch: its
	// contents are undefined until an operation writes it, and it is valid
	// until the next Begin.
	Tensor(rows, cols int) Tensor
	// Cache allocates the latent cache once, for the whole context.
	Cache(layers, positions, width int) (Cache, error)
	// Read copies a tensor out to host memory (len(dst) = Rows·Cols).
	Read(t Tensor, dst []float32)
	// Argmax sets dst[r] to the index of the largest value of row r of t
	// (len(dst) ≥ Rows), the first on ties, where the values are: greedy
	// decoding copies back one token id instead of the vocabulary's logits.
	// NaN is never picked over a number, except that a row whose first
	// value is NaN gives 0; a row of NaN and -Inf gives 0 (Argmax's
	// rules, a plain left-to-right scan).
	Argmax(t Tensor, dst []int32)
	// ArgmaxAsync is Argmax of t's one row (Rows = 1) without waiting for
	// it: the pass is queued and returns at once, and the answer comes back
	// through Wait. The answer also stays where the backend keeps the next
	// pass's token, for BeginNext: a greedy decode queues step N+1 before
	// the host has seen step N's token, so a GPU never waits for the host.
	// Every Pending is waited for; at most MaxPending are unanswered at once.
	ArgmaxAsync(t Tensor) Pending
	// BeginNext is Begin of one token at position pos whose id is the
	// answer of the last pass, which ended in ArgmaxAsync; it may not be
	// known to the host yet.
	BeginNext(pos int32)
	Ops
	Close() error
}

// Draw is a sampled pick from a row of logits: the stages of the engine's
// sampler that a backend can run where the logits are. It keeps the TopK
// largest values (the lower index first on ties, NaN never), then those at
// least the largest + LnMinP, then the shortest run of them whose
// share of exp(logit − largest) over the TopK reaches TopP, and draws one
// with probability ∝ exp((logit − largest)·InvTemp), walking U times their
// sum. Sums run in the candidates' order, most likely first, as the
// engine's sampler does, so both pick the same token for the same U (unless
// U falls within rounding of a boundary: a device's exp may differ from
// Go's in the last bit).
type Draw struct {
	TopK    int     // 1 to MaxDrawTopK
	TopP    float32 // in (0, 1); otherwise off
	LnMinP  float32 // ln(min_p): keep logits ≥ largest + LnMinP; -Inf turns it off
	InvTemp float64 // 1 / temperature
	U       float64 // the draw's uniform number in [0, 1)
}

// MaxDrawTopK bounds Draw.TopK.
const MaxDrawTopK = 256

// Drawer is a Backend that can draw sampled tokens where the logits are.
type Drawer interface {
	// DrawAsync is ArgmaxAsync with the Draw's pick instead of the
	// argmax; its answer feeds BeginNext the same way.
	DrawAsync(t Tensor, d Draw) Pending
}

// Stacker is a Backend for which one product over two weights stacked (the
// first's rows, then the second's, one type, one width) costs less than
// the two products apart. On a GPU each product is a link of a few µs in
// the decode step's chain of launches; the model stacks q_a (or q) on
// kv_a, which read the same normalised input.
type Stacker interface {
	// StackedWeight is Weight over the parts' rows one after another (each
	// part whole rows of dims[0] values of typ, all parts together the
	// rows dims describes), without joining the parts on the host first.
	StackedWeight(name string, typ quant.Type, dims []uint64, parts ...[]byte) (Weight, error)
}

// Preparer is a Backend that starts work for a model before its weights
// arrive: the CUDA backend compiles its kernels, which are specialised for
// the model's shapes, beside the upload instead of after it. A model calls
// Prepare once, before its first Weight, with every weight it will hand
// over (in order, as Weight and StackedWeight will get them) and the cache
// it will ask for. It is a hint: the load is correct whatever it was told.
type Preparer interface {
	Prepare(weights []WeightShape, cache CacheShape)
}

// WeightShape is a weight as Weight will get it, without its data.
type WeightShape struct {
	Name string
	Type quant.Type
	Dims []uint64
}

// CacheShape is what Cache will be asked for.
type CacheShape struct{ Layers, Positions, Width int }

// Pending is an ArgmaxAsync or DrawAsync answer that may not be computed yet.
type Pending interface {
	// Wait blocks until the answer is known and returns it; call it once.
	Wait() int32
}

// MaxPending bounds the ArgmaxAsync answers not yet waited for.
const MaxPending = 16

// Ops are the fused operations a forward pass is made of. Unless said
// otherwise dst and the sources have the same number of rows, one per token.
type Ops interface {
	// View is columns [col, col+cols) of t, sharing storage (valid until the
	// next Begin, like t).
	View(t Tensor, col, cols int) Tensor
	// RowsOf is rows [row, row+rows) of t, sharing storage.
	RowsOf(t Tensor, row, rows int) Tensor
	// Embed sets dst[i] to row tokens[i] of table {dim, vocab}, for the
	// pass's tokens.
	Embed(dst Tensor, table Weight)
	// RMSNorm sets dst = src / sqrt(mean(src²) + eps) · w, row by row.
	RMSNorm(dst, src Tensor, w Weight, eps float32)
	// MatMul sets dst = src · Wᵀ for W {in, out}: dst[t][o] = Σ_i W[o][i]·src[t][i].
	MatMul(dst Tensor, w Weight, src Tensor)
	// MatMulAdd adds src · Wᵀ into dst (the residual connection, fused).
	MatMulAdd(dst Tensor, w Weight, src Tensor)
	// RoPE rotates, in every head of width stride, the n values from column
	// off, token t at the pass's position pos[t].
	RoPE(t Tensor, stride, off, n int, r *Rope)
	// CacheStore writes src[t] (Width values) as layer's cache row at the
	// pass's position pos[t].
	CacheStore(c Cache, layer int, src Tensor)
	// Attention is absorbed multi-head latent attention (notes §3 steps 6–8).
	// q holds per head [q_nope | q_pe] (RoPE applied); kb {nope, kv_lora,
	// heads} absorbs q_nope into the latent space; each token t attends to
	// layer's cache rows 0..pos[t] (the pass's positions) with
	// softmax(scale · [q_lat | q_pe]·row); the weighted sum of the rows'
	// latents goes through vb {kv_lora, v, heads} into dst, heads·v values
	// per token.
	Attention(dst, q Tensor, kb, vb Weight, c Cache, layer int, scale float32)
	// SwiGLU sets dst = silu(gate) · up.
	SwiGLU(dst, gate, up Tensor)
	// Add sets dst += src.
	Add(dst, src Tensor)
	// MoE routes each token of h to its experts and sets dst to the sum of
	// their weighted outputs: scores, top-k, gate/up/SiLU and down in one
	// operation. Experts are summed in order of selection, as ggml does.
	MoE(dst, h Tensor, w *MoE, r *Routing)
}

// Planner is a Backend that compiles its kernels for the model at load,
// once the model has shown it a decode step: Plan calls step, which records
// one one-token forward pass that never runs (Begin and the pass's
// operations, nothing read), so that the load waits only for the kernels a
// decode step launches and those any pass may need. A model calls Plan
// once, after Cache.
type Planner interface {
	Plan(step func() error) error
}

// Compiler is a Backend that compiles some of its kernels in the
// background after load; WaitCompiles returns once they are done, so that
// what is timed next holds no compile.
type Compiler interface {
	WaitCompiles()
}

// Counter is implemented by backends that count the operations they run
// (kernel launches on a GPU, operations on the CPU), for `latent bench`.
type Counter interface {
	// Launches is the number of operations run since the backend started.
	Launches() uint64
}

// Argmax is the index of x's largest value, the first on ties: a plain
// left-to-right scan that moves only on a strictly larger value, so NaN is
// never picked over a number, except that a leading NaN keeps index 0. It is
// the rule of every backend's Argmax, and greedy decoding's on the host.
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

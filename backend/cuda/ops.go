package cuda

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

// Operations record kernel launches; nothing runs until the pass's result
// is read. Fusions happen while recording; the first three:
//   - RMSNorm is lazy: its launch is recorded but skipped unless something
//     other than a matrix product reads its output; a product reading it
//     normalises its input itself while rounding it to 8-bit blocks.
//   - An input rounded for one product is reused by the next product of the
//     same input (q_a and kv_a, gate and up) until it is written.
//   - MatMul(g), MatMul(u), SwiGLU(g, g, u) become one kernel that computes
//     both rows and writes silu(g)·u.

// fastTypes have integer-dot (mmvq) kernels; the others take the generic
// dequantizing kernels on activations rounded in float.
var fastTypes = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true}

func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// span is the byte range a tensor covers.
type span struct{ lo, hi uintptr }

func spanOf(t *tensor) span {
	if t.rows == 0 || t.cols == 0 {
		return span{t.ptr, t.ptr}
	}
	return span{t.ptr, t.ptr + uintptr(4*((t.rows-1)*t.stride+t.cols))}
}

func (s span) overlaps(o span) bool { return s.lo < o.hi && o.lo < s.hi }

// pendingNorm is an RMSNorm whose launch (index launch) is skipped so far.
type pendingNorm struct {
	dst, src *tensor
	w        uintptr
	eps      float32
	launch   int
	srcDirty bool // src was written since: the recorded launch must run
	flushed  bool // its launch was already issued (skipped)
}

// pendingRope is a RoPE whose launch is skipped so far: attention rotates
// q_pe itself, and the cache store rotates k_pe (with the latent's norm).
type pendingRope struct {
	t              *tensor
	launch         int
	freqs          uintptr
	stride, off, n int
}

// ropeSpan is what a RoPE touches: for one token and one head, only its
// columns (so the latent's lazy norm beside k_pe survives).
func ropeSpan(x *tensor, stride, off, n int) span {
	if x.rows == 1 && stride == x.cols {
		return span{x.ptr + uintptr(4*off), x.ptr + uintptr(4*(off+n))}
	}
	return spanOf(x)
}

// input describes a product's activations: rows × S segments of L floats
// (segment s of row r at src + r·rs + s·segStride), RMS-normalised first
// when norm is set.
type input struct {
	src       uintptr
	rs        int64
	rows, S   int
	L         int
	segStride int64
	norm      uintptr
	eps       float32
	srcSpan   span
}

// qact is an input rounded to 8-bit blocks: row R's quants at q + R·L,
// scales at d + R·(L/block), sums of 16 at bs + R·(L/16).
type qact struct{ q, d, bs uintptr }

type quantEntry struct {
	in   input
	mode int
	out  qact
	fout fact
}

// fact is an input rounded in float by prep, or the source itself: row R
// at ptr + R·stride floats.
type fact struct {
	ptr    uintptr
	stride int64
}

func (b *Backend) resetPass() {
	b.pendStore, b.rawKV = nil, nil
	b.pending = b.pending[:0]
	b.pendRope = b.pendRope[:0]
	b.qcache = b.qcache[:0]
}

// reads notes a read of t by an operation that cannot normalise on its
// own: lazy norms writing t are materialised.
func (b *Backend) reads(t *tensor) { b.readsSpan(spanOf(t)) }

// settleRopes runs, where they were recorded, the lazy RoPEs touching s.
func (b *Backend) settleRopes(s span) {
	for i := 0; i < len(b.pendRope); i++ {
		r := b.pendRope[i]
		if ropeSpan(r.t, r.stride, r.off, r.n).overlaps(s) {
			b.launches[r.launch].skip = false
			b.pendRope = append(b.pendRope[:i], b.pendRope[i+1:]...)
			i--
		}
	}
}

func (b *Backend) readsSpan(s span) {
	b.settleKV(s, true)
	b.settleRopes(s)
	for i := 0; i < len(b.pending); i++ {
		p := b.pending[i]
		if spanOf(p.dst).overlaps(s) {
			b.materialize(p)
			b.pending = append(b.pending[:i], b.pending[i+1:]...)
			i--
		}
	}
}

func (b *Backend) materialize(p *pendingNorm) {
	switch {
	case !p.srcDirty:
		b.recordNorm(p.dst, p.src, p.w, p.eps)
	case !p.flushed:
		b.launches[p.launch].skip = false
	default:
		panic("cuda: internal: a lazy norm's input changed after its pass was flushed")
	}
}

// writes notes that t is written: lazy norms into t are dropped, those
// reading t must run where they were recorded, rounded copies of t expire.
func (b *Backend) writes(t *tensor) { b.writesSpan(spanOf(t)) }

func (b *Backend) writesSpan(s span) {
	b.settleKV(s, false)
	b.settleRopes(s)
	for i := 0; i < len(b.pending); i++ {
		p := b.pending[i]
		if spanOf(p.dst).overlaps(s) {
			b.pending = append(b.pending[:i], b.pending[i+1:]...)
			i--
		} else if spanOf(p.src).overlaps(s) {
			p.srcDirty = true
		}
	}
	for i := 0; i < len(b.qcache); i++ {
		if b.qcache[i].in.srcSpan.overlaps(s) {
			b.qcache = append(b.qcache[:i], b.qcache[i+1:]...)
			i--
		}
	}
}

// inputOf is t as a product's input, folding in a lazy norm that writes it.
func (b *Backend) inputOf(t *tensor) input {
	for _, p := range b.pending {
		if *p.dst == *t && !p.srcDirty {
			return input{src: p.src.ptr, rs: int64(p.src.stride), rows: t.rows, S: 1, L: t.cols, norm: p.w, eps: p.eps, srcSpan: spanOf(p.src)}
		}
	}
	b.reads(t)
	return input{src: t.ptr, rs: int64(t.stride), rows: t.rows, S: 1, L: t.cols, srcSpan: spanOf(t)}
}

// quantize rounds in to 8-bit blocks (mode roundQ8_0 or roundQ8_K), reusing an
// earlier rounding of the same input.
func (b *Backend) quantize(in input, mode int) qact {
	for _, e := range b.qcache {
		if e.in == in && e.mode == mode {
			return e.out
		}
	}
	R, L := in.rows*in.S, in.L
	blk := 32
	if mode == roundQ8_K {
		blk = 256
	}
	q := b.scratch(int64(R * L))
	d := b.scratch(int64(R*(L/blk)) * 4)
	var bs uintptr
	if mode == roundQ8_K {
		bs = b.scratch(int64(R*(L/16)) * 4)
	}
	b.record("quant_act", grid1(R), [3]uint32{256, 1, 1}, int64(R*L)*5,
		uint64(q), uint64(d), uint64(bs), uint64(in.src), uint64(in.rs), uint64(in.segStride), uint64(in.S), uint64(L),
		uint64(in.norm), f32bits(in.eps), uint64(mode))
	out := qact{q, d, bs}
	b.qcache = append(b.qcache, quantEntry{in: in, mode: mode, out: out})
	return out
}

// prepare rounds in in float for the generic kernels (or passes it through
// where its rows, or its segments, are evenly spaced).
func (b *Backend) prepare(in input, mode int) fact {
	if mode == roundNone && in.norm == 0 {
		if in.S == 1 {
			return fact{in.src, in.rs}
		}
		if in.rows == 1 || in.rs == int64(in.S)*in.segStride {
			return fact{in.src, in.segStride}
		}
		// rows of heads with a gap between them (q read out of the stacked
		// q | kv product): prep copies them into place
	}
	for _, e := range b.qcache {
		if e.in == in && e.mode == -1-mode {
			return e.fout
		}
	}
	R, L := in.rows*in.S, in.L
	out := b.scratch(int64(R*L) * 4)
	b.record("prep", grid1(R), [3]uint32{256, 1, 1}, int64(R*L)*8,
		uint64(out), uint64(in.src), uint64(in.rs), uint64(in.segStride), uint64(in.S), uint64(L), uint64(in.norm), f32bits(in.eps), uint64(mode))
	f := fact{out, int64(L)}
	b.qcache = append(b.qcache, quantEntry{in: in, mode: -1 - mode, fout: f})
	return f
}

// output describes where a product goes: ny problems (per head or per
// picked expert), each of N outputs for T tokens. Problem py, token t reads
// input row R = (py/xDiv)·xY + t·xRows and writes y + py·yY + t·ys;
// weight rows start at (ids ? ids[py] : py)·wY.
type output struct {
	N               int
	y               uintptr
	ys, yY          int64
	T               int
	acc             bool
	ids             uintptr
	wY              int64
	ny              int
	xRows, xY, xDiv int64
	up              *weight // fused gate/up: y = silu(x·W)·(x·up)
	upOff           int64   // rows into up where its matrix starts
	wts             uintptr // weighted sum of nsum consecutive problems per output problem
	nsum            int
}

// mq mirrors the kernels' struct MQ (kernels/mmvq.cu).
type mq struct {
	w               uintptr
	rowBytes, K, N  int64
	xq, xd, xb      uintptr
	xrows, xY, xDiv int64
	y               uintptr
	ys, yY          int64
	T, acc          int64
	ids             uintptr
	wY              int64
	w2              uintptr
	// one token: the kernel rounds its input itself
	xsrc          uintptr
	xrs, xS, xseg int64
	nw            uintptr
	eps           float32
	mode          int     // the rounding of the input: mmvk1 reads it, fusion compares it
	wts           uintptr // MoE down: weighted sum of nsum experts per token
	nsum          int64
	y2            uintptr // mmv1, one problem: y2 += y after the product (a residual add)
	// mmv1, one token: problems (summands with nsum) from nr on are the
	// shared expert's chunks: weights wx (w2x), input xsrcx, output yx
	nr          int64
	wx, w2x, yx uintptr
	xsrcx       uintptr
	idsEarly    bool // ids were written before the launch before this one
	// mmv1 with nsum and nr: the extra summands' row length and bytes,
	// when they differ from K and rowBytes (0 otherwise)
	Kx, rbx int64
	inx     span  // what xsrcx covers
	in      input // what the activations are, for fusing
	typ     quant.Type
	ny      int
}

func (m *mq) slots() []uint64 {
	return []uint64{uint64(m.w), uint64(m.rowBytes), uint64(m.K), uint64(m.N), uint64(m.xq), uint64(m.xd), uint64(m.xb),
		uint64(m.xrows), uint64(m.xY), uint64(max(m.xDiv, 1)), uint64(m.y), uint64(m.ys), uint64(m.yY), uint64(m.T),
		uint64(m.acc), uint64(m.ids), uint64(m.wY), uint64(m.w2), uint64(m.xsrc), uint64(m.xrs), uint64(max(m.xS, 1)),
		uint64(m.xseg), uint64(m.nw), f32bits(m.eps) | uint64(m.mode)<<32, uint64(m.wts), uint64(m.nsum), uint64(m.y2),
		uint64(m.nr), uint64(m.wx), uint64(m.w2x), uint64(m.yx), uint64(m.xsrcx), uint64(b2i(m.idsEarly)),
		uint64(m.Kx), uint64(m.rbx)}
}

// mv mirrors the kernels' struct MV (kernels/matmul.cu).
type mv struct {
	w              uintptr
	rowBytes, K, N int64
	x              uintptr
	xs, xY, xDiv   int64
	y              uintptr
	ys, yY         int64
	T, acc         int64
	ids            uintptr
	wY             int64
}

func (m *mv) slots() []uint64 {
	return []uint64{uint64(m.w), uint64(m.rowBytes), uint64(m.K), uint64(m.N), uint64(m.x), uint64(m.xs), uint64(m.xY),
		uint64(max(m.xDiv, 1)), uint64(m.y), uint64(m.ys), uint64(m.yY), uint64(m.T), uint64(m.acc), uint64(m.ids), uint64(m.wY)}
}

// product records y (+)= x·Wᵀ: integer-dot kernels for the fast types,
// the generic ones otherwise.
func (b *Backend) product(w *weight, in input, o output) {
	K := int64(in.L)
	bytes := int64(o.ny*max(o.nsum, 1))*int64(o.N)*w.rowBytes + int64(o.T*o.ny)*(K+4*int64(o.N))
	if o.up != nil {
		bytes *= 2
	}
	if fastTypes[w.typ] {
		mode := roundMode(w.typ) // roundQ8_0 or roundQ8_K: the fast types are 8-bit products
		m := &mq{w: w.ptr, rowBytes: w.rowBytes, K: K, N: int64(o.N),
			xrows: o.xRows, xY: o.xY, xDiv: o.xDiv, y: o.y, ys: o.ys, yY: o.yY, T: int64(o.T), acc: b2i(o.acc),
			ids: o.ids, wY: o.wY, in: in, wts: o.wts, nsum: int64(o.nsum)}
		if o.T == 1 && !b.NoFusion {
			m.xsrc, m.xrs, m.xS, m.xseg, m.nw, m.eps, m.mode = in.src, in.rs, int64(in.S), in.segStride, in.norm, in.eps, mode
		} else {
			a := b.quantize(in, mode)
			m.xq, m.xd, m.xb = a.q, a.d, a.bs
		}
		if o.up != nil {
			m.w2 = o.up.ptr + uintptr(o.upOff*o.up.rowBytes)
		}
		b.recordMQ(w, m, o.ny, bytes)
		return
	}
	f := b.prepare(in, roundMode(w.typ))
	if o.up != nil {
		panic("cuda: internal: fused gate/up needs a fast weight type")
	}
	m := mv{w: w.ptr, rowBytes: w.rowBytes, K: K, N: int64(o.N), x: f.ptr, xs: o.xRows * f.stride, xY: o.xY * f.stride, xDiv: o.xDiv,
		y: o.y, ys: o.ys, yY: o.yY, T: int64(o.T), acc: b2i(o.acc), ids: o.ids, wY: o.wY}
	tn := deviceTypes[w.typ]
	if o.T <= 4 {
		b.recordStruct("gemv_"+tn, grid2(ceilDiv(o.N, 8), o.ny), [3]uint32{256, 1, 1}, bytes, m.slots()...)
		return
	}
	b.recordStruct("gemm_"+tn, grid3(ceilDiv(o.N, 64), ceilDiv(o.T, 64), o.ny), [3]uint32{256, 1, 1}, bytes, m.slots()...)
}

func (b *Backend) recordMQ(w *weight, m *mq, ny int, bytes int64) {
	m.typ, m.ny = w.typ, ny
	// The launch before reads these ids too (gate/up before down), so it
	// did not write them, and since every kernel waits for its own
	// predecessor before it lets the next one launch (pdl_entry), the
	// kernel that did is complete when this one starts.
	if n := len(b.launches); m.ids != 0 && n > 0 {
		if prev := b.launches[n-1].mq; prev != nil && !b.launches[n-1].skip && prev.ids == m.ids {
			m.idsEarly = true
		}
	}
	name, grid, shmem := b.mqLaunch(m)
	b.recordStruct(name, grid, [3]uint32{256, 1, 1}, bytes, m.slots()...)
	b.launches[len(b.launches)-1].mq = m
	if shmem > 0 {
		b.withShared(shmem)
	}
}

// mmv1Fits reports whether an mmv1 lane's loads, G rows × JC blocks of
// nw matrices, each block words 16-byte words, are at most 8 in flight.
func mmv1Fits(g, jc, nw, words int) bool { return g*jc*nw*words <= 8 }

// mmv1Words is how many 16-byte words a block of type t takes in mmv1's
// loads, or 0 for a type mmv1 does not serve. (A type, not its device
// name: mqLaunch asks for every product of every recorded token.)
func mmv1Words(t quant.Type) int {
	switch t {
	case quant.Q4_0:
		return 1
	case quant.Q8_0:
		return 2
	}
	return 0
}

// mmv1Kernel is the name of mmv1's kernel for variant (G, JC, D) and
// device type t (the unit holding it is named as it).
func mmv1Kernel(g, jc, d int, t string) string { return fmt.Sprintf("mmv1_%d_%d_%d_%s", g, jc, d, t) }

// mmv1Variants are the (G, JC, D) of every mmv1 kernel mqLaunch can pick
// for device type t (T_Q4_0 or T_Q8_0), or nil for the others: JC from 2
// while the loads fit, G above 1 only with JC 2.
func mmv1Variants(t string) [][3]int {
	words := 0
	for typ, name := range deviceTypes {
		if name == t {
			words = mmv1Words(typ)
		}
	}
	if words == 0 {
		return nil
	}
	var vs [][3]int
	for nw := 1; nw <= 2; nw++ {
		for _, g := range []int{4, 2} {
			if mmv1Fits(g, 2, nw, words) {
				vs = append(vs, [3]int{g, 2, nw - 1})
			}
		}
		for jc := 2; jc == 2 || mmv1Fits(1, jc, nw, words); jc *= 2 {
			vs = append(vs, [3]int{1, jc, nw - 1})
		}
	}
	return vs
}

// mqLaunch picks the kernel, grid and dynamic shared memory of an
// integer-dot product.
func (b *Backend) mqLaunch(m *mq) (name string, grid [3]uint32, shmem int) {
	if words := mmv1Words(m.typ); m.T == 1 && words > 0 {
		// mmv1 (kernels/mmvq.cu): a lane loads G rows × JC blocks (× 2 for
		// gate/up) of 16-byte words, at most 8 at a time; JC covers a row's
		// blocks per lane where it can (a routed row's: a wider shared
		// summand, Kx, takes more load sets), and G rows share the input's
		// reads unless that leaves SMs idle.
		nb := int(m.K / 32)
		lpr := mmv1Lanes(nb)
		nw := 1
		if m.w2 != 0 {
			nw = 2
		}
		jc := 2
		for jc < ceilDiv(nb, lpr) && mmv1Fits(1, 2*jc, nw, words) {
			jc *= 2
		}
		resident := mmv1BlocksPerSM * b.info.SMs
		g := 1
		if jc == 2 {
			for _, c := range []int{4, 2} {
				if mmv1Fits(c, jc, nw, words) && m.ny*ceilDiv(int(m.N), 8*(32/lpr)*c) >= resident {
					g = c
					break
				}
			}
		}
		gx := min(ceilDiv(int(m.N), 8*(32/lpr)*g), ceilDiv(resident, m.ny))
		name = b.mmv1Name(g, jc, nw-1, m.typ)
		shmem = int(40 * (m.inputLen() / 32)) // the rounded input: quants, scales, sums
		if m.xsrc != 0 && m.nw != 0 {         // and the norm's weights, from a 16-byte boundary
			shmem = (shmem+15)&^15 + 4*int(m.K)
		}
		return name, grid3(gx, m.ny, 1), shmem
	}
	if m.T == 1 {
		// mmvk1 (the K-quants' one-token kernel): two rows a warp, a
		// persistent grid of mmvk1BlocksPerSM blocks an SM sharing the
		// problems, each rounding its input once (when it rounds it)
		gx := min(ceilDiv(int(m.N), 16), ceilDiv(mmvk1BlocksPerSM*b.info.SMs, m.ny))
		if m.xsrc != 0 { // each 256-value block: its quants (padded), its scale, its 16 sums
			shmem = int(m.inputLen()/256) * (mmvk1QuantStride + 4 + 64)
		}
		return mmvk1Names()[m.typ][b2i(m.w2 != 0)], grid3(gx, m.ny, 1), shmem
	}
	rpw := 1
	if m.typ != quant.Q4_0 && m.typ != quant.Q8_0 {
		rpw = 4
	}
	return "mmvq8_" + deviceTypes[m.typ], grid3(ceilDiv(int(m.N), 8*rpw), m.ny, ceilDiv(int(m.T), 8)), 0
}

// mmvk1Kernel is mmvk1's kernel for device type t: its one-matrix walk, or
// with gateUp its gate/up walk (the unit holding it is named as it).
func mmvk1Kernel(t string, gateUp bool) string {
	if gateUp {
		return "mmvk1g_" + t
	}
	return "mmvk1_" + t
}

// mmvk1Names are the K-quants' one-token kernels by weight type, one-matrix
// then gate/up, named once: every token records every launch again.
var mmvk1Names = sync.OnceValue(func() map[quant.Type][2]string {
	names := map[quant.Type][2]string{}
	for t, n := range deviceTypes {
		names[t] = [2]string{mmvk1Kernel(n, false), mmvk1Kernel(n, true)}
	}
	return names
})

// mmvk1BlocksPerSM is how many mmvk1 blocks an SM holds at once (its
// __launch_bounds__ in kernels/mmvq.cu, MMVK1_BLOCKS): its persistent grid.
const mmvk1BlocksPerSM = 2

// mmvk1QuantStride is the bytes of a 256-value block of mmvk1's rounded
// input in shared memory (MMVK1_QST): padded by 16, so that its lanes'
// reads of eight blocks spread over the banks.
const mmvk1QuantStride = 256 + 16

// mmv1Lanes is how many lanes mmv1 gives a row of nb blocks (lanes_log2
// in kernels/dot.cuh): nb rounded up to a power of two, at most 32.
func mmv1Lanes(nb int) int {
	lpr := 1
	for lpr < nb && lpr < 32 {
		lpr <<= 1
	}
	return lpr
}

// inputLen is how many input values a one-token launch (mmv1, mmvk1)
// rounds for a problem:
// nsum summands (or one) of K values, the extra ones from nr of Kx when set
// (only foldSharedDown sets it, on a weighted sum).
func (m *mq) inputLen() int64 {
	if m.Kx == 0 {
		return max(m.nsum, 1) * m.K
	}
	return m.nr*m.K + (m.nsum-m.nr)*m.Kx
}

// mmv1BlocksPerSM is how many mmv1 blocks an SM holds at once (its
// __launch_bounds__ in kernels/mmvq.cu, MMV1_BLOCKS): its persistent grid.
const mmv1BlocksPerSM = 2

// mmv1Name is mmv1's kernel name for a variant, built once (every token
// records every launch again).
func (b *Backend) mmv1Name(g, jc, dual int, typ quant.Type) string {
	k := [4]int{g, jc, dual, int(typ)}
	if n, ok := b.mmv1Names[k]; ok {
		return n
	}
	n := mmv1Kernel(g, jc, dual, deviceTypes[typ])
	b.mmv1Names[k] = n
	return n
}

func checkMatMul(op string, d *tensor, w *weight, s *tensor) {
	if d.rows != s.rows || w.dim(0) != s.cols || int(w.rows) != d.cols {
		panic(fmt.Sprintf("cuda: %s: %s %v against src %d×%d, dst %d×%d", op, w.name, w.dims, s.rows, s.cols, d.rows, d.cols))
	}
}

func (b *Backend) matmul(d *tensor, w *weight, s *tensor, accumulate bool) {
	in := b.inputOf(s)
	if accumulate {
		b.reads(d)
	}
	b.writes(d)
	b.product(w, in, output{N: d.cols, y: d.ptr, ys: int64(d.stride), T: s.rows, acc: accumulate, ny: 1, xRows: 1})
	if accumulate {
		b.foldSharedDown()
	}
}

// MatMul sets dst = src · Wᵀ.
func (b *Backend) MatMul(dst backend.Tensor, w backend.Weight, src backend.Tensor) {
	d, ww, s := tens(dst), wt(w), tens(src)
	checkMatMul("matmul", d, ww, s)
	b.matmul(d, ww, s, false)
}

// MatMulAdd adds src · Wᵀ into dst.
func (b *Backend) MatMulAdd(dst backend.Tensor, w backend.Weight, src backend.Tensor) {
	d, ww, s := tens(dst), wt(w), tens(src)
	checkMatMul("matmuladd", d, ww, s)
	b.matmul(d, ww, s, true)
}

// Embed sets dst[i] to the table row of the pass's token i.
func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	d, w := tens(dst), wt(table)
	if d.rows != b.T || d.cols != w.dim(0) {
		panic(fmt.Sprintf("cuda: embed: %d×%d for %d tokens of %s %v", d.rows, d.cols, b.T, w.name, w.dims))
	}
	b.writes(d)
	b.record("embed_"+deviceTypes[w.typ], grid1(d.rows), [3]uint32{256, 1, 1}, int64(d.rows)*(w.rowBytes+int64(4*d.cols)),
		uint64(d.ptr), uint64(d.stride), uint64(w.ptr), uint64(w.rowBytes), uint64(d.cols), uint64(b.tokensDev()))
}

func (b *Backend) recordNorm(d, s *tensor, w uintptr, eps float32) {
	b.record("rmsnorm", grid1(s.rows), [3]uint32{256, 1, 1}, int64(s.rows*s.cols)*8,
		uint64(d.ptr), uint64(d.stride), uint64(s.ptr), uint64(s.stride), uint64(w), f32bits(eps), uint64(s.cols))
}

// RMSNorm normalises each row and scales by w (lazily: see above).
func (b *Backend) RMSNorm(dst, src backend.Tensor, w backend.Weight, eps float32) {
	d, s, g := tens(dst), tens(src), wt(w)
	if d.rows != s.rows || d.cols != s.cols || g.dim(0) != s.cols {
		panic(fmt.Sprintf("cuda: rmsnorm: %d×%d from %d×%d with %s %v", d.rows, d.cols, s.rows, s.cols, g.name, g.dims))
	}
	b.reads(s)
	b.writes(d)
	b.recordNorm(d, s, g.ptr, eps)
	if b.NoFusion {
		return
	}
	b.launches[len(b.launches)-1].skip = true
	dc, sc := *d, *s
	b.pending = append(b.pending, &pendingNorm{dst: &dc, src: &sc, w: g.ptr, eps: eps, launch: len(b.launches) - 1})
}

// RoPE rotates adjacent pairs at the pass's positions (lazily: see above).
func (b *Backend) RoPE(t backend.Tensor, stride, off, n int, r *backend.Rope) {
	x := tens(t)
	if x.rows != b.T || n > 2*len(r.Freqs) || off+n > stride {
		panic(fmt.Sprintf("cuda: rope: %d rows for %d tokens, %d values from %d in heads of %d", x.rows, b.T, n, off, stride))
	}
	sp := ropeSpan(x, stride, off, n)
	b.readsSpan(sp)
	b.writesSpan(sp)
	freqs := b.ropeFreqs(r)
	b.record("rope", grid1(x.rows), [3]uint32{256, 1, 1}, int64(x.rows*x.cols/stride*n)*8,
		uint64(x.ptr), uint64(x.stride), uint64(x.cols), uint64(stride), uint64(off), uint64(n), uint64(b.posDev()), uint64(freqs))
	if b.NoFusion {
		return
	}
	b.launches[len(b.launches)-1].skip = true
	xc := *x
	b.pendRope = append(b.pendRope, &pendingRope{t: &xc, launch: len(b.launches) - 1, freqs: freqs, stride: stride, off: off, n: n})
}

// takeRope removes and returns the lazy RoPE of exactly t's heads of width
// stride from column off (n values), if there is one.
func (b *Backend) takeRope(t *tensor, stride, off, n int) uintptr {
	for i, r := range b.pendRope {
		if *r.t == *t && r.stride == stride && r.off == off && r.n == n {
			b.pendRope = append(b.pendRope[:i], b.pendRope[i+1:]...)
			return r.freqs
		}
	}
	return 0
}

// CacheStore writes the pass's rows of src into layer's cache. Right
// after the latent's norm and k_pe's RoPE it does both itself (kv_finish).
func (b *Backend) CacheStore(c backend.Cache, layer int, src backend.Tensor) {
	k, s := c.(*kvCache), tens(src)
	if s.cols != k.width || s.rows != b.T || layer < 0 || layer >= k.layers {
		panic(fmt.Sprintf("cuda: cache store: %d×%d into layer %d of a cache %d wide", s.rows, s.cols, layer, k.width))
	}
	if !b.NoFusion {
		freqs := b.takeRope(s, k.width, b.kvl, k.width-b.kvl)
		var norm *pendingNorm
		lat := tensor{ptr: s.ptr, rows: s.rows, cols: b.kvl, stride: s.stride}
		for i, p := range b.pending {
			if *p.dst == lat && *p.src == lat && !p.srcDirty {
				norm = p
				b.pending = append(b.pending[:i], b.pending[i+1:]...)
				break
			}
		}
		if freqs != 0 || norm != nil {
			b.reads(s)
			var nw uintptr
			var eps float32
			if norm != nil {
				nw, eps = norm.w, norm.eps
			}
			b.record("kv_finish", grid1(s.rows), [3]uint32{256, 1, 1}, int64(s.rows*s.cols)*(8+k.esize),
				uint64(k.layer(layer)), uint64(s.ptr), uint64(s.stride), uint64(b.posDev()), uint64(nw), f32bits(eps), uint64(freqs))
			if s.rows == 1 { // attention right after may do it itself (decodeOne)
				l := &b.launches[len(b.launches)-1]
				l.skip = true
				p := b.freeStore()
				*p = pendingStore{launch: len(b.launches) - 1, layer: layer, kv: s.ptr, width: k.width, nw: nw, eps: eps, freqs: freqs,
					args: append(p.args[:0], b.args[l.a0:l.a0+l.n]...)}
				b.pendStore = p
			}
			return
		}
	}
	b.reads(s)
	b.record("cache_store", grid1(s.rows), [3]uint32{256, 1, 1}, int64(s.rows*s.cols)*(4+k.esize),
		uint64(k.layer(layer)), uint64(s.ptr), uint64(s.stride), uint64(b.posDev()))
}

// splits is the number of position ranges the attention of T tokens
// divides the cache into for H heads: fixed per context (so that one
// recorded decode step serves all), and few enough that a token's H·S
// blocks run in one wave (two per SM). A batch takes a split per 256
// positions of the context; one token (attn_decode, and attn_partial with
// T = 1, so that fused and unfused give the same bits) a split per 64, at
// most 8: a split's positions are a chain of round trips, so few splits
// leave most SMs idle (BENCHMARKS.md: 2 splits of a 640-position context
// decoded youtu at 500 tok/s, 8 or 16 at 585), and attn_decode's splits of
// a head are one thread block cluster, of at most 8 blocks where any
// Hopper GPU can run it.
func (b *Backend) splits(H, T int) int {
	if T == 1 {
		return max(1, min(maxCluster, b.kv.positions/64, 2*b.info.SMs/H))
	}
	return max(1, min(16, b.kv.positions/256, 2*b.info.SMs/H))
}

// layerBuffer returns n bytes of c, one of a batch's attention buffers
// (the queries' latents, attn_partial's split states, the merged latents).
// Every layer reuses each instead of taking its own from the pass's
// scratch, which keeps each layer's activations until the pass ends: at 512
// tokens glm-4.7-flash's 47 layers took 274 MB each of split states (20
// heads, 13 splits) and 45 MB each of latents. Reuse is safe in stream
// order: a layer's kernels write these only after their wait for the
// kernel before, and so after the layer before read them. A larger pass at
// least doubles the buffer; the old one is freed once the stream has run
// what was queued (only passes before this one used it: every layer of a
// pass asks for the same size, so the first asks before any launch of this
// pass holds it). The n bytes are noted as written, so that nothing read
// from the layer before's use (a rounding of its merged latents) is reused.
func (b *Backend) layerBuffer(c *chunk, n int64, what string) uintptr {
	if c.size < n {
		size := max(n, 2*c.size)
		old := c.ptr
		*c = chunk{} // regrow frees old even when it then runs out of memory
		*c = chunk{ptr: b.regrow(old, size, what), size: size}
	}
	b.writesSpan(span{c.ptr, c.ptr + uintptr(n)})
	return c.ptr
}

// regrow replaces device buffer old (0: none), which passes still queued
// may read, by one of n bytes: old is freed once the stream has run them.
// Out of memory it ends the pass (allocFailed), old freed all the same.
func (b *Backend) regrow(old uintptr, n int64, what string) uintptr {
	var p uintptr
	var err error
	b.run(func() {
		if old != 0 {
			call(b.d.cuStreamSynchronize, b.stream)
			call(b.d.cuMemFree, old)
		}
		p, err = b.alloc(n, what)
	})
	if err != nil {
		b.allocFailed(err)
	}
	return p
}

// maxCluster is the most blocks a thread block cluster has on every GPU
// that runs them (larger ones are not portable).
const maxCluster = 8

// Attention is absorbed MLA: q_nope → latent through k_b, split-K softmax
// over the layer's cache, latent → v through v_b.
func (b *Backend) Attention(dst, q backend.Tensor, kb, vb backend.Weight, c backend.Cache, layer int, scale float32) {
	d, qq, k, kbw, vbw := tens(dst), tens(q), c.(*kvCache), wt(kb), wt(vb)
	nope, kvl, H := kbw.dim(0), kbw.dim(1), kbw.dim(2)
	W := k.width
	rope, vdim := W-kvl, vbw.dim(1)
	T := qq.rows
	if qq.cols != H*(nope+rope) || d.cols != H*vdim || vbw.dim(0) != kvl || d.rows != T || T != b.T {
		panic(fmt.Sprintf("cuda: attention: q %d×%d, dst %d×%d, k_b %v, v_b %v, cache width %d", qq.rows, qq.cols, d.rows, d.cols, kbw.dims, vbw.dims, W))
	}
	store := b.pendStore
	b.pendStore = nil
	var freqs uintptr
	if !b.NoFusion {
		freqs = b.takeRope(qq, nope+rope, nope, rope)
	}
	b.reads(qq)
	if b.decodeOne(d, qq, kbw, vbw, k, layer, scale, freqs, store) {
		return
	}
	if store != nil { // not consumed: kv_finish runs where it was recorded
		b.launches[store.launch].skip = false
	}
	// query [T][H][W]: q_lat = k_b[h]·q_nope[h], then q_pe
	query := b.layerBuffer(&b.query, int64(T*H*W)*4, "attention's queries")
	qin := input{src: qq.ptr, rs: int64(qq.stride), rows: T, S: H, L: nope, segStride: int64(nope + rope), srcSpan: spanOf(qq)}
	b.product(kbw, qin, output{N: kvl, y: query, ys: int64(H * W), yY: int64(W), T: T, wY: int64(kvl), ny: H,
		xRows: int64(H), xY: 1, xDiv: 1})
	S := b.splits(H, T)
	part := b.layerBuffer(&b.states, int64(T*H*S*(kvl+2))*4, "attention's split states")
	olatBytes := int64(T*H*kvl) * 4
	olat := b.layerBuffer(&b.olat, olatBytes, "attention's latents")
	// the last split of each head to finish merges them, where counters allow
	fused := T*H <= maxCounters && !b.NoFusion
	var merged uintptr
	if fused {
		merged = olat
	}
	b.record("attn_partial", grid2(T*H, S), [3]uint32{32 * attWarps, 1, 1}, int64(T*H)*int64(b.maxPos+1)*int64(W)*k.esize,
		uint64(part), uint64(query), uint64(qq.ptr), uint64(qq.stride), uint64(nope), uint64(freqs),
		uint64(k.layer(layer)), uint64(b.posDev()), uint64(H), uint64(S), f32bits(scale), uint64(merged), uint64(b.counters))
	if !fused {
		b.record("attn_combine", grid1(T*H), [3]uint32{256, 1, 1}, int64(T*H*(S+1)*(kvl+2))*4,
			uint64(olat), uint64(part), uint64(S))
	}
	// o[h] = v_b[h]·o_lat[h]; each head's latent is its own row of the rounded input
	b.writes(d)
	oin := input{src: olat, rs: int64(H * kvl), rows: T, S: H, L: kvl, segStride: int64(kvl), srcSpan: span{olat, olat + uintptr(olatBytes)}}
	b.product(vbw, oin, output{N: vdim, y: d.ptr, ys: int64(d.stride), yY: int64(vdim), T: T, wY: int64(vdim), ny: H,
		xRows: int64(H), xY: 1, xDiv: 1})
}

// pendingStore is a one-token kv_finish whose launch is skipped so far:
// the attention of its layer, recorded next, does its work (decodeOne:
// attn_decode or mla_decode).
type pendingStore struct {
	launch, layer int
	kv            uintptr // the token's [latent | k_pe] row
	width         int
	nw, freqs     uintptr
	eps           float32
	args          []uint64 // kv_finish's arguments, to record it again
}

// freeStore is one of the backend's pendingStores that attention has not
// left raw, so that recording a token's layers allocates none. (CacheStore
// asks after record cleared any pending one: the pendStore test is a guard.)
func (b *Backend) freeStore() *pendingStore {
	for i := range b.stores {
		if p := &b.stores[i]; p != b.pendStore && p != b.rawKV {
			return p
		}
	}
	panic("cuda: internal: no free pending store")
}

// span is the kv row the store normalises and rotates.
func (p *pendingStore) span() span { return span{p.kv, p.kv + uintptr(4*p.width)} }

// settleKV records kv_finish again when an operation touches the kv row
// that decodeOne left raw (it writes the same cache row again): a read,
// or a write of only part of the row, must find the row normalised and
// rotated, as after kv_finish; a write of the whole row needs nothing.
func (b *Backend) settleKV(s span, read bool) {
	p := b.rawKV
	if p == nil || !p.span().overlaps(s) {
		return
	}
	b.rawKV = nil
	if whole := s.lo <= p.kv && p.span().hi <= s.hi; read || !whole {
		b.record("kv_finish", grid1(1), [3]uint32{256, 1, 1}, int64(p.width)*(8+b.kv.esize), p.args...)
	}
}

// decodeOne records a one-token attention as one launch
// (kernels/attention.cu): the cache row's norm and RoPE (store, when
// given), q_nope through k_b, split-K attention with its merge, and v_b.
// From MLAFrom positions on, where allocMLA found it fits, that is
// mla_decode (every cache row read once for all heads, on tensor cores);
// before, attn_decode (a block per head and split, a cluster per head). It
// reports false, recording nothing, where neither serves: a batch, unfused
// operations, k_b/v_b they have no kernel for, a pending row of another
// layer, and below MLAFrom a GPU before Hopper or a latent attn_decode's
// shared memory cannot hold (attnDecodes).
func (b *Backend) decodeOne(d, q *tensor, kb, vb *weight, k *kvCache, layer int, scale float32, freqs uintptr, store *pendingStore) bool {
	nope, H, vdim := kb.dim(0), kb.dim(2), vb.dim(1)
	if b.NoFusion || q.rows != 1 || !decodeServes(kb, vb) || (store != nil && store.layer != layer) {
		return false
	}
	m := b.mla
	mla := ""
	if m != nil && b.maxPos+1 >= m.from(b.MLAFrom) && H <= m.heads {
		mla = b.mlaKernel(kb.typ)
	}
	if mla == "" && !b.attnDecodes() {
		return false
	}
	b.writes(d) // before store becomes the raw row: d overlapping it must not settle it ahead of this launch
	var kv, nw, kvFreqs uintptr
	var eps float32
	if store != nil {
		kv, nw, kvFreqs, eps = store.kv, store.nw, store.freqs, store.eps
		if b.rawKV != nil { // an earlier raw row still unsettled (never, in the model's order)
			b.settleKV(b.rawKV.span(), true)
		}
		b.rawKV = store // kv keeps the raw row: kv_finish runs if it is read
	}
	weights := int64(H) * (int64(b.kvl)*kb.rowBytes + int64(vdim)*vb.rowBytes)
	cache := int64(b.maxPos+1) * int64(k.width) * k.esize
	if mla != "" {
		b.recordStruct(mla, grid1(m.grid), [3]uint32{32 * attWarps, 1, 1}, weights+cache,
			uint64(q.ptr), uint64(nope), uint64(freqs), uint64(kv), uint64(nw), uint64(kvFreqs), uint64(k.layer(layer)), uint64(b.posDev()),
			uint64(H)|f32bits(scale)<<32, f32bits(eps), uint64(kb.ptr), uint64(kb.rowBytes), uint64(vb.ptr), uint64(vb.rowBytes), uint64(vdim),
			uint64(m.qh), uint64(m.part), uint64(m.ml), uint64(m.olat), uint64(d.ptr), uint64(b.counters+barrierOffset))
		b.withShared(m.shared)
		return true
	}
	S := b.splits(H, 1)
	b.recordStruct(attnDecodeName(kb.typ), grid2(H, S), [3]uint32{32 * attWarps, 1, 1}, weights+int64(H)*cache,
		uint64(d.ptr), uint64(q.ptr), uint64(nope), uint64(freqs),
		uint64(kv), uint64(nw), uint64(kvFreqs), uint64(k.layer(layer)), uint64(b.posDev()),
		f32bits(scale)|f32bits(eps)<<32,
		uint64(kb.ptr), uint64(kb.rowBytes), uint64(vb.ptr), uint64(vb.rowBytes), uint64(vdim))
	b.launches[len(b.launches)-1].clustered = true
	return true
}

// attnDecodes reports whether attn_decode serves this device and model: its
// clusters need Hopper (and cuLaunchKernelEx), and its static shared
// memory, about 54 bytes per latent value and at most 48 KiB, a latent at
// most attnDecodeMaxLatent wide.
func (b *Backend) attnDecodes() bool {
	return b.clusters() && b.kvl <= attnDecodeMaxLatent
}

// clusters reports whether kernels can run as thread block clusters
// (attn_decode, moe_router8): Hopper, and cuLaunchKernelEx to ask for them.
func (b *Backend) clusters() bool { return b.info.Major >= 9 && b.d.cuLaunchKernelEx != 0 }

const attnDecodeMaxLatent = 768

// decodeServes reports whether attn_decode and mla_decode have kernels for
// these k_b and v_b: Q4_0 or Q8_0 (the types mmv1 serves), the same for
// both, and q_nope in whole blocks a block can round.
func decodeServes(kb, vb *weight) bool {
	nope := kb.dim(0)
	return kb.typ == vb.typ && mmv1Words(kb.typ) > 0 && nope%32 == 0 && nope <= 1024
}

// attnDecodeName is attn_decode's kernel for k_b and v_b of type t (one
// decodeServes allows); constant strings, as it runs every layer of every
// token.
func attnDecodeName(t quant.Type) string {
	if t == quant.Q8_0 {
		return "attn_decode_T_Q8_0_T_Q8_0"
	}
	return "attn_decode_T_Q4_0_T_Q4_0"
}

// mlaBuffers is mla_decode's scratch, made at load and shared by every
// layer's launch (one runs at a time): the f16 queries (mlaQCopies
// copies), the splits' states, the merged latents; and the kernel's launch
// shape.
type mlaBuffers struct {
	grid     int // blocks (one per SM, at most 256: the grid barriers need all resident)
	heads    int
	shared   int // dynamic shared memory bytes
	qh, part uintptr
	ml, olat uintptr
	kernel   map[quant.Type]string // per k_b/v_b type, the kernel ("" where a block of it does not fit on an SM)
	checked  map[quant.Type]bool   // whether kernel's fit was asked
}

// tiles is how many 16-row mma tiles the heads fill (MT in the kernel's name
// and unit).
func (m *mlaBuffers) tiles() int { return ceilDiv(m.heads, 16) }

// from is where one-token attention turns to mla_decode: MLAFrom, or below
// 0 the default for the model's heads, where mla_decode overtakes
// attn_decode. Measured on the H200 with each forced (BENCHMARKS.md, decode
// tok/s): with 5eee658's kernels at 640/1664/2688 positions youtu
// 652.6/625.3/592.7 with attn_decode, 654.0/648.6/637.0 with mla_decode;
// deepseek 511.8/499.3/483.6 and 519.6/517.6/510.2. With attn_decode's
// clusters (d3d2aec) at 1536-1664 positions youtu 600.0 against 643.8 and
// deepseek 481.4 against 515.5 (16 heads, one tile: 1024), but glm 284.8
// against 270.4, and even (266.7, 266.4) at 2560-2688 (20 heads, two
// tiles, 12 rows of them padding: 2048).
func (m *mlaBuffers) from(mlaFrom int) int {
	switch {
	case mlaFrom >= 0:
		return mlaFrom
	case m.tiles() > 1:
		return 2048
	}
	return 1024
}

// mlaKernel is mla_decode's kernel for k_b/v_b type t, or "" where a block
// of it does not fit on an SM (asked once, at its first launch: its unit
// compiles in the background after load).
func (b *Backend) mlaKernel(t quant.Type) string {
	m := b.mla
	if name := m.kernel[t]; name != "" && !m.checked[t] {
		m.checked[t] = true
		if !b.mlaResident(name, m.shared) {
			m.kernel[t] = ""
		}
	}
	return m.kernel[t]
}

// mlaMaxHeads bounds the heads mla_decode serves: two 16-row mma tiles.
const mlaMaxHeads = 32

// mlaStatic bounds mla_decode's static shared memory (kernels/attention.cu).
const mlaStatic = 12 << 10

// The attention kernels' sizes (fixedDefines hands them to the kernels):
// warps a block (ATT_WARPS), mla_decode's positions a tile (MLA_TP) and the
// padding of its shared rows in elements (MLA_PAD: a row stride of 16 or 80
// bytes mod 128, so ldmatrix meets no bank conflicts).
const (
	attWarps   = 8
	mlaTile    = 32
	mlaPad     = 8
	mlaQCopies = 4 // MLA_QREP: copies of mla_decode's queries, phase 2's blocks reading one each
)

// decodeHeads is the most heads of a layer whose k_b and v_b the one-token
// attention kernels serve (decodeServes), and those weights' types.
func (b *Backend) decodeHeads() (H int, types map[quant.Type]bool) {
	types = map[quant.Type]bool{}
	byName := map[string]*weight{}
	for _, w := range b.weights {
		byName[w.name] = w
	}
	for name, kb := range byName {
		layer, ok := strings.CutSuffix(name, "attn_k_b.weight")
		if vb := byName[layer+"attn_v_b.weight"]; ok && vb != nil && len(kb.dims) == 3 && len(vb.dims) == 3 && decodeServes(kb, vb) {
			H = max(H, kb.dim(2))
			types[kb.typ] = true
		}
	}
	return H, types
}

// mlaShape is mla_decode's launch where the model and the device allow the
// kernel (ok): an f16 cache, sm_80 or later, a latent a multiple of 128
// wide, k_b and v_b it has a kernel for (types), H up to 32 heads in mt
// row tiles of 16, G blocks, and shared bytes of dynamic shared memory for
// its tiles. It reads only the weights' and the cache's shapes (Prepare
// asks it before either exists).
func (b *Backend) mlaShape() (H, mt, G, shared int, types map[quant.Type]bool, ok bool) {
	if b.kv.esize != 2 || b.info.Major < 8 || b.kvl%128 != 0 || b.kvl > 1024 || b.kv.width%32 != 0 {
		return
	}
	H, types = b.decodeHeads()
	if H == 0 || H > mlaMaxHeads {
		return
	}
	// a block per SM, at most 256 (the merge gives each split a thread),
	// more than the heads (phase 1 gives each head a block or more, and
	// one more block the token's own row)
	mt = ceilDiv(H, 16)
	mr, width := 16*mt, b.kv.width
	if G = min(b.info.SMs, 256); G <= H {
		return
	}
	// kernels/attention.cu's layout: Q (hi, lo), two tiles and P (hi, lo) in
	// f16; scores (a warp's partial sums each), corr, max, sum in float32
	tp := mlaTile
	qst, pst, sst := width+mlaPad, tp+mlaPad, tp+mlaPad
	shared = 2*(2*mr*qst+2*tp*qst+2*mr*pst) + 4*(attWarps*mr*sst+3*mr)
	return H, mt, G, shared, types, shared+mlaStatic <= b.info.SharedPerBlockMax
}

// allocMLA makes mla_decode's scratch where mlaShape allows the kernel
// (compile then compiles its unit in the background). It runs once, when
// the cache is made (after the weights, before the kernels compile).
func (b *Backend) allocMLA() error {
	H, mt, G, shared, types, ok := b.mlaShape()
	if !ok {
		return nil
	}
	mr, width := 16*mt, b.kv.width
	kernel := map[quant.Type]string{}
	for t := range types { // whether a block fits an SM is asked at the kernel's first launch (mlaKernel)
		kernel[t] = fmt.Sprintf("mla_decode%d_%s_%s", mt, deviceTypes[t], deviceTypes[t])
	}
	sizes := []int64{int64(mlaQCopies * 2 * mr * width * 2), int64(G * mr * b.kvl * 4), int64(G * mr * 2 * 4), int64(H * b.kvl * 4)}
	var total int64
	for i, n := range sizes {
		sizes[i] = (n + 255) &^ 255 // each buffer from a 256-byte boundary
		total += sizes[i]
	}
	var p uintptr
	var err error
	b.run(func() { p, err = b.alloc(total, "mla_decode's scratch") })
	if err != nil {
		return err
	}
	m := &mlaBuffers{grid: G, heads: H, shared: shared, kernel: kernel, checked: map[quant.Type]bool{}}
	for i, dst := range []*uintptr{&m.qh, &m.part, &m.ml, &m.olat} {
		*dst = p
		p += uintptr(sizes[i])
	}
	b.mla = m
	return nil
}

// mlaResident reports whether a block of kernel name, with shared bytes of
// dynamic shared memory, fits on an SM beside nothing else (its grid
// barriers wait for all its blocks).
func (b *Backend) mlaResident(name string, shared int) bool {
	fn := b.function(name) // a unit that failed to compile fails here, as every kernel's does, not as a quiet fallback
	err := b.setShared(fn, shared)
	var n int32
	if err == nil {
		b.run(func() {
			err = b.d.check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
				call(b.d.cuOccupancyMaxActiveBlocksPerMultiprocessor, uintptr(unsafe.Pointer(&n)), fn, 32*attWarps, uintptr(shared)))
		})
	}
	return err == nil && n >= 1
}

func elementGrid(rows, cols int) [3]uint32 { return grid2(min(ceilDiv(cols, 256), 1024), rows) }

// SwiGLU sets dst = silu(gate) · up; right after the two products that
// made gate and up from one input it fuses them instead.
func (b *Backend) SwiGLU(dst, gate, up backend.Tensor) {
	d, g, u := tens(dst), tens(gate), tens(up)
	if d.rows != g.rows || d.rows != u.rows || d.cols != g.cols || d.cols != u.cols {
		panic("cuda: swiglu: shapes differ")
	}
	if b.fuseGateUp(d, g, u) {
		return
	}
	b.reads(g)
	b.reads(u)
	b.writes(d)
	b.record("swiglu", elementGrid(d.rows, d.cols), [3]uint32{256, 1, 1}, int64(d.rows*d.cols)*12,
		uint64(d.ptr), uint64(d.stride), uint64(g.ptr), uint64(g.stride), uint64(u.ptr), uint64(u.stride), uint64(d.cols))
}

// fuseGateUp turns the last two launches, mmvq into g and mmvq into u of
// the same input and shape, into one gate/up launch writing d.
func (b *Backend) fuseGateUp(d, g, u *tensor) bool {
	n := len(b.launches)
	if b.NoFusion || n < 2 {
		return false
	}
	l1, l2 := &b.launches[n-2], &b.launches[n-1]
	m1, m2 := l1.mq, l2.mq
	if m1 == nil || m2 == nil || l1.skip || l2.skip || l1.id != l2.id || m1.xq != m2.xq || m1.in != m2.in || m1.mode != m2.mode || m1.K != m2.K || m1.N != m2.N ||
		m1.acc != 0 || m2.acc != 0 || m1.ids != 0 || m2.ids != 0 || m1.w2 != 0 || m2.w2 != 0 || m1.rowBytes != m2.rowBytes ||
		m1.y != g.ptr || m2.y != u.ptr || m1.ys != int64(g.stride) || m2.ys != int64(u.stride) || int(m1.N) != d.cols {
		return false
	}
	m1.w2, m1.y, m1.ys = m2.w, d.ptr, int64(d.stride)
	l1.bytes += l2.bytes
	b.launches = b.launches[:n-1]
	b.relaunch(n - 2) // gate/up may take another variant
	b.writes(d)
	b.foldSharedGateUp()
	return true
}

// relaunch re-picks launch i's kernel, grid and shared memory after its
// mq parameters changed, and rewrites its arguments.
func (b *Backend) relaunch(i int) {
	l := &b.launches[i]
	b.rewriteArgs(i)
	name, grid, shmem := b.mqLaunch(l.mq)
	b.setKernel(l, name)
	l.grid = grid
	b.sharedAt(i, shmem)
}

// rewriteArgs records launch i's product parameters again, after a fusion
// changed them.
func (b *Backend) rewriteArgs(i int) {
	l := &b.launches[i]
	copy(b.args[l.a0:l.a0+l.n], l.mq.slots())
}

// mmv1Of is launch i's product parameters where it is a live (not skipped)
// mmv1 launch, the variant the fusions rewrite; nil elsewhere.
func (b *Backend) mmv1Of(i int) *mq {
	l := &b.launches[i]
	if l.mq == nil || l.skip || !strings.HasPrefix(l.name, "mmv1_") {
		return nil
	}
	return l.mq
}

// outSpan is what a one-token product writes: ny problems of N floats yY apart.
func outSpan(m *mq) span {
	n := int64(m.ny-1)*m.yY + m.N
	return span{m.y, m.y + uintptr(4*n)}
}

// foldSharedGateUp moves the shared expert's gate/up launch, just
// recorded, into the routed experts' gate/up launch two before it (the
// routed down projection between them reads neither its input nor its
// output): its ff·nsh rows become nsh more problems of ff rows, written to
// its own output. One token, mmv1 kernels, the same weight format.
func (b *Backend) foldSharedGateUp() {
	n := len(b.launches)
	if n < 3 || b.T != 1 {
		return
	}
	sh, down, routed := &b.launches[n-1], &b.launches[n-2], &b.launches[n-3]
	ms, md, mr := b.mmv1Of(n-1), down.mq, b.mmv1Of(n-3)
	if ms == nil || md == nil || mr == nil || down.skip ||
		ms.ids != 0 || ms.w2 == 0 || ms.ny != 1 || ms.acc != 0 || ms.nr != 0 ||
		mr.ids == 0 || mr.w2 == 0 || mr.nsum != 0 || mr.nr != 0 || mr.T != 1 || mr.acc != 0 ||
		md.ids != mr.ids || md.nsum == 0 ||
		ms.typ != mr.typ || ms.rowBytes != mr.rowBytes || ms.K != mr.K || ms.in != mr.in || ms.xsrc != mr.xsrc ||
		ms.N%mr.N != 0 || mr.yY != mr.N ||
		outSpan(md).overlaps(ms.in.srcSpan) || outSpan(ms).overlaps(md.in.srcSpan) || outSpan(ms).overlaps(outSpan(md)) {
		return
	}
	mr.nr = int64(mr.ny)
	mr.wx, mr.w2x, mr.yx, mr.xsrcx = ms.w, ms.w2, ms.y, ms.xsrc
	mr.ny += int(ms.N / mr.N)
	routed.bytes += sh.bytes
	b.launches = b.launches[:n-1]
	b.relaunch(n - 3)
}

// foldSharedDown moves the shared expert's down projection, just recorded
// (accumulating into the MoE sum), into the routed experts' down launch
// before it, as one more summand of weight 1 read from the shared
// expert's activations. One token, mmv1 kernels rounding their inputs
// themselves. The shared expert may be wider than a routed one
// (deepseek-v2-lite's two make 2816 against 1408: the summand's rows are
// then Kx long) if its rows take as many lanes, so that each lane sums the
// same blocks in the same order as the shared launch would.
func (b *Backend) foldSharedDown() {
	n := len(b.launches)
	if n < 2 || b.T != 1 || b.NoFusion {
		return
	}
	sh, routed := &b.launches[n-1], &b.launches[n-2]
	ms, mr := b.mmv1Of(n-1), b.mmv1Of(n-2)
	if ms == nil || mr == nil ||
		ms.ids != 0 || ms.w2 != 0 || ms.ny != 1 || ms.acc != 1 || ms.nsum != 0 || ms.nw != 0 || ms.y2 != 0 ||
		mr.ids == 0 || mr.nsum == 0 || mr.nr != 0 || mr.ny != 1 || mr.T != 1 || mr.acc != 0 || mr.y2 != 0 || mr.nw != 0 ||
		ms.y != mr.y || ms.N != mr.N || outSpan(mr).overlaps(ms.in.srcSpan) || ms.xsrc == 0 || mr.xsrc == 0 ||
		ms.typ != mr.typ || mmv1Lanes(int(ms.K/32)) != mmv1Lanes(int(mr.K/32)) {
		return
	}
	if ms.K != mr.K {
		mr.Kx, mr.rbx = ms.K, ms.rowBytes
	}
	mr.nr = mr.nsum
	mr.nsum++
	mr.wx, mr.xsrcx, mr.inx = ms.w, ms.xsrc, ms.in.srcSpan
	routed.bytes += sh.bytes
	b.launches = b.launches[:n-1]
	b.relaunch(n - 2)
}

// Add sets dst += src.
func (b *Backend) Add(dst, src backend.Tensor) {
	d, s := tens(dst), tens(src)
	if d.rows != s.rows || d.cols != s.cols {
		panic("cuda: add: shapes differ")
	}
	b.reads(d)
	b.reads(s)
	if b.fuseAdd(d, s) {
		return
	}
	b.writes(d)
	b.record("add", elementGrid(d.rows, d.cols), [3]uint32{256, 1, 1}, int64(d.rows*d.cols)*12,
		uint64(d.ptr), uint64(d.stride), uint64(s.ptr), uint64(s.stride), uint64(d.cols))
}

// fuseAdd folds dst += src into the launch just recorded when that is a
// one-token mmv1 product accumulating into src (the shared expert's down
// projection into the MoE sum): it then also adds each new src value into
// dst, the same float additions as the add kernel's, one launch fewer.
func (b *Backend) fuseAdd(d, s *tensor) bool {
	n := len(b.launches)
	if b.NoFusion || n == 0 || d.rows != 1 || s.rows != 1 {
		return false
	}
	l := &b.launches[n-1]
	m := b.mmv1Of(n - 1)
	if m == nil || m.T != 1 || (m.acc != 1 && m.nsum == 0) || m.ny != 1 ||
		m.y2 != 0 || m.y != s.ptr || int(m.N) != s.cols || spanOf(d).overlaps(spanOf(s)) ||
		spanOf(d).overlaps(m.in.srcSpan) || spanOf(d).overlaps(m.inx) { // the product's blocks still read their inputs
		return false
	}
	m.y2 = d.ptr
	b.rewriteArgs(n - 1)
	l.bytes += int64(8 * d.cols)
	b.writes(d)
	return true
}

// moe_router8's blocks a token (one cluster; ROUTER_CLUSTER in
// kernels/router.cu) and the most experts a block takes (ROUTER8_E).
const (
	routerCluster  = maxCluster
	router8Experts = 8
)

// router8 reports whether moe_router8 serves a router of E experts over K
// values: a fused step on Hopper (clusters), E a multiple of routerCluster
// up to routerCluster·router8Experts, K up to 2048 (kernels/router.cu).
// The unfused step keeps moe_router, which sums every logit in the same
// order, so the fused-as-unfused tests check the two give the same bits.
func (b *Backend) router8(E, K int) bool {
	return !b.NoFusion && b.clusters() && E%routerCluster == 0 && E <= routerCluster*router8Experts && K <= 2048
}

// MoE routes every token to its experts and sets dst to their weighted sum:
// router product, one routing kernel (scores, top-k, weights), the picked
// experts' gate/up in one launch, their down projections in another, and
// the weighted sum.
func (b *Backend) MoE(dst, h backend.Tensor, w *backend.MoE, r *backend.Routing) {
	d, x := tens(dst), tens(h)
	router, gate, down := wt(w.Router), wt(w.Gate), wt(w.Down)
	E, K, T, used := router.dim(1), x.cols, x.rows, r.Used
	upW, ff, gateStride, upOff := w.ExpertRows()
	up := wt(upW)
	if d.rows != T || d.cols != K || router.dim(0) != K || gate.dim(0) != K || down.dim(0) != ff || down.dim(1) != K || used > E || E > 1024 {
		panic(fmt.Sprintf("cuda: moe: h %d×%d, dst %d×%d, router %v, gate %v, down %v, %d used", x.rows, x.cols, d.rows, d.cols, router.dims, gate.dims, down.dims, used))
	}
	in := b.inputOf(x)
	ids := b.scratch(int64(T*used) * 4)
	wts := b.scratch(int64(T*used) * 4)
	var bias uintptr
	if w.Bias != nil {
		bias = wt(w.Bias).ptr
	}
	oneLaunch := router.typ == quant.F32 && K%4 == 0 && in.S == 1 && in.src%16 == 0 // the norm, router rows, scores, top-k and weights
	switch {
	case oneLaunch && b.router8(E, K):
		// one launch, a cluster of blocks a token: the same work and sums
		b.record("moe_router8", grid2(T, routerCluster), [3]uint32{256, 1, 1}, int64(E*K+routerCluster*T*K)*4,
			uint64(ids), uint64(wts), uint64(in.src), uint64(in.rs), uint64(in.norm), f32bits(in.eps),
			uint64(router.ptr), uint64(bias), uint64(K), uint64(E), uint64(used), uint64(b2i(r.Sigmoid)), uint64(b2i(r.Norm)), f32bits(r.Scale))
		b.launches[len(b.launches)-1].clustered = true
	case oneLaunch && T <= maxCounters:
		logits := b.scratch(int64(T*E) * 4)
		b.record("moe_router", grid2(E, T), [3]uint32{256, 1, 1}, int64(E*K+T*K)*4,
			uint64(ids), uint64(wts), uint64(logits), uint64(b.counters), uint64(in.src), uint64(in.rs), uint64(in.norm), f32bits(in.eps),
			uint64(router.ptr), uint64(bias), uint64(K), uint64(E), uint64(used), uint64(b2i(r.Sigmoid)), uint64(b2i(r.Norm)), f32bits(r.Scale))
	default:
		logits := b.scratch(int64(T*E) * 4)
		b.product(router, in, output{N: E, y: logits, ys: int64(E), T: T, ny: 1, xRows: 1})
		b.record("moe_route", grid1(T), [3]uint32{32, 1, 1}, int64(T*E)*4,
			uint64(ids), uint64(wts), uint64(logits), uint64(bias), uint64(E), uint64(used), uint64(b2i(r.Sigmoid)), uint64(b2i(r.Norm)), f32bits(r.Scale))
	}
	P := T * used // one problem per (token, picked expert)
	act := &tensor{ptr: b.scratch(int64(P*ff) * 4), rows: P, cols: ff, stride: ff}
	experts := output{N: ff, y: act.ptr, yY: int64(ff), T: 1, ids: ids, wY: int64(gateStride), ny: P, xY: 1, xDiv: int64(used)}
	if fastTypes[gate.typ] && gate.typ == up.typ && up.rowBytes == gate.rowBytes && !b.NoFusion {
		experts.up, experts.upOff = up, int64(upOff)
		b.product(gate, in, experts)
	} else {
		u := b.scratch(int64(P*ff) * 4)
		b.product(gate, in, experts)
		upw := *up
		upw.ptr += uintptr(int64(upOff) * up.rowBytes)
		experts.y = u
		b.product(&upw, in, experts)
		b.record("swiglu", elementGrid(P, ff), [3]uint32{256, 1, 1}, int64(P*ff)*12,
			uint64(act.ptr), uint64(ff), uint64(act.ptr), uint64(ff), uint64(u), uint64(ff), uint64(ff))
	}
	ain := input{src: act.ptr, rs: int64(ff), rows: P, S: 1, L: ff, srcSpan: spanOf(act)}
	if fastTypes[down.typ] && !b.NoFusion {
		// down projections and their weighted sum in one launch
		b.writes(d)
		b.product(down, ain, output{N: K, y: d.ptr, yY: int64(d.stride), T: 1, ids: ids, wY: int64(K), ny: T, xY: 1, xDiv: 1,
			wts: wts, nsum: used})
		return
	}
	outs := b.scratch(int64(P*K) * 4)
	b.product(down, ain, output{N: K, y: outs, yY: int64(K), T: 1, ids: ids, wY: int64(K), ny: P, xY: 1, xDiv: 1})
	b.writes(d)
	b.record("moe_combine", elementGrid(T, K), [3]uint32{256, 1, 1}, int64(P*K+T*K)*4,
		uint64(d.ptr), uint64(d.stride), uint64(outs), uint64(wts), uint64(used), uint64(K))
}

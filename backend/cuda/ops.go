package cuda

import (
	"fmt"

	"github.com/latent-ai/latent/backend"
)

// mv mirrors the kernels' struct MV (kernels/matmul.cu): y (+)= x·Wᵀ for
// ny problems; see there for the meaning of each field.
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

func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// matvec records y (+)= x·Wᵀ over ny problems with the generic kernels:
// one warp per output row for a few tokens, shared-memory tiles for more.
func (b *Backend) matvec(w *weight, m mv, ny int) {
	m.w, m.rowBytes = w.ptr, w.rowBytes
	tn := deviceTypes[w.typ]
	bytes := int64(ny)*m.N*m.rowBytes + 4*m.T*int64(ny)*(m.K+m.N)
	if m.T <= 4 {
		b.recordStruct("gemv_"+tn, grid2(ceilDiv(int(m.N), 8), ny), [3]uint32{256, 1, 1}, bytes, m.slots()...)
		return
	}
	b.recordStruct("gemm_"+tn, grid3(ceilDiv(int(m.N), 64), ceilDiv(int(m.T), 64), ny), [3]uint32{256, 1, 1}, bytes, m.slots()...)
}

// act is a batch of activations as a matmul reads them.
type act struct {
	ptr    uintptr
	rs, sy int64 // row stride, segment stride (floats)
}

// prep rounds rows × S segments of L values (segment s of row r at
// src + r·rs + s·segStride) as ggml rounds activations for weights of type
// mode, optionally RMS-normalising each row first (S must be 1 then), into
// contiguous scratch. Without rounding or norm the source is used as it is.
func (b *Backend) prep(src uintptr, rs int64, rows, S, L int, segStride int64, mode int, norm uintptr, eps float32) act {
	if mode == 0 && norm == 0 {
		return act{ptr: src, rs: rs, sy: segStride}
	}
	out := b.scratch(int64(rows*S*L) * 4)
	b.record("prep", grid1(rows*S), [3]uint32{256, 1, 1}, int64(rows*S*L)*8,
		uint64(out), uint64(src), uint64(rs), uint64(segStride), uint64(S), uint64(L), uint64(norm), f32bits(eps), uint64(mode))
	return act{ptr: out, rs: int64(S * L), sy: int64(L)}
}

func checkMatMul(op string, d *tensor, w *weight, s *tensor) {
	if d.rows != s.rows || w.dim(0) != s.cols || int(w.rows) != d.cols {
		panic(fmt.Sprintf("cuda: %s: %s %v against src %d×%d, dst %d×%d", op, w.name, w.dims, s.rows, s.cols, d.rows, d.cols))
	}
}

func (b *Backend) matmul(d *tensor, w *weight, s *tensor, accumulate bool) {
	a := b.prep(s.ptr, int64(s.stride), s.rows, 1, s.cols, 0, roundMode(w.typ), 0, 0)
	b.matvec(w, mv{K: int64(s.cols), N: int64(d.cols), x: a.ptr, xs: a.rs, y: d.ptr, ys: int64(d.stride),
		T: int64(s.rows), acc: b2i(accumulate)}, 1)
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
	b.record("embed_"+deviceTypes[w.typ], grid1(d.rows), [3]uint32{256, 1, 1}, int64(d.rows)*(w.rowBytes+int64(4*d.cols)),
		uint64(d.ptr), uint64(d.stride), uint64(w.ptr), uint64(w.rowBytes), uint64(d.cols), uint64(b.tokensDev()))
}

// RMSNorm normalises each row and scales by w.
func (b *Backend) RMSNorm(dst, src backend.Tensor, w backend.Weight, eps float32) {
	d, s, g := tens(dst), tens(src), wt(w)
	if d.rows != s.rows || d.cols != s.cols || g.dim(0) != s.cols {
		panic(fmt.Sprintf("cuda: rmsnorm: %d×%d from %d×%d with %s %v", d.rows, d.cols, s.rows, s.cols, g.name, g.dims))
	}
	b.record("rmsnorm", grid1(s.rows), [3]uint32{256, 1, 1}, int64(s.rows*s.cols)*8,
		uint64(d.ptr), uint64(d.stride), uint64(s.ptr), uint64(s.stride), uint64(g.ptr), f32bits(eps), uint64(s.cols))
}

// RoPE rotates adjacent pairs at the pass's positions.
func (b *Backend) RoPE(t backend.Tensor, stride, off, n int, r *backend.Rope) {
	x := tens(t)
	if x.rows != b.T || n > 2*len(r.Freqs) || off+n > stride {
		panic(fmt.Sprintf("cuda: rope: %d rows for %d tokens, %d values from %d in heads of %d", x.rows, b.T, n, off, stride))
	}
	b.record("rope", grid1(x.rows), [3]uint32{256, 1, 1}, int64(x.rows*x.cols/stride*n)*8,
		uint64(x.ptr), uint64(x.stride), uint64(x.cols), uint64(stride), uint64(off), uint64(n), uint64(b.posDev()), uint64(b.ropeFreqs(r)))
}

// CacheStore writes the pass's rows of src into layer's cache.
func (b *Backend) CacheStore(c backend.Cache, layer int, src backend.Tensor) {
	k, s := c.(*kvCache), tens(src)
	if s.cols != k.width || s.rows != b.T || layer < 0 || layer >= k.layers {
		panic(fmt.Sprintf("cuda: cache store: %d×%d into layer %d of a cache %d wide", s.rows, s.cols, layer, k.width))
	}
	b.record("cache_store", grid1(s.rows), [3]uint32{256, 1, 1}, int64(s.rows*s.cols)*(4+k.esize),
		uint64(k.layer(layer)), uint64(s.ptr), uint64(s.stride), uint64(b.posDev()))
}

// splits is the number of position ranges attention divides the cache
// into: fixed per context so that one recorded decode step serves all.
func (b *Backend) splits() int {
	return min(32, max(1, b.kv.positions/128))
}

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
	// query [T][H][W]: q_lat = k_b[h]·q_nope[h], then q_pe
	query := b.scratch(int64(T*H*W) * 4)
	a := b.prep(qq.ptr, int64(qq.stride), T, H, nope, int64(nope+rope), roundMode(kbw.typ), 0, 0)
	b.matvec(kbw, mv{K: int64(nope), N: int64(kvl), x: a.ptr, xs: a.rs, xY: a.sy, y: query, ys: int64(H * W), yY: int64(W),
		T: int64(T), wY: int64(kvl)}, H)
	b.record("attn_query", grid1(T), [3]uint32{256, 1, 1}, int64(T*H*rope)*8,
		uint64(query), uint64(qq.ptr), uint64(qq.stride), uint64(H), uint64(nope))
	S := b.splits()
	part := b.scratch(int64(T*H*S*(kvl+2)) * 4)
	olat := b.scratch(int64(T*H*kvl) * 4)
	b.record("attn_partial", grid2(T*H, S), [3]uint32{128, 1, 1}, int64(T*H)*int64(b.maxPos+1)*int64(W)*k.esize,
		uint64(part), uint64(query), uint64(k.layer(layer)), uint64(b.posDev()), uint64(H), uint64(S), f32bits(scale))
	b.record("attn_combine", grid1(T*H), [3]uint32{256, 1, 1}, int64(T*H*(S+1)*(kvl+2))*4,
		uint64(olat), uint64(part), uint64(S))
	// o[h] = v_b[h]·o_lat[h]
	o := b.prep(olat, int64(H*kvl), T, 1, H*kvl, 0, roundMode(vbw.typ), 0, 0)
	b.matvec(vbw, mv{K: int64(kvl), N: int64(vdim), x: o.ptr, xs: o.rs, xY: int64(kvl), y: d.ptr, ys: int64(d.stride), yY: int64(vdim),
		T: int64(T), wY: int64(vdim)}, H)
}

func elementGrid(rows, cols int) [3]uint32 { return grid2(min(ceilDiv(cols, 256), 1024), rows) }

// SwiGLU sets dst = silu(gate) · up.
func (b *Backend) SwiGLU(dst, gate, up backend.Tensor) {
	d, g, u := tens(dst), tens(gate), tens(up)
	if d.rows != g.rows || d.rows != u.rows || d.cols != g.cols || d.cols != u.cols {
		panic("cuda: swiglu: shapes differ")
	}
	b.record("swiglu", elementGrid(d.rows, d.cols), [3]uint32{256, 1, 1}, int64(d.rows*d.cols)*12,
		uint64(d.ptr), uint64(d.stride), uint64(g.ptr), uint64(g.stride), uint64(u.ptr), uint64(u.stride), uint64(d.cols))
}

// Add sets dst += src.
func (b *Backend) Add(dst, src backend.Tensor) {
	d, s := tens(dst), tens(src)
	if d.rows != s.rows || d.cols != s.cols {
		panic("cuda: add: shapes differ")
	}
	b.record("add", elementGrid(d.rows, d.cols), [3]uint32{256, 1, 1}, int64(d.rows*d.cols)*12,
		uint64(d.ptr), uint64(d.stride), uint64(s.ptr), uint64(s.stride), uint64(d.cols))
}

// MoE routes every token to its experts and sets dst to their weighted sum.
func (b *Backend) MoE(dst, h backend.Tensor, w *backend.MoE, r *backend.Routing) {
	d, x := tens(dst), tens(h)
	router, gate, down := wt(w.Router), wt(w.Gate), wt(w.Down)
	E, K, T, used := router.dim(1), x.cols, x.rows, r.Used
	ff := gate.dim(1)
	up, gateStride, upOff := gate, ff, 0
	if w.Up != nil {
		up = wt(w.Up)
	} else {
		ff /= 2
		gateStride, upOff = 2*ff, ff
	}
	if d.rows != T || d.cols != K || router.dim(0) != K || gate.dim(0) != K || down.dim(0) != ff || down.dim(1) != K || used > E || E > 1024 {
		panic(fmt.Sprintf("cuda: moe: h %d×%d, dst %d×%d, router %v, gate %v, down %v, %d used", x.rows, x.cols, d.rows, d.cols, router.dims, gate.dims, down.dims, used))
	}
	logits := &tensor{ptr: b.scratch(int64(T*E) * 4), rows: T, cols: E, stride: E}
	b.matmul(logits, router, x, false)
	ids := b.scratch(int64(T*used) * 4)
	wts := b.scratch(int64(T*used) * 4)
	var bias uintptr
	if w.Bias != nil {
		bias = wt(w.Bias).ptr
	}
	b.record("moe_route", grid1(T), [3]uint32{32, 1, 1}, int64(T*E)*4,
		uint64(ids), uint64(wts), uint64(logits.ptr), uint64(bias), uint64(E), uint64(used), uint64(b2i(r.Sigmoid)), uint64(b2i(r.Norm)), f32bits(r.Scale))
	P := T * used // one problem per (token, picked expert)
	g := b.scratch(int64(P*ff) * 4)
	u := b.scratch(int64(P*ff) * 4)
	ag := b.prep(x.ptr, int64(x.stride), T, 1, K, 0, roundMode(gate.typ), 0, 0)
	b.matvec(gate, mv{K: int64(K), N: int64(ff), x: ag.ptr, xY: ag.rs, xDiv: int64(used), y: g, yY: int64(ff), T: 1,
		ids: ids, wY: int64(gateStride)}, P)
	au := ag
	if roundMode(up.typ) != roundMode(gate.typ) {
		au = b.prep(x.ptr, int64(x.stride), T, 1, K, 0, roundMode(up.typ), 0, 0)
	}
	upw := *up
	upw.ptr += uintptr(int64(upOff) * up.rowBytes)
	b.matvec(&upw, mv{K: int64(K), N: int64(ff), x: au.ptr, xY: au.rs, xDiv: int64(used), y: u, yY: int64(ff), T: 1,
		ids: ids, wY: int64(gateStride)}, P)
	b.record("swiglu", elementGrid(P, ff), [3]uint32{256, 1, 1}, int64(P*ff)*12,
		uint64(g), uint64(ff), uint64(g), uint64(ff), uint64(u), uint64(ff), uint64(ff))
	a := b.prep(g, int64(ff), P, 1, ff, 0, roundMode(down.typ), 0, 0)
	outs := b.scratch(int64(P*K) * 4)
	b.matvec(down, mv{K: int64(ff), N: int64(K), x: a.ptr, xY: a.rs, y: outs, yY: int64(K), T: 1, ids: ids, wY: int64(K)}, P)
	b.record("moe_combine", elementGrid(T, K), [3]uint32{256, 1, 1}, int64(P*K+T*K)*4,
		uint64(d.ptr), uint64(d.stride), uint64(outs), uint64(wts), uint64(used), uint64(K))
}

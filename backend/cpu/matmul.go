package cpu

import (
	"fmt"

	"github.com/latent-ai/latent/quant"
)

// acts is one matmul's input batch, converted once to what the weight's
// kernel reads: 8-bit blocks for the integer kernels, rounded float32 rows
// for the float path. Its buffers grow to the largest batch and are reused.
type acts struct {
	rows int
	k    int // values per row

	qs    []int8
	d     []float32
	bsums []int16
	b8    []int32   // Q8_0: 8× the sum of each block
	f     []float32 // rows × k, when the float path runs
	rs    []arow    // row(t), cut once per batch
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// prepare converts rows [0, s.rows) of s, columns [off, off+k), for a weight
// of type typ; quantized when an integer kernel will run, else as floats.
func (a *acts) prepare(s *tensor, off, k int, typ quant.Type, integer bool) {
	T := s.rows
	a.rows, a.k = T, k
	x := func(t int) []float32 { return s.data[t*s.stride+off : t*s.stride+off+k] }
	if !integer {
		a.f = grow(a.f, T*k)
		round := actRounding(typ)
		for t := 0; t < T; t++ {
			if round != nil {
				round(x(t), a.f[t*k:(t+1)*k])
			} else {
				copy(a.f[t*k:(t+1)*k], x(t))
			}
		}
		return
	}
	a.qs = grow(a.qs, T*k)
	a.rs = grow(a.rs, T)
	switch actFormatOf(typ) {
	case actQ8_0:
		nb := k / 32
		a.d = grow(a.d, T*nb)
		a.b8 = grow(a.b8, T*nb)
		for t := range a.rs {
			r := arow{qs: a.qs[t*k : (t+1)*k], d: a.d[t*nb : (t+1)*nb], b8: a.b8[t*nb : (t+1)*nb]}
			quantRowQ8_0(x(t), r.qs, r.d, r.b8)
			a.rs[t] = r
		}
	case actQ8K:
		nb := k / quant.QK_K
		a.d = grow(a.d, T*nb)
		a.bsums = grow(a.bsums, T*k/16)
		for t := range a.rs {
			r := arow{qs: a.qs[t*k : (t+1)*k], d: a.d[t*nb : (t+1)*nb], bsums: a.bsums[t*k/16 : (t+1)*k/16]}
			xt := x(t)
			for b := range r.d {
				o := b * quant.QK_K
				r.d[b] = quantQ8K(xt[o:o+quant.QK_K], r.qs[o:o+quant.QK_K], r.bsums[o/16:o/16+16])
			}
			a.rs[t] = r
		}
	default:
		panic(fmt.Sprintf("cpu: no integer kernel for %s", typ))
	}
}

// row is token t's quantized activations.
func (a *acts) row(t int) arow { return a.rs[t] }

// quad is the first of activation rows t, t+step, t+2·step and t+3·step,
// which a four-token kernel reads step·k bytes apart, once it has checked
// that the last is there.
func (a *acts) quad(t, step int) *arow {
	_ = a.rs[t+3*step]
	return &a.rs[t]
}

// kernels is the dot-product kernel chosen for each weight type at start:
// SIMD where the CPU has it, the pure-Go kernel otherwise. LATENT_CPU=generic
// forces the pure-Go kernels, LATENT_CPU=avx2 the AVX2 ones on a CPU with
// AVX-512 VNNI (the tests run every set).
var kernels, kernelSet = chooseKernels(forcedSet)

func chooseKernels(force string) (map[quant.Type]kernel, string) {
	ks := make(map[quant.Type]kernel, len(genericKernels))
	for t, k := range genericKernels {
		ks[t] = k
	}
	name := "generic"
	if force != "generic" {
		name = addSIMDKernels(ks, force)
	}
	return ks, name
}

// mmJob computes dst[t][dstOff+o] (+)= W[rowOff+o] · src[t] for output rows
// o in the ranges the pool hands out. Rows go in tiles so that a weight row,
// read from memory once, is used for every token of the batch while it is in
// the L1 cache; the batch's activations stay in L2.
//
// With heads > 0 the weight is one matrix of per rows for each head, head h
// reads activation rows h, h+heads, ... (one per token) and writes from
// column dstOff+h·dstStride: every head's product in one pool job.
type mmJob struct {
	c          *CPU
	d          *tensor
	dstOff     int
	w          *weight
	rowOff     int
	a          *acts
	kern       kernel
	accumulate bool

	heads, per, dstStride int
}

func (j *mmJob) do(lo, hi, worker int) {
	if j.heads == 0 {
		j.rows(lo, hi, worker, 0, 1, j.dstOff)
		return
	}
	for lo < hi {
		h := lo / j.per
		e := min(hi, (h+1)*j.per)
		j.rows(lo, e, worker, h, j.heads, j.dstOff+h*(j.dstStride-j.per))
		lo = e
	}
}

// rows computes output rows [lo, hi) for the tokens whose activations are
// rows first, first+step, ... of j.a, storing row o at column col+o.
func (j *mmJob) rows(lo, hi, worker, first, step, col int) {
	w, a := j.w, j.a
	rb := w.rowBytes
	T := (a.rows - first + step - 1) / step
	at := func(t int) int { return first + t*step } // token t's activation row
	if w.packed != nil && (j.rowOff+lo)%8 == 0 {
		// Eight packed rows at a time, by four tokens while there are four.
		out := &j.c.tiles8[worker]
		for ; lo+8 <= hi; lo += 8 {
			r := j.rowOff + lo
			rows := w.packed[r*rb : (r+8)*rb]
			t := 0
			for ; t+4 <= T; t += 4 {
				j.kern.tile8(rows, rb, a, at(t), step, out)
				for i := 0; i < 4; i++ {
					j.put8(t+i, col+lo, (*[8]float32)(out[8*i:]))
				}
			}
			for ; t < T; t++ {
				j.kern.rows8(rows, rb, a.row(at(t)), (*[16]float32)(out[:16]))
				j.put8(t, col+lo, (*[8]float32)(out[:8]))
			}
		}
	}
	if j.kern.rows4 != nil && (j.kern.tile != nil || j.kern.four == nil || T < 4) {
		// Four rows at a time, by four tokens while there are four; the
		// rest as below. A kernel with four but no tile runs four tokens
		// a row at a time instead.
		out := &j.c.tiles[worker]
		for ; lo+4 <= hi; lo += 4 {
			r := j.rowOff + lo
			rows := w.data[r*rb : (r+4)*rb]
			t := 0
			if j.kern.tile != nil {
				for ; t+4 <= T; t += 4 {
					j.kern.tile(rows, rb, a, at(t), step, out)
					for i := 0; i < 16; i++ {
						j.put(t+i/4, col+lo+i%4, out[i])
					}
				}
			}
			for ; t < T; t++ {
				j.kern.rows4(rows, rb, a.row(at(t)), out)
				for i := 0; i < 4; i++ {
					j.put(t, col+lo+i, out[i])
				}
			}
		}
	}
	for o := lo; o < hi; o++ {
		r := j.rowOff + o
		if j.kern.one != nil {
			row := w.data[r*rb : (r+1)*rb]
			t := 0
			if j.kern.four != nil {
				out := &j.c.quads[worker]
				for ; t+4 <= T; t += 4 {
					j.kern.four(row, a, at(t), step, out)
					for i, v := range out {
						j.put(t+i, col+o, v)
					}
				}
			}
			for ; t < T; t++ {
				j.put(t, col+o, j.kern.one(row, a.row(at(t))))
			}
			continue
		}
		row := w.decodeRow(r, j.c.bufs[worker])
		for t := 0; t < T; t++ {
			x := a.f[at(t)*a.k : (at(t)+1)*a.k]
			if w.typ == quant.F32 {
				j.put(t, col+o, dotF32Tiny(row, x)) // the router: ggml's order, see ggmlorder.go
			} else {
				j.put(t, col+o, dot(row, x))
			}
		}
	}
}

// put8 stores (or adds) v at token t's columns c..c+7.
func (j *mmJob) put8(t, c int, v *[8]float32) {
	i := t*j.d.stride + c
	dst := (*[8]float32)(j.d.data[i : i+8])
	if !j.accumulate {
		*dst = *v
		return
	}
	for r := range dst {
		dst[r] += v[r]
	}
}

// put stores (or adds) v at token t's column c.
func (j *mmJob) put(t, c int, v float32) {
	i := t*j.d.stride + c
	if j.accumulate {
		j.d.data[i] += v
	} else {
		j.d.data[i] = v
	}
}

// matmul computes dst[t][dstOff+o] (+)= W[rowOff+o] · src[t][srcOff:] for o
// in [0, out), splitting output rows across workers.
func (c *CPU) matmul(d *tensor, dstOff, out int, w *weight, rowOff int, s *tensor, srcOff int, accumulate bool) {
	j := c.prepareMatMul(w, s, srcOff)
	j.d, j.dstOff, j.rowOff, j.accumulate = d, dstOff, rowOff, accumulate
	c.runMatMul(out)
}

// prepareMatMul converts columns [srcOff, srcOff+w.dims[0]) of s for w's
// kernel and returns c.mm set to multiply them by w; the caller says where
// the products go.
func (c *CPU) prepareMatMul(w *weight, s *tensor, srcOff int) *mmJob {
	k := kernels[w.typ]
	c.act.prepare(s, srcOff, int(w.dims[0]), w.typ, k.one != nil)
	c.mm = mmJob{c: c, w: w, a: &c.act, kern: k}
	return &c.mm
}

// runMatMul runs c.mm over out output rows, its activations prepared.
func (c *CPU) runMatMul(out int) {
	if c.mm.kern.one == nil {
		c.scratch(c.act.k)
	}
	align := 4
	if c.mm.w.packed != nil {
		align = 8
	}
	c.pool.run(out, split(out, c.pool.n, align), &c.mm)
}

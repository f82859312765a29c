// Command asm generates the CPU backend's amd64 dot-product kernels with avo:
//
//	go generate ./backend/cpu   (runs: go run ./asm -out dot_amd64.s -stubs dot_amd64_stub.go -pkg cpu)
//
// Each kernel multiplies weight rows in their file encoding by tokens'
// activations quantized to Q8_0 blocks (int8 values, a float32 scale per
// block of 32, and b8: 8× the sum of each block's values), and computes in
// exactly the float order of ggml's x86 AVX2 kernels (see ggmlorder.go): the
// results are bit for bit those of the pure-Go kernels.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	Package("github.com/latent-ai/latent/backend/cpu")
	ConstraintExpr("amd64")

	nibbles := GLOBL("nibbleMask", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0f0f0f0f0f0f0f0f))
	}
	ones := GLOBL("onesI16", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0001000100010001))
	}

	for _, n := range []int{1, 4} {
		dotQ8_0AVX2(n, ones)
	}
	for _, n := range []int{1, 4} {
		dotQ4_0Rows4AVX2(n, nibbles, ones)
	}
	// Decode streams the weights from memory once: prefetching 1 KB ahead
	// measured 10 GB/s on one core against 7.2 without.
	for _, vnni := range []bool{false, true} {
		dotQ4_0Packed8x1(nibbles, ones, 1024, vnni)
		dotQ4_0Packed8x4(nibbles, ones, vnni)
	}
	kc := kQuantConsts(nibbles)
	dotQ4KRows4AVX2(kc)
	dotQ6KRows4AVX2(kc)
	for _, n := range []int{1, 4} {
		dotQ4KAVX2(n, kc)
		dotQ5KAVX2(n, kc)
		dotQ6KAVX2(n, kc)
	}
	dotF32VecAVX2()
	fmaAxpyAVX2()
	quantQ8_0AVX2()
	Generate()
}

// ptr loads pointer parameter name: the memory it points at.
func ptr(name string) Mem { return Mem{Base: Load(Param(name), GP64())} }

// x3 returns a new register holding 3·r.
func x3(r Register) Register {
	t := GP64()
	LEAQ(Mem{Base: r, Index: r, Scale: 2}, t)
	return t
}

// zeroed returns n new vector registers from newReg, cleared.
func zeroed(n int, newReg func() VecVirtual) []VecVirtual {
	acc := make([]VecVirtual, n)
	for i := range acc {
		acc[i] = newReg()
		VXORPS(acc[i], acc[i], acc[i])
	}
	return acc
}

// tokAddr returns the address of token t's data at m, tokens s bytes apart
// (s3 = 3s).
func tokAddr(m Mem, t int, s, s3 Register) Mem {
	switch t {
	case 0:
		return m
	case 1:
		return Mem{Base: m.Base, Index: s, Scale: 1, Disp: m.Disp}
	case 2:
		return Mem{Base: m.Base, Index: s, Scale: 2, Disp: m.Disp}
	}
	return Mem{Base: m.Base, Index: s3, Scale: 1, Disp: m.Disp}
}

// tokStrides loads parameter k, the bytes from one token's values to the
// next, and returns it with kd = k/8 (the same step in the four-byte
// per-block arrays) and, for n = 4 tokens, k3 = 3k and kd3 = 3kd.
func tokStrides(n int) (k, kd, k3, kd3 Register) {
	k = Load(Param("k"), GP64())
	kd = GP64()
	MOVQ(k, kd)
	SHRQ(U8(3), kd)
	if n == 4 {
		k3, kd3 = x3(k), x3(kd)
	}
	return k, kd, k3, kd3
}

// fourRows is the four rows from base b, ws bytes apart (ws3 = 3ws).
func fourRows(b, ws, ws3 Register) [4]Mem {
	return [4]Mem{{Base: b}, {Base: b, Index: ws, Scale: 1}, {Base: b, Index: ws, Scale: 2}, {Base: b, Index: ws3, Scale: 1}}
}

// fourRowsAndNext loads parameters w and wstride and returns the four rows
// from w, wstride bytes apart, and the four after them, which the kernels
// prefetch (the rows stream from memory one group of four after the
// other), with their bases.
func fourRowsAndNext() (rows, next [4]Mem, b0, nx Register) {
	b0 = Load(Param("w"), GP64())
	ws := Load(Param("wstride"), GP64())
	ws3 := x3(ws)
	nx = GP64()
	LEAQ(Mem{Base: b0, Index: ws, Scale: 4}, nx)
	return fourRows(b0, ws, ws3), fourRows(nx, ws, ws3), b0, nx
}

// step is a pointer register and the bytes it advances per block.
type step struct {
	r Register
	n int
}

// blockLoop emits the loop over nb blocks: body, then every pointer
// advanced by its step; label names its labels.
func blockLoop(label string, nb Register, body func(), steps ...step) {
	Label(label + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(label + "_done"))
	body()
	for _, s := range steps {
		ADDQ(U32(s.n), s.r)
	}
	DECQ(nb)
	JMP(LabelRef(label + "_loop"))
	Label(label + "_done")
}

// broadcastF16 returns a new register holding the f16 at m, widened, in
// every float lane.
func broadcastF16(m Mem) VecVirtual {
	h, v := GP32(), YMM()
	MOVWLZX(m, h)
	VMOVD(h, v.AsX())
	VCVTPH2PS(v.AsX(), v.AsX())
	VBROADCASTSS(v.AsX(), v)
	return v
}

// storeHsums stores hsum8 of each accumulator at parameter out, 4 bytes
// apart, and returns.
func storeHsums(acc []VecVirtual) {
	out := ptr("out")
	for t := range acc {
		VMOVSS(hsum8(acc[t]), out.Offset(4*t))
	}
	VZEROUPPER()
	RET()
}

// storeAndReturn stores the accumulators at parameter out, size bytes
// apart, and returns.
func storeAndReturn(acc []VecVirtual, size int) {
	out := ptr("out")
	for t := range acc {
		VMOVUPS(acc[t], out.Offset(size*t))
	}
	VZEROUPPER()
	RET()
}

// dotQ8_0AVX2 emits dotQ8_0x{n}AVX2: one Q8_0 weight row by n tokens, as
// ggml_vec_dot_q8_0_q8_0 on AVX2. Per block the weight's 32 values are
// loaded once; for each token VPSIGNB/VPABSB make the products unsigned by
// signed for VPMADDUBSW, VPMADDWD sums pairs into eight int32 lanes (lane l:
// values 4l..4l+3), and one FMA adds them, scaled by d_w·d_a, into the
// token's accumulator. The lanes are summed at the end as hsum_float_8.
func dotQ8_0AVX2(n int, ones Mem) {
	name := fmt.Sprintf("dotQ8_0x%dAVX2", n)
	TEXT(name, NOSPLIT, "func(w *byte, qs *int8, d *float32, nb int, k int, out *float32)")
	Doc(fmt.Sprintf("%s writes to out the dot products of a Q8_0 row of nb blocks with %d tokens' Q8_0 activations, k bytes apart in qs (k/8 in d).", name, n))
	Pragma("noescape")
	w, qs, d := ptr("w"), ptr("qs"), ptr("d")
	nb := Load(Param("nb"), GP64())
	k, kd, k3, kd3 := tokStrides(n)
	acc := zeroed(n, YMM)
	one := YMM()
	VMOVDQU(ones, one)

	blockLoop(name, nb, func() {
		dw := broadcastF16(w)
		wq, wabs := YMM(), YMM()
		VMOVDQU(w.Offset(2), wq)
		VPABSB(wq, wabs)
		for t := 0; t < n; t++ {
			p, sc, a := YMM(), YMM(), YMM()
			VBROADCASTSS(tokAddr(d, t, kd, kd3), sc)
			VMULPS(sc, dw, sc) // d_w·d_a
			VMOVDQU(tokAddr(qs, t, k, k3), a)
			VPSIGNB(wq, a, a)
			VPMADDUBSW(a, wabs, p)
			VPMADDWD(one, p, p)
			VCVTDQ2PS(p, p)
			VFMADD231PS(p, sc, acc[t])
		}
	}, step{w.Base, 34}, step{qs.Base, 32}, step{d.Base, 4})

	storeHsums(acc)
}

// hsum8 sums the eight float lanes of v as ggml's hsum_float_8: (hi+lo),
// then movehl, then movehdup; the sum is in lane 0 of the returned register
// (v's own, clobbered).
func hsum8(v VecVirtual) Register { return hfold8(v, VADDPS, VADDSS) }

// hfold8 reduces the eight float lanes of v in hsum_float_8's order with a
// packed op8 and a scalar op1 of the same operation (add, max); the result
// is in lane 0 of the returned register (v's own, clobbered).
func hfold8(v VecVirtual, op8, op1 func(...Op)) Register {
	x, u := v.AsX(), XMM()
	VEXTRACTF128(U8(1), v, u)
	op8(u, x, x)
	VMOVHLPS(x, x, u)
	op8(u, x, x)
	VMOVSHDUP(x, u)
	op1(u, x, x)
	return x
}

// dotQ4_0Rows4AVX2 emits dotQ4_0r4x{n}AVX2: four Q4_0 weight rows (wstride
// bytes apart) by n tokens, in the order of ggml's repacked Q4_0 kernels:
// each output (row, token) is one chain acc = fma(Σ_block, d_w·d_a, acc),
// here with the four rows in the four float lanes of an XMM register.
//
// Per block, each row's 16 nibble bytes are broadcast to both halves of a
// YMM register (a load, no shuffle), the upper half shifted right by 4 and
// masked: [low nibbles | high nibbles] lines up with the token's 32 values.
// VPMADDUBSW and VPMADDWD give eight int32 partial sums per row; three
// VPHADDD and one add reduce four rows to their four block sums, and the
// −8 offset of Q4_0 comes off as 8·Σa (b8), once per block and token. The
// four rows' f16 scales are gathered through one general register.
func dotQ4_0Rows4AVX2(n int, nibbles, ones Mem) {
	name := fmt.Sprintf("dotQ4_0r4x%dAVX2", n)
	TEXT(name, NOSPLIT, "func(w *byte, wstride int, qs *int8, d *float32, b8 *int32, nb int, k int, out *float32)")
	Doc(fmt.Sprintf("%s writes out[4t+r], the dot products of Q4_0 rows r = 0..3 (wstride bytes apart, nb blocks) with tokens t < %d (Q8_0 activations k bytes apart in qs, k/8 in d and b8).", name, n))
	Pragma("noescape")
	b0 := Load(Param("w"), GP64())
	ws := Load(Param("wstride"), GP64())
	rows := fourRows(b0, ws, x3(ws))
	qs, d, b8 := ptr("qs"), ptr("d"), ptr("b8")
	nb := Load(Param("nb"), GP64())
	k, kd, k3, kd3 := tokStrides(n)
	acc := zeroed(n, XMM)

	blockLoop(name, nb, func() {
		// The four rows' scales: f16 ×4 packed in a general register, widened.
		g, g1 := GP64(), GP64()
		MOVWQZX(rows[0], g)
		for r := 1; r < 4; r++ {
			MOVWQZX(rows[r], g1)
			SHLQ(U8(16*r), g1)
			ORQ(g1, g)
		}
		dw := XMM()
		VMOVQ(g, dw)
		VCVTPH2PS(dw, dw)
		var wq [4]VecVirtual
		for r := range wq {
			wq[r] = YMM()
			hi := YMM()
			VBROADCASTI128(rows[r].Offset(2), wq[r])
			VPSRLW(U8(4), wq[r], hi)
			VPBLENDD(U8(0xf0), hi, wq[r], wq[r])
			VPAND(nibbles, wq[r], wq[r])
		}
		for t := 0; t < n; t++ {
			a := tokAddr(qs, t, k, k3)
			var p [4]VecVirtual
			for r := range p {
				p[r] = YMM()
				VPMADDUBSW(a, wq[r], p[r])
				VPMADDWD(ones, p[r], p[r])
			}
			s, off := hsumI32(p[:]), XMM()
			VPBROADCASTD(tokAddr(b8, t, kd, kd3), off)
			VPSUBD(off, s, s)
			VCVTDQ2PS(s, s)
			sc := XMM()
			VBROADCASTSS(tokAddr(d, t, kd, kd3), sc)
			VMULPS(sc, dw, sc) // d_w·d_a
			VFMADD231PS(sc, s, acc[t])
		}
	}, step{b0, 18}, step{qs.Base, 32}, step{d.Base, 4}, step{b8.Base, 4})

	storeAndReturn(acc, 16)
}

// The eight-row Q4_0 kernels read weights repacked at load (see
// packQ4_0x8 in simd_amd64.go): per block of eight rows, 144 bytes, the
// rows' eight f16 scales, then four 32-byte chunks, chunk j holding bytes
// 4j..4j+3 of each row's 16 nibble bytes, row r in int32 lane r. The rows
// stream from one address, the scales widen with one VCVTPH2PS, and every
// product lands in its row's lane: no gather, shuffle or horizontal add.

// isa names a kernel's instruction set.
func isa(vnni bool) string {
	if vnni {
		return "VNNI"
	}
	return "AVX2"
}

// packedQ4_0 is the size of one packed block of eight rows.
const packedQ4_0 = 144

// blockSum returns the eight rows' exact int32 block sums Σ nibble·a (row r
// in lane r): per chunk, low nibbles times the token's values 4j..4j+3 and
// high nibbles times values 16+4j.., each broadcast to every lane by act.
//
// With AVX-512 VNNI, eight VPDPBUSD (the dword broadcast from memory) do it
// all. Without, VPMADDUBSW gives int16 pair sums of at most 2·15·127 = 3810,
// the eight of a lane add to at most 30480, so the int16 sums are exact
// before one VPMADDWD widens them.
func blockSum(lo, hi [4]Op, act func(v int) Op, ones Mem, vnni bool) VecVirtual {
	if vnni {
		s := YMM()
		VPXOR(s, s, s)
		for j := 0; j < 4; j++ {
			VPDPBUSD_BCST(act(4*j), lo[j], s)
			VPDPBUSD_BCST(act(16+4*j), hi[j], s)
		}
		return s
	}
	var s VecVirtual
	for j := 0; j < 4; j++ {
		for h, nib := range []Op{lo[j], hi[j]} {
			t := YMM()
			VPBROADCASTD(act(16*h+4*j), t)
			VPMADDUBSW(t, nib, t)
			if j == 0 && h == 0 {
				s = t
			} else {
				VPADDW(t, s, s)
			}
		}
	}
	VPMADDWD(ones, s, s)
	return s
}

// unpackPacked splits chunk j of the packed block at w into its low and
// high nibbles (mask: 0x0f bytes).
func unpackPacked(w Mem, j int, mask Op) (lo, hi VecVirtual) {
	lo, hi = YMM(), YMM()
	VMOVDQU(w.Offset(16+32*j), lo)
	VPSRLW(U8(4), lo, hi)
	VPAND(mask, lo, lo)
	VPAND(mask, hi, hi)
	return lo, hi
}

// addBlock adds the eight rows' block sums s into acc as fma(s − b8,
// d_w·d_a, acc): b8 and d are the token's, dw the rows' scales.
func addBlock(s VecVirtual, b8, d Mem, dw Op, acc VecVirtual) {
	off := YMM()
	VPBROADCASTD(b8, off)
	VPSUBD(off, s, s)
	VCVTDQ2PS(s, s)
	sc := YMM()
	VBROADCASTSS(d, sc)
	VMULPS(dw, sc, sc) // d_w·d_a
	VFMADD231PS(sc, s, acc)
}

// dotQ4_0Packed8x1 emits dotQ4_0p8x1AVX2: eight packed Q4_0 rows by one
// token, in the order of dotQ4_0Rows4AVX2 (one fma chain per output, block
// after block) with the eight rows in the eight float lanes.
func dotQ4_0Packed8x1(nibbles, ones Mem, pf int, vnni bool) {
	name := "dotQ4_0p8x1" + isa(vnni)
	TEXT(name, NOSPLIT, "func(w *byte, qs *int8, d *float32, b8 *int32, nb int, out *float32)")
	Doc(name + " writes out[r], the dot products of Q4_0 rows r = 0..7 (packed, nb blocks) with one token's Q8_0 activations (qs, d and b8).")
	Pragma("noescape")
	w, qs, d, b8 := ptr("w"), ptr("qs"), ptr("d"), ptr("b8")
	nb := Load(Param("nb"), GP64())
	acc := zeroed(1, YMM)
	mask := YMM()
	VMOVDQU(nibbles, mask)

	blockLoop(name, nb, func() {
		if pf > 0 {
			for o := 0; o < packedQ4_0; o += 64 {
				PREFETCHT0(w.Offset(pf + o))
			}
		}
		dw := YMM()
		VCVTPH2PS(w, dw)
		var lo, hi [4]Op
		for j := 0; j < 4; j++ {
			lo[j], hi[j] = unpackPacked(w, j, mask)
		}
		s := blockSum(lo, hi, func(v int) Op { return qs.Offset(v) }, ones, vnni)
		addBlock(s, b8, d, dw, acc[0])
	}, step{w.Base, packedQ4_0}, step{qs.Base, 32}, step{d.Base, 4}, step{b8.Base, 4})

	storeAndReturn(acc, 32)
}

// dotQ4_0Packed8x4 emits dotQ4_0p8x4AVX2, dotQ4_0Packed8x1 for four tokens:
// each block is unpacked once (eight registers) for the four tokens, whose
// four accumulators and the temporaries fill the sixteen YMM registers; the
// rows' scales wait on the stack.
func dotQ4_0Packed8x4(nibbles, ones Mem, vnni bool) {
	const n = 4
	name := "dotQ4_0p8x4" + isa(vnni)
	TEXT(name, NOSPLIT, "func(w *byte, qs *int8, d *float32, b8 *int32, nb int, k int, out *float32)")
	Doc(name + " writes out[8t+r], the dot products of Q4_0 rows r = 0..7 (packed, nb blocks) with tokens t < 4: Q8_0 activations k bytes apart in qs, k/8 in d and b8.")
	Pragma("noescape")
	w, qs, d, b8 := ptr("w"), ptr("qs"), ptr("d"), ptr("b8")
	nb := Load(Param("nb"), GP64())
	k, kd, k3, kd3 := tokStrides(n)
	dws := AllocLocal(32)
	acc := zeroed(n, YMM)

	blockLoop(name, nb, func() {
		dw := YMM()
		VCVTPH2PS(w, dw)
		VMOVUPS(dw, dws)
		var lo, hi [4]Op
		for j := 0; j < 4; j++ {
			lo[j], hi[j] = unpackPacked(w, j, nibbles)
		}
		for t := 0; t < n; t++ {
			ta := tokAddr(qs, t, k, k3)
			s := blockSum(lo, hi, func(v int) Op { return ta.Offset(v) }, ones, vnni)
			addBlock(s, tokAddr(b8, t, kd, kd3), tokAddr(d, t, kd, kd3), dws, acc[t])
		}
	}, step{w.Base, packedQ4_0}, step{qs.Base, 32}, step{d.Base, 4}, step{b8.Base, 4})

	storeAndReturn(acc, 32)
}

// dotF32VecAVX2 emits dotF32VecAVX2, ggml_vec_dot_f32 on AVX2 for n a
// multiple of 32: four accumulators of eight lanes, one FMA per eight
// values, reduced as GGML_F32x8_REDUCE (acc0+acc2, acc1+acc3, then together,
// halves added, two VHADDPS).
func dotF32VecAVX2() {
	TEXT("dotF32VecAVX2", NOSPLIT, "func(x, y *float32, n int) float32")
	Doc("dotF32VecAVX2 is Σ x[i]·y[i] over n (a multiple of 32) values in ggml_vec_dot_f32's order.")
	Pragma("noescape")
	x := Mem{Base: Load(Param("x"), GP64())}
	y := Mem{Base: Load(Param("y"), GP64())}
	n := Load(Param("n"), GP64())
	acc := zeroed(4, YMM)
	Label("dotF32Vec_loop")
	CMPQ(n, U32(32))
	JL(LabelRef("dotF32Vec_done"))
	for i := range acc {
		v := YMM()
		VMOVUPS(x.Offset(32*i), v)
		VFMADD231PS(y.Offset(32*i), v, acc[i])
	}
	ADDQ(U32(128), x.Base)
	ADDQ(U32(128), y.Base)
	SUBQ(U32(32), n)
	JMP(LabelRef("dotF32Vec_loop"))
	Label("dotF32Vec_done")
	VADDPS(acc[2], acc[0], acc[0])
	VADDPS(acc[3], acc[1], acc[1])
	VADDPS(acc[1], acc[0], acc[0])
	t, hi := acc[0].AsX(), XMM()
	VEXTRACTF128(U8(1), acc[0], hi)
	VADDPS(hi, t, t)
	VHADDPS(t, t, t)
	VHADDPS(t, t, t)
	VZEROUPPER()
	Store(t, ReturnIndex(0))
	RET()
}

// fmaAxpyAVX2 emits fmaAxpyAVX2: out[i] = fma(v[i], s, out[i]) for n a
// multiple of 8 (flash attention's V accumulation; each lane rounds once,
// as ggml's).
func fmaAxpyAVX2() {
	TEXT("fmaAxpyAVX2", NOSPLIT, "func(out, v *float32, s float32, n int)")
	Doc("fmaAxpyAVX2 sets out[i] = fma(v[i], s, out[i]) for i < n (a multiple of 8).")
	Pragma("noescape")
	out := Mem{Base: Load(Param("out"), GP64())}
	v := Mem{Base: Load(Param("v"), GP64())}
	s := Load(Param("s"), XMM())
	sc := YMM()
	VBROADCASTSS(s, sc)
	n := Load(Param("n"), GP64())
	Label("fmaAxpy_loop")
	CMPQ(n, U32(8))
	JL(LabelRef("fmaAxpy_done"))
	o := YMM()
	VMOVUPS(out, o)
	VFMADD231PS(v, sc, o)
	VMOVUPS(o, out)
	ADDQ(U32(32), out.Base)
	ADDQ(U32(32), v.Base)
	SUBQ(U32(8), n)
	JMP(LabelRef("fmaAxpy_loop"))
	Label("fmaAxpy_done")
	VZEROUPPER()
	RET()
}

// quantQ8_0AVX2 emits quantQ8_0AVX2, quantQ8_0 (actquant.go) over nb blocks
// of 32, with the Q4_0 kernels' b8 (8× each block's sum): the same float
// operations (|x| max, 127/amax, x·id rounded half to even by VCVTPS2DQ,
// amax/127 rounded through F16 by VCVTPS2PH), so the same bits.
func quantQ8_0AVX2() {
	TEXT("quantQ8_0AVX2", NOSPLIT, "func(x *float32, qs *int8, d *float32, b8 *int32, nb int)")
	Doc("quantQ8_0AVX2 quantizes nb blocks of 32 values at x to int8 in qs, their F16-rounded scales in d and 8× their sums in b8, as quantQ8_0.")
	Pragma("noescape")
	absMask := GLOBL("absMaskF32", RODATA|NOPTR)
	DATA(0, U32(0x7fffffff))
	c127 := GLOBL("f32_127", RODATA|NOPTR)
	DATA(0, U32(0x42fe0000)) // 127.0
	perm := GLOBL("packOrder", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
	x := Mem{Base: Load(Param("x"), GP64())}
	qs := Mem{Base: Load(Param("qs"), GP64())}
	d := Mem{Base: Load(Param("d"), GP64())}
	b8 := Mem{Base: Load(Param("b8"), GP64())}
	nb := Load(Param("nb"), GP64())
	mask, idx := YMM(), YMM()
	VBROADCASTSS(absMask, mask)
	VMOVDQU(perm, idx)

	blockLoop("quantQ8_0", nb, func() {
		var v, a [4]VecVirtual
		for i := range v {
			v[i], a[i] = YMM(), YMM()
			VMOVUPS(x.Offset(32*i), v[i])
			VANDPS(mask, v[i], a[i])
		}
		VMAXPS(a[1], a[0], a[0])
		VMAXPS(a[3], a[2], a[2])
		VMAXPS(a[2], a[0], a[0])
		m := hfold8(a[0], VMAXPS, VMAXSS) // amax
		id, nz, zero := XMM(), XMM(), XMM()
		VMOVSS(c127, id)
		VDIVSS(m, id, id) // 127/amax
		VXORPS(zero, zero, zero)
		VCMPSS(U8(4), zero, m, nz) // amax != 0
		VANDPS(nz, id, id)
		idy := YMM()
		VBROADCASTSS(id, idy)
		sum := YMM()
		for i := range v {
			VMULPS(idy, v[i], v[i])
			VCVTPS2DQ(v[i], v[i])
		}
		VPADDD(v[1], v[0], sum)
		VPADDD(v[2], sum, sum)
		VPADDD(v[3], sum, sum)
		VPACKSSDW(v[1], v[0], v[0])
		VPACKSSDW(v[3], v[2], v[2])
		VPACKSSWB(v[2], v[0], v[0])
		VPERMD(v[0], idx, v[0])
		VMOVDQU(v[0], qs)
		sc := XMM()
		VDIVSS(c127, m, sc) // amax/127
		VCVTPS2PH(U8(0), sc, sc)
		VCVTPH2PS(sc, sc)
		VMOVSS(sc, d)
		s := hsumI32([]VecVirtual{sum})
		VPSLLD(U8(3), s, s)
		VMOVD(s, b8)
	}, step{x.Base, 128}, step{qs.Base, 32}, step{d.Base, 4}, step{b8.Base, 4})
	VZEROUPPER()
	RET()
}

// The K-quant kernels multiply one weight row of Q4_K, Q5_K or Q6_K
// super-blocks (256 values) by n tokens' Q8_K activations: qs (int8, k bytes
// from one token to the next), d (a float32 per 256 values, k/64 bytes
// apart) and bsums (an int16 sum per 16 values, k/8 bytes apart). The
// integer part of each super-block is ggml's AVX2 one: VPMADDUBSW (weights
// unsigned, activations signed) gives int16 pair sums, VPMADDWD multiplies
// them by the 16-value group's scale into eight int32 lanes, lane l holding
// values 4l..4l+3 of every 32 (the kLanes of kernels.go). Activations are in
// [−127, 127] (quantQ8K), so a pair sum is at most 2·15·127 = 3810 (Q4_K),
// 2·31·127 = 7874 (Q5_K) or 2·63·127 = 16002 (Q6_K, before the −32 comes
// off as VPMADDUBSW(32, a), at most 8128): no int16 saturates, the integers
// are exact, and the float part follows the pure-Go kernels operation by
// operation.

// kConsts are the constants the K-quant kernels read from memory.
type kConsts struct {
	nib     Mem // 0x0f: low nibbles
	b4      Mem // 0x10: Q5_K's fifth bit
	b45     Mem // 0x30: Q6_K's two high bits
	m32     Mem // 32: Q6_K's offset
	scale   Mem // VPSHUFB patterns, 32 bytes each: pattern i zero-extends byte i to every int16
	minsDup Mem // VPSHUFB pattern: bytes 8..15 zero-extended to int16, each twice
	unpack  Mem // kScales' two VPSHUFB patterns and two masks, 32 bytes each
	pair    Mem // VPSHUFB patterns: pattern i broadcasts word 2i to the low half, word 2i+1 to the high one
	dmin4   Mem // VPERMPS indices 0,0,0,0,1,1,1,1: d to the low half, dmin to the high one
	rowsD   Mem // VPERMPS indices 0,2,4,6,1,3,5,7: four rows' d to the low half, dmin to the high one
}

func kQuantConsts(nibbles Mem) kConsts {
	bytes := func(name string, b uint64) Mem {
		m := GLOBL(name, RODATA|NOPTR)
		for i := 0; i < 32; i += 8 {
			DATA(i, U64(b*0x0101010101010101))
		}
		return m
	}
	c := kConsts{nib: nibbles, b4: bytes("bit4Mask", 0x10), b45: bytes("bits45Mask", 0x30), m32: bytes("bytes32", 32)}
	// Byte i of a register zero-extended into every int16 word (VPSHUFB
	// writes 0 for an index with its top bit set).
	c.scale = GLOBL("scaleByte", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		for o := 0; o < 32; o += 8 {
			DATA(32*i+o, U64(uint64(0x8000+i)*0x0001000100010001))
		}
	}
	c.minsDup = GLOBL("minsDup", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(2*i, U16(0x8000+8+i/2))
	}
	// kScales' VPSHUFB indices (the byte each result byte takes) and masks.
	c.unpack = GLOBL("kScaleUnpack", RODATA|NOPTR)
	// Each 16 bytes twice, for both 128-bit halves.
	for i, v := range []uint64{
		0x0b0a090803020100, 0x0b0a090807060504, 0x0b0a090803020100, 0x0b0a090807060504, // bytes 0-3, 8-11, 4-7, 8-11
		0x0302010080808080, 0x0706050480808080, 0x0302010080808080, 0x0706050480808080, // the top bits: bytes 0-3 under 4-7, 4-7 under 12-15
		0x0f0f0f0f3f3f3f3f, 0x0f0f0f0f3f3f3f3f, 0x0f0f0f0f3f3f3f3f, 0x0f0f0f0f3f3f3f3f,
		0x3030303000000000, 0x3030303000000000, 0x3030303000000000, 0x3030303000000000,
	} {
		DATA(8*i, U64(v))
	}
	// w16 is eight bytes holding int16 word i four times, as VPSHUFB indices.
	w16 := func(i int) uint64 { return uint64(2*i+(2*i+1)<<8) * 0x0001000100010001 }
	c.pair = GLOBL("scalePair", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		for o := 0; o < 32; o += 8 {
			DATA(32*i+o, U64(w16(2*i+o/16)))
		}
	}
	c.rowsD = GLOBL("rowsDDminIdx", RODATA|NOPTR)
	for i, v := range []uint32{0, 2, 4, 6, 1, 3, 5, 7} {
		DATA(4*i, U32(v))
	}
	c.dmin4 = GLOBL("dDminIdx", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(uint32(i/4)))
	}
	return c
}

// kToks addresses n (1 or 4) tokens' Q8_K activations. Each token's qs has
// a base register of its own: an indexed address would cost the VEX
// instructions that read it their micro-fusion. Tokens 1..3 of d and bsums
// (read once per super-block) are addressed from k, reloaded where needed.
type kToks struct {
	n     int
	qs    []Register
	d, bs Mem
}

func loadKToks(n int) kToks {
	tk := kToks{n: n, qs: []Register{Load(Param("qs"), GP64())}, d: ptr("d"), bs: ptr("bsums")}
	if n == 4 {
		k := Load(Param("k"), GP64())
		for t := 1; t < 4; t++ {
			q := GP64()
			LEAQ(Mem{Base: tk.qs[t-1], Index: k, Scale: 1}, q)
			tk.qs = append(tk.qs, q)
		}
	}
	return tk
}

// a is the address of token t's activations at offset off of the super-block.
func (tk kToks) a(t, off int) Mem { return Mem{Base: tk.qs[t], Disp: off} }

// steps are the pointers the block loop advances per super-block.
func (tk kToks) steps(w Register, bytes int) []step {
	s := []step{{w, bytes}, {tk.d.Base, 4}, {tk.bs.Base, 32}}
	for _, q := range tk.qs {
		s = append(s, step{q, 256})
	}
	return s
}

// per returns the stride of an array holding a value per 2^shift activation
// bytes (d: 6, bsums with its two bytes per 16: 3), and its triple.
func (tk kToks) per(shift int) (s, s3 Register) {
	if tk.n == 1 {
		return nil, nil
	}
	s = Load(Param("k"), GP64())
	SHRQ(U8(shift), s)
	return s, x3(s)
}

// gatherD returns the n tokens' scales d, token t in float lane t.
func (tk kToks) gatherD() VecVirtual {
	x := XMM()
	VMOVSS(tk.d, x)
	s, s3 := tk.per(6)
	for t := 1; t < tk.n; t++ {
		VINSERTPS(U8(t<<4), tokAddr(tk.d, t, s, s3), x, x)
	}
	return x
}

// hsumI32 returns an XMM register whose int32 lane t is the sum of the eight
// int32 lanes of v[t] (n = 1 or 4; v is clobbered). Integers: any order is exact.
func hsumI32(v []VecVirtual) Register {
	if len(v) == 1 {
		x, u := v[0].AsX(), XMM()
		VEXTRACTI128(U8(1), v[0], u)
		VPADDD(u, x, x)
		VPSHUFD(U8(0x4e), x, u)
		VPADDD(u, x, x)
		VPSHUFD(U8(0xb1), x, u)
		VPADDD(u, x, x)
		return x
	}
	VPHADDD(v[1], v[0], v[0])
	VPHADDD(v[3], v[2], v[2])
	VPHADDD(v[2], v[0], v[0])
	s := XMM()
	VEXTRACTI128(U8(1), v[0], s)
	VPADDD(v[0].AsX(), s, s)
	return s
}

// kScales unpacks the twelve bytes of 6-bit scales and mins of a Q4_K or
// Q5_K super-block at s (kScaleMin in kernels.go) with two VPSHUFB: bytes
// 0..3 and 8..11 of the result are the low six bits of bytes 0..3 and 4..7,
// bytes 4..7 and 12..15 a nibble of bytes 8..11 with the top two bits of
// bytes 0..3 and 4..7 above it. It returns the eight scales then the eight
// mins as bytes, in both 128-bit halves (c.scale picks one as int16), and
// the mins as int16, each twice (m0, m0, m1, m1, …: VPMADDWD with the
// sixteen bsums gives m_j·Σa over scale j's 32 values in int32 lane j).
func kScales(s Mem, c kConsts) (sc, mins VecVirtual) {
	a, b, t := XMM(), XMM(), XMM()
	VMOVDQU(s, t) // the 12 bytes and 4 of the next field
	VPSHUFB(c.unpack, t, a)
	VPSHUFB(c.unpack.Offset(32), t, b)
	VPSRLW(U8(4), a, t)
	VPBLENDD(U8(8), t, a, a) // mins 4..7: the high nibbles
	VPAND(c.unpack.Offset(64), a, a)
	VPSRLW(U8(2), b, b)
	VPAND(c.unpack.Offset(96), b, b)
	VPOR(b, a, a)
	// (The upper half of a.AsY() is not read: VINSERTI128 replaces it.)
	sc, mins = YMM(), YMM()
	VINSERTI128(U8(1), a, a.AsY(), sc)
	VPSHUFB(c.minsDup, sc, mins)
	return sc, mins
}

// kMins returns, for each token t, VPMADDWD of its sixteen bsums with the
// doubled mins: int32 lanes whose sum is Σ_j m_j·Σa_j (a pair of bsums is
// at most 2·16·127 = 4064, times a min ≤ 63).
func (tk kToks) kMins(mins VecVirtual) []VecVirtual {
	s, s3 := tk.per(3)
	v := make([]VecVirtual, tk.n)
	for t := range v {
		v[t] = YMM()
		VPMADDWD(tokAddr(tk.bs, t, s, s3), mins, v[t])
	}
	return v
}

// kDot adds to sums[t] the scaled products of 32 unsigned weight values q
// with token t's 32 activations at offset off: VPMADDUBSW pair sums,
// VPMADDWD by the int16 scales sc.
func (tk kToks) kDot(q, sc Op, off int, sums []VecVirtual) {
	for t := range sums {
		p := YMM()
		VPMADDUBSW(tk.a(t, off), q, p)
		VPMADDWD(sc, p, p)
		VPADDD(p, sums[t], sums[t])
	}
}

// nibbles returns the low (h = 0) or high (h = 1) nibbles of raw.
func nibbles(raw VecVirtual, h int, c kConsts) VecVirtual {
	q := YMM()
	if h == 0 {
		VPAND(c.nib, raw, q)
		return q
	}
	VPSRLW(U8(4), raw, q)
	VPAND(c.nib, q, q)
	return q
}

// kPrefetch is how far ahead of the super-block in hand the one-token
// K-quant kernels prefetch the weights, which decode streams from memory
// once (rows are contiguous, so this runs into the worker's next rows).
const kPrefetch = 512

// kBlockLoop is blockLoop over nb super-blocks of bytes bytes at w; with
// one token each super-block's lines kPrefetch bytes ahead are prefetched
// first.
func (tk kToks) kBlockLoop(name string, nb Register, w Mem, bytes int, body func()) {
	blockLoop(name, nb, func() {
		for o := 0; tk.n == 1 && kPrefetch > 0 && o < bytes; o += 64 {
			PREFETCHT0(w.Offset(kPrefetch + o))
		}
		body()
	}, tk.steps(w.Base, bytes)...)
}

const kSig = "func(w *byte, qs *int8, d *float32, bsums *int16, nb int, k int, out *float32)"

func kDoc(name, typ string, n int) {
	Doc(fmt.Sprintf("%s writes to out the dot products of a %s row of nb super-blocks with %d tokens' Q8_K activations (qs k bytes apart, d k/64, bsums k/8), in the float order of %s.", name, typ, n, goOracle(typ)))
	Pragma("noescape")
}

// goOracle is the pure-Go kernel whose float order the typ ("Q4_K", say)
// kernels keep: dotQ4KGo.
func goOracle(typ string) string { return "dot" + typ[:2] + typ[3:] + "Go" }

// dotQ4KAVX2 emits dotQ4_Kx{n}AVX2. Per super-block: the integer Σ sc·q·a
// and Σ m·Σa, reduced together (with four tokens: sumi of the four in the
// low half, summ in the high one), then, as dotQ4KGo does without fusing,
// sum += d_a·(d·sumi − dmin·summ), the tokens in the float lanes of one XMM
// register.
func dotQ4KAVX2(n int, c kConsts) {
	name := fmt.Sprintf("dotQ4_Kx%dAVX2", n)
	TEXT(name, NOSPLIT, kSig)
	kDoc(name, "Q4_K", n)
	w := ptr("w")
	tk := loadKToks(n)
	nb := Load(Param("nb"), GP64())
	acc := XMM()
	VXORPS(acc, acc, acc)

	tk.kBlockLoop(name, nb, w, 144, func() {
		sumi, summ := tk.q4Sums(w, c)
		dm := YMM()
		VCVTPH2PS(w, dm) // d, dmin (and six more halves, not used)
		if n == 1 {
			// [sumi, summ] in lanes 0 and 1, then [d·sumi, dmin·summ].
			x, u := sumi[0].AsX(), XMM()
			VPHADDD(summ[0], sumi[0], sumi[0])
			VEXTRACTI128(U8(1), sumi[0], u)
			VPADDD(u, x, x)
			VPHADDD(x, x, x)
			VCVTDQ2PS(x, x)
			VMULPS(dm.AsX(), x, x)
			VMOVSHDUP(x, u)
			VSUBSS(u, x, x)    // d·sumi − dmin·summ
			VMULSS(tk.d, x, x) // d_a·(…)
			VADDSS(x, acc, acc)
			return
		}
		x := sumiSumm4(sumi, summ)
		dd := YMM()
		VMOVDQU(c.dmin4, dd)
		VPERMPS(dm, dd, dd) // d ×4, dmin ×4
		x = q4KFloats(x, dd)
		VMULPS(tk.gatherD(), x.AsX(), x.AsX()) // d_a·(…)
		VADDPS(x.AsX(), acc, acc)
	})

	out := ptr("out")
	if n == 1 {
		VMOVSS(acc, out)
	} else {
		VMOVUPS(acc, out)
	}
	VZEROUPPER()
	RET()
}

// q4Sums returns each token's integer lanes of the Q4_K super-block at w:
// sumi[t] of Σ sc·q·a and summ[t] of Σ m·Σa.
func (tk kToks) q4Sums(w Mem, c kConsts) (sumi, summ []VecVirtual) {
	sc, mins := kScales(w.Offset(4), c)
	summ = tk.kMins(mins)
	sumi = zeroed(tk.n, YMM)
	for j := 0; j < 4; j++ { // 64 values: 32 bytes of nibbles
		raw := YMM()
		VMOVDQU(w.Offset(16+32*j), raw)
		for h := 0; h < 2; h++ {
			q, s := nibbles(raw, h, c), YMM()
			VPSHUFB(c.scale.Offset(32*(2*j+h)), sc, s)
			tk.kDot(q, s, 64*j+32*h, sumi)
		}
	}
	return sumi, summ
}

// sumiSumm4 reduces four outputs' integer lanes: it returns a YMM register
// holding [sumi0..3 | summ0..3] (the low half of e holds the four outputs'
// sumi over lanes 0-3, its high half over lanes 4-7, f the same for summ;
// then [e.lo | f.lo] + [e.hi | f.hi]). sumi and summ are clobbered.
func sumiSumm4(sumi, summ []VecVirtual) VecVirtual {
	VPHADDD(sumi[1], sumi[0], sumi[0])
	VPHADDD(sumi[3], sumi[2], sumi[2])
	VPHADDD(summ[1], summ[0], summ[0])
	VPHADDD(summ[3], summ[2], summ[2])
	e, f := sumi[0], summ[0]
	VPHADDD(sumi[2], e, e)
	VPHADDD(summ[2], f, f)
	x, y := YMM(), YMM()
	VPERM2I128(U8(0x21), f, e, x)
	VPBLENDD(U8(0xf0), f, e, y)
	VPADDD(y, x, x)
	return x
}

// q4KFloats computes d·sumi − dmin·summ for four outputs from x =
// [sumi0..3 | summ0..3] and dd = [d0..3 | dmin0..3] (both clobbered), in the
// low half of x.
func q4KFloats(x, dd VecVirtual) VecVirtual {
	VCVTDQ2PS(x, x)
	VMULPS(dd, x, x)
	hi := XMM()
	VEXTRACTF128(U8(1), x, hi)
	VSUBPS(hi, x.AsX(), x.AsX())
	return x
}

// kRows4 is the setup the four-row K-quant kernels (four rows by one
// token) share: the rows, the four after them, the token and nb.
type kRows4 struct {
	name       string
	rows, next [4]Mem
	b0, nx     Register
	tk         kToks
	nb         Register
}

// kRows4Head emits the declaration of dot{typ}r4x1AVX2 (typ: "Q4_K", say)
// and loads its setup.
func kRows4Head(typ string) kRows4 {
	k := kRows4{name: "dot" + typ + "r4x1AVX2"}
	TEXT(k.name, NOSPLIT, "func(w *byte, wstride int, qs *int8, d *float32, bsums *int16, nb int, out *float32)")
	Doc(fmt.Sprintf("%s writes out[r], the dot products of %s rows r = 0..3 (wstride bytes apart, nb super-blocks) with one token's Q8_K activations, in the float order of %s.", k.name, typ, goOracle(typ)))
	Pragma("noescape")
	k.rows, k.next, k.b0, k.nx = fourRowsAndNext()
	k.tk = loadKToks(1)
	k.nb = Load(Param("nb"), GP64())
	return k
}

// loop emits the loop over nb super-blocks of bytes bytes: per row r, the
// same super-block of next[r] prefetched (the rows stream from memory),
// then row(r, rows[r]); then after, unless nil.
func (k kRows4) loop(bytes int, row func(r int, w Mem), after func()) {
	blockLoop(k.name, k.nb, func() {
		for r, w := range k.rows {
			for o := 0; o < bytes; o += 64 {
				PREFETCHT0(k.next[r].Offset(o))
			}
			row(r, w)
		}
		if after != nil {
			after()
		}
	}, append(k.tk.steps(k.b0, bytes), step{k.nx, bytes})...)
}

// dotQ4KRows4AVX2 emits dotQ4_Kr4x1AVX2: four Q4_K rows (wstride bytes
// apart) by one token, dotQ4_Kx1AVX2 with the rows in the lanes of the
// epilogue: a super-block's four rows are independent chains the core
// overlaps, and one reduction and one float sequence serve the four.
func dotQ4KRows4AVX2(c kConsts) {
	k := kRows4Head("Q4_K")
	acc := XMM()
	VXORPS(acc, acc, acc)

	sumi, summ := make([]VecVirtual, 4), make([]VecVirtual, 4)
	k.loop(144, func(r int, w Mem) {
		si, sm := k.tk.q4Sums(w, c)
		sumi[r], summ[r] = si[0], sm[0]
	}, func() {
		x := sumiSumm4(sumi, summ)
		// The rows' f16 d and dmin, [d0, dmin0, d1, …], widened and
		// ordered [d0..3 | dmin0..3].
		g, dd := XMM(), YMM()
		VMOVD(k.rows[0], g)
		for r := 1; r < 4; r++ {
			VPINSRD(U8(r), k.rows[r], g, g)
		}
		VCVTPH2PS(g, dd)
		idx := YMM()
		VMOVDQU(c.rowsD, idx)
		VPERMPS(dd, idx, dd)
		x = q4KFloats(x, dd)
		da := XMM()
		VBROADCASTSS(k.tk.d, da)
		VMULPS(da, x.AsX(), x.AsX()) // d_a·(…)
		VADDPS(x.AsX(), acc, acc)
	})

	storeAndReturn([]VecVirtual{acc}, 16)
}

// lanesEpilogue adds a super-block's integer lanes sumi[t] into the float
// accumulators acc[t] as fma(d_a·dw, lane, acc) (dw: the weight scale in
// every lane), as dotQ5KGo and dotQ6KGo do.
func (tk kToks) lanesEpilogue(dw VecVirtual, sumi, acc []VecVirtual) {
	s, s3 := tk.per(6)
	for t := range sumi {
		dt := YMM()
		VBROADCASTSS(tokAddr(tk.d, t, s, s3), dt)
		VMULPS(dw, dt, dt) // d_a·d_w
		VCVTDQ2PS(sumi[t], sumi[t])
		VFMADD231PS(sumi[t], dt, acc[t])
	}
}

// dotQ5KAVX2 emits dotQ5_Kx{n}AVX2: integer lanes as for Q4_K with each
// value's fifth bit from qh (bit 2j of qh[i] for value 64j+i, bit 2j+1 for
// 64j+32+i) moved to bit 4, then dotQ5KGo's floats: per lane
// fma(d_a·d, lane, acc), the mins as summs = fma(−d_a·dmin, summ, summs)
// (tokens in XMM lanes; done first, which frees registers for the lanes),
// and at the end hsum8(acc) + summs.
func dotQ5KAVX2(n int, c kConsts) {
	name := fmt.Sprintf("dotQ5_Kx%dAVX2", n)
	TEXT(name, NOSPLIT, kSig)
	kDoc(name, "Q5_K", n)
	w := ptr("w")
	tk := loadKToks(n)
	nb := Load(Param("nb"), GP64())
	acc := zeroed(n, YMM)
	summs := XMM()
	VXORPS(summs, summs, summs)

	tk.kBlockLoop(name, nb, w, 176, func() {
		sc, mins := kScales(w.Offset(4), c)
		sm := hsumI32(tk.kMins(mins))
		VCVTDQ2PS(sm, sm)
		dm := XMM()
		VCVTPH2PS(w, dm) // d, dmin
		VMOVSHDUP(dm, dm)
		VBROADCASTSS(dm, dm)
		VMULPS(tk.gatherD(), dm, dm) // d_a·dmin
		VFNMADD231PS(sm, dm, summs)  // summs − d_a·dmin·summ, rounded once

		qh := YMM()
		VMOVDQU(w.Offset(16), qh)
		sumi := zeroed(n, YMM)
		for j := 0; j < 4; j++ {
			raw := YMM()
			VMOVDQU(w.Offset(48+32*j), raw)
			for h := 0; h < 2; h++ {
				q, hb := nibbles(raw, h, c), YMM()
				switch sh := 4 - (2*j + h); { // bit 2j+h of each byte to bit 4
				case sh > 0:
					VPSLLW(U8(sh), qh, hb)
					VPAND(c.b4, hb, hb)
				case sh < 0:
					VPSRLW(U8(-sh), qh, hb)
					VPAND(c.b4, hb, hb)
				default:
					VPAND(c.b4, qh, hb)
				}
				VPOR(hb, q, q)
				s := YMM()
				VPSHUFB(c.scale.Offset(32*(2*j+h)), sc, s)
				tk.kDot(q, s, 64*j+32*h, sumi)
			}
		}
		dw := YMM()
		VCVTPH2PS(w, dw.AsX())
		VBROADCASTSS(dw.AsX(), dw)
		tk.lanesEpilogue(dw, sumi, acc)
	})

	out := ptr("out")
	if n == 1 {
		s := hsum8(acc[0])
		VADDSS(summs, s, s)
		VMOVSS(s, out)
	} else {
		r := XMM()
		for t := range acc {
			s := hsum8(acc[t])
			if t == 0 {
				VMOVAPS(s, r)
			} else {
				VINSERTPS(U8(t<<4), s, r, r)
			}
		}
		VADDPS(summs, r, r)
		VMOVUPS(r, out)
	}
	VZEROUPPER()
	RET()
}

// dotQ6KAVX2 emits dotQ6_Kx{n}AVX2, ggml_vec_dot_q6_K_q8_K on AVX2: per 32
// values the six-bit q (four low bits from ql, two high from qh), pair sums
// VPMADDUBSW(q, a) − VPMADDUBSW(32, a), VPMADDWD by the int8 scales of the
// two 16-value halves (one per 128-bit half), then per lane
// fma(d_a·d, lane, acc) and hsum8, as dotQ6KGo.
func dotQ6KAVX2(n int, c kConsts) {
	name := fmt.Sprintf("dotQ6_Kx%dAVX2", n)
	TEXT(name, NOSPLIT, kSig)
	kDoc(name, "Q6_K", n)
	w := ptr("w")
	tk := loadKToks(n)
	nb := Load(Param("nb"), GP64())
	acc := zeroed(n, YMM)
	m32 := YMM()
	VMOVDQU(c.m32, m32)

	tk.kBlockLoop(name, nb, w, 210, func() {
		sumi := zeroed(n, YMM)
		tk.q6Sums(w, c, m32, sumi)
		tk.lanesEpilogue(broadcastF16(w.Offset(208)), sumi, acc)
	})

	storeHsums(acc)
}

// q6Sums adds into sumi[t] the integer lanes of the Q6_K super-block at w
// times token t's activations.
func (tk kToks) q6Sums(w Mem, c kConsts, m32 VecVirtual, sumi []VecVirtual) {
	for h := 0; h < 2; h++ { // 128 values: 64 bytes of ql, 32 of qh
		// The half's eight scales as int16 in both 128-bit halves.
		// (Sign-extending them once per super-block and only permuting per
		// half was tried: no faster, and one more register live.)
		sc := YMM()
		VPMOVSXBW(w.Offset(192), sc)
		VPERMQ(U8(0x44+0xaa*h), sc, sc)
		for i := 0; i < 4; i++ { // values 128h+32i..
			g := 4*h + i
			q, hb := YMM(), YMM()
			VMOVDQU(w.Offset(64*h+32*(i&1)), q)
			if i >= 2 {
				VPSRLW(U8(4), q, q)
			}
			VPAND(c.nib, q, q)
			VMOVDQU(w.Offset(128+32*h), hb)
			switch i { // bits 2i, 2i+1 of qh to bits 4, 5
			case 0:
				VPSLLW(U8(4), hb, hb)
			case 1:
				VPSLLW(U8(2), hb, hb)
			case 3:
				VPSRLW(U8(2), hb, hb)
			}
			VPAND(c.b45, hb, hb)
			VPOR(hb, q, q)
			s := YMM()
			VPSHUFB(c.pair.Offset(32*i), sc, s)
			for t := range sumi {
				a := tk.a(t, 32*g)
				p, o := YMM(), YMM()
				VPMADDUBSW(a, q, p)
				VPMADDUBSW(a, m32, o)
				VPSUBW(o, p, p)
				VPMADDWD(s, p, p)
				VPADDD(p, sumi[t], sumi[t])
			}
		}
	}
}

// dotQ6KRows4AVX2 emits dotQ6_Kr4x1AVX2: four Q6_K rows (wstride bytes
// apart) by one token, each row as dotQ6_Kx1AVX2 (its own eight float
// lanes), prefetching the next four rows' super-block.
func dotQ6KRows4AVX2(c kConsts) {
	k := kRows4Head("Q6_K")
	acc := zeroed(4, YMM)
	m32 := YMM()
	VMOVDQU(c.m32, m32)

	k.loop(210, func(r int, w Mem) {
		sumi := zeroed(1, YMM)
		k.tk.q6Sums(w, c, m32, sumi)
		k.tk.lanesEpilogue(broadcastF16(w.Offset(208)), sumi, acc[r:r+1])
	}, nil)

	storeHsums(acc)
}

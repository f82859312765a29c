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
		h := GP32()
		MOVWLZX(w, h)
		dw := YMM()
		VMOVD(h, dw.AsX())
		VCVTPH2PS(dw.AsX(), dw.AsX())
		VBROADCASTSS(dw.AsX(), dw)
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

	out := ptr("out")
	for t := 0; t < n; t++ {
		// hsum_float_8: (hi+lo), then movehl, then movehdup.
		x, u := acc[t].AsX(), XMM()
		VEXTRACTF128(U8(1), acc[t], u)
		VADDPS(u, x, x)
		VMOVHLPS(x, x, u)
		VADDPS(u, x, x)
		VMOVSHDUP(x, u)
		VADDSS(u, x, x)
		VMOVSS(x, out.Offset(4*t))
	}
	VZEROUPPER()
	RET()
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
			VPHADDD(p[1], p[0], p[0])
			VPHADDD(p[3], p[2], p[2])
			VPHADDD(p[2], p[0], p[0])
			s, off := XMM(), XMM()
			VEXTRACTI128(U8(1), p[0], s)
			VPADDD(p[0].AsX(), s, s)
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
// repackQ4_0x8 in simd_amd64.go): per block of eight rows, 144 bytes, the
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
	var acc [4]VecVirtual
	for i := range acc {
		acc[i] = YMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
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

	Label("quantQ8_0_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("quantQ8_0_done"))
	var v, a [4]VecVirtual
	for i := range v {
		v[i], a[i] = YMM(), YMM()
		VMOVUPS(x.Offset(32*i), v[i])
		VANDPS(mask, v[i], a[i])
	}
	VMAXPS(a[1], a[0], a[0])
	VMAXPS(a[3], a[2], a[2])
	VMAXPS(a[2], a[0], a[0])
	m, u := a[0].AsX(), XMM()
	VEXTRACTF128(U8(1), a[0], u)
	VMAXPS(u, m, m)
	VMOVHLPS(m, m, u)
	VMAXPS(u, m, m)
	VMOVSHDUP(m, u)
	VMAXSS(u, m, m) // amax
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
	s := sum.AsX()
	VEXTRACTI128(U8(1), sum, u)
	VPADDD(u, s, s)
	VPSHUFD(U8(0x4e), s, u)
	VPADDD(u, s, s)
	VPSHUFD(U8(0xb1), s, u)
	VPADDD(u, s, s)
	VPSLLD(U8(3), s, s)
	VMOVD(s, b8)
	ADDQ(U32(128), x.Base)
	ADDQ(U32(32), qs.Base)
	ADDQ(U32(4), d.Base)
	ADDQ(U32(4), b8.Base)
	DECQ(nb)
	JMP(LabelRef("quantQ8_0_loop"))
	Label("quantQ8_0_done")
	VZEROUPPER()
	RET()
}

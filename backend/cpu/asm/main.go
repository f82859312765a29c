// Command asm generates the CPU backend's amd64 dot-product kernels with avo:
//
//	go generate ./backend/cpu   (runs: go run ./asm -out dot_amd64.s -stubs dot_amd64_stub.go -pkg cpu)
//
// Each kernel multiplies one weight row in its file encoding by N tokens'
// activations quantized to Q8_0 blocks (int8 values, a float32 scale per
// block of 32, and sum4: 8× the sum of each 4 consecutive values), as ggml's
// vec_dot kernels do, and writes N float32 results.
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
		dotAVX2(n, true, nibbles, ones)
		dotAVX2(n, false, nibbles, ones)
	}
	for _, n := range []int{1, 4} {
		dotQ4_0AVX512(n, nibbles, ones)
	}
	dotQ4_0Tile512(nibbles, ones)
	Generate()
}

// dotAVX2 emits dotQ4_0x{n}AVX2 (q4: Q4_0 weights, 18-byte blocks) or
// dotQ8_0x{n}AVX2 (Q8_0 weights, 34-byte blocks).
//
// Per block: the weight's f16 scale is widened once (F16C) and its 32 values
// unpacked once, then for each token: VPMADDUBSW multiplies unsigned weight
// bytes by signed activation bytes into int16 pairs, VPMADDWD sums pairs into
// eight int32, and one FMA adds them, scaled by d_w·d_a, to the token's float
// accumulator. Q4_0's nibbles are used as they are (0..15) and the −8 offset
// is taken off as 8·Σa (sum4) in the same integer lanes, one VPSUBD, instead
// of re-centring and sign-juggling every block; Q8_0's signed weights go
// through VPABSB/VPSIGNB as in ggml.
func dotAVX2(n int, q4 bool, nibbles, ones Mem) {
	kind, blockBytes := "Q8_0", 34
	if q4 {
		kind, blockBytes = "Q4_0", 18
	}
	name := fmt.Sprintf("dot%sx%dAVX2", kind, n)
	TEXT(name, NOSPLIT, "func(w *byte, qs *int8, d *float32, s4 *int32, nb int, k int, out *float32)")
	Doc(fmt.Sprintf("%s writes to out the dot products of a %s row of nb blocks with %d tokens' Q8_0 activations, k bytes apart in qs and s4 (k/8 in d).", name, kind, n))
	Pragma("noescape")
	w := Mem{Base: Load(Param("w"), GP64())}
	qs := Mem{Base: Load(Param("qs"), GP64())}
	d := Mem{Base: Load(Param("d"), GP64())}
	s4 := Mem{Base: Load(Param("s4"), GP64())}
	nb := Load(Param("nb"), GP64())
	k := Load(Param("k"), GP64()) // bytes between tokens in qs and s4
	kd := GP64()                  // bytes between tokens in d: k/8
	MOVQ(k, kd)
	SHRQ(U8(3), kd)
	var k3, kd3 Register
	if n == 4 {
		k3, kd3 = GP64(), GP64()
		LEAQ(Mem{Base: k, Index: k, Scale: 2}, k3)
		LEAQ(Mem{Base: kd, Index: kd, Scale: 2}, kd3)
	}
	// tok returns the address of token t's data at m, with strides s, s3.
	tok := func(m Mem, t int, s, s3 Register) Mem {
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

	// One accumulator per token; one token gets two, alternating between
	// blocks, so that consecutive FMAs do not wait on each other.
	unroll := 1
	if n == 1 {
		unroll = 2
	}
	acc := make([][]VecVirtual, unroll)
	for u := range acc {
		acc[u] = make([]VecVirtual, n)
		for i := range acc[u] {
			acc[u][i] = YMM()
			VXORPS(acc[u][i], acc[u][i], acc[u][i])
		}
	}
	mask, one := YMM(), YMM()
	VMOVDQU(nibbles, mask)
	VMOVDQU(ones, one)

	// block emits the work of block b of the current group.
	block := func(b int, acc []VecVirtual) {
		wb, qb, sb, db := w.Offset(b*blockBytes), qs.Offset(32*b), s4.Offset(32*b), d.Offset(4*b)
		// The weight block's scale, broadcast: f16 → f32.
		h := GP32()
		MOVWLZX(wb, h)
		dw := YMM()
		VMOVD(h, dw.AsX())
		VCVTPH2PS(dw.AsX(), dw.AsX())
		VBROADCASTSS(dw.AsX(), dw)

		wq := YMM()
		var wabs VecVirtual
		if q4 {
			hi := XMM()
			VMOVDQU(wb.Offset(2), wq.AsX())
			VPSRLW(U8(4), wq.AsX(), hi)
			VINSERTI128(U8(1), hi, wq, wq)
			VPAND(mask, wq, wq)
		} else {
			VMOVDQU(wb.Offset(2), wq)
			wabs = YMM()
			VPABSB(wq, wabs)
		}
		for t := 0; t < n; t++ {
			p, sc := YMM(), YMM()
			VBROADCASTSS(tok(db, t, kd, kd3), sc)
			VMULPS(dw, sc, sc)
			if q4 {
				VPMADDUBSW(tok(qb, t, k, k3), wq, p)
				VPMADDWD(one, p, p)
				VPSUBD(tok(sb, t, k, k3), p, p)
			} else {
				a := YMM()
				VMOVDQU(tok(qb, t, k, k3), a)
				VPSIGNB(wq, a, a)
				VPMADDUBSW(a, wabs, p)
				VPMADDWD(one, p, p)
			}
			VCVTDQ2PS(p, p)
			VFMADD231PS(p, sc, acc[t])
		}
	}
	advance := func(blocks int) {
		ADDQ(U32(blocks*blockBytes), w.Base)
		ADDQ(U32(32*blocks), qs.Base)
		ADDQ(U32(32*blocks), s4.Base)
		ADDQ(U32(4*blocks), d.Base)
	}

	Label(name + "_loop")
	CMPQ(nb, U32(unroll))
	JL(LabelRef(name + "_tail"))
	for u := 0; u < unroll; u++ {
		block(u, acc[u])
	}
	advance(unroll)
	SUBQ(U32(unroll), nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	block(0, acc[0])
	advance(1)
	DECQ(nb)
	JMP(LabelRef(name + "_tail"))

	Label(name + "_done")
	out := Mem{Base: Load(Param("out"), GP64())}
	for t := 0; t < n; t++ {
		for u := 1; u < unroll; u++ {
			VADDPS(acc[u][t], acc[0][t], acc[0][t])
		}
		x, top := acc[0][t].AsX(), XMM()
		VEXTRACTF128(U8(1), acc[0][t], top)
		VADDPS(top, x, x)
		VHADDPS(x, x, x)
		VHADDPS(x, x, x)
		VMOVSS(x, out.Offset(4*t))
	}
	VZEROUPPER()
	RET()
}

// dotQ4_0AVX512 emits dotQ4_0x{n}AVX512: as dotAVX2's Q4_0 kernel, two
// blocks per 512-bit register. The two blocks' nibbles are spread to
// [A lo | A hi | B lo | B hi] to line up with the activations' 64 bytes; the
// per-lane scales come from both f16 weight scales widened at once times d8,
// the activation scales repeated over each block's eight lanes. nb must be a
// multiple of 4 (n = 1: two accumulators of two blocks) or of 2 (n = 4).
func dotQ4_0AVX512(n int, nibbles, ones Mem) {
	name := fmt.Sprintf("dotQ4_0x%dAVX512", n)
	TEXT(name, NOSPLIT, "func(w *byte, qs *int8, d8 *float32, s4 *int32, nb int, k int, out *float32)")
	Doc(fmt.Sprintf("%s writes to out the dot products of a Q4_0 row of nb blocks with %d tokens' Q8_0 activations, k bytes apart in qs, d8 and s4.", name, n))
	Pragma("noescape")
	w := Mem{Base: Load(Param("w"), GP64())}
	qs := Mem{Base: Load(Param("qs"), GP64())}
	d8 := Mem{Base: Load(Param("d8"), GP64())}
	s4 := Mem{Base: Load(Param("s4"), GP64())}
	nb := Load(Param("nb"), GP64())
	k := Load(Param("k"), GP64())
	var k3 Register
	if n == 4 {
		k3 = GP64()
		LEAQ(Mem{Base: k, Index: k, Scale: 2}, k3)
	}
	tok := func(m Mem, t int) Mem {
		switch t {
		case 0:
			return m
		case 1:
			return Mem{Base: m.Base, Index: k, Scale: 1, Disp: m.Disp}
		case 2:
			return Mem{Base: m.Base, Index: k, Scale: 2, Disp: m.Disp}
		}
		return Mem{Base: m.Base, Index: k3, Scale: 1, Disp: m.Disp}
	}
	unroll := 1
	if n == 1 {
		unroll = 2
	}
	acc := make([][]VecVirtual, unroll)
	for u := range acc {
		acc[u] = make([]VecVirtual, n)
		for i := range acc[u] {
			acc[u][i] = ZMM()
			VPXORD(acc[u][i], acc[u][i], acc[u][i])
		}
	}
	mask, one := ZMM(), ZMM()
	VBROADCASTI64X4(nibbles, mask)
	VBROADCASTI64X4(ones, one)

	// pair emits blocks 2p and 2p+1 of the current group.
	pair := func(p int, acc []VecVirtual) {
		wb := w.Offset(2 * 18 * p)
		qb, sb, db := qs.Offset(64*p), s4.Offset(64*p), d8.Offset(64*p)
		// Weight scales: [dA ×8 | dB ×8] as float32.
		ha, hb := XMM(), XMM()
		VPBROADCASTW(wb, ha)
		VPBROADCASTW(wb.Offset(18), hb)
		VINSERTI128(U8(1), hb, ha.AsY(), ha.AsY())
		dw := ZMM()
		VCVTPH2PS(ha.AsY(), dw)
		// Nibbles: [A lo | A hi | B lo | B hi].
		lo, hi := YMM(), YMM()
		VMOVDQU(wb.Offset(2), lo.AsX())
		VINSERTI128(U8(1), wb.Offset(20), lo, lo)
		VPSRLW(U8(4), lo, hi)
		wq := ZMM()
		VINSERTI64X4(U8(1), hi, lo.AsZ(), wq)
		VSHUFI64X2(U8(0xd8), wq, wq, wq)
		VPANDD(mask, wq, wq)
		for t := 0; t < n; t++ {
			pr, sc := ZMM(), ZMM()
			VMULPS(tok(db, t), dw, sc)
			VPMADDUBSW(tok(qb, t), wq, pr)
			VPMADDWD(one, pr, pr)
			VPSUBD(tok(sb, t), pr, pr)
			VCVTDQ2PS(pr, pr)
			VFMADD231PS(pr, sc, acc[t])
		}
	}
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for u := 0; u < unroll; u++ {
		pair(u, acc[u])
	}
	ADDQ(U32(2*18*unroll), w.Base)
	ADDQ(U32(64*unroll), qs.Base)
	ADDQ(U32(64*unroll), s4.Base)
	ADDQ(U32(64*unroll), d8.Base)
	SUBQ(U32(2*unroll), nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	out := Mem{Base: Load(Param("out"), GP64())}
	for t := 0; t < n; t++ {
		for u := 1; u < unroll; u++ {
			VADDPS(acc[u][t], acc[0][t], acc[0][t])
		}
		z := acc[0][t]
		top := YMM()
		VEXTRACTF64X4(U8(1), z, top)
		VADDPS(top, z.AsY(), z.AsY())
		x, top2 := z.AsX(), XMM()
		VEXTRACTF128(U8(1), z.AsY(), top2)
		VADDPS(top2, x, x)
		VHADDPS(x, x, x)
		VHADDPS(x, x, x)
		VMOVSS(x, out.Offset(4*t))
	}
	VZEROUPPER()
	RET()
}

// dotQ4_0Tile512 emits dotQ4_0r2x4AVX512, the prefill tile: two weight rows
// (wstride bytes apart) by four tokens, eight accumulators. Each pair of
// weight blocks is unpacked once for four tokens and each token's
// activations are loaded once for both rows, halving the activation traffic
// from L2 that bounds the one-row kernel. nb must be even.
func dotQ4_0Tile512(nibbles, ones Mem) {
	const name = "dotQ4_0r2x4AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, wstride int, qs *int8, d8 *float32, s4 *int32, nb int, k int, out *[8]float32)")
	Doc(name + " writes out[4r+t], the dot products of Q4_0 rows r = 0, 1 (wstride bytes apart, nb blocks) with tokens t = 0..3 (Q8_0 activations k bytes apart in qs, d8 and s4).")
	Pragma("noescape")
	w0 := Mem{Base: Load(Param("w"), GP64())}
	ws := Load(Param("wstride"), GP64())
	w1 := Mem{Base: w0.Base, Index: ws, Scale: 1}
	qs := Mem{Base: Load(Param("qs"), GP64())}
	d8 := Mem{Base: Load(Param("d8"), GP64())}
	s4 := Mem{Base: Load(Param("s4"), GP64())}
	nb := Load(Param("nb"), GP64())
	k := Load(Param("k"), GP64())
	k3 := GP64()
	LEAQ(Mem{Base: k, Index: k, Scale: 2}, k3)
	tok := func(m Mem, t int) Mem {
		switch t {
		case 0:
			return m
		case 1:
			return Mem{Base: m.Base, Index: k, Scale: 1, Disp: m.Disp}
		case 2:
			return Mem{Base: m.Base, Index: k, Scale: 2, Disp: m.Disp}
		}
		return Mem{Base: m.Base, Index: k3, Scale: 1, Disp: m.Disp}
	}
	var acc [2][4]VecVirtual
	for r := range acc {
		for t := range acc[r] {
			acc[r][t] = ZMM()
			VPXORD(acc[r][t], acc[r][t], acc[r][t])
		}
	}
	mask, one := ZMM(), ZMM()
	VBROADCASTI64X4(nibbles, mask)
	VBROADCASTI64X4(ones, one)

	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	var dw, wq [2]VecVirtual
	for r, wb := range []Mem{w0, w1} {
		ha, hb := XMM(), XMM()
		VPBROADCASTW(wb, ha)
		VPBROADCASTW(wb.Offset(18), hb)
		VINSERTI128(U8(1), hb, ha.AsY(), ha.AsY())
		dw[r] = ZMM()
		VCVTPH2PS(ha.AsY(), dw[r])
		lo, hi := YMM(), YMM()
		VMOVDQU(wb.Offset(2), lo.AsX())
		VINSERTI128(U8(1), wb.Offset(20), lo, lo)
		VPSRLW(U8(4), lo, hi)
		wq[r] = ZMM()
		VINSERTI64X4(U8(1), hi, lo.AsZ(), wq[r])
		VSHUFI64X2(U8(0xd8), wq[r], wq[r], wq[r])
		VPANDD(mask, wq[r], wq[r])
	}
	for t := 0; t < 4; t++ {
		a, s, dd := ZMM(), ZMM(), ZMM()
		VMOVDQU64(tok(qs, t), a)
		VMOVDQU64(tok(s4, t), s)
		VMOVUPS(tok(d8, t), dd)
		for r := 0; r < 2; r++ {
			pr, sc := ZMM(), ZMM()
			VMULPS(dd, dw[r], sc)
			VPMADDUBSW(a, wq[r], pr)
			VPMADDWD(one, pr, pr)
			VPSUBD(s, pr, pr)
			VCVTDQ2PS(pr, pr)
			VFMADD231PS(pr, sc, acc[r][t])
		}
	}
	ADDQ(U32(36), w0.Base)
	ADDQ(U32(64), qs.Base)
	ADDQ(U32(64), s4.Base)
	ADDQ(U32(64), d8.Base)
	SUBQ(U32(2), nb)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	out := Mem{Base: Load(Param("out"), GP64())}
	for r := 0; r < 2; r++ {
		for t := 0; t < 4; t++ {
			z := acc[r][t]
			top := YMM()
			VEXTRACTF64X4(U8(1), z, top)
			VADDPS(top, z.AsY(), z.AsY())
			x, top2 := z.AsX(), XMM()
			VEXTRACTF128(U8(1), z.AsY(), top2)
			VADDPS(top2, x, x)
			VHADDPS(x, x, x)
			VHADDPS(x, x, x)
			VMOVSS(x, out.Offset(4*(4*r+t)))
		}
	}
	VZEROUPPER()
	RET()
}

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

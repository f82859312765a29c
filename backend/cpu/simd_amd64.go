package cpu

//go:generate go run ./asm -out dot_amd64.s -stubs dot_amd64_stub.go -pkg cpu

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"

	"github.com/latent-ai/latent/quant"
)

// hasAVX2 says whether the CPU runs the assembly: AVX2 and FMA (F16C comes
// with them); hasVNNI whether it also has AVX-512 VNNI for 256-bit registers
// (VPDPBUSD, which the eight-row Q4_0 kernels use when it is there).
var (
	hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasVNNI = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI
)

// addSIMDKernels replaces the pure-Go kernels with assembly ones where the
// CPU has the instructions: the AVX-512 VNNI set where it can, the AVX2 one
// where it can or force is "avx2". Every set computes in the pure-Go
// kernels' float order, bit for bit.
func addSIMDKernels(ks map[quant.Type]kernel, force string) string {
	if !hasAVX2 {
		return "generic"
	}
	name := "avx2"
	q4 := kernel{one: dotQ4_0Go, rows4: dotQ4_0Rows4, tile: dotQ4_0Tile, pack8: packQ4_0x8, rows8: packed8(dotQ4_0p8x1AVX2), tile8: packedTile8(dotQ4_0p8x4AVX2)}
	if hasVNNI && force != "avx2" {
		name, q4.rows8, q4.tile8 = "avx512vnni", packed8(dotQ4_0p8x1VNNI), packedTile8(dotQ4_0p8x4VNNI)
	}
	ks[quant.Q4_0] = q4
	ks[quant.Q8_0] = kernel{one: dotQ8_0AVX2, four: dotQ8_0x4}
	// The K-quant kernels are AVX2 in both sets: their scales multiply
	// int16 pair sums (VPMADDWD), which VPDPBUSD's int32 sums would need
	// widened and multiplied again.
	ks[quant.Q4_K] = kernel{one: kOne(dotQ4_Kx1AVX2, 144), four: kFour(dotQ4_Kx4AVX2, 144), rows4: kRows4(dotQ4_Kr4x1AVX2, 144)}
	ks[quant.Q5_K] = kernel{one: kOne(dotQ5_Kx1AVX2, 176), four: kFour(dotQ5_Kx4AVX2, 176)}
	ks[quant.Q6_K] = kernel{one: kOne(dotQ6_Kx1AVX2, 210), four: kFour(dotQ6_Kx4AVX2, 210), rows4: kRows4(dotQ6_Kr4x1AVX2, 210)}
	return name
}

// kAsm is the signature of the K-quant assembly: one weight row of nb
// super-blocks by Q8_K activations (qs, d, bsums), tokens k bytes apart.
type kAsm func(w *byte, qs *int8, d *float32, bsums *int16, nb int, k int, out *float32)

// kOne and kFour wrap a K-quant kernel of bs bytes per super-block as the
// matmul's one-token and four-token kernels (activation rows t+i·step).
func kOne(f kAsm, bs int) dotKernel {
	return func(w []byte, a arow) float32 {
		var out float32
		nb := len(a.d)
		_, _, _ = w[bs*nb-1], a.qs[256*nb-1], a.bsums[16*nb-1]
		f(&w[0], &a.qs[0], &a.d[0], &a.bsums[0], nb, 0, &out)
		return out
	}
}

// kRowsAsm is the signature of the four-row K-quant assembly: rows
// wstride bytes apart by one token.
type kRowsAsm func(w *byte, wstride int, qs *int8, d *float32, bsums *int16, nb int, out *float32)

// kRows4 wraps a four-row K-quant kernel of bs bytes per super-block as the
// matmul's rows4 (decode).
func kRows4(f kRowsAsm, bs int) rowsKernel {
	return func(w []byte, rowBytes int, a arow, out *[16]float32) {
		nb := len(a.d)
		_, _, _ = w[3*rowBytes+bs*nb-1], a.qs[256*nb-1], a.bsums[16*nb-1]
		f(&w[0], rowBytes, &a.qs[0], &a.d[0], &a.bsums[0], nb, &out[0])
	}
}

func kFour(f kAsm, bs int) quadKernel {
	return func(w []byte, a *acts, t, step int, out *[4]float32) {
		r := a.quad(t, step)
		nb := len(r.d)
		_ = w[bs*nb-1]
		f(&w[0], &r.qs[0], &r.d[0], &r.bsums[0], nb, step*a.k, &out[0])
	}
}

// The wrappers pass a token's blocks to the assembly; k, the bytes from one
// token to the next, is step rows (qs: k int8; d and b8: k/32 four-byte values).

func dotQ8_0AVX2(w []byte, a arow) float32 {
	var out float32
	_ = w[34*len(a.d)-1]
	dotQ8_0x1AVX2(&w[0], &a.qs[0], &a.d[0], len(a.d), len(a.qs), &out)
	return out
}

func dotQ8_0x4(w []byte, a *acts, t, step int, out *[4]float32) {
	r := a.quad(t, step)
	_ = w[34*len(r.d)-1]
	dotQ8_0x4AVX2(&w[0], &r.qs[0], &r.d[0], len(r.d), step*a.k, &out[0])
}

func dotQ4_0Rows4(w []byte, rowBytes int, a arow, out *[16]float32) {
	_ = w[3*rowBytes+18*len(a.d)-1]
	dotQ4_0r4x1AVX2(&w[0], rowBytes, &a.qs[0], &a.d[0], &a.b8[0], len(a.d), len(a.qs), &out[0])
}

func dotQ4_0Tile(w []byte, rowBytes int, a *acts, t, step int, out *[16]float32) {
	r := a.quad(t, step)
	_ = w[3*rowBytes+18*len(r.d)-1]
	dotQ4_0r4x4AVX2(&w[0], rowBytes, &r.qs[0], &r.d[0], &r.b8[0], len(r.d), step*a.k, &out[0])
}

// packQ4_0x8 repacks groups of eight Q4_0 rows (rowBytes each) from src
// into dst for the eight-row kernels: per block, the eight f16 scales, then
// four 32-byte chunks, chunk j holding bytes 4j..4j+3 of each row's nibbles
// (row r at 4r). A group keeps its rows' offset and size in the matrix
// (8·rowBytes bytes), and the kernels read it as one stream.
func packQ4_0x8(dst, src []byte, rowBytes int) {
	const bs = 18 // bytes of a Q4_0 block: f16 scale, 16 nibble bytes
	le := binary.LittleEndian
	for g := 0; g+8*rowBytes <= len(src); g += 8 * rowBytes {
		for b := 0; b < rowBytes/bs; b++ {
			o := dst[g+b*8*bs : g+(b+1)*8*bs]
			for r := 0; r < 8; r++ {
				in := src[g+r*rowBytes+b*bs : g+r*rowBytes+(b+1)*bs]
				le.PutUint16(o[2*r:], le.Uint16(in))
				for j := 0; j < 4; j++ {
					le.PutUint32(o[16+32*j+4*r:], le.Uint32(in[2+4*j:]))
				}
			}
		}
	}
}

// packedAsm is the signature of the packed eight-row Q4_0 assembly for one
// token; packedTileAsm for four tokens, k bytes apart.
type (
	packedAsm     func(w *byte, qs *int8, d *float32, b8 *int32, nb int, out *float32)
	packedTileAsm func(w *byte, qs *int8, d *float32, b8 *int32, nb, k int, out *float32)
)

// packed8 wraps a packed eight-row assembly kernel (AVX2 or VNNI) as rows8.
func packed8(f packedAsm) rowsKernel {
	return func(w []byte, rowBytes int, a arow, out *[16]float32) {
		_ = w[8*18*len(a.d)-1]
		f(&w[0], &a.qs[0], &a.d[0], &a.b8[0], len(a.d), &out[0])
	}
}

// packedTile8 wraps a packed eight-row, four-token assembly kernel as tile8.
func packedTile8(f packedTileAsm) tile8Kernel {
	return func(w []byte, rowBytes int, a *acts, t, step int, out *[32]float32) {
		r := a.quad(t, step)
		_ = w[8*18*len(r.d)-1]
		f(&w[0], &r.qs[0], &r.d[0], &r.b8[0], len(r.d), step*a.k, &out[0])
	}
}

// simdVecOps returns the AVX2 forms of dotF32VecGo and fmaAxpyGo, or nils.
func simdVecOps() (func(x, y []float32) float32, func(out, v []float32, s float32)) {
	if !hasAVX2 {
		return nil, nil
	}
	return dotF32VecSIMD, fmaAxpySIMD
}

func dotF32VecSIMD(x, y []float32) float32 {
	np := len(x) &^ 31
	if np == 0 {
		return dotF32VecGo(x, y)
	}
	y = y[:len(x)]
	r := dotF32VecAVX2(&x[0], &y[0], np)
	if np == len(x) {
		return r
	}
	sum := float64(r) // the tail in double, as ggml
	for i := np; i < len(x); i++ {
		sum += float64(x[i] * y[i])
	}
	return float32(sum)
}

func fmaAxpySIMD(out, v []float32, s float32) {
	v = v[:len(out)]
	n := len(out) &^ 7
	if n > 0 {
		fmaAxpyAVX2(&out[0], &v[0], s, n)
	}
	fmaAxpyGo(out[n:], v[n:], s)
}

// simdQuantQ8_0 returns the AVX2 form of quantRowQ8_0Go, or nil.
func simdQuantQ8_0() func(x []float32, qs []int8, d []float32, b8 []int32) {
	if !hasAVX2 {
		return nil
	}
	return quantRowQ8_0SIMD
}

func quantRowQ8_0SIMD(x []float32, qs []int8, d []float32, b8 []int32) {
	nb := len(d)
	if nb == 0 {
		return
	}
	_, _, _ = x[32*nb-1], qs[32*nb-1], b8[nb-1]
	quantQ8_0AVX2(&x[0], &qs[0], &d[0], &b8[0], nb)
}

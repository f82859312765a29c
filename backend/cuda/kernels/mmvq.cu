// Quantized matrix-vector products on integer dot products (dp4a), the
// decode hot path. Activations are first rounded to 8-bit blocks by
// quant_act exactly as ggml's CPU kernels round them (Q8_0: 32 values and an
// f16 scale; Q8_K: 256 values, a float scale and sums of 16), so every
// block's integer sum is exact and is scaled as ggml scales it.
//
// Q4_0 and Q8_0 weights are repacked at upload so that each row holds its
// quant bytes first (16 or 32 per block, 16-byte aligned: one or two 16-byte
// loads per block) and its f16 scales after. Q4_K and Q5_K blocks (144 and
// 176 bytes) are already 16-byte multiples and are read as they are.

struct MQ {
    const u8* w;
    i64 rowBytes, K, N;
    const i8* xq;
    const float* xd;
    const int* xb;
    i64 xrows, xY, xDiv;
    float* y;
    i64 ys, yY;
    i64 T, acc;
    const int* ids;
    i64 wY;
    const u8* w2;  // when set: y = silu(x·W) · (x·W2), gate and up in one pass
    // Without xq (one token): each block rounds its input row itself, row R
    // at xsrc + (R / xS)·xrs + (R % xS)·xseg, RMS-normalised when nw is set.
    const float* xsrc;
    i64 xrs, xS, xseg;
    const float* nw;
    float eps;
    // the input's rounding: ROUND_Q8_K, where mmvk1 rounds it (it serves
    // only the K-quants). Read, not written as a constant: the constant's
    // build of glm's output product (then mmvq1_T_Q6_K) measured glm 0.3%
    // slower at an empty context, 358.1/358.4 -> 357.0/357.0 tok/s.
    int mode;
    // Weighted sum over picked experts (the MoE down projection): when nsum
    // is set, problem py is a token and the kernel sums nsum experts'
    // products, problem py·nsum + k weighted by wts[py·nsum + k], in order.
    const float* wts;
    i64 nsum;
    // When set (one problem, mmv1): y2 += the new y, the residual add that
    // follows a product accumulating into a sum (x += moe + shared expert).
    float* y2;
    // Extras (mmv1, one token, nr set): problems py ≥ nr, or with nsum the
    // summands k ≥ nr, are the shared expert's: chunk j = py − nr (or
    // k − nr) of N rows of wx (and w2x) from row j·N, its input xsrcx, its
    // output yx + j·yY, its weight in a sum 1.
    i64 nr;
    const u8* wx;
    const u8* w2x;
    float* yx;
    const float* xsrcx;
    // Set when ids were written before the launch before this one (the MoE
    // down projection: the gate/up launch just before it also reads them),
    // so that they and the weights they pick can be loaded before the wait.
    i64 idsEarly;
    // mmv1 with nsum and nr: the extra summands' rows are Kx values, rbx
    // bytes (0: as K, rowBytes), so that a shared expert wider than a
    // routed one (deepseek-v2-lite's two, 2816 against 1408) still rides in
    // the routed down launch.
    i64 Kx, rbx;
};

// quant_row rounds one row of L activations (RMS-normalised first when nw
// is set) into 8-bit blocks: mode ROUND_Q8_0 (q, f16-rounded scales d),
// or ROUND_Q8_K (q, float scales d, sums of 16 in bs), which leaves pad
// bytes after each 256-value block's quants (see mmvk1). Thread c owns the
// 32 values [32c, 32c+32) (and c + blockDim.x after them): all its loads
// are issued at once and the row is read once, so the whole rounding costs
// about one memory round trip. Every thread of the block must call it; red
// holds 32 floats; L ≤ 64·blockDim.x.
__device__ __forceinline__ void quant_row(const float* x, int L, const float* nw, float eps, int mode, i8* qr, float* dr, int* br, float* red,
                                          int pad = 0) {
    const int nc = L / 32;
    const bool vec = (((unsigned long long)x | (unsigned long long)(nw ? nw : x)) & 15) == 0;
    float v[2][32];
    float ss = 0.f;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int c = threadIdx.x + u * blockDim.x;
#pragma unroll
        for (int i = 0; i < 32; i++) v[u][i] = 0.f;
        if (c < nc) {
            if (vec) {
                const float4* p = (const float4*)(x + 32 * c);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float4 f = p[k];
                    v[u][4 * k] = f.x; v[u][4 * k + 1] = f.y; v[u][4 * k + 2] = f.z; v[u][4 * k + 3] = f.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++) v[u][i] = x[32 * c + i];
            }
#pragma unroll
            for (int i = 0; i < 32; i++) ss += v[u][i] * v[u][i];
        }
    }
    if (nw) {
        // ss holds this thread's chunks summed in row_sumsq's order
        const float scale = rms_scale(block_sum(ss, red), L, eps);
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int c = threadIdx.x + u * blockDim.x;
            if (c < nc) {
                if (vec) {
                    const float4* p = (const float4*)(nw + 32 * c);
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        float4 g = p[k];
                        v[u][4 * k] = (v[u][4 * k] * scale) * g.x;
                        v[u][4 * k + 1] = (v[u][4 * k + 1] * scale) * g.y;
                        v[u][4 * k + 2] = (v[u][4 * k + 2] * scale) * g.z;
                        v[u][4 * k + 3] = (v[u][4 * k + 3] * scale) * g.w;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 32; i++) v[u][i] = (v[u][i] * scale) * nw[32 * c + i];
                }
            }
        }
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int c = threadIdx.x + u * blockDim.x;
        const bool ok = c < nc;
        float amax = 0.f, mx = 0.f;
        int at = 1 << 30;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            float a = fabsf(v[u][i]);
            if (a > amax) { amax = a; mx = v[u][i]; at = i; }
        }
        int qs[8];
        if (mode == ROUND_Q8_0) {
            float dh = round_f16(amax / 127.f);
            float id = amax != 0.f ? 127.f / amax : 0.f;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int w = 0;
#pragma unroll
                for (int j = 0; j < 4; j++) w |= ((int)rintf(v[u][4 * k + j] * id) & 255) << (8 * j);
                qs[k] = w;
            }
            if (ok) {
                ((int4*)(qr + 32 * c))[0] = make_int4(qs[0], qs[1], qs[2], qs[3]);
                ((int4*)(qr + 32 * c))[1] = make_int4(qs[4], qs[5], qs[6], qs[7]);
                dr[c] = dh;
            }
        } else {
            // the block's first value of largest magnitude, over its 8 chunks (8 lanes)
            at += (c & 7) * 32;
#pragma unroll
            for (int o = 4; o > 0; o >>= 1) {
                float a2 = __shfl_xor_sync(0xffffffffu, amax, o);
                float m2 = __shfl_xor_sync(0xffffffffu, mx, o);
                int at2 = __shfl_xor_sync(0xffffffffu, at, o);
                if (a2 > amax || (a2 == amax && at2 < at)) { amax = a2; mx = m2; at = at2; }
            }
            float iscale = amax != 0.f ? -127.f / mx : 0.f;
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int w = 0;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int qi = (int)fminf(127.f, rintf(iscale * v[u][4 * k + j]));
                    if (k < 4) s0 += qi; else s1 += qi;
                    w |= (qi & 255) << (8 * j);
                }
                qs[k] = w;
            }
            if (ok) {
                i8* q = qr + 32 * c + pad * (c >> 3);
                ((int4*)q)[0] = make_int4(qs[0], qs[1], qs[2], qs[3]);
                ((int4*)q)[1] = make_int4(qs[4], qs[5], qs[6], qs[7]);
                br[2 * c] = s0;
                br[2 * c + 1] = s1;
                if ((c & 7) == 0) dr[c >> 3] = amax != 0.f ? 1.f / iscale : 0.f;
            }
        }
    }
}

#if UNIT_QUANT_ACT
// quant_act rounds rows of activations for a batch: row R = r·S + s is
// segment s of input row r.
extern "C" __global__ void quant_act(i8* q, float* d, int* bs, const float* src, i64 rs, i64 segs, int S, int L,
                                     const float* nw, float eps, int mode) {
    pdl_entry();
    __shared__ float red[32];
    const int R = blockIdx.x, r = R / S, s = R % S;
    const int blk = mode == ROUND_Q8_0 ? 32 : 256;
    quant_row(src + r * rs + s * segs, L, nw, eps, mode, q + (i64)R * L, d + (i64)R * (L / blk), bs ? bs + (i64)R * (L / 16) : nullptr, red);
}
#endif

// Per type: QB values per block, rows per warp, and the dot products of
// weight block b of a row with tokens' 8-bit blocks (a, scales da, sums of
// 16 bs): Q4_0 and Q8_0 a token at a time (dot), K-quants eight tokens at
// once (dots) or, for one token, half a block a lane (Raw, load, value).
template <int TY> struct QT;

template <> struct QT<T_Q4_0> {
    static constexpr int QB = 32, RPW = 1;
    __device__ static float dot(const u8* row, int b, int nb, const i8* a, float da) {
        const int4 q = *(const int4*)(row + 16 * b);
        const float dw = h2f(((const u16*)(row + 16 * nb))[b]);
        const int4 a0 = ((const int4*)a)[0], a1 = ((const int4*)a)[1];
        int as = 0;  // the activations' sum: the quants' offset of 8
        as = dp4a(0x01010101, a0.x, as);
        as = dp4a(0x01010101, a0.y, as);
        as = dp4a(0x01010101, a0.z, as);
        as = dp4a(0x01010101, a0.w, as);
        as = dp4a(0x01010101, a1.x, as);
        as = dp4a(0x01010101, a1.y, as);
        as = dp4a(0x01010101, a1.z, as);
        as = dp4a(0x01010101, a1.w, as);
        return Q1<T_Q4_0>::val(&q, a0, a1, as, dw, da);
    }
};

template <> struct QT<T_Q8_0> {
    static constexpr int QB = 32, RPW = 1;
    __device__ static float dot(const u8* row, int b, int nb, const i8* a, float da) {
        const int4 q[2] = {*(const int4*)(row + 32 * b), *(const int4*)(row + 32 * b + 16)};
        const float dw = h2f(((const u16*)(row + 32 * nb))[b]);
        const int4 a0 = ((const int4*)a)[0], a1 = ((const int4*)a)[1];
        return Q1<T_Q8_0>::val(q, a0, a1, 0, dw, da);
    }
};

// kscales8 unpacks a Q4_K or Q5_K block's eight 6-bit scales and mins from
// its header word h (bytes 4..15), shifting the words in place (a byte
// array would live in local memory).
__device__ __forceinline__ void kscales8(const int4& h, int* sc, int* m) {
    const u32 s0 = (u32)h.y, s1 = (u32)h.z, s2 = (u32)h.w;  // the 12 scale bytes
#pragma unroll
    for (int k = 0; k < 4; k++) {
        sc[k] = (int)((s0 >> (8 * k)) & 63);
        m[k] = (int)((s1 >> (8 * k)) & 63);
        sc[4 + k] = (int)(((s2 >> (8 * k)) & 15) | (((s0 >> (8 * k + 6)) & 3) << 4));
        m[4 + k] = (int)(((s2 >> (8 * k + 4)) & 15) | (((s1 >> (8 * k + 6)) & 3) << 4));
    }
}

// kscale is kscales8's sc[j] for a runtime j (a loop index).
__device__ __forceinline__ int kscale(const int4& h, int j) {
    const u32 s0 = (u32)h.y, s2 = (u32)h.w;
    if (j < 4) return (int)((s0 >> (8 * j)) & 63);
    const int k = j - 4;
    return (int)(((s2 >> (8 * k)) & 15) | (((s0 >> (8 * k + 6)) & 3) << 4));
}

// kfinish scales a Q4_K or Q5_K block's integer sums: d·aux − dmin·Σ m·(the
// 8-bit blocks' sums), d and dmin (times the input's scale da) from the
// header word hx.
__device__ __forceinline__ float kfinish(int hx, float da, int aux, const int* m, const int* bs) {
    int summ = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) summ += m[j] * (bs[2 * j] + bs[2 * j + 1]);
    float d = h2f((u16)(hx & 0xffff)) * da, dmin = h2f((u16)((u32)hx >> 16)) * da;
    return d * (float)aux - dmin * (float)summ;
}

// kchunk is chunk c (64 values: sub-blocks 2c and 2c+1) of a Q4_K or Q5_K
// block's integer dot with the 8-bit input av: the low and high nibbles of
// the 32 quant bytes q0, q1 (with Q5: their fifth bits, bits 2c and 2c+1
// of qh) against the chunk's two input blocks, scaled by the sub-blocks'
// scales sc0, sc1.
template <bool Q5>
__device__ __forceinline__ int kchunk(const int4& q0, const int4& q1, const int* qh, int c, const int4* av, int sc0, int sc1) {
    int q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int4 l0 = av[4 * c], l1 = av[4 * c + 1], h0 = av[4 * c + 2], h1 = av[4 * c + 3];
    int al[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    int ah[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    int lo = 0, hi = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int vl = q[k] & 0x0F0F0F0F, vh = (q[k] >> 4) & 0x0F0F0F0F;
        if (Q5) {
            vl |= ((qh[k] >> (2 * c)) & 0x01010101) << 4;
            vh |= ((qh[k] >> (2 * c + 1)) & 0x01010101) << 4;
        }
        lo = dp4a(vl, al[k], lo);
        hi = dp4a(vh, ah[k], hi);
    }
    return sc0 * lo + sc1 * hi;
}

// kdots is dots (see QT<T_Q6_K>) for a Q4_K (Q5 false) or Q5_K block blk
// whose quant words start at word qw: each token's sums are kchunk's and
// kfinish's, but the scales and each chunk's quants are decoded once for
// all tokens. The eight-token kernels use it; the one-token ones (mmvk1)
// take a block in halves instead (Raw, value).
template <bool Q5, int NT>
__device__ __forceinline__ void kdots(const int4* blk, int qw, const i8* const* a, const float* da, const int* const* bs, int nt, float* acc) {
    const int4 h = blk[0];
    int sc[8], m[8];
    kscales8(h, sc, m);  // m for kfinish (the half-rolled loop takes its scales from kscale)
    int qh[8];
    if (Q5) {
        const int4 qh0 = blk[1], qh1 = blk[2];
        qh[0] = qh0.x, qh[1] = qh0.y, qh[2] = qh0.z, qh[3] = qh0.w, qh[4] = qh1.x, qh[5] = qh1.y, qh[6] = qh1.z, qh[7] = qh1.w;
    }
    int aux[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) aux[t] = 0;
#pragma unroll 2  // half rolled: NVRTC compiles it in about half the time (glm-4.7-flash Q4_K_M prefill 674 → 669 tok/s)
    for (int c = 0; c < 4; c++) {
        const int sc0 = kscale(h, 2 * c), sc1 = kscale(h, 2 * c + 1);
        const int4 q0 = blk[qw + 2 * c], q1 = blk[qw + 2 * c + 1];
        const int q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        int vl[8], vh[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            vl[k] = q[k] & 0x0F0F0F0F, vh[k] = (q[k] >> 4) & 0x0F0F0F0F;
            if (Q5) {
                vl[k] |= ((qh[k] >> (2 * c)) & 0x01010101) << 4;
                vh[k] |= ((qh[k] >> (2 * c + 1)) & 0x01010101) << 4;
            }
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            const int4* av = (const int4*)a[t];
            const int4 l0 = av[4 * c], l1 = av[4 * c + 1], h0 = av[4 * c + 2], h1 = av[4 * c + 3];
            const int al[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
            const int ah[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
            int lo = 0, hi = 0;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                lo = dp4a(vl[k], al[k], lo);
                hi = dp4a(vh[k], ah[k], hi);
            }
            aux[t] += sc0 * lo + sc1 * hi;
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= nt) break;
        acc[t] += kfinish(h.x, da[t], aux[t], m, bs[t]);
    }
}

// ld4 is a K-quant block's 16-byte load for mmvk1: through L1, unlike
// mmv1's (ldw4), since a lane reads its half-block in several words of
// the same sectors, which then hit (deepseek-v2-lite's Q6_K output product:
// 59 µs against 80 with ldw4, `latent profile`).
__device__ __forceinline__ int4 ld4(const u8* p) { return *(const int4*)p; }

// kvalue is a Q4_K (Q5 false) or Q5_K block's dot product with the input's
// 8-bit block a, from one lane's half (mmvk1): header h, the fifth bits qh
// (Q5), the quants q of chunks 2·half and 2·half + 1. The lane's integer
// sums, the partner lane's (lane ^ 1, the other half) added exactly, then
// kfinish. Every lane of the warp calls it.
template <bool Q5>
__device__ __forceinline__ float kvalue(const int4& h, const int* qh, const int4* q, int half, const i8* a, float da, const int* bs) {
    int sc[8], m[8];
    kscales8(h, sc, m);
    const int4* av = (const int4*)a;
    // the half's four scales picked by value, not by a runtime index (which would put sc in local memory)
    int aux = kchunk<Q5>(q[0], q[1], qh, 2 * half, av, half ? sc[4] : sc[0], half ? sc[5] : sc[1]) +
              kchunk<Q5>(q[2], q[3], qh, 2 * half + 1, av, half ? sc[6] : sc[2], half ? sc[7] : sc[3]);
    aux += __shfl_xor_sync(0xffffffffu, aux, 1);
    return kfinish(h.x, da, aux, m, bs);
}

template <> struct QT<T_Q4_K> {
    static constexpr int QB = 256, RPW = 4, BB = 144;  // BB: a block's bytes on the device
    // Raw is one lane's half of a block (mmvk1): the header (d, dmin and
    // the 12 scale bytes) and the quants of chunks 2·half and 2·half + 1.
    struct Raw {
        int4 h, q[4];
    };
    __device__ static Raw load(const u8* row, int b, int half) {
        const u8* blk = row + BB * b;
        Raw r;
        r.h = ld4(blk);
#pragma unroll
        for (int j = 0; j < 4; j++) r.q[j] = ld4(blk + 16 * (1 + 4 * half + j));
        return r;
    }
    __device__ static float value(const Raw& r, int half, const i8* a, float da, const int* bs) {
        return kvalue<false>(r.h, nullptr, r.q, half, a, da, bs);
    }
    template <int NT>
    __device__ static void dots(const u8* row, int b, const i8* const* a, const float* da, const int* const* bs, int nt, float* acc) {
        kdots<false, NT>((const int4*)(row + BB * b), 1, a, da, bs, nt, acc);
    }
};

template <> struct QT<T_Q5_K> {
    static constexpr int QB = 256, RPW = 4, BB = 176;
    // Raw is one lane's half of a block (mmvk1): the header, the fifth bits
    // of all 256 values, and the quants of chunks 2·half and 2·half + 1.
    struct Raw {
        int4 h, qh[2], q[4];
    };
    __device__ static Raw load(const u8* row, int b, int half) {
        const u8* blk = row + BB * b;
        Raw r;
        r.h = ld4(blk);
        r.qh[0] = ld4(blk + 16), r.qh[1] = ld4(blk + 32);
#pragma unroll
        for (int j = 0; j < 4; j++) r.q[j] = ld4(blk + 16 * (3 + 4 * half + j));
        return r;
    }
    __device__ static float value(const Raw& r, int half, const i8* a, float da, const int* bs) {
        const int qh[8] = {r.qh[0].x, r.qh[0].y, r.qh[0].z, r.qh[0].w, r.qh[1].x, r.qh[1].y, r.qh[1].z, r.qh[1].w};
        return kvalue<true>(r.h, qh, r.q, half, a, da, bs);
    }
    template <int NT>
    __device__ static void dots(const u8* row, int b, const i8* const* a, const float* da, const int* const* bs, int nt, float* acc) {
        kdots<true, NT>((const int4*)(row + BB * b), 3, a, da, bs, nt, acc);
    }
};

// q6half loads half h of a Q6_K block (its slot 16-byte aligned, see
// Q6K_SLOT) with 16-byte loads: the 16 words of low bits (ql) and the 8 of
// high bits (qh) of its 128 values, and the words of its 8 scales (sw0 for
// sub-blocks 0–1, sw1 for 2–3).
__device__ __forceinline__ void q6half(const u8* blk, int h, int4 sc4, int* ql, int* qh, int& sw0, int& sw1) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int4 v = *(const int4*)(blk + 64 * h + 16 * j);
        ql[4 * j] = v.x, ql[4 * j + 1] = v.y, ql[4 * j + 2] = v.z, ql[4 * j + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int4 v = *(const int4*)(blk + 128 + 32 * h + 16 * j);
        qh[4 * j] = v.x, qh[4 * j + 1] = v.y, qh[4 * j + 2] = v.z, qh[4 * j + 3] = v.w;
    }
    sw0 = h ? sc4.z : sc4.x;
    sw1 = h ? sc4.w : sc4.y;
}

// q6quants decodes sub-block s of a half (32 values) to 6-bit quants, four
// a word.
__device__ __forceinline__ void q6quants(const int* ql, const int* qh, int s, int* q) {
#pragma unroll
    for (int k = 0; k < 8; k++) q[k] = ((ql[8 * (s & 1) + k] >> (4 * (s >> 1))) & 0x0F0F0F0F) | (((qh[k] >> (2 * s)) & 0x03030303) << 4);
}

// q6sub is sub-block s (quants q, scales g = 8h + 2s and g + 1 in the half's
// scale words) dotted with the input's 32 values ai: Σ over its two
// 16-value groups of scale·(Σ q·a − 32·Σ a), the sums of a being bs[g],
// bs[g + 1].
__device__ __forceinline__ int q6sub(const int* q, int sw0, int sw1, int s, const int* ai, const int* bs, int g) {
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) s0 = dp4a(q[k], ai[k], s0);
#pragma unroll
    for (int k = 4; k < 8; k++) s1 = dp4a(q[k], ai[k], s1);
    const int w = s < 2 ? sw0 : sw1, sh = 16 * (s & 1);  // scale bytes 2(s&1) and 2(s&1)+1 of the word
    const int sc0 = (i8)(w >> sh), sc1 = (i8)(w >> (sh + 8));
    return sc0 * (s0 - 32 * bs[g]) + sc1 * (s1 - 32 * bs[g + 1]);
}

template <> struct QT<T_Q6_K> {
    static constexpr int QB = 256, RPW = 4, BB = Q6K_SLOT;
    // Raw is one lane's half h of a block (mmvk1): its 128 values' low
    // bits (ql) and high bits (qh), its 8 scales and the block's d.
    struct Raw {
        int4 ql[4], qh[2];
        int sc0, sc1;
        u32 d;
    };
    __device__ static Raw load(const u8* row, int b, int half) {
        const u8* blk = row + Q6K_SLOT * b;
        Raw r;
#pragma unroll
        for (int j = 0; j < 4; j++) r.ql[j] = ld4(blk + 64 * half + 16 * j);
        r.qh[0] = ld4(blk + 128 + 32 * half), r.qh[1] = ld4(blk + 144 + 32 * half);
        const int2 sc = *(const int2*)(blk + 192 + 8 * half);
        r.sc0 = sc.x, r.sc1 = sc.y;
        r.d = *(const u16*)(blk + 208);
        return r;
    }
    // value: the half's integer sum (q6sub over its four sub-blocks), the
    // partner lane's half added exactly, times d·da. Every lane of the warp
    // calls it.
    __device__ static float value(const Raw& r, int half, const i8* a, float da, const int* bs) {
        int ql[16], qh[8];
#pragma unroll
        for (int j = 0; j < 4; j++) ql[4 * j] = r.ql[j].x, ql[4 * j + 1] = r.ql[j].y, ql[4 * j + 2] = r.ql[j].z, ql[4 * j + 3] = r.ql[j].w;
#pragma unroll
        for (int j = 0; j < 2; j++) qh[4 * j] = r.qh[j].x, qh[4 * j + 1] = r.qh[j].y, qh[4 * j + 2] = r.qh[j].z, qh[4 * j + 3] = r.qh[j].w;
        const int* ai = (const int*)a + 32 * half;
        int aux = 0;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            int q[8];
            q6quants(ql, qh, s, q);
            aux += q6sub(q, r.sc0, r.sc1, s, ai + 8 * s, bs, 8 * half + 2 * s);
        }
        aux += __shfl_xor_sync(0xffffffffu, aux, 1);
        const float d = h2f((u16)r.d) * da;
        return d * (float)aux;
    }
    // dots adds block b's dot products with nt ≤ NT tokens' 8-bit blocks
    // (a[t], scales da[t], sums of 16 bs[t]) into acc, each token's as value
    // sums it: each half's quants are loaded once for all tokens, and the
    // halves are a loop, which keeps the eight-token kernel small enough for
    // NVRTC to compile in about a second. (The one-token kernel, mmvk1,
    // sums a lane's half through load and value instead.)
    template <int NT>
    __device__ static void dots(const u8* row, int b, const i8* const* a, const float* da, const int* const* bs, int nt, float* acc) {
        const u8* blk = row + Q6K_SLOT * b;
        const int4 sc4 = *(const int4*)(blk + 192);
        int aux[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) aux[t] = 0;
#pragma unroll 1
        for (int h = 0; h < 2; h++) {
            int ql[16], qh[8], sw0, sw1;
            q6half(blk, h, sc4, ql, qh, sw0, sw1);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                int q[8];
                q6quants(ql, qh, s, q);  // once for all tokens
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    if (t >= nt) break;
                    aux[t] += q6sub(q, sw0, sw1, s, (const int*)a[t] + 32 * h + 8 * s, bs[t], 8 * h + 2 * s);
                }
            }
        }
        const float dw = h2f(*(const u16*)(blk + 208));
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            const float d = dw * da[t];
            acc[t] += d * (float)aux[t];
        }
    }
};

// mmvq: eight tokens from blockIdx.z·8 (the batch's products; one token
// takes mmv1 or mmvk1). Each warp computes RPW rows (32/RPW lanes per row,
// each lane whole quant blocks); problems on blockIdx.y.
template <int TY, int NT> __device__ __forceinline__ void mmvq_impl(const MQ& p) {
    static_assert(NT > 1, "one token: mmv1 or mmvk1");
    constexpr int QB = QT<TY>::QB, RPW = QT<TY>::RPW, LPR = 32 / RPW;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int sub = lane / LPR, l = lane % LPR;
    const int py = blockIdx.y, t0 = blockIdx.z * NT;
    const int nb = (int)(p.K / QB);
    const int nk = p.nsum ? (int)p.nsum : 1;  // products summed by this warp
    const i64 rpb = (i64)(blockDim.x >> 5) * RPW;
    for (i64 base = (i64)blockIdx.x * rpb; base < p.N; base += (i64)gridDim.x * rpb) {
        const i64 o = base + warp * RPW + sub;
        const bool valid = o < p.N;
        const i64 oo = valid ? o : p.N - 1;
        float total[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) total[t] = 0.f;
        for (int k = 0; k < nk; k++) {
            const int pk = p.nsum ? py * nk + k : py;
            const i64 wrow = (p.ids ? (i64)p.ids[pk] : (i64)pk) * p.wY + oo;
            const u8* row = p.w + wrow * p.rowBytes;
            const u8* row2 = p.w2 ? p.w2 + wrow * p.rowBytes : nullptr;
            const i64 R0 = (pk / p.xDiv) * p.xY;
            float acc[NT], acc2[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) acc[t] = acc2[t] = 0.f;
            // dots: K-quants, each block decoded once for all tokens, a
            // lane's few big blocks one at a time (unrolled, the K-quant
            // kernels took about three times as long to compile)
            constexpr bool DOTS = QB == 256;
#pragma unroll (QB == 256 ? 1 : 4)
            for (int b = l; b < nb; b += LPR) {
                if constexpr (DOTS) {
                    const int nt = (int)min((i64)NT, p.T - t0);
                    const i8* a[NT];
                    float da[NT];
                    const int* bs[NT];
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        const i64 R = R0 + (i64)(t0 + t) * p.xrows;
                        a[t] = p.xq + R * p.K + (i64)b * QB;
                        da[t] = t < nt ? p.xd[R * nb + b] : 0.f;
                        bs[t] = p.xb + R * (p.K / 16) + b * 16;
                    }
                    QT<TY>::template dots<NT>(row, b, a, da, bs, nt, acc);
                    if (row2) QT<TY>::template dots<NT>(row2, b, a, da, bs, nt, acc2);
                } else {
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        if (t0 + t >= p.T) break;
                        const i64 R = R0 + (i64)(t0 + t) * p.xrows;
                        const i8* a = p.xq + R * p.K + (i64)b * QB;
                        const float da = p.xd[R * nb + b];
                        acc[t] += QT<TY>::dot(row, b, nb, a, da);
                        if (row2) acc2[t] += QT<TY>::dot(row2, b, nb, a, da);
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < NT; t++) {
#pragma unroll
                for (int off = LPR / 2; off > 0; off >>= 1) {
                    acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
                    acc2[t] += __shfl_xor_sync(0xffffffffu, acc2[t], off);
                }
                float v = acc[t];
                if (row2) v = silu_mul(v, acc2[t]);
                total[t] = p.nsum ? total[t] + p.wts[pk] * v : v;
            }
        }
        if (l == 0 && valid) {
            float* y = p.y + py * p.yY;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t0 + t >= p.T) break;
                float* d = y + (i64)(t0 + t) * p.ys + o;
                *d = p.acc ? *d + total[t] : total[t];
            }
        }
    }
}

// ---- One token, K-quant weights: mmvk1 ----
//
// mmvq's one-token kernel walked its rows a load at a time, after rounding
// its input, in 181 registers (Q6_K: one block an SM), and its lanes read
// eight blocks' inputs 256 bytes apart in shared memory (every lane in the
// same banks): deepseek-v2-lite's Q6_K output product (172 MB) streamed at
// 1.6 TB/s. mmvk1 is mmv1's walk for K-quants:
//   - a block of 256 values takes two lanes, each loading its half (at
//     most seven 16-byte words) and summing its half's integer products;
//     the halves' sums meet by a shuffle, exactly, so a row's blocks and
//     lanes sum in mmvq's order (lane l of 8: blocks l, l + 8, ..., then a
//     butterfly over the 8): the same bits as before, fused or not;
//   - the rounded input's blocks are padded in shared memory (QST), so
//     that the lanes' reads spread over the banks;
//   - the next half-block is loaded while the current one is summed (gate
//     and up, whose two would not fit: fetched into L2), and the first is
//     fetched into L2 before the wait for the kernel before (PDL) and the
//     input's rounding (into registers it would not fit beside the
//     rounding's);
//   - a persistent grid of two blocks an SM (128 registers a thread).
// Two rows a warp: lane = 16·row + 2·l + half. DUAL: gate and up (p.w2).
template <int TY, bool DUAL> __device__ __forceinline__ void mmvk1_impl(const MQ& p) {
    using Q = QT<TY>;
    static_assert(Q::QB == 256, "K-quants");
    using Raw = typename Q::Raw;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int sub = lane >> 4, l = (lane >> 1) & 7, half = lane & 1;
    const int K = (int)p.K, nb = K / 256, nbl = (nb + 7) >> 3;  // a lane's blocks a row
    const int py = blockIdx.y, nk = p.nsum ? (int)p.nsum : 1;
    const i64 ngroups = (p.N + 1) >> 1, gstep = (i64)gridDim.x * nwarps;
    const bool local = p.xsrc != nullptr;
    auto pkOf = [&](int k) { return p.nsum ? py * nk + k : py; };
    // the half-blocks of step (grp, k, i): block l + 8i (the last block
    // where there is none: read, summed, not added) of row 2·grp + sub
    auto rowOff = [&](i64 grp, int k) {
        const int pk = pkOf(k);
        const i64 o = min(grp * 2 + sub, p.N - 1);
        return ((p.ids ? (i64)p.ids[pk] : (i64)pk) * p.wY + o) * p.rowBytes;
    };
    auto blockOf = [&](int i) { return min(l + 8 * i, nb - 1); };
    auto load = [&](Raw* r, i64 grp, int k, int i) {
        const i64 off = rowOff(grp, k);
        r[0] = Q::load(p.w + off, blockOf(i), half);
        if (DUAL) r[1] = Q::load(p.w2 + off, blockOf(i), half);
    };
    // into L2: the block's 32-byte sectors, shared by its two lanes
    auto fetch = [&](i64 grp, int k, int i) {
        const i64 off = rowOff(grp, k) + (i64)Q::BB * blockOf(i);
        for (int o = 32 * half; o < Q::BB; o += 64) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p.w + off + o));
            if (DUAL) asm volatile("prefetch.global.L2 [%0];" ::"l"(p.w2 + off + o));
        }
    };

    const bool early = !p.ids || p.idsEarly;  // as mmv1: ids written before the kernel before are complete
    if (!early) pdl_entry();
    i64 grp = (i64)blockIdx.x * nwarps + warp;
    int k = 0, i = 0;
    if (grp < ngroups) fetch(grp, 0, 0);
    if (early) pdl_entry();

    // one token's input rows, rounded to Q8_K blocks in shared memory when
    // this kernel rounds them (else quant_act did): each block's 256 quants
    // padded to QST bytes, so that the 16 lanes of a row, reading the same
    // piece of 8 blocks' two halves, spread over the banks (a 256-byte
    // stride put them all in the same ones; the two halves of a block, 128
    // bytes apart, still share theirs)
    constexpr int QST = MMVK1_QST;  // (mqLaunch sizes the shared memory by it)
    extern __shared__ __align__(16) u8 smem[];
    __shared__ float red[32];
    i8* sq = (i8*)smem;
    float* sd = (float*)(smem + nk * nb * QST);
    int* sbs = (int*)(sd + nk * nb);
    if (local) {
        for (int kk = 0; kk < nk; kk++) {
            const i64 R = (pkOf(kk) / p.xDiv) * p.xY;
            quant_row(p.xsrc + (R / p.xS) * p.xrs + (R % p.xS) * p.xseg, K, p.nw, p.eps, p.mode, sq + kk * nb * QST, sd + kk * nb,
                      sbs + kk * (K / 16), red, QST - 256);
        }
        __syncthreads();
    }

    Raw cur[DUAL ? 2 : 1];
    if (!DUAL && grp < ngroups) load(cur, grp, 0, 0);
    float acc[2] = {0.f, 0.f}, total = 0.f;
    while (grp < ngroups) {
        i64 ngrp = grp;
        int nk2 = k, ni = i + 1;
        if (ni == nbl) {
            ni = 0;
            if (++nk2 == nk) nk2 = 0, ngrp += gstep;
        }
        Raw nxt[1];
        if constexpr (DUAL) {
            load(cur, grp, k, i);
            if (ngrp < ngroups) fetch(ngrp, nk2, ni);
        } else if (ngrp < ngroups) {
            load(nxt, ngrp, nk2, ni);
        }
        if (i == 0) acc[0] = acc[1] = 0.f;
        const int b = l + 8 * i, bc = min(b, nb - 1);
        const i64 R = (pkOf(k) / p.xDiv) * p.xY;
        const i8* a = local ? sq + (k * nb + bc) * QST : p.xq + R * K + (i64)bc * 256;
        const float da = local ? sd[k * nb + bc] : p.xd[R * nb + bc];
        const int* bs = local ? sbs + k * (K / 16) + bc * 16 : p.xb + R * (K / 16) + bc * 16;
        const float v0 = Q::value(cur[0], half, a, da, bs);
        if (b < nb) acc[0] += v0;
        if (DUAL) {
            const float v1 = Q::value(cur[1], half, a, da, bs);
            if (b < nb) acc[1] += v1;
        }
        if (i == nbl - 1) {
#pragma unroll
            for (int off = 8; off > 1; off >>= 1) {
                acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], off);
                if (DUAL) acc[1] += __shfl_xor_sync(0xffffffffu, acc[1], off);
            }
            float v = acc[0];
            if (DUAL) v = silu_mul(v, acc[1]);
            total = p.nsum ? total + p.wts[pkOf(k)] * v : v;
            if (k == nk - 1) {
                const i64 o = grp * 2 + sub;
                if ((lane & 15) == 0 && o < p.N) {
                    float* d = p.y + py * p.yY + o;
                    *d = p.acc ? *d + total : total;
                }
                total = 0.f;
            }
        }
        if constexpr (!DUAL) cur[0] = nxt[0];
        grp = ngrp, k = nk2, i = ni;
    }
}

// The unit being compiled (exec.go's units) says which of this file's
// kernels it holds: UNIT_QUANT_ACT whether quant_act, UNIT_MMVK1 and
// UNIT_MMVK1G the types whose mmvk1 kernels (one matrix, and gate/up),
// UNIT_MMVQ8 the types whose mmvq8 kernels, UNIT_MMV1 its mmv1 variant
// (below). mmvk1 serves the K-quants only (the types mmv1 does not); its
// one-matrix and gate/up walks are two kernels, so that a model whose
// decode step runs one of them compiles only that one. MMVK1_BLOCKS and
// MMV1_BLOCKS, the blocks an SM holds, come from the Go side
// (fixedDefines), which sizes the persistent grids.
#define MMVK1(TY) extern "C" __global__ void __launch_bounds__(256, MMVK1_BLOCKS) mmvk1_##TY(MQ p) { mmvk1_impl<TY, false>(p); }
#define MMVK1G(TY) extern "C" __global__ void __launch_bounds__(256, MMVK1_BLOCKS) mmvk1g_##TY(MQ p) { mmvk1_impl<TY, true>(p); }
#define MMVQ8(TY) extern "C" __global__ void __launch_bounds__(256) mmvq8_##TY(MQ p) { pdl_entry(); mmvq_impl<TY, 8>(p); }
UNIT_MMVK1(MMVK1)
UNIT_MMVK1G(MMVK1G)
UNIT_MMVQ8(MMVQ8)

// ---- One token, Q4_0 and Q8_0 weights: mmv1 ----
//
// Decode's products are pure streams of weights (the input is a few KiB),
// so what counts is how many bytes are in flight and how little waits on
// them. mmv1 therefore:
//   - gives a row lpr lanes (the blocks per row rounded up to a power of
//     two, at most 32), so narrow rows (k_b's 128) keep every lane busy;
//   - has each lane load G rows × JC blocks at once (one or two 16-byte
//     loads each), and loads the next rows before it computes the current
//     ones (a persistent grid of about two blocks per SM walks the matrix);
//   - issues its first loads before it rounds the input, so the rounding
//     (norm, 8-bit blocks, the blocks' sums for Q4_0's offset) overlaps the
//     weights' latency instead of preceding it;
//   - shares one read of an input block among its G rows.
// Each row's sum runs in the order mmvq_impl uses (lane l: blocks l, l+lpr,
// ... in order, then a butterfly over the lanes), so the results are the
// same bits, fused or not.

// One load set: G rows × JC blocks (× 2 matrices for gate/up) of a lane.
template <int TY, int G, int JC, int NW> struct Frag {
    int4 q[G][JC][NW][Q1<TY>::W];
    u32 s[G][JC][NW];
};

template <int TY, int G, int JC, bool DUAL> __device__ __forceinline__ void mmv1_impl(const MQ& p) {
    using Q = Q1<TY>;
    constexpr int NW = DUAL ? 2 : 1, W = Q::W, S = Q::STRIDE;
    // Everything up to the first weight loads runs after the kernel before
    // frees this SM (two mmv1 blocks fill its registers), so it is on the
    // step's critical path: lanes, rows and load sets are powers of two and
    // divide as shifts, not as the integer division routines (ncu sampled
    // them as the busiest part of the prologue).
    static_assert((G & (G - 1)) == 0 && (JC & (JC - 1)) == 0, "G and JC divide as shifts");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int K = (int)p.K, nb = K / 32;
    const int lsh = lanes_log2(nb), lpr = 1 << lsh, sub = lane >> lsh, l = lane & (lpr - 1);
    const int RW = (32 >> lsh) * G;  // rows per warp group
    const int py = blockIdx.y;
    const int nk = p.nsum ? (int)p.nsum : 1;  // products summed per output
    // pkOf(k) is summand k's problem, xR(k) its input row; extra(k) the
    // shared expert's chunk that problem py (summand k) is, or -1
    auto pkOf = [&](int k) { return p.nsum ? py * nk + k : py; };
    auto xR = [&](int k) { return (i64)(pkOf(k) / p.xDiv) * p.xY; };
    auto extra = [&](int k) { return p.nr == 0 ? -1 : (p.nsum ? k : py) - (int)p.nr; };
    auto sets = [&](int n) { return (n + (JC << lsh) - 1) >> (lsh + ilog2(JC)); };  // load sets per row of n blocks
    const int nch = sets(nb);
    // Summand kk's row: its blocks, load sets, bytes, and its first block in
    // the rounded input; an extra summand of a weighted sum may be wider
    // (Kx), with as many lanes a row (foldSharedDown checks them).
    struct Part { int nb, nch, at; i64 rb; };
    const int nbx = p.Kx ? (int)(p.Kx / 32) : nb, nchx = sets(nbx);
    auto part = [&](int kk) {
        const int j = p.nsum ? extra(kk) : -1;
        return j >= 0 ? Part{nbx, nchx, (int)p.nr * nb + j * nbx, p.Kx ? p.rbx : p.rowBytes} : Part{nb, nch, kk * nb, p.rowBytes};
    };
    const i64 ngroups = (p.N + RW - 1) >> (5 - lsh + ilog2(G)), gstep = (i64)gridDim.x * nwarps;
    // the input row of summand kk (its address needs no result of the kernel before)
    auto xrow = [&](int kk) {
        const i64 R = xR(kk);
        return extra(kk) >= 0 ? p.xsrcx : p.xsrc + (R / p.xS) * p.xrs + (R % p.xS) * p.xseg;
    };

    auto load = [&](Frag<TY, G, JC, NW>& f, i64 grp, int k, const Part& pt, int ch) {
        const int pk = pkOf(k);
        const int j = extra(k);
        const i64 base = j >= 0 ? (i64)j * p.N : (p.ids ? (i64)p.ids[pk] : (i64)pk) * p.wY;
        const u8* w1 = j >= 0 ? p.wx : p.w;
        const u8* w2 = j >= 0 ? p.w2x : p.w2;
#pragma unroll
        for (int g = 0; g < G; g++) {
            i64 o = grp * RW + sub * G + g;
            if (o >= p.N) o = p.N - 1;
#pragma unroll
            for (int m = 0; m < NW; m++) {
                const u8* row = (m ? w2 : w1) + (base + o) * pt.rb;
#pragma unroll
                for (int j = 0; j < JC; j++) {
                    const int b = (ch * JC + j) * lpr + l;
                    if (b < pt.nb) {
#pragma unroll
                        for (int w = 0; w < W; w++) f.q[g][j][m][w] = ldw4(row + S * b + 16 * w);
                        f.s[g][j][m] = ldw2(row + S * pt.nb + 2 * b);
                    }
                }
            }
        }
    };

    // Launched programmatically (PDL), this kernel may start while the one
    // before it still runs: it loads its first weights (never written by a
    // step) before pdl_entry waits for that kernel. The picked experts' ids
    // may be that kernel's output, and then it waits first; ids written
    // earlier are complete, since that kernel waited for them before it let
    // this one launch.
    const bool early = !p.ids || p.idsEarly;
    if (!early) pdl_entry();
    i64 grp = (i64)blockIdx.x * nwarps + warp;
    int k = 0, ch = 0;
    Frag<TY, G, JC, NW> cur;
    Part cp = part(0);
    if (grp < ngroups) load(cur, grp, 0, cp, 0);

    // the input rows, rounded to Q8_0 blocks in shared memory: quants,
    // scales, sums; then the norm's weights (see below)
    extern __shared__ __align__(16) u8 smem[];
    __shared__ float red[32];
    const Part last = part(nk - 1);
    const int tb = last.at + last.nb;  // blocks of every summand's input
    i8* sq = (i8*)smem;
    float* sd = (float*)(smem + 32 * tb);
    int* sa = (int*)(smem + 36 * tb);
    // The norm's weights are constant too: copied into shared memory while
    // the kernel before finishes, they are not an L2 round trip after the
    // sum of squares (mqLaunch gives the room).
    const float* nw = p.nw;
#if __CUDA_ARCH__ >= 800
    if (p.xsrc && p.nw && ((unsigned long long)p.nw & 15) == 0) {
        float* snw = (float*)(smem + ((40 * tb + 15) & ~15));
        cp_async_floats(snw, p.nw, K);
        cp_async_commit();
        nw = snw;
    }
#endif
    const float* src0 = p.xsrc ? xrow(0) : nullptr;
    // A weighted sum's summands (an MoE down launch: the experts' rows,
    // then the shared expert's) are rounded as one row of blocks where no
    // norm ties a row's blocks together: each of round_blocks_q8's passes,
    // a round trip for x after the wait, then covers every summand instead
    // of one (deepseek's seven summands, six experts' 1408 values and the
    // shared experts' 2816, took seven passes, now three; glm's five two).
    // The blocks' addresses need nothing of the kernel before, so they are
    // found before the wait, divisions and all.
    constexpr int JOINT_BLOCKS = 512;
    __shared__ const float* xrows[32];
    __shared__ const float* xblk[JOINT_BLOCKS];
    const bool joint = p.xsrc && !p.nw && nk > 1 && nk <= 32 && tb <= JOINT_BLOCKS;
    bool xvec = true;  // every block 16-byte aligned
    if (joint) {
        if (threadIdx.x < nk) xrows[threadIdx.x] = xrow(threadIdx.x);
        __syncthreads();
        const int routed = p.nr ? (int)p.nr * nb : tb;  // the experts' blocks, nb a row; then the extra rows', nbx
        bool aligned = true;
        for (int c = threadIdx.x; c < tb; c += blockDim.x) {
            const int kk = c < routed ? c / nb : (int)p.nr + (c - routed) / nbx;
            const float* b = xrows[kk] + 32 * (c - part(kk).at);
            xblk[c] = b;
            aligned = aligned && ((unsigned long long)b & 15) == 0;
        }
        xvec = __syncthreads_and(aligned);
    }
    if (early) pdl_entry();

    if (p.xsrc) {
#if __CUDA_ARCH__ >= 800
        if (nw != p.nw) {
            cp_async_wait<0>();
            __syncthreads();
        }
#endif
        if (joint) {
            round_blocks_q8([&](int c) { return xblk[c]; }, tb, xvec, nullptr, 0.f, sq, sd, sa, red);
        } else {
            for (int kk = 0; kk < nk; kk++) {
                const Part pt = part(kk);
                round_row_q8(kk ? xrow(kk) : src0, 32 * pt.nb, nw, p.eps, sq + 32 * pt.at, sd + pt.at, sa + pt.at, red);
            }
        }
    } else {  // rounded by quant_act (unfused operations, never with Kx): copy it in, adding the sums
        for (int i = threadIdx.x; i < nk * nb; i += blockDim.x) {
            const int kk = i / nb, b = i % nb;
            const i64 R = xR(kk);
            const int4* src = (const int4*)(p.xq + R * p.K + 32 * b);
            int4 a0 = src[0], a1 = src[1];
            ((int4*)(sq + kk * K + 32 * b))[0] = a0;
            ((int4*)(sq + kk * K + 32 * b))[1] = a1;
            int as = 0;
            as = dp4a(0x01010101, a0.x, as);
            as = dp4a(0x01010101, a0.y, as);
            as = dp4a(0x01010101, a0.z, as);
            as = dp4a(0x01010101, a0.w, as);
            as = dp4a(0x01010101, a1.x, as);
            as = dp4a(0x01010101, a1.y, as);
            as = dp4a(0x01010101, a1.z, as);
            as = dp4a(0x01010101, a1.w, as);
            sa[i] = as;
            sd[i] = p.xd[R * nb + b];
        }
    }
    __syncthreads();

    float acc[G][NW], total[G];
#pragma unroll
    for (int g = 0; g < G; g++) total[g] = 0.f;
    while (grp < ngroups) {
        // the next load set, in flight while this one is summed
        i64 ngrp = grp;
        int nk2 = k, nch2 = ch + 1;
        Part np = cp;
        if (nch2 == cp.nch) {
            nch2 = 0;
            if (++nk2 == nk) nk2 = 0, ngrp += gstep;
            np = part(nk2);
        }
        Frag<TY, G, JC, NW> nxt;
        if (ngrp < ngroups) load(nxt, ngrp, nk2, np, nch2);
        if (ch == 0) {
#pragma unroll
            for (int g = 0; g < G; g++)
#pragma unroll
                for (int m = 0; m < NW; m++) acc[g][m] = 0.f;
        }
#pragma unroll
        for (int j = 0; j < JC; j++) {
            const int b = (ch * JC + j) * lpr + l;
            if (b < cp.nb) {
                const int4* a = (const int4*)(sq + 32 * (cp.at + b));
                const int4 a0 = a[0], a1 = a[1];
                const float da = sd[cp.at + b];
                const int as = sa[cp.at + b];
#pragma unroll
                for (int g = 0; g < G; g++)
#pragma unroll
                    for (int m = 0; m < NW; m++) acc[g][m] += Q::val(cur.q[g][j][m], a0, a1, as, h2f((u16)cur.s[g][j][m]), da);
            }
        }
        if (ch == cp.nch - 1) {
            const int pk = pkOf(k);
#pragma unroll
            for (int g = 0; g < G; g++) {
#pragma unroll
                for (int m = 0; m < NW; m++)
                    for (int off = lpr >> 1; off > 0; off >>= 1) acc[g][m] += __shfl_xor_sync(0xffffffffu, acc[g][m], off);
                float v = acc[g][0];
                if (DUAL) v = silu_mul(v, acc[g][NW - 1]);
                total[g] = p.nsum ? total[g] + (extra(k) >= 0 ? 1.f : p.wts[pk]) * v : v;
            }
            if (k == nk - 1) {
                const int xj = extra(k);
#pragma unroll
                for (int g = 0; g < G; g++) {
                    const i64 o = grp * RW + sub * G + g;
                    if (l == 0 && o < p.N) {
                        float* d = (xj >= 0 && !p.nsum ? p.yx + xj * p.yY : p.y + py * p.yY) + o;
                        const float v = p.acc ? *d + total[g] : total[g];
                        *d = v;
                        if (p.y2) p.y2[o] += v;
                    }
                    total[g] = 0.f;
                }
            }
        }
        cur = nxt;
        cp = np;
        grp = ngrp, k = nk2, ch = nch2;
    }
}

// (mmv1_impl calls pdl_entry itself, after its first weight loads unless
// its ids may come from the kernel before). A unit holds one variant,
// UNIT_MMV1(K) = K(type, G, JC, D, name suffix): exec.go's units give each
// variant mqLaunch can pick a program of its own, so that a cold start
// compiles only those the model's decode step launches, side by side.
#define MMV1_KERNEL(TY, G, JC, D, NAME) \
    extern "C" __global__ void __launch_bounds__(256, MMV1_BLOCKS) mmv1_##G##_##JC##_##D##NAME(MQ p) { mmv1_impl<TY, G, JC, D>(p); }
UNIT_MMV1(MMV1_KERNEL)

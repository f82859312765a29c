// Element-wise and row-wise kernels: norms, activation rounding, RoPE, the
// MoE experts' combination, greedy and sampled picks (argmax, pick_top,
// pick_draw), and noop. The MoE routing is router.cu's.

// noop only orders itself after the kernel before it (PDL): a recorded
// chain of them is what the hand-over between two launches costs, without
// any work (BenchmarkLaunchChain).
extern "C" __global__ void noop() { pdl_entry(); }

// rmsnorm: dst = src / sqrt(mean(src²) + eps) · w, one block per row.
extern "C" __global__ void rmsnorm(float* dst, i64 ds, const float* src, i64 ss, const float* w, float eps, int cols) {
    pdl_entry();
    __shared__ float sh[32];
    const float* x = src + blockIdx.x * ss;
    float* y = dst + blockIdx.x * ds;
    const float scale = rms_scale(row_sumsq(x, cols, sh), cols, eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) y[i] = (x[i] * scale) * w[i];
}

// prep writes rows of activations, optionally RMS-normalised (nw != 0, eps),
// rounded by mode, contiguously into out. The input row r has S segments of
// L values, segment s at src + r·rs + s·segs; each segment is rounded on
// its own (block per segment), as ggml rounds each matrix's input row.
extern "C" __global__ void prep(float* out, const float* src, i64 rs, i64 segs, int S, int L, const float* nw, float eps, int mode) {
    pdl_entry();
    __shared__ float sh[32];
    int r = blockIdx.x / S, s = blockIdx.x % S;
    const float* x = src + r * rs + s * segs;
    float* y = out + (i64)blockIdx.x * L;
    const float scale = norm_scale(x, L, nw, eps, sh);
#define VAL(i) (nw ? (x[i] * scale) * nw[i] : x[i])
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (mode == ROUND_Q8_0) {
        for (int b = warp; b * 32 < L; b += nwarps) {
            int i = b * 32 + lane;
            float v = VAL(i);
            float amax = warp_max(fabsf(v));
            float d = round_f16(amax / 127.f);
            float id = amax != 0.f ? 127.f / amax : 0.f;
            y[i] = d * rintf(v * id);
        }
    } else if (mode == ROUND_Q8_K) {
        for (int b = warp; b * 256 < L; b += nwarps) {
            float v[8];
            float amax = 0.f;
            int at = 1 << 30;
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = b * 256 + u * 32 + lane;
                v[u] = VAL(i);
                float a = fabsf(v[u]);
                if (a > amax) { amax = a; at = u * 32 + lane; }
            }
            // the first element of largest magnitude, as a sequential scan finds
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                float a2 = __shfl_xor_sync(0xffffffffu, amax, o);
                int at2 = __shfl_xor_sync(0xffffffffu, at, o);
                if (a2 > amax || (a2 == amax && at2 < at)) { amax = a2; at = at2; }
            }
            int src_lane = at & 31, src_u = at >> 5;
            float mx = 0.f;
#pragma unroll
            for (int u = 0; u < 8; u++) {
                float c = __shfl_sync(0xffffffffu, v[u], src_lane);
                if (u == src_u) mx = c;
            }
            float iscale = amax != 0.f ? -127.f / mx : 0.f;
            float d = amax != 0.f ? 1.f / iscale : 0.f;
#pragma unroll
            for (int u = 0; u < 8; u++) y[b * 256 + u * 32 + lane] = d * fminf(127.f, rintf(iscale * v[u]));
        }
    } else {
        for (int i = threadIdx.x; i < L; i += blockDim.x) {
            float v = VAL(i);
            y[i] = mode == ROUND_F16 ? round_f16(v) : mode == ROUND_BF16 ? round_bf16(v) : v;
        }
    }
#undef VAL
}

// rope rotates adjacent pairs: in every head of width stride, the n values
// from column off of token t's row, at the pass's position pos[t].
extern "C" __global__ void rope(float* x, i64 xs, int cols, int stride, int off, int n, const int* pos, const float* freqs) {
    pdl_entry();
    int t = blockIdx.x;
    int half = n / 2, heads = cols / stride;
    for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
        int h = idx / half, k = idx % half;
        float* v = x + t * xs + h * stride + off + 2 * k;
        rope_pair(v[0], v[1], pos[t], freqs[k]);
    }
}

// swiglu: d = silu(g) · u.
extern "C" __global__ void swiglu(float* d, i64 ds, const float* g, i64 gs, const float* u, i64 us, int cols) {
    pdl_entry();
    int r = blockIdx.y;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
        float x = g[r * gs + j];
        d[r * ds + j] = silu_mul(x, u[r * us + j]);
    }
}

// add: d += s.
extern "C" __global__ void add(float* d, i64 ds, const float* s, i64 ss, int cols) {
    pdl_entry();
    int r = blockIdx.y;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) d[r * ds + j] += s[r * ss + j];
}

// moe_combine: dst[t] = Σ_k wts[t][k] · out[t·used + k], summed in order.
extern "C" __global__ void moe_combine(float* dst, i64 ds, const float* out, const float* wts, int used, int cols) {
    pdl_entry();
    int t = blockIdx.y;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
        float a = 0.f;
        for (int k = 0; k < used; k++) a += wts[t * used + k] * out[((i64)t * used + k) * cols + j];
        dst[t * ds + j] = a;
    }
}

// argmax_better: (v2, i2) beats (v, i) when larger, or equal and earlier.
__device__ __forceinline__ bool argmax_better(float v2, int i2, float v, int i) { return v2 > v || (v2 == v && i2 < i); }

// argmax: out[r] = the index of row r's largest value, the first on ties,
// with the rules of a left-to-right scan that moves only on a strictly
// larger value (engine.Argmax): NaN never beats a number (every comparison
// with NaN is false, so a thread never takes one), and a row starting with
// NaN, or holding nothing above -Inf, gives 0. One block per row: each
// thread scans its 16-byte vectors in order keeping the first maximum it
// sees (so strict > suffices), then warp shuffles and one shared-memory
// round combine (value, index) pairs, ties going to the lower index. The
// logits were just written by the output matmul and sit in L2; the 4-byte
// answer is all the host copies back.
extern "C" __global__ void __launch_bounds__(1024) argmax(int* out, const float* x, i64 xs, int cols) {
    pdl_entry();
    __shared__ float sv[32];
    __shared__ int si[32];
    const float* row = x + (i64)blockIdx.x * xs;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    int head = 0;
    if (((unsigned long long)row & 15) == 0) {
        const int n4 = cols >> 2;
        const float4* r4 = (const float4*)row;
        for (int j = threadIdx.x; j < n4; j += blockDim.x) {
            float4 v = r4[j];
            if (v.x > bv) bv = v.x, bi = 4 * j;
            if (v.y > bv) bv = v.y, bi = 4 * j + 1;
            if (v.z > bv) bv = v.z, bi = 4 * j + 2;
            if (v.w > bv) bv = v.w, bi = 4 * j + 3;
        }
        head = n4 << 2;
    }
    for (int j = head + threadIdx.x; j < cols; j += blockDim.x) // the tail, or a misaligned row
        if (row[j] > bv) bv = row[j], bi = j;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
        int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
        if (argmax_better(v2, i2, bv, bi)) bv = v2, bi = i2;
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sv[w] = bv, si[w] = bi;
    __syncthreads();
    if (w == 0) {
        const int nw = blockDim.x >> 5;
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
            int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
            if (argmax_better(v2, i2, bv, bi)) bv = v2, bi = i2;
        }
        if (lane == 0) out[blockIdx.x] = (bi == 0x7fffffff || row[0] != row[0]) ? 0 : bi;
    }
}

// ---- Sampled picks (backend.Draw): the engine's sampler on the device ----
//
// A draw keeps the K best logits (larger first, the lower id on ties, NaN
// never), then min-p, top-p and the temperature, and picks with the host's
// uniform number u, summing in the candidates' order as engine.Sampler does,
// so that both pick the same token for the same u (up to the last bit of
// exp, where a draw falls on a boundary). pick_top sorts slices of
// 1024 in parallel and keeps each one's best K, first of the logits, then,
// as often as needed, of those lists, until at most DRAW_MERGE keys are
// left; pick_draw merges them and does the sampler's arithmetic, and the
// host sees 4 bytes instead of the logits.

// The Go side defines DRAW_SLICE (keys a pick_top block sorts, with half
// as many threads), DRAW_MERGE (keys pick_draw sorts in shared memory) and
// DRAW_MAX_K (backend.MaxDrawTopK) from its own constants.

typedef unsigned long long u64;

// draw_key orders (logit, id) as the sampler's better() does: a larger key
// is a more likely token. NaN is 0, below every real key; -0 ties +0.
__device__ __forceinline__ u64 draw_key(float v, int id) {
    if (v != v) return 0ull;
    if (v == 0.f) v = 0.f;
    u32 b = __float_as_uint(v);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((u64)b << 32) | (u32)~(u32)id;
}
__device__ __forceinline__ float key_logit(u64 k) {
    const u32 b = (u32)(k >> 32);
    return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b);
}
__device__ __forceinline__ int key_id(u64 k) { return (int)~(u32)k; }

// bitonic_desc sorts s[0..n) (n a power of two) from largest to smallest
// with the whole block: log2(n)·(log2(n)+1)/2 rounds of compare-exchanges.
__device__ void bitonic_desc(u64* s, int n) {
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            __syncthreads();
            for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
                const int i = 2 * j * (p / j) + p % j, l = i + j;
                const bool desc = (i & k) == 0;
                const u64 a = s[i], c = s[l];
                if ((a < c) == desc) s[i] = c, s[l] = a;
            }
        }
    __syncthreads();
}

// pick_top: part[b][0..K) = the K largest keys of slice b of the n logits x
// (or, with x null, of the n keys kin: the lists of the level before). A
// slice with fewer than K numbers pads its list with 0.
extern "C" __global__ void __launch_bounds__(DRAW_SLICE / 2) pick_top(u64* part, const float* x, const u64* kin, int n, int K) {
    pdl_entry();
    __shared__ u64 s[DRAW_SLICE];
    const int base = blockIdx.x * DRAW_SLICE;
    for (int i = threadIdx.x; i < DRAW_SLICE; i += blockDim.x) {
        const int j = base + i;
        s[i] = j >= n ? 0ull : x ? draw_key(x[j], j) : kin[j];
    }
    bitonic_desc(s, DRAW_SLICE);
    for (int i = threadIdx.x; i < K; i += blockDim.x) part[(i64)blockIdx.x * K + i] = s[i];
}

// DrawArgs is backend.Draw's numbers, uploaded each step (so one recorded
// graph serves every temperature, top-p and min-p).
struct DrawArgs {
    double u, invT;
    float topP, lnMinP;
};

// pick_draw: *out = the token drawn from nb lists of K keys (pick_top), at
// most DRAW_MERGE in all. The K best overall are at or above the largest
// K-th key of a list (that list alone has K of them): those are sorted in
// shared memory. Then, as engine.Sampler.candidates and draw: min-p keeps
// the logits ≥ top + ln(min_p); top-p the shortest prefix whose share of
// exp(logit − top) over the K reaches p; and u times the sum of
// exp((logit − top)/T) over what is left walks to the pick. A top of +Inf
// picks its token, and no finite top gives 0, as the sampler's greedy
// fallback does.
extern "C" __global__ void __launch_bounds__(1024) pick_draw(int* out, const u64* part, int nb, int K, const DrawArgs* a) {
    pdl_entry();
    __shared__ u64 s[DRAW_MERGE];
    __shared__ double e1[DRAW_MAX_K], e2[DRAW_MAX_K];
    __shared__ u64 red[32];
    __shared__ int n;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    u64 t = 0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) t = max(t, part[(i64)b * K + K - 1]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t = max(t, __shfl_xor_sync(0xffffffffu, t, o));
    if (lane == 0) red[w] = t;
    if (threadIdx.x == 0) n = 0;
    __syncthreads();
    t = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) t = max(t, red[i]);
    for (int i = threadIdx.x; i < nb * K; i += blockDim.x) {
        const u64 k = part[i];
        if (k != 0 && k >= t) s[atomicAdd(&n, 1)] = k;
    }
    __syncthreads();
    const int cnt = n, m = min(K, cnt);
    int P = 2;
    while (P < cnt) P <<= 1;
    for (int i = cnt + threadIdx.x; i < P; i += blockDim.x) s[i] = 0;
    bitonic_desc(s, P);
    const float top = m > 0 ? key_logit(s[0]) : -INFINITY;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        const float d = key_logit(s[i]) - top;
        e1[i] = exp((double)d);
        e2[i] = exp((double)d * a->invT);
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    int tok = 0;
    if (top > -INFINITY && top <= 3.402823466e38f) {
        const float minP = top + a->lnMinP, topP = a->topP;
        int q = 0;
        while (q < m && key_logit(s[q]) >= minP) q++;
        if (topP > 0.f && topP < 1.f) {
            double z = 0., cum = 0.;
            for (int i = 0; i < m; i++) z += e1[i];
            for (int i = 0; i < q; i++)
                if ((cum += e1[i] / z) >= (double)topP) {
                    q = i + 1;
                    break;
                }
        }
        double sum = 0.;
        for (int i = 0; i < q; i++) sum += e2[i];
        double r = a->u * sum;
        tok = key_id(s[0]);  // the last candidate with a weight: where rounding that leaves r above them all lands
        for (int i = 0; i < q; i++) {
            if (e2[i] > 0.) tok = key_id(s[i]);
            if (r < e2[i]) {
                tok = key_id(s[i]);
                break;
            }
            r -= e2[i];
        }
    } else if (top > 0.f) {
        tok = key_id(s[0]);
    }
    *out = tok;
}

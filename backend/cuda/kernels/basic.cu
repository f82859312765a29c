// Element-wise and row-wise kernels: norms, activation rounding, RoPE, the
// latent cache, attention over the cache, MoE routing and combination.
// Shapes that every call shares come in as defines: CACHE_W (a cache row:
// kv_lora + rope), KV_LORA, CACHE_HALF (1: the cache holds f16).

#if CACHE_HALF
typedef u16 cache_t;
__device__ __forceinline__ float cload(cache_t v) { return h2f(v); }
__device__ __forceinline__ cache_t cstore(float v) { return f2h(v); }
#else
typedef float cache_t;
__device__ __forceinline__ float cload(cache_t v) { return v; }
__device__ __forceinline__ cache_t cstore(float v) { return v; }
#endif

// rmsnorm: dst = src / sqrt(mean(src²) + eps) · w, one block per row.
extern "C" __global__ void rmsnorm(float* dst, i64 ds, const float* src, i64 ss, const float* w, float eps, int cols) {
    pdl_entry();
    __shared__ float sh[32];
    const float* x = src + blockIdx.x * ss;
    float* y = dst + blockIdx.x * ds;
    float mean = row_sumsq(x, cols, sh) / (float)cols;
    float scale = 1.f / sqrtf(mean + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) y[i] = (x[i] * scale) * w[i];
}

// Activation rounding modes: what ggml does to the activations before a dot
// product with a weight of a given type (its vec_dot_type), so that our
// logits match llama.cpp's. 0 none, 1 F16, 2 BF16, 3 Q8_0 blocks of 32 with
// an f16 scale, 4 Q8_K blocks of 256 with a float32 scale.
#define ROUND_NONE 0
#define ROUND_F16 1
#define ROUND_BF16 2
#define ROUND_Q8_0 3
#define ROUND_Q8_K 4

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
    float scale = 1.f;
    if (nw) {
        float mean = row_sumsq(x, L, sh) / (float)L;
        scale = 1.f / sqrtf(mean + eps);
    }
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

// rope_pair rotates the pair (a, b) by the angle pos·freq, computed in
// double as the CPU backend does.
__device__ __forceinline__ void rope_pair(float& a, float& b, int pos, float freq) {
    double s, c, da = a, db = b;
    sincos((double)pos * (double)freq, &s, &c);
    a = (float)(da * c - db * s);
    b = (float)(da * s + db * c);
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

// cache_store writes token t's row (CACHE_W values) at position pos[t].
extern "C" __global__ void cache_store(cache_t* layer, const float* src, i64 ss, const int* pos) {
    pdl_entry();
    int t = blockIdx.x;
    cache_t* row = layer + (i64)pos[t] * CACHE_W;
    for (int j = threadIdx.x; j < CACHE_W; j += blockDim.x) row[j] = cstore(src[t * ss + j]);
}

// kv_finish completes a token's cache row in one kernel: RMS-normalise the
// latent (nw), rotate the rope key (freqs), write both back to kv and store
// the row at the token's position.
extern "C" __global__ void kv_finish(cache_t* layer, float* kv, i64 ks, const int* pos, const float* nw, float eps, const float* freqs) {
    pdl_entry();
    __shared__ float red[32];
    const int t = blockIdx.x;
    float* x = kv + t * ks;
    cache_t* row = layer + (i64)pos[t] * CACHE_W;
    float scale = 1.f;
    if (nw) {
        float mean = row_sumsq(x, KV_LORA, red) / (float)KV_LORA;
        scale = 1.f / sqrtf(mean + eps);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < KV_LORA; i += blockDim.x) {
        float v = nw ? (x[i] * scale) * nw[i] : x[i];
        x[i] = v;
        row[i] = cstore(v);
    }
    const int half = (CACHE_W - KV_LORA) / 2;
    for (int k = threadIdx.x; k < half; k += blockDim.x) {
        float* v = x + KV_LORA + 2 * k;
        float a = v[0], b = v[1];
        if (freqs) {
            rope_pair(a, b, pos[t], freqs[k]);
            v[0] = a;
            v[1] = b;
        }
        row[KV_LORA + 2 * k] = cstore(a);
        row[KV_LORA + 2 * k + 1] = cstore(b);
    }
}

// attn_merge merges the S splits of head th (t·H + h) into
// olat[t][h·KV_LORA..]: each split's (max, sum, Σ e·latent) rescaled to the
// largest max. The splits' factors go to shared memory first, so the sum
// over splits is plain loads (8 in flight per thread) instead of a chain
// of dependent ones. The parts are read past L1 (__ldcg): other blocks of
// the same launch may have written them.
#define MAX_SPLITS 64
__device__ void attn_merge(float* olat, const float* part, int S, int th) {
    __shared__ float ws[MAX_SPLITS];
    const float* p = part + (i64)th * S * (KV_LORA + 2);
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float M = -INFINITY;
        for (int s = lane; s < S; s += 32) M = fmaxf(M, __ldcg(p + s * (KV_LORA + 2)));
        M = warp_max(M);
        float L = 0.f;
        for (int s = lane; s < S; s += 32) {
            const float ms = __ldcg(p + s * (KV_LORA + 2));
            const float f = ms == -INFINITY ? 0.f : expf(ms - M);
            ws[s] = f;
            L += __ldcg(p + s * (KV_LORA + 2) + 1) * f;
        }
        L = warp_sum(L);
        for (int s = lane; s < S; s += 32) ws[s] /= L;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < KV_LORA; j += blockDim.x) {
        float a = 0.f;
#pragma unroll 8
        for (int s = 0; s < S; s++) a += __ldcg(p + s * (KV_LORA + 2) + 2 + j) * ws[s];
        olat[(i64)th * KV_LORA + j] = a;
    }
}

#define ATT_WARPS 8
// attn_partial is one split of split-K attention: block (t·H + h, s) runs an
// online softmax over its share of positions 0..pos[t] for head h and writes
// (max, sum, Σ e·latent) to part. The query is q_lat (from the k_b product,
// in query) and q_pe, read from q and rotated here when freqs is set (the q
// RoPE fused). Each warp takes AP positions per step, their loads all in
// flight, and rescales its state once per step; each lane holds KV_LORA/32
// accumulators. With olat set, the last split of a head to finish merges the
// splits (attn_combine's work, without its launch). One block per head: a
// block serving 2 or 4 heads (each row loaded once for all) measured slower
// at every depth, its steps twice as long and its blocks fewer.
template <int AP>
__device__ __forceinline__ void attn_partial_impl(float* part, const float* query, const float* q, i64 qs, int nope, const float* freqs,
                                                  const cache_t* layer, const int* pos, int H, int S, float scale, float* olat,
                                                  unsigned* counter) {
    pdl_entry();
    __shared__ float qsh[CACHE_W];
    __shared__ float msh[ATT_WARPS], lsh[ATT_WARPS];
    __shared__ float ash[ATT_WARPS][KV_LORA];
    __shared__ bool last;
    const int th = blockIdx.x, t = th / H, h = th % H, s = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = pos[t] + 1, chunk = (n + S - 1) / S, p0 = s * chunk, p1 = min(n, p0 + chunk);
    const int rope = CACHE_W - KV_LORA;
    for (int i = threadIdx.x; i < KV_LORA; i += blockDim.x) qsh[i] = query[(i64)th * CACHE_W + i];
    for (int k = threadIdx.x; k < rope / 2; k += blockDim.x) {
        const float* v = q + t * qs + h * (nope + rope) + nope + 2 * k;
        float a = v[0], b = v[1];
        if (freqs) rope_pair(a, b, pos[t], freqs[k]);
        qsh[KV_LORA + 2 * k] = a;
        qsh[KV_LORA + 2 * k + 1] = b;
    }
    __syncthreads();
    constexpr int NA = KV_LORA / 32;
    float acc[NA], m = -INFINITY, l = 0.f;
#pragma unroll
    for (int u = 0; u < NA; u++) acc[u] = 0.f;
    for (int pb = p0 + warp * AP; pb < p1; pb += ATT_WARPS * AP) {
        float lat[AP][NA], d[AP];
#pragma unroll
        for (int j = 0; j < AP; j++) {
            const cache_t* row = layer + (i64)min(pb + j, p1 - 1) * CACHE_W;
            d[j] = 0.f;
#pragma unroll
            for (int u = 0; u < NA; u++) {
                lat[j][u] = cload(row[u * 32 + lane]);
                d[j] += qsh[u * 32 + lane] * lat[j][u];
            }
            for (int i = KV_LORA + lane; i < CACHE_W; i += 32) d[j] += qsh[i] * cload(row[i]);
        }
#pragma unroll
        for (int j = 0; j < AP; j++) d[j] = warp_sum(d[j]) * scale;
        // one rescale per step of AP positions (pb itself is always in range)
        float mn = m;
#pragma unroll
        for (int j = 0; j < AP; j++)
            if (pb + j < p1) mn = fmaxf(mn, d[j]);
        const float corr = expf(m - mn);
        float e[AP];
        l *= corr;
#pragma unroll
        for (int j = 0; j < AP; j++) {
            e[j] = pb + j < p1 ? expf(d[j] - mn) : 0.f;
            l += e[j];
        }
#pragma unroll
        for (int u = 0; u < NA; u++) {
            float a = acc[u] * corr;
#pragma unroll
            for (int j = 0; j < AP; j++) a += e[j] * lat[j][u];
            acc[u] = a;
        }
        m = mn;
    }
    if (lane == 0) { msh[warp] = m; lsh[warp] = l; }
#pragma unroll
    for (int u = 0; u < NA; u++) ash[warp][u * 32 + lane] = acc[u];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, msh[w]);
    float* out = part + ((i64)th * S + s) * (KV_LORA + 2);
    if (M == -INFINITY) {  // no positions in this split
        if (threadIdx.x == 0) { out[0] = -INFINITY; out[1] = 0.f; }
    } else {
        float f[ATT_WARPS];
        float L = 0.f;
        for (int w = 0; w < ATT_WARPS; w++) {
            f[w] = msh[w] == -INFINITY ? 0.f : expf(msh[w] - M);
            L += lsh[w] * f[w];
        }
        for (int j = threadIdx.x; j < KV_LORA; j += blockDim.x) {
            float a = 0.f;
            for (int w = 0; w < ATT_WARPS; w++) a += ash[w][j] * f[w];
            out[2 + j] = a;
        }
        if (threadIdx.x == 0) { out[0] = M; out[1] = L; }
    }
    if (!olat) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter + th, 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    attn_merge(olat, part, S, th);
    if (threadIdx.x == 0) counter[th] = 0;
}

#define ATTN_PARTIAL(AP)                                                                                                           \
    extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32)                                                                  \
        attn_partial_##AP(float* part, const float* query, const float* q, i64 qs, int nope, const float* freqs,                  \
                          const cache_t* layer, const int* pos, int H, int S, float scale, float* olat, unsigned* counter) {      \
        attn_partial_impl<AP>(part, query, q, qs, nope, freqs, layer, pos, H, S, scale, olat, counter);                          \
    }
ATTN_PARTIAL(4)

// attn_combine merges the S splits of block t·H + h into olat[t][h·KV_LORA..].
extern "C" __global__ void attn_combine(float* olat, const float* part, int S) {
    pdl_entry();
    attn_merge(olat, part, S, blockIdx.x);
}

// swiglu: d = silu(g) · u.
extern "C" __global__ void swiglu(float* d, i64 ds, const float* g, i64 gs, const float* u, i64 us, int cols) {
    pdl_entry();
    int r = blockIdx.y;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
        float x = g[r * gs + j];
        d[r * ds + j] = x / (1.f + expf(-x)) * u[r * us + j];
    }
}

// add: d += s.
extern "C" __global__ void add(float* d, i64 ds, const float* s, i64 ss, int cols) {
    pdl_entry();
    int r = blockIdx.y;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) d[r * ds + j] += s[r * ss + j];
}

// route_token scores one token's experts (softmax or sigmoid of the router
// logits z), picks the top `used` by score + bias (the first on ties, as a
// stable sort does) and writes their ids and weights. One warp; p and taken
// are shared arrays of E entries.
__device__ void route_token(int* ids, float* wts, const float* z, const float* bias, int E, int used, int sigm, int norm,
                            float wscale, float* p, int* taken) {
    const int lane = threadIdx.x & 31;
    if (sigm) {
        for (int e = lane; e < E; e += 32) p[e] = 1.f / (1.f + (float)exp(-(double)z[e]));
    } else {
        float m = -INFINITY;
        for (int e = lane; e < E; e += 32) m = fmaxf(m, z[e]);
        m = warp_max(m);
        double s = 0;
        for (int e = lane; e < E; e += 32) {
            float v = (float)exp((double)(z[e] - m));
            p[e] = v;
            s += v;
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        float inv = (float)(1.0 / s);
        for (int e = lane; e < E; e += 32) p[e] *= inv;
    }
    for (int e = lane; e < E; e += 32) taken[e] = 0;
    __syncwarp();
    for (int k = 0; k < used; k++) {
        float best = -INFINITY;
        int at = 1 << 30;
        for (int e = lane; e < E; e += 32) {
            if (taken[e]) continue;
            float v = bias ? p[e] + bias[e] : p[e];
            if (v > best || (v == best && e < at)) { best = v; at = e; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float b2 = __shfl_xor_sync(0xffffffffu, best, o);
            int a2 = __shfl_xor_sync(0xffffffffu, at, o);
            if (b2 > best || (b2 == best && a2 < at)) { best = b2; at = a2; }
        }
        if (lane == 0) { taken[at] = 1; ids[k] = at; }
        __syncwarp();
    }
    if (lane == 0) {
        float sum = 0.f;
        for (int k = 0; k < used; k++) sum += p[ids[k]];
        sum = fmaxf(sum, 6.103515625e-5f);
        for (int k = 0; k < used; k++) {
            float g = p[ids[k]];
            if (norm) g /= sum;
            wts[k] = g * wscale;
        }
    }
    __syncwarp();
}

// moe_route routes token blockIdx.x from its router logits.
extern "C" __global__ void moe_route(int* ids, float* wts, const float* logits, const float* bias, int E, int used, int sigm, int norm, float wscale) {
    pdl_entry();
    __shared__ float p[1024];
    __shared__ int taken[1024];
    const int t = blockIdx.x;
    route_token(ids + t * used, wts + t * used, logits + (i64)t * E, bias, E, used, sigm, norm, wscale, p, taken);
}

// moe_router is the whole routing of token blockIdx.y in one launch: block
// e takes expert e's float32 router row against rms(h) (the norm done
// here), and the last block to finish routes. The row is loaded before the
// kernel waits for the one before it (weights never change), each thread
// holding its 16-byte pieces at once, so a block costs about one round
// trip for h and two block reductions; one block per expert keeps them all
// in flight (a warp per expert left each lane 16 loads in a row).
#define ROUTER_RQ 4
extern "C" __global__ void __launch_bounds__(256) moe_router(int* ids, float* wts, float* logits, unsigned* counter, const float* h, i64 hs,
                                                             const float* nw, float eps, const float* router, const float* bias, int K,
                                                             int E, int used, int sigm, int norm, float wscale) {
    __shared__ float red[32];
    __shared__ float p[1024];
    __shared__ int taken[1024];
    __shared__ bool last;
    const int t = blockIdx.y, e = blockIdx.x, n4 = K / 4;
    const float4* r = (const float4*)(router + (i64)e * K);
    float4 rv[ROUTER_RQ];
#pragma unroll
    for (int j = 0; j < ROUTER_RQ; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        rv[j] = i < n4 ? r[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    pdl_entry();
    const float* x = h + t * hs;
    float scale = 1.f;
    if (nw) scale = 1.f / sqrtf(row_sumsq(x, K, red) / (float)K + eps);
    const float4* x4 = (const float4*)x;
    const float4* g4 = (const float4*)nw;
    auto dot = [&](float4 a, int i) {
        float4 v = x4[i];
        if (nw) {
            const float4 g = g4[i];
            v.x = (v.x * scale) * g.x, v.y = (v.y * scale) * g.y, v.z = (v.z * scale) * g.z, v.w = (v.w * scale) * g.w;
        }
        return a.x * v.x + a.y * v.y + a.z * v.z + a.w * v.w;
    };
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < ROUTER_RQ; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n4) acc += dot(rv[j], i);
    }
    for (int i = threadIdx.x + ROUTER_RQ * blockDim.x; i < n4; i += blockDim.x) acc += dot(r[i], i);  // K past 4096
    acc = block_sum(acc, red);
    if (threadIdx.x == 0) logits[(i64)t * E + e] = acc;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter + t, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.x < 32) {
        route_token(ids + t * used, wts + t * used, logits + (i64)t * E, bias, E, used, sigm, norm, wscale, p, taken);
        if (threadIdx.x == 0) counter[t] = 0;
    }
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

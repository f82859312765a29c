// Attention over the latent cache: storing a token's row, split-K
// attention with its merge, and the decode kernel that also applies k_b
// and v_b (the absorptions) itself.

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
__device__ void attn_merge(float* olat, const float* part, int S, int th, float* osh = nullptr) {
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
        if (osh) osh[j] = a;
    }
}

#define ATT_WARPS 8
// HALF2: f16 rows are read a pair of columns per 4-byte load
#define HALF2 (CACHE_HALF && KV_LORA % 64 == 0 && CACHE_W % 2 == 0)
// ATT_AP: positions a warp takes per step (its loads in flight at once).
// 8 with f16 pairs held as loaded measured slower (youtu 570 → 545 tok/s,
// 462 → 354 at 4096): the registers spill.
#define ATT_AP 4
// attn_split is one split of split-K attention for block (th = t·H + h, s):
// an online softmax of the query in qsh (q_lat then q_pe) over positions
// [p0, p1) of the layer's cache, written to part as (max, sum, Σ e·latent).
// Each warp takes AP positions per step, their loads all in flight, and
// rescales its state once per step; each lane holds KV_LORA/32
// accumulators. With FOLD, position cpos is read from crow (in shared
// memory: the row this launch computes) instead of the cache. With olat
// set, the last split of a head to finish merges the splits into olat
// (attn_combine's work, without its launch); it returns whether this block
// was that one. One block per head: a block serving 2 or 4 heads (each row
// loaded once for all) measured slower at every depth, its steps twice as
// long and its blocks fewer.
template <int AP, bool FOLD>
__device__ __forceinline__ bool attn_split(float* part, const float* qsh, const cache_t* layer, const cache_t* crow, int cpos, int p0,
                                           int p1, int th, int S, int s, float scale, float* olat, unsigned* counter,
                                           float* osh = nullptr) {
    __shared__ float msh[ATT_WARPS], lsh[ATT_WARPS];
    __shared__ float ash[ATT_WARPS][KV_LORA];
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    constexpr int NA = KV_LORA / 32;
    float acc[NA], m = -INFINITY, l = 0.f;
#pragma unroll
    for (int u = 0; u < NA; u++) acc[u] = 0.f;
    for (int pb = p0 + warp * AP; pb < p1; pb += ATT_WARPS * AP) {
#if HALF2
        u32 lat2[AP][NA / 2];  // the rows' f16 pairs as loaded: half the registers of floats
#else
        float lat[AP][NA];
#endif
        float d[AP];
#pragma unroll
        for (int j = 0; j < AP; j++) {
            const int p = min(pb + j, p1 - 1);
            const cache_t* row = FOLD && p == cpos ? crow : layer + (i64)p * CACHE_W;
            d[j] = 0.f;
#if HALF2
            // lane: columns 64v + 2·lane and the next (acc[2v], acc[2v+1]), one 4-byte load a pair
            const u32* row2 = (const u32*)row;
#pragma unroll
            for (int v = 0; v < NA / 2; v++) {
                const u32 w = row2[v * 32 + lane];
                const float2 qv = *(const float2*)(qsh + 64 * v + 2 * lane);
                lat2[j][v] = w;
                d[j] += qv.x * h2f((u16)w) + qv.y * h2f((u16)(w >> 16));
            }
            for (int i = KV_LORA / 2 + lane; i < CACHE_W / 2; i += 32) {
                const u32 w = row2[i];
                d[j] += qsh[2 * i] * h2f((u16)w) + qsh[2 * i + 1] * h2f((u16)(w >> 16));
            }
#else
#pragma unroll
            for (int u = 0; u < NA; u++) {
                lat[j][u] = cload(row[u * 32 + lane]);
                d[j] += qsh[u * 32 + lane] * lat[j][u];
            }
            for (int i = KV_LORA + lane; i < CACHE_W; i += 32) d[j] += qsh[i] * cload(row[i]);
#endif
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
#if HALF2
            for (int j = 0; j < AP; j++) a += e[j] * h2f((u16)(lat2[j][u / 2] >> (16 * (u % 2))));
#else
            for (int j = 0; j < AP; j++) a += e[j] * lat[j][u];
#endif
            acc[u] = a;
        }
        m = mn;
    }
    if (lane == 0) { msh[warp] = m; lsh[warp] = l; }
#pragma unroll
    for (int u = 0; u < NA; u++) ash[warp][HALF2 ? 64 * (u / 2) + 2 * lane + u % 2 : u * 32 + lane] = acc[u];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, msh[w]);
    float* out = part + ((i64)th * S + s) * (KV_LORA + 2);
    if (M == -INFINITY) {  // no positions in this split: a state the merge weighs 0 (its latent too: scratch may hold NaN)
        for (int j = threadIdx.x; j < KV_LORA; j += blockDim.x) out[2 + j] = 0.f;
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
    if (!olat) return false;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter + th, 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return false;
    __threadfence();
    attn_merge(olat, part, S, th, osh);
    if (threadIdx.x == 0) counter[th] = 0;
    return true;
}

// split_range is block s's share [p0, p1) of positions 0..pos.
__device__ __forceinline__ void split_range(int pos, int S, int s, int& p0, int& p1) {
    const int n = pos + 1, chunk = (n + S - 1) / S;
    p0 = s * chunk;
    p1 = min(n, p0 + chunk);
}

// rope_query puts head h's q_pe, rotated when freqs is set, after q_lat in qsh.
__device__ __forceinline__ void rope_query(float* qsh, const float* qh, int nope, const float* freqs, int pos) {
    const int rope = CACHE_W - KV_LORA;
    for (int k = threadIdx.x; k < rope / 2; k += blockDim.x) {
        const float* v = qh + nope + 2 * k;
        float a = v[0], b = v[1];
        if (freqs) rope_pair(a, b, pos, freqs[k]);
        qsh[KV_LORA + 2 * k] = a;
        qsh[KV_LORA + 2 * k + 1] = b;
    }
}

// attn_partial runs one split for block (t·H + h, s) of a batch, its query's
// q_lat from the k_b product (query) and q_pe from q.
template <int AP>
__device__ __forceinline__ void attn_partial_impl(float* part, const float* query, const float* q, i64 qs, int nope, const float* freqs,
                                                  const cache_t* layer, const int* pos, int H, int S, float scale, float* olat,
                                                  unsigned* counter) {
    pdl_entry();
    __shared__ __align__(16) float qsh[CACHE_W];
    const int th = blockIdx.x, t = th / H, h = th % H, s = blockIdx.y;
    int p0, p1;
    split_range(pos[t], S, s, p0, p1);
    for (int i = threadIdx.x; i < KV_LORA; i += blockDim.x) qsh[i] = query[(i64)th * CACHE_W + i];
    rope_query(qsh, q + t * qs + h * (nope + CACHE_W - KV_LORA), nope, freqs, pos[t]);
    __syncthreads();
    attn_split<AP, false>(part, qsh, layer, nullptr, -1, p0, p1, th, S, s, scale, olat, counter);
}

extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32)
    attn_partial(float* part, const float* query, const float* q, i64 qs, int nope, const float* freqs, const cache_t* layer,
                 const int* pos, int H, int S, float scale, float* olat, unsigned* counter) {
    attn_partial_impl<ATT_AP>(part, query, q, qs, nope, freqs, layer, pos, H, S, scale, olat, counter);
}

// attn_combine merges the S splits of block t·H + h into olat[t][h·KV_LORA..].
extern "C" __global__ void attn_combine(float* olat, const float* part, int S) {
    pdl_entry();
    attn_merge(olat, part, S, blockIdx.x);
}

// ---- One token: attn_decode ----
//
// A decode step's attention in one launch, block (head h, split s): what
// kv_finish, the k_b product, attn_partial (with its merge) and the v_b
// product do as four launches. The fixed cost of a launch (a few µs) is
// larger than the work each of the small ones does, so:
//   - every split computes its head's q_lat = k_b[h]·q_nope itself (the
//     36 KiB of k_b[h] are read S times, from L2 after the first), its
//     first weight rows loaded into registers before it waits for the
//     kernel before (PDL), as mmv1 does;
//   - the split holding the token's own position normalises and rotates
//     that row itself (kv_finish's work), reads it from shared memory and
//     stores it in the cache (each head's block the same bytes); kv keeps
//     the raw row (the Go side runs kv_finish if anything reads it later);
//   - the last split of a head to finish merges the splits and applies
//     v_b[h] to the merged latent; v_b[h] was prefetched into L2 by every
//     split while waiting.
// Every sum runs in the order of the separate kernels (k_b and v_b rows as
// mmv1 sums them, the cache row as kv_finish), so the logits are the same
// bits as the unfused launches'.

// AD mirrors the Go side's attnDecode struct (backend/cuda/ops.go).
struct AD {
    float* part;          // [H][S][KV_LORA + 2] the splits' states
    float* olat;          // [H][KV_LORA] the merged latents
    float* out;           // [H][vdim] attention output
    const float* q;       // [H][nope + rope]
    i64 nope;
    const float* qfreqs;  // q_pe's RoPE, or null
    float* kv;            // the token's [latent | k_pe], before norm and RoPE
    const float* kvnw;    // the latent's norm weight, or null
    const float* kvfreqs; // k_pe's RoPE, or null
    cache_t* layer;
    const int* pos;
    int H, S;
    float scale, kveps;
    unsigned* counter;    // per head: splits done
    const u8* kb;         // k_b: rows h·KV_LORA + i of nope values
    i64 kbRow;
    const u8* vb;         // v_b: rows h·vdim + i of KV_LORA values
    i64 vbRow, vdim;
};

__device__ __forceinline__ int lanes_for(int nb) {
    int lpr = 1;
    while (lpr < nb && lpr < 32) lpr <<= 1;
    return lpr;
}

// rows_dot sets out[r], for the rows r = st·rstep + warp·(32/lpr) + sub of
// steps st in [st0, st1) (r < nrows, rows of nb blocks, nb ≤ 32), to their
// dot products with the rounded activations (sq, sd, sa), summed as mmv1
// sums them: lane l of a row's lpr lanes takes block l, then a butterfly
// over the lanes. Loads go out 8 steps at a time: a memory round trip per
// 8 steps instead of one per step.
template <int TY>
__device__ __forceinline__ void rows_dot(const u8* base, i64 rowBytes, int nrows, int nb, int st0, int st1, const i8* sq, const float* sd,
                                         const int* sa, float* out) {
    using Q = Q1<TY>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int lpr = lanes_for(nb), sub = lane / lpr, l = lane & (lpr - 1), rstep = ATT_WARPS * (32 / lpr);
    for (int s0 = st0; s0 < st1; s0 += 8) {
        int4 q[8][Q::W];
        u32 sc[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int r = min((s0 + j) * rstep + warp * (32 / lpr) + sub, nrows - 1);
            if (s0 + j < st1 && l < nb) {
                const u8* row = base + (i64)r * rowBytes;
#pragma unroll
                for (int w = 0; w < Q::W; w++) q[j][w] = ldw4(row + Q::STRIDE * l + 16 * w);
                sc[j] = ldw2(row + Q::STRIDE * nb + 2 * l);
            }
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (s0 + j < st1) {
                float acc = 0.f;
                if (l < nb) {
                    const int4* a = (const int4*)(sq + 32 * l);
                    acc += Q::val(q[j], a[0], a[1], sa[l], h2f((u16)sc[j]), sd[l]);
                }
                for (int off = lpr >> 1; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
                const int r = (s0 + j) * rstep + warp * (32 / lpr) + sub;
                if (l == 0 && r < nrows) out[r] = acc;
            }
        }
    }
}

template <int TK, int TV>
__device__ __forceinline__ void attn_decode_impl(const AD& p) {
    using QK = Q1<TK>;
    constexpr int WK = QK::W, PRE = 8 / WK;  // k_b load sets held before the wait
    __shared__ __align__(16) float qsh[CACHE_W];
    __shared__ __align__(16) i8 sq[KV_LORA > 1024 ? KV_LORA : 1024];
    __shared__ float sd[KV_LORA / 32 > 32 ? KV_LORA / 32 : 32], red[32];
    __shared__ int sa[KV_LORA / 32 > 32 ? KV_LORA / 32 : 32];
    __shared__ __align__(16) cache_t crow[CACHE_W];
    __shared__ __align__(16) float osh[KV_LORA];
    const int h = blockIdx.x, s = blockIdx.y, S = p.S;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nope = (int)p.nope, nbk = nope / 32, lpr = lanes_for(nbk);
    const int sub = lane / lpr, l = lane & (lpr - 1), rstep = ATT_WARPS * (32 / lpr);
    const int nsteps = (KV_LORA + rstep - 1) / rstep;
    const u8* kbh = p.kb + (i64)h * KV_LORA * p.kbRow;
    auto krow = [&](int st) { return min(st * rstep + warp * (32 / lpr) + sub, KV_LORA - 1); };

    // Before waiting for the kernel before: k_b[h]'s first rows into
    // registers, v_b[h] (this split's share) into L2.
    int4 pq[PRE][WK];
    u32 ps[PRE];
#pragma unroll
    for (int st = 0; st < PRE; st++) {
        if (st < nsteps && l < nbk) {
            const u8* row = kbh + (i64)krow(st) * p.kbRow;
#pragma unroll
            for (int w = 0; w < WK; w++) pq[st][w] = ldw4(row + QK::STRIDE * l + 16 * w);
            ps[st] = ldw2(row + QK::STRIDE * nbk + 2 * l);
        }
    }
    {
        const i64 len = p.vdim * p.vbRow;
        const u8* vbh = p.vb + (i64)h * len;
        for (i64 o = len * s / S + 128 * threadIdx.x; o < len * (s + 1) / S; o += 128 * blockDim.x)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(vbh + o));
    }
    pdl_entry();

    const int pos = p.pos[0];
    int p0, p1;
    split_range(pos, S, s, p0, p1);
    const float* qh = p.q + (i64)h * (nope + CACHE_W - KV_LORA);
    round_row_q8(qh, nope, nullptr, 0.f, sq, sd, sa, red);  // q_nope in Q8_0 blocks

    // the token's own row, normalised and rotated as kv_finish does
    const bool own = p.kv && p0 <= pos && pos < p1;
    if (own) {
        float kvscale = 1.f;
        const float* x = p.kv;
        if (p.kvnw) {
            float mean = row_sumsq(x, KV_LORA, red) / (float)KV_LORA;
            kvscale = 1.f / sqrtf(mean + p.kveps);
        }
        for (int i = threadIdx.x; i < KV_LORA; i += blockDim.x) crow[i] = cstore(p.kvnw ? (x[i] * kvscale) * p.kvnw[i] : x[i]);
        for (int k = threadIdx.x; k < (CACHE_W - KV_LORA) / 2; k += blockDim.x) {
            float a = x[KV_LORA + 2 * k], b = x[KV_LORA + 2 * k + 1];
            if (p.kvfreqs) rope_pair(a, b, pos, p.kvfreqs[k]);
            crow[KV_LORA + 2 * k] = cstore(a);
            crow[KV_LORA + 2 * k + 1] = cstore(b);
        }
    }
    __syncthreads();

    // q_lat = k_b[h]·q_nope: row r's lanes sum its blocks as mmv1 does
#pragma unroll
    for (int st = 0; st < PRE; st++) {
        if (st < nsteps) {
            float acc = 0.f;
            if (l < nbk) {
                const int4* a = (const int4*)(sq + 32 * l);
                acc += QK::val(pq[st], a[0], a[1], sa[l], h2f((u16)ps[st]), sd[l]);
            }
            for (int off = lpr >> 1; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
            const int r = st * rstep + warp * (32 / lpr) + sub;
            if (l == 0 && r < KV_LORA) qsh[r] = acc;
        }
    }
    rows_dot<TK>(kbh, p.kbRow, KV_LORA, nbk, PRE, nsteps, sq, sd, sa, qsh);
    rope_query(qsh, qh, nope, p.qfreqs, pos);

    if (own) {
        cache_t* row = p.layer + (i64)pos * CACHE_W;
        for (int i = threadIdx.x; i < CACHE_W; i += blockDim.x) row[i] = crow[i];
    }
    __syncthreads();

    if (!attn_split<ATT_AP, true>(p.part, qsh, p.layer, crow, own ? pos : -1, p0, p1, h, S, s, p.scale, p.olat, p.counter, osh)) return;

    // the last split: o[h] = v_b[h]·o_lat[h], each row summed as mmv1 sums it
    __syncthreads();
    round_row_q8(osh, KV_LORA, nullptr, 0.f, sq, sd, sa, red);
    __syncthreads();
    const int nbv = KV_LORA / 32, vstep = ATT_WARPS * (32 / lanes_for(nbv));
    rows_dot<TV>(p.vb + (i64)h * p.vdim * p.vbRow, p.vbRow, (int)p.vdim, nbv, 0, ((int)p.vdim + vstep - 1) / vstep, sq, sd, sa,
                 p.out + (i64)h * p.vdim);
}

#define ATTN_DECODE(TK, TV, NAME) \
    extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32, 2) attn_decode##NAME(AD p) { attn_decode_impl<TK, TV>(p); }
// k_b and v_b in Q4_0 or Q8_0 (the types mmv1 serves), where the model has them
#define ATTN_DECODE_T_Q4_0 ATTN_DECODE(T_Q4_0, T_Q4_0, _T_Q4_0_T_Q4_0)
#define ATTN_DECODE_T_Q8_0 ATTN_DECODE(T_Q8_0, T_Q8_0, _T_Q8_0_T_Q8_0)
#define ATTN_DECODE_T_Q4_K
#define ATTN_DECODE_T_Q5_K
#define ATTN_DECODE_T_Q6_K
#define ATTN_DECODE_IF(TY) ATTN_DECODE_##TY
FAST_TYPES(ATTN_DECODE_IF)

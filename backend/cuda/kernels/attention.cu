// Attention over the latent cache: storing a token's row, split-K
// attention with its merge, and the one-token kernels (attn_decode,
// mla_decode) that also apply k_b and v_b (the absorptions) themselves.
// Its units (exec.go's units) are separate programs, so that a cold
// start's compiles run side by side: UNIT_MLA 1 or 2 holds the mla_decode
// kernels of MT 1 or 2, UNIT_DECODE attn_decode's, and the plain unit all
// the others.

// cache_store writes token t's row (CACHE_W values) at position pos[t].
#if !UNIT_MLA && !UNIT_DECODE
extern "C" __global__ void cache_store(cache_t* layer, const float* src, i64 ss, const int* pos) {
    pdl_entry();
    int t = blockIdx.x;
    cache_t* row = layer + (i64)pos[t] * CACHE_W;
    for (int j = threadIdx.x; j < CACHE_W; j += blockDim.x) row[j] = cstore(src[t * ss + j]);
}
#endif

// kv_finish completes a token's cache row in one kernel: RMS-normalise the
// latent (nw), rotate the rope key (freqs), write both back to kv and store
// the row at the token's position.
#if !UNIT_MLA && !UNIT_DECODE
extern "C" __global__ void kv_finish(cache_t* layer, float* kv, i64 ks, const int* pos, const float* nw, float eps, const float* freqs) {
    pdl_entry();
    __shared__ float red[32];
    const int t = blockIdx.x;
    float* x = kv + t * ks;
    cache_t* row = layer + (i64)pos[t] * CACHE_W;
    const float scale = norm_scale(x, KV_LORA, nw, eps, red);
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
#endif

// merge_splits merges S splits' states (max, sum, Σ e·latent), state s's
// value k read by at(s, k), into columns [j0, j1) of the latent: out(j, a)
// takes each. The splits' factors go to shared memory first, so the sum
// over splits is plain loads instead of a chain of dependent ones. Every
// merge (attn_merge's from global memory, attn_decode's from its cluster's
// shared memory) sums in this order. A thread's first value of its first
// NL splits, and each lane's (max, sum) pairs, are loaded at once before
// the factors are reduced: one round trip where the factors' two passes
// and then the values took three.
#define MAX_SPLITS 64
template <class At, class Out> __device__ __forceinline__ void merge_splits(int S, int j0, int j1, At at, Out out) {
    __shared__ float ws[MAX_SPLITS];
    constexpr int NL = 8;
    const int jf = j0 + threadIdx.x;  // the thread's first value
    float v[NL];
#pragma unroll
    for (int s = 0; s < NL; s++) v[s] = jf < j1 && s < S ? at(s, 2 + jf) : 0.f;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float ms[MAX_SPLITS / 32], ls[MAX_SPLITS / 32];  // splits lane, lane + 32, ...
#pragma unroll
        for (int k = 0; k < MAX_SPLITS / 32; k++) {
            const int s = lane + 32 * k;
            ms[k] = s < S ? at(s, 0) : -INFINITY;
            ls[k] = s < S ? at(s, 1) : 0.f;
        }
        float M = -INFINITY;
#pragma unroll
        for (int k = 0; k < MAX_SPLITS / 32; k++) M = fmaxf(M, ms[k]);
        M = warp_max(M);
        float L = 0.f;
#pragma unroll
        for (int k = 0; k < MAX_SPLITS / 32; k++) {
            const int s = lane + 32 * k;
            if (s < S) {
                const float f = ms[k] == -INFINITY ? 0.f : expf(ms[k] - M);
                ws[s] = f;
                L += ls[k] * f;
            }
        }
        L = warp_sum(L);
        for (int s = lane; s < S; s += 32) ws[s] /= L;
    }
    __syncthreads();
    for (int j = jf; j < j1; j += blockDim.x) {
        float a = 0.f;
        int s0 = 0;
        if (j == jf) {
#pragma unroll
            for (int s = 0; s < NL; s++)
                if (s < S) a += v[s] * ws[s];
            s0 = NL;
        }
#pragma unroll 8
        for (int s = s0; s < S; s++) a += at(s, 2 + j) * ws[s];
        out(j, a);
    }
}

// attn_merge merges the S splits of head th (t·H + h) into
// olat[t][h·KV_LORA..]. The parts are read past L1 (__ldcg): other blocks
// of the same launch may have written them.
__device__ void attn_merge(float* olat, const float* part, int S, int th) {
    const float* p = part + (i64)th * S * (KV_LORA + 2);
    merge_splits(S, 0, KV_LORA, [&](int s, int k) { return __ldcg(p + s * (KV_LORA + 2) + k); },
                 [&](int j, float a) { olat[(i64)th * KV_LORA + j] = a; });
}

// ATT_WARPS (warps a block), MLA_TP (mla_decode's positions a tile) and
// MLA_PAD (its shared rows' padding) come from the Go side (fixedDefines),
// which sizes the launches and mla_decode's shared memory with them.
// HALF2: f16 rows are read a pair of columns per 4-byte load
#define HALF2 (CACHE_HALF && KV_LORA % 64 == 0 && CACHE_W % 2 == 0)
// ATT_AP: positions a warp takes per step (its loads in flight at once).
// 8 with f16 pairs held as loaded measured slower (youtu 570 → 545 tok/s,
// 462 → 354 at 4096): the registers spill.
#define ATT_AP 4
// attn_walk is one split of split-K attention: an online softmax of the
// query in qsh (q_lat then q_pe) over positions [p0, p1) of the layer's
// cache, written to out as (max, sum, Σ e·latent). Each warp takes AP
// positions per step, their loads all in flight, and rescales its state
// once per step; each lane holds KV_LORA/32 accumulators. With FOLD,
// position cpos is read from crow (in shared memory: the row this launch
// computes) instead of the cache. One block per head: a block serving 2 or
// 4 heads (each row loaded once for all) measured slower at every depth,
// its steps twice as long and its blocks fewer.
template <int AP, bool FOLD>
__device__ __forceinline__ void attn_walk(float* out, const float* qsh, const cache_t* layer, const cache_t* crow, int cpos, int p0, int p1,
                                          float scale) {
    __shared__ float msh[ATT_WARPS], lsh[ATT_WARPS];
    __shared__ float ash[ATT_WARPS][KV_LORA];
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
}

// attn_split is attn_walk for block (th = t·H + h, s) of a batch, its state
// written to part. With olat set, the last split of a head to finish
// merges the splits into olat (attn_combine's work, without its launch).
template <int AP>
__device__ __forceinline__ void attn_split(float* part, const float* qsh, const cache_t* layer, int p0, int p1, int th, int S, int s,
                                           float scale, float* olat, unsigned* counter) {
    __shared__ bool last;
    attn_walk<AP, false>(part + ((i64)th * S + s) * (KV_LORA + 2), qsh, layer, nullptr, -1, p0, p1, scale);
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

// split_range is block s's share [p0, p1) of positions 0..pos. The last
// split holds pos, and in attn_decode it also normalises, rotates and
// stores the token's own row (after its k_b rows, while its peers finish
// theirs), so it takes ATT_OWN_LESS positions
// fewer than an even share (at least one) and the others the rest (youtu
// at 640 positions, before the clusters: 652.8 and 655.8 tok/s with 0,
// 659.9 and 659.7 with 32; with them, 661.5 with 0 and 668.6 with 64
// against 668.5 and 667.8). attn_partial's batches split the same way, so
// that the unfused kernels merge in attn_decode's order.
#define ATT_OWN_LESS 32
__device__ __forceinline__ void split_range(int pos, int S, int s, int& p0, int& p1) {
    const int n = pos + 1, last = S == 1 ? n : max(1, (n + S - 1) / S - ATT_OWN_LESS), rest = n - last;
    if (s == S - 1) {
        p0 = rest, p1 = n;
        return;
    }
    const int c = (rest + S - 2) / (S - 1);
    p0 = min(rest, s * c);
    p1 = min(rest, p0 + c);
}

// rope_query puts a head's q_pe (the rope values at qpe), rotated by
// rot(k, a, b) for pair k, after q_lat in qsh.
template <class Rot> __device__ __forceinline__ void rope_query(float* qsh, const float* qpe, Rot rot) {
    const int rope = CACHE_W - KV_LORA;
    for (int k = threadIdx.x; k < rope / 2; k += blockDim.x) {
        float a = qpe[2 * k], b = qpe[2 * k + 1];
        rot(k, a, b);
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
    const int pt = pos[t];
    rope_query(qsh, q + t * qs + h * (nope + CACHE_W - KV_LORA) + nope, [&](int k, float& a, float& b) {
        if (freqs) rope_pair(a, b, pt, freqs[k]);
    });
    __syncthreads();
    attn_split<AP>(part, qsh, layer, p0, p1, th, S, s, scale, olat, counter);
}

#if !UNIT_MLA && !UNIT_DECODE
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32)
    attn_partial(float* part, const float* query, const float* q, i64 qs, int nope, const float* freqs, const cache_t* layer,
                 const int* pos, int H, int S, float scale, float* olat, unsigned* counter) {
    attn_partial_impl<ATT_AP>(part, query, q, qs, nope, freqs, layer, pos, H, S, scale, olat, counter);
}
#endif

// attn_combine merges the S splits of block t·H + h into olat[t][h·KV_LORA..].
#if !UNIT_MLA && !UNIT_DECODE
extern "C" __global__ void attn_combine(float* olat, const float* part, int S) {
    pdl_entry();
    attn_merge(olat, part, S, blockIdx.x);
}
#endif

// ---- One token: attn_decode ----
//
// A decode step's attention in one launch: what kv_finish, the k_b
// product, attn_partial, its merge and the v_b product do as five. The
// fixed cost of a launch (a few µs) is larger than the work each of the
// small ones does. Block (h, s) is split s of head h, and a head's S
// splits are one thread block cluster (Hopper), whose blocks read each
// other's shared memory: each does 1/S of the head's k_b rows, of the
// merge and of the v_b rows, and they exchange the results through
// distributed shared memory at cluster barriers, where a merge through
// global memory (the last split to finish, found by an atomic counter)
// waited for a fence, the counter and a round trip to L2, then merged and
// applied v_b alone. In order:
//   - before waiting for the kernel before (PDL): the first steps of the
//     block's k_b rows into registers, its v_b rows into L2, the
//     rotations' sines;
//   - q_nope rounded to Q8_0 blocks; the block's rows of q_lat =
//     k_b[h]·q_nope, then its first v_b rows' loads into registers; the
//     split holding the token's own position normalises and rotates that
//     row (kv_finish's work) while the others wait at the barrier, then
//     every block gathers q_lat from its peers;
//   - the split's walk over its positions (attn_walk), its state left in
//     shared memory; at the barrier, block s merges 1/S of the latent's
//     32-column groups from all S states and rounds them to Q8_0 blocks;
//     at the next, it gathers the other groups and sums its v_b rows.
// Every sum runs in the order of the separate kernels (k_b and v_b rows as
// mmv1 sums them, the cache row as kv_finish, the merge as attn_merge), so
// the logits are the same bits as the unfused launches'.

// AD mirrors the words decodeOne records for attn_decode (backend/cuda/ops.go).
struct AD {
    float* out;           // [H][vdim] attention output
    const float* q;       // [H][nope + rope]
    i64 nope;
    const float* qfreqs;  // q_pe's RoPE, or null
    float* kv;            // the token's [latent | k_pe], before norm and RoPE
    const float* kvnw;    // the latent's norm weight, or null
    const float* kvfreqs; // k_pe's RoPE, or null
    cache_t* layer;
    const int* pos;
    float scale, kveps;
    const u8* kb;         // k_b: rows h·KV_LORA + i of nope values
    i64 kbRow;
    const u8* vb;         // v_b: rows h·vdim + i of KV_LORA values
    i64 vbRow, vdim;
};

// finish_row writes a token's cache row to dst from its raw [latent | k_pe]
// x: the latent RMS-normalised by nw (when set), k_pe's pair k rotated by
// rot(k, a, b), each value as kv_finish computes it. Every thread of the
// block calls it; red holds 32 floats.
template <class Rot>
__device__ __forceinline__ void finish_row(cache_t* dst, const float* x, const float* nw, float eps, Rot rot, float* red) {
    const float scale = norm_scale(x, KV_LORA, nw, eps, red);
    for (int i = threadIdx.x; i < KV_LORA; i += blockDim.x) dst[i] = cstore(nw ? (x[i] * scale) * nw[i] : x[i]);
    for (int k = threadIdx.x; k < (CACHE_W - KV_LORA) / 2; k += blockDim.x) {
        float a = x[KV_LORA + 2 * k], b = x[KV_LORA + 2 * k + 1];
        rot(k, a, b);
        dst[KV_LORA + 2 * k] = cstore(a);
        dst[KV_LORA + 2 * k + 1] = cstore(b);
    }
}

// row_step is how many rows of nb blocks a rows_dot step covers: each of
// the block's warps takes 32/lpr rows, lpr lanes a row.
__device__ __forceinline__ int row_step(int nb) { return ATT_WARPS * (32 >> lanes_log2(nb)); }

// RowLoads holds N steps of rows_dot's weight loads: for step st of
// [st0, min(st0 + N, st1)), row r = st·rstep + warp·(32/lpr) + sub (r <
// nrows, rows of nb blocks, nb ≤ 32), lane l of the row's lpr lanes block
// l. The weights never change during a step, so a kernel can issue them
// before its input exists and sum once it is rounded (sq, sd, sa): each
// row as mmv1 sums it, lane l's block then a butterfly over the lanes.
template <int TY, int N> struct RowLoads {
    int4 q[N][Q1<TY>::W];
    u32 sc[N];

    __device__ __forceinline__ void load(const u8* base, i64 rowBytes, int nrows, int nb, int st0, int st1) {
        using Q = Q1<TY>;
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int ls = lanes_log2(nb), sub = lane >> ls, l = lane & ((1 << ls) - 1), rstep = row_step(nb);
#pragma unroll
        for (int j = 0; j < N; j++) {
            const int r = min((st0 + j) * rstep + warp * (32 >> ls) + sub, nrows - 1);
            if (st0 + j < st1 && l < nb) {
                const u8* row = base + (i64)r * rowBytes;
#pragma unroll
                for (int w = 0; w < Q::W; w++) q[j][w] = ldw4(row + Q::STRIDE * l + 16 * w);
                sc[j] = ldw2(row + Q::STRIDE * nb + 2 * l);
            }
        }
    }

    __device__ __forceinline__ void sum(int nrows, int nb, int st0, int st1, const i8* sq, const float* sd, const int* sa, float* out) const {
        using Q = Q1<TY>;
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int ls = lanes_log2(nb), lpr = 1 << ls, sub = lane >> ls, l = lane & (lpr - 1), rstep = row_step(nb);
#pragma unroll
        for (int j = 0; j < N; j++) {
            if (st0 + j < st1) {
                float acc = 0.f;
                if (l < nb) {
                    const int4* a = (const int4*)(sq + 32 * l);
                    acc += Q::val(q[j], a[0], a[1], sa[l], h2f((u16)sc[j]), sd[l]);
                }
                for (int off = lpr >> 1; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
                const int r = (st0 + j) * rstep + warp * (32 >> ls) + sub;
                if (l == 0 && r < nrows) out[r] = acc;
            }
        }
    }
};

// rows_dot sets out[r] for the rows of steps [st0, st1) (RowLoads' rows)
// to their dot products with the rounded activations. Loads go out 8 steps
// at a time: a memory round trip per 8 steps instead of one per step.
template <int TY>
__device__ __forceinline__ void rows_dot(const u8* base, i64 rowBytes, int nrows, int nb, int st0, int st1, const i8* sq, const float* sd,
                                         const int* sa, float* out) {
    for (int s0 = st0; s0 < st1; s0 += 8) {
        RowLoads<TY, 8> r;
        r.load(base, rowBytes, nrows, nb, s0, st1);
        r.sum(nrows, nb, s0, st1, sq, sd, sa, out);
    }
}

// PreLoads are the first steps' loads a kernel issues before its input is
// ready: 8 16-byte words a lane.
template <int TY> using PreLoads = RowLoads<TY, 8 / Q1<TY>::W>;

// row_steps is how many rows_dot steps nrows rows of nb blocks take.
__device__ __forceinline__ int row_steps(int nrows, int nb) {
    const int rstep = row_step(nb);
    return (nrows + rstep - 1) / rstep;
}

// rows_from sets out[r] for the rows of steps [st0, st1): those pre holds
// (its N steps, loaded from base earlier, from step st0), then the rest as
// rows_dot does.
template <int TY, int N>
__device__ __forceinline__ void rows_from(const RowLoads<TY, N>& pre, const u8* base, i64 rowBytes, int nrows, int nb, int st0, int st1,
                                          const i8* sq, const float* sd, const int* sa, float* out) {
    pre.sum(nrows, nb, st0, st1, sq, sd, sa, out);
    rows_dot<TY>(base, rowBytes, nrows, nb, st0 + N, st1, sq, sd, sa, out);
}

// share is part s of S of n things: [n·s/S, n·(s+1)/S).
__device__ __forceinline__ void share(int n, int S, int s, int& a, int& b) {
    a = n * s / S;
    b = n * (s + 1) / S;
}

// share_owner is the part of S that thing i of n falls in (share's
// inverse): the last s with n·s/S ≤ i, that is s·n < (i + 1)·S.
__device__ __forceinline__ int share_owner(int n, int S, int i) { return min(S - 1, ((i + 1) * S - 1) / n); }

#if __CUDA_ARCH__ >= 900
template <int TK, int TV>
__device__ __forceinline__ void attn_decode_impl(const AD& p) {
    __shared__ __align__(16) float qsh[CACHE_W];
    __shared__ __align__(16) i8 sq[KV_LORA > 1024 ? KV_LORA : 1024];
    __shared__ float sd[KV_LORA / 32 > 32 ? KV_LORA / 32 : 32], red[32];
    __shared__ int sa[KV_LORA / 32 > 32 ? KV_LORA / 32 : 32];
    __shared__ __align__(16) cache_t crow[CACHE_W];
    __shared__ __align__(16) float osh[KV_LORA];
    __shared__ __align__(16) float st[KV_LORA + 2];  // the split's state: (max, sum, Σ e·latent)
    const int h = blockIdx.x, s = blockIdx.y, S = gridDim.y;  // the cluster is the head's S blocks: s is the rank
    const int nope = (int)p.nope, nbk = nope / 32, nbv = KV_LORA / 32, vdim = (int)p.vdim;
    // this block's k_b steps (of row_steps' rows) and v_b steps
    const int ksteps = row_steps(KV_LORA, nbk), krs = row_step(nbk);
    int k0, k1, v0, v1;
    share(ksteps, S, s, k0, k1);
    share(row_steps(vdim, nbv), S, s, v0, v1);
    const u8* kbh = p.kb + (i64)h * KV_LORA * p.kbRow;
    const u8* vbh = p.vb + (i64)h * vdim * p.vbRow;

    // Before waiting for the kernel before: the first steps of the block's
    // k_b rows into registers (PreLoads), its v_b rows into L2.
    PreLoads<TK> pre;
    pre.load(kbh, p.kbRow, KV_LORA, nbk, k0, k1);
    {
        const int vrs = row_step(nbv);
        const i64 lo = (i64)v0 * vrs * p.vbRow, hi = (i64)min(v1 * vrs, vdim) * p.vbRow;
        for (i64 o = lo + 128 * threadIdx.x; o < hi; o += 128 * blockDim.x) asm volatile("prefetch.global.L2 [%0];" ::"l"(vbh + o));
    }
    // The position went up (a copy in stream order) before the step's first
    // kernel, so it is read before the wait too, and with it what needs no
    // result of the kernel before: the split's range, the rotations' sines
    // and cosines (double-precision sincos, a long chain), and the latent
    // norm's weights (cp.async into shared memory).
    constexpr int HALF = (CACHE_W - KV_LORA) / 2;                    // rotated pairs
    __shared__ __align__(16) float kvx[CACHE_W];                     // the token's raw row
    __shared__ __align__(16) float knw[KV_LORA];                     // its norm's weights
    __shared__ __align__(16) float qpe[HALF > 0 ? 2 * HALF : 4];     // this head's q_pe
    __shared__ Rotation qrot[HALF > 0 ? HALF : 1], krot[HALF > 0 ? HALF : 1];
    const int pos = p.pos[0];
    int p0, p1;
    split_range(pos, S, s, p0, p1);
    const bool own = p.kv && p0 <= pos && pos < p1;
    const float* qh = p.q + (i64)h * (nope + CACHE_W - KV_LORA);
    for (int k = threadIdx.x; k < HALF; k += blockDim.x) {
        if (p.qfreqs) qrot[k] = rope_angle(pos, p.qfreqs[k]);
        if (own && p.kvfreqs) krot[k] = rope_angle(pos, p.kvfreqs[k]);
    }
    // (copied as 16-byte pieces: the parts' widths and addresses must allow it)
    const bool copied = KV_LORA % 4 == 0 && (CACHE_W - KV_LORA) % 4 == 0 &&
                        ((unsigned long long)(qh + nope) | (unsigned long long)p.kv | (unsigned long long)p.kvnw) % 16 == 0;
    if (copied && own && p.kvnw)
        cp_async_floats(knw, p.kvnw, KV_LORA);
    pdl_entry();

    // The token's row and q_pe come in while q_nope is rounded.
    if (copied) {
        if (own)
            cp_async_floats(kvx, p.kv, CACHE_W);
        cp_async_floats(qpe, qh + nope, CACHE_W - KV_LORA);
    }
    cp_async_commit();
    round_row_q8(qh, nope, nullptr, 0.f, sq, sd, sa, red);  // q_nope in Q8_0 blocks
    cp_async_wait<0>();
    __syncthreads();

    // the block's rows of q_lat = k_b[h]·q_nope, and q_pe rotated
    rows_from<TK>(pre, kbh, p.kbRow, KV_LORA, nbk, k0, k1, sq, sd, sa, qsh);
    // the first steps of the block's v_b rows into registers (from L2,
    // where they were fetched before the wait), to be summed at the end:
    // the walk and the merge hide their round trip (youtu 742 -> 768 tok/s
    // at an empty context). Two 16-byte words a lane: Q4_0's two steps fit
    // 128 registers; in NVRTC 12.4's build Q8_0's one step spills 8 bytes,
    // two spilled 24. (Its steps bounded by vp here and summed apart from
    // the rest, not through rows_from: rows_from's build measured 0.5-0.7%
    // slower at an empty context, youtu 768.8 -> 764.8 tok/s.)
    constexpr int VP = 2 / Q1<TV>::W;
    const int vp = min(v1, v0 + VP);
    RowLoads<TV, VP> vpre;
    vpre.load(vbh, p.vbRow, vdim, nbv, v0, vp);
    rope_query(qsh, copied ? qpe : qh + nope, [&](int k, float& a, float& b) {
        if (p.qfreqs) rotate(a, b, qrot[k]);
    });
    cluster_arrive();
    // the token's own row, normalised and rotated as kv_finish does, while
    // the peers finish their rows (own is the same for the whole block, so
    // the barrier in it is too)
    if (own)
        finish_row(crow, copied ? kvx : p.kv, copied && p.kvnw ? knw : p.kvnw, p.kveps, [&](int k, float& a, float& b) {
            if (p.kvfreqs) rotate(a, b, krot[k]);
        }, red);
    cluster_wait();
    for (int i = threadIdx.x; i < KV_LORA; i += blockDim.x) {
        const int o = share_owner(ksteps, S, i / krs);
        if (o != s) qsh[i] = *cluster_peer(qsh + i, o);
    }
    if (own) {
        __syncthreads();  // crow complete (the block arrived at the cluster barrier before writing it)
        cache_t* row = p.layer + (i64)pos * CACHE_W;
        for (int i = threadIdx.x; i < CACHE_W; i += blockDim.x) row[i] = crow[i];
    }
    __syncthreads();

    attn_walk<ATT_AP, true>(st, qsh, p.layer, crow, own ? pos : -1, p0, p1, p.scale);
    cluster_arrive();
    cluster_wait();

    // this block's groups of the merged latent, rounded to Q8_0 blocks
    int g0, g1;
    share(nbv, S, s, g0, g1);
    merge_splits(S, 32 * g0, 32 * g1, [&](int r, int k) { return *cluster_peer(st + k, r); }, [&](int j, float a) { osh[j] = a; });
    __syncthreads();
    round_row_q8(osh + 32 * g0, 32 * (g1 - g0), nullptr, 0.f, sq + 32 * g0, sd + g0, sa + g0, red);
    cluster_arrive();
    cluster_wait();
    for (int i = threadIdx.x; i < 8 * nbv; i += blockDim.x) {  // 4-byte pieces of the groups' quants, then scales and sums
        const int o = share_owner(nbv, S, i / 8);
        if (o == s) continue;
        ((int*)sq)[i] = *cluster_peer((int*)sq + i, o);
        if (i % 8 == 0) {
            sd[i / 8] = *cluster_peer(sd + i / 8, o);
            sa[i / 8] = *cluster_peer(sa + i / 8, o);
        }
    }
    cluster_arrive();  // this block reads no peer's memory any more
    __syncthreads();

    // o[h] = v_b[h]·o_lat[h], the block's rows, each summed as mmv1 sums it
    vpre.sum(vdim, nbv, v0, vp, sq, sd, sa, p.out + (i64)h * vdim);
    rows_dot<TV>(vbh, p.vbRow, vdim, nbv, vp, v1, sq, sd, sa, p.out + (i64)h * vdim);
    cluster_wait();  // nor will any read this block's
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
#if UNIT_DECODE
FAST_TYPES(ATTN_DECODE_IF)
#endif
#endif // __CUDA_ARCH__ >= 900

// ---- One token on tensor cores: mla_decode ----
//
// attn_decode gives every (head, split) its own block, so each head reads
// the whole cache: at 4096 positions youtu's 16 heads read 75 MB a layer
// from L2 where the cache is 4.7 MB, and the step grows 18%. mla_decode
// reads each cache row once for all heads: the heads are the rows of MT
// (1 or 2) mma.m16n8k16 tiles (f16 inputs, f32 sums), so a split's tile of positions
// is scored and summed for every head at once. One launch, one block per
// SM (all resident: phases 1, 2 and 3 meet at grid barriers, phase 4 at its
// head's count), in four phases:
//   1. q_lat = k_b·q_nope, the rows of all heads shared among the first
//      G - 1 blocks (summed as mmv1 sums them), scaled by the softmax scale
//      and written as f16 pairs hi + lo (22 bits: near float32 scores, the
//      cache's f16 rows being exact); the last block writes every head's
//      rotated q_pe the same way, and normalises, rotates and stores the
//      token's own cache row (kv_finish's work).
//   2. split s (of positions chunks of 32 or more) streams its rows through
//      shared memory in tiles of MLA_TP (cp.async, two deep): each tile's
//      scores S = Q·Kᵀ (warp: 1/8 of the row, every position), an online
//      softmax per head, and O += P·V (warp: KV_LORA/8 latent columns),
//      P as f16 hi + lo too: two mma where float32 would need one.
//   3. the splits' states are merged into each head's latent (threads over
//      values and groups of splits: no chain of loads).
//   4. o[h] = v_b[h]·latent[h], the rows shared among the blocks.
// The sums run in another order than the unfused kernels' (float32 sums,
// Q and P as f16 hi + lo pairs): the GPU tests bound the difference.

#define MLA_QST (CACHE_W + MLA_PAD)  // halves per row in shared memory: a row stride of 16 or 80 B mod 128, no ldmatrix conflicts
#define MLA_PST (MLA_TP + MLA_PAD)   // halves per row of P
#define MLA_SST (MLA_TP + MLA_PAD)   // floats per row of a warp's partial scores: a half-warp's float2 stores (4 rows) hit distinct banks

// MD mirrors the words decodeOne records for mla_decode (backend/cuda/ops.go).
struct MD {
    const float* q;        // [H][nope + rope]
    i64 nope;
    const float* qfreqs;   // q_pe's RoPE, or null
    float* kv;             // the token's [latent | k_pe], before norm and RoPE, or null
    const float* kvnw;     // the latent's norm weight, or null
    const float* kvfreqs;  // k_pe's RoPE, or null
    cache_t* layer;
    const int* pos;
    int H;
    float scale, kveps;
    const u8* kb;          // k_b: rows h·KV_LORA + i of nope values
    i64 kbRow;
    const u8* vb;          // v_b: rows h·vdim + i of KV_LORA values
    i64 vbRow, vdim;
    u16* qh;               // [MLA_QREP][2][16·MT][CACHE_W] f16 queries hi, lo, in copies (rows past H unused)
    float* part;           // [G][16·MT][KV_LORA] the splits' unnormalised latents
    float* ml;             // [G][16·MT][2] the splits' (max, sum)
    float* olat;           // [H][KV_LORA] merged latents
    float* out;            // [H][vdim]
    unsigned* bar;         // arrivals, exits, then each head's arrivals: zero between launches
};

// Tensor-core code: compiled for sm_80 and later only.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

// group_sync waits until want arrivals have counted at bar (blocks of
// the grid that meet there, one arrival each): the arrived blocks' writes
// before it are visible after it.
__device__ __forceinline__ void group_sync(unsigned* bar, unsigned want) {
    __syncthreads();
    if (threadIdx.x == 0) {
        // release: the block's writes (ordered before by the barrier above)
        // are visible to whoever acquires the count
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
        unsigned v;
        do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
        while (v < want);
    }
    __syncthreads();
}

// grid_sync waits until every block of the grid has arrived at barrier
// number k (1, 2, ...) of the count at bar.
__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned k) { group_sync(bar, k * gridDim.x); }

// Share is a block's part of a head's n rows (or values) [i0, i1): the G
// blocks go to the H ≤ G heads in turn, head h taking blocks [f, f + m),
// f = ⌈h·G/H⌉, so that no block's part spans two heads.
struct Share {
    int h, i0, i1;
    int blocks;  // m, the head's blocks
};
__device__ __forceinline__ Share head_share(int b, int G, int H, int n) {
    const int h = b * H / G, f = (h * G + H - 1) / H, m = ((h + 1) * G + H - 1) / H - f;
    Share r{h, 0, 0, m};
    share(n, m, b - f, r.i0, r.i1);
    return r;
}

__device__ __forceinline__ void ldsm_x4(u32* r, const void* p) {
    const u32 a = (u32)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(u32* r, const void* p) {
    const u32 a = (u32)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
// mma16816 is c += a·b for a 16×16 f16 tile a (row-major) and a 16×8 tile
// b (column-major), f32 sums.
__device__ __forceinline__ void mma16816(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// split_f16 stores v as the f16 pair hi (at d) + lo (at d + lo).
__device__ __forceinline__ void split_f16(float v, u16* d, i64 lo) {
    const u16 hi = f2h(v);
    d[0] = hi;
    d[lo] = f2h(v - h2f(hi));
}

// mla_rows sets out[i], i < rows, to row i of w (rows of nb Q8_0-sized
// blocks) times x (K values in global memory, rounded here to Q8_0 blocks
// in shared memory), summed as mmv1 sums them; the first steps' loads go
// out before the rounding. Not inlined: phases 1 and 4 (k_b and v_b, of
// one type in the models) run the same code, so phase 4 finds it in the
// instruction cache, where its own copy was fetched cold each launch (ncu:
// glm's phase 4 spent most of its samples waiting for instructions).
template <int TY>
__device__ __noinline__ void mla_rows(const u8* w, i64 rowBytes, int rows, int nb, const float* x, int K, float* out, i8* sq, float* sd,
                                      int* sa, float* red) {
    PreLoads<TY> pre;
    const int st1 = row_steps(rows, nb);
    pre.load(w, rowBytes, rows, nb, 0, st1);
    __syncthreads();
    round_row_q8(x, K, nullptr, 0.f, sq, sd, sa, red);
    __syncthreads();
    rows_from<TY>(pre, w, rowBytes, rows, nb, 0, st1, sq, sd, sa, out);
}

template <int TK, int TV, int MT>
__device__ __forceinline__ void mla_decode_impl(const MD& p) {
    // KS k-steps of 16 columns a row (shared among the warps for the scores)
    constexpr int MR = 16 * MT, KS = CACHE_W / 16, DW = KV_LORA / ATT_WARPS, NT = DW / 8;
    extern __shared__ __align__(16) u8 smem[];
    u16* qs = (u16*)smem;                        // [2][MR][MLA_QST] hi, lo
    u16* tile = qs + 2 * MR * MLA_QST;           // [2][MLA_TP][MLA_QST]
    u16* pm = tile + 2 * MLA_TP * MLA_QST;       // [2][MR][MLA_PST] hi, lo
    float* sc = (float*)(pm + 2 * MR * MLA_PST); // [ATT_WARPS][MR][MLA_SST]
    float* corr = sc + ATT_WARPS * MR * MLA_SST;  // [MR]
    float* mrow = corr + MR;                 // [MR]
    float* lrow = mrow + MR;                 // [MR]
    __shared__ __align__(16) i8 sq[KV_LORA > 1024 ? KV_LORA : 1024];
    __shared__ float sd[KV_LORA / 32 > 32 ? KV_LORA / 32 : 32], red[32];
    __shared__ int sa[KV_LORA / 32 > 32 ? KV_LORA / 32 : 32];
    __shared__ __align__(16) float tmp[KV_LORA > 1024 ? KV_LORA : 1024];
    __shared__ float ws[256];  // the merge's weights, a split each (S ≤ G ≤ 256)
    constexpr int HALF = (CACHE_W - KV_LORA) / 2, HP = HALF > 0 ? HALF : 1;  // rotated pairs a row
    __shared__ Rotation qrot[HP];  // q_pe's rotations (phase 1's last block)
    const int G = gridDim.x, b = blockIdx.x, H = p.H;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const int nope = (int)p.nope, vdim = (int)p.vdim, qw = nope + CACHE_W - KV_LORA;
    // Rows and latent values go to the blocks head by head (head_share): a
    // block whose share spanned two heads rounded two inputs and took twice
    // as long, and each grid barrier waits for the slowest block. In phase
    // 1 the last block takes no q_lat rows: it writes the q_pe rows and the
    // token's own cache row instead.
    const bool qrows = b < G - 1;
    const Share qsh = head_share(b, G - 1, H, KV_LORA), vsh = head_share(b, G, H, vdim);
    const int q0 = qsh.i0, v0 = vsh.i0;
    const int nbq = nope / 32, nbv = KV_LORA / 32, nq = qrows ? qsh.i1 - q0 : 0, nv = vsh.i1 - v0;
    const u8* kbw = p.kb + ((i64)qsh.h * KV_LORA + q0) * p.kbRow;
    const u8* vbw = p.vb + ((i64)vsh.h * vdim + v0) * p.vbRow;

    // Before waiting for the kernel before: this block's k_b and v_b rows
    // into L2. (Loading the first ones into registers there instead, and
    // v_b's before the third grid barrier, measured no faster.)
    for (i64 o = 128 * threadIdx.x; o < nq * p.kbRow; o += 128 * blockDim.x) asm volatile("prefetch.global.L2 [%0];" ::"l"(kbw + o));
    for (i64 o = 128 * threadIdx.x; o < nv * p.vbRow; o += 128 * blockDim.x) asm volatile("prefetch.global.L2 [%0];" ::"l"(vbw + o));
    // Q's rows past H (glm's 20 heads leave 12 of 32) are zeros, set here
    // rather than copied after the first barrier
    constexpr int RC = CACHE_W / 8;  // 16-byte pieces of a row
    for (int i = threadIdx.x; i < 2 * (MR - H) * RC; i += blockDim.x) {
        const int r = i / RC, hl = r >= MR - H;
        *(uint4*)(qs + (hl * MR + H + r - hl * (MR - H)) * MLA_QST + 8 * (i % RC)) = make_uint4(0, 0, 0, 0);
    }
    pdl_entry();
    const int pos = p.pos[0], n = pos + 1;

    // phase 2's split: positions [p0, p1), in tiles of MLA_TP; its first two
    // tiles are fetched now, but the one holding the token's own row (which
    // phase 1 may write)
    int chunk = (n + G - 1) / G;
    chunk = (chunk + MLA_TP - 1) / MLA_TP * MLA_TP;  // whole tiles, at least one
    const int S = (n + chunk - 1) / chunk, p0 = b * chunk, p1 = min(n, p0 + chunk);
    auto fetch = [&](int tb, int buf) {
        u16* dst = tile + buf * MLA_TP * MLA_QST;
        for (int i = threadIdx.x; i < MLA_TP * RC; i += blockDim.x) {
            const int r = i / RC, c = i % RC, pp = tb + r;
            cp_async16(dst + r * MLA_QST + 8 * c, p.layer + (i64)(pp < p1 ? pp : p0) * CACHE_W + 8 * c, pp < p1);
        }
    };
    auto early = [&](int tb) { return tb < p1 && !(tb <= pos && pos < tb + MLA_TP); };
    if (b < S) {
        if (early(p0)) fetch(p0, 0);
        if (early(p0 + MLA_TP)) fetch(p0 + MLA_TP, 1);
        cp_async_commit();
    }

    // 1. the queries: q_lat rows, q_pe, the own cache row. Each value
    // goes to every copy of qh: phase 2's blocks read copy b % MLA_QREP, so
    // that the 132 blocks' reads of the same 37-46 KB do not all wait on
    // the same L2 lines.
    const i64 QLO = (i64)MR * CACHE_W, QREP = 2 * QLO;  // the lo halves' offset in a copy; a copy's size
    auto put_q = [&](float v, i64 at) {
#pragma unroll
        for (int c = 0; c < MLA_QREP; c++) split_f16(v, p.qh + c * QREP + at, QLO);
    };
    if (qrows) {
        mla_rows<TK>(kbw, p.kbRow, nq, nbq, p.q + (i64)qsh.h * qw, nope, tmp, sq, sd, sa, red);
        __syncthreads();
        for (int i = threadIdx.x; i < nq; i += blockDim.x) put_q(tmp[i] * p.scale, (i64)qsh.h * CACHE_W + q0 + i);
    } else {
        // every head's q_pe, each pair's rotation taken once for all heads
        for (int k = threadIdx.x; k < HALF; k += blockDim.x)
            if (p.qfreqs) qrot[k] = rope_angle(pos, p.qfreqs[k]);
        __syncthreads();
        for (int i = threadIdx.x; i < H * HALF; i += blockDim.x) {
            const int h = i / HP, k = i - h * HP;
            const float* v = p.q + (i64)h * qw + nope;
            const i64 qr = (i64)h * CACHE_W + KV_LORA;
            float a = v[2 * k], c = v[2 * k + 1];
            if (p.qfreqs) rotate(a, c, qrot[k]);
            put_q(a * p.scale, qr + 2 * k);
            put_q(c * p.scale, qr + 2 * k + 1);
        }
        if (p.kv) {
            finish_row(p.layer + (i64)pos * CACHE_W, p.kv, p.kvnw, p.kveps, [&](int k, float& a, float& b) {
                if (p.kvfreqs) rope_pair(a, b, pos, p.kvfreqs[k]);
            }, red);
        }
    }
    grid_sync(p.bar, 1);

    // 2. split b
    if (b < S) {
        const u16* qc = p.qh + b % MLA_QREP * QREP;  // this block's copy
        for (int hl = 0; hl < 2; hl++)
            for (int i = threadIdx.x; i < H * RC; i += blockDim.x) {
                const int r = hl * MR + i / RC;
                cp_async16(qs + r * MLA_QST + 8 * (i % RC), qc + (i64)r * CACHE_W + 8 * (i % RC), true);
            }
        if (!early(p0)) fetch(p0, 0);
        if (p0 + MLA_TP < p1 && !early(p0 + MLA_TP)) fetch(p0 + MLA_TP, 1);
        cp_async_commit();
        for (int r = threadIdx.x; r < MR; r += blockDim.x) mrow[r] = -INFINITY, lrow[r] = 0.f;
        int k0, k1;  // the warp's k-steps of the scores
        share(KS, ATT_WARPS, warp, k0, k1);
        float o[MT][NT][4];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NT; j++) o[m][j][0] = o[m][j][1] = o[m][j][2] = o[m][j][3] = 0.f;
        int buf = 0;
        for (int tb = p0; tb < p1; tb += MLA_TP, buf ^= 1) {
            // the first two tiles are in flight already; each later one is
            // fetched a tile ahead
            if (tb > p0 && tb + MLA_TP < p1) fetch(tb + MLA_TP, buf ^ 1);
            cp_async_commit();
            if (tb == p0)
                cp_async_wait<0>();
            else
                cp_async_wait<1>();
            __syncthreads();
            const u16* kt = tile + buf * MLA_TP * MLA_QST;
            // scores: warp → k-steps [k0, k1) of every position and row, a
            // partial sum in sc[warp]. Q's fragments are then read from
            // shared memory once a tile (a warp a quarter of the positions
            // and half of each row read them four times: the tile's
            // bottleneck), at the price of 8 partial sums instead of 2.
            {
                float cc[MT][2][4][4] = {};  // [m][Q hi, lo][n-tile of 8 positions]
#pragma unroll
                for (int i = 0; i < (KS + ATT_WARPS - 1) / ATT_WARPS; i++) {
                    const int ks = k0 + i;
                    if (ks < k1) {
                        // B: n-tiles (0, 1) and (2, 3), each k-step's two halves
                        u32 bb[2][4];
                        const int mi = lane >> 3;
#pragma unroll
                        for (int q = 0; q < 2; q++) ldsm_x4(bb[q], kt + ((2 * q + (mi >> 1)) * 8 + (lane & 7)) * MLA_QST + ks * 16 + (mi & 1) * 8);
#pragma unroll
                        for (int m = 0; m < MT; m++)
#pragma unroll
                            for (int hl = 0; hl < 2; hl++) {
                                u32 a[4];
                                ldsm_x4(a, qs + (hl * MR + m * 16 + (lane & 15)) * MLA_QST + ks * 16 + (lane >> 4) * 8);
#pragma unroll
                                for (int nt = 0; nt < 4; nt++) mma16816(cc[m][hl][nt], a, bb[nt >> 1][2 * (nt & 1)], bb[nt >> 1][2 * (nt & 1) + 1]);
                            }
                    }
                }
#pragma unroll
                for (int m = 0; m < MT; m++)
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) {
                        float* d = sc + (warp * MR + m * 16 + g) * MLA_SST + nt * 8 + 2 * t4;
                        *(float2*)d = make_float2(cc[m][0][nt][0] + cc[m][1][nt][0], cc[m][0][nt][1] + cc[m][1][nt][1]);
                        *(float2*)(d + 8 * MLA_SST) = make_float2(cc[m][0][nt][2] + cc[m][1][nt][2], cc[m][0][nt][3] + cc[m][1][nt][3]);
                    }
            }
            __syncthreads();
            // online softmax: RT threads a row, PP consecutive positions
            // each, every row at once. (A warp a row, its lanes the
            // positions, took MR/8 rounds of two 32-lane reductions each:
            // chains of dependent shuffles that dominated a tile.)
            {
                constexpr int RT = ATT_WARPS * 32 / MR, PP = MLA_TP / RT;
                static_assert(RT * PP == MLA_TP && RT <= 32, "a row's threads share a warp");
                const int r = threadIdx.x / RT, j0 = threadIdx.x % RT * PP;
                float v[PP], mx = -INFINITY;
#pragma unroll
                for (int k = 0; k < PP; k++) {
                    const bool ok = r < H && tb + j0 + k < p1;
                    float sum = 0.f;
#pragma unroll
                    for (int w = 0; w < ATT_WARPS; w++) sum += sc[(w * MR + r) * MLA_SST + j0 + k];
                    v[k] = ok ? sum : -INFINITY;
                    mx = fmaxf(mx, v[k]);
                }
#pragma unroll
                for (int o = RT / 2; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                const float mo = mrow[r], mn = fmaxf(mo, mx);
                const float cf = mn == -INFINITY ? 1.f : expf(mo - mn);
                float se = 0.f;
#pragma unroll
                for (int k = 0; k < PP; k++) {
                    const float e = v[k] == -INFINITY ? 0.f : expf(v[k] - mn);
                    se += e;
                    split_f16(e, pm + r * MLA_PST + j0 + k, MR * MLA_PST);
                }
#pragma unroll
                for (int o = RT / 2; o > 0; o >>= 1) se += __shfl_xor_sync(0xffffffffu, se, o);
                __syncwarp();  // the row's threads have read mrow[r] before its first writes it
                if (j0 == 0) {
                    corr[r] = cf;
                    mrow[r] = mn;
                    lrow[r] = lrow[r] * cf + se;
                }
            }
            __syncthreads();
            // O += P·V: warp → latent columns [DW·warp, DW·warp + DW)
#pragma unroll
            for (int m = 0; m < MT; m++) {
                const float c0 = corr[m * 16 + g], c1 = corr[m * 16 + g + 8];
#pragma unroll
                for (int j = 0; j < NT; j++) o[m][j][0] *= c0, o[m][j][1] *= c0, o[m][j][2] *= c1, o[m][j][3] *= c1;
#pragma unroll
                for (int ks = 0; ks < MLA_TP / 16; ks++) {
                    u32 a[2][4];  // P's hi, lo
#pragma unroll
                    for (int hl = 0; hl < 2; hl++) ldsm_x4(a[hl], pm + (hl * MR + m * 16 + (lane & 15)) * MLA_PST + ks * 16 + (lane >> 4) * 8);
#pragma unroll
                    for (int j = 0; j < NT; j += 2) {
                        u32 bb[4];  // matrices: (k lo, n lo), (k hi, n lo), (k lo, n hi), (k hi, n hi)
                        const int mi = lane >> 3;
                        ldsm_x4_t(bb, kt + (ks * 16 + (lane & 7) + (mi & 1) * 8) * MLA_QST + warp * DW + j * 8 + (mi >> 1) * 8);
#pragma unroll
                        for (int hl = 0; hl < 2; hl++) {
                            mma16816(o[m][j], a[hl], bb[0], bb[1]);
                            mma16816(o[m][j + 1], a[hl], bb[2], bb[3]);
                        }
                    }
                }
            }
            __syncthreads();
        }
        // the split's state, rows past H (padding) left out: through shared
        // memory (Q's space, free now), then out as 16-byte pieces of the
        // block's H contiguous rows. The mma layout's float2 stores put a
        // warp's 32 lanes on 8 rows 2 KB apart, and draining a block's
        // 32-40 KB that way before the barrier's release cost glm 3.3 us a
        // layer at 4096 positions (129 splits); staged, its decode went
        // 297.5 -> 304.0 tok/s there, youtu's 632.7 -> 653.2.
        constexpr int STST = KV_LORA + 8;  // a staged row's stride: a half-warp's float2 stores (4 rows) in distinct banks
        static_assert(MR * STST * 4 <= 2 * MR * MLA_QST * 2, "the staged state fits in Q's space");
        float* stage = (float*)smem;
        float* pb = p.part + (i64)b * MR * KV_LORA;
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const int col = warp * DW + j * 8 + 2 * t4, r = m * 16 + g;
                *(float2*)(stage + r * STST + col) = make_float2(o[m][j][0], o[m][j][1]);
                *(float2*)(stage + (r + 8) * STST + col) = make_float2(o[m][j][2], o[m][j][3]);
            }
        __syncthreads();
        for (int i = threadIdx.x; i < H * (KV_LORA / 4); i += blockDim.x) {
            const int r = i / (KV_LORA / 4), c = 4 * (i % (KV_LORA / 4));
            *(float4*)(pb + (i64)r * KV_LORA + c) = *(const float4*)(stage + r * STST + c);
        }
        for (int r = threadIdx.x; r < H; r += blockDim.x) {
            p.ml[((i64)b * MR + r) * 2] = mrow[r];
            p.ml[((i64)b * MR + r) * 2 + 1] = lrow[r];
        }
    }
    grid_sync(p.bar, 2);

    // 3. merge: this block's share of its head's latent values, in pairs.
    // Thread s < S loads split s's (max, sum) and the block reduces them to
    // the splits' weights; thread t sums pair t % 64 over the splits t / 64,
    // t / 64 + 4, ..., and the four groups are added in shared memory. A
    // thread issues the loads of its first NL splits (all of them on GPUs
    // of up to 4·NL SMs) at once, before the weights' reductions: one L2
    // round trip after the barrier, where eight loads in flight at a time,
    // after the reductions, took one per eight splits more (youtu at 4096
    // positions: 624.5 -> 635.1 tok/s). A pass takes 128 values, so that
    // glm's shares of 73-86 (20 heads on 132 blocks) take one round trip,
    // where passes of 64 single values took two (glm at 4096 positions
    // 303.4 -> 308.9 tok/s). (A quad a thread measured slower: threads
    // summing a quad's groups in series, or a quad's groups in adjacent
    // lanes, each load then touching 16 splits' lines.)
    const int h = vsh.h;
    {
        static_assert(ATT_WARPS * 32 == 256, "the merge's four groups of 64 threads");
        constexpr int NL = 33;
        float2* part4 = (float2*)tmp;  // [4][64]
        const Share e = head_share(b, G, H, KV_LORA / 2);  // in pairs (e.h is h)
        const int j0 = 2 * e.i0, j1 = 2 * e.i1, t = threadIdx.x, grp = t >> 6;
        const float ms = t < S ? __ldcg(p.ml + ((i64)t * MR + h) * 2) : -INFINITY;
        const float ls = t < S ? __ldcg(p.ml + ((i64)t * MR + h) * 2 + 1) : 0.f;
        for (int c = j0; c < j1; c += 128) {
            const int j = c + 2 * (t & 63);
            const float2* col = (const float2*)(p.part + (i64)h * KV_LORA + j);  // split s's pair at col[s·MR·KV_LORA/2]
            constexpr i64 SPLIT = (i64)MR * KV_LORA / 2;
            float2 v[NL];
#pragma unroll
            for (int u = 0; u < NL; u++) {
                const int s = grp + 4 * u;
                v[u] = j < j1 && s < S ? __ldcg(col + s * SPLIT) : make_float2(0.f, 0.f);
            }
            if (c == j0) {
                const float M = block_max(ms, red);
                const float f = ms == -INFINITY ? 0.f : expf(ms - M);
                const float L = block_sum(ls * f, red);
                if (t < S) ws[t] = f / L;
                __syncthreads();
            }
            float2 acc = make_float2(0.f, 0.f);
            if (j < j1) {
#pragma unroll
                for (int u = 0; u < NL; u++)
                    if (grp + 4 * u < S) {
                        const float w = ws[grp + 4 * u];
                        acc.x += v[u].x * w, acc.y += v[u].y * w;
                    }
#pragma unroll 8
                for (int s = grp + 4 * NL; s < S; s += 4) {
                    const float2 x = __ldcg(col + s * SPLIT);
                    acc.x += x.x * ws[s], acc.y += x.y * ws[s];
                }
            }
            part4[t] = acc;
            __syncthreads();
            if (t < 64 && j < j1) {
                const float2 g0 = part4[t], g1 = part4[64 + t], g2 = part4[128 + t], g3 = part4[192 + t];
                *(float2*)(p.olat + (i64)h * KV_LORA + j) = make_float2((g0.x + g1.x) + (g2.x + g3.x), (g0.y + g1.y) + (g2.y + g3.y));
            }
            __syncthreads();
        }
    }
    // phase 4 reads only its head's merged latent, which the head's own
    // blocks wrote: they meet at the head's count, not the whole grid's
    // (youtu at 4096 positions 635.1 -> 638.2 tok/s)
    group_sync(p.bar + 2 + h, vsh.blocks);

    // 4. o = v_b·latent, this block's rows of its head (the latent read
    // after the barrier's acquire, which left no stale line in L1)
    mla_rows<TV>(vbw, p.vbRow, nv, nbv, p.olat + (i64)h * KV_LORA, KV_LORA, p.out + (i64)h * vdim + v0, sq, sd, sa, red);
    // the last block out resets the counts for the next launch
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(p.bar + 1, 1u) == (unsigned)G - 1) {
            __threadfence();  // after every block's exit (the count's value), before the resets
            p.bar[0] = 0;
            p.bar[1] = 0;
            for (int i = 0; i < H; i++) p.bar[2 + i] = 0;
        }
    }
}

#endif

// (The Go side launches it on sm_80 and later only, whose mma, ldmatrix and
// cp.async it uses; the kernels exist for every architecture, empty before.)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define MLA_BODY(TK, TV, MT) mla_decode_impl<TK, TV, MT>(p);
#else
#define MLA_BODY(TK, TV, MT)
#endif
#if CACHE_HALF && KV_LORA % 128 == 0 && CACHE_W % 32 == 0
#define MLA_DECODE(TK, TV, NAME) MLA_DECODE_MT(TK, TV, NAME, UNIT_MLA)
#define MLA_DECODE_MT(TK, TV, NAME, MT) MLA_DECODE_MT_(TK, TV, NAME, MT)
#define MLA_DECODE_MT_(TK, TV, NAME, MT) \
    extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32, 1) mla_decode##MT##NAME(MD p) { MLA_BODY(TK, TV, MT) }
#else
#define MLA_DECODE(TK, TV, NAME)
#endif
#define MLA_DECODE_T_Q4_0 MLA_DECODE(T_Q4_0, T_Q4_0, _T_Q4_0_T_Q4_0)
#define MLA_DECODE_T_Q8_0 MLA_DECODE(T_Q8_0, T_Q8_0, _T_Q8_0_T_Q8_0)
#define MLA_DECODE_T_Q4_K
#define MLA_DECODE_T_Q5_K
#define MLA_DECODE_T_Q6_K
#define MLA_DECODE_IF(TY) MLA_DECODE_##TY
#if UNIT_MLA
FAST_TYPES(MLA_DECODE_IF)
#endif

// MoE routing: each token's router logits, scores, top-k experts and
// their weights (route_token), as one kernel after a router product
// (moe_route) or with the product and its norm in one launch (moe_router,
// moe_router8). A unit of its own (exec.go's units), compiled beside the
// others: moe_router8 alone took the plain unit's compile from about 1.5
// to 2.3 s (NVRTC 12.4 on the development VM).

// route_token scores one token's experts (softmax or sigmoid of the router
// logits z), picks the top `used` by score + bias (the first on ties, as a
// stable sort does) and writes their ids and weights. One warp; p and taken
// are shared arrays of E and 2E entries. Not inlined: its three callers
// would each compile their own copy of its double-precision exp (about 0.2
// of the unit's 1.3 s).
__device__ __noinline__ void route_token(int* ids, float* wts, const float* z, const float* bias, int E, int used, int sigm, int norm,
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
    // selection scores once (the bias read from memory once, not per pick)
    float* sel = (float*)taken + E;
    for (int e = lane; e < E; e += 32) {
        taken[e] = 0;
        sel[e] = bias ? p[e] + bias[e] : p[e];
    }
    __syncwarp();
    for (int k = 0; k < used; k++) {
        float best = -INFINITY;
        int at = 1 << 30;
        for (int e = lane; e < E; e += 32) {
            if (taken[e]) continue;
            const float v = sel[e];
            if (v > best || (v == best && e < at)) { best = v; at = e; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float b2 = __shfl_xor_sync(0xffffffffu, best, o);
            int a2 = __shfl_xor_sync(0xffffffffu, at, o);
            if (b2 > best || (b2 == best && a2 < at)) { best = b2; at = a2; }
        }
        if (at >= E)  // every score left NaN: the first expert not taken, not an out-of-bounds id
            for (int e = 0; e < E; e++)
                if (!taken[e]) { at = e; break; }
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
    __shared__ int taken[2048];  // picked flags, then selection scores (route_token)
    const int t = blockIdx.x;
    route_token(ids + t * used, wts + t * used, logits + (i64)t * E, bias, E, used, sigm, norm, wscale, p, taken);
}

// normed_piece is 16-byte piece i of the router's input: x normalised
// (x·scale·nw, the norm's scale taken by the caller) where nw is set, else
// x; piece_dot its dot with piece a of a router row. Both router kernels
// sum every logit from these, so that they give the same bits.
__device__ __forceinline__ float4 normed_piece(const float* x, const float* nw, float scale, int i) {
    float4 v = ((const float4*)x)[i];
    if (nw) {
        const float4 g = ((const float4*)nw)[i];
        v.x = (v.x * scale) * g.x, v.y = (v.y * scale) * g.y, v.z = (v.z * scale) * g.z, v.w = (v.w * scale) * g.w;
    }
    return v;
}
__device__ __forceinline__ float piece_dot(float4 a, float4 v) { return a.x * v.x + a.y * v.y + a.z * v.z + a.w * v.w; }

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
    __shared__ int taken[2048];  // picked flags, then selection scores (route_token)
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
    const float scale = norm_scale(x, K, nw, eps, red);
    auto dot = [&](float4 a, int i) { return piece_dot(a, normed_piece(x, nw, scale, i)); };
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

// moe_router8 is moe_router for at most ROUTER_CLUSTER·ROUTER8_E experts,
// E a multiple of ROUTER_CLUSTER, rows of K ≤ 2048 (two 16-byte pieces a
// thread): token blockIdx.x's experts go to a thread block cluster of
// ROUTER_CLUSTER (both from the Go side, fixedDefines), block c (its rank)
// taking E/ROUTER_CLUSTER of them, whose pieces each thread holds in
// registers, loaded before the wait. The logits meet in block 0's shared memory through the cluster
// (distributed shared memory), where moe_router's last block found them
// after a fence, a global counter and a round trip to L2; block 0 then
// routes. Each logit is summed as moe_router sums it (a thread's pieces in
// order, then block_sum's tree), so the picks are the same bits.
extern "C" __global__ void __launch_bounds__(256) moe_router8(int* ids, float* wts, const float* h, i64 hs, const float* nw,
                                                              float eps, const float* router, const float* bias, int K, int E, int used,
                                                              int sigm, int norm, float wscale) {
#if __CUDA_ARCH__ >= 900
    __shared__ float red[32];
    __shared__ float wsum[ROUTER8_E][32];  // [expert][warp]: block_sum's first stage
    __shared__ float lg[ROUTER8_E];        // this block's logits
    __shared__ float z[ROUTER_CLUSTER * ROUTER8_E];  // block 0: every expert's
    __shared__ float p[ROUTER_CLUSTER * ROUTER8_E];
    __shared__ int taken[2 * ROUTER_CLUSTER * ROUTER8_E];  // picked flags, then selection scores (route_token)
    const int t = blockIdx.x, c = blockIdx.y, epb = E / ROUTER_CLUSTER, n4 = K / 4;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    float4 rv[ROUTER8_E][2];
#pragma unroll
    for (int e = 0; e < ROUTER8_E; e++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int i = threadIdx.x + j * blockDim.x;
            rv[e][j] = e < epb && i < n4 ? ((const float4*)(router + (i64)(c * epb + e) * K))[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    pdl_entry();
    const float* x = h + t * hs;
    const float scale = norm_scale(x, K, nw, eps, red);
    float acc[ROUTER8_E];
#pragma unroll
    for (int e = 0; e < ROUTER8_E; e++) acc[e] = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < n4) {
            const float4 v = normed_piece(x, nw, scale, i);
#pragma unroll
            for (int e = 0; e < ROUTER8_E; e++)
                if (e < epb) acc[e] += piece_dot(rv[e][j], v);
        }
    }
    // block_sum for every expert at once: each warp's butterflies, then
    // warp e adds expert e's warp sums
#pragma unroll
    for (int e = 0; e < ROUTER8_E; e++) {
        const float s = warp_sum(acc[e]);
        if (lane == 0) wsum[e][w] = s;
    }
    __syncthreads();
    if (w < epb) {
        const float s = warp_sum(lane < nwarps ? wsum[w][lane] : 0.f);
        if (lane == 0) lg[w] = s;
    }
    cluster_arrive();
    cluster_wait();
    if (c == 0) {
        for (int i = threadIdx.x; i < E; i += blockDim.x) z[i] = *cluster_peer(lg + i % epb, i / epb);
        __syncthreads();
    }
    cluster_arrive();  // block 0 reads no peer's memory any more
    if (c == 0 && threadIdx.x < 32) route_token(ids + t * used, wts + t * used, z, bias, E, used, sigm, norm, wscale, p, taken);
    cluster_wait();
#endif
}


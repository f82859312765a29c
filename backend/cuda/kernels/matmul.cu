// Matrix products with quantized weights read in their file encoding, one
// instance per weight type the model uses without an integer-dot kernel
// (SLOW_TYPES). The activations come pre-rounded by prep, so these multiply
// floats by decoded weights.

// MV describes y (+)= x · Wᵀ for one or many problems (blockIdx.y or .z):
// problem py uses weight rows from (ids ? ids[py] : py)·wY, input rows from
// x + (py / xDiv)·xY and output y + py·yY; within a problem, T tokens with
// row strides xs and ys. All fields are 8 bytes, as the Go side packs them.
struct MV {
    const u8* w;
    i64 rowBytes, K, N;
    const float* x;
    i64 xs, xY, xDiv;
    float* y;
    i64 ys, yY;
    i64 T, acc;
    const int* ids;
    i64 wY;
};

// gemv: one warp per output row, lanes across the row; up to 4 tokens per
// pass over the row. The generic path for small batches.
template <int TY> __device__ __forceinline__ void gemv_impl(const MV& p) {
    const int lane = threadIdx.x & 31;
    const i64 o = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (o >= p.N) return;
    const int py = blockIdx.y;
    const i64 wrow = (p.ids ? (i64)p.ids[py] : (i64)py) * p.wY + o;
    const u8* row = p.w + wrow * p.rowBytes;
    const float* x = p.x + (py / p.xDiv) * p.xY;
    float* y = p.y + py * p.yY;
    for (int t0 = 0; t0 < p.T; t0 += 4) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (i64 i = lane; i < p.K; i += 32) {
            float wv = deq<TY>(row, i, p.K);
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (t0 + u < p.T) acc[u] += wv * x[(t0 + u) * p.xs + i];
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            float v = warp_sum(acc[u]);
            if (lane == 0 && t0 + u < p.T) {
                float* d = y + (t0 + u) * p.ys + o;
                *d = p.acc ? *d + v : v;
            }
        }
    }
}

// gemm: 64 outputs × 64 tokens per block through shared-memory tiles of 32
// along the row; each thread owns a 4 × 4 patch. Prefill's path.
template <int TY> __device__ __forceinline__ void gemm_impl(const MV& p) {
    __shared__ float Ws[32][65];
    __shared__ float Xs[32][65];
    const int py = blockIdx.z;
    const i64 wrow0 = (p.ids ? (i64)p.ids[py] : (i64)py) * p.wY;
    const float* x = p.x + (py / p.xDiv) * p.xY;
    float* y = p.y + py * p.yY;
    const i64 o0 = (i64)blockIdx.x * 64;
    const int t0 = blockIdx.y * 64;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
    for (i64 k0 = 0; k0 < p.K; k0 += 32) {
        for (int e = threadIdx.x; e < 64 * 32; e += blockDim.x) {
            int r = e >> 5, kk = e & 31;
            i64 o = o0 + r, k = k0 + kk;
            Ws[kk][r] = (o < p.N && k < p.K) ? deq<TY>(p.w + (wrow0 + o) * p.rowBytes, k, p.K) : 0.f;
            int t = t0 + r;
            Xs[kk][r] = (t < p.T && k < p.K) ? x[t * p.xs + k] : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < 32; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = Ws[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; j++) b[j] = Xs[kk][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        i64 o = o0 + ty * 4 + i;
        if (o >= p.N) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int t = t0 + tx * 4 + j;
            if (t >= p.T) continue;
            float* d = y + t * p.ys + o;
            *d = p.acc ? *d + acc[i][j] : acc[i][j];
        }
    }
}

// embed: dst[t] = row tokens[t] of the table, decoded.
template <int TY> __device__ __forceinline__ void embed_impl(float* dst, i64 ds, const u8* table, i64 rowBytes, int dim, const int* tokens) {
    const u8* row = table + (i64)tokens[blockIdx.x] * rowBytes;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) dst[blockIdx.x * ds + j] = deq<TY>(row, j, dim);
}

// The products for the types without integer-dot kernels (SLOW_TYPES: the
// fast ones always take mmv1, mmvk1 or mmvq8), the embedding lookup for
// every type the model has.
#define PRODUCTS(TY)                                                                                         \
    extern "C" __global__ void __launch_bounds__(256) gemv_##TY(MV p) { pdl_entry(); gemv_impl<TY>(p); }                  \
    extern "C" __global__ void __launch_bounds__(256) gemm_##TY(MV p) { pdl_entry(); gemm_impl<TY>(p); }
#define EMBED(TY)                                                                                            \
    extern "C" __global__ void embed_##TY(float* dst, i64 ds, const u8* table, i64 rowBytes, int dim, const int* tokens) { pdl_entry(); \
        embed_impl<TY>(dst, ds, table, rowBytes, dim, tokens);                                               \
    }

SLOW_TYPES(PRODUCTS)
WEIGHT_TYPES(EMBED)

// Shared definitions for every latent kernel module: integer types, half
// conversions through PTX (NVRTC then needs no toolkit headers), warp
// reductions, and per-element decoding of every GGUF weight type.
// The Go side prepends shape constants (#define) and the list of weight
// types this model uses (WEIGHT_TYPES).

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q2_K 10
#define T_Q3_K 11
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_IQ4_NL 20
#define T_IQ4_XS 23
#define T_BF16 30
#define T_MXFP4 39

// Every kernel may be launched programmatically (PDL: it starts while the
// kernel before it finishes): pdl_entry waits for that kernel's results, then
// lets the next kernel launch, so a launch's latency hides behind the kernel
// before it. Every kernel calls it before it reads anything the kernel
// before may have written (mmv1 and attn_decode load constants first). The
// wait comes before the trigger in every kernel, so a kernel that starts
// finds complete whatever the kernels before the one before it wrote: the
// MoE down launch reads its expert ids early on that (mmvq.cu, idsEarly).
__device__ __forceinline__ void pdl_entry() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

#if __CUDA_ARCH__ >= 900
// A thread block cluster's barrier (every thread of every block arrives;
// wait returns once all have, the shared-memory writes each made before
// arriving visible: not those after), and a peer block's copy of a shared
// variable (distributed shared memory).
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
template <class T> __device__ __forceinline__ T* cluster_peer(T* p, int rank) {
    unsigned long long r;
    asm("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(p), "r"(rank));
    return (T*)r;
}
#endif

__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float round_f16(float f) { return h2f(f2h(f)); }
__device__ __forceinline__ float round_bf16(float f) {
    u32 b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((b >> 16) | 0x40u) << 16);
    u32 r = (u32)(((unsigned long long)b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    return __uint_as_float(r << 16);
}

__device__ __forceinline__ u32 rd16(const u8* p) { return (u32)p[0] | ((u32)p[1] << 8); }
__device__ __forceinline__ u32 rd32(const u8* p) { return rd16(p) | (rd16(p + 2) << 16); }

// The reductions' operations, for warp_reduce and block_reduce.
struct OpSum {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct OpMax {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// warp_reduce combines v over the warp's 32 lanes (a butterfly: every lane
// gets the result).
template <class Op> __device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, OpSum{}); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, OpMax{}); }

// block_reduce combines v over the whole block (blockDim.x a multiple of
// 32, at most 1024), id being op's identity; every thread gets the result.
// sh holds 32 floats.
template <class Op> __device__ __forceinline__ float block_reduce(float v, float* sh, Op op, float id) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_reduce(v, op);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : id;
    return warp_reduce(v, op);
}
__device__ __forceinline__ float block_sum(float v, float* sh) { return block_reduce(v, sh, OpSum{}, 0.f); }
__device__ __forceinline__ float block_max(float v, float* sh) { return block_reduce(v, sh, OpMax{}, -INFINITY); }

// row_sumsq is Σ x² over a row of L values, summed the same way by every
// kernel that normalises (so a norm fused into a product gives bit for bit
// the values of the norm on its own): thread c sums the 32 values from 32c
// in order (c, c + blockDim.x, ...), then the block adds the threads' sums.
__device__ __forceinline__ float row_sumsq(const float* x, int L, float* sh) {
    float ss = 0.f;
    const int nc = L / 32;
    for (int c = threadIdx.x; c < nc; c += blockDim.x)
#pragma unroll
        for (int i = 0; i < 32; i++) ss += x[32 * c + i] * x[32 * c + i];
    if (threadIdx.x == 0)
        for (int i = nc * 32; i < L; i++) ss += x[i] * x[i];
    return block_sum(ss, sh);
}

// rms_scale is the RMS norm's factor 1/√(mean + eps) for Σ x² over L values.
__device__ __forceinline__ float rms_scale(float sumsq, int L, float eps) { return 1.f / sqrtf(sumsq / (float)L + eps); }

// norm_scale is row x's RMS norm factor (L values) where a norm weight nw
// is set, else 1. Every thread of the block calls it; sh holds 32 floats.
__device__ __forceinline__ float norm_scale(const float* x, int L, const float* nw, float eps, float* sh) {
    return nw ? rms_scale(row_sumsq(x, L, sh), L, eps) : 1.f;
}

// silu_mul is SwiGLU's silu(g) · u.
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + expf(-g)) * u; }

__constant__ i8 kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
__constant__ i8 kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

__device__ __forceinline__ float e8m0_half(u32 e) {
    return e < 2 ? __uint_as_float(0x00200000u << e) : __uint_as_float((e - 1) << 23);
}

// kscale returns scale and min is (0..7) of a Q4_K/Q5_K block's 12 bytes.
__device__ __forceinline__ void kscale(const u8* s, int is, int& sc, int& m) {
    if (is < 4) {
        sc = s[is] & 63;
        m = s[is + 4] & 63;
    } else {
        sc = (s[is + 4] & 15) | ((s[is - 4] >> 6) << 4);
        m = (s[is + 4] >> 4) | ((s[is] >> 6) << 4);
    }
}

// deq is weight i of a row that starts at row, in format TY. It is the
// reference decoding (ggml's, bit for bit: products are rounded before the
// min is subtracted); the fast kernels decode whole blocks instead.
template <int TY> __device__ __forceinline__ float deq(const u8* __restrict__ row, i64 i, i64 K);

template <> __device__ __forceinline__ float deq<T_F32>(const u8* row, i64 i, i64 K) { return ((const float*)row)[i]; }
template <> __device__ __forceinline__ float deq<T_F16>(const u8* row, i64 i, i64 K) { return h2f(((const u16*)row)[i]); }
template <> __device__ __forceinline__ float deq<T_BF16>(const u8* row, i64 i, i64 K) {
    return __uint_as_float((u32)((const u16*)row)[i] << 16);
}
template <> __device__ __forceinline__ float deq<T_Q4_0>(const u8* row, i64 i, i64 K) {
    // repacked at upload: 16 quant bytes per block, then the f16 scales
    const u8* q = row + (i >> 5) * 16;
    int j = i & 31;
    int v = j < 16 ? (q[j] & 15) : (q[j - 16] >> 4);
    return h2f(((const u16*)(row + 16 * (K >> 5)))[i >> 5]) * (float)(v - 8);
}
template <> __device__ __forceinline__ float deq<T_Q4_1>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 5) * 20;
    int j = i & 31;
    int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
    return __fadd_rn(__fmul_rn(h2f(rd16(b)), (float)q), h2f(rd16(b + 2)));
}
template <> __device__ __forceinline__ float deq<T_Q5_0>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 5) * 22;
    int j = i & 31;
    u32 qh = rd32(b + 2);
    int q = (j < 16 ? (b[6 + j] & 15) : (b[6 + j - 16] >> 4)) | (((qh >> j) & 1) << 4);
    return h2f(rd16(b)) * (float)(q - 16);
}
template <> __device__ __forceinline__ float deq<T_Q5_1>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 5) * 24;
    int j = i & 31;
    u32 qh = rd32(b + 4);
    int q = (j < 16 ? (b[8 + j] & 15) : (b[8 + j - 16] >> 4)) | (((qh >> j) & 1) << 4);
    return __fadd_rn(__fmul_rn(h2f(rd16(b)), (float)q), h2f(rd16(b + 2)));
}
template <> __device__ __forceinline__ float deq<T_Q8_0>(const u8* row, i64 i, i64 K) {
    // repacked at upload: 32 quant bytes per block, then the f16 scales
    return (float)(i8)row[i] * h2f(((const u16*)(row + 32 * (K >> 5)))[i >> 5]);
}
template <> __device__ __forceinline__ float deq<T_Q2_K>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 8) * 84;
    int r = i & 255, h = r >> 7, s = (r & 127) >> 5, g = (r & 31) >> 4, j = r & 15;
    int sc = b[8 * h + 2 * s + g];
    int q = (b[16 + 32 * h + 16 * g + j] >> (2 * s)) & 3;
    float dl = __fmul_rn(h2f(rd16(b + 80)), (float)(sc & 15));
    float ml = __fmul_rn(h2f(rd16(b + 82)), (float)(sc >> 4));
    return __fsub_rn(__fmul_rn(dl, (float)q), ml);
}
template <> __device__ __forceinline__ float deq<T_Q3_K>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 8) * 110;
    int r = i & 255, h = r >> 7, s = (r & 127) >> 5, g = (r & 31) >> 4, j = r & 15;
    int k = 8 * h + 2 * s + g;
    const u8* sb = b + 96;
    int lo = (sb[k % 8] >> (4 * (k / 8))) & 15;
    int hi = (sb[8 + k % 4] >> (2 * (k / 4))) & 3;
    float dl = h2f(rd16(b + 108)) * (float)((i8)(lo | (hi << 4)) - 32);
    int q = (b[32 + 32 * h + 16 * g + j] >> (2 * s)) & 3;
    int set = (b[16 * g + j] >> (4 * h + s)) & 1;
    return dl * (float)(q - (set ? 0 : 4));
}
// kdeq is value q of sub-block is of a Q4_K or Q5_K block b: d·scale·q −
// dmin·min, rounded as ggml does.
__device__ __forceinline__ float kdeq(const u8* b, int is, int q) {
    int sc, m;
    kscale(b + 4, is, sc, m);
    float ds = __fmul_rn(h2f(rd16(b)), (float)sc), dm = __fmul_rn(h2f(rd16(b + 2)), (float)m);
    return __fsub_rn(__fmul_rn(ds, (float)q), dm);
}
template <> __device__ __forceinline__ float deq<T_Q4_K>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 8) * 144;
    int r = i & 255, c = r >> 6, sub = (r >> 5) & 1, j = r & 31;
    int v = b[16 + 32 * c + j];
    return kdeq(b, 2 * c + sub, sub ? (v >> 4) : (v & 15));
}
template <> __device__ __forceinline__ float deq<T_Q5_K>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 8) * 176;
    int r = i & 255, c = r >> 6, sub = (r >> 5) & 1, j = r & 31;
    int v = b[48 + 32 * c + j];
    int hb = (b[16 + j] >> (2 * c + sub)) & 1;
    return kdeq(b, 2 * c + sub, (sub ? (v >> 4) : (v & 15)) | (hb << 4));
}
// Q6K_SLOT (defined by the Go side, exec.go's fixedDefines) is the bytes a
// Q6_K block takes on the device: 210 padded to a multiple of 16 at upload
// (cuda.go's repack), for 16-byte loads.
template <> __device__ __forceinline__ float deq<T_Q6_K>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 8) * Q6K_SLOT;
    int r = i & 255, h = r >> 7, rr = r & 127;
    int l = b[64 * h + (rr & 63)];
    int t = b[128 + 32 * h + (rr & 31)];
    int s = rr >> 5;
    int q = (rr >= 64 ? (l >> 4) : (l & 15)) | (((t >> (2 * s)) & 3) << 4);
    float dl = h2f(rd16(b + 208)) * (float)(i8)b[192 + 8 * h + (rr >> 4)];
    return dl * (float)(q - 32);
}
template <> __device__ __forceinline__ float deq<T_IQ4_NL>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 5) * 18;
    int j = i & 31;
    int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
    return h2f(rd16(b)) * (float)kvalues_iq4nl[q];
}
template <> __device__ __forceinline__ float deq<T_IQ4_XS>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 8) * 136;
    int r = i & 255, s = r >> 5, j = r & 31;
    int lo = (b[4 + s / 2] >> (4 * (s % 2))) & 15;
    int hi = (rd16(b + 2) >> (2 * s)) & 3;
    float dl = h2f(rd16(b)) * (float)((i8)(lo | (hi << 4)) - 32);
    int q = j < 16 ? (b[8 + 16 * s + j] & 15) : (b[8 + 16 * s + j - 16] >> 4);
    return dl * (float)kvalues_iq4nl[q];
}
template <> __device__ __forceinline__ float deq<T_MXFP4>(const u8* row, i64 i, i64 K) {
    const u8* b = row + (i >> 5) * 17;
    int j = i & 31;
    int q = j < 16 ? (b[1 + j] & 15) : (b[1 + j - 16] >> 4);
    return e8m0_half(b[0]) * (float)kvalues_mxfp4[q];
}

// The latent cache holds f16 (CACHE_HALF) or float32 values.
#if CACHE_HALF
typedef u16 cache_t;
__device__ __forceinline__ float cload(cache_t v) { return h2f(v); }
__device__ __forceinline__ cache_t cstore(float v) { return f2h(v); }
#else
typedef float cache_t;
__device__ __forceinline__ float cload(cache_t v) { return v; }
__device__ __forceinline__ cache_t cstore(float v) { return v; }
#endif

// rope_pair rotates the pair (a, b) by the angle pos·freq, computed in
// double as the CPU backend does. Rotation is the angle's sine and cosine
// (rope_angle) applied (rotate): a kernel that knows the position before
// its input is ready takes the sines then, off its critical path.
struct Rotation {
    double s, c;
};
__device__ __forceinline__ Rotation rope_angle(int pos, float freq) {
    Rotation r;
    sincos((double)pos * (double)freq, &r.s, &r.c);
    return r;
}
__device__ __forceinline__ void rotate(float& a, float& b, Rotation r) {
    const double da = a, db = b;
    a = (float)(da * r.c - db * r.s);
    b = (float)(da * r.s + db * r.c);
}
__device__ __forceinline__ void rope_pair(float& a, float& b, int pos, float freq) { rotate(a, b, rope_angle(pos, freq)); }

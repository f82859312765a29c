// Integer dot products on 8-bit activation blocks, shared by the products
// (mmvq.cu) and the attention kernels that apply k_b and v_b themselves
// (attention.cu): dp4a, cp.async, weight loads past L1, the lanes a row
// takes (lanes_for), one row's rounding to Q8_0 blocks, and Q4_0/Q8_0
// blocks' dot products.

__device__ __forceinline__ int dp4a(int a, int b, int c) {
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// lanes_for is the lanes a row of nb blocks takes: nb rounded up to a
// power of two, at most 32 (each lane whole blocks, no lane idle when a row
// is narrow).
__device__ __forceinline__ int lanes_for(int nb) {
    int lpr = 1;
    while (lpr < nb && lpr < 32) lpr <<= 1;
    return lpr;
}

// cp.async (sm_80 and later): 16 bytes from global to shared memory
// without passing through registers (ok false: zeros instead); a commit
// closes a group, a wait leaves at most N groups in flight.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
    const u32 d = (u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

__device__ __forceinline__ int4 ldw4(const void* p) {
    int4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ u32 ldw2(const void* p) {
    u16 h;
    asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(h) : "l"(p));
    return h;
}

// round_row_q8 is quant_row's mode 3 for one block of 256 threads with the
// sums of each 32-value block's quants added (ar): the same values, bit for
// bit, in fewer registers (one chunk per thread held, later ones re-read).
__device__ __forceinline__ void round_row_q8(const float* x, int L, const float* nw, float eps, i8* qr, float* dr, int* ar, float* red) {
    const int nc = L / 32;
    const bool vec = (((unsigned long long)x | (unsigned long long)(nw ? nw : x)) & 15) == 0;
    auto load = [&](const float* src, int c, float* v) {
        if (vec) {
            const float4* p = (const float4*)(src + 32 * c);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float4 f = p[k];
                v[4 * k] = f.x; v[4 * k + 1] = f.y; v[4 * k + 2] = f.z; v[4 * k + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++) v[i] = src[32 * c + i];
        }
    };
    float v[32];
    float ss = 0.f;
    const int c0 = threadIdx.x;
    if (c0 < nc) {
        load(x, c0, v);
#pragma unroll
        for (int i = 0; i < 32; i++) ss += v[i] * v[i];
    }
    for (int c = c0 + blockDim.x; c < nc; c += blockDim.x) {  // rows past 256 chunks (K > 8192)
        float u[32];
        load(x, c, u);
#pragma unroll
        for (int i = 0; i < 32; i++) ss += u[i] * u[i];
    }
    float scale = 1.f;
    if (nw) {
        float mean = block_sum(ss, red) / (float)L;
        scale = 1.f / sqrtf(mean + eps);
    }
    for (int c = c0; c < nc; c += blockDim.x) {
        if (c != c0) load(x, c, v);
        if (nw) {
            if (vec) {
                const float4* gp = (const float4*)(nw + 32 * c);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float4 g = gp[k];
                    v[4 * k] = (v[4 * k] * scale) * g.x;
                    v[4 * k + 1] = (v[4 * k + 1] * scale) * g.y;
                    v[4 * k + 2] = (v[4 * k + 2] * scale) * g.z;
                    v[4 * k + 3] = (v[4 * k + 3] * scale) * g.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++) v[i] = (v[i] * scale) * nw[32 * c + i];
            }
        }
        float amax = 0.f;
#pragma unroll
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[i]));
        const float dh = round_f16(amax / 127.f);
        const float id = amax != 0.f ? 127.f / amax : 0.f;
        int qs[8], sum = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int w = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int q = (int)rintf(v[4 * k + j] * id);
                sum += q;
                w |= (q & 255) << (8 * j);
            }
            qs[k] = w;
        }
        ((int4*)(qr + 32 * c))[0] = make_int4(qs[0], qs[1], qs[2], qs[3]);
        ((int4*)(qr + 32 * c))[1] = make_int4(qs[4], qs[5], qs[6], qs[7]);
        dr[c] = dh;
        ar[c] = sum;
    }
}

// Per type: W 16-byte loads per 32-value block, and a block's value from
// its integer dot product (the products' scaling as QT's dot scales them).
template <int TY> struct Q1;
template <> struct Q1<T_Q4_0> {
    static constexpr int W = 1, STRIDE = 16;
    __device__ static float val(const int4* q, const int4& a0, const int4& a1, int as, float dw, float da) {
        int s = 0;
        s = dp4a(q[0].x & 0x0F0F0F0F, a0.x, s);
        s = dp4a(q[0].y & 0x0F0F0F0F, a0.y, s);
        s = dp4a(q[0].z & 0x0F0F0F0F, a0.z, s);
        s = dp4a(q[0].w & 0x0F0F0F0F, a0.w, s);
        s = dp4a((q[0].x >> 4) & 0x0F0F0F0F, a1.x, s);
        s = dp4a((q[0].y >> 4) & 0x0F0F0F0F, a1.y, s);
        s = dp4a((q[0].z >> 4) & 0x0F0F0F0F, a1.z, s);
        s = dp4a((q[0].w >> 4) & 0x0F0F0F0F, a1.w, s);
        return (float)(s - 8 * as) * dw * da;
    }
};
template <> struct Q1<T_Q8_0> {
    static constexpr int W = 2, STRIDE = 32;
    __device__ static float val(const int4* q, const int4& a0, const int4& a1, int as, float dw, float da) {
        int s = 0;
        s = dp4a(q[0].x, a0.x, s);
        s = dp4a(q[0].y, a0.y, s);
        s = dp4a(q[0].z, a0.z, s);
        s = dp4a(q[0].w, a0.w, s);
        s = dp4a(q[1].x, a1.x, s);
        s = dp4a(q[1].y, a1.y, s);
        s = dp4a(q[1].z, a1.z, s);
        s = dp4a(q[1].w, a1.w, s);
        return (float)s * (dw * da);
    }
};


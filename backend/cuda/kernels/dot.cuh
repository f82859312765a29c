// Integer dot products on 8-bit activation blocks, shared by the products
// (mmvq.cu) and the attention kernels that apply k_b and v_b themselves
// (attention.cu): dp4a, cp.async, weight loads past L1, the lanes a row
// takes (lanes_log2), one row's rounding to Q8_0 blocks, and Q4_0/Q8_0
// blocks' dot products.

__device__ __forceinline__ int dp4a(int a, int b, int c) {
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// ilog2 is log2 of a power of two known at compile time.
__host__ __device__ constexpr int ilog2(int n) { return n > 1 ? 1 + ilog2(n / 2) : 0; }

// The lanes a row of nb blocks takes are nb rounded up to a power of two, at
// most 32 (each lane whole blocks, no lane idle when a row is narrow);
// lanes_log2 is their log2, so that rows and steps divide as shifts: the
// one-token kernels do this arithmetic on the step's critical path, where
// ncu found the integer division routines.
__device__ __forceinline__ int lanes_log2(int nb) { return nb > 1 ? min(5, 32 - __clz(nb - 1)) : 0; }

// cp.async (sm_80 and later): 16 bytes from global to shared memory
// without passing through registers (ok false: zeros instead); a commit
// closes a group, a wait leaves at most N groups in flight.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
    const u32 d = (u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
// cp_async_floats copies n floats (a multiple of 4, both ends 16-byte
// aligned) with the block's threads, 16 bytes each in turn.
__device__ __forceinline__ void cp_async_floats(float* dst, const float* src, int n) {
    for (int i = threadIdx.x; i < n / 4; i += blockDim.x) cp_async16(dst + 4 * i, src + 4 * i, true);
}

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

// round_row_q8 is quant_row's mode 3 for one block (blockDim.x a multiple of
// 32) with the sums of each 32-value block's quants added (ar): the same
// values, bit for bit. The norm's sum of squares keeps the order of every
// normalising kernel (thread c sums block c's squares in order, then
// block_sum); the rounding, whose results do not depend on order (the
// largest magnitude, each value's quant, integer sums), takes eight threads
// a block, four values each: a block's serial chain is four values long,
// not 32, and a warp's loads cover 512 contiguous bytes.
//
// x is loaded for the rounding before the sum of squares starts, RP passes
// (of blockDim.x / 8 blocks) at a time: in decode every round trip for x
// after the kernel before ends is on the step's critical path, and a row
// took one a pass (K = 1408 two, 10944 eleven; an MoE down launch rounds
// its experts' rows in turn). deepseek-v2-lite decoded 457 -> 471 tok/s,
// youtu (K 2048 and 6144) the same; RP = 8 was slower than 4.
//
// round_blocks_q8 is its body over nc blocks wherever they lie: at(c) is
// block c's 32 values (vec: every block and nw 16-byte aligned), so the
// rows of several summands can be one row of blocks (mmv1_impl).
template <class At>
__device__ __forceinline__ void round_blocks_q8(At at, int nc, bool vec, const float* nw, float eps, i8* qr, float* dr, int* ar, float* red) {
    constexpr int RP = 4;
    const int j = threadIdx.x & 7, per = blockDim.x / 8;  // the thread's four values: word j of block c0 + u·per + threadIdx.x / 8
    float4 f[RP];
    auto fetch = [&](int c0) {
#pragma unroll
        for (int u = 0; u < RP; u++) {
            const int c = c0 + u * per + (int)(threadIdx.x >> 3);
            f[u] = vec && c < nc ? *(const float4*)(at(c) + 4 * j) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    };
    fetch(0);
    float scale = 1.f;
    if (nw) {
        float ss = 0.f;
        for (int c = threadIdx.x; c < nc; c += blockDim.x) {
            float v[32];
            if (vec) {
                const float4* p = (const float4*)at(c);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const float4 q = p[k];
                    v[4 * k] = q.x; v[4 * k + 1] = q.y; v[4 * k + 2] = q.z; v[4 * k + 3] = q.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++) v[i] = at(c)[i];
            }
#pragma unroll
            for (int i = 0; i < 32; i++) ss += v[i] * v[i];
        }
        scale = rms_scale(block_sum(ss, red), 32 * nc, eps);
    }
    for (int c0 = 0; c0 < nc; c0 += RP * per) {  // the same trip counts in every thread: all shuffle
        if (c0 > 0) fetch(c0);
#pragma unroll
        for (int u = 0; u < RP; u++) {
            if (c0 + u * per >= nc) break;
            const int c = c0 + u * per + (int)(threadIdx.x >> 3);
            const bool ok = c < nc;
            float v[4] = {0.f, 0.f, 0.f, 0.f};
            if (ok) {
                const int o = 32 * c + 4 * j;
                if (vec) {
                    v[0] = f[u].x, v[1] = f[u].y, v[2] = f[u].z, v[3] = f[u].w;
                    if (nw) {
                        const float4 g = *(const float4*)(nw + o);
                        v[0] = (v[0] * scale) * g.x;
                        v[1] = (v[1] * scale) * g.y;
                        v[2] = (v[2] * scale) * g.z;
                        v[3] = (v[3] * scale) * g.w;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 4; i++) v[i] = nw ? (at(c)[4 * j + i] * scale) * nw[o + i] : at(c)[4 * j + i];
                }
            }
            float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
            amax = fmaxf(amax, 0.f);  // as the one-thread scan from 0: a block of NaN has amax 0
#pragma unroll
            for (int m = 1; m < 8; m <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
            const float dh = round_f16(amax / 127.f);
            const float id = amax != 0.f ? 127.f / amax : 0.f;
            int w = 0, sum = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int q = (int)rintf(v[i] * id);
                sum += q;
                w |= (q & 255) << (8 * i);
            }
#pragma unroll
            for (int m = 1; m < 8; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
            if (ok) {
                ((int*)(qr + 32 * c))[j] = w;
                if (j == 0) {
                    dr[c] = dh;
                    ar[c] = sum;
                }
            }
        }
    }
}

__device__ __forceinline__ void round_row_q8(const float* x, int L, const float* nw, float eps, i8* qr, float* dr, int* ar, float* red) {
    const bool vec = (((unsigned long long)x | (unsigned long long)(nw ? nw : x)) & 15) == 0;
    round_blocks_q8([&](int c) { return x + 32 * c; }, L / 32, vec, nw, eps, qr, dr, ar, red);
}

// Per type: W 16-byte loads per 32-value block, and a block's value from
// its integer dot product (as, the activations' sum, for Q4_0's offset of
// 8). The eight-token products (QT's dot) take it from here too.
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


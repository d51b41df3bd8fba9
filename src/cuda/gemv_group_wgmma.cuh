/*
 * gemv_group_wgmma.cuh — the grouped GEMV tile on Hopper's warpgroup MMA (wgmma, sm_90a): the
 * default compute of the grouped one-shot (src/cuda/gemv_allreduce.cu, FCO_GEMV_GROUP) for
 * M 17..64 in bf16 / f16 on the vector path. One block of 256 threads (2 warpgroups) computes
 * the fp32 partial of kG consecutive 16-column tiles, out[tile][m][n] = Σ_k x[m][k] ·
 * W[n0 + 16·tile + n][k], over this rank's K, and leaves it in shared memory (group_out).
 *
 * Why: the mma.sync grouped tile (gemv_group_tile.cuh) was bound by its own instruction stream
 * (ldmatrix + HMMA + cp.async issued by the same 8 warps; ~30 µs of compute for 64×8192×8192 at
 * P = 1 on H200 before any load, run a17242a-diag). wgmma reads both operands from shared
 * memory through descriptors, asynchronously: one instruction per warpgroup and k16 step.
 *
 * Layout: slabs of 64 k (one 128-byte row per x or W row), both K-major in the 128-byte swizzle
 * (a 1024-byte atom = 8 rows; 16-byte chunk c of row r at c ^ (r & 7)), as gemm_tile_wgmma.cuh's
 * A and its [N][K] B. A stage = x [64 rows][64 k] (8 KB) + W [kG·16 rows][64 k] (kSub = 1, the
 * operator's; else kSub such slabs back to back, see GroupWgmma); kStages stages
 * (as many as fit ~200 KB, at most 12), 1024-byte aligned. x rows ≥ M and W rows ≥ N repeat the
 * last valid row (their outputs are never stored); k ≥ K is zero-filled (the vector path has
 * K % 8 == 0, so a 16-byte chunk is wholly in or out).
 * Warpgroup g computes all 64 rows × columns [g·kG·8, (g+1)·kG·8) of the group: m64n{8kG}k16,
 * A = x, B = its half of the W rows (K-major, no transpose). Pipeline as gemm_tile_wgmma.cuh's
 * WgmmaTile: per slab kt, wait for its copies, fence.proxy.async, barrier, issue 4 wgmma as one
 * group, wait until slab kt − 1 retired, barrier, copy slab kt + kStages − 1 into kt − 1's
 * stage (all 256 threads copy, cp.async 16 bytes each, per-thread pointers fixed per group).
 * Needs the vector path (x, W 16-byte aligned, K·esize % 16 == 0); the caller runs
 * gemv_group_tile.cuh's group_tile otherwise, which leaves the same group_out.
 */
#ifndef FCO_CUDA_GEMV_GROUP_WGMMA_CUH_
#define FCO_CUDA_GEMV_GROUP_WGMMA_CUH_

#include "bulk_copy.cuh"
#include "gemm_tile_wgmma.cuh"
#include "gemv_group_tile.cuh"

namespace fco {
namespace gemv {

/* d (the m64nNk16 fp32 fragment, N/2 registers) += A(desc) · B(desc), both K-major. */
template <typename T, int N>
struct WgmmaN;
#define FCO_GV_WG(TY, PT)                                                                    \
  template <>                                                                                \
  struct WgmmaN<TY, 32> {                                                                    \
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db) {        \
      asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32." PT "." PT                   \
                   " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},"   \
                   " %16, %17, 1, 1, 1, 0, 0;\n"                                             \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
                     "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),            \
                     "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])          \
                   : "l"(da), "l"(db));                                                      \
    }                                                                                        \
  };                                                                                         \
  template <>                                                                                \
  struct WgmmaN<TY, 64> {                                                                    \
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db) {        \
      asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." PT "." PT " {"              \
                   "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
                   "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "  \
                   "%30, %31}, %32, %33, 1, 1, 1, 0, 0;\n"                                   \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
                     "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),            \
                     "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),        \
                     "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),        \
                     "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),        \
                     "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),        \
                     "+f"(d[31])                                                             \
                   : "l"(da), "l"(db));                                                      \
    }                                                                                        \
  };                                                                                         \
  template <>                                                                                \
  struct WgmmaN<TY, 16> {                                                                    \
    __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db) {        \
      asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32." PT "." PT                   \
                   " {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 1, 1, 1, 0, 0;\n"             \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
                     "+f"(d[6]), "+f"(d[7])                                                  \
                   : "l"(da), "l"(db));                                                      \
    }                                                                                        \
  };
#if FCO_WGMMA_COMPILED
FCO_GV_WG(__nv_bfloat16, "bf16")
FCO_GV_WG(__half, "f16")
#else
template <typename TY>
struct WgmmaN<TY, 32> {
  __device__ static __forceinline__ void run(float*, uint64_t, uint64_t) {}
};
template <typename TY>
struct WgmmaN<TY, 16> {
  __device__ static __forceinline__ void run(float*, uint64_t, uint64_t) {}
};
template <typename TY>
struct WgmmaN<TY, 64> {
  __device__ static __forceinline__ void run(float*, uint64_t, uint64_t) {}
};
#endif
#undef FCO_GV_WG

/* kSub (session 22): 64-k slabs a ring stage, each laid out as one slab of kSub = 1 (x, then
 * W); a stage's copies ask for 128·kSub contiguous bytes of each W row at once, and the loop
 * waits and synchronises once per stage (gemv_group_probe's "lib k2" rows). */
template <int kG, int kSub = 1>
struct GroupWgmma {
  static constexpr int BN = kG * kTileN, BK = 64, kThreads = 256;
  static constexpr int kXBytes = 64 * 128, kWBytes = BN * 128;
  static constexpr int kSlabBytes = kXBytes + kWBytes;
  static constexpr int kStageBytes = kSub * kSlabBytes; /* a multiple of 1024 */
  static constexpr int kFit = (200 * 1024 - 1024) / kStageBytes;
  static constexpr int kStages = kFit > 12 ? 12 : kFit;
  static constexpr size_t kOutBytes = (size_t)kG * 64 * kTileN * 4;
  static constexpr size_t kPipeBytes = (size_t)kStages * kStageBytes + 1024;
  static constexpr size_t kSmemBytes = kPipeBytes > kOutBytes ? kPipeBytes : kOutBytes;
  static constexpr int kXChunks = 64 * 8 / kThreads, kWChunks = BN * 8 / kThreads;
  static_assert(kStageBytes % 1024 == 0 && kXChunks >= 1 && kWChunks >= 1, "stage layout");
  static_assert(kStages >= 3, "a ring of at least 3 stages (kSub too large for shared memory)");

  __device__ static __forceinline__ uint32_t sw128(int r, int ch) {
    return (uint32_t)(r * 128 + ((ch ^ (r & 7)) << 4));
  }

  /* All threads. out: [kG][64][16] fp32 at the start of smem when done (rows ≥ M hold
   * garbage). x, W, K, ld as group_tile; vector path only (ld·esize % 16 == 0 as well). */
  /* kProxyFence = false drops the fence.proxy.async of each slab (gemv_group_probe's timing
   * experiment "lib nofence": the fence is MEMBAR.ALL.CTA in SASS; the operator keeps it). */
  template <typename T, bool kProxyFence = true>
  __device__ static __forceinline__ void run(const T* __restrict__ w, const T* __restrict__ x,
                                             int M, int N, int64_t K, int64_t ld, int n0,
                                             unsigned char* smem) {
#if FCO_WGMMA_COMPILED
    const int tid = threadIdx.x, wg = tid >> 7;
    const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
    const int64_t num_k = (K + BK * kSub - 1) / (BK * kSub); /* stages */
    float d[BN / 4]; /* m64n(BN/2): BN/4 per thread */
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) d[i] = 0.f;
    /* Copies: thread (r = tid / 8, chunk ch = tid % 8) takes rows r + 32 i of x and of W. */
    const int r = tid >> 3, ch = tid & 7;
    const uint32_t off = sw128(r, ch);
    const T* xp[kXChunks];
    const T* wp[kWChunks];
#pragma unroll
    for (int i = 0; i < kXChunks; ++i) xp[i] = x + (int64_t)min(r + 32 * i, M - 1) * ld + ch * 8;
#pragma unroll
    for (int i = 0; i < kWChunks; ++i)
      wp[i] = w + (int64_t)min(n0 + r + 32 * i, N - 1) * ld + ch * 8;
    auto load = [&](uint32_t st0, int64_t k00) {
#pragma unroll
      for (int sb = 0; sb < kSub; ++sb) {
        const uint32_t st = st0 + sb * kSlabBytes;
        const int64_t k0 = k00 + sb * BK;
        const bool in = k0 + ch * 8 < K;
#pragma unroll
        for (int i = 0; i < kXChunks; ++i)
          cp_async16(st + off + i * (32 * 128), in ? xp[i] + k0 : x, in ? 16 : 0);
#pragma unroll
        for (int i = 0; i < kWChunks; ++i)
          cp_async16(st + kXBytes + off + i * (32 * 128), in ? wp[i] + k0 : w, in ? 16 : 0);
      }
    };
    __syncthreads(); /* the previous group's out (aliasing the pipeline) has been read */
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < num_k) load(pipe + s * kStageBytes, (int64_t)s * BK * kSub);
      cp_async_commit();
    }
    const uint32_t b_off = kXBytes + (uint32_t)wg * (BN / 2) * 128;
#pragma unroll 1
    for (int64_t kt = 0; kt < num_k; ++kt) {
      cp_async_wait<kStages - 2>();
      if (kProxyFence) fence_proxy_async_smem();
      __syncthreads();
      const uint32_t st = pipe + (uint32_t)(kt % kStages) * kStageBytes;
      tile::wgmma_fence();
#pragma unroll
      for (int sb = 0; sb < kSub; ++sb)
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          WgmmaN<T, BN / 2>::run(
              d, tile::wgmma_desc(st + sb * kSlabBytes + kk * 32, 16, 1024),
              tile::wgmma_desc(st + sb * kSlabBytes + b_off + kk * 32, 16, 1024));
      tile::wgmma_commit();
      tile::wgmma_wait<1>(); /* slab kt − 1 retired (this warpgroup) */
      __syncthreads();       /* (both): its stage is free */
      const int64_t nk = kt + kStages - 1;
      if (nk < num_k) load(pipe + (uint32_t)(nk % kStages) * kStageBytes, nk * BK * kSub);
      cp_async_commit();
    }
    tile::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) asm volatile("" : "+f"(d[i])::"memory");
    cp_async_wait<0>();
    __syncthreads(); /* every warpgroup is done with the pipeline: out reuses it */
    /* m64nNk16 fragment: d[4j + q] is row (warp % 4)·16 + lane/4 + 8·(q/2), column
     * 8j + 2·(lane % 4) + q % 2 of this warpgroup's BN/2 columns. */
    float* out = reinterpret_cast<float*>(smem);
    const int lane = tid & 31, row0 = ((tid >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < BN / 16; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int col = wg * (BN / 2) + 8 * j + 2 * (lane & 3) + (q & 1);
        const int row = row0 + 8 * (q >> 1);
        out[((col / kTileN) * 64 + row) * kTileN + col % kTileN] = d[4 * j + q];
      }
    __syncthreads();
#else
    __trap(); /* not built for sm_90a: the launcher must not pick this tile */
#endif
  }
};

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_GROUP_WGMMA_CUH_ */

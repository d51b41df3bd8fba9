/*
 * gemv_group_tma.cuh — the grouped GEMV tile fed by TMA from a producer warp (sm_90a): the
 * grouped one-shot's tile (src/cuda/gemv_allreduce.cu, FCO_GEMV_GROUP) for M 17..64 in bf16 /
 * f16 on the vector path with FCO_GEMV_GROUP_TMA. The same math and the same result as
 * gemv_group_wgmma.cuh's GroupWgmma (out [kG][64][16] fp32 at the start of smem): warpgroup g
 * runs wgmma m64n{8kG}k16 on its half of the group's kG·16 columns, A = x [64][64 k], B = W
 * [kG·16][64 k], both K-major in the 128-byte swizzle, from an S-stage ring of 64-k slabs.
 *
 * Why: GroupWgmma's 256 threads issue the ring's cp.async copies themselves (16 KB a slab with
 * per-thread swizzled addresses) and pass two block barriers per slab; ncu found that tile
 * issue-bound (run 0b0b1f7), and its time moved by 25 % with code that adds no memory traffic
 * (session 14). Here the block has a ninth warp whose one thread issues two TMA box loads a slab
 * (x {64 k, 64 rows}, W {64 k, kG·16 rows}); TMA writes the swizzle itself and zero-fills
 * outside the tensor (rows ≥ M or ≥ N, k ≥ K: no predicates, no addresses per thread). Per stage
 * a "full" mbarrier (the producer's arrive + the copies' bytes) and an "empty" one (one arrival
 * per consumer warp once its wgmma reading the stage retired): no block barrier in the slab
 * loop, the 8 consumer warps only wait, multiply and release. This is gemv_group_probe's "tmaws"
 * kernel (bench/probe/gemv_group_probe.cu) with the operator's group and split plan.
 *
 * Maps: x [M][K] and W [N][K] of each local rank (the row stride is this rank's K: the vector
 * path's K·esize % 16 == 0 is TMA's stride rule), encoded on the host at every call (encode())
 * and passed in a __grid_constant__ kernel parameter (GroupMaps). A split group's slice is a
 * range of whole slabs (slab0, num_k); k past K (the last slice's last slab) reads zeros.
 * Per call of run(): barriers initialised, the ring filled from empty, all copies consumed and
 * every wgmma retired before the out fragments are written (out aliases the ring; the barriers
 * lie past it), barriers invalidated: nothing carries over between groups. All kThreads = 288
 * threads of the block call run(); it begins and ends with a block barrier.
 */
#ifndef FCO_CUDA_GEMV_GROUP_TMA_CUH_
#define FCO_CUDA_GEMV_GROUP_TMA_CUH_

#include "gemm_tile_wgmma.cuh"
#include "gemv_group_wgmma.cuh"

namespace fco {
namespace gemv {

/* The kernel parameter with the tensor maps of the grid's local ranks (TMA reads a map from
 * param, const or global space); the kernels without TMA get the empty one. */
template <bool kTma>
struct GroupMaps {
  int unused;
};
template <>
struct GroupMaps<true> {
  CUtensorMap x[FCO_MAX_GPU_RANKS];
  CUtensorMap w[FCO_MAX_GPU_RANKS];
};

template <int kG>
struct GroupTma {
  static constexpr int BN = kG * kTileN, BK = 64;
  static constexpr int kConsumers = 256, kThreads = kConsumers + 32, kWarps = kThreads / 32;
  static constexpr int kXBytes = 64 * 128, kWBytes = BN * 128;
  static constexpr int kStageBytes = kXBytes + kWBytes; /* a multiple of 1024 */
  static constexpr int kFit = (200 * 1024 - 1024 - 256) / kStageBytes;
  static constexpr int kStages = kFit > 12 ? 12 : kFit;
  static constexpr int kBarOff = kStages * kStageBytes; /* from the 1024-aligned ring base */
  static constexpr size_t kOutBytes = (size_t)kG * 64 * kTileN * 4;
  static constexpr size_t kPipeBytes = 1024 + (size_t)kBarOff + 2 * kStages * 8;
  static constexpr size_t kSmemBytes = kPipeBytes > kOutBytes ? kPipeBytes : kOutBytes;
  static_assert(kStageBytes % 1024 == 0 && kStages >= 2, "stage layout");
  static_assert(kOutBytes <= (size_t)kBarOff, "out must not reach the barriers");

  /* Host: the maps of x [M][K] and W [N][K] (2-byte elements, rows K apart). Returns nullptr
   * on success, else what failed (the caller falls back to GroupWgmma). */
  static const char* encode(CUtensorMap* mx, CUtensorMap* mw, const void* x, int M,
                            const void* w, int N, int64_t K) {
    tile::TmaEncodeFn fn = tile::tma_encode_fn();
    if (!fn) return "cuTensorMapEncodeTiled not found";
    const CUtensorMapDataType dt = CU_TENSOR_MAP_DATA_TYPE_UINT16; /* a copy: bits are bits */
    const cuuint32_t one[2] = {1, 1};
    const cuuint64_t stride[1] = {(cuuint64_t)K * 2};
    {
      const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)M};
      const cuuint32_t box[2] = {BK, 64};
      if (fn(mx, dt, 2, const_cast<void*>(x), dim, stride, box, one,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled(x)";
    }
    {
      const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)N};
      const cuuint32_t box[2] = {BK, (cuuint32_t)BN};
      if (fn(mw, dt, 2, const_cast<void*>(w), dim, stride, box, one,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled(W)";
    }
    return nullptr;
  }

  /* All kThreads threads. Slabs slab0 .. slab0 + num_k − 1 (64 k each) of columns n0 .. n0 +
   * BN − 1; out: [kG][64][16] fp32 at the start of smem when done (rows ≥ M hold zeros or
   * garbage, never stored). mx, mw: this rank's maps (generic addresses of the parameter). */
  template <typename T>
  __device__ static __forceinline__ void run(const void* mx, const void* mw, int64_t slab0,
                                             int64_t num_k, int n0, unsigned char* smem) {
#if FCO_WGMMA_COMPILED
    const int tid = threadIdx.x;
    const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t full = pipe + kBarOff, empty = full + kStages * 8;
    __syncthreads(); /* the previous group's out (aliasing the ring) has been read */
    if (tid == 0) {
      for (int s = 0; s < kStages; ++s) {
        tile::mbar_init(full + 8 * s, 1);
        tile::mbar_init(empty + 8 * s, kConsumers / 32);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    float d[BN / 4]; /* m64n(BN/2): BN/4 per consumer thread */
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) d[i] = 0.f;
    if (tid >= kConsumers) { /* the producer warp: one thread issues */
      if (tid == kConsumers)
        for (int64_t kt = 0; kt < num_k; ++kt) {
          const int s = (int)(kt % kStages);
          if (kt >= kStages) tile::mbar_wait(empty + 8 * s, (uint32_t)(kt / kStages - 1) & 1u);
          const uint32_t st = pipe + (uint32_t)s * kStageBytes;
          const int k0 = (int)((slab0 + kt) * BK);
          tile::mbar_arrive_expect_tx(full + 8 * s, kStageBytes);
          tile::tma_load_2d(st, mx, full + 8 * s, k0, 0);
          tile::tma_load_2d(st + kXBytes, mw, full + 8 * s, k0, n0);
        }
    } else {
      const int wg = tid >> 7, lane = tid & 31;
      const uint32_t b_off = kXBytes + (uint32_t)wg * (BN / 2) * 128;
#pragma unroll 1
      for (int64_t kt = 0; kt < num_k; ++kt) {
        const int s = (int)(kt % kStages);
        tile::mbar_wait(full + 8 * s, (uint32_t)(kt / kStages) & 1u);
        const uint32_t st = pipe + (uint32_t)s * kStageBytes;
        tile::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          WgmmaN<T, BN / 2>::run(d, tile::wgmma_desc(st + kk * 32, 16, 1024),
                                 tile::wgmma_desc(st + b_off + kk * 32, 16, 1024));
        tile::wgmma_commit();
        tile::wgmma_wait<1>(); /* slab kt − 1 retired (this warpgroup): release its stage */
        if (kt > 0) {
          __syncwarp();
          if (lane == 0) tile::mbar_arrive(empty + 8 * (int)((kt - 1) % kStages));
        }
      }
      tile::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < BN / 4; ++i) asm volatile("" : "+f"(d[i])::"memory");
    }
    __syncthreads(); /* every copy consumed, every wgmma retired: out may reuse the ring */
    if (tid == 0)
      for (int s = 0; s < kStages; ++s) {
        tile::mbar_inval(full + 8 * s);
        tile::mbar_inval(empty + 8 * s);
      }
    if (tid < kConsumers) {
      /* m64nNk16 fragment: d[4j + q] is row (warp % 4)·16 + lane/4 + 8·(q/2), column
       * 8j + 2·(lane % 4) + q % 2 of this warpgroup's BN/2 columns (as GroupWgmma). */
      float* out = reinterpret_cast<float*>(smem);
      const int wg = tid >> 7, lane = tid & 31, row0 = ((tid >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
      for (int j = 0; j < BN / 16; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int col = wg * (BN / 2) + 8 * j + 2 * (lane & 3) + (q & 1);
          const int row = row0 + 8 * (q >> 1);
          out[((col / kTileN) * 64 + row) * kTileN + col % kTileN] = d[4 * j + q];
        }
    }
    __syncthreads();
#else
    __trap(); /* not built for sm_90a: the launcher must not pick this tile */
#endif
  }
};

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_GROUP_TMA_CUH_ */

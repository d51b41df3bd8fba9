/*
 * gemm_tile_wgmma.cuh — WgmmaTile<T, kBT>: one 128×256 output tile of C = A·B computed by a whole
 * block with Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only), a drop-in for MmaTile's
 * aligned path (gemm_tile.cuh) in the fused GEMM + All-to-All kernel (gemm_alltoall_fused.cu).
 * Check and timing against MmaTile and cuBLAS: tests/gpu/wgmma_tile_check.cu.
 *
 * Why: mma.sync tops out far below Hopper's tensor-core rate (MmaTile ran at 24–49 % of cuBLAS);
 * wgmma reads both operands straight from shared memory through matrix descriptors, runs
 * asynchronously, and a warpgroup's m64n256k16 keeps all four SM sub-partitions' tensor cores busy.
 *
 * Design (256 threads = 2 warpgroups, no producer warp: the caller's kernel is 256 threads):
 *   - warpgroup g computes rows 64g..64g+63 × all 256 columns: m64n256k16, 128 fp32 accumulators
 *     per thread; 4 wgmma per BK = 64 k-slab, committed as one group.
 *   - shared memory per stage: A [128 rows][64 k] and B, both in the 128-byte swizzle (a 1024-byte
 *     atom = 8 rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r & 7)), stages
 *     1024-byte aligned (the swizzle is a function of the address bits).
 *       A, and B when kBT ([N][K]): K-major, rows of 64 k; descriptor SBO = 1024 (next 8 rows),
 *         LBO unused; the k16 step advances the start address by 32 bytes.
 *       B [K][N]: N-major ("transposed", imm-trans-b = 1): 4 blocks of 64 n, each [64 k][64 n];
 *         LBO = 8192 (next 64 n), SBO = 1024 (next 8 k); the k16 step advances by 2048 bytes.
 *   - 4-stage cp.async pipeline (16-byte chunks, zero-filled out of range: rows ≥ rows, k ≥ K,
 *     n ≥ N), all 256 threads load. Per k-slab kt: wait for slab kt's copies, fence.proxy.async
 *     (cp.async writes are generic-proxy, wgmma reads through the async proxy), barrier; issue
 *     kt's wgmma group; wgmma.wait_group 1 (kt - 1 retired for this warpgroup); barrier (so for
 *     both); copy slab kt + 3 into kt - 1's stage. The tensor cores always have kt queued behind
 *     kt - 1 while the barriers and copies run, and 3 slabs of copies are in flight.
 *   - epilogue: accumulators → C[BM][kCPitch] as T in shared memory (reusing the pipeline; the
 *     pitch makes the 4-byte stores conflict-free), __syncthreads.
 * Requirements (as MmaTile's kAligned): K and N multiples of 8, A and W bases 16-byte aligned;
 * kSmemBytes (193 KB + 1 KB for aligning) of dynamic shared memory; compiled for sm_90a — on any
 * other target run() traps, and FCO_WGMMA_COMPILED (below) tells device code which it got.
 * Status (H200, run 054dd36; bench/results/2026-11-30_nvidia-h200-x2_054dd36/wgmma_tile_check.log):
 * every tile passes all 32 correctness cases (128 in all); grouped GEMM as a fraction of cuBLAS
 * on the 8 rows (2048 / 512 / 128 / 32 rows, W [K][N] and [N][K]): WgmmaTileTma (below: TMA +
 * mbarriers) 0.81 / 0.90 / 0.88 / 0.96 / 0.95 / 0.96 / 0.93 / 0.96, WgmmaTile 0.61–0.95 (2048 rows
 * lowest),
 * WgmmaTileTma in cluster pairs (multicast) 0.50–0.77 (0.63–0.94 since mbar_arrive_cluster's
 * fix, run 2026-12-02_nvidia-h200_e9f7aa4-tma2, WgmmaTileTma 0.78–0.98 there), MmaTile
 * 0.33–0.62. So WgmmaTileTma is
 * impl 1's default tile; WgmmaTile stays as its fallback (maps that cannot be encoded) and A/B.
 */
#ifndef FCO_CUDA_GEMM_TILE_WGMMA_CUH_
#define FCO_CUDA_GEMM_TILE_WGMMA_CUH_

#include <cuda.h> /* CUtensorMap (types only: encoded through the runtime's driver entry point) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "bulk_copy.cuh"
#include "gemm_tile.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FCO_WGMMA_COMPILED 1 /* this device pass has wgmma (sm_90a) */
#else
#define FCO_WGMMA_COMPILED 0
#endif

namespace fco {
namespace tile {

/* 64-bit shared-memory matrix descriptor, 128-byte swizzle (layout type 1 in bits 62-63);
 * address, LBO and SBO in 16-byte units. */
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

#define FCO_WG_D8(i)                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),          \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FCO_WG_ACC                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "   \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "   \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "   \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "   \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "   \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "   \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
  "%124, %125, %126, %127}"
#define FCO_WG_OPS                                                                     \
  FCO_WG_D8(0), FCO_WG_D8(8), FCO_WG_D8(16), FCO_WG_D8(24), FCO_WG_D8(32), FCO_WG_D8(40), \
      FCO_WG_D8(48), FCO_WG_D8(56), FCO_WG_D8(64), FCO_WG_D8(72), FCO_WG_D8(80),      \
      FCO_WG_D8(88), FCO_WG_D8(96), FCO_WG_D8(104), FCO_WG_D8(112), FCO_WG_D8(120)

/* d (64×256 fp32, the m64nNk16 accumulator fragment) += A(desc, K-major) · B(desc); kTransB:
 * B N-major. scale-d = 1 always (the caller zeroes d). */
template <typename T, bool kTransB>
struct Wgmma256;
template <bool kTransB>
struct Wgmma256<__nv_bfloat16, kTransB> {
  __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db) {
#if FCO_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FCO_WG_ACC
                 ", %128, %129, 1, 1, 1, 0, %130;\n"
                 : FCO_WG_OPS
                 : "l"(da), "l"(db), "n"(kTransB ? 1 : 0));
#endif
  }
};
template <bool kTransB>
struct Wgmma256<__half, kTransB> {
  __device__ static __forceinline__ void run(float* d, uint64_t da, uint64_t db) {
#if FCO_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " FCO_WG_ACC
                 ", %128, %129, 1, 1, 1, 0, %130;\n"
                 : FCO_WG_OPS
                 : "l"(da), "l"(db), "n"(kTransB ? 1 : 0));
#endif
  }
};
#undef FCO_WG_OPS
#undef FCO_WG_ACC
#undef FCO_WG_D8

__device__ __forceinline__ void wgmma_fence() {
#if FCO_WGMMA_COMPILED
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if FCO_WGMMA_COMPILED
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kN>
__device__ __forceinline__ void wgmma_wait() {
#if FCO_WGMMA_COMPILED
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kN) : "memory");
#endif
}
/* The accumulators as asm operands: keeps the compiler from touching them between the issue
 * of a wgmma group and its wait (it cannot see that wgmma writes them asynchronously). */
__device__ __forceinline__ void wgmma_hold(float* d) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
/* fence_proxy_async_smem, bulk_store, bulk_commit, bulk_wait_all: bulk_copy.cuh. */
__device__ __forceinline__ void bar_sync_all(int threads) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
}

/* One 64-wide k-slab of a warpgroup's 64×256 tile, issued as one wgmma group: A at sa (K-major,
 * 128-byte swizzle, 8-row groups 1024 bytes apart), B at sb (kBT: [N][K], K-major like A; else
 * [K][N] as 64-column blocks, MN-major). Shared by WgmmaTile and WgmmaTileTma. */
template <typename T, bool kBT, int BK>
__device__ __forceinline__ void wgmma_slab(float* d, uint32_t sa, uint32_t sb) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const uint64_t da = wgmma_desc(sa + kk * 32, 16, 1024);
    const uint64_t db = kBT ? wgmma_desc(sb + kk * 32, 16, 1024)
                            : wgmma_desc(sb + kk * 16 * 128, BK * 128, 1024);
    Wgmma256<T, !kBT>::run(d, da, db);
  }
  wgmma_commit();
}

template <typename T, bool kBT>
struct WgmmaTile {
  using Elem = T;
  static constexpr int BM = 128, BN = 256, BK = 64, kStages = 4, kThreads = 256;
  static constexpr int kCPitch = BN + 8; /* elements; rows stay 16-byte aligned */
  static constexpr int kABytes = BM * BK * 2;          /* 16 KB */
  static constexpr int kBBytes = BK * BN * 2;          /* 32 KB */
  static constexpr int kStageBytes = kABytes + kBBytes; /* 48 KB, a multiple of 1024 */
  static constexpr int kPipeBytes = kStages * kStageBytes + 1024; /* + aligning to 1024 */
  static constexpr int kCBytes = BM * kCPitch * 2;
  static constexpr int kSmemBytes = kPipeBytes > kCBytes ? kPipeBytes : kCBytes;
  static constexpr int kAChunks = BM * 8 / kThreads, kBChunks = BK * BN / 8 / kThreads;
  static_assert(sizeof(T) == 2, "bf16 / f16 only");

  /* Byte offset of 16-byte chunk ch (0..7) of row r in a [rows][64] 128-byte-swizzled tile. */
  __device__ static __forceinline__ uint32_t sw128(int r, int ch) {
    return (uint32_t)(r * 128 + ((ch ^ (r & 7)) << 4));
  }

  /* One thread's share of a stage's copies. Chunk i of A (and of B when kBT) is row
   * tid / 8 + 32 i, 16-byte chunk tid % 8; of B [K][N] k-row tid / 32 + 8 i, chunk tid % 32.
   * The swizzle term (row & 7) is the same for every i, so each chunk's shared offset is the
   * first one plus a constant; pointers advance with k. */
  struct Loader {
    const T* pa; /* A at (row tid / 8, k = 8 (tid % 8)); chunk i: + i·32·K */
    const T* pb; /* B at this thread's first chunk, k = 0 */
    size_t b_step;                 /* elements between chunks i and i + 1 of B */
    uint32_t off_a, off_b;         /* shared offset of chunk 0 within A / B of a stage */
    uint32_t a_ok, b_ok;           /* bit i: chunk i's row (A) / column or row (B) in range */
    int ka, kb;                    /* k of chunk 0 relative to the slab start (A, B) */

    __device__ __forceinline__ void init(const T* a, int rows, const T* w, int K, int N, int n0) {
      const int tid = threadIdx.x, r = tid >> 3, ch = tid & 7;
      ka = ch * 8;
      pa = a + (size_t)r * K + ka;
      off_a = sw128(r, ch);
      a_ok = 0;
#pragma unroll
      for (int i = 0; i < kAChunks; ++i) a_ok |= (r + 32 * i < rows ? 1u : 0u) << i;
      b_ok = 0;
      if constexpr (kBT) {
        kb = ka;
        pb = w + (size_t)(n0 + r) * K + kb;
        b_step = (size_t)32 * K;
        off_b = sw128(r, ch);
#pragma unroll
        for (int i = 0; i < kBChunks; ++i) b_ok |= (n0 + r + 32 * i < N ? 1u : 0u) << i;
      } else {
        const int kr = tid >> 5, c = tid & 31;
        kb = kr;
        pb = w + (size_t)kr * N + n0 + c * 8;
        b_step = (size_t)8 * N;
        off_b = (uint32_t)(c >> 3) * (BK * 128) + sw128(kr, c & 7);
        b_ok = n0 + c * 8 < N ? (1u << kBChunks) - 1 : 0u;
      }
    }
    /* cp.async k-slab k0 into the stage at shared address st (A then B); out-of-range chunks
     * are zero-filled (K, N multiples of 8: a chunk is wholly in or out). */
    __device__ __forceinline__ void load(uint32_t st, const T* a0, const T* w0, int K, int N,
                                         int k0) const {
      const bool ka_ok = k0 + ka < K;
#pragma unroll
      for (int i = 0; i < kAChunks; ++i) {
        const bool ok = ka_ok && (a_ok >> i & 1);
        cp_async16(st + off_a + i * (32 * 128), ok ? pa + (size_t)i * 32 * K + k0 : a0,
                   ok ? 16 : 0);
      }
      const uint32_t sb = st + kABytes + off_b;
#pragma unroll
      for (int i = 0; i < kBChunks; ++i) {
        bool ok;
        const T* src;
        if constexpr (kBT) {
          ok = k0 + kb < K && (b_ok >> i & 1);
          src = pb + i * b_step + k0;
        } else {
          ok = k0 + kb + 8 * i < K && (b_ok >> i & 1);
          src = pb + i * b_step + (size_t)k0 * N;
        }
        /* kBT: chunk i is n-row + 32 i (32 rows of 128 bytes further); else k-row + 8 i. */
        cp_async16(sb + i * (kBT ? 32 * 128 : 8 * 128), ok ? src : w0, ok ? 16 : 0);
      }
    }
  };
  __device__ static void run(char* smem, const T* a, int rows, const T* w, int K, int N, int n0) {
#if FCO_WGMMA_COMPILED
    const int tid = threadIdx.x, wg = tid >> 7;
    const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
    const int num_k = (K + BK - 1) / BK;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;

    Loader ld;
    ld.init(a, rows, w, K, N, n0);
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < num_k) ld.load(pipe + s * kStageBytes, a, w, K, N, s * BK);
      cp_async_commit();
    }
    for (int kt = 0; kt < num_k; ++kt) {
      cp_async_wait<kStages - 2>(); /* this thread's copies of slab kt landed */
      fence_proxy_async_smem();
      __syncthreads(); /* everyone's */
      const uint32_t sa = pipe + (kt % kStages) * kStageBytes + wg * (64 * 128);
      const uint32_t sb = pipe + (kt % kStages) * kStageBytes + kABytes;
      wgmma_slab<T, kBT, BK>(d, sa, sb);
      wgmma_wait<1>(); /* my slab kt - 1 retired */
      bar_sync_all(kThreads); /* both warpgroups': its stage is free */
      const int nk = kt + kStages - 1;
      if (nk < num_k) ld.load(pipe + (nk % kStages) * kStageBytes, a, w, K, N, nk * BK);
      cp_async_commit();
    }
    wgmma_wait<0>();
    wgmma_hold(d);
    cp_async_wait<0>();
    __syncthreads(); /* every warpgroup is done with the pipeline: reuse it for C */

    /* m64nNk16 accumulator fragment: d[4j + q] is row (warp % 4)·16 + lane/4 + 8·(q/2),
     * column 8j + 2·(lane % 4) + q % 2. */
    uint32_t* cs = reinterpret_cast<uint32_t*>(smem);
    const int lane = tid & 31, row0 = wg * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2);
    const int col0 = 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = j * 8 + col0;
      cs[(row0 * kCPitch + col) >> 1] = MmaOp<T>::pack2(d[4 * j], d[4 * j + 1]);
      cs[((row0 + 8) * kCPitch + col) >> 1] = MmaOp<T>::pack2(d[4 * j + 2], d[4 * j + 3]);
    }
    __syncthreads();
#else
    __trap(); /* not built for sm_90a: the launcher must not pick this tile */
#endif
  }
};

/* ---- TMA + mbarrier variant ------------------------------------------------------------------ */

/* mbarrier and TMA helpers (shared addresses as 32-bit). */
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
/* Wait for the phase of the given parity to complete. A tile that waits for more than ~2^31
 * cycles has a protocol bug: trap (a launch error) rather than hang. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p, q;\n .reg .u32 n;\n mov.u32 n, 0;\n"
      "FCO_MBAR_WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @p bra FCO_MBAR_DONE;\n"
      " add.u32 n, n, 1;\n"
      " setp.lt.u32 q, n, 0x4000000;\n"
      " @q bra FCO_MBAR_WAIT;\n"
      " trap;\n"
      "FCO_MBAR_DONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, uint32_t bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
/* The box of map at {c0, c1} into L2 only (no shared memory, no barrier): TMA's tensor prefetch. */
__device__ __forceinline__ void tma_prefetch_2d(const void* map, int c0, int c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"(map),
               "r"(c0), "r"(c1)
               : "memory");
}
/* tma_load_2d with an L2 cache hint: pol a policy from createpolicy (e.g. evict-first for a
 * stream read once; gemv_group_tma.cuh's W). */
__device__ __forceinline__ void tma_load_2d_hint(uint32_t dst, const void* map, uint32_t bar,
                                                 int c0, int c1, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "l"(pol)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, uint32_t bar, int c0,
                                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

/* The host half: encode CUtensorMaps through the driver entry point (no -lcuda). */
using TmaEncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline TmaEncodeFn tma_encode_fn() {
  static TmaEncodeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      p = nullptr;
    }
    return reinterpret_cast<TmaEncodeFn>(p);
  }();
  return fn;
}

/* Cluster helpers (a launch with cluster dimensions). */
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
/* Arrive on the mbarrier at the same shared offset in CTA `cta` of the cluster, with the
 * instruction's default semantics (release, CTA scope) — the form CUTLASS's ClusterBarrier and
 * Triton emit for a consumer releasing a multicast stage. Until session 21 this asked
 * `.release.cluster`, which cost about one memory round trip per call: gemv_group_probe's
 * cluster-pair TMA tile took 149.2 µs at 64×8192×8192 with it and 52.7 without (run
 * 2026-12-02_nvidia-h200_1c4863f-clrel), and WgmmaTileTma<.., 2> ran at 0.49–0.77 of cuBLAS. The
 * consumers' reads of the stage are complete when they arrive (wgmma.wait_group), so the
 * producer's next TMA write into it is ordered by the barrier alone. */
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const void* map, uint32_t bar, int c0,
                                               int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d_mc(uint32_t dst, const void* map, uint32_t bar, int c0,
                                               int c1, int c2, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
      : "memory");
}

/*
 * WgmmaTileTma<T, kBT, kCta>: WgmmaTile's math (128×256×64, two consumer warpgroups of
 * m64n256k16, 128-byte swizzle, the same shared layouts and descriptors) with the operands
 * brought in by TMA (cp.async.bulk.tensor) instead of 256 threads' cp.async:
 *   - one thread (thread 0) issues a stage's copies: A as two boxes {64 k, 64 rows}, W as two
 *     boxes {64 k, 128 n} ([N][K]) or up to four boxes {64 n, 64 k} ([K][N], one per 64-column
 *     block). TMA writes the 128-byte swizzle itself and zero-fills outside the tensor (k ≥ K,
 *     n ≥ N, rows past A's end): no predicates, no per-thread addresses.
 *   - per stage a "full" mbarrier (thread 0's arrive + the copies' bytes) and an "empty" one
 *     (one arrival per consumer warp once its wgmma reading the stage retired). All four stages
 *     are filled up front; after slab kt - 1 retired, thread 0 refills its stage with slab
 *     kt + 3, so three slabs of copies stay in flight behind the one the tensor cores run, with
 *     no block barrier in the k loop.
 *   - the warpgroups keep one wgmma group in flight (kt queued behind kt - 1), as WgmmaTile.
 *   - kCta = 2: the block is one of a cluster of 2 (launched with cluster dimensions (2,1,1))
 *     whose blocks run tiles together; `share` says what the pair has in common: 1 = the same W
 *     columns (same expert and n0: block r loads half of W's boxes, multicast to both), 2 = the
 *     same A rows (same a_row0: block r loads A's rows 64r..64r+63 for both), 0 = nothing. Each
 *     stage is refilled only when the consumers of both blocks released it (empty barriers count
 *     both blocks' warps), so the L2 → SM traffic of the shared operand halves. Both blocks must
 *     call run() the same number of times with the same K and share (a block without a tile
 *     computes its partner's with share 0 and stores nothing); run() begins and ends with a
 *     cluster barrier (barrier init visible to the peer / no peer traffic left before re-init).
 *   - epilogue as WgmmaTile: accumulators → C[BM][kCPitch] at the start of smem, __syncthreads.
 * A is addressed through a map of the whole [a_rows][K] matrix: a tile starting at row a_row0
 * reads 128 rows even when its segment has fewer; the extra rows are other segments' (or zeros
 * past a_rows) and their outputs are never stored. W's map is [E][K][N] / [E][N][K], so k ≥ K
 * reads zeros, never the next expert.
 * Maps: encode() on the host, one pair per (A, W) tensor, passed to the kernel as
 * __grid_constant__ parameters (TMA needs them in param / const / global space).
 * Requirements: K, N multiples of 8, A, W 16-byte aligned (TMA strides), sm_90a, kSmemBytes of
 * dynamic shared memory, 256 threads.
 */
template <typename T, bool kBT, int kCta = 1, bool kAsyncC = false>
struct WgmmaTileTma {
  using Elem = T;
  static constexpr int BM = 128, BN = 256, BK = 64, kThreads = 256;
  /* kAsyncC: C gets its own shared memory after the pipeline (one stage fewer), so the caller
   * can drain it with bulk copies while the next tile's mainloop runs (see run()). */
  static constexpr int kStages = kAsyncC ? 3 : 4;
  static constexpr int kCPitch = BN + 8; /* 528-byte rows: 16-byte aligned for bulk copies */
  static constexpr int kABytes = BM * BK * 2, kBBytes = BK * BN * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kBarOff = kStages * kStageBytes; /* from the aligned pipeline base */
  static constexpr int kPipeBytes = kBarOff + 2 * kStages * 8 + 1024;
  static constexpr int kCBytes = BM * kCPitch * 2;
  static constexpr int kCOff = kAsyncC ? (kPipeBytes + 127) / 128 * 128 : 0;
  static constexpr int kSmemBytes =
      kAsyncC ? kCOff + kCBytes : (kPipeBytes > kCBytes ? kPipeBytes : kCBytes);
  static constexpr int kConsumerWarps = kThreads / 32;
  static_assert(sizeof(T) == 2, "bf16 / f16 only");
  static_assert(kCta == 1 || kCta == 2, "a block alone or a pair");
  static_assert(!kAsyncC || kCta == 1, "the asynchronous epilogue runs in single blocks");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");

  /* Host: maps of A [a_rows][K] and W (E experts of [K][N], or [N][K] when kBT). Returns
   * nullptr on success, else what failed. */
  static const char* encode(CUtensorMap* ma, CUtensorMap* mw, const void* a, long long a_rows,
                            const void* w, int K, int N, int E) {
    TmaEncodeFn fn = tma_encode_fn();
    if (!fn) return "cuTensorMapEncodeTiled not found";
    const CUtensorMapDataType dt = CU_TENSOR_MAP_DATA_TYPE_UINT16; /* a copy: bits are bits */
    const cuuint32_t one[3] = {1, 1, 1};
    {
      const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)(a_rows > 0 ? a_rows : 1)};
      const cuuint64_t stride[1] = {(cuuint64_t)K * 2};
      const cuuint32_t box[2] = {BK, BM / 2};
      if (fn(ma, dt, 2, const_cast<void*>(a), dim, stride, box, one,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled(A)";
    }
    {
      const cuuint64_t inner = kBT ? K : N, outer = kBT ? N : K;
      const cuuint64_t dim[3] = {inner, outer, (cuuint64_t)(E > 0 ? E : 1)};
      const cuuint64_t stride[2] = {inner * 2, inner * outer * 2};
      const cuuint32_t box[3] = {64, kBT ? (cuuint32_t)(BN / 2) : (cuuint32_t)BK, 1};
      if (fn(mw, dt, 3, const_cast<void*>(w), dim, stride, box, one,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return "cuTensorMapEncodeTiled(W)";
    }
    return nullptr;
  }

  /* Thread 0: slab `slab` into stage `st` (shared address), completion on `bar` (and on the
   * peer's at the same offset for multicast boxes). [K][N] boxes wholly past N are skipped
   * (their columns are never stored). */
  __device__ static __forceinline__ void produce(uint32_t st, uint32_t bar, const CUtensorMap* ma,
                                                 int a_row0, const CUtensorMap* mw, int ex, int N,
                                                 int n0, int slab, int share, uint32_t rank) {
    const int k0 = slab * BK;
    const int nb = kBT ? 2 : min(4, (N - n0 + 63) / 64);
    mbar_arrive_expect_tx(bar, kABytes + nb * (kBBytes / (kBT ? 2 : 4)));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t dst = st + h * (kABytes / 2);
      if (kCta == 2 && share == 2) {
        if (h == (int)rank) tma_load_2d_mc(dst, ma, bar, k0, a_row0 + 64 * h, 3);
      } else {
        tma_load_2d(dst, ma, bar, k0, a_row0 + 64 * h);
      }
    }
    for (int b = 0; b < nb; ++b) {
      const uint32_t dst = st + kABytes + b * (kBBytes / (kBT ? 2 : 4));
      const int c0 = kBT ? k0 : n0 + 64 * b, c1 = kBT ? n0 + 128 * b : k0;
      if (kCta == 2 && share == 1) {
        if ((b & 1) == (int)rank) tma_load_3d_mc(dst, mw, bar, c0, c1, ex, 3);
      } else {
        tma_load_3d(dst, mw, bar, c0, c1, ex);
      }
    }
  }

  __device__ static void run(char* smem, const CUtensorMap* ma, int a_row0, const CUtensorMap* mw,
                             int ex, int K, int N, int n0, int share = 0) {
#if FCO_WGMMA_COMPILED
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
    const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t full = pipe + kBarOff, empty = full + kStages * 8;
    const int num_k = (K + BK - 1) / BK;
    const uint32_t rank = kCta == 2 ? cluster_ctarank() : 0u;
    if (kCta == 1) share = 0;

    /* The last tile's C staging was read through the generic proxy; TMA writes through the
     * async proxy: order them (each thread its own reads), then the barrier. */
    fence_proxy_async_smem();
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        mbar_init(full + 8 * s, 1);
        mbar_init(empty + 8 * s, kConsumerWarps * kCta);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (kCta == 2) cluster_sync(); /* both blocks' barriers exist before any peer traffic */
    else __syncthreads();
    if (tid == 0)
      for (int s = 0; s < kStages && s < num_k; ++s)
        produce(pipe + s * kStageBytes, full + 8 * s, ma, a_row0, mw, ex, N, n0, s, share, rank);

    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int kt = 0; kt < num_k; ++kt) {
      const int s = kt % kStages;
      mbar_wait(full + 8 * s, (uint32_t)(kt / kStages) & 1u);
      const uint32_t sa = pipe + s * kStageBytes + wg * (64 * 128);
      const uint32_t sb = pipe + s * kStageBytes + kABytes;
      wgmma_slab<T, kBT, BK>(d, sa, sb);
      wgmma_wait<1>(); /* my slab kt - 1 retired */
      if (kt > 0) {
        const int ps = (kt - 1) % kStages;
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(empty + 8 * ps);
          if (kCta == 2) mbar_arrive_cluster(empty + 8 * ps, rank ^ 1u);
        }
        const int nk = kt - 1 + kStages; /* refill kt - 1's stage */
        if (tid == 0 && nk < num_k) {
          mbar_wait(empty + 8 * ps, (uint32_t)(nk / kStages - 1) & 1u);
          produce(pipe + ps * kStageBytes, full + 8 * ps, ma, a_row0, mw, ex, N, n0, nk, share,
                  rank);
        }
      }
    }
    wgmma_wait<0>();
    wgmma_hold(d);
    /* kAsyncC: the caller's bulk copies of the previous C (issued by warp 0) done before C is
     * rewritten below. */
    if (kAsyncC && tid < 32) bulk_wait_all();
    /* Every wgmma and copy of this block done; with a pair, also every arrival and multicast
     * of the peer into this block: the barriers can go, the pipeline becomes C (kAsyncC: C
     * has its own bytes at kCOff). */
    if (kCta == 2) cluster_sync();
    else __syncthreads();
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        mbar_inval(full + 8 * s);
        mbar_inval(empty + 8 * s);
      }
    }
    uint32_t* cs = reinterpret_cast<uint32_t*>(smem + kCOff);
    const int row0 = wg * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2), col0 = 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = j * 8 + col0;
      cs[(row0 * kCPitch + col) >> 1] = MmaOp<T>::pack2(d[4 * j], d[4 * j + 1]);
      cs[((row0 + 8) * kCPitch + col) >> 1] = MmaOp<T>::pack2(d[4 * j + 2], d[4 * j + 3]);
    }
    if (kAsyncC) fence_proxy_async_smem(); /* C's generic writes before the bulk copies read it */
    __syncthreads();
#else
    __trap();
#endif
  }
};

/* Whether a tile reads its operands through tensor maps (run(smem, &map_a, a_row0, &map_w,
 * expert, K, N, n0[, share])) rather than pointers (run(smem, a, rows, w, K, N, n0)). */
template <class Tile>
struct IsTmaTile {
  static constexpr bool value = false;
};
template <typename T, bool kBT, int kCta, bool kAsyncC>
struct IsTmaTile<WgmmaTileTma<T, kBT, kCta, kAsyncC>> {
  static constexpr bool value = true;
};
/* Where a tile leaves C in the caller's shared memory (bytes from its base), and whether it
 * has C apart from its pipeline (WgmmaTileTma<..., kAsyncC = true>): then the caller may drain
 * C asynchronously (bulk_store by warp 0, one bulk group per lane), and the next run() waits
 * for those copies (warp 0) before its barrier and rewrites C only after it. */
template <class Tile>
struct AsyncC {
  static constexpr bool value = false;
  static constexpr int off = 0;
};
template <typename T, bool kBT, int kCta, bool kAsyncC>
struct AsyncC<WgmmaTileTma<T, kBT, kCta, kAsyncC>> {
  static constexpr bool value = kAsyncC;
  static constexpr int off = WgmmaTileTma<T, kBT, kCta, kAsyncC>::kCOff;
};
/* All threads: rows [r0, r1) of the block's finished tile — C in this block's shared memory at
 * AsyncC<Tile>::off — cols wide, to dst (the destination of row r0; rows rb bytes apart). A tile
 * with its own C (AsyncC) and 16-byte rows: warp 0 hands the rows to the TMA unit (a bulk group
 * per lane) and the block goes on at once; the next run() waits for those copies before it
 * rewrites C, and whatever needs the stores done calls bulk_wait_all() (warp 0) and syncs.
 * Otherwise every thread stores and nothing syncs: call store_c_done after the last part (a
 * tile's rows may go to several destinations, one call each). */
template <class Tile>
__device__ __forceinline__ void store_c_part(const char* smem, int r0, int r1, int cols, char* dst,
                                             size_t rb) {
  using T = typename Tile::Elem;
  const T* cs = reinterpret_cast<const T*>(smem + AsyncC<Tile>::off) + r0 * Tile::kCPitch;
  const int rows = r1 - r0;
  if constexpr (AsyncC<Tile>::value) {
    const uint32_t cb = (uint32_t)cols * (uint32_t)sizeof(T);
    if (((uintptr_t)dst | rb | cb) % 16 == 0) {
      if (threadIdx.x < 32) {
        for (int r = threadIdx.x; r < rows; r += 32)
          bulk_store(dst + (size_t)r * rb, cs + r * Tile::kCPitch, cb);
        bulk_commit();
      }
      return;
    }
  }
  store_tile<T, Tile::kCPitch>(cs, rows, cols, dst, rb);
}
/* After a tile's store_c_part calls: the stores are issued and C may be rewritten. */
template <class Tile>
__device__ __forceinline__ void store_c_done() {
  __syncthreads();
}
/* The whole tile's rows [0, rows) to dst. */
template <class Tile>
__device__ __forceinline__ void store_c(const char* smem, int rows, int cols, char* dst,
                                        size_t rb) {
  store_c_part<Tile>(smem, 0, rows, cols, dst, rb);
  store_c_done<Tile>();
}

/* Blocks per cluster a tile runs in (clusters of 2: WgmmaTileTma<T, kBT, 2>). */
template <class Tile>
struct TileCta {
  static constexpr int value = 1;
};
template <typename T, bool kBT, int kCta, bool kAsyncC>
struct TileCta<WgmmaTileTma<T, kBT, kCta, kAsyncC>> {
  static constexpr int value = kCta;
};

}  // namespace tile
}  // namespace fco

#endif /* FCO_CUDA_GEMM_TILE_WGMMA_CUH_ */

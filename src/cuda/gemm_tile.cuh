/*
 * gemm_tile.cuh — one output tile of C = A·B computed by a whole thread block, left in shared
 * memory (as the output type) for the caller's epilogue to store wherever the tile belongs.
 * Used by the fused GEMM + All-to-All kernel (gemm_alltoall_fused.cu).
 *
 *   MmaTile<T, kBT, kAligned>  bf16 / f16, tensor cores: mma.sync.m16n8k16 (fp32 accumulate),
 *                              128×256×32 tiles, 8 warps of 64×64 (8 ldmatrix.x4 per 32 mma),
 *                              ldmatrix from XOR-swizzled shared memory (conflict-free), 4-stage
 *                              cp.async pipeline (96 KB). The 128×128 tiles of the first version
 *                              ran at ~1/4 of cuBLAS: 64 FLOP per byte loaded from L2 capped them
 *                              near the L2 bandwidth; 128×256 gives 85.
 *                              kAligned: K and N multiples of 8 and 16-byte aligned bases, so
 *                              every 16-byte chunk is entirely in or out of range and cp.async
 *                              zero-fills the out-of-range ones; otherwise element-wise
 *                              predicated loads (odd K or N: correct, slower).
 *   FfmaTile<kBT>              f32: plain FFMA, 64×64×16 tiles, 4×4 outputs per thread. Exact
 *                              fp32 products and sums (no TF32), far below tensor-core speed.
 *   kBT: B is stored [N, K] (torch Linear weight) instead of [K, N].
 *
 * run(smem, a, rows, w, K, N, n0): a = first row of the tile's A rows (row stride K), rows =
 * valid rows (≤ BM; the rest read as 0), w = B of the expert, n0 = first output column. All
 * threads (kThreads = 256) must call it. On return C[BM][kCPitch] (type T) is in smem and a
 * __syncthreads has been passed.
 */
#ifndef FCO_CUDA_GEMM_TILE_CUH_
#define FCO_CUDA_GEMM_TILE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cp_async.cuh"

namespace fco {
namespace tile {

/* cp.async and the shared-address conversion: cp_async.cuh (shared with the embedding lookup). */
using fco::cp_async16;
using fco::cp_async_commit;
using fco::cp_async_wait;
using fco::smem_u32;
__device__ __forceinline__ void ldsm_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <typename T>
struct MmaOp;
template <>
struct MmaOp<__nv_bfloat16> {
  __device__ static __forceinline__ void run(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  __device__ static __forceinline__ uint32_t pack2(float x, float y) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <>
struct MmaOp<__half> {
  __device__ static __forceinline__ void run(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  __device__ static __forceinline__ uint32_t pack2(float x, float y) {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

template <typename T, bool kBT, bool kAligned>
struct MmaTile {
  using Elem = T;
  static constexpr int BM = 128, BN = 256, BK = 32, kStages = 4, kThreads = 256;
  static constexpr int kWarpN = 64;      /* warp tile 64 × 64: 2 warps down, 4 across */
  static constexpr int kNFrag = kWarpN / 8; /* n8 fragments per warp */
  static constexpr int kCPitch = BN + 8; /* elements; rows stay 16-byte aligned */
  static constexpr int kAElems = BM * BK, kBElems = BK * BN;
  static constexpr int kStageBytes = (kAElems + kBElems) * 2;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kCBytes = BM * kCPitch * 2;
  static constexpr int kSmemBytes = kPipeBytes > kCBytes ? kPipeBytes : kCBytes;

  /* 16-byte chunk (row, ch) of a [rows][32] tile: XOR swizzle so 8 consecutive rows of one
   * ldmatrix hit 8 different bank groups. Offset in elements. */
  __device__ static __forceinline__ int sw32(int row, int ch) {
    return row * BK + ((ch ^ ((row >> 1) & 3)) << 3);
  }
  /* The same for a [32][BN] tile (rows of BN / 8 chunks): the low 3 chunk bits are XORed, so 8
   * consecutive rows at one logical chunk land in 8 different 16-byte bank groups. */
  __device__ static __forceinline__ int swB(int row, int ch) {
    return row * BN + ((ch ^ (row & 7)) << 3);
  }

  /* One 16-byte chunk from global (8 elements from src, `valid` of them in range). */
  __device__ static __forceinline__ void load_chunk(T* sdst, const T* src, int valid) {
    if constexpr (kAligned) {
      cp_async16(smem_u32(sdst), src, valid > 0 ? 16 : 0);
    } else {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      uint16_t v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = j < valid ? s[j] : (uint16_t)0;
      uint4 x;
      x.x = v[0] | ((uint32_t)v[1] << 16);
      x.y = v[2] | ((uint32_t)v[3] << 16);
      x.z = v[4] | ((uint32_t)v[5] << 16);
      x.w = v[6] | ((uint32_t)v[7] << 16);
      *reinterpret_cast<uint4*>(sdst) = x;
    }
  }

  __device__ static __forceinline__ void load_stage(T* sA, T* sB, const T* a, int rows,
                                                    const T* w, int K, int N, int n0, int k0) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 2; ++i) { /* A: 128 rows × 4 chunks */
      const int c = tid + i * kThreads, row = c >> 2, ch = c & 3, gk = k0 + ch * 8;
      const int valid = row < rows && gk < K ? min(8, K - gk) : 0;
      load_chunk(sA + sw32(row, ch), valid > 0 ? a + (size_t)row * K + gk : a, valid);
    }
#pragma unroll
    for (int i = 0; i < kBElems / 8 / kThreads; ++i) {
      const int c = tid + i * kThreads;
      if constexpr (!kBT) { /* B [K][N]: 32 k-rows × BN/8 chunks */
        constexpr int kCh = BN / 8;
        const int kr = c / kCh, ch = c % kCh, gk = k0 + kr, gn = n0 + ch * 8;
        const int valid = gk < K && gn < N ? min(8, N - gn) : 0;
        load_chunk(sB + swB(kr, ch), valid > 0 ? w + (size_t)gk * N + gn : w, valid);
      } else { /* B [N][K]: BN n-rows × 4 chunks */
        const int nr = c >> 2, ch = c & 3, gn = n0 + nr, gk = k0 + ch * 8;
        const int valid = gn < N && gk < K ? min(8, K - gk) : 0;
        load_chunk(sB + sw32(nr, ch), valid > 0 ? w + (size_t)gn * K + gk : w, valid);
      }
    }
  }

  __device__ static void run(char* smem, const T* a, int rows, const T* w, int K, int N, int n0) {
    T* pipe = reinterpret_cast<T*>(smem);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3; /* warp tile: rows wm·64, cols wn·kWarpN */
    const int num_k = (K + BK - 1) / BK;
    float acc[4][kNFrag][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNFrag; ++ni)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < num_k) {
        T* sA = pipe + s * (kAElems + kBElems);
        load_stage(sA, sA + kAElems, a, rows, w, K, N, n0, s * BK);
      }
      cp_async_commit();
    }
    for (int kt = 0; kt < num_k; ++kt) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      { /* prefetch k-tile kt + kStages - 1 into the stage computed on at kt - 1 */
        const int nk = kt + kStages - 1;
        if (nk < num_k) {
          T* sA = pipe + (nk % kStages) * (kAElems + kBElems);
          load_stage(sA, sA + kAElems, a, rows, w, K, N, n0, nk * BK);
        }
        cp_async_commit();
      }
      const T* sA = pipe + (kt % kStages) * (kAElems + kBElems);
      const T* sB = sA + kAElems;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        uint32_t af[4][4], bf[kNFrag][2];
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          const int r = wm * 64 + mi * 16 + (lane & 15), ch = (kk >> 3) + (lane >> 4);
          ldsm_x4(af[mi], smem_u32(sA + sw32(r, ch)));
        }
#pragma unroll
        for (int nj = 0; nj < kNFrag; nj += 2) {
          uint32_t r4[4];
          if constexpr (!kBT) {
            const int k = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
            const int ch = ((wn * kWarpN + nj * 8) >> 3) + (lane >> 4);
            ldsm_x4_t(r4, smem_u32(sB + swB(k, ch)));
          } else {
            const int n = wn * kWarpN + nj * 8 + (lane & 7) + (lane >> 4) * 8;
            const int ch = (kk >> 3) + ((lane >> 3) & 1);
            ldsm_x4(r4, smem_u32(sB + sw32(n, ch)));
          }
          bf[nj][0] = r4[0];
          bf[nj][1] = r4[1];
          bf[nj + 1][0] = r4[2];
          bf[nj + 1][1] = r4[3];
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi)
#pragma unroll
          for (int ni = 0; ni < kNFrag; ++ni) MmaOp<T>::run(acc[mi][ni], af[mi], bf[ni]);
      }
    }
    cp_async_wait<0>();
    __syncthreads(); /* every warp is done with the pipeline: reuse it for C */
    uint32_t* cs = reinterpret_cast<uint32_t*>(smem);
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNFrag; ++ni) {
        const int row = wm * 64 + mi * 16 + g, col = wn * kWarpN + ni * 8 + 2 * t4;
        cs[(row * kCPitch + col) >> 1] = MmaOp<T>::pack2(acc[mi][ni][0], acc[mi][ni][1]);
        cs[((row + 8) * kCPitch + col) >> 1] = MmaOp<T>::pack2(acc[mi][ni][2], acc[mi][ni][3]);
      }
    __syncthreads();
  }
};

template <bool kBT>
struct FfmaTile {
  using Elem = float;
  static constexpr int BM = 64, BN = 64, BK = 16, kThreads = 256;
  static constexpr int kCPitch = BN + 4;
  static constexpr int kSmemBytes = BM * kCPitch * 4 > 2 * BK * 64 * 4 ? BM * kCPitch * 4
                                                                        : 2 * BK * 64 * 4;

  __device__ static void run(char* smem, const float* a, int rows, const float* w, int K, int N,
                             int n0) {
    float* As = reinterpret_cast<float*>(smem); /* [BK][BM] */
    float* Bs = As + BK * BM;                  /* [BK][BN] */
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int idx = tid + i * kThreads;
        {
          const int row = idx >> 4, k = idx & 15;
          As[k * BM + row] = row < rows && k0 + k < K ? a[(size_t)row * K + k0 + k] : 0.f;
        }
        if constexpr (!kBT) {
          const int k = idx >> 6, n = idx & 63;
          Bs[k * BN + n] = k0 + k < K && n0 + n < N ? w[(size_t)(k0 + k) * N + n0 + n] : 0.f;
        } else {
          const int n = idx >> 4, k = idx & 15;
          Bs[k * BN + n] = k0 + k < K && n0 + n < N ? w[(size_t)(n0 + n) * K + k0 + k] : 0.f;
        }
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        float x[4], y[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) x[i] = As[k * BM + ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) y[j] = Bs[k * BN + tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
      }
      __syncthreads();
    }
    float* cs = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) cs[(ty + 16 * i) * kCPitch + tx + 16 * j] = acc[i][j];
    __syncthreads();
  }
};

/* Store rows × cols of the smem tile cs (pitch kPitch elements) to dst (row stride row_bytes):
 * 16-byte vectors when every row is whole chunks and aligned, else element by element. */
template <typename T, int kPitch>
__device__ __forceinline__ void store_tile(const T* cs, int rows, int cols, char* dst,
                                           size_t row_bytes) {
  const int cb = cols * (int)sizeof(T);
  if (((uintptr_t)dst | row_bytes | (size_t)cb) % 16 == 0) {
    const int cpr = cb / 16, total = rows * cpr;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int r = i / cpr, c = i - r * cpr;
      const uint4 x = *reinterpret_cast<const uint4*>(cs + r * kPitch + c * (16 / (int)sizeof(T)));
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst + r * row_bytes + c * 16),
                   "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w)
                   : "memory");
    }
  } else {
    const int total = rows * cols;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int r = i / cols, c = i - r * cols;
      reinterpret_cast<T*>(dst + r * row_bytes)[c] = cs[r * kPitch + c];
    }
  }
}

}  // namespace tile
}  // namespace fco

#endif /* FCO_CUDA_GEMM_TILE_CUH_ */

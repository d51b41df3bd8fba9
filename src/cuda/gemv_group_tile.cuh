/*
 * gemv_group_tile.cuh — the mma.sync grouped GEMV tile of the fused GEMV + AllReduce one-shot
 * for M 17..64 in bf16 / f16 (src/cuda/gemv_allreduce.cu, FCO_GEMV_GROUP): one block of 8 warps
 * computes the fp32 partials of kG consecutive 16-column tiles at once,
 * p[tile][m][n] = Σ_k x[m][k] · W[n0 + 16·tile + n][k], over this rank's K. The grouped kernel
 * runs it off the vector path (and with FCO_GEMV_GROUP_MMA=1); on the vector path it runs
 * gemv_group_wgmma.cuh's tile, which leaves the same result and is ~1.7× faster (run 429aee0:
 * this tile's ldmatrix + HMMA at 8 warps per SM cost about cuBLAS's whole GEMM).
 *
 * Why groups: gemv_tile.cuh's tile_mma reads x (M rows) from L2 for every 16-column tile; at
 * M = 64 that is 4× the bytes of the tile's W. Here x goes through shared memory once per group
 * of kG tiles: x bytes per W byte drop from M/16 to M/(16·kG).
 *
 * Ring: kStages chunks of kGroupKC = 128 elements of K; a chunk holds x [kMT·8 rows][128] and
 * W [kG·16 rows][128], both loaded with cp.async (16 bytes per thread and copy, nothing held
 * in registers), kStages − 1 chunks in flight while one is consumed (as many chunks as fit
 * ~200 KB, at most 6: kMT = 8, kG = 4: 6 stages of 32 KB, 80 KB of W in flight per SM); each
 * group starts at its own chunk of K (rotation), so the blocks do not all read the same x
 * lines at once. Rows ≥ M or ≥ N repeat the last valid row (never stored). In a chunk the
 * 16-byte unit u of row r sits at u ^ (r & 7): the 8 row addresses of one ldmatrix phase (8
 * consecutive rows, one unit) hit 8 distinct bank groups.
 *
 * Warps: warp w takes the tile pair w % (kG/2) (32 rows of W: two m16 A fragments, so each x
 * fragment read from shared memory feeds both tiles) and the K slice w / (kG/2) of every chunk
 * (kS = 16 / kG slices of 128 / kS elements). mma.sync m16n8k16 with W as A and x as B, both
 * fragments loaded with ldmatrix.x4 in the standard layout (no register shuffles: the 16-byte
 * loads of gemv_tile.cuh's permuted-k fragments need four register moves per mma to build A,
 * which made the first version of this tile issue-bound).
 * Also in the file: group_red_bytes / group_smem_bytes (its shared memory), group_off (the
 * swizzle), group_load (the ring's copies).
 *
 * K: whole chunks through the ring (vector path: W, x and K·esize 16-byte aligned); the rest
 * (K % 128, or all of K without the vector path) in 32-element chunks with guarded scalar
 * loads from global memory, split over the kS slices as the ring's chunks are. Rows are ld
 * elements apart (ld ≥ K): a split group's slice passes x, W advanced to its first k and its
 * length as K (the vector path then needs ld·esize % 16 == 0 too).
 * Result: out [kG][64][16] fp32 at the start of smem (aliasing the ring, after a block
 * barrier), each tile's kS slices summed in slice order (deterministic); rows ≥ M unspecified.
 * The same result as gemv_group_wgmma.cuh's tile. All threads of the block call group_tile; it
 * begins and ends with a block barrier.
 */
#ifndef FCO_CUDA_GEMV_GROUP_TILE_CUH_
#define FCO_CUDA_GEMV_GROUP_TILE_CUH_

#include "cp_async.cuh"
#include "gemv_tile.cuh"

namespace fco {
namespace gemv {

constexpr int kGroupWarps = 8;
constexpr int kGroupKC = 128; /* k elements per ring chunk */
constexpr uint32_t kGroupRowBytes = kGroupKC * 2;

/* One ring chunk: x rows then W rows. */
template <int kMT, int kG>
__host__ __device__ constexpr uint32_t group_chunk_bytes() {
  return (uint32_t)(kMT * 8 + kG * 16) * kGroupRowBytes;
}
/* Ring depth: as many chunks as fit ~200 KB, 2..6. */
template <int kMT, int kG>
__host__ __device__ constexpr int group_stages() {
  constexpr int s = (int)((200u << 10) / group_chunk_bytes<kMT, kG>());
  return s < 2 ? 2 : s > 6 ? 6 : s;
}
/* The partials: [warp][2 tiles][kMT·8 rows][16] fp32. */
template <int kMT>
__host__ __device__ constexpr size_t group_red_bytes() {
  return (size_t)kGroupWarps * 2 * kMT * 8 * kTileN * 4;
}
/* Dynamic shared memory of the grouped tile. */
template <int kMT, int kG>
__host__ __device__ constexpr size_t group_smem_bytes() {
  constexpr size_t ring = (size_t)group_stages<kMT, kG>() * group_chunk_bytes<kMT, kG>();
  return ring > group_red_bytes<kMT>() ? ring : group_red_bytes<kMT>();
}

/* Byte offset of 16-byte unit u of row r inside a chunk's rows (swizzled, see the header). */
__device__ __forceinline__ uint32_t group_off(int r, int u) {
  return (uint32_t)(r * kGroupRowBytes + ((u ^ (r & 7)) << 4));
}

/* ldmatrix.x4: four 8×8 b16 matrices, lane l giving the row address of matrix l / 8. */
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                        uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

/* All threads: cp.async of x[:, k0 .. k0 + 128) and W[n0 .., k0 .. k0 + 128) into a chunk.
 * Thread t copies unit t % 16 of rows t / 16, t / 16 + 16, ... (a half warp copies the 256
 * contiguous bytes of one row per step). Rows ≥ M (x) or ≥ N (W) copy the last valid row
 * instead (never stored: their outputs are dropped), so every copy is one 64-bit add and the
 * cp.async: the rows' base pointers do not change from chunk to chunk (hoisted). */
template <typename T, int kMT, int kG>
__device__ __forceinline__ void group_load(uint32_t dst, const T* x, const T* w, int M, int N,
                                           int n0, int64_t ld, int64_t k0) {
  constexpr int kUnits = kGroupKC / 8;                /* 16-byte units per row */
  constexpr int kRowStep = kGroupWarps * 32 / kUnits; /* rows per copy step */
  static_assert(kUnits <= 32 && (kMT * 8) % kRowStep == 0 && (kG * 16) % kRowStep == 0 &&
                    kRowStep % 8 == 0,
                "whole copy steps, one swizzle per thread");
  const int r0 = threadIdx.x / kUnits, u = threadIdx.x % kUnits;
  const uint32_t d0 = dst + group_off(r0, u); /* rows r0 + kRowStep·i have r0's swizzle */
#pragma unroll
  for (int i = 0; i < kMT * 8 / kRowStep; ++i)
    cp_async16(d0 + (uint32_t)(i * kRowStep) * kGroupRowBytes,
               x + (int64_t)min(r0 + kRowStep * i, M - 1) * ld + u * 8 + k0, 16);
#pragma unroll
  for (int i = 0; i < kG * 16 / kRowStep; ++i)
    cp_async16(d0 + (uint32_t)(kMT * 8 + i * kRowStep) * kGroupRowBytes,
               w + (int64_t)min(n0 + r0 + kRowStep * i, N - 1) * ld + u * 8 + k0, 16);
}

template <typename T, int kMT, int kG>
__device__ __forceinline__ void group_tile(const T* __restrict__ w, const T* __restrict__ x,
                                           int M, int N, int64_t K, int64_t ld, int n0, bool vec,
                                           unsigned char* smem) {
  static_assert(sizeof(T) == 2, "grouped tile: bf16 / f16");
  static_assert(kG == 2 || kG == 4 || kG == 8, "grouped tile: 2, 4 or 8 tiles");
  constexpr int kPairs = kG / 2;
  constexpr int kS = kGroupWarps / kPairs; /* K slices per chunk */
  static_assert(kGroupKC / kS >= 16, "at least one k16 step per warp and chunk");
  constexpr int kStages = group_stages<kMT, kG>();
  constexpr uint32_t kChunkBytes = group_chunk_bytes<kMT, kG>();
  constexpr uint32_t kWBase = (uint32_t)kMT * 8 * kGroupRowBytes; /* W rows in a chunk */
  constexpr int kSteps = kGroupKC / kS / 16; /* k16 steps per chunk and warp */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int tp = warp % kPairs, sl = warp / kPairs;
  const uint32_t ring = smem_u32(smem);
  /* ldmatrix row addresses of this lane (byte offsets in a chunk) and unit offsets. */
  const uint32_t l7 = (uint32_t)(lane & 7);
  const uint32_t a_row = kWBase + (uint32_t)(tp * 32 + (lane & 7) + 8 * ((lane >> 3) & 1)) * kGroupRowBytes;
  const uint32_t a_u = (uint32_t)(lane >> 4);
  const uint32_t b_row = (uint32_t)((lane & 7) + 8 * (lane >> 4)) * kGroupRowBytes;
  const uint32_t b_u = (uint32_t)((lane >> 3) & 1);
  float acc[2][kMT][4];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) acc[h][mt][0] = acc[h][mt][1] = acc[h][mt][2] = acc[h][mt][3] = 0.f;

  const int64_t nfull = vec ? K / kGroupKC : 0;
  /* Blocks start at different chunks (the group's index, mod the chunks): at any moment the
   * grid reads different x lines and different W columns, instead of every block the same. */
  const int64_t rot = nfull > 0 ? (int64_t)(n0 / (kG * kTileN)) % nfull : 0;
  __syncthreads(); /* the previous group's partials (aliasing the ring) have been read */
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nfull)
      group_load<T, kMT, kG>(ring + st * kChunkBytes, x, w, M, N, n0, ld,
                             ((st + rot) % nfull) * kGroupKC);
    cp_async_commit();
  }
#pragma unroll 1
  for (int64_t c = 0; c < nfull; ++c) {
    cp_async_wait<kStages - 2>();
    __syncthreads(); /* chunk c is in the ring; every warp is done with chunk c - 1 */
    if (c + kStages - 1 < nfull)
      group_load<T, kMT, kG>(ring + (uint32_t)((c + kStages - 1) % kStages) * kChunkBytes, x, w,
                             M, N, n0, ld, ((c + kStages - 1 + rot) % nfull) * kGroupKC);
    cp_async_commit();
    /* k16 steps of this warp's slice: A = the two W tiles (ldmatrix.x4 each: rows 0-7 / 8-15
     * × k 0-7 / 8-15), B = x rows in pairs of m-tiles (ldmatrix.x4: m-tile 2mp and 2mp + 1
     * × k 0-7 / 8-15): fragments in the standard mma layout, k in order. Every row address
     * is lane-row + a multiple of 8, so the swizzle term is lane & 7. */
    const uint32_t cs = ring + (uint32_t)(c % kStages) * kChunkBytes;
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      const int u0 = (sl * (kGroupKC / kS) + st * 16) / 8;
      uint32_t a[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        ldsm_x4(cs + a_row + (uint32_t)(h * 16) * kGroupRowBytes + (((u0 + a_u) ^ l7) << 4),
                a[h][0], a[h][1], a[h][2], a[h][3]);
#pragma unroll
      for (int mp = 0; mp < kMT / 2; ++mp) {
        uint32_t b[4];
        ldsm_x4(cs + b_row + (uint32_t)(mp * 16) * kGroupRowBytes + (((u0 + b_u) ^ l7) << 4),
                b[0], b[1], b[2], b[3]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          Mma<T>::run(acc[h][2 * mp], a[h][0], a[h][1], a[h][2], a[h][3], b[0], b[1]);
          Mma<T>::run(acc[h][2 * mp + 1], a[h][0], a[h][1], a[h][2], a[h][3], b[2], b[3]);
        }
      }
    }
  }
  /* The rest of K in 32-element chunks, slice sl taking every kS-th. */
  const int64_t c0 = nfull * (kGroupKC / kChunk), nchunks = (K + kChunk - 1) / kChunk;
  const T* wr[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < 2; ++i)
      wr[h][i] = w + (int64_t)min(n0 + tp * 32 + h * 16 + i * 8 + g, N - 1) * ld;
#pragma unroll 1
  for (int64_t cc = c0 + sl; cc < nchunks; cc += kS) {
    const int64_t k = cc * kChunk + tq * 8;
    uint4 a[2][2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < 2; ++i) a[h][i] = load8_guarded((const uint16_t*)wr[h][i], k, K);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const uint4 xv =
          load8_guarded((const uint16_t*)(x + (int64_t)min(mt * 8 + g, M - 1) * ld), k, K);
      mma_chunk<T>(acc[0][mt], a[0][0], a[0][1], xv);
      mma_chunk<T>(acc[1][mt], a[1][0], a[1][1], xv);
    }
  }
  cp_async_wait<0>();
  __syncthreads(); /* every warp is done with the ring: the partials may overwrite it */
  /* C fragment: acc[..][0..1] = (n g, m 2tq..2tq+1), acc[..][2..3] = (n g+8, same m). */
  float(*red)[kTileN] = reinterpret_cast<float(*)[kTileN]>(smem) + (size_t)warp * 2 * kMT * 8;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float(*rh)[kTileN] = red + h * kMT * 8;
      const int m = mt * 8 + 2 * tq;
      if (m < M) {
        rh[m][g] = acc[h][mt][0];
        rh[m][g + 8] = acc[h][mt][2];
      }
      if (m + 1 < M) {
        rh[m + 1][g] = acc[h][mt][1];
        rh[m + 1][g + 8] = acc[h][mt][3];
      }
    }
  __syncthreads();
  /* The group's partials, each tile's kS slices summed in slice order, into out [kG][64][16]
   * at the start of smem (over red: every thread first sums its float4s in registers). */
  constexpr int kPer = (kG * 64 * kTileN / 4 + kGroupWarps * 32 - 1) / (kGroupWarps * 32);
  float4 sum[kPer];
  const float(*rd)[kTileN] = reinterpret_cast<const float(*)[kTileN]>(smem);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int idx = threadIdx.x + j * kGroupWarps * 32; /* float4 idx of out: tile, row, quarter */
    const int tw = idx / (64 * 4), m = (idx / 4) % 64, n = (idx % 4) * 4;
    sum[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (idx < kG * 64 * 4 && m < M)
#pragma unroll
      for (int q = 0; q < kS; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(
            &rd[((q * kPairs + tw / 2) * 2 + tw % 2) * kMT * 8 + m][n]);
        sum[j].x += v.x;
        sum[j].y += v.y;
        sum[j].z += v.z;
        sum[j].w += v.w;
      }
  }
  __syncthreads();
  float4* out = reinterpret_cast<float4*>(smem);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int idx = threadIdx.x + j * kGroupWarps * 32;
    if (idx < kG * 64 * 4) out[idx] = sum[j];
  }
  __syncthreads();
}

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_GROUP_TILE_CUH_ */

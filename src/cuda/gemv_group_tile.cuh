/*
 * gemv_group_tile.cuh — the grouped GEMV tile of the fused GEMV + AllReduce one-shot for
 * M 17..64 in bf16 / f16 (src/cuda/gemv_allreduce.cu, FCO_GEMV_GROUP): one block of 8 warps
 * computes the fp32 partials of kG consecutive 16-column tiles at once,
 * p[tile][m][n] = Σ_k x[m][k] · W[n0 + 16·tile + n][k], over this rank's K.
 *
 * Why: gemv_tile.cuh's tile_mma reads x (M rows) from L2 for every 16-column tile; at M = 64
 * that is 4× the bytes of the tile's W, and the one-tile kernels run at a third of HBM speed.
 * Here x goes through shared memory once per group of kG tiles, shared by the kG tiles: x
 * bytes per W byte drop from M/16 to M/(16·kG).
 *
 * Ring: kStages chunks of kGroupKC = 256 elements of K; a chunk holds x [kMT·8 rows][256] and
 * W [kG·16 rows][256], both loaded with cp.async (16 bytes per thread and copy, nothing held
 * in registers), kStages − 1 chunks in flight while one is consumed (64 KB of W per SM at
 * kMT = 8: 3 stages of 64 KB; kMT = 4: 4 stages of 48 KB). Rows ≥ M or ≥ N are zero-filled
 * (cp.async with 0 source bytes: nothing read; never stored). In a chunk the 16-byte unit u of
 * row r sits at u ^ ((r & 1) << 2): the 8 lanes of one 16-byte lds phase (rows g, g + 1,
 * tq 0..3) then hit 8 distinct bank groups.
 *
 * Warps: warp w takes the tile pair w % (kG/2) (32 rows of W: two m16 A fragments, so each x
 * fragment read from shared memory feeds both tiles) and the K slice w / (kG/2) of every chunk
 * (kS = 16 / kG slices of kU = kG / 2 32-element mma chunks). Fragments as in gemv_tile.cuh:
 * mma.sync m16n8k16 with W as A and x as B, a thread's 16-byte lds of W rows g / g + 8 and of x
 * row g at the same physical k feed two mmas (the same k permutation in A and B).
 *
 * K: whole chunks through the ring (vector path: W, x and K·esize 16-byte aligned); the rest
 * (K % 256, or all of K without the vector path) in 32-element chunks with guarded scalar
 * loads from global memory, split over the kS slices as the ring's chunks are.
 * Result: in shared memory aliasing the ring (after a block barrier), read with group_sum4,
 * which sums a tile's kS slices in slice order (deterministic). All threads of the block call
 * group_tile; it begins and ends with a block barrier.
 */
#ifndef FCO_CUDA_GEMV_GROUP_TILE_CUH_
#define FCO_CUDA_GEMV_GROUP_TILE_CUH_

#include "cp_async.cuh"
#include "gemv_tile.cuh"

namespace fco {
namespace gemv {

constexpr int kGroupWarps = 8;
constexpr int kGroupKC = 256; /* k elements per ring chunk */
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
  return (uint32_t)(r * kGroupRowBytes + ((u ^ ((r & 1) << 2)) << 4));
}

/* All threads: cp.async of x[:, k0 .. k0 + 256) and W[n0 .., k0 .. k0 + 256) into a chunk. */
template <typename T, int kMT, int kG>
__device__ __forceinline__ void group_load(uint32_t dst, const T* x, const T* w, int M, int N,
                                           int n0, int64_t K, int64_t k0) {
  constexpr int kUnits = kGroupKC / 8; /* 16-byte units per row */
  constexpr int kRows = kMT * 8 + kG * 16;
#pragma unroll 4
  for (int q = threadIdx.x; q < kRows * kUnits; q += kGroupWarps * 32) {
    const int r = q / kUnits, u = q % kUnits;
    const bool isx = r < kMT * 8;
    const int row = isx ? r : n0 + r - kMT * 8;
    const bool in = isx ? row < M : row < N;
    const T* src = (isx ? x : w) + (in ? (int64_t)row * K + k0 + u * 8 : 0);
    cp_async16(dst + group_off(r, u), src, in ? 16 : 0);
  }
}

template <typename T, int kMT, int kG>
__device__ __forceinline__ void group_tile(const T* __restrict__ w, const T* __restrict__ x,
                                           int M, int N, int64_t K, int n0, bool vec,
                                           unsigned char* smem) {
  static_assert(sizeof(T) == 2, "grouped tile: bf16 / f16");
  static_assert(kG == 2 || kG == 4, "grouped tile: 2 or 4 tiles");
  constexpr int kPairs = kG / 2;
  constexpr int kS = kGroupWarps / kPairs; /* K slices per chunk */
  constexpr int kU = kGroupKC / (kS * kChunk);
  constexpr int kStages = group_stages<kMT, kG>();
  constexpr uint32_t kChunkBytes = group_chunk_bytes<kMT, kG>();
  constexpr uint32_t kWBase = (uint32_t)kMT * 8 * kGroupRowBytes; /* W rows in a chunk */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int tp = warp % kPairs, sl = warp / kPairs;
  const uint32_t ring = smem_u32(smem);
  float acc[2][kMT][4];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) acc[h][mt][0] = acc[h][mt][1] = acc[h][mt][2] = acc[h][mt][3] = 0.f;

  const int64_t nfull = vec ? K / kGroupKC : 0;
  __syncthreads(); /* the previous group's partials (aliasing the ring) have been read */
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nfull) group_load<T, kMT, kG>(ring + st * kChunkBytes, x, w, M, N, n0, K, st * kGroupKC);
    cp_async_commit();
  }
#pragma unroll 1
  for (int64_t c = 0; c < nfull; ++c) {
    cp_async_wait<kStages - 2>();
    __syncthreads(); /* chunk c is in the ring; every warp is done with chunk c - 1 */
    if (c + kStages - 1 < nfull)
      group_load<T, kMT, kG>(ring + (uint32_t)((c + kStages - 1) % kStages) * kChunkBytes, x, w,
                             M, N, n0, K, (c + kStages - 1) * kGroupKC);
    cp_async_commit();
    /* Rows mt·8 + g (x) and tp·32 + h·16 + {g, g + 8} (W) have the parity of g: the m-tile and
     * the tile only add whole 8-row steps (immediates). */
    const unsigned char* cs = smem + (size_t)(c % kStages) * kChunkBytes;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t lo = group_off(g, (sl * (kU * kChunk) + u * kChunk) / 8 + tq);
      const unsigned char* ws = cs + kWBase + (uint32_t)tp * 32 * kGroupRowBytes + lo;
      uint4 a[2][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        a[h][0] = *reinterpret_cast<const uint4*>(ws + (h * 16) * kGroupRowBytes);
        a[h][1] = *reinterpret_cast<const uint4*>(ws + (h * 16 + 8) * kGroupRowBytes);
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const uint4 xv = *reinterpret_cast<const uint4*>(cs + lo + mt * 8 * kGroupRowBytes);
        mma_chunk<T>(acc[0][mt], a[0][0], a[0][1], xv);
        mma_chunk<T>(acc[1][mt], a[1][0], a[1][1], xv);
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
      wr[h][i] = w + (int64_t)min(n0 + tp * 32 + h * 16 + i * 8 + g, N - 1) * K;
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
          load8_guarded((const uint16_t*)(x + (int64_t)min(mt * 8 + g, M - 1) * K), k, K);
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
}

/* After group_tile: the fp32 partial of tile tw (0..kG-1) of the group, row m, columns
 * n..n+3, summed over the kS K slices in slice order. */
template <int kMT, int kG>
__device__ __forceinline__ float4 group_sum4(const unsigned char* smem, int tw, int m, int n) {
  constexpr int kPairs = kG / 2, kS = kGroupWarps / kPairs;
  const float(*red)[kTileN] = reinterpret_cast<const float(*)[kTileN]>(smem);
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int sl = 0; sl < kS; ++sl) {
    const int warp = sl * kPairs + tw / 2;
    const float4 v =
        *reinterpret_cast<const float4*>(&red[(warp * 2 + tw % 2) * kMT * 8 + m][n]);
    r.x += v.x;
    r.y += v.y;
    r.z += v.z;
    r.w += v.w;
  }
  return r;
}

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_GROUP_TILE_CUH_ */

/*
 * gemv_group_tile.cuh — the grouped GEMV tile of the fused GEMV + AllReduce one-shot for
 * M 17..64 in bf16 / f16 (src/cuda/gemv_allreduce.cu, FCO_GEMV_GROUP): one block of 8 warps
 * computes the fp32 partials of kG consecutive 16-column tiles at once,
 * p[tile][m][n] = Σ_k x[m][k] · W[n0 + 16·tile + n][k], over this rank's K.
 *
 * Why: gemv_tile.cuh's tile_mma reads x (M rows) from L2 for every 16-column tile; at M = 64
 * that is 4× the bytes of the tile's W, and the one-tile kernels run at a third of HBM speed.
 * Here x goes through shared memory once per group of kG tiles (cp.async ring of kStages
 * chunks of kKC elements of K), shared by the kG tiles: x bytes per W byte drop from M/16 to
 * M/(16·kG).
 *
 * Warps: warp w takes tile w % kG and K slice w / kG of every chunk (kS = 8 / kG slices of
 * kU = kG 32-element mma chunks: kKC = kS · kU · 32 = 256). W is streamed straight from global
 * memory into registers exactly as in tile_mma (16-byte ld.global.nc.L1::no_allocate, rows g and
 * g + 8, the same permuted-k fragment trick), one chunk ahead of the mmas (the next chunk's W
 * loads are in flight during this chunk's mmas and the block barrier). x rows come from shared
 * memory, one 16-byte lds per m-tile and 32-element chunk, at the same physical k as the W
 * registers: A and B use the same k permutation (see gemv_tile.cuh). Shared layout of a chunk:
 * [kMT·8 rows][kKC] with the 16-byte unit u of row r stored at u ^ ((r & 1) << 2): the 8 lanes
 * of one lds phase (rows g, g + 1 of an m-tile, tq 0..3) then hit 8 distinct bank groups.
 * Rows ≥ M are zero-filled (cp.async with 0 source bytes: nothing is read).
 *
 * K: whole chunks of kKC through the ring (vector path: W, x and K·esize 16-byte aligned);
 * the rest (K % kKC, or all of K without the vector path) in 32-element chunks with guarded
 * scalar loads from global memory, split over the kS slices as the ring's chunks are.
 * Result: red[w][m][16] (this warp's [tile w % kG, slice w / kG] partial, m < M), in shared
 * memory aliasing the ring (after a block barrier); the caller sums the kS slices of a tile in
 * slice order (deterministic). All threads of the block call it; it begins and ends with a
 * block barrier.
 */
#ifndef FCO_CUDA_GEMV_GROUP_TILE_CUH_
#define FCO_CUDA_GEMV_GROUP_TILE_CUH_

#include "cp_async.cuh"
#include "gemv_tile.cuh"

namespace fco {
namespace gemv {

constexpr int kGroupWarps = 8;
constexpr int kGroupKC = 256;    /* k elements per ring chunk */
constexpr int kGroupStages = 3;  /* ring depth */

/* Bytes of dynamic shared memory the grouped tile needs at kMT m-tiles (16-bit dtypes). */
template <int kMT>
constexpr size_t group_smem_bytes() {
  constexpr size_t ring = (size_t)kGroupStages * kMT * 8 * kGroupKC * 2;
  constexpr size_t red = (size_t)kGroupWarps * kMT * 8 * kTileN * 4;
  return ring > red ? ring : red;
}

/* Byte offset of 16-byte unit u of row r inside one ring chunk (swizzled, see the header). */
__device__ __forceinline__ uint32_t group_x_off(int r, int u) {
  return (uint32_t)(r * (kGroupKC * 2) + ((u ^ ((r & 1) << 2)) << 4));
}

/* All threads: cp.async of x[:, k0 .. k0 + kKC) into ring chunk `dst` (rows ≥ M zero). */
template <typename T, int kMT>
__device__ __forceinline__ void group_load_x(uint32_t dst, const T* x, int M, int64_t K,
                                             int64_t k0) {
  constexpr int kUnits = kGroupKC / 8; /* 16-byte units per row */
  for (int q = threadIdx.x; q < kMT * 8 * kUnits; q += kGroupWarps * 32) {
    const int r = q / kUnits, u = q % kUnits;
    const bool in = r < M;
    const T* src = x + (in ? (int64_t)r * K + k0 + u * 8 : 0);
    cp_async16(dst + group_x_off(r, u), src, in ? 16 : 0);
  }
}

template <typename T, int kMT, int kG>
__device__ __forceinline__ void group_tile(const T* __restrict__ w, const T* __restrict__ x,
                                           int M, int N, int64_t K, int n0, bool vec,
                                           unsigned char* smem) {
  static_assert(sizeof(T) == 2, "grouped tile: bf16 / f16");
  static_assert(kG == 2 || kG == 4, "grouped tile: 2 or 4 tiles");
  constexpr int kS = kGroupWarps / kG; /* K slices per chunk */
  constexpr int kU = kGroupKC / (kS * kChunk);
  constexpr uint32_t kChunkBytes = (uint32_t)kMT * 8 * kGroupKC * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int tw = warp % kG, sl = warp / kG;
  const int r0 = min(n0 + tw * kTileN + g, N - 1), r1 = min(n0 + tw * kTileN + g + 8, N - 1);
  const T* w0 = w + (int64_t)r0 * K;
  const T* w1 = w + (int64_t)r1 * K;
  const uint32_t ring = smem_u32(smem);
  float acc[kMT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;

  const int64_t nfull = vec ? K / kGroupKC : 0;
  __syncthreads(); /* the previous group's red (aliasing the ring) has been read */
#pragma unroll
  for (int st = 0; st < kGroupStages - 1; ++st) {
    if (st < nfull) group_load_x<T, kMT>(ring + st * kChunkBytes, x, M, K, st * kGroupKC);
    cp_async_commit();
  }
  /* This warp's k inside a chunk: slice sl, 32-element chunk u, lane's 8 elements at tq·8. */
  const int kin = sl * (kU * kChunk) + tq * 8;
  uint4 a0[kU], a1[kU];
  if (nfull > 0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      a0[u] = ld_stream_v4(w0 + kin + u * kChunk);
      a1[u] = ld_stream_v4(w1 + kin + u * kChunk);
    }
  }
#pragma unroll 1
  for (int64_t c = 0; c < nfull; ++c) {
    cp_async_wait<kGroupStages - 2>();
    __syncthreads(); /* chunk c is in the ring; every warp is done with chunk c - 1 */
    if (c + kGroupStages - 1 < nfull)
      group_load_x<T, kMT>(ring + ((c + kGroupStages - 1) % kGroupStages) * kChunkBytes, x, M, K,
                           (c + kGroupStages - 1) * kGroupKC);
    cp_async_commit();
    /* The next chunk's W (this one again on the last: in bounds, loads stay unconditional). */
    const int64_t kn = (c + 1 < nfull ? c + 1 : c) * kGroupKC + kin;
    uint4 b0[kU], b1[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      b0[u] = ld_stream_v4(w0 + kn + u * kChunk);
      b1[u] = ld_stream_v4(w1 + kn + u * kChunk);
    }
    /* Row mt·8 + g has the parity of g: the m-tile only adds mt · 8 rows (an immediate). */
    const unsigned char* xs = smem + (size_t)(c % kGroupStages) * kChunkBytes;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const unsigned char* xa = xs + group_x_off(g, (sl * (kU * kChunk) + u * kChunk) / 8 + tq);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        mma_chunk<T>(acc[mt], a0[u], a1[u],
                     *reinterpret_cast<const uint4*>(xa + mt * 8 * kGroupKC * 2));
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) a0[u] = b0[u], a1[u] = b1[u];
  }
  /* The rest of K in 32-element chunks, slice sl taking every kS-th. */
  const int64_t c0 = nfull * (kGroupKC / kChunk), nchunks = (K + kChunk - 1) / kChunk;
#pragma unroll 1
  for (int64_t cc = c0 + sl; cc < nchunks; cc += kS) {
    const int64_t k = cc * kChunk + tq * 8;
    const uint4 v0 = load8_guarded((const uint16_t*)w0, k, K);
    const uint4 v1 = load8_guarded((const uint16_t*)w1, k, K);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
      mma_chunk<T>(acc[mt], v0, v1,
                   load8_guarded((const uint16_t*)(x + (int64_t)min(mt * 8 + g, M - 1) * K), k, K));
  }
  cp_async_wait<0>();
  __syncthreads(); /* every warp is done with the ring: red may overwrite it */
  float(*red)[kTileN] = reinterpret_cast<float(*)[kTileN]>(smem) + (size_t)warp * kMT * 8;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const int m = mt * 8 + 2 * tq;
    if (m < M) {
      red[m][g] = acc[mt][0];
      red[m][g + 8] = acc[mt][2];
    }
    if (m + 1 < M) {
      red[m + 1][g] = acc[mt][1];
      red[m + 1][g + 8] = acc[mt][3];
    }
  }
  __syncthreads();
}

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_GROUP_TILE_CUH_ */

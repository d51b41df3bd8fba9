/*
 * gemv_tile.cuh — the GEMV tile math of the fused GEMV + AllReduce kernels
 * (src/cuda/gemv_allreduce.cu): one block computes the fp32 partial of one 16-column output
 * tile, p[m][n] = Σ_k x[m][k] · W[n0 + n][k] for m < M ≤ 64, n < 16, over this rank's K.
 *
 * Layout: W [N][K] and x [M][K] row-major (k contiguous). The block's kW warps split K: warp w
 * takes groups of kU consecutive 32-element chunks, w, w + kW, w + 2kW, ... (each row is read
 * in kU·64-byte runs, 2·kU 16-byte loads in flight per thread), and leaves its partial in
 * red[w][m][16]; the caller sums the kW warps in warp order (deterministic). kU and kW are
 * template parameters (defaults kUnroll, kWarps); the caller picks them per M
 * (gemv_allreduce.cu; bench/probe/gemv_stream_probe.cu measures the choices). kPipe (bf16 /
 * f16) issues a warp's next group's W loads before the current group's mmas (register
 * pipeline); the chunks per warp and the mma order are those of the plain loop.
 *
 * bf16 / f16: tensor cores, mma.sync m16n8k16 (fp32 accumulate) with W as the row-major A
 *   (16 rows = the tile's columns) and x as the column-major B (8 columns = 8 rows of x per
 *   m-tile, kMT m-tiles). A thread (group g = lane/4, tq = lane%4) loads 16 bytes = 8 elements
 *   of W rows g and g+8 and of x row g at k = chunk·32 + tq·8. The fragment layout wants
 *   logical k {2tq, 2tq+1, 2tq+8, 2tq+9} from a thread; we feed physical k tq·8 + {0..3} to
 *   the first mma and tq·8 + {4..7} to the second. A dot product does not care in which order
 *   its k are paired, as long as A and B use the same permutation, and both do: the physical k
 *   of a fragment slot depends only on tq and the slot. So one 16-byte load feeds two mmas with
 *   no shuffles and no shared-memory staging.
 * f32: CUDA cores (no TF32: f32 callers expect fp32 products), one row at a time per warp,
 *   float4 loads of W, warp-shuffle reduction per row.
 * Rows ≥ N and x rows ≥ M are clamped to the last valid row (read, never stored); k ≥ K is
 * read as zero (scalar path). The vector path needs W, x and K·esize 16-byte aligned; `vec`
 * false takes the scalar path for every chunk (slow, correct).
 * prefetch_tile asks L2 (bulk prefetch, nothing else touched) for the first bytes of a tile's
 * W in the order the tile reads them: the PDL prologue of the fused kernels (FCO_GEMV_PDL=1).
 */
#ifndef FCO_CUDA_GEMV_TILE_CUH_
#define FCO_CUDA_GEMV_TILE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace fco {
namespace gemv {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileN = 16; /* == FCO_GEMV_TILE_N */
constexpr int kChunk = 32; /* k per mma pair */
constexpr int kUnroll = 4; /* chunks per warp step */

/* W is read once: do not keep it in L1; ask L2 to fetch 256-byte sectors ahead. */
__device__ __forceinline__ uint4 ld_stream_v4(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ float4 ld_stream_f4(const float* p) {
  const uint4 v = ld_stream_v4(p);
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                     __uint_as_float(v.w));
}

template <typename T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  __device__ static __forceinline__ void run(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<__half> {
  __device__ static __forceinline__ void run(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};

/* Both mmas of one 32-k chunk: w0 / w1 = rows g / g+8, xv = x row g (8 elements each). */
template <typename T>
__device__ __forceinline__ void mma_chunk(float (&d)[4], const uint4& w0, const uint4& w1,
                                          const uint4& xv) {
  Mma<T>::run(d, w0.x, w1.x, w0.y, w1.y, xv.x, xv.y);
  Mma<T>::run(d, w0.z, w1.z, w0.w, w1.w, xv.z, xv.w);
}

/* 8 consecutive 16-bit elements from p[k..k+8), zero where k + i >= K. */
__device__ __forceinline__ uint4 load8_guarded(const uint16_t* p, int64_t k, int64_t K) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = k + 2 * i < K ? (uint32_t)__ldg(p + k + 2 * i) : 0u;
    const uint32_t hi = k + 2 * i + 1 < K ? (uint32_t)__ldg(p + k + 2 * i + 1) : 0u;
    w[i] = lo | (hi << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The mmas of one group of kU chunks at k0 (W rows g / g+8 in a0 / a1), x read here, in the
 * order u, then m-tile. */
template <typename T, int kMT, int kU>
__device__ __forceinline__ void mma_group(float (&acc)[kMT][4], const uint4 (&a0)[kU],
                                          const uint4 (&a1)[kU], const T* const (&xr)[kMT],
                                          int64_t k0) {
#pragma unroll
  for (int u = 0; u < kU; ++u)
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const uint4 xv = __ldg((const uint4*)(xr[mt] + k0 + u * kChunk));
      mma_chunk<T>(acc[mt], a0[u], a1[u], xv);
    }
}

/* bf16 / f16 tile. red: this warp's [kMT·8][kTileN] partial. All threads of the block call it
 * (no barrier inside). kPipe: register-pipelined loop (a warp's next group of W loads in
 * flight during this group's mmas: 4·kU 16-byte values of W held per thread instead of 2·kU).
 * Same groups per warp and same mma order as without it: for equal kU / kW the same bits. */
template <typename T, int kMT, int kU = kUnroll, int kW = kWarps, bool kPipe = false>
__device__ __forceinline__ void tile_mma(const T* __restrict__ w, const T* __restrict__ x, int M,
                                         int N, int64_t K, int n0, bool vec,
                                         float (*red)[kTileN]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int r0 = min(n0 + g, N - 1), r1 = min(n0 + g + 8, N - 1);
  const T* w0 = w + (int64_t)r0 * K;
  const T* w1 = w + (int64_t)r1 * K;
  const T* xr[kMT];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) xr[mt] = x + (int64_t)min(mt * 8 + g, M - 1) * K;
  float acc[kMT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;

  const int64_t nchunks = (K + kChunk - 1) / kChunk;
  const int64_t ngroups = vec ? (K / kChunk) / kU : 0;
  if constexpr (!kPipe) {
    for (int64_t gi = warp; gi < ngroups; gi += kW) {
      const int64_t k0 = gi * (kU * kChunk) + tq * 8;
      uint4 a0[kU], a1[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        a0[u] = ld_stream_v4(w0 + k0 + u * kChunk);
        a1[u] = ld_stream_v4(w1 + k0 + u * kChunk);
      }
      mma_group<T, kMT, kU>(acc, a0, a1, xr, k0);
    }
  } else {
    /* The next group's W loads go out before this group's mmas. On the last step "next" is
     * this group again (read twice, in bounds): the loads stay unconditional, since a
     * predicated load becomes a load into a temporary plus a move that waits for it. */
    uint4 a0[kU], a1[kU];
    int64_t gi = warp;
    if (gi < ngroups) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        a0[u] = ld_stream_v4(w0 + gi * (kU * kChunk) + tq * 8 + u * kChunk);
        a1[u] = ld_stream_v4(w1 + gi * (kU * kChunk) + tq * 8 + u * kChunk);
      }
    }
    for (; gi < ngroups; gi += kW) {
      const int64_t k0 = gi * (kU * kChunk) + tq * 8;
      const int64_t kn = gi + kW < ngroups ? k0 + kW * (kU * kChunk) : k0;
      uint4 b0[kU], b1[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        b0[u] = ld_stream_v4(w0 + kn + u * kChunk);
        b1[u] = ld_stream_v4(w1 + kn + u * kChunk);
      }
      mma_group<T, kMT, kU>(acc, a0, a1, xr, k0);
#pragma unroll
      for (int u = 0; u < kU; ++u) a0[u] = b0[u], a1[u] = b1[u];
    }
  }
  /* The chunks after the last whole group (or all of them without the vector path). */
  for (int64_t c = ngroups * kU + warp; c < nchunks; c += kW) {
    const int64_t k = c * kChunk + tq * 8;
    const uint4 a0 = load8_guarded((const uint16_t*)w0, k, K);
    const uint4 a1 = load8_guarded((const uint16_t*)w1, k, K);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
      mma_chunk<T>(acc[mt], a0, a1, load8_guarded((const uint16_t*)xr[mt], k, K));
  }
  /* C fragment: acc[0..1] = (n g, m 2tq..2tq+1), acc[2..3] = (n g+8, same m). */
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
}

/* f32 tile on CUDA cores: the warp walks the 16 rows; per row, lanes take float4s of its K
 * share (chunks of 128 = 32 lanes × 4), then a shuffle tree sums the lanes. kM ≥ M. */
template <int kM, int kW = kWarps>
__device__ __forceinline__ void tile_f32(const float* __restrict__ w, const float* __restrict__ x,
                                         int M, int N, int64_t K, int n0, bool vec,
                                         float (*red)[kTileN]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kC = 128;
  const int64_t nfull = vec ? K / kC : 0;
  for (int rr = 0; rr < kTileN; ++rr) {
    const float* wr = w + (int64_t)min(n0 + rr, N - 1) * K;
    float acc[kM];
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[m] = 0.f;
#pragma unroll 2
    for (int64_t c = warp; c < nfull; c += kW) {
      const int64_t k = c * kC + lane * 4;
      const float4 wv = ld_stream_f4(wr + k);
#pragma unroll
      for (int m = 0; m < kM; ++m)
        if (m < M) {
          const float4 xv = __ldg((const float4*)(x + (int64_t)m * K + k));
          acc[m] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
        }
    }
    for (int64_t k = nfull * kC + warp * 32 + lane; k < K; k += kW * 32) {
      const float wv = __ldg(wr + k);
#pragma unroll
      for (int m = 0; m < kM; ++m)
        if (m < M) acc[m] += wv * __ldg(x + (int64_t)m * K + k);
    }
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      if (m >= M) break;
      float s = acc[m];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) red[m][rr] = s;
    }
  }
}

/* Asynchronous L2 prefetch of [p, p + bytes) (bulk, Hopper's TMA path; nothing lands in
 * registers, shared memory or L1): p 16-byte aligned, bytes a multiple of 16. */
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

/* All threads (none of them waits). Ask L2 for the first ~`bytes` of W that tile(.., n0, ..)
 * will read, in the order it reads them: the mma tile advances its 16 rows together (each
 * warp step reads kU·64 bytes of every row), so each row's first bytes/16; the f32 tile walks
 * the rows one after another, so the strip's first `bytes` (pieces of 4 KB, one per thread:
 * bytes ≤ 4 KB × blockDim). Rows ≥ N are skipped, nothing past a row's K is asked for. Only
 * the vector path (W 16-byte aligned, K·esize % 16 == 0); `vec` false: nothing. */
template <typename T>
__device__ __forceinline__ void prefetch_tile(const T* w, int N, int64_t K, int n0, bool vec,
                                              uint32_t bytes) {
  if (!vec || bytes == 0) return;
  const int i = threadIdx.x;
  const uint64_t row_bytes = (uint64_t)K * sizeof(T);
  if constexpr (sizeof(T) == 4) {
    constexpr uint32_t kPiece = 4096;
    const uint64_t rows = (uint64_t)min(kTileN, N - n0);
    uint64_t len = rows * row_bytes;
    if (len > bytes) len = bytes;
    const uint64_t off = (uint64_t)i * kPiece;
    if (off < len)
      prefetch_l2_bulk((const char*)(w + (int64_t)n0 * K) + off,
                       (uint32_t)(len - off < kPiece ? len - off : kPiece));
  } else {
    if (i >= kTileN || n0 + i >= N) return;
    uint64_t len = bytes / kTileN;
    if (len > row_bytes) len = row_bytes;
    len &= ~(uint64_t)15;
    if (len) prefetch_l2_bulk(w + (int64_t)(n0 + i) * K, (uint32_t)len);
  }
}

/* Dispatch on the element type: red is this warp's slice of the block's [kW][8·kMT][16]. */
template <typename T, int kMT, int kU = kUnroll, int kW = kWarps, bool kPipe = false>
__device__ __forceinline__ void tile(const T* w, const T* x, int M, int N, int64_t K, int n0,
                                     bool vec, float (*red)[kTileN]) {
  if constexpr (sizeof(T) == 4)
    tile_f32<kMT * 8, kW>((const float*)w, (const float*)x, M, N, K, n0, vec, red);
  else
    tile_mma<T, kMT, kU, kW, kPipe>(w, x, M, N, K, n0, vec, red);
}

}  // namespace gemv
}  // namespace fco

#endif /* FCO_CUDA_GEMV_TILE_CUH_ */

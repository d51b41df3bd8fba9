/*
 * gemv_allreduce_chunks.cu — fco_gemv_allreduce impl 4 "cublas_chunks" on GPUs, device half:
 * the push and reduce kernels. The host half (run_chunks in gemv_allreduce_blas.cu) issues, per
 * call:
 *   user stream:  (rank 0 with a bias: y = bias), then per chunk c of output columns
 *                 [c·width, (c+1)·width) every local rank's cuBLAS GEMM of those columns
 *                 straight into its y (beta = 1 after the bias fill), an event after each chunk;
 *   push stream:  per chunk: wait for its event, then launch_push (chunk c of every local rank);
 *                 after the last: launch_reduce; the user stream then waits for the push stream.
 * So the push of chunk c (NVLink, a few SMs) runs while cuBLAS computes chunk c + 1: the
 * Flux / PyTorch async-TP design (gemm_alltoall's impl 2) for the row-parallel linear, where
 * cuBLAS streams W faster than the fused tiles (M 17..64: docs/gemv_allreduce.md). Every GEMM is
 * issued before the first kernel that waits (the reduce): no cuBLAS module is loaded lazily
 * while one of ours spins; preload() loads ours.
 *
 * Layout: the call with epoch e uses half (e & 1) of the data workspace (fco_ws_half_bytes):
 *   P slots of S = roundup(M·N·esize, 256) bytes, slot s = rank s's partial y as y's own [M][N]
 *   image (impl 3's workspace, 2·P·S). Rank me pushes its y's chunk c into slot me of every
 *   peer at the chunk's offsets; its own partial stays in y.
 * Pieces: chunk c, as L units of 16 bytes (vec) or of one element, in y's row-major order
 *   restricted to the chunk's columns, is cut into R = nb·rf reduce pieces [r·L/R, (r+1)·L/R);
 *   push piece b is reduce pieces b·rf .. b·rf + rf − 1. Push block b of a rank copies its piece
 *   to the P − 1 peers (me+1, me+2, ...), then raises sig[me][c·nb + b] = sig_value(e, 0) on each.
 * Reduce: block r of a rank takes reduce piece r of every chunk in order: its threads 0..P−1
 *   wait for the peers' flags of push piece r / rf, then it sums the P partials in rank order
 *   0..P−1 in fp32 (its own from y, the others from its slots), rounds to the dtype and writes
 *   y in place (each unit read then written by the same thread; its pushes ended before: the
 *   same stream). The same fp32 sum of the same dtype partials as impl 3's one-shot: y is
 *   bit-identical on every rank and to impl 3's. The last reduce block of a rank advances the
 *   epoch; the push kernels do not.
 * Workspace rule (src/core/internal.h): every rank waits in every call for flags every peer
 *   raises in that call (the reduce), so a peer is at most one call ahead, writing the other
 *   half. Flags hold the epoch: stale ones of earlier calls never satisfy a wait.
 * Failure: a wait past the timeout records FCO_ERR_TIMEOUT; the block stops, others notice the
 *   error at their next wait; the reduce kernel always ends (epoch_end) and y is then undefined.
 */
#include <stdint.h>

#include "gemv_allreduce_chunks.cuh"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace gvc {
namespace {

constexpr int kThreads = 512;
/* Units each thread has in flight per step: one 16-byte unit per thread and step left the
 * pushes latency-bound (8 blocks of 256 threads: 32 KB in flight per rank; run 1362c40-chunks:
 * impl 4 with one chunk 72 µs against impl 3's 48 at 8192² M = 64, local P = 2). */
constexpr int kPushUnroll = 8, kReduceUnroll = 4;
static_assert(kThreads >= FCO_MAX_GPU_RANKS + 1, "load_rank_view needs MAX+1 threads");

/* Chunk c's geometry in units (32-bit: a chunk has M·N·esize / unit < 2^31 of them, the op
 * layer bounds N below 2^31 and M by 64): units per row, total units, first column's byte. */
struct Geo {
  uint32_t upr, L;
  size_t col0;
};
__device__ __forceinline__ Geo geo(const ChunkParams& p, int c, int unit) {
  const int n0 = c * p.width;
  const int wc = min(p.width, p.N - n0);
  Geo g;
  g.upr = (uint32_t)((size_t)wc * p.es / unit);
  g.L = (uint32_t)p.M * g.upr;
  g.col0 = (size_t)n0 * p.es;
  return g;
}
/* Byte offset in y's [M][N] image of unit i of the chunk. */
__device__ __forceinline__ size_t unit_off(const ChunkParams& p, const Geo& g, uint32_t i, int unit) {
  const uint32_t m = i / g.upr, j = i - m * g.upr;
  return (size_t)m * p.N * p.es + g.col0 + (size_t)j * unit;
}
/* Piece q of R of a chunk of L units: [q·L/R, (q+1)·L/R). */
__device__ __forceinline__ uint32_t piece_at(uint32_t L, int q, int R) {
  return (uint32_t)((uint64_t)L * (uint32_t)q / (uint32_t)R);
}

/* The half's offset, or ~0 when the view does not match the launch (reported as internal). */
__device__ __forceinline__ size_t half_off(const RankView& v, const ChunkParams& p, uint64_t e) {
  const size_t H = fco_ws_half_bytes(v.ws_bytes);
  if (v.nranks < 2 || v.nranks > FCO_MAX_GPU_RANKS || v.rank < 0 || v.rank >= v.nranks ||
      (uint64_t)v.nranks * p.slot_bytes > H)
    return ~(size_t)0;
  return (size_t)(e & 1) * H;
}

/* U: the unit (uint4 = 16 bytes; else one element's bits). */
template <typename U>
__device__ __forceinline__ void put_unit(char* dst, const U& u) {
  if constexpr (sizeof(U) == 16) st_global_v4(dst, u);
  else *reinterpret_cast<U*>(dst) = u;
}

template <typename U>
__global__ void __launch_bounds__(kThreads) chunk_push_kernel(const ChunkParams p) {
  __shared__ RankView v;
  const int li = blockIdx.x / p.push_blocks, b = blockIdx.x % p.push_blocks;
  load_rank_view(p.dev[li], &v, FCO_OP_GEMV_ALLREDUCE);
  const uint64_t e = v.epoch + 1;
  const size_t hoff = half_off(v, p, e);
  if (hoff == ~(size_t)0) return; /* the reduce reports it and ends the call */
  const int P = v.nranks, me = v.rank, c = p.chunk, R = p.push_blocks * p.reduce_split;
  const Geo g = geo(p, c, (int)sizeof(U));
  const uint32_t i0 = piece_at(g.L, b * p.reduce_split, R);
  const uint32_t i1 = piece_at(g.L, (b + 1) * p.reduce_split, R);
  const char* y = p.y[li];
  const size_t slot = hoff + (size_t)me * p.slot_bytes;
  const uint32_t nt = blockDim.x;
  for (uint32_t base = i0 + threadIdx.x; base < i1; base += kPushUnroll * nt) {
    U u[kPushUnroll];
    size_t off[kPushUnroll];
#pragma unroll
    for (int k = 0; k < kPushUnroll; ++k) {
      const uint32_t i = base + k * nt;
      off[k] = i < i1 ? unit_off(p, g, i, (int)sizeof(U)) : 0;
      if (i < i1) u[k] = *reinterpret_cast<const U*>(y + off[k]);
    }
    for (int q = 1; q < P; ++q) {
      char* dst = v.peer_data[(me + q) % P] + slot;
#pragma unroll
      for (int k = 0; k < kPushUnroll; ++k)
        if (base + k * nt < i1) put_unit(dst + off[k], u[k]);
    }
  }
  const int t = threadIdx.x;
  uint64_t* flag = nullptr;
  if (t < P && t != me)
    flag = v.peer_sig[t] + (size_t)me * FCO_SIG_SLOTS + (size_t)c * p.push_blocks + b;
  signal_block(flag, sig_value(e, 0));
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) chunk_reduce_kernel(const ChunkParams p) {
  using Pk = Pack<T>;
  constexpr int kUnit = kVec ? 16 : (int)sizeof(T);
  constexpr int kN = kVec ? Pk::kN : 1; /* elements a unit */
  __shared__ RankView v;
  const int R = p.push_blocks * p.reduce_split;
  const int li = blockIdx.x / R, r = blockIdx.x % R;
  fco_dev_rank_t* dev = p.dev[li];
  load_rank_view(dev, &v, FCO_OP_GEMV_ALLREDUCE);
  const uint64_t e = v.epoch + 1;
  const size_t hoff = half_off(v, p, e);
  if (hoff == ~(size_t)0) {
    if (threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_GEMV_ALLREDUCE, v.rank, -1,
                   2 * (uint64_t)v.nranks * p.slot_bytes, v.ws_bytes);
    epoch_end(dev, e, (uint32_t)R);
    return;
  }
  const int P = v.nranks, me = v.rank, t = threadIdx.x, b = r / p.reduce_split;
  const WaitCtx wc{v.err, v.timeout_ns, FCO_OP_GEMV_ALLREDUCE};
  const char* slots = v.peer_data[me] + hoff;
  char* y = p.y[li];
  const uint32_t nt = blockDim.x;
  for (int c = 0; c < p.chunks; ++c) {
    bool ok = true;
    if (t < P && t != me) {
      const int slot = c * p.push_blocks + b;
      ok = wait_ge(v.peer_sig[me] + (size_t)t * FCO_SIG_SLOTS + slot, sig_value(e, 0), wc, t, slot);
    }
    if (__syncthreads_or(!ok)) break;
    const Geo g = geo(p, c, kUnit);
    const uint32_t i0 = piece_at(g.L, r, R), i1 = piece_at(g.L, r + 1, R);
    for (uint32_t base = i0 + t; base < i1; base += kReduceUnroll * nt) {
      size_t off[kReduceUnroll];
      float acc[kReduceUnroll][kN];
#pragma unroll
      for (int k = 0; k < kReduceUnroll; ++k) {
        const uint32_t i = base + k * nt;
        off[k] = i < i1 ? unit_off(p, g, i, kUnit) : 0;
      }
      /* rank order 0..P−1 (own partial from y): the same fp32 sum on every rank */
      for (int s = 0; s < P; ++s) {
        const char* src = s == me ? y : slots + (size_t)s * p.slot_bytes;
#pragma unroll
        for (int k = 0; k < kReduceUnroll; ++k) {
          if (base + k * nt >= i1) continue;
          float x[kN];
          if constexpr (kVec) {
            const uint4 u = s == me ? *reinterpret_cast<const uint4*>(src + off[k])
                                    : __ldcg(reinterpret_cast<const uint4*>(src + off[k]));
            Pk::unpack(u, x);
          } else {
            x[0] = Pk::load(reinterpret_cast<const T*>(src + off[k]));
          }
#pragma unroll
          for (int n = 0; n < kN; ++n) acc[k][n] = s == 0 ? x[n] : acc[k][n] + x[n];
        }
      }
#pragma unroll
      for (int k = 0; k < kReduceUnroll; ++k) {
        if (base + k * nt >= i1) continue;
        if constexpr (kVec) st_global_v4(y + off[k], Pk::pack(acc[k]));
        else Pk::store(reinterpret_cast<T*>(y + off[k]), acc[k][0]);
      }
    }
  }
  epoch_end(dev, e, (uint32_t)R);
}

template <typename T>
const void* reduce_fn(bool vec) {
  return vec ? (const void*)chunk_reduce_kernel<T, true> : (const void*)chunk_reduce_kernel<T, false>;
}

}  // namespace

fco_result_t launch_push(const ChunkParams& p, int num_local, cudaStream_t stream, char* err) {
  const unsigned grid = (unsigned)(p.push_blocks * num_local);
  if (p.vec) chunk_push_kernel<uint4><<<grid, kThreads, 0, stream>>>(p);
  else if (p.es == 4) chunk_push_kernel<uint32_t><<<grid, kThreads, 0, stream>>>(p);
  else chunk_push_kernel<uint16_t><<<grid, kThreads, 0, stream>>>(p);
  const cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "fco_gemv_allreduce chunks: push launch");
}

fco_result_t launch_reduce(const ChunkParams& p, int num_local, fco_dtype_t dtype,
                           cudaStream_t stream, char* err) {
  const unsigned grid = (unsigned)(p.push_blocks * p.reduce_split * num_local);
  const bool vec = p.vec != 0;
  switch (dtype) {
    case FCO_F32:
      if (vec) chunk_reduce_kernel<float, true><<<grid, kThreads, 0, stream>>>(p);
      else chunk_reduce_kernel<float, false><<<grid, kThreads, 0, stream>>>(p);
      break;
    case FCO_F16:
      if (vec) chunk_reduce_kernel<__half, true><<<grid, kThreads, 0, stream>>>(p);
      else chunk_reduce_kernel<__half, false><<<grid, kThreads, 0, stream>>>(p);
      break;
    case FCO_BF16:
      if (vec) chunk_reduce_kernel<__nv_bfloat16, true><<<grid, kThreads, 0, stream>>>(p);
      else chunk_reduce_kernel<__nv_bfloat16, false><<<grid, kThreads, 0, stream>>>(p);
      break;
    default:
      return fail(err, FCO_ERR_INTERNAL, "fco_gemv_allreduce chunks: dtype %d", (int)dtype);
  }
  const cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "fco_gemv_allreduce chunks: reduce launch");
}

fco_result_t preload(char* err) {
  static const void* const fns[] = {
      (const void*)chunk_push_kernel<uint4>,         (const void*)chunk_push_kernel<uint32_t>,
      (const void*)chunk_push_kernel<uint16_t>,      reduce_fn<float>(true),
      reduce_fn<float>(false),                       reduce_fn<__half>(true),
      reduce_fn<__half>(false),                      reduce_fn<__nv_bfloat16>(true),
      reduce_fn<__nv_bfloat16>(false)};
  return load_kernels(err, fns, (int)(sizeof fns / sizeof fns[0]),
                      "fco_gemv_allreduce chunks: loading the kernels");
}

}  // namespace gvc
}  // namespace fco

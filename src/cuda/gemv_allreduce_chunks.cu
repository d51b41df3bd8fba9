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

constexpr int kThreads = 256;
static_assert(kThreads >= FCO_MAX_GPU_RANKS + 1, "load_rank_view needs MAX+1 threads");

/* Chunk c's geometry: units per row, total units, and the byte offset of its first column. */
struct Geo {
  size_t upr, L, col0;
};
__device__ __forceinline__ Geo geo(const ChunkParams& p, int c, int unit) {
  const int n0 = c * p.width;
  const int wc = min(p.width, p.N - n0);
  Geo g;
  g.upr = (size_t)wc * p.es / unit;
  g.L = (size_t)p.M * g.upr;
  g.col0 = (size_t)n0 * p.es;
  return g;
}
/* Byte offset in y's [M][N] image of unit i of the chunk. */
__device__ __forceinline__ size_t unit_off(const ChunkParams& p, const Geo& g, size_t i, int unit) {
  const size_t m = i / g.upr, j = i - m * g.upr;
  return m * (size_t)p.N * p.es + g.col0 + j * unit;
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
__global__ void __launch_bounds__(kThreads) chunk_push_kernel(const ChunkParams p) {
  __shared__ RankView v;
  const int li = blockIdx.x / p.push_blocks, b = blockIdx.x % p.push_blocks;
  load_rank_view(p.dev[li], &v, FCO_OP_GEMV_ALLREDUCE);
  const uint64_t e = v.epoch + 1;
  const size_t hoff = half_off(v, p, e);
  if (hoff == ~(size_t)0) { /* the reduce reports it and ends the call */
    return;
  }
  const int P = v.nranks, me = v.rank;
  const int c = p.chunk, R = p.push_blocks * p.reduce_split;
  const Geo g = geo(p, c, (int)sizeof(U));
  const size_t i0 = g.L * (size_t)(b * p.reduce_split) / R;
  const size_t i1 = g.L * (size_t)((b + 1) * p.reduce_split) / R;
  const char* y = p.y[li];
  const size_t slot = hoff + (size_t)me * p.slot_bytes;
  for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const size_t off = unit_off(p, g, i, (int)sizeof(U));
    const U u = *reinterpret_cast<const U*>(y + off);
    for (int k = 1; k < P; ++k) {
      char* dst = v.peer_data[(me + k) % P] + slot + off;
      if constexpr (sizeof(U) == 16) st_global_v4(dst, u);
      else *reinterpret_cast<U*>(dst) = u;
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
  for (int c = 0; c < p.chunks; ++c) {
    bool ok = true;
    if (t < P && t != me) {
      const int slot = c * p.push_blocks + b;
      ok = wait_ge(v.peer_sig[me] + (size_t)t * FCO_SIG_SLOTS + slot, sig_value(e, 0), wc, t, slot);
    }
    if (__syncthreads_or(!ok)) break;
    const Geo g = geo(p, c, kUnit);
    const size_t i0 = g.L * (size_t)r / R, i1 = g.L * (size_t)(r + 1) / R;
    for (size_t i = i0 + t; i < i1; i += blockDim.x) {
      const size_t off = unit_off(p, g, i, kUnit);
      if constexpr (kVec) {
        float acc[Pk::kN], x[Pk::kN];
        for (int s = 0; s < P; ++s) {
          const uint4 u = s == me ? *reinterpret_cast<const uint4*>(y + off)
                                  : __ldcg(reinterpret_cast<const uint4*>(
                                        slots + (size_t)s * p.slot_bytes + off));
          Pk::unpack(u, s == 0 ? acc : x);
          if (s > 0)
#pragma unroll
            for (int k = 0; k < Pk::kN; ++k) acc[k] += x[k];
        }
        st_global_v4(y + off, Pk::pack(acc));
      } else {
        float acc = 0.f;
        for (int s = 0; s < P; ++s) {
          const T* src = reinterpret_cast<const T*>(
              s == me ? y + off : slots + (size_t)s * p.slot_bytes + off);
          const float xv = Pk::load(src);
          acc = s == 0 ? xv : acc + xv;
        }
        Pk::store(reinterpret_cast<T*>(y + off), acc);
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

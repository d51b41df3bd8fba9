/*
 * gemm_alltoall.cuh — what the GEMM + All-to-All kernels share (src/cuda/gemm_alltoall*.cu):
 * launch parameters, the header exchange every impl that uses the peer table starts with, the
 * global verdict, a block scan, and the staging → out copy of what peers pushed.
 *
 * Header exchange (layout in src/ops/gemm_alltoall.h): part 0 of each rank reads its device
 * counts, builds its header {valid, E, blocks, tot[s], tiles[s], tstart[s]}, signals kReadySlot
 * ("I started this call") to every peer, and once a peer said the same, puts the header into
 * slot [me] of that peer's header area (its own too), then release-signals its kHdrSlot. No
 * remote write of this op precedes the peer's ready: the peer may still be reading its
 * workspace for an earlier call. Every block then waits for all P header flags of its rank and reads the headers into
 * shared memory (Ctl). The verdict is computed from the headers alone, so every rank reaches
 * the same one: all valid and Σ_r tot_r[s] ≤ out_rows for every s. Otherwise every rank records
 * FCO_ERR_INVALID_ARGUMENT (peer = the offending rank, slot = kind) and writes nothing.
 *
 * Signal slots of a source rank at a receiver: 0..blocks-1 tile parts (impl 1), kReadySlot,
 * kDoneSlot (impl 2: all chunks pushed), kHdrSlot (header). Values are sig_value(epoch, j): never reset.
 */
#ifndef FCO_CUDA_GEMM_ALLTOALL_CUH_
#define FCO_CUDA_GEMM_ALLTOALL_CUH_

#include "../ops/gemm_alltoall.h"
#include "cuda_ops.h"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace ga {

constexpr int kThreads = 256;
constexpr int kHdrSlot = FCO_SIG_SLOTS - 1;
constexpr int kDoneSlot = FCO_SIG_SLOTS - 2;
constexpr int kReadySlot = FCO_SIG_SLOTS - 3;
constexpr int kMaxParts = FCO_SIG_SLOTS - 3; /* tile-part slots available to impl 1 */
constexpr int kMaxP = FCO_MAX_GPU_RANKS;
constexpr int kHdrWords = 4 + 3 * kMaxP;
/* Error "slot" values: which check failed. */
constexpr int kBadCounts = 1;   /* negative count or Σ > a_rows on rank `peer` */
constexpr int kBadCapacity = 2; /* rank `peer` would receive more than out_rows */
constexpr int kBadPlan = 3;     /* a push would leave the destination (inconsistent hints) */

/* One local rank of a launch. */
struct RankArgs {
  const char* a;
  const char* w;
  char* out;
  const int32_t* counts;
  fco_dev_rank_t* dev;
  char* ws; /* this rank's workspace (host-usable device pointer) */
  int32_t num_experts;
};

/* What every block of a rank knows after the exchange. */
struct Ctl {
  int64_t h[kMaxP][kHdrWords]; /* headers, by source rank */
  int64_t base[kMaxP];         /* where my rows start in s's out */
  int64_t roff[kMaxP];         /* where r's rows start in my out */
  int64_t recv[kMaxP];         /* rows r sends me */
  int32_t verdict;             /* 0 ok, else kBad* */
  int32_t bad_rank;
  int32_t fail;                /* a wait failed (timeout / other error) */
};

/* ---- block scan ------------------------------------------------------------------------ */
/* Exclusive scan over i in [0, n) of value(i) (int64), in index order, by all threads of the
 * block; write(i, prefix) for each i; returns the total (to every thread). `tmp` holds
 * kThreads / 32 + 1 int64 of shared memory. */
template <class V, class W>
__device__ int64_t block_scan(int n, V value, W write, int64_t* tmp) {
  const int t = threadIdx.x, per = (n + kThreads - 1) / kThreads;
  const int i0 = t * per, i1 = min(n, i0 + per);
  int64_t local = 0;
  for (int i = i0; i < i1; ++i) local += value(i);
  /* Inclusive warp scan of the per-thread sums, then of the warp totals. */
  const int lane = t & 31, warp = t >> 5;
  int64_t x = local;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int64_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) tmp[warp] = x;
  __syncthreads();
  if (t == 0) {
    int64_t run = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      int64_t s = tmp[w];
      tmp[w] = run;
      run += s;
    }
    tmp[kThreads / 32] = run;
  }
  __syncthreads();
  int64_t pre = tmp[warp] + x - local;
  for (int i = i0; i < i1; ++i) {
    write(i, pre);
    pre += value(i);
  }
  const int64_t total = tmp[kThreads / 32];
  __syncthreads(); /* tmp may be reused right after */
  return total;
}

/* ---- header exchange --------------------------------------------------------------------- */
/* All threads of part 0. Puts `h` (kHdrWords-sized, shared memory) into every rank's header
 * slot [me] and signals it. A peer's workspace is written only once the peer said it started
 * this call (kReadySlot): before that it may still be reading its workspace for its previous
 * call, of this op or another. Thread p < P serves peer p. */
__device__ __forceinline__ void post_header(const RankView& v, uint64_t e, const int64_t* h) {
  const int P = v.nranks, me = v.rank, words = 4 + 3 * P, p = threadIdx.x;
  __syncthreads(); /* h complete */
  if (p < P && p != me)
    st_release_sys(v.peer_sig[p] + (size_t)me * FCO_SIG_SLOTS + kReadySlot, sig_value(e, 0));
  if (p < P) {
    const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
    if (p == me ||
        wait_ge(v.peer_sig[me] + (size_t)p * FCO_SIG_SLOTS + kReadySlot, sig_value(e, 0), ctx, p,
                kReadySlot)) {
      int64_t* dst = fco_ga_hdr(v.peer_data[p], P, e, me);
      for (int k = 0; k < words; ++k) dst[k] = h[k];
      st_release_sys(v.peer_sig[p] + (size_t)me * FCO_SIG_SLOTS + kHdrSlot, sig_value(e, 0));
    }
  }
}

/* All threads. Wait for every rank's header, read them into c, compute the verdict and the
 * offsets. Returns false when a wait failed (c->fail set; the caller skips to epoch_end). */
__device__ __forceinline__ bool gather_headers(const RankView& v, uint64_t e, int64_t out_rows,
                                               Ctl* c) {
  const int P = v.nranks, me = v.rank, words = 4 + 3 * P;
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
  bool ok = true;
  if ((int)threadIdx.x < P)
    ok = wait_ge(v.peer_sig[me] + (size_t)threadIdx.x * FCO_SIG_SLOTS + kHdrSlot, sig_value(e, 0),
                 ctx, (int)threadIdx.x, kHdrSlot);
  if (__syncthreads_or(!ok)) {
    if (threadIdx.x == 0) c->fail = 1;
    __syncthreads();
    return false;
  }
  for (int i = threadIdx.x; i < P * words; i += blockDim.x) {
    const int r = i / words, k = i - r * words;
    c->h[r][k] = __ldcg((const long long*)fco_ga_hdr(v.peer_data[me], P, e, r) + k);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    c->fail = 0;
    c->verdict = 0;
    c->bad_rank = -1;
    for (int r = 0; r < P && !c->verdict; ++r)
      if (c->h[r][FCO_GA_H_VALID] != 1) {
        c->verdict = kBadCounts;
        c->bad_rank = r;
      }
    for (int s = 0; s < P; ++s) {
      int64_t total = 0;
      for (int r = 0; r < P; ++r) {
        if (r == me) c->base[s] = total;
        total += c->h[r][FCO_GA_H_TOT(P, s)];
      }
      if (total > out_rows && !c->verdict) {
        c->verdict = kBadCapacity;
        c->bad_rank = s;
      }
    }
    int64_t off = 0;
    for (int r = 0; r < P; ++r) {
      c->roff[r] = off;
      c->recv[r] = c->h[r][FCO_GA_H_TOT(P, me)];
      off += c->recv[r];
    }
  }
  __syncthreads();
  return true;
}

/* ---- copies ------------------------------------------------------------------------------ */
/* dst[0, nbytes) = src (written by peers: read through L2), work split over threads
 * idx0 + k·stride; 16-byte vectors when both are aligned. */
__device__ __forceinline__ void copy_cg(char* dst, const char* src, size_t nbytes, size_t idx0,
                                        size_t stride) {
  if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
    const size_t nv = nbytes / 16;
    const uint4* s = (const uint4*)src;
    uint4* d = (uint4*)dst;
    size_t i = idx0;
    for (; i + 3 * stride < nv; i += 4 * stride) {
      uint4 x0 = __ldcg(s + i), x1 = __ldcg(s + i + stride), x2 = __ldcg(s + i + 2 * stride),
            x3 = __ldcg(s + i + 3 * stride);
      st_global_v4(d + i, x0);
      st_global_v4(d + i + stride, x1);
      st_global_v4(d + i + 2 * stride, x2);
      st_global_v4(d + i + 3 * stride, x3);
    }
    for (; i < nv; i += stride) st_global_v4(d + i, __ldcg(s + i));
    for (size_t b = nv * 16 + idx0; b < nbytes; b += stride) dst[b] = __ldcg(src + b);
    return;
  }
  if ((((uintptr_t)dst | (uintptr_t)src | nbytes) & 1) == 0) {
    for (size_t i = idx0; i < nbytes / 2; i += stride)
      ((uint16_t*)dst)[i] = __ldcg((const unsigned short*)src + i);
    return;
  }
  for (size_t b = idx0; b < nbytes; b += stride) dst[b] = __ldcg(src + b);
}

/* Number of t in [t0, t1) with t ≡ q (mod g). */
__device__ __forceinline__ int64_t count_mod(int64_t t0, int64_t t1, int64_t q, int64_t g) {
  auto below = [&](int64_t x) -> int64_t { return x > q ? (x - q + g - 1) / g : 0; };
  return below(t1) - below(t0);
}

/* ---- host-side entry points shared by the two .cu files -------------------------------- */
/* impl 1 (gemm_alltoall_fused.cu). */
fco_result_t launch_tiles(const fco_gpu_launch_t* l, char* err);
/* impl 2's exchange and finish kernels (gemm_alltoall_fused.cu, next to impl 1's protocol). */
fco_result_t launch_exchange(const fco_gpu_launch_t* l, const RankArgs* ra, char* err);
fco_result_t launch_finish(const fco_gpu_launch_t* l, const RankArgs* ra, char* err);
/* One chunk's push: pieces[i] = {destination s, rows, first row in y, first row among my rows at
 * s}; rows go to out (s == me) or s's staging at plan.base[s] + that row. */
fco_result_t launch_push(const RankArgs& ra, const char* y, int P, int64_t out_rows,
                         int64_t row_bytes, const int64_t (*pieces)[4], int npieces, int blocks,
                         void* stream, char* err);

/* The plan impl 2's exchange kernel leaves in the plan area (read by push and finish). */
struct Plan {
  int32_t verdict; /* 0 ok */
  int32_t pad;
  int64_t base[kMaxP];
  int64_t roff[kMaxP];
  int64_t recv[kMaxP];
};

}  // namespace ga
}  // namespace fco

#endif /* FCO_CUDA_GEMM_ALLTOALL_CUH_ */

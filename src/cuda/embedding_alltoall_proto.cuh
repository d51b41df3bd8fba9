/*
 * embedding_alltoall_proto.cuh — the fused kernels' protocol primitives (impl 1 of
 * fco_embedding_alltoall): counter reductions and the release fence, the bounded wait, the
 * landing copy. Shared by ea_kernel_fused / ea_kernel_fused32 (embedding_alltoall_fused.cu) and
 * ea_kernel_fused_lean (embedding_alltoall_fused_lean.cu); the protocol itself is described in
 * those files' headers.
 */
#ifndef FCO_CUDA_EMBEDDING_ALLTOALL_PROTO_CUH_
#define FCO_CUDA_EMBEDDING_ALLTOALL_PROTO_CUH_

#include <stdint.h>

#include "embedding_alltoall.cuh"

namespace fco {
namespace ea {

/* ---- signals, waits, copies --------------------------------------------------------------- */
__device__ __forceinline__ void red_max_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_add_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* Bounded wait of thread 0 for *flag >= want (prims.cuh's wait_ge); ignores
 * FCO_ERR_INVALID_ARGUMENT (bad data does not stop the protocol), gives up on a timeout (its own,
 * recorded, or another wait's). */
__device__ __forceinline__ bool wait_count(const uint64_t* flag, uint64_t want, const RankView& v,
                                           int32_t peer, int32_t slot) {
  const WaitCtx c{v.err, v.timeout_ns, FCO_OP_EMBEDDING_ALLTOALL};
  return wait_ge(flag, want, c, peer, slot, FCO_ERR_INVALID_ARGUMENT);
}

template <typename U>
__device__ __forceinline__ void st_unit(U* p, const U& x) { *p = x; }
template <>
__device__ __forceinline__ void st_unit<uint4>(uint4* p, const uint4& x) { st_global_v4(p, x); }

/* Copy rows [r0, r1) × bytes [col, col + seg) of a [*, row] byte matrix from src to dst, units
 * of U bytes (all of col, seg, row, src, dst multiples of U). All threads of the block;
 * kUnroll loads in flight per thread before their stores. src was written by peers: read
 * through L2 (ld.global.cg). Rows go in batches that keep the flat unit index in 32 bits. */
template <typename U, int kUnroll>
__device__ __forceinline__ void copy_cols(char* dst, const char* src, int64_t r0, int64_t r1,
                                          size_t row, size_t col, size_t seg) {
  const uint32_t upr = (uint32_t)(seg / sizeof(U));
  if (upr == 0) return;
  const int64_t rows_per_batch = upr >= (1u << 30) ? 1 : (int64_t)((1u << 30) / upr);
  for (int64_t rb = r0; rb < r1; rb += rows_per_batch) {
    const uint32_t n = (uint32_t)(min(r1, rb + rows_per_batch) - rb) * upr;
    const char* s = src + (size_t)rb * row + col;
    char* d = dst + (size_t)rb * row + col;
    for (uint32_t x0 = threadIdx.x; x0 < n; x0 += kUnroll * blockDim.x) {
      U r[kUnroll];
      size_t off[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t x = x0 + (uint32_t)u * blockDim.x;
        const uint32_t rr = x / upr;
        off[u] = (size_t)rr * row + (size_t)(x - rr * upr) * sizeof(U);
        if (x < n) r[u] = __ldcg((const U*)(s + off[u]));
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (x0 + (uint32_t)u * blockDim.x < n) st_unit((U*)(d + off[u]), r[u]);
    }
  }
}
/* kUnroll: loads in flight per thread (ea_kernel_fused: kLandUnroll; the lean kernel, at 64
 * registers, fewer). */
template <int kUnroll = kLandUnroll>
__device__ __forceinline__ void copy_cols_any(char* dst, const char* src, int64_t r0, int64_t r1,
                                              size_t row, size_t col, size_t seg) {
  const uintptr_t m = (uintptr_t)dst | (uintptr_t)src | row | col | seg;
  if (m % 16 == 0) copy_cols<uint4, kUnroll>(dst, src, r0, r1, row, col, seg);
  else if (m % 4 == 0) copy_cols<uint32_t, kUnroll>(dst, src, r0, r1, row, col, seg);
  else copy_cols<uint16_t, kUnroll>(dst, src, r0, r1, row, col, seg);
}

/* All threads, after load_rank_view: can this rank's view run a fused kernel — the world it was
 * made for, a workspace of two halves of R? If not, thread 0 records FCO_ERR_INTERNAL (the caller
 * then ends its epoch and returns). */
__device__ __forceinline__ bool ea_view_ok(const EaParams& p, const RankView& v, int rank) {
  const int P = p.nranks;
  if (v.nranks == P && v.rank == rank && (P == 1 || v.ws_bytes >= 2 * p.recv_bytes)) return true;
  if (threadIdx.x == 0)
    record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_EMBEDDING_ALLTOALL, v.rank, -1, 2 * p.recv_bytes,
                 v.ws_bytes);
  return false;
}

/* FCO_EA_PROFILE: thread 0 stamps phase k of this block. A template variant of the kernel
 * (kProf): checks of p.prof in the one kernel changed its register allocation and cost the
 * D = 128 variant 10-15 % even when off (run 4388610); kProf = false compiles to the kernel
 * without them. */
template <bool kProf>
__device__ __forceinline__ void prof_stamp(const EaParams& p, int k) {
  if constexpr (kProf) {
    if (threadIdx.x == 0 && blockIdx.x < kProfMaxBlocks)
      p.prof[(size_t)blockIdx.x * kProfSlots + k] = globaltimer_ns();
  }
}

}  // namespace ea
}  // namespace fco

#endif /* FCO_CUDA_EMBEDDING_ALLTOALL_PROTO_CUH_ */

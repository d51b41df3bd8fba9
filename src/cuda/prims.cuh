/*
 * prims.cuh — device primitives every fco kernel is built from (allreduce now; GEMV+AllReduce,
 * embedding+All-to-All and GEMM+All-to-All later):
 *
 *   load_rank_view   stage a rank's peer table (dev.h) in shared memory, once per block
 *   put_block_n      block-cooperative copy of a tile to N peer pointers: 16-byte vectors,
 *                    kUnroll loads in flight before the stores, each vector loaded once and
 *                    stored to every destination; narrower units when misaligned or in the tail
 *   reduce_range     out_d[i] = Σ_s src_s[i] for S sources, D outputs, fp32 in source order
 *   signal_block     __syncthreads, then each flag-owning thread release-stores its flag
 *   wait_ge          acquire-spin until flag >= want, bounded by dev->timeout_ns (globaltimer)
 *   epoch_end        the last block of a rank advances dev->epoch (signals never get reset)
 *
 * Memory model (PTX ISA, "Memory Consistency Model"): a block's stores to a peer become visible
 * to the peer through a release pattern at system scope: bar.sync orders every thread's stores
 * before the flag-writing thread (base causality), and st.release.sys is cumulative, so it
 * publishes what that thread has observed, not only its own stores. The waiter's
 * ld.acquire.sys followed by bar.sync extends the acquire to the whole block. Data written by
 * peers is read with ld.global.cg (L2), never from a possibly stale L1 line.
 *
 * Epochs: a kernel reads dev->epoch at start and uses e = epoch + 1 for this call; the j-th
 * flag a block raises on its slot carries sig_value(e, j) = (e << 32) | (j + 1). Values only grow
 * across calls, waiters wait for >=, so nothing is ever reset and a CUDA-graph replay (which
 * re-reads the epoch from device memory) is correct. Requires every rank to run the same
 * sequence of epoch-advancing calls and, per call, the same blocks-per-rank and slicing.
 *
 * All functions taking "all threads" must be reached by every thread of the block (they
 * contain __syncthreads); the others are per thread.
 */
#ifndef FCO_CUDA_PRIMS_CUH_
#define FCO_CUDA_PRIMS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "dev.h"

namespace fco {

constexpr int kVecBytes = 16;
/* Spins between clock reads / between reads of the (host-memory) error word. */
constexpr uint32_t kSpinsPerClock = 64;
constexpr uint32_t kSpinsPerErrPoll = 4096;

/* ---- memory-model building blocks ------------------------------------------------------- */
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ int32_t ld_relaxed_sys(const int32_t* p) {
  int32_t v;
  asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/* 16-byte global store, weak (plain STG.E.128): written out because the compiler splits a
 * plain store of a uint4 array element into four 32-bit stores. */
__device__ __forceinline__ void st_global_v4(void* p, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
/* 8-byte global store, weak (STG.E.64). */
__device__ __forceinline__ void st_global_v2(void* p, const uint2& v) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint64_t sig_value(uint64_t e, uint32_t j) {
  return (e << 32) | (uint64_t)(j + 1u);
}

/* ---- errors ----------------------------------------------------------------------------- */
/* First error wins (atomicCAS_system on code); the winner fills the details. The host sees
 * code first: the details are complete once the stream has synchronised. */
__device__ __forceinline__ void record_error(fco_async_err_t* err, int32_t code, int32_t op,
                                          int32_t peer, int32_t slot, uint64_t want,
                                          uint64_t seen) {
  if (!err) return;
  if (atomicCAS_system((int*)&err->code, 0, code) != 0) return;
  volatile fco_async_err_t* e = err;
  e->peer = peer;
  e->slot = slot;
  e->want = want;
  e->seen = seen;
  /* op last: the host polls for op != 0 to know the details are complete. */
  __threadfence_system();
  e->op = op;
  __threadfence_system();
}

__device__ __forceinline__ bool error_set(const fco_async_err_t* err) {
  return err && ld_relaxed_sys(&err->code) != 0;
}

/* ---- peer table view -------------------------------------------------------------------- */
struct RankView {
  char* peer_data[FCO_MAX_GPU_RANKS];
  uint64_t* peer_sig[FCO_MAX_GPU_RANKS];
  uint64_t ws_bytes;
  uint64_t timeout_ns;
  uint64_t epoch; /* at kernel start: calls completed before this one */
  fco_async_err_t* err;
  int32_t rank, nranks;
};

/* All threads. One read of the table per block; ends with __syncthreads. The epoch is read
 * volatile: the previous kernel's last block wrote it. From epoch FCO_EPOCH_LIMIT on (dev.h:
 * the signal values hold the epoch in 32 bits) it records FCO_ERR_INVALID_USAGE for `op`
 * (slot FCO_ERR_SLOT_EPOCH; the call itself still runs correctly), so the host refuses the
 * communicator's next call before any value can wrap. */
__device__ __forceinline__ void load_rank_view(const fco_dev_rank_t* dev, RankView* v,
                                               int32_t op) {
  const int t = threadIdx.x;
  if (t < FCO_MAX_GPU_RANKS) {
    v->peer_data[t] = (char*)dev->peer_data[t];
    v->peer_sig[t] = dev->peer_sig[t];
  } else if (t == FCO_MAX_GPU_RANKS) {
    v->ws_bytes = dev->ws_bytes;
    v->timeout_ns = dev->timeout_ns ? dev->timeout_ns
                                    : (uint64_t)FCO_DEFAULT_TIMEOUT_MS * 1000000ull;
    v->epoch = *(volatile const uint64_t*)&dev->epoch;
    v->err = dev->err;
    if (v->epoch >= FCO_EPOCH_LIMIT && !error_set(dev->err))
      record_error(dev->err, FCO_ERR_INVALID_USAGE, op, -1, FCO_ERR_SLOT_EPOCH, FCO_EPOCH_LIMIT,
                   v->epoch);
    v->rank = dev->rank;
    v->nranks = dev->nranks;
  }
  __syncthreads();
}

struct WaitCtx {
  fco_async_err_t* err;
  uint64_t timeout_ns;
  int32_t op; /* fco_op_kind_t, for the error record */
};

/* Per thread: does the recorded error stop waits — any code but `ignore` (0: none) and but
 * the epoch-limit record (load_rank_view): dev.h promises that calls already issued or captured
 * still run correctly, so their waits must go on (the record only makes the host refuse later
 * calls). An FCO_ERR_INVALID_USAGE whose details are still being written (record_error writes
 * op last) does not stop them yet: the next poll looks again. */
__device__ __forceinline__ bool error_stops_waits(const fco_async_err_t* err, int32_t ignore) {
  if (!err) return false;
  const int32_t code = ld_relaxed_sys(&err->code);
  if (code == 0 || code == ignore) return false;
  if (code != FCO_ERR_INVALID_USAGE) return true;
  int32_t op;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(op) : "l"(&err->op) : "memory");
  return op != 0 && ld_relaxed_sys(&err->slot) != FCO_ERR_SLOT_EPOCH;
}

/* Per thread. Spin until *flag >= want (acquire, system scope). Returns false (the caller
 * must skip the rest of its work) after timeout_ns — recording FCO_ERR_TIMEOUT with the peer,
 * slot, wanted and last seen value — or when another wait has already recorded an error other
 * than `ignore` (embedding_alltoall: FCO_ERR_INVALID_ARGUMENT, bad data that does not stop its
 * protocol; 0 = none ignored) and the epoch-limit record (error_stops_waits). Behind that
 * record (first error wins) a timeout is not recorded: each wait then ends at its own. */
__device__ __forceinline__ bool wait_ge(const uint64_t* flag, uint64_t want, const WaitCtx& c,
                                        int32_t peer, int32_t slot, int32_t ignore = 0) {
  uint64_t seen = ld_acquire_sys(flag);
  if (seen >= want) return true;
  const uint64_t t0 = globaltimer_ns();
  for (uint32_t spin = 1;; ++spin) {
    seen = ld_acquire_sys(flag);
    if (seen >= want) return true;
    if (spin % kSpinsPerClock == 0) {
      if (globaltimer_ns() - t0 > c.timeout_ns) {
        record_error(c.err, FCO_ERR_TIMEOUT, c.op, peer, slot, want, seen);
        return false;
      }
      if (spin % kSpinsPerErrPoll == 0 && error_stops_waits(c.err, ignore)) return false;
    }
  }
}

/* All threads. Publish this block's prior stores: after the barrier, each thread with a
 * non-NULL `flag` (typically threads 0..peers-1, one peer each) release-stores `value`. */
__device__ __forceinline__ void signal_block(uint64_t* flag, uint64_t value) {
  __syncthreads();
  if (flag) st_release_sys(flag, value);
}

/* All threads, at the very end of a kernel (also after an error, so arrive stays balanced).
 * The last block of the rank to arrive resets the counter and advances the epoch to e; the
 * next kernel on the stream sees both (kernel boundary). */
__device__ __forceinline__ void epoch_end(fco_dev_rank_t* dev, uint64_t e, uint32_t blocks_per_rank) {
  __syncthreads();
  /* No fence: every block read the epoch at its start, and data reaches the next kernel
   * through the kernel boundary. */
  if (threadIdx.x == 0) {
    if (atomicAdd(&dev->arrive, 1u) == blocks_per_rank - 1) {
      atomicExch(&dev->arrive, 0u);
      *(volatile uint64_t*)&dev->epoch = e;
    }
  }
}

/* All threads of a one-block kernel of ≥ nranks threads: a call that only makes every rank
 * wait for every peer. Thread p release-signals peer p's `slot` (row me) with sig_value(e, 0)
 * and waits for p's in its own row; then the epoch advances. The NCCL-based impl 0 of an op
 * that stages peers' data in the workspace outside the epoch halves ends with it (after its
 * last read of that staging), so that no peer starts a next call, which may write into this
 * rank's workspace at once, before this rank is done: workspace rule (2), src/core/internal.h.
 * `ignore`: an error code that must not end the wait (wait_ge; embedding_alltoall:
 * FCO_ERR_INVALID_ARGUMENT, its bad data, after which the rank's next call still runs). */
__device__ __forceinline__ void rank_barrier(fco_dev_rank_t* dev, int32_t op, int slot,
                                             int32_t ignore = 0) {
  __shared__ RankView v;
  load_rank_view(dev, &v, op);
  const uint64_t e = v.epoch + 1;
  const int P = v.nranks, me = v.rank, p = threadIdx.x;
  const WaitCtx ctx{v.err, v.timeout_ns, op};
  if (p < P && p != me) {
    /* This kernel starts after the call's reads of its staging ended (stream order). */
    st_release_sys(v.peer_sig[p] + (size_t)me * FCO_SIG_SLOTS + slot, sig_value(e, 0));
    wait_ge(v.peer_sig[me] + (size_t)p * FCO_SIG_SLOTS + slot, sig_value(e, 0), ctx, p, slot,
            ignore);
  }
  epoch_end(dev, e, 1);
}

/* ---- put ---------------------------------------------------------------------------------- */
template <typename U, int kNumDst>
__device__ __forceinline__ void put_units_(char* const* dst, size_t dst_off, const char* src,
                                           size_t begin, size_t end, size_t idx0,
                                           size_t stride) {
  for (size_t i = begin / sizeof(U) + idx0; i < end / sizeof(U); i += stride) {
    const U x = ((const U*)src)[i];
#pragma unroll
    for (int d = 0; d < kNumDst; ++d) ((U*)(dst[d] + dst_off))[i] = x;
  }
}

/* Copy src[0, nbytes) to dst[d] + dst_off for d < kNumDst, work split over threads
 * idx0, idx0 + stride, ... (a block: threadIdx.x, blockDim.x). Each 16-byte vector is loaded
 * once and stored to every destination; kUnroll loads are in flight before the stores.
 * Misaligned pointers take a 4-, 2- or 1-byte path (correct, slower); so does the tail. */
template <int kNumDst, int kUnroll = 4>
__device__ __forceinline__ void put_range_n(char* const* dst, size_t dst_off, const char* src,
                                            size_t nbytes, size_t idx0, size_t stride) {
  if constexpr (kNumDst > 0) {
    uintptr_t mis = (uintptr_t)src;
#pragma unroll
    for (int d = 0; d < kNumDst; ++d) {
      /* Peer pointers come from the table: tell the compiler they are global (STG, not a
       * generic ST) for the narrow paths; vectors use st_global_v4. */
      __builtin_assume(__isGlobal(dst[d]));
      mis |= (uintptr_t)(dst[d] + dst_off);
    }
    __builtin_assume(__isGlobal(src));
    size_t done = 0;
    if ((mis % kVecBytes) == 0) {
      const uint4* s = (const uint4*)src;
      const size_t nvec = nbytes / kVecBytes;
      size_t v = idx0;
      for (; v + (size_t)(kUnroll - 1) * stride < nvec; v += (size_t)kUnroll * stride) {
        uint4 r[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) r[u] = s[v + u * stride];
#pragma unroll
        for (int d = 0; d < kNumDst; ++d) {
          uint4* o = (uint4*)(dst[d] + dst_off);
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) st_global_v4(o + v + u * stride, r[u]);
        }
      }
      for (; v < nvec; v += stride) {
        const uint4 x = s[v];
#pragma unroll
        for (int d = 0; d < kNumDst; ++d) st_global_v4((uint4*)(dst[d] + dst_off) + v, x);
      }
      done = nvec * kVecBytes;
      if (done == nbytes) return;
    }
    const uintptr_t m = mis | nbytes;
    if (m % 4 == 0)
      put_units_<uint32_t, kNumDst>(dst, dst_off, src, done, nbytes, idx0, stride);
    else if (m % 2 == 0)
      put_units_<uint16_t, kNumDst>(dst, dst_off, src, done, nbytes, idx0, stride);
    else
      put_units_<uint8_t, kNumDst>(dst, dst_off, src, done, nbytes, idx0, stride);
  }
}

/* All threads of the block cooperate; no synchronisation inside (use signal_block after). */
template <int kNumDst, int kUnroll = 4>
__device__ __forceinline__ void put_block_n(char* const* dst, size_t dst_off, const char* src,
                                            size_t nbytes) {
  put_range_n<kNumDst, kUnroll>(dst, dst_off, src, nbytes, threadIdx.x, blockDim.x);
}
__device__ __forceinline__ void put_block(char* dst, const char* src, size_t nbytes) {
  char* d[1] = {dst};
  put_block_n<1>(d, 0, src, nbytes);
}

/* ---- element types: 16 bytes of T <-> fp32 ----------------------------------------------- */
template <typename T>
struct Pack;
template <>
struct Pack<float> {
  static constexpr int kN = 4;
  __device__ static __forceinline__ void unpack(const uint4& v, float* f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ static __forceinline__ uint4 pack(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
  __device__ static __forceinline__ float load(const float* p) { return __ldcg(p); }
  __device__ static __forceinline__ void store(float* p, float x) { *p = x; }
};
template <>
struct Pack<__half> {
  static constexpr int kN = 8;
  __device__ static __forceinline__ float2 u2f(uint32_t u) {
    return __half22float2(*reinterpret_cast<const __half2*>(&u));
  }
  __device__ static __forceinline__ uint32_t f2u(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ static __forceinline__ void unpack(const uint4& v, float* f) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 p = u2f(w[i]);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
  __device__ static __forceinline__ uint4 pack(const float* f) {
    return make_uint4(f2u(f[0], f[1]), f2u(f[2], f[3]), f2u(f[4], f[5]), f2u(f[6], f[7]));
  }
  __device__ static __forceinline__ float load(const __half* p) { return __half2float(__ldcg(p)); }
  __device__ static __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
};
template <>
struct Pack<__nv_bfloat16> {
  static constexpr int kN = 8;
  __device__ static __forceinline__ uint32_t f2u(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ static __forceinline__ void unpack(const uint4& v, float* f) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { /* bf16 is the top half of an fp32: exact by shifting */
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static __forceinline__ uint4 pack(const float* f) {
    return make_uint4(f2u(f[0], f[1]), f2u(f[2], f[3]), f2u(f[4], f[5]), f2u(f[6], f[7]));
  }
  __device__ static __forceinline__ float load(const __nv_bfloat16* p) {
    return __bfloat162float(__ldcg(p));
  }
  __device__ static __forceinline__ void store(__nv_bfloat16* p, float x) {
    *p = __float2bfloat16_rn(x);
  }
};

/* ---- reduce ------------------------------------------------------------------------------- */
/* dst[d][i] = src[0][i] + src[1][i] + ... + src[kSrc-1][i] for i < n, in fp32 and in exactly
 * this order (so every rank computes bit-identical sums), for d < kDst. Work split over
 * threads idx0, idx0 + stride, ... Sources are read through L2 (ld.global.cg): they may have
 * been written by peers. kUnroll vectors × kSrc sources of loads are in flight per thread.
 * A source may equal a destination (in place): each element is read before it is written, by
 * the same thread. Misaligned pointers take an element-wise path. */
template <typename T, int kSrc, int kDst, int kUnroll>
__device__ __forceinline__ void reduce_range(T* const* dst, const T* const* src, size_t n,
                                             size_t idx0, size_t stride) {
  using P = Pack<T>;
  constexpr int kN = P::kN;
  uintptr_t mis = 0;
#pragma unroll
  for (int s = 0; s < kSrc; ++s) mis |= (uintptr_t)src[s];
#pragma unroll
  for (int d = 0; d < kDst; ++d) mis |= (uintptr_t)dst[d];
  size_t done = 0;
  if (mis % kVecBytes == 0) {
    const size_t nvec = n / kN;
    size_t v = idx0;
    for (; v + (size_t)(kUnroll - 1) * stride < nvec; v += (size_t)kUnroll * stride) {
      uint4 r[kUnroll][kSrc];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int s = 0; s < kSrc; ++s) r[u][s] = __ldcg((const uint4*)src[s] + v + u * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float acc[kN], x[kN];
        P::unpack(r[u][0], acc);
#pragma unroll
        for (int s = 1; s < kSrc; ++s) {
          P::unpack(r[u][s], x);
#pragma unroll
          for (int k = 0; k < kN; ++k) acc[k] += x[k];
        }
        const uint4 o = P::pack(acc);
#pragma unroll
        for (int d = 0; d < kDst; ++d) st_global_v4((uint4*)dst[d] + v + u * stride, o);
      }
    }
    for (; v < nvec; v += stride) {
      uint4 r[kSrc];
#pragma unroll
      for (int s = 0; s < kSrc; ++s) r[s] = __ldcg((const uint4*)src[s] + v);
      float acc[kN], x[kN];
      P::unpack(r[0], acc);
#pragma unroll
      for (int s = 1; s < kSrc; ++s) {
        P::unpack(r[s], x);
#pragma unroll
        for (int k = 0; k < kN; ++k) acc[k] += x[k];
      }
      const uint4 o = P::pack(acc);
#pragma unroll
      for (int d = 0; d < kDst; ++d) st_global_v4((uint4*)dst[d] + v, o);
    }
    done = nvec * kN;
  }
  for (size_t i = done + idx0; i < n; i += stride) {
    float acc = P::load(src[0] + i);
#pragma unroll
    for (int s = 1; s < kSrc; ++s) acc += P::load(src[s] + i);
#pragma unroll
    for (int d = 0; d < kDst; ++d) P::store(dst[d] + i, acc);
  }
}

}  // namespace fco

#endif /* FCO_CUDA_PRIMS_CUH_ */

/*
 * embedding_alltoall.cu — fco_embedding_alltoall on GPUs (semantics: include/fco.h; argument
 * record and workspace sizes: src/ops/embedding_alltoall.h). Entry: fco_cuda_embedding_alltoall_run
 * (every GPU transport) and fco_cuda_embedding_alltoall_after_group (nccl, after its NCCL group).
 *
 * Pooling (shared by every kernel): a tile is (local table t, chunk of C consecutive samples).
 *   A bag is pooled by a group of G lanes of one warp (G = a power of two ≥ the 16-byte vectors
 *   of a row, ≤ 32), so a warp pools 32/G bags at once. The group loads G indices (and weights)
 *   at a time, checks them against the table, and broadcasts them by shuffles; each lane then
 *   has kU rows' 16-byte vectors in flight before accumulating in fp32, in bag order (the same
 *   order as the CPU reference, weights by fmaf, mean by one division). Loop bounds are warp-
 *   uniform (warp max), so the full-mask shuffles never diverge. A row that is not a whole
 *   number of 16-byte vectors, or a misaligned pointer, takes the element path (same code,
 *   one element per unit). C = 8 warps × 32/G × 4 depends only on D and the dtype, so every
 *   rank cuts the batch the same way whatever path it takes.
 *   Bad data: a bag whose offsets decrease or leave [0, num_indices] is pooled as empty; an
 *   index outside [0, rows_t) is skipped; both are recorded in dev->err (first wins):
 *   code FCO_ERR_INVALID_ARGUMENT, peer = global table id, slot = FCO_EA_BAD_INDEX /
 *   FCO_EA_BAD_OFFSETS, want = position (in indices / in offsets), seen = the bad value. Only
 *   offsets[0 .. T_r·B], indices/weights[0 .. num_indices) and rows [0, rows_t) are ever read.
 *
 * impl 1 — fused (ea_kernel_fused), one persistent grid of num_local × bpr blocks.
 *   Layout: rank s's workspace holds two halves of R = roundup(max_q b_q · T · D · esize, 256);
 *     the half of a call with epoch e starts at (e & 1) · fco_ws_half_bytes(ws_bytes) (the
 *     workspace rule in src/core/internal.h; ≥ R since ws ≥ 2·R) and is laid out exactly as out_s
 *     [b_s, T, D]: source r's pooled vector for (sample i of s, table t) lands at the place it
 *     takes in out_s. Every pooled vector crosses NVLink once.
 *   Tasks of rank me, in order: pool tiles for destination me+1, me+2, ..., me-1 (remote first),
 *     then me (straight into out); then land tasks (source, group): wait until the source's
 *     counter of that sample group is complete, copy its columns of those rows from the
 *     workspace half into out. Block `part` takes tasks part, part + bpr, ... (static: every
 *     block finishes its pool tiles, which never wait, before it lands).
 *   Groups: a destination's chunks are cut into ≤ 64 groups of cpg chunks. Counter (r, g) of
 *     destination s is slot g of s's signal row r. After a remote tile, the block syncs and
 *     thread 0 does atom.max.relaxed(counter, e << 32), then atom.add.release(counter, 1): the
 *     max lifts the previous call's value (≤ (e-1) << 32 | n) and, being done by every adder
 *     before its add, no add is lost; so the counter ends at (e << 32) + tiles, and the
 *     destination waits for ≥ (e << 32) + T_r · chunks(g). Values only grow and keep the
 *     (epoch << 32 | n) form of prims.cuh, so slots shared with other ops stay consistent.
 *   Presence: block 0 lifts every (destination, group) counter and slot 64 (presence) at start;
 *     every rank waits for every source's presence each call (also when it receives nothing).
 *     So no rank finishes call e+1 before every peer started e+1, i.e. finished e: a write of
 *     call e+2 into the half of call e never meets a destination still landing call e.
 *   Completion: out is complete when the kernel ends (land tasks of every group of every
 *     source ran); the last block advances dev->epoch.
 *   Launch requirements: all blocks co-resident on the local transport (land tasks spin on
 *   other ranks' pool tiles): bpr ≤ occupancy × SMs / num_local. dev->ws_bytes ≥ 2R when P > 1
 *   (checked on the device: FCO_ERR_INTERNAL). Bad data does not stop the protocol (peers never
 *   wait in vain), and waits ignore FCO_ERR_INVALID_ARGUMENT, so out is complete (bad entries
 *   skipped) also then.
 *
 * impl 0 — unfused: ea_kernel_lookup pools [B, T_r, D] (sample-major, the all_to_all_single send
 *   buffer) into ws[0, S); the All-to-All moves block [bstart_s, +b_s) to rank s's ws[S + b_s ·
 *   toff_r · D · esize, ...): grouped ncclSend/ncclRecv of those byte counts on nccl (zero-byte
 *   pairs skipped), cudaMemcpyAsync between the virtual ranks' workspaces on local; then
 *   ea_kernel_permute writes out[i][toff_r + t] = recv_r[i][t]. On nccl the permute is
 *   enqueued by fco_cuda_embedding_alltoall_after_group, after the transport's NCCL group ended
 *   (inside a group, NCCL issues its work only at ncclGroupEnd). P == 1: the lookup writes out.
 *   No signals, no epoch.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "../ops/embedding_alltoall.h"
#include "cuda_ops.h"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBagsPerLane = 4;   /* C = kWarps · (32/G) · kBagsPerLane */
constexpr int kMaxGroups = 64;    /* counter slots 0..63 of a source's row */
constexpr int kPresenceSlot = kMaxGroups;
constexpr int kRowBaseCap = FCO_EMBEDDING_MAX_TABLES + FCO_MAX_GPU_RANKS;
static_assert(kThreads >= FCO_MAX_GPU_RANKS + 1, "load_rank_view needs MAX+1 threads");
static_assert(kPresenceSlot < FCO_SIG_SLOTS, "counter slots must fit the signal row");

/* ---- parameters (by value: a captured graph replays them, no host-to-device copy) -------- */
struct EaRank {
  const char* weight;
  const void* offsets;
  const void* indices;
  const float* psw;
  char* out;
  char* ws;           /* impl 0: this rank's workspace (host-usable device pointer) */
  fco_dev_rank_t* dev;
  int64_t num_indices;
  int32_t row_base0;  /* p.row_base[row_base0 + t] = first row of local table t (T_r + 1 entries) */
  int32_t rank;       /* global rank */
  int32_t idx64;      /* index type is int64 */
  int32_t pad_;
};

struct EaParams {
  EaRank r[FCO_MAX_GPU_RANKS];
  int64_t bstart[FCO_MAX_GPU_RANKS + 1]; /* prefix of batch_per_rank */
  int32_t toff[FCO_MAX_GPU_RANKS + 1];   /* prefix of tables_per_rank */
  int64_t B;
  uint64_t recv_bytes;                   /* R (impl 1) */
  uint64_t send_bytes;                   /* S (impl 0) */
  int32_t T, D;
  int32_t nranks, num_local;
  int32_t chunk;                         /* C */
  int32_t cpg;                           /* chunks per group */
  int32_t lanes;                         /* G of the path taken */
  int32_t mean;
  uint32_t blocks_per_rank;
  int32_t esize;
  int64_t row_base[kRowBaseCap];
};

/* ---- small device helpers ---------------------------------------------------------------- */
__device__ __forceinline__ int64_t ld_index(const void* p, int idx64, int64_t i) {
  return idx64 ? __ldg((const long long*)p + i) : (int64_t)__ldg((const int*)p + i);
}

__device__ __forceinline__ void atom_max_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void atom_add_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ int warp_max(int x) { return __reduce_max_sync(0xffffffffu, (unsigned)x); }

template <typename T>
__device__ __forceinline__ float to_f32(T x);
template <>
__device__ __forceinline__ float to_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_f32<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

/* A unit of a row: 16 bytes (kVec) or one element. */
template <typename T, bool kVec>
struct Unit;
template <typename T>
struct Unit<T, true> {
  using U = uint4;
  static constexpr int kE = Pack<T>::kN;
  __device__ static __forceinline__ U load(const T* row, int u) { return __ldg((const uint4*)row + u); }
  __device__ static __forceinline__ void unpack(const U& x, float* f) { Pack<T>::unpack(x, f); }
  __device__ static __forceinline__ void store(T* dst, int u, const float* f) {
    st_global_v4((uint4*)dst + u, Pack<T>::pack(f));
  }
};
template <typename T>
struct Unit<T, false> {
  using U = T;
  static constexpr int kE = 1;
  __device__ static __forceinline__ U load(const T* row, int u) { return __ldg(row + u); }
  __device__ static __forceinline__ void unpack(const U& x, float* f) { f[0] = to_f32<T>(x); }
  __device__ static __forceinline__ void store(T* dst, int u, const float* f) { Pack<T>::store(dst + u, f[0]); }
};

struct ErrCtx {
  fco_async_err_t* err;
  int* done;      /* shared: this block already recorded (limits host-memory atomics) */
  int32_t table0; /* global id of local table 0 */
};

__device__ __forceinline__ void note_bad(const ErrCtx& e, int t, int kind, int64_t pos, int64_t value) {
  if (*(volatile int*)e.done) return;
  *(volatile int*)e.done = 1;
  record_error(e.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_EMBEDDING_ALLTOALL, e.table0 + t, kind,
               (uint64_t)pos, (uint64_t)value);
}

/* Pool the bags (t, b), b in [b0, b0 + nb), of local table t into dst + (b - b0) · stride
 * (elements). All threads of the block; no synchronisation inside. */
template <typename T, bool kVec, int kNV>
__device__ __forceinline__ void pool_tile(const EaParams& p, const EaRank& rk, int t, int64_t b0,
                                          int nb, T* dst, int64_t stride, const ErrCtx& ec) {
  using Un = Unit<T, kVec>;
  constexpr int kE = Un::kE;
  constexpr int kU = kNV == 1 ? 8 : 2; /* rows in flight per lane */
  const int D = p.D, G = p.lanes, nunits = D / kE;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gl = lane & (G - 1), gi = lane / G;
  const int per_step = kWarps * (32 / G);
  const int steps = (nb + per_step - 1) / per_step;
  const int64_t row0 = p.row_base[rk.row_base0 + t];
  const int64_t rows = p.row_base[rk.row_base0 + t + 1] - row0;
  const T* table = (const T*)rk.weight + row0 * (int64_t)D;
  const int64_t nidx = rk.num_indices;
  const int chunk_units = G * kNV;
  for (int s = 0; s < steps; ++s) {
    const int bi = s * per_step + warp * (32 / G) + gi;
    const bool have = bi < nb;
    const int64_t k = (int64_t)t * p.B + b0 + bi;
    int64_t lo = 0, hi = 0;
    if (have) {
      lo = ld_index(rk.offsets, rk.idx64, k);
      hi = ld_index(rk.offsets, rk.idx64, k + 1);
      if (lo < 0 || hi < lo || hi > nidx) {
        if (gl == 0) note_bad(ec, t, FCO_EA_BAD_OFFSETS, k, hi);
        lo = hi = 0;
      }
    }
    const int64_t len = hi - lo;
    const int iters = warp_max((int)((len + G - 1) / G));
    const int nchunks = (nunits + chunk_units - 1) / chunk_units;
    for (int cc = 0; cc < nchunks; ++cc) {
      const int u0 = cc * chunk_units + gl;
      float acc[kNV][kE];
#pragma unroll
      for (int v = 0; v < kNV; ++v)
#pragma unroll
        for (int e = 0; e < kE; ++e) acc[v][e] = 0.0f;
      for (int it = 0; it < iters; ++it) {
        const int64_t j = lo + (int64_t)it * G + gl;
        const bool in = j < hi;
        int64_t idx = 0;
        float w = 1.0f;
        if (in) {
          idx = ld_index(rk.indices, rk.idx64, j);
          if (rk.psw) w = __ldg(rk.psw + j);
        }
        const bool ok = in && idx >= 0 && idx < rows;
        if (in && !ok && cc == 0) note_bad(ec, t, FCO_EA_BAD_INDEX, j, idx);
        const int nq = warp_max((int)max((int64_t)0, min((int64_t)G, hi - (lo + (int64_t)it * G))));
        for (int q0 = 0; q0 < nq; q0 += kU) {
          typename Un::U x[kU][kNV];
          float wq[kU];
          bool okq[kU];
#pragma unroll
          for (int u = 0; u < kU; ++u) {
            const int q = q0 + u < G ? q0 + u : G - 1;
            const int64_t iq = __shfl_sync(0xffffffffu, (long long)idx, q, G);
            wq[u] = __shfl_sync(0xffffffffu, w, q, G);
            okq[u] = __shfl_sync(0xffffffffu, (int)ok, q, G) && q0 + u < nq;
            const T* row = table + iq * (int64_t)D;
#pragma unroll
            for (int v = 0; v < kNV; ++v) {
              const int un = u0 + v * G;
              if (okq[u] && un < nunits) x[u][v] = Un::load(row, un);
            }
          }
#pragma unroll
          for (int u = 0; u < kU; ++u) {
            if (!okq[u]) continue;
#pragma unroll
            for (int v = 0; v < kNV; ++v) {
              if (u0 + v * G >= nunits) continue;
              float f[kE];
              Un::unpack(x[u][v], f);
              if (rk.psw) {
#pragma unroll
                for (int e = 0; e < kE; ++e) acc[v][e] = fmaf(wq[u], f[e], acc[v][e]);
              } else {
#pragma unroll
                for (int e = 0; e < kE; ++e) acc[v][e] += f[e];
              }
            }
          }
        }
      }
      if (have) {
        if (p.mean && len > 0) {
          const float n = (float)len;
#pragma unroll
          for (int v = 0; v < kNV; ++v)
#pragma unroll
            for (int e = 0; e < kE; ++e) acc[v][e] = acc[v][e] / n;
        }
        T* o = dst + (int64_t)bi * stride;
#pragma unroll
        for (int v = 0; v < kNV; ++v)
          if (u0 + v * G < nunits) Un::store(o, u0 + v * G, acc[v]);
      }
    }
  }
}

/* Bounded wait of thread 0 for *flag >= want; ignores FCO_ERR_INVALID_ARGUMENT (bad data does
 * not stop the protocol), gives up on a timeout (its own, recorded, or another wait's). */
__device__ __forceinline__ bool wait_count(const uint64_t* flag, uint64_t want, const RankView& v,
                                           int32_t peer, int32_t slot) {
  uint64_t seen = ld_acquire_sys(flag);
  if (seen >= want) return true;
  const uint64_t t0 = globaltimer_ns();
  for (uint32_t spin = 1;; ++spin) {
    seen = ld_acquire_sys(flag);
    if (seen >= want) return true;
    if (spin % kSpinsPerClock == 0) {
      if (globaltimer_ns() - t0 > v.timeout_ns) {
        record_error(v.err, FCO_ERR_TIMEOUT, FCO_OP_EMBEDDING_ALLTOALL, peer, slot, want, seen);
        return false;
      }
      if (spin % kSpinsPerErrPoll == 0 && v.err) {
        const int32_t c = ld_relaxed_sys(&v.err->code);
        if (c != 0 && c != FCO_ERR_INVALID_ARGUMENT) return false;
      }
    }
  }
}

/* Copy rows [r0, r1) × bytes [col, col + seg) of a [*, row] byte matrix from src to dst, units
 * of U bytes (all of col, seg, row, src, dst multiples of U). All threads of the block. */
template <typename U>
__device__ __forceinline__ void copy_cols(char* dst, const char* src, int64_t r0, int64_t r1,
                                          size_t row, size_t col, size_t seg) {
  const uint32_t upr = (uint32_t)(seg / sizeof(U));
  const uint64_t n = (uint64_t)(r1 - r0) * upr;
  for (uint64_t x = threadIdx.x; x < n; x += blockDim.x) {
    const uint64_t rr = x / upr, cu = x - rr * upr;
    const size_t off = (size_t)(r0 + (int64_t)rr) * row + col + cu * sizeof(U);
    *(U*)(dst + off) = __ldcg((const U*)(src + off));
  }
}
__device__ __forceinline__ void copy_cols_any(char* dst, const char* src, int64_t r0, int64_t r1,
                                              size_t row, size_t col, size_t seg) {
  const uintptr_t m = (uintptr_t)dst | (uintptr_t)src | row | col | seg;
  if (m % 16 == 0) copy_cols<uint4>(dst, src, r0, r1, row, col, seg);
  else if (m % 4 == 0) copy_cols<uint32_t>(dst, src, r0, r1, row, col, seg);
  else copy_cols<uint16_t>(dst, src, r0, r1, row, col, seg);
}

__device__ __forceinline__ int64_t num_chunks(const EaParams& p, int d) {
  return (p.bstart[d + 1] - p.bstart[d] + p.chunk - 1) / p.chunk;
}

/* ---- impl 1 ------------------------------------------------------------------------------- */
template <typename T, bool kVec, int kNV>
__global__ void __launch_bounds__(kThreads, 2) ea_kernel_fused(const __grid_constant__ EaParams p) {
  __shared__ RankView v;
  __shared__ int err_done;
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  fco_dev_rank_t* dev = rk.dev;
  if (threadIdx.x == 0) err_done = 0;
  load_rank_view(dev, &v);
  const uint64_t e = v.epoch + 1;
  const int P = p.nranks, me = v.rank;
  const size_t es = sizeof(T);
  if (v.nranks != P || me != rk.rank || (P > 1 && v.ws_bytes < 2 * p.recv_bytes)) {
    if (threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_EMBEDDING_ALLTOALL, me, -1, 2 * p.recv_bytes,
                   v.ws_bytes);
    epoch_end(dev, e, p.blocks_per_rank);
    return;
  }
  const ErrCtx ec{v.err, &err_done, p.toff[me]};
  const int Tme = p.toff[me + 1] - p.toff[me];
  /* Halves at 0 and ws/2 whatever this call's size: the workspace rule (src/core/internal.h). */
  const size_t half = (size_t)(e & 1) * fco_ws_half_bytes(v.ws_bytes);
  const size_t row_bytes = (size_t)p.T * p.D * es;
  const uint64_t base = e << 32;

  /* Presence and group counters of every destination lifted to this call. */
  if (part == 0 && P > 1) {
    for (int k = 1; k < P; ++k) {
      const int d = (me + k) % P;
      const int ng = (int)((num_chunks(p, d) + p.cpg - 1) / p.cpg);
      uint64_t* row = v.peer_sig[d] + (size_t)me * FCO_SIG_SLOTS;
      for (int g = threadIdx.x; g <= ng; g += blockDim.x)
        atom_max_relaxed_sys(row + (g == ng ? kPresenceSlot : g), base);
    }
  }

  int64_t ntask_pool = 0;
  for (int d = 0; d < P; ++d) ntask_pool += num_chunks(p, d) * Tme;
  const int64_t nch_me = num_chunks(p, me);
  const int64_t ng_me = (nch_me + p.cpg - 1) / p.cpg;
  const int64_t land_per_src = ng_me > 0 ? ng_me : 1;
  const int64_t ntask = ntask_pool + (P > 1 ? (int64_t)(P - 1) * land_per_src : 0);
  const int64_t b_me = p.bstart[me + 1] - p.bstart[me];

  for (int64_t task = part; task < ntask; task += p.blocks_per_rank) {
    if (task < ntask_pool) {
      int64_t rem = task;
      int d = me;
      for (int k = 1; k <= P; ++k) {
        d = (me + k) % P;
        const int64_t n = num_chunks(p, d) * Tme;
        if (rem < n) break;
        rem -= n;
      }
      const int64_t c = rem / Tme;
      const int t = (int)(rem - c * Tme);
      const int64_t bd = p.bstart[d + 1] - p.bstart[d];
      const int64_t i0 = c * p.chunk;
      const int nb = (int)min((int64_t)p.chunk, bd - i0);
      char* dbase = d == me ? rk.out : v.peer_data[d] + half;
      T* dst = (T*)(dbase + (size_t)i0 * row_bytes + (size_t)(p.toff[me] + t) * p.D * es);
      pool_tile<T, kVec, kNV>(p, rk, t, p.bstart[d] + i0, nb, dst, (int64_t)p.T * p.D, ec);
      if (d != me) {
        __syncthreads(); /* every thread's stores before thread 0's release */
        if (threadIdx.x == 0) {
          uint64_t* ctr = v.peer_sig[d] + (size_t)me * FCO_SIG_SLOTS + (size_t)(c / p.cpg);
          atom_max_relaxed_sys(ctr, base);
          atom_add_release_sys(ctr, 1);
        }
      }
    } else {
      const int64_t lt = task - ntask_pool;
      const int k = 1 + (int)(lt / land_per_src); /* sources me-1, me-2, ...: who sent first */
      const int src = (me - k + P) % P;
      const int64_t g = lt - (int64_t)(k - 1) * land_per_src;
      const int Ts = p.toff[src + 1] - p.toff[src];
      bool ok = true;
      if (threadIdx.x == 0) {
        const uint64_t* row = v.peer_sig[me] + (size_t)src * FCO_SIG_SLOTS;
        if (g == 0) ok = wait_count(row + kPresenceSlot, base, v, src, kPresenceSlot);
        if (ok && g < ng_me) {
          const int64_t chunks = min((int64_t)p.cpg, nch_me - g * p.cpg);
          ok = wait_count(row + g, base + (uint64_t)(Ts * chunks), v, src, (int32_t)g);
        }
      }
      if (__syncthreads_or(!ok)) break;
      if (g < ng_me && Ts > 0) {
        const int64_t r0 = g * p.cpg * p.chunk;
        const int64_t r1 = min(b_me, r0 + (int64_t)p.cpg * p.chunk);
        copy_cols_any(rk.out, v.peer_data[me] + half, r0, r1, row_bytes,
                      (size_t)p.toff[src] * p.D * es, (size_t)Ts * p.D * es);
      }
    }
  }
  epoch_end(dev, e, p.blocks_per_rank);
}

/* ---- impl 0 ------------------------------------------------------------------------------- */
/* Pooled [B, T_r, D] into ws[0, S) (P > 1) or out (P == 1). Grid: num_local × bpr blocks. */
template <typename T, bool kVec, int kNV>
__global__ void __launch_bounds__(kThreads, 2) ea_kernel_lookup(const __grid_constant__ EaParams p) {
  __shared__ int err_done;
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  if (threadIdx.x == 0) err_done = 0;
  __syncthreads();
  const int me = rk.rank;
  const ErrCtx ec{rk.dev->err, &err_done, p.toff[me]};
  const int Tme = p.toff[me + 1] - p.toff[me];
  T* base = (T*)(p.nranks > 1 ? rk.ws : rk.out);
  const int64_t nch = (p.B + p.chunk - 1) / p.chunk;
  const int64_t ntask = nch * Tme;
  for (int64_t task = part; task < ntask; task += p.blocks_per_rank) {
    const int64_t c = task / Tme;
    const int t = (int)(task - c * Tme);
    const int64_t b0 = c * p.chunk;
    const int nb = (int)min((int64_t)p.chunk, p.B - b0);
    pool_tile<T, kVec, kNV>(p, rk, t, b0, nb, base + (b0 * Tme + t) * (int64_t)p.D,
                            (int64_t)Tme * p.D, ec);
  }
}

/* out[i][toff_q + t] = recv_q[i][t] for every source q: recv_q at ws + S + b_me · toff_q · D.
 * One warp per (local rank, row, source). */
__global__ void __launch_bounds__(kThreads) ea_kernel_permute(const __grid_constant__ EaParams p) {
  const int esize = p.esize;
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int P = p.nranks;
  const size_t vec = (size_t)p.D * esize, row = (size_t)p.T * vec;
  int64_t total = 0;
  for (int li = 0; li < p.num_local; ++li) {
    const int me = p.r[li].rank;
    total += (p.bstart[me + 1] - p.bstart[me]) * P;
  }
  for (int64_t w = warp0; w < total; w += nwarps) {
    int64_t rem = w;
    int li = 0;
    for (; li < p.num_local; ++li) {
      const int me = p.r[li].rank;
      const int64_t n = (p.bstart[me + 1] - p.bstart[me]) * P;
      if (rem < n) break;
      rem -= n;
    }
    const EaRank& rk = p.r[li];
    const int me = rk.rank;
    const int64_t bme = p.bstart[me + 1] - p.bstart[me];
    const int64_t i = rem / P;
    const int q = (int)(rem - i * P);
    const int Tq = p.toff[q + 1] - p.toff[q];
    if (Tq == 0) continue;
    const size_t seg = (size_t)Tq * vec;
    const char* src = rk.ws + p.send_bytes + (size_t)bme * p.toff[q] * vec + (size_t)i * seg;
    char* dst = rk.out + (size_t)i * row + (size_t)p.toff[q] * vec;
    const uintptr_t m = (uintptr_t)src | (uintptr_t)dst | seg;
    if (m % 16 == 0) {
      for (size_t x = lane; x < seg / 16; x += 32) ((uint4*)dst)[x] = ((const uint4*)src)[x];
    } else if (m % 4 == 0) {
      for (size_t x = lane; x < seg / 4; x += 32) ((uint32_t*)dst)[x] = ((const uint32_t*)src)[x];
    } else {
      for (size_t x = lane; x < seg / 2; x += 32) ((uint16_t*)dst)[x] = ((const uint16_t*)src)[x];
    }
  }
}

/* ---- host side -------------------------------------------------------------------------- */
int pow2_at_least(int x) {
  int g = 1;
  while (g < x) g <<= 1;
  return g;
}

/* Lanes per bag of the 16-byte path for a row of D·esize bytes (also fixes the tile size). */
int vec_lanes(int64_t D, size_t es) {
  const int64_t nvec = ((int64_t)D * (int64_t)es + 15) / 16;
  return nvec >= 32 ? 32 : pow2_at_least((int)nvec);
}

/* Which kernel variant: kVec, kNV, and the lanes per bag of that variant. */
struct Variant {
  bool vec;
  int nv;
  int lanes;
};

Variant pick_variant(const fco_gpu_launch_t* l, const fco_ea_args_t* a0, size_t es) {
  bool vec = ((size_t)a0->dim * es) % 16 == 0;
  for (int i = 0; i < l->num_local && vec; i++) {
    const fco_ea_args_t* a = fco_ea_args(l->r[i].op);
    if ((uintptr_t)a->weight % 16 || (uintptr_t)a->out % 16) vec = false;
  }
  const int64_t units = vec ? (int64_t)a0->dim * (int64_t)es / 16 : a0->dim;
  Variant v;
  v.vec = vec;
  v.nv = units > 32 ? 4 : 1;
  v.lanes = units >= 32 ? 32 : pow2_at_least((int)units);
  return v;
}

fco_result_t fill_params(const fco_gpu_launch_t* l, EaParams* p, char* err) {
  const fco_ea_args_t* a0 = fco_ea_args(l->r[0].op);
  const size_t es = fco_dtype_size(a0->dtype);
  memset(p, 0, sizeof *p);
  const int P = l->nranks;
  p->nranks = P;
  p->num_local = l->num_local;
  p->B = a0->batch;
  p->T = a0->num_tables;
  p->D = (int32_t)a0->dim;
  p->mean = a0->pooling == FCO_EMB_POOL_MEAN;
  for (int q = 0; q < P; q++) {
    p->bstart[q + 1] = p->bstart[q] + a0->batch_per_rank[q];
    p->toff[q + 1] = p->toff[q] + a0->tables_per_rank[q];
  }
  p->chunk = kWarps * (32 / vec_lanes(a0->dim, es)) * kBagsPerLane;
  int64_t nch_max = 0;
  for (int q = 0; q < P; q++) {
    const int64_t n = (a0->batch_per_rank[q] + p->chunk - 1) / p->chunk;
    if (n > nch_max) nch_max = n;
  }
  p->cpg = (int32_t)((nch_max + kMaxGroups - 1) / kMaxGroups);
  if (p->cpg < 1) p->cpg = 1;
  p->recv_bytes = fco_ea_recv_bytes(a0->tables_per_rank, a0->batch_per_rank, P, a0->dim, es);
  p->send_bytes = fco_ea_send_bytes(a0->tables_per_rank, a0->batch_per_rank, P, a0->dim, es);
  int32_t nb = 0;
  for (int i = 0; i < l->num_local; i++) {
    const fco_ea_args_t* a = fco_ea_args(l->r[i].op);
    EaRank* r = &p->r[i];
    const int Tr = a->tables_per_rank[a->rank];
    if (nb + Tr + 1 > kRowBaseCap)
      return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: %d local tables exceed %d",
                  nb + Tr + 1, kRowBaseCap);
    r->weight = (const char*)a->weight;
    r->offsets = a->offsets;
    r->indices = a->indices;
    r->psw = a->per_sample_weights;
    r->out = (char*)a->out;
    r->ws = (char*)l->r[i].ws;
    r->dev = l->r[i].dev;
    r->num_indices = a->num_indices;
    r->row_base0 = nb;
    r->rank = a->rank;
    r->idx64 = a->index_type == FCO_EMB_INDEX_I64;
    p->row_base[nb] = 0;
    for (int t = 0; t < Tr; t++) p->row_base[nb + t + 1] = p->row_base[nb + t] + a->table_rows[t];
    nb += Tr + 1;
  }
  return FCO_OK;
}

template <auto kKernel>
fco_result_t launch(const EaParams& p, int64_t max_tasks, int num_local, void* stream,
                    const char* what, char* err) {
  int device = 0, sms = 0, cap = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  res = max_coresident_blocks<kKernel>(err, device, sms, kThreads, &cap);
  if (res != FCO_OK) return res;
  int64_t bpr = cap / num_local;
  if (bpr < 1)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_embedding_alltoall: %d co-resident blocks on device %d cannot give each of "
                "%d ranks one block", cap, device, num_local);
  /* No more blocks than tasks; never more than fit at once (fused: land tasks spin). */
  if (max_tasks < bpr) bpr = max_tasks > 0 ? max_tasks : 1;
  EaParams* pp = const_cast<EaParams*>(&p);
  pp->blocks_per_rank = (uint32_t)bpr;
  const unsigned grid = (unsigned)(bpr * num_local);
  kKernel<<<grid, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    char w[160];
    snprintf(w, sizeof w, "fco_embedding_alltoall: %s launch of %u blocks x %d threads", what,
             grid, kThreads);
    return cuda_fail(err, ce, w);
  }
  return FCO_OK;
}

using RunFn = fco_result_t (*)(const EaParams&, int64_t, int, void*, char*);

template <typename T, bool kVec, int kNV>
fco_result_t run_fused(const EaParams& p, int64_t max_tasks, int num_local, void* stream, char* err) {
  /* Persistent: every block of the grid exists at once (land tasks spin on pool tiles). */
  return launch<ea_kernel_fused<T, kVec, kNV>>(p, max_tasks, num_local, stream, "fused", err);
}
template <typename T, bool kVec, int kNV>
fco_result_t run_lookup(const EaParams& p, int64_t max_tasks, int num_local, void* stream, char* err) {
  return launch<ea_kernel_lookup<T, kVec, kNV>>(p, max_tasks, num_local, stream, "lookup", err);
}

template <bool kFused, typename T>
RunFn pick_t(const Variant& v) {
  if (v.vec) return v.nv == 1 ? (kFused ? run_fused<T, true, 1> : run_lookup<T, true, 1>)
                              : (kFused ? run_fused<T, true, 4> : run_lookup<T, true, 4>);
  return v.nv == 1 ? (kFused ? run_fused<T, false, 1> : run_lookup<T, false, 1>)
                   : (kFused ? run_fused<T, false, 4> : run_lookup<T, false, 4>);
}
template <bool kFused>
RunFn pick(fco_dtype_t dt, const Variant& v) {
  switch (dt) {
    case FCO_F32: return pick_t<kFused, float>(v);
    case FCO_F16: return pick_t<kFused, __half>(v);
    case FCO_BF16: return pick_t<kFused, __nv_bfloat16>(v);
    default: return nullptr;
  }
}

fco_result_t launch_permute(const EaParams& p, void* stream, char* err) {
  int64_t warps = 0;
  for (int i = 0; i < p.num_local; i++) {
    const int me = p.r[i].rank;
    warps += (p.bstart[me + 1] - p.bstart[me]) * p.nranks;
  }
  if (warps == 0) return FCO_OK;
  int device = 0, sms = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  int64_t blocks = (warps + kWarps - 1) / kWarps;
  if (blocks > (int64_t)sms * 8) blocks = (int64_t)sms * 8;
  ea_kernel_permute<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "fco_embedding_alltoall: permute launch");
}

/* Largest task count of the local ranks: pool tiles (+ land tasks when fused). */
int64_t max_tasks(const EaParams& p, bool fused) {
  int64_t best = 0;
  for (int i = 0; i < p.num_local; i++) {
    const int me = p.r[i].rank, P = p.nranks;
    const int64_t Tme = p.toff[me + 1] - p.toff[me];
    int64_t n = 0;
    if (fused) {
      for (int d = 0; d < P; d++) n += (p.bstart[d + 1] - p.bstart[d] + p.chunk - 1) / p.chunk * Tme;
      const int64_t ng = ((p.bstart[me + 1] - p.bstart[me] + p.chunk - 1) / p.chunk + p.cpg - 1) / p.cpg;
      if (P > 1) n += (int64_t)(P - 1) * (ng > 0 ? ng : 1);
    } else {
      n = (p.B + p.chunk - 1) / p.chunk * Tme;
    }
    if (n > best) best = n;
  }
  return best;
}

/* Checks of the launch descriptor against the op records. */
fco_result_t check_launch(const fco_gpu_launch_t* l, char* err) {
  if (!l || l->num_local < 1 || l->nranks < 1 || l->nranks > FCO_MAX_GPU_RANKS ||
      l->num_local > l->nranks)
    return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: bad launch descriptor");
  const fco_ea_args_t* a0 = fco_ea_args(l->r[0].op);
  if (a0->nranks != l->nranks)
    return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: op made for %d ranks, launch has %d",
                a0->nranks, l->nranks);
  if (a0->dim > INT32_MAX / 16)
    return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dim %lld too large",
                (long long)a0->dim);
  for (int i = 0; i < l->num_local; i++) {
    const fco_op_t* op = l->r[i].op;
    if (!l->r[i].dev)
      return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: local rank %d: dev is NULL", i);
    if (op->ws_bytes > 0 && !l->r[i].ws)
      return fail(err, FCO_ERR_INTERNAL, "fco_embedding_alltoall: local rank %d: no workspace", i);
  }
  return FCO_OK;
}

}  // namespace
}  // namespace fco

using namespace fco;

extern "C" fco_result_t fco_cuda_embedding_alltoall_run(const fco_gpu_launch_t* l, char* err) {
  fco_result_t res = check_launch(l, err);
  if (res != FCO_OK) return res;
  const fco_op_t* op0 = l->r[0].op;
  const fco_ea_args_t* a0 = fco_ea_args(op0);
  const size_t es = fco_dtype_size(a0->dtype);
  static thread_local EaParams p; /* 9 KB: not on the stack */
  if ((res = fill_params(l, &p, err)) != FCO_OK) return res;
  p.esize = (int32_t)es;
  const Variant v = pick_variant(l, a0, es);
  p.lanes = v.lanes;
  const int P = l->nranks;
  if (op0->impl == 1) {
    RunFn fn = pick<true>(a0->dtype, v);
    if (!fn) return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dtype %d", (int)a0->dtype);
    return fn(p, max_tasks(p, true), l->num_local, l->stream, err);
  }
  if (op0->impl != 0)
    return fail(err, FCO_ERR_INVALID_ARGUMENT, "fco_embedding_alltoall: impl %d does not exist",
                op0->impl);
  RunFn fn = pick<false>(a0->dtype, v);
  if (!fn) return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dtype %d", (int)a0->dtype);
  if ((res = fn(p, max_tasks(p, false), l->num_local, l->stream, err)) != FCO_OK) return res;
  if (P == 1) return FCO_OK;
  const size_t vec = (size_t)a0->dim * es;
  cudaStream_t stream = (cudaStream_t)l->stream;
  if (l->transport == FCO_TRANSPORT_NCCL) {
    /* all_to_all_single as grouped send/recv; the permute follows in ..._after_group. */
    ncclComm_t nc = (ncclComm_t)l->r[0].nccl_comm;
    const int me = p.r[0].rank;
    const int64_t Tme = p.toff[me + 1] - p.toff[me], bme = p.bstart[me + 1] - p.bstart[me];
    char* send = p.r[0].ws;
    char* recv = p.r[0].ws + p.send_bytes;
    ncclResult_t nr = ncclGroupStart();
    for (int q = 0; q < P && (nr == ncclSuccess || nr == ncclInProgress); q++) {
      const size_t sb = (size_t)(p.bstart[q + 1] - p.bstart[q]) * (size_t)Tme * vec;
      const size_t rb = (size_t)bme * (size_t)(p.toff[q + 1] - p.toff[q]) * vec;
      if (sb) nr = ncclSend(send + (size_t)p.bstart[q] * (size_t)Tme * vec, sb, ncclInt8, q, nc, stream);
      if (rb && (nr == ncclSuccess || nr == ncclInProgress))
        nr = ncclRecv(recv + (size_t)bme * (size_t)p.toff[q] * vec, rb, ncclInt8, q, nc, stream);
    }
    ncclResult_t ne = ncclGroupEnd(); /* always: balances the group */
    if (nr == ncclSuccess || nr == ncclInProgress) nr = ne;
    if (nr != ncclSuccess && nr != ncclInProgress)
      return fail(err, FCO_ERR_NCCL, "fco_embedding_alltoall: ncclSend/ncclRecv: %s (%s)",
                  ncclGetErrorString(nr), ncclGetLastError(nc));
    return FCO_OK;
  }
  /* local: every virtual rank is in this launch; copy block [bstart_s, +b_s) of r's send buffer
   * into s's receive area at b_s · toff_r rows. */
  if (l->num_local != P)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_embedding_alltoall: impl 0 on the local transport needs every virtual rank "
                "in one launch (%d of %d)", l->num_local, P);
  for (int i = 0; i < P; i++) {
    const int r = p.r[i].rank;
    const size_t Tr = (size_t)(p.toff[r + 1] - p.toff[r]);
    for (int j = 0; j < P; j++) {
      const int s = p.r[j].rank;
      const size_t bs = (size_t)(p.bstart[s + 1] - p.bstart[s]);
      const size_t bytes = bs * Tr * vec;
      if (!bytes) continue;
      cudaError_t ce = cudaMemcpyAsync(p.r[j].ws + p.send_bytes + bs * (size_t)p.toff[r] * vec,
                                       p.r[i].ws + (size_t)p.bstart[s] * Tr * vec, bytes,
                                       cudaMemcpyDeviceToDevice, stream);
      if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_embedding_alltoall: cudaMemcpyAsync");
    }
  }
  return launch_permute(p, l->stream, err);
}

/* nccl, impl 0: the permute, enqueued once the transport's NCCL group has issued the
 * send/recv (a kernel launched inside the group would run before them). */
extern "C" fco_result_t fco_cuda_embedding_alltoall_after_group(const fco_gpu_launch_t* l,
                                                                char* err) {
  const fco_op_t* op0 = l->r[0].op;
  if (op0->impl != 0 || l->nranks == 1 || l->transport != FCO_TRANSPORT_NCCL) return FCO_OK;
  fco_result_t res = check_launch(l, err);
  if (res != FCO_OK) return res;
  static thread_local EaParams p;
  if ((res = fill_params(l, &p, err)) != FCO_OK) return res;
  p.esize = (int32_t)fco_dtype_size(fco_ea_args(op0)->dtype);
  return launch_permute(p, l->stream, err);
}

/*
 * gemv_allreduce_sched.cuh — the device side of fco_gemv_allreduce's fused kernel
 * (gemv_allreduce_kernel in gemv_allreduce.cu): its parameters (GarParams), per-block context
 * and shared memory, the block shapes per m-tiles, the helpers every schedule uses (finish4_at,
 * the argument check, PDL), and the one-tile schedules — the one-shot (run_oneshot) and the
 * two-phase (run_twophase). The other schedules build on this: the grouped tiles and their split
 * helpers in gemv_allreduce_group.cuh, the LL one-shot in gemv_allreduce_ll.cuh. The protocol,
 * the rules and the measurements behind them are in gemv_allreduce.cu's header; the tiles' math
 * in gemv_tile.cuh, gemv_group_tile.cuh, gemv_group_wgmma.cuh and gemv_group_tma.cuh.
 */
#ifndef FCO_CUDA_GEMV_ALLREDUCE_SCHED_CUH_
#define FCO_CUDA_GEMV_ALLREDUCE_SCHED_CUH_

#include <type_traits>

#include "../ops/gemv_allreduce.h"
#include "gemv_tile.cuh"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace {

using gemv::kTileN;

/* Partial flags use slots [0, B), gather flags (impl 2) [B, 2B), the argument check the last
 * slot. */
constexpr int kCheckSlot = FCO_SIG_SLOTS - 1;
constexpr int max_blocks(int impl) { return impl == 2 ? (FCO_SIG_SLOTS - 1) / 2 : FCO_SIG_SLOTS - 1; }
/* FCO_GEMV_PDL: the W prefetch of the whole grid stays within this, well below H200's L2. */
constexpr uint64_t kPdlL2Budget = (uint64_t)32 << 20;

/* Block shape per m-tiles (kMT = ceil(M / 8)), chosen with bench/probe/gemv_stream_probe.cu on
 * H200 (run 098826b, bench/results/2026-11-30_nvidia-h200-x2_098826b): up to M = 16, blocks of
 * 4 warps taking 8 chunks per step (8 KB of W in flight per warp) at 4 blocks per SM streamed W
 * 2-6 % faster at M ≤ 4 and 8-15 % faster at M = 16 than 8 warps of 4 chunks at 3 blocks per SM;
 * the register-hungry large-M tiles keep 8 warps of 4 chunks. kMT = 2 in bf16 / f16 runs the
 * pipelined loop with kPipeUnroll chunks per step instead (FCO_GEMV_PIPE, see
 * gemv_allreduce.cu's header). */
template <int kMT>
constexpr int kWarpsOf = kMT <= 2 ? 4 : 8;
template <int kMT>
constexpr int kUnrollOf = kMT <= 2 ? 8 : 4;
template <int kMT>
constexpr int kMinBlocksOf = kMT <= 2 ? 4 : kMT == 4 ? 2 : 1;
/* FCO_GEMV_PIPE unset: the pipelined loop where the rank's K is at least this (run 41b9bcb). */
constexpr int64_t kPipeAutoMinK = 12288;
/* FCO_GEMV_PIPE: chunks per step of the pipelined loop (two groups in flight per warp). */
constexpr int kPipeUnroll = 4;

struct GarParams {
  const void* x[FCO_MAX_GPU_RANKS];
  const void* w[FCO_MAX_GPU_RANKS];
  const void* bias[FCO_MAX_GPU_RANKS];
  void* y[FCO_MAX_GPU_RANKS];
  fco_dev_rank_t* dev[FCO_MAX_GPU_RANKS];
  int64_t K[FCO_MAX_GPU_RANKS];
  uint8_t vec[FCO_MAX_GPU_RANKS]; /* W, x and K·esize 16-byte aligned */
  int M, N, T;                    /* T = tiles */
  int blocks_per_rank;            /* B: the blocks that own tiles or groups (flags, pushes) */
  int blocks_total;               /* B + the split helpers: a rank's blocks in the grid */
  int split;                      /* grouped tiles: K slices per group (1 = not split) */
  int tma_stages; /* TMA grouped tile: ring stages in use (FCO_GEMV_TMA_STAGES; 0 = all) */
  int pair; /* TMA grouped tile, split 2..4: owner and helpers in a cluster of split blocks, the
             * helpers' slices handed over in the owner's shared memory (no split area, no
             * flag; gemv_group_tma.cuh's hand_buf) */
  uint64_t split_slice_bytes;     /* the split area's bytes per slice */
  uint64_t split_off;             /* the split area's offset in a half (fco_gemv_ar_split_off) */
  int nranks;                     /* the communicator's size */
  int rank[FCO_MAX_GPU_RANKS];    /* each local rank's rank (two-phase groups: the prologue's
                                   * order, before the rank view is read; checked against it) */
  uint64_t slot_bytes;            /* S: one rank's fp32 partial tiles */
  uint64_t half_bytes;            /* one epoch half */
  uint64_t ll_slot_bytes;         /* SL: one rank's partial tiles as LL words (LL kernels) */
  int check_args;
  uint32_t arg_hash;
  uint32_t prefetch_bytes; /* kPdl: bytes of its first tile's W a block asks L2 for, 0 = none */
  int ll_half;     /* LL kernels, bf16 / f16: partials in the dtype, 2 a word (FCO_GEMV_LL_FP32) */
  int group_half;  /* grouped tiles: partials pushed in the dtype (FCO_GEMV_GROUP_FP32 unset) */
  int rounds; /* TMA grouped one-shot: FCO_GEMV_ROUNDS (> 1: run_oneshot_rounds, B = ceil(groups
              * / rounds) owners, split 1 or pairs), else 1 */
  int fin_split; /* TMA grouped one-shot in cluster pairs: owner and helper finalise half a group
                  * each (FCO_GEMV_PAIR_FIN; run_oneshot_rounds, also at rounds 1) */
};

/* 4 outputs of the dtype as raw bits (a gather-area element group). */
template <typename T>
struct Raw4 {
  using U = uint16_t;
  using V = uint2;
};
template <>
struct Raw4<float> {
  using U = uint32_t;
  using V = uint4;
};

template <typename T>
__device__ __forceinline__ typename Raw4<T>::U to_raw(float f) {
  if constexpr (sizeof(T) == 4) {
    return __float_as_uint(f);
  } else {
    T h;
    Pack<T>::store(&h, f);
    return *reinterpret_cast<const uint16_t*>(&h);
  }
}

/* Per-block state shared by the schedules. */
struct Ctx {
  const char* x;
  const char* w;
  const char* bias;
  char* y;
  int64_t K;
  bool vec;
  int b, B, P, me;
  uint64_t e;
  size_t hoff;  /* offset of this call's half */
  size_t lloff; /* LL kernels: offset of this call's LL half (past the data workspace) */
  const void* mx; /* TMA grouped tiles (kTma): this rank's tensor maps of x and W */
  const void* mw;
};

/* Wide one-shot blocks (kW = kWideWarps, 2 blocks per SM): where the tiles fill at most half of the
 * narrow blocks' slots (N ≤ 16·SMs·2, e.g. 4096 at 4096×14336: 256 tiles, one block each, ~2
 * narrow blocks of 4 warps per SM), 8 warps per block keep twice the W bytes in flight per SM
 * (the 8192×8192 case's 16 warps per SM). FCO_GEMV_WIDE=0 turns it off. */
constexpr int kWideWarps = 8;

template <int kMT, int kW = kWarpsOf<kMT>>
struct Smem {
  RankView v;
  __align__(16) float red[kW][kMT * 8][kTileN];
};
struct SmemView {
  RankView v;
};

/* All threads: compute tile t into red, sum the warps. Thread i < 4M returns float4 i of the
 * [M][16] partial (m = i / 4, columns (i % 4)·4 ..). */
template <typename T, int kMT, bool kPipe, int kW = kWarpsOf<kMT>>
__device__ __forceinline__ float4 compute_tile(const GarParams& p, const Ctx& c,
                                               Smem<kMT, kW>& s, int t) {
  const int warp = threadIdx.x >> 5;
  gemv::tile<T, kMT, kPipe ? kPipeUnroll : kUnrollOf<kMT>, kW, kPipe>(
      (const T*)c.w, (const T*)c.x, p.M, p.N, c.K, t * kTileN, c.vec, s.red[warp]);
  __syncthreads();
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
  const int i = threadIdx.x;
  if (i < 4 * p.M) {
    const int m = i >> 2, q = (i & 3) * 4;
#pragma unroll
    for (int wi = 0; wi < kW; ++wi) {
      const float4 v = *reinterpret_cast<const float4*>(&s.red[wi][m][q]);
      r.x += v.x;
      r.y += v.y;
      r.z += v.z;
      r.w += v.w;
    }
  }
  return r;
}

__device__ __forceinline__ float4 add4(float4 a, const float4& b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  a.w += b.w;
  return a;
}

/* Two partials rounded to the dtype T (bf16 / f16) in 32 bits, and back: the half-width
 * partials of the LL words (p.ll_half) and of the grouped tiles' pushes (p.group_half). */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t u) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
  else
    return __half22float2(*reinterpret_cast<const __half2*>(&u));
}
/* Four partials from the low 32 bits of two words (two pack2 results). */
template <typename T>
__device__ __forceinline__ float4 unpack4(uint64_t w0, uint64_t w1) {
  const float2 a = unpack2<T>((uint32_t)w0), b = unpack2<T>((uint32_t)w1);
  return make_float4(a.x, a.y, b.x, b.y);
}

/* The 4 outputs i (< 4M) of tile t, raw dtype bits, into y (columns < N only). One vector store
 * where the 4 columns are in y and aligned, else one element at a time (session 23: the scalar
 * stores touch every 32-byte sector of a warp's rows four times; the grouped tile's last loop,
 * ~3 µs in run 2026-12-02_nvidia-h200_0c41359-gtrace, stayed 2.8–3.0 with this in run
 * ..._ee6e36d-vstore: the stores were not its cost — its ~108 instructions a float4 were, run
 * ..._34bb36f-icache). kChecked = false: the caller's promise that all 4 are < N and aligned. */
template <typename T, bool kChecked = true>
__device__ __forceinline__ void store4_at(const GarParams& p, const Ctx& c, int t, int i,
                                          typename Raw4<T>::V v) {
  using U = typename Raw4<T>::U;
  using V = typename Raw4<T>::V;
  const int m = i >> 2;
  const int n = t * kTileN + (i & 3) * 4;
  U* dst = (U*)c.y + (int64_t)m * p.N + n;
  if (!kChecked || (n + 3 < p.N && (uintptr_t)dst % sizeof(V) == 0)) {
    *(V*)dst = v;
  } else {
    U u[4];
    if constexpr (sizeof(T) == 4) {
      u[0] = v.x, u[1] = v.y, u[2] = v.z, u[3] = v.w;
    } else {
      u[0] = (U)(v.x & 0xffffu), u[1] = (U)(v.x >> 16), u[2] = (U)(v.y & 0xffffu),
      u[3] = (U)(v.y >> 16);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (n + k < p.N) dst[k] = u[k];
  }
}

/* Thread i < 4M (finish4: i = threadIdx.x): bias, round, write the 4 outputs i of tile t into
 * y (columns < N only); returns them as raw dtype bits for the gather push. kChecked = false
 * (the caller's promise: no bias, all 4 columns < N, y's 4 elements aligned as one vector):
 * the same bits without the per-element checks. */
template <typename T, bool kChecked = true>
__device__ __forceinline__ typename Raw4<T>::V finish4_at(const GarParams& p, const Ctx& c, int t,
                                                          int i, float4 acc) {
  using U = typename Raw4<T>::U;
  using V = typename Raw4<T>::V;
  const int n = t * kTileN + (i & 3) * 4;
  float f[4] = {acc.x, acc.y, acc.z, acc.w};
  U u[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (kChecked && c.bias && n + k < p.N) f[k] += Pack<T>::load((const T*)c.bias + n + k);
    u[k] = to_raw<T>(f[k]);
  }
  V v;
  if constexpr (sizeof(T) == 4)
    v = make_uint4(u[0], u[1], u[2], u[3]);
  else
    v = make_uint2((uint32_t)u[0] | ((uint32_t)u[1] << 16), (uint32_t)u[2] | ((uint32_t)u[3] << 16));
  store4_at<T, kChecked>(p, c, t, i, v);
  return v;
}
template <typename T>
__device__ __forceinline__ typename Raw4<T>::V finish4(const GarParams& p, const Ctx& c, int t,
                                                       float4 acc) {
  return finish4_at<T>(p, c, t, threadIdx.x, acc);
}

/* griddepcontrol (PTX ISA, sm_90): wait = until the grids this one depends on (the previous
 * kernel of the stream, when launched with programmatic stream serialization) have completed
 * and their memory is visible to this thread; no-op otherwise. launch_dependents = this block
 * lets a PDL-launched next kernel be scheduled once every block of this grid has issued it or
 * exited; no-op when nothing was launched that way. */
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* All threads. FCO_CHECK_ARGS: exchange the argument hash with every peer (see
 * gemv_allreduce.cu's header). */
__device__ __forceinline__ bool check_args(const RankView& v, const Ctx& c, const WaitCtx& wc,
                                           uint32_t hash) {
  const int q = threadIdx.x;
  bool ok = true;
  if (q < c.P && q != c.me) {
    st_release_sys(v.peer_sig[q] + (size_t)c.me * FCO_SIG_SLOTS + kCheckSlot, (c.e << 32) | hash);
    const uint64_t* f = v.peer_sig[c.me] + (size_t)q * FCO_SIG_SLOTS + kCheckSlot;
    ok = wait_ge(f, c.e << 32, wc, q, kCheckSlot);
    if (ok) {
      const uint64_t seen = ld_acquire_sys(f);
      /* A later epoch (the peer's next call wrote the slot: a gemv check or a gemm header)
       * means the peer finished this call without this block's pushes, which it needs in every
       * fused schedule (each block has tiles whose partials every rank sums): it skipped the
       * call, its hash differed. Until session 56 this read as agreement, and a late block
       * pushed and wrote y after its peers had refused the call. */
      if ((seen >> 32) != c.e || (uint32_t)seen != hash) {
        record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMV_ALLREDUCE, q, kCheckSlot, hash,
                     (seen >> 32) == c.e ? (uint32_t)seen : seen); /* later: epoch shown */
        ok = false;
      }
    }
  }
  return !__syncthreads_or(!ok);
}

template <typename T, int kMT, bool kPipe, int kW = kWarpsOf<kMT>>
__device__ __forceinline__ void run_oneshot(const GarParams& p, const Ctx& c, Smem<kMT, kW>& s,
                                            const WaitCtx& wc) {
  const RankView& v = s.v;
  const int i = threadIdx.x;
  const size_t tile_bytes = (size_t)p.M * kTileN * 4;
  uint64_t* flag_out = nullptr; /* thread q < P, q != me: peer q's flag for this block */
  if (i < c.P && i != c.me) flag_out = v.peer_sig[i] + (size_t)c.me * FCO_SIG_SLOTS + c.b;
  if (c.P == 1) { /* nothing to reduce: each tile's y straight from the warps' sums */
    for (int t = c.b; t < p.T; t += c.B) {
      const float4 r = compute_tile<T, kMT, kPipe, kW>(p, c, s, t);
      if (i < 4 * p.M) finish4<T>(p, c, t, r);
      __syncthreads(); /* red is reused by the next tile */
    }
    return;
  }
  uint32_t j = 0;
  for (int t = c.b; t < p.T; t += c.B, ++j) {
    const float4 r = compute_tile<T, kMT, kPipe, kW>(p, c, s, t);
    if (i < 4 * p.M) {
      const size_t off = c.hoff + (size_t)c.me * p.slot_bytes + (size_t)t * tile_bytes + (size_t)i * 16;
      const uint4 u = make_uint4(__float_as_uint(r.x), __float_as_uint(r.y), __float_as_uint(r.z),
                                 __float_as_uint(r.w));
      for (int k = 1; k <= c.P; ++k) st_global_v4(v.peer_data[(c.me + k) % c.P] + off, u);
    }
    signal_block(flag_out, sig_value(c.e, j)); /* also orders red before the next tile */
  }
  const char* mine = v.peer_data[c.me] + c.hoff;
  j = 0;
  for (int t = c.b; t < p.T; t += c.B, ++j) {
    bool ok = true;
    if (i < c.P && i != c.me)
      ok = wait_ge(v.peer_sig[c.me] + (size_t)i * FCO_SIG_SLOTS + c.b, sig_value(c.e, j), wc, i,
                   c.b);
    if (__syncthreads_or(!ok)) return;
    if (i < 4 * p.M) {
      const size_t off = (size_t)t * tile_bytes + (size_t)i * 16;
      float4 acc = __ldcg((const float4*)(mine + off));
      for (int q = 1; q < c.P; ++q)
        acc = add4(acc, __ldcg((const float4*)(mine + (size_t)q * p.slot_bytes + off)));
      finish4<T>(p, c, t, acc);
    }
  }
}

/* The two-phase order of a block's work units (tiles, or grouped tiles' groups): unit jj of
 * block b (its jj-th of nt) is owned — reduced — by rank (b + jj) mod P; the block takes the
 * units owned elsewhere first, in jj order, then its own. */
struct TwoPhaseOrder {
  int b, P, me, nt, nremote;
  __device__ __forceinline__ TwoPhaseOrder(int b_, int P_, int me_, int nt_)
      : b(b_), P(P_), me(me_), nt(nt_), nremote(0) {
    for (int jj = 0; jj < nt; ++jj) nremote += owner(jj) != me;
  }
  __device__ __forceinline__ int owner(int jj) const { return (b + jj) % P; }
  /* jj's index among this block's units owned by o (the flag counter for o) */
  __device__ __forceinline__ uint32_t seq(int jj, int o) const {
    return (uint32_t)((jj - ((o - b) % P + P) % P) / P);
  }
  /* The flags (all threads; the waits return false on a timeout): unit jj's partial pushed to
   * its owner (sig[me][b] at the owner = seq + 1); this rank's unit jj: the peers' partials;
   * its reduced values pushed to every peer's gather area (sig[me][B + b]); unit jj owned
   * elsewhere: its owner's gather. */
  __device__ __forceinline__ void signal_partial(const RankView& v, const Ctx& c, int jj) const {
    const int o = owner(jj);
    signal_block(threadIdx.x == 0 ? v.peer_sig[o] + (size_t)me * FCO_SIG_SLOTS + b : nullptr,
                 sig_value(c.e, seq(jj, o)));
  }
  __device__ __forceinline__ bool wait_partials(const RankView& v, const Ctx& c,
                                                const WaitCtx& wc, int jj) const {
    const int i = threadIdx.x;
    bool ok = true;
    if (i < P && i != me)
      ok = wait_ge(v.peer_sig[me] + (size_t)i * FCO_SIG_SLOTS + b, sig_value(c.e, seq(jj, me)),
                   wc, i, b);
    return !__syncthreads_or(!ok);
  }
  __device__ __forceinline__ void signal_gather(const RankView& v, const Ctx& c, int jj) const {
    const int i = threadIdx.x;
    signal_block(i < P && i != me ? v.peer_sig[i] + (size_t)me * FCO_SIG_SLOTS + c.B + b : nullptr,
                 sig_value(c.e, seq(jj, me)));
  }
  __device__ __forceinline__ bool wait_gather(const RankView& v, const Ctx& c, const WaitCtx& wc,
                                              int jj) const {
    const int o = owner(jj);
    bool ok = true;
    if (threadIdx.x == 0)
      ok = wait_ge(v.peer_sig[me] + (size_t)o * FCO_SIG_SLOTS + c.B + b, sig_value(c.e, seq(jj, o)),
                   wc, o, c.B + b);
    return !__syncthreads_or(!ok);
  }
  /* the unit at position pos of the order; remote: owned elsewhere (pos < nremote) */
  __device__ __forceinline__ int at(int pos, bool& remote) const {
    remote = pos < nremote;
    int n = remote ? pos : pos - nremote;
    for (int jj = 0; jj < nt; ++jj)
      if ((owner(jj) != me) == remote && n-- == 0) return jj;
    return 0;
  }
};

template <typename T, int kMT, bool kPipe>
__device__ __forceinline__ void run_twophase(const GarParams& p, const Ctx& c, Smem<kMT>& s,
                                             const WaitCtx& wc) {
  using V = typename Raw4<T>::V;
  const RankView& v = s.v;
  const int i = threadIdx.x;
  const int P = c.P, me = c.me, b = c.b;
  const size_t tile_bytes = (size_t)p.M * kTileN * 4;
  const size_t gtile_bytes = (size_t)p.M * kTileN * sizeof(T);
  const size_t gather_off = c.hoff + (size_t)P * p.slot_bytes;
  const int nt = (p.T - b + c.B - 1) / c.B; /* this block's tiles: t = b + jj·B */
  const TwoPhaseOrder ord(b, P, me, nt);

  /* (1) + (2) in one loop (one copy of the tile code): position pos < nremote is the pos-th
   * tile owned elsewhere (compute, push the partial to its owner), the rest are this rank's
   * (compute, wait for the peers' partials, reduce, write y, push to every peer). */
  const char* mine = v.peer_data[me] + c.hoff;
  for (int pos = 0; pos < nt; ++pos) {
    bool remote;
    const int jj = ord.at(pos, remote);
    const int t = b + jj * c.B;
    const float4 r = compute_tile<T, kMT, kPipe>(p, c, s, t);
    if (remote) {
      if (i < 4 * p.M)
        st_global_v4(v.peer_data[ord.owner(jj)] + c.hoff + (size_t)me * p.slot_bytes +
                         (size_t)t * tile_bytes + (size_t)i * 16,
                     make_uint4(__float_as_uint(r.x), __float_as_uint(r.y), __float_as_uint(r.z),
                                __float_as_uint(r.w)));
      ord.signal_partial(v, c, jj);
      continue;
    }
    if (!ord.wait_partials(v, c, wc, jj)) return;
    if (i < 4 * p.M) {
      const size_t off = (size_t)t * tile_bytes + (size_t)i * 16;
      float4 acc = me == 0 ? r : __ldcg((const float4*)(mine + off));
      for (int q = 1; q < P; ++q)
        acc = add4(acc, q == me ? r : __ldcg((const float4*)(mine + (size_t)q * p.slot_bytes + off)));
      const V out = finish4<T>(p, c, t, acc);
      const size_t goff = gather_off + (size_t)t * gtile_bytes + (size_t)i * sizeof(V);
      for (int q = 1; q < P; ++q) *(V*)(v.peer_data[(me + q) % P] + goff) = out;
    }
    ord.signal_gather(v, c, jj);
  }
  /* (3) tiles owned elsewhere: wait for the owner's reduced tile, copy it into y. */
  for (int jj = 0; jj < nt; ++jj) {
    if (ord.owner(jj) == me) continue;
    const int t = b + jj * c.B;
    if (!ord.wait_gather(v, c, wc, jj)) return;
    if (i < 4 * p.M) {
      store4_at<T>(p, c, t, i,
                   __ldcg((const V*)(mine + (size_t)P * p.slot_bytes + (size_t)t * gtile_bytes +
                                     (size_t)i * sizeof(V))));
    }
  }
}

}  // namespace
}  // namespace fco

#endif  // FCO_CUDA_GEMV_ALLREDUCE_SCHED_CUH_

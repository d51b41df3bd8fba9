/*
 * gemv_allreduce_sched.cuh — the device side of fco_gemv_allreduce's fused kernel
 * (gemv_allreduce_kernel in gemv_allreduce.cu, the only includer): its parameters (GarParams),
 * per-block context and shared memory, the block shapes per m-tiles, and the schedules it runs —
 * the one-shot (run_oneshot), grouped tiles and their split helpers (run_oneshot_group,
 * run_split_helper), the LL one-shot (run_oneshot_ll) and the two-phase (run_twophase), with the
 * argument check. The protocol, the rules and the measurements behind them are in
 * gemv_allreduce.cu's header; the tiles' math in gemv_tile.cuh, gemv_group_tile.cuh and
 * gemv_group_wgmma.cuh.
 */
#ifndef FCO_CUDA_GEMV_ALLREDUCE_SCHED_CUH_
#define FCO_CUDA_GEMV_ALLREDUCE_SCHED_CUH_

#include <type_traits>

#include "../ops/gemv_allreduce.h"
#include "gemv_group_tile.cuh"
#include "gemv_group_tma.cuh"
#include "gemv_group_wgmma.cuh"
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
  uint64_t split_slice_bytes;     /* the split area's bytes per slice, past the P slots */
  uint64_t slot_bytes;            /* S: one rank's fp32 partial tiles */
  uint64_t half_bytes;            /* one epoch half */
  uint64_t ll_slot_bytes;         /* SL: one rank's partial tiles as LL words (LL kernels) */
  int check_args;
  uint32_t arg_hash;
  uint32_t prefetch_bytes; /* kPdl: bytes of its first tile's W a block asks L2 for, 0 = none */
  int ll_half;     /* LL kernels, bf16 / f16: partials in the dtype, 2 a word (FCO_GEMV_LL_FP32) */
  int group_half;  /* grouped tiles: partials pushed in the dtype (FCO_GEMV_GROUP_FP32 unset) */
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

/* Thread i < 4M (finish4: i = threadIdx.x): bias, round, write the 4 outputs i of tile t into
 * y (columns < N only); returns them as raw dtype bits for the gather push. kChecked = false
 * (the caller's promise: no bias, all 4 columns < N, y's 4 elements aligned as one vector):
 * the same bits without the per-element checks. */
template <typename T, bool kChecked = true>
__device__ __forceinline__ typename Raw4<T>::V finish4_at(const GarParams& p, const Ctx& c, int t,
                                                          int i, float4 acc) {
  using U = typename Raw4<T>::U;
  using V = typename Raw4<T>::V;
  const int m = i >> 2;
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
  /* One vector store where the 4 columns are in y and aligned, else one element at a time
   * (session 23: the scalar stores touch every 32-byte sector of a warp's rows four times; the
   * grouped tile's last loop, ~3 µs in run 2026-12-02_nvidia-h200_0c41359-gtrace, stayed 2.8–3.0
   * with this in run ..._ee6e36d-vstore: the stores were not its cost — its ~108 instructions
   * a float4 were, run ..._34bb36f-icache). */
  U* dst = (U*)c.y + (int64_t)m * p.N + n;
  if (!kChecked || (n + 3 < p.N && (uintptr_t)dst % sizeof(V) == 0)) {
    *(V*)dst = v;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (n + k < p.N) dst[k] = u[k];
  }
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
      /* A later epoch means the peer is already past this call: it agreed then. */
      if ((seen >> 32) == c.e && (uint32_t)seen != hash) {
        record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMV_ALLREDUCE, q, kCheckSlot, hash,
                     (uint32_t)seen);
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

/* kTma: the ring stages of K slice sl of p.split (whole stages of SK k; TMA coordinates are
 * 32-bit): s0 .. s0 + n − 1. */
template <int kG>
__device__ __forceinline__ void tma_slice(const GarParams& p, int64_t K, int sl, int& s0, int& n) {
  using G = gemv::GroupTma<kG>;
  const int stages = (int)((K + G::SK - 1) / G::SK);
  s0 = (int)((int64_t)stages * sl / p.split);
  n = (int)((int64_t)stages * (sl + 1) / p.split) - s0;
}

/* impl 1 with grouped tiles (FCO_GEMV_GROUP, M 17..64, bf16 / f16): as run_oneshot, but the
 * block's unit of work is a group of kG consecutive tiles, q·kG .. q·kG + kG − 1, for groups
 * q = b, b + B, ... (gemv_group_wgmma.cuh or gemv_group_tile.cuh computes the group's partials
 * into shared memory, x shared by its tiles). Per group: store every tile ([T][M][16] in the
 * slot as run_oneshot: fp32 with FCO_GEMV_GROUP_FP32=1, else in the dtype, the slot's first
 * half) into slot `me` of every rank, one flag per group (sig[me][b] = (e << 32) | (j + 1),
 * j = the group's index in this block). Then per group: wait for the peers' flags, sum the P
 * slots in rank order, bias, round, write y. Bit-identical on every rank (every rank sums the
 * same values in the same order). */
/* All threads: group q's partial over K slice sl of p.split (whole 64-element slabs; slice 0
 * when not split) into smem's out [kG][64][16]. kWg: the wgmma tile (the launcher's choice:
 * every local rank on the vector path), where this image has it (sm_90a; another target runs
 * the mma.sync tile); else the mma.sync tile. Two kernels, not a branch: with both tiles in one
 * kernel the wgmma path ran at the mma.sync tile's 255 registers with spills (session 14,
 * ptxas; the probe's kernel of the same tile: 55 registers). kTma (with kWg, FCO_GEMV_GROUP_TMA,
 * kG = 8): the wgmma math fed by TMA from a producer warp (gemv_group_tma.cuh, 288 threads; the
 * maps in c.mx / c.mw), a third kernel; its split slices are whole ring stages (kKb·64 k);
 * primed and to_owner are GroupTma::run's (kTma only). */
template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void group_slice(const GarParams& p, const Ctx& c, int q, int sl,
                                            unsigned char* smem, int primed = 0,
                                            uint32_t to_owner = 0) {
  if constexpr (kTma) { /* slices of whole ring stages (SK k each), zeros past K */
    int s0, n;
    tma_slice<kG>(p, c.K, sl, s0, n);
    gemv::GroupTma<kG>::template run<T>(c.mx, c.mw, s0, n, q * kG * kTileN, smem, p.tma_stages,
                                        primed, to_owner);
    return;
  }
  int64_t k0 = 0, k1 = c.K;
  if (p.split > 1) {
    const int64_t slabs = (c.K + 63) / 64;
    k0 = slabs * sl / p.split * 64;
    k1 = min(c.K, slabs * (sl + 1) / p.split * 64);
  }
  const T* w = (const T*)c.w + k0;
  const T* x = (const T*)c.x + k0;
  if constexpr (kWg && FCO_WGMMA_COMPILED)
    gemv::GroupWgmma<kG>::run(w, x, p.M, p.N, k1 - k0, c.K, q * kG * kTileN, smem);
  else
    gemv::group_tile<T, kMT, kG>(w, x, p.M, p.N, k1 - k0, c.K, q * kG * kTileN, c.vec, smem);
}

/* kTma: block bi's first call of group_slice (owners bi < B: group bi, slice 0; split
 * helpers: as run_split_helper), from the kernel parameters alone: its group q and ring stages
 * s0 .. s0 + n − 1. False where the block has no group. */
template <int kG>
__device__ __forceinline__ bool first_slice(const GarParams& p, int64_t K, int bi, int B, int& q,
                                            int& s0, int& n) {
  int sl = 0;
  q = bi;
  if (bi >= B) {
    if (p.split < 2) return false;
    q = (bi - B) / (p.split - 1);
    sl = 1 + (bi - B) % (p.split - 1);
  }
  if (q >= (p.T + kG - 1) / kG) return false;
  tma_slice<kG>(p, K, sl, s0, n);
  return true;
}

/* kTma, all threads at the kernel's start (GroupTma::prime): that first call primed, before
 * the rank view is loaded. Returns the stages issued (0 where the block has no group), the
 * `primed` of that call. */
template <int kG>
__device__ __forceinline__ int group_prime(const GarParams& p, const void* mx, const void* mw,
                                           int64_t K, int bi, int B, unsigned char* smem) {
  int q, s0, n;
  if (!first_slice<kG>(p, K, bi, B, q, s0, n)) return 0;
  return gemv::GroupTma<kG>::prime(mx, mw, s0, n, q * kG * kTileN, smem, p.tma_stages);
}

/* kTma with PDL, before griddepcontrol.wait: L2 prefetches of the first p.prefetch_bytes of
 * the W boxes that first call reads first (GroupTma::prefetch_w; every block, helpers too). */
template <int kG>
__device__ __forceinline__ void group_prefetch(const GarParams& p, const void* mw, int64_t K,
                                               int bi, int B) {
  int q, s0, n;
  if (first_slice<kG>(p, K, bi, B, q, s0, n))
    gemv::GroupTma<kG>::prefetch_w(mw, s0, n, q * kG * kTileN, p.prefetch_bytes);
}

/* Split groups: the split area's slice sl (1..split-1), [T][M][16] fp32 as a slot. */
__device__ __forceinline__ char* split_area(const GarParams& p, const Ctx& c, const RankView& v,
                                            int sl) {
  return v.peer_data[c.me] + c.hoff + (size_t)c.P * p.slot_bytes +
         (size_t)(sl - 1) * p.split_slice_bytes;
}
/* Helper h's flag: row me of this rank's own signals, which no other flag of this op uses. */
__device__ __forceinline__ uint64_t* split_flag(const Ctx& c, const RankView& v, int h) {
  return v.peer_sig[c.me] + (size_t)c.me * FCO_SIG_SLOTS + h;
}

/* A split helper (block b ≥ B): h = b − B takes group h / (split − 1), slice 1 + h % (split − 1);
 * its partial goes to that slice's split area, then the flag (release: the owner's acquire and
 * L2 reads see the stores). */
template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void run_split_helper(const GarParams& p, const Ctx& c,
                                                 const RankView& v, unsigned char* smem,
                                                 int primed) {
  const int h = c.b - c.B, q = h / (p.split - 1), sl = 1 + h % (p.split - 1);
  /* A cluster's helper: its fragments straight into the owner's buffer for slice sl (CTA 0 of
   * the cluster; GroupTma::run's to_owner), then publish. */
  uint32_t to_owner = 0;
  if constexpr (kTma)
    if (p.pair) to_owner = gemv::GroupTma<kG>::hand_buf(smem, p.split, sl);
  group_slice<T, kMT, kG, kWg, kTma>(p, c, q, sl, smem, primed, to_owner);
  if constexpr (kTma) {
    if (p.pair) {
      gemv::pair_publish();
      if (threadIdx.x == 0) FCO_GTRACE(7);
      return;
    }
  }
  const int per = 4 * p.M; /* float4s per tile */
  const size_t tile_bytes = (size_t)p.M * kTileN * 4;
  const float4* out = reinterpret_cast<const float4*>(smem); /* [kG][64][16] */
  char* area = split_area(p, c, v, sl);
  for (int idx = threadIdx.x; idx < kG * per; idx += blockDim.x) {
    const int tw = idx / per, ii = idx - tw * per;
    const int t = q * kG + tw;
    if (t >= p.T) break;
    __stcg((float4*)(area + (size_t)t * tile_bytes + (size_t)ii * 16),
           out[(tw * 64 + (ii >> 2)) * 4 + (ii & 3)]);
  }
  signal_block(threadIdx.x == 0 ? split_flag(c, v, h) : nullptr, sig_value(c.e, 0));
}

/* A thread's float4s of a group's [nt][M][16] partials, idx = i, i + step, ... < nt·4M, as
 * (tw, ii) = (idx / 4M, idx % 4M) kept by increments: no division a float4 (session 24: with
 * one, and the checks of finish4_at, the grouped tile's last loop ran ~108 instructions a
 * float4, ~2.9 µs at M 64; run 2026-12-02_nvidia-h200_34bb36f-icache). */
struct GroupWalk {
  int tw0, ii0, dtw, dii, per;
  __device__ __forceinline__ GroupWalk(int i, int step, int per_) : per(per_) {
    tw0 = i / per;
    ii0 = i - tw0 * per;
    dtw = step / per;
    dii = step - dtw * per;
  }
  __device__ __forceinline__ void next(int& tw, int& ii) const {
    ii += dii;
    tw += dtw;
    if (ii >= per) ii -= per, ++tw;
  }
};

template <typename T, int kMT, int kG, bool kWg, bool kTma>
__device__ __forceinline__ void run_oneshot_group(const GarParams& p, const Ctx& c,
                                                  const RankView& v, unsigned char* smem,
                                                  const WaitCtx& wc, int primed) {
  const int i = threadIdx.x, step = blockDim.x;
  const int per = 4 * p.M; /* float4s per tile */
  const int Q = (p.T + kG - 1) / kG;
  const size_t tile_bytes = (size_t)p.M * kTileN * 4;
  /* p.group_half (bf16 / f16, FCO_GEMV_GROUP_FP32 unset): the pushed partials rounded to the
   * dtype, 8 bytes a float4 (a slot's tile t at t·M·16·2): half the bytes that cross the link.
   * Every rank sums the same rounded values in rank order: y stays the same bits on all. */
  const bool half = sizeof(T) == 2 && p.group_half;
  const size_t tile_push = half ? tile_bytes / 2 : tile_bytes;
  /* y's 4 columns of a float4 as one unchecked vector store (finish4_at<T, false>) in every
   * group whose columns are all < N, where there is no bias and every row of y is aligned. */
  const bool yvec = !c.bias && p.N % 4 == 0 && (uintptr_t)c.y % (4 * sizeof(T)) == 0;
  const GroupWalk gw(i, step, per);
  uint64_t* flag_out = nullptr; /* thread q < P, q != me: peer q's flag for this block */
  if (i < c.P && i != c.me) flag_out = v.peer_sig[i] + (size_t)c.me * FCO_SIG_SLOTS + c.b;
  const float4* out = reinterpret_cast<const float4*>(smem); /* [kG][64][16] */
  /* A cluster's hand-off buffers (same layout as out): slice 1's, and at split 3, 4 slice
   * sl's kOutBytes / 16 · sl float4s from out (gemv_group_tma.cuh's hand_buf). */
  const float4* pb = nullptr;
  constexpr int kOutF4 = kTma ? (int)(gemv::GroupTma<kG>::kOutBytes / 16) : 0;
  if constexpr (kTma)
    if (p.pair)
      pb = reinterpret_cast<const float4*>(
          smem + (gemv::GroupTma<kG>::hand_buf(smem, p.split, 1) - smem_u32(smem)));
  uint32_t j = 0;
  for (int q = c.b; q < Q; q += c.B, ++j) {
    group_slice<T, kMT, kG, kWg, kTma>(p, c, q, 0, smem, j == 0 ? primed : 0);
    bool pair = false;
    if constexpr (kTma) pair = p.pair != 0;
    if (pair) { /* split 3, 4: the ring is done, the helpers may store (phase 1) */
      if (p.split > 2) gemv::cluster_arrive_release();
      gemv::pair_handoff(); /* the helpers' slices are in this block's shared memory */
      if (threadIdx.x == 0) FCO_GTRACE(7);
    } else if (p.split > 1) { /* one group a block (the launcher's rule): its helpers' slices */
      bool ok = true;
      if (i < p.split - 1)
        ok = wait_ge(split_flag(c, v, q * (p.split - 1) + i), sig_value(c.e, 0), wc, c.me,
                     q * (p.split - 1) + i);
      if (__syncthreads_or(!ok)) return;
    }
    const int t0 = q * kG, lim = min(kG, p.T - t0) * per;
    const bool fast = yvec && (t0 + kG) * kTileN <= p.N;
    int tw = gw.tw0, ii = gw.ii0;
    for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
      const int t = t0 + tw, o = tw * 256 + ii; /* out [tw][ii / 4][16]: float4 tw·256 + ii */
      float4 r = out[o];
      if (pair) { /* the helpers' slices in slice order: the same sum as through the split area */
        r = add4(r, pb[o]);
        for (int sl = 2; sl < p.split; ++sl) r = add4(r, out[sl * kOutF4 + o]);
      } else {
        for (int sl = 1; sl < p.split; ++sl) /* slice order: the same sum at every call */
          r = add4(r, __ldcg((const float4*)(split_area(p, c, v, sl) + (size_t)t * tile_bytes +
                                             (size_t)ii * 16)));
      }
      if (c.P == 1) { /* nothing to reduce: y straight from the group's sums (run_oneshot) */
        if (fast)
          finish4_at<T, false>(p, c, t, ii, r);
        else
          finish4_at<T>(p, c, t, ii, r);
        continue;
      }
      const size_t off = c.hoff + (size_t)c.me * p.slot_bytes + (size_t)t * tile_push +
                         (size_t)ii * (half ? 8 : 16);
      if (half) {
        const uint2 u = make_uint2(pack2<T>(r.x, r.y), pack2<T>(r.z, r.w));
        for (int k = 1; k <= c.P; ++k) st_global_v2(v.peer_data[(c.me + k) % c.P] + off, u);
      } else {
        const uint4 u = make_uint4(__float_as_uint(r.x), __float_as_uint(r.y),
                                   __float_as_uint(r.z), __float_as_uint(r.w));
        for (int k = 1; k <= c.P; ++k) st_global_v4(v.peer_data[(c.me + k) % c.P] + off, u);
      }
    }
    if (i == 0) FCO_GTRACE(8);
    signal_block(flag_out, sig_value(c.e, j)); /* also: out read before the next group */
  }
  if (c.P == 1) return;
  const char* mine = v.peer_data[c.me] + c.hoff;
  j = 0;
  for (int q = c.b; q < Q; q += c.B, ++j) {
    bool ok = true;
    if (i < c.P && i != c.me)
      ok = wait_ge(v.peer_sig[c.me] + (size_t)i * FCO_SIG_SLOTS + c.b, sig_value(c.e, j), wc, i,
                   c.b);
    if (__syncthreads_or(!ok)) return;
    const int t0 = q * kG, lim = min(kG, p.T - t0) * per;
    const bool fast = yvec && (t0 + kG) * kTileN <= p.N;
    int tw = gw.tw0, ii = gw.ii0;
    for (int idx = i; idx < lim; idx += step, gw.next(tw, ii)) {
      const int t = t0 + tw;
      const size_t off = (size_t)t * tile_push + (size_t)ii * (half ? 8 : 16);
      auto ld = [&](int r) { /* rank r's 4 partials of this thread */
        const char* src = mine + (size_t)r * p.slot_bytes + off;
        if (!half) return __ldcg((const float4*)src);
        const uint2 u = __ldcg((const uint2*)src);
        return unpack4<T>(u.x, u.y);
      };
      float4 acc = ld(0);
      for (int r = 1; r < c.P; ++r) acc = add4(acc, ld(r));
      if (fast)
        finish4_at<T, false>(p, c, t, ii, acc);
      else
        finish4_at<T>(p, c, t, ii, acc);
    }
  }
}

/* ---- LL one-shot (FCO_GEMV_AR_LL=1): partials as LL words, no fence, no flag ----------- */
/* 16 bytes = two LL words, each a single-copy-atomic 64-bit element (PTX: a vector access is
 * one access per element), relaxed at system scope: no release, nothing to order. */
__device__ __forceinline__ void st_ll2(char* p, uint64_t a, uint64_t b) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void ld_ll2(const char* p, uint64_t& a, uint64_t& b) {
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(a), "=l"(b)
               : "l"(p)
               : "memory");
}
__device__ __forceinline__ uint64_t ll_word(uint64_t hi, float f) {
  return hi | (uint64_t)__float_as_uint(f);
}

/* Per thread. Poll the kWords LL words at p (8 · kWords bytes) until all carry `flag`; them into
 * w. False after timeout_ns (FCO_ERR_TIMEOUT with the peer, the tile, the flag wanted and the
 * first stale word's) or when another wait has recorded an error. */
template <int kWords>
__device__ __forceinline__ bool ll_wait(const char* p, uint32_t flag, const WaitCtx& wc,
                                        int32_t peer, int32_t tile, uint64_t (&w)[kWords]) {
  uint64_t t0 = 0;
  for (uint32_t spin = 0;; ++spin) {
#pragma unroll
    for (int k = 0; k < kWords; k += 2) ld_ll2(p + 8 * k, w[k], w[k + 1]);
    bool ready = (uint32_t)(w[0] >> 32) == flag;
#pragma unroll
    for (int k = 1; k < kWords; ++k) ready = ready && (uint32_t)(w[k] >> 32) == flag;
    if (ready) return true;
    if (spin == 0) t0 = globaltimer_ns();
    if (spin % kSpinsPerClock == kSpinsPerClock - 1) {
      if (globaltimer_ns() - t0 > wc.timeout_ns) {
        uint32_t seen = (uint32_t)(w[0] >> 32);
        for (int k = kWords - 1; k >= 0; --k)
          if ((uint32_t)(w[k] >> 32) != flag) seen = (uint32_t)(w[k] >> 32);
        record_error(wc.err, FCO_ERR_TIMEOUT, FCO_OP_GEMV_ALLREDUCE, peer, tile, flag, seen);
        return false;
      }
      if (spin % kSpinsPerErrPoll == kSpinsPerErrPoll - 1 && error_set(wc.err)) return false;
    }
  }
}

/* fp32 words: the 4 partials of 4 words into *out. */
__device__ __forceinline__ bool ll_wait4(const char* p, uint32_t flag, const WaitCtx& wc,
                                         int32_t peer, int32_t tile, float4* out) {
  uint64_t w[4];
  if (!ll_wait<4>(p, flag, wc, peer, tile, w)) return false;
  *out = make_float4(__uint_as_float((uint32_t)w[0]), __uint_as_float((uint32_t)w[1]),
                     __uint_as_float((uint32_t)w[2]), __uint_as_float((uint32_t)w[3]));
  return true;
}

/* Half-width LL words (p.ll_half, bf16 / f16): two partials rounded to the dtype (pack2) in
 * the low 32 bits, the flag in the high ones; ll_wait2 puts the 4 partials of 2 words into
 * *out. */
template <typename T>
__device__ __forceinline__ bool ll_wait2(const char* p, uint32_t flag, const WaitCtx& wc,
                                         int32_t peer, int32_t tile, float4* out) {
  uint64_t w[2];
  if (!ll_wait<2>(p, flag, wc, peer, tile, w)) return false;
  *out = unpack4<T>(w[0], w[1]);
  return true;
}

/* impl 1 through the LL area: as run_oneshot, but each partial float4 of thread i < 4M goes to
 * every rank as 4 LL words {fp32 bits, fco_ll_flag(e)} (two 16-byte stores; slot `me` of the
 * LL half, tile t at t·M·16·8, thread i at i·32) — with p.ll_half (bf16 / f16) as 2 words of
 * two partials rounded to the dtype (one 16-byte store; tile t at t·M·16·4, thread i at i·16)
 * —, and the receiver polls those words instead
 * of a flag: no bar.sync + release before a signal, no signal round trip after the data. The
 * block's last tile stays in registers for its own slot (the common case: one tile per block).
 * Sums in rank order 0..P-1 as run_oneshot: the same bits. No barrier after the tile loop: a
 * thread whose wait fails simply stops (epoch_end's barrier is reached by every thread). */
template <typename T, int kMT, bool kPipe, int kW = kWarpsOf<kMT>>
__device__ __forceinline__ void run_oneshot_ll(const GarParams& p, const Ctx& c,
                                               Smem<kMT, kW>& s, const WaitCtx& wc) {
  const RankView& v = s.v;
  const int i = threadIdx.x;
  const uint32_t flag = fco_ll_flag(c.e);
  const uint64_t hi = (uint64_t)flag << 32;
  /* p.ll_half: 2 words (16 bytes) a thread instead of 4 (32 bytes): half the bytes that move */
  const bool half = sizeof(T) == 2 && p.ll_half;
  const size_t per = half ? 16 : 32;
  const size_t tile_ll = (size_t)p.M * kTileN * (half ? 4 : 8);
  const size_t mine_off = c.lloff + (size_t)c.me * p.ll_slot_bytes + (size_t)i * per;
  float4 last = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int t = c.b; t < p.T; t += c.B) {
    const float4 r = compute_tile<T, kMT, kPipe, kW>(p, c, s, t);
    const bool more = t + c.B < p.T;
    if (i < 4 * p.M) {
      const size_t off = mine_off + (size_t)t * tile_ll;
      /* The thread's words: 4 fp32 ones, or (half) the first 2 as two rounded partials each. */
      uint64_t w0 = ll_word(hi, r.x), w1 = ll_word(hi, r.y), w2 = ll_word(hi, r.z),
               w3 = ll_word(hi, r.w);
      if constexpr (sizeof(T) == 2)
        if (half) w0 = hi | pack2<T>(r.x, r.y), w1 = hi | pack2<T>(r.z, r.w);
      /* peers me+1, me+2, ..., then our own slot — unless this is the block's last tile, which
       * stays in registers (as the peers see it: rounded when half, the same bits everywhere) */
      for (int k = 1; k <= c.P; ++k) {
        if (k == c.P && !more) break;
        char* d = v.peer_data[(c.me + k) % c.P] + off;
        st_ll2(d, w0, w1);
        if (!half) st_ll2(d + 16, w2, w3);
      }
      if (!more) {
        last = r;
        if constexpr (sizeof(T) == 2)
          if (half) last = unpack4<T>(w0, w1);
      }
    }
    if (more) __syncthreads(); /* red is rewritten by the next tile */
  }
  if (i >= 4 * p.M) return;
  const char* mine = v.peer_data[c.me] + c.lloff + (size_t)i * per;
  for (int t = c.b; t < p.T; t += c.B) {
    const bool more = t + c.B < p.T;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int q = 0; q < c.P; ++q) {
      float4 x = last;
      if (q != c.me || more) {
        const char* src = mine + (size_t)q * p.ll_slot_bytes + (size_t)t * tile_ll;
        bool ok;
        if constexpr (sizeof(T) == 2)
          ok = half ? ll_wait2<T>(src, flag, wc, q, t, &x) : ll_wait4(src, flag, wc, q, t, &x);
        else
          ok = ll_wait4(src, flag, wc, q, t, &x);
        if (!ok) return;
      }
      acc = q == 0 ? x : add4(acc, x);
    }
    finish4<T>(p, c, t, acc);
  }
}

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
  /* Index of tile jj among this block's tiles owned by o (the flag counter for o). */
  auto owner = [&](int jj) { return (b + jj) % P; };
  auto seq = [&](int jj, int o) { return (uint32_t)((jj - ((o - b) % P + P) % P) / P); };

  /* (1) + (2) in one loop (one copy of the tile code): position pos < nremote is the pos-th
   * tile owned elsewhere (compute, push the partial to its owner), the rest are this rank's
   * (compute, wait for the peers' partials, reduce, write y, push to every peer). */
  int nremote = 0;
  for (int jj = 0; jj < nt; ++jj) nremote += owner(jj) != me;
  auto nth = [&](bool remote, int n) {
    for (int jj = 0; jj < nt; ++jj)
      if ((owner(jj) != me) == remote && n-- == 0) return jj;
    return 0;
  };
  const char* mine = v.peer_data[me] + c.hoff;
  for (int pos = 0; pos < nt; ++pos) {
    const bool remote = pos < nremote;
    const int jj = nth(remote, remote ? pos : pos - nremote);
    const int t = b + jj * c.B;
    const float4 r = compute_tile<T, kMT, kPipe>(p, c, s, t);
    if (remote) {
      const int o = owner(jj);
      if (i < 4 * p.M)
        st_global_v4(v.peer_data[o] + c.hoff + (size_t)me * p.slot_bytes +
                         (size_t)t * tile_bytes + (size_t)i * 16,
                     make_uint4(__float_as_uint(r.x), __float_as_uint(r.y), __float_as_uint(r.z),
                                __float_as_uint(r.w)));
      signal_block(i == 0 ? v.peer_sig[o] + (size_t)me * FCO_SIG_SLOTS + b : nullptr,
                   sig_value(c.e, seq(jj, o)));
      continue;
    }
    const uint32_t k = seq(jj, me);
    bool ok = true;
    if (i < P && i != me)
      ok = wait_ge(v.peer_sig[me] + (size_t)i * FCO_SIG_SLOTS + b, sig_value(c.e, k), wc, i, b);
    if (__syncthreads_or(!ok)) return;
    if (i < 4 * p.M) {
      const size_t off = (size_t)t * tile_bytes + (size_t)i * 16;
      float4 acc = me == 0 ? r : __ldcg((const float4*)(mine + off));
      for (int q = 1; q < P; ++q)
        acc = add4(acc, q == me ? r : __ldcg((const float4*)(mine + (size_t)q * p.slot_bytes + off)));
      const V out = finish4<T>(p, c, t, acc);
      const size_t goff = gather_off + (size_t)t * gtile_bytes + (size_t)i * sizeof(V);
      for (int q = 1; q < P; ++q) *(V*)(v.peer_data[(me + q) % P] + goff) = out;
    }
    signal_block(i < P && i != me ? v.peer_sig[i] + (size_t)me * FCO_SIG_SLOTS + c.B + b : nullptr,
                 sig_value(c.e, k));
  }
  /* (3) tiles owned elsewhere: wait for the owner's reduced tile, copy it into y. */
  using U = typename Raw4<T>::U;
  for (int jj = 0; jj < nt; ++jj) {
    const int o = owner(jj);
    if (o == me) continue;
    const int t = b + jj * c.B;
    bool ok = true;
    if (i == 0)
      ok = wait_ge(v.peer_sig[me] + (size_t)o * FCO_SIG_SLOTS + c.B + b, sig_value(c.e, seq(jj, o)),
                   wc, o, c.B + b);
    if (__syncthreads_or(!ok)) return;
    if (i < 4 * p.M) {
      const V in = __ldcg((const V*)(mine + (size_t)P * p.slot_bytes + (size_t)t * gtile_bytes +
                                     (size_t)i * sizeof(V)));
      U u[4];
      if constexpr (sizeof(T) == 4) {
        u[0] = in.x, u[1] = in.y, u[2] = in.z, u[3] = in.w;
      } else {
        u[0] = (U)(in.x & 0xffffu), u[1] = (U)(in.x >> 16), u[2] = (U)(in.y & 0xffffu),
        u[3] = (U)(in.y >> 16);
      }
      const int m = i >> 2, n = t * kTileN + (i & 3) * 4;
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (n + q < p.N) ((U*)c.y)[(int64_t)m * p.N + n + q] = u[q];
    }
  }
}

}  // namespace
}  // namespace fco

#endif  // FCO_CUDA_GEMV_ALLREDUCE_SCHED_CUH_

/*
 * embedding_alltoall.cuh — what the fco_embedding_alltoall kernels and launchers share
 * (src/cuda/embedding_alltoall*.cu): launch constants, the kernel parameters (EaParams, by
 * value), the tiling arithmetic and work counts, and the host-side launch helpers (variant →
 * kernel, grid from co-residency). Elsewhere: the pooling of a tile in
 * embedding_alltoall_pool.cuh; impl 1 (the fused kernel and its protocol) in
 * embedding_alltoall_fused.cu; impl 0, the host side and the entry points in
 * embedding_alltoall.cu.
 *
 * Tiles (shared by every kernel): a tile of source rank q is (local tables [t0, t0 + nt_q),
 *   samples [i0, i0 + ns_q)) with nt_q = min(T_q, 32/Gv) tables and ns_q = C / nt_q samples,
 *   C = 8 warps × 32/Gv × 4 bags, Gv = the lanes per bag of the 16-byte path (vec_lanes(D,
 *   esize)). All of these are functions of values every rank agrees on (D, dtype,
 *   tables_per_rank), so a destination knows how many tiles a source sends it whatever path the
 *   source takes. The bags of a tile are numbered sample-major (bag = i · nt + t): one warp's
 *   32/G bags are neighbouring tables of a sample, adjacent in out [b, T, D], so its 16-byte
 *   stores form runs of up to 512 bytes also for small D (over NVLink: fewer, fuller packets).
 */
#ifndef FCO_CUDA_EMBEDDING_ALLTOALL_CUH_
#define FCO_CUDA_EMBEDDING_ALLTOALL_CUH_

#include <stdint.h>
#include <stdio.h>

#include <atomic>

#include "../ops/embedding_alltoall.h"
#include "cuda_ops.h"
#include "launch.cuh"
#include "prims.cuh"

namespace fco {
namespace ea {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBagsPerLane = 4;   /* bags per tile C = kWarps · (32/Gv) · kBagsPerLane */
constexpr int kMaxGroups = 64;    /* counter slots 0..63 of a source's row */
constexpr int kPresenceSlot = kMaxGroups;
constexpr int kMaxPending = 16;   /* counters one signal batch can advance (≥ SIGNAL_EVERY) */
constexpr int kLandUnroll = 8;    /* loads in flight per thread when landing */
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
  /* Symmetric outputs (fco_mem_alloc; the fused lean kernel only): (1 + slot of the comm's
   * symmetric buffer holding all of out, 0: none, or not 16-byte aligned) << 1 (the low bits of
   * this rank's presence value) | 1 when this rank stores into peers' symmetric outs (it holds a
   * symmetric buffer and FCO_EA_DIRECT is not 0). */
  int32_t sym_bits;
  void* const* sym;   /* the comm's symmetric-buffer table [FCO_MAX_SYMMETRIC][FCO_MAX_GPU_RANKS] */
  int64_t out_off;    /* out's byte offset in its symmetric buffer */
};

struct EaParams {
  EaRank r[FCO_MAX_GPU_RANKS];
  int64_t bstart[FCO_MAX_GPU_RANKS + 1]; /* prefix of batch_per_rank */
  int32_t toff[FCO_MAX_GPU_RANKS + 1];   /* prefix of tables_per_rank */
  /* Tiling of source q (agreed by every rank) and its land slices (local choice). */
  int32_t tile_t[FCO_MAX_GPU_RANKS];     /* nt_q: tables per tile (≥ 1)                     */
  int32_t tile_s[FCO_MAX_GPU_RANKS];     /* ns_q: samples per tile, a chunk (≥ 1)           */
  int32_t cpg[FCO_MAX_GPU_RANKS];        /* chunks per counter group (≥ 1)                  */
  int32_t land_split[FCO_MAX_GPU_RANKS]; /* land units per group (≥ 1)                      */
  int64_t B;
  uint64_t recv_bytes;                   /* R (impl 1) */
  uint64_t send_bytes;                   /* S (impl 0) */
  int32_t T, D;
  int32_t nranks, num_local;
  int32_t lanes;                         /* G of the path taken */
  int32_t mean;
  uint32_t blocks_per_rank;
  int32_t esize;
  int32_t sig_every;                     /* remote tiles per signal batch, 1..kMaxPending */
  int32_t land_poll;                     /* land between local tiles */
  int64_t row_base[kRowBaseCap];
  /* The fields from here on come after row_base, so the ones above keep their parameter offsets
   * (the default kernel's SASS). FCO_EA_PROFILE's [grid][kProfSlots] globaltimer stamps (pinned host memory), or NULL; read
   * only by the kProf kernel variant. FCO_EA_MIX: 0..100, the % of each block's local tiles its
   * remote ones are interleaved with, or -1 (unset: remote first); read only by kMix. */
  uint64_t* prof;
  int32_t mix;
  int32_t decode; /* 1 (default): the 32-bit tile cursor kernel; 0 (FCO_EA_DECODE=old) the other */
  /* Host only (a kernel never reads it; last, so no other field moves): the call's knobs, in
   * local rank 0's record (fill_params; read_knobs read them from one environment). */
  const fco_ea_knobs_t* knobs;
};
/* FCO_EA_PROFILE timeline of the fused kernel, per block: start, end of its remote pool tiles
 * (their last signal batch issued), end of all its pool tiles, end (land units copied). */
constexpr int kProfSlots = 4;
constexpr int kProfMaxBlocks = 4096; /* blocks beyond it write no stamps */

/* ---- tiling arithmetic, shared by the kernels and the host ------------------------------- */
__host__ __device__ __forceinline__ int64_t ea_batch(const EaParams& p, int d) {
  return p.bstart[d + 1] - p.bstart[d];
}
__host__ __device__ __forceinline__ int ea_tables(const EaParams& p, int q) {
  return p.toff[q + 1] - p.toff[q];
}
/* Chunks (tiles along the samples) of source q over b samples. */
__host__ __device__ __forceinline__ int64_t ea_chunks(const EaParams& p, int q, int64_t b) {
  return (b + p.tile_s[q] - 1) / p.tile_s[q];
}
/* Tiles along the tables of source q (0 when it owns none). */
__host__ __device__ __forceinline__ int ea_tgroups(const EaParams& p, int q) {
  return (ea_tables(p, q) + p.tile_t[q] - 1) / p.tile_t[q];
}
/* Counter groups of source q for destination d (≤ kMaxGroups). */
__host__ __device__ __forceinline__ int64_t ea_groups(const EaParams& p, int q, int d) {
  return (ea_chunks(p, q, ea_batch(p, d)) + p.cpg[q] - 1) / p.cpg[q];
}
/* Land units of source s at destination me: slices of its groups, or one presence-only unit. */
__host__ __device__ __forceinline__ int64_t ea_land_units(const EaParams& p, int s, int me) {
  const int64_t ng = ea_groups(p, s, me);
  return ea_tables(p, s) > 0 && ng > 0 ? ng * p.land_split[s] : 1;
}
__host__ __device__ __forceinline__ int64_t ea_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* Work lists of rank me (impl 1): pool tiles [0, n_remote) for destinations me+1, me+2, ...,
 * [n_remote, n_pool) for me; land units [0, n_land), sources me-1, me-2, ... */
struct EaCounts {
  int64_t n_remote, n_pool, n_land;
};
__host__ __device__ __forceinline__ EaCounts ea_counts(const EaParams& p, int me) {
  const int P = p.nranks, ntg = ea_tgroups(p, me);
  EaCounts n{0, 0, 0};
  for (int k = 1; k < P; ++k) {
    n.n_remote += ea_chunks(p, me, ea_batch(p, (me + k) % P)) * ntg;
    n.n_land += ea_land_units(p, (me - k + P) % P, me);
  }
  n.n_pool = n.n_remote + ea_chunks(p, me, ea_batch(p, me)) * ntg;
  return n;
}

/* Division by an invariant divisor 1 <= d < 2^31, exact for numerators n < 2^31: q = (n · m) >>
 * (31 + l), l = ceil(log2 d), m = ceil(2^(31+l) / d). Granlund & Montgomery (1994), thm 4.2 with
 * N = 31: exact when 2^(31+l) <= m·d <= 2^(31+l) + 2^l, and m·d − 2^(31+l) < d <= 2^l. m < 2^32:
 * d > 2^(l-1) gives 2^(31+l)/d < 2^32 (d = 1: m = 2^31). One IMAD.WIDE.U32 and a shift. */
struct FastDiv {
  uint32_t m, s; /* s = 31 + l */
};
__host__ __device__ __forceinline__ FastDiv fast_div(uint32_t d) {
  uint32_t l = 0;
  while (l < 31 && (1u << l) < d) ++l;
  const uint64_t one = 1;
  return FastDiv{(uint32_t)(((one << (31 + l)) + d - 1) / d), 31 + l};
}
__host__ __device__ __forceinline__ uint32_t fast_div(uint32_t n, FastDiv f) {
  return (uint32_t)(((uint64_t)n * f.m) >> f.s);
}

/* ---- host side, shared by the launchers ------------------------------------------------- */
/* Which kernel variant: kVec, kNV, kB, and the lanes per bag of that variant. */
struct Variant {
  bool vec;
  int nv;
  int bags; /* kB: 1 or 4 bags per lane group, 0 the streaming path (pool_tile_stream) */
  int lanes;
};

/* smem: the kernel's dynamic shared memory (kB = 0: kStreamSmem, embedding_alltoall_pool.cuh). */
template <auto kKernel>
fco_result_t launch(const EaParams& p, int64_t max_tasks, int num_local, void* stream,
                    const char* what, char* err, int smem = 0) {
  int device = 0, sms = 0, cap = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  if (smem > 0 && (res = opt_in_smem<kKernel>(device, smem, err)) != FCO_OK) return res;
  res = max_coresident_blocks<kKernel>(err, device, sms, kThreads, &cap, smem);
  if (res != FCO_OK) return res;
  int64_t bpr = cap / num_local;
  if (bpr < 1)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_embedding_alltoall: %d co-resident blocks on device %d cannot give each of "
                "%d ranks one block", cap, device, num_local);
  /* No more blocks than work items; never more than fit at once (fused: land units spin). */
  if (max_tasks < bpr) bpr = max_tasks > 0 ? max_tasks : 1;
  EaParams* pp = const_cast<EaParams*>(&p);
  pp->blocks_per_rank = (uint32_t)bpr;
  const unsigned grid = (unsigned)(bpr * num_local);
  kKernel<<<grid, kThreads, smem, (cudaStream_t)stream>>>(p);
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

/* Variant → launcher: Run<T, kVec, kNV, kB>::run launches that instance of one kernel
 * (RunLookup in embedding_alltoall.cu, RunFused in embedding_alltoall_fused.cu: each kernel is
 * instantiated in the one .cu that defines it); nullptr for a dtype without kernels. */
template <template <typename, bool, int, int> class Run, typename T>
RunFn pick_t(const Variant& v) {
  if (v.vec) {
    if (v.nv != 1) return Run<T, true, 4, 1>::run;
    if (v.bags == 0) return Run<T, true, 1, 0>::run;
    return v.bags == 4 ? Run<T, true, 1, 4>::run : Run<T, true, 1, 1>::run;
  }
  return v.nv == 1 ? Run<T, false, 1, 1>::run : Run<T, false, 4, 1>::run;
}
template <template <typename, bool, int, int> class Run>
RunFn pick(fco_dtype_t dt, const Variant& v) {
  switch (dt) {
    case FCO_F32: return pick_t<Run, float>(v);
    case FCO_F16: return pick_t<Run, __half>(v);
    case FCO_BF16: return pick_t<Run, __nv_bfloat16>(v);
    default: return nullptr;
  }
}

/* impl 1's launcher for (dtype, variant), nullptr for a dtype without kernels
 * (embedding_alltoall_fused.cu). */
RunFn pick_fused(fco_dtype_t dt, const Variant& v);
/* impl 1 on the lean lookup (embedding_alltoall_fused_lean.cu): whether it takes the call
 * (rows of whole 16-byte units, ≤ 512 bytes, FCO_EA_LEAN not 0, its bounds: agreed values and the
 * knob only, never pointer alignment, as every rank must run the same protocol), its launcher. */
bool fused_lean_applies(const EaParams& p);
/* Sets p.blocks_per_rank, and clears p.prof where it does not profile (FCO_EA_PROFILE). */
fco_result_t run_fused_lean(EaParams& p, fco_dtype_t dt, int num_local, void* stream, char* err);

/* fco_last_plan from impl 1's launchers (host; what this thread's last successful launch ran):
 * the fused kernel's name, "fused32" or "fused" (embedding_alltoall_fused.cu), and the lean
 * fused kernel's " kernel ..." words appended to a plan (embedding_alltoall_fused_lean.cu). */
const char* fused_kernel_name();
void fused_lean_plan_append(char* plan);

}  // namespace ea
}  // namespace fco

#endif /* FCO_CUDA_EMBEDDING_ALLTOALL_CUH_ */

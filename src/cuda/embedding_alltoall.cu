/*
 * embedding_alltoall.cu — fco_embedding_alltoall on GPUs (semantics: include/fco.h; argument
 * record and workspace sizes: src/ops/embedding_alltoall.h). Entry: fco_cuda_embedding_alltoall_run
 * (every GPU transport) and fco_cuda_embedding_alltoall_after_group (nccl, after its NCCL group).
 *
 * Tiles (shared by every kernel): a tile of source rank q is (local tables [t0, t0 + nt_q),
 *   samples [i0, i0 + ns_q)) with nt_q = min(T_q, 32/Gv) tables and ns_q = C / nt_q samples,
 *   C = 8 warps × 32/Gv × 4 bags, Gv = the lanes per bag of the 16-byte path (vec_lanes(D,
 *   esize)). All of these are functions of values every rank agrees on (D, dtype,
 *   tables_per_rank), so a destination knows how many tiles a source sends it whatever path the
 *   source takes. The bags of a tile are numbered sample-major (bag = i · nt + t): one warp's
 *   32/G bags are neighbouring tables of a sample, adjacent in out [b, T, D], so its 16-byte
 *   stores form runs of up to 512 bytes also for small D (over NVLink: fewer, fuller packets).
 *
 * Pooling: a bag is pooled by a group of G lanes of one warp (G = a power of two ≥ the 16-byte
 *   vectors of a row, ≤ 32). A group takes kB bags at once (kB = 1 or 4; FCO_EA_BAGS, auto: 4
 *   for rows ≤ 512 bytes and mean bag length ≤ 16): it loads their offsets together, then G
 *   indices (and weights) per bag, checks them and broadcasts them by shuffles; each lane then
 *   has kB · kU rows' 16-byte vectors in flight (kU = 8 for kB = 1; 2 for fp32, 1 for 16-bit
 *   types when kB = 4: what fits in 128 registers without spilling) before accumulating in
 *   fp32, each bag in bag order (the same order as the CPU reference, weights by fmaf, mean by
 *   one division). kB = 4 overlaps four bags' offsets → indices → rows chains, which dominate
 *   when bags are short. Loads are never predicated or branched around: a lane with nothing to
 *   read loads g_ea_dummy, and int32/int64 indices load into one register, so ptxas issues a
 *   whole batch before the first use (a conditional load compiled to a load plus a move that
 *   waits for it, and the rows meant to be in flight together went one or two at a time).
 *   Loop bounds are warp-uniform (warp max), so the full-mask shuffles never diverge. A row
 *   that is not a whole number of 16-byte vectors, or a misaligned pointer, takes the element
 *   path (same code, one element per unit).
 *   Bad data: a bag whose offsets decrease or leave [0, num_indices] is pooled as empty; an
 *   index outside [0, rows_t) is skipped; both are recorded in dev->err (first wins):
 *   code FCO_ERR_INVALID_ARGUMENT, peer = global table id, slot = FCO_EA_BAD_INDEX /
 *   FCO_EA_BAD_OFFSETS, want = position (in indices / in offsets), seen = the bad value. Only
 *   offsets[0 .. T_r·B], indices/weights[0 .. num_indices), rows [0, rows_t) and g_ea_dummy
 *   are ever read.
 *
 * impl 1 — fused (ea_kernel_fused), one persistent grid of num_local × bpr blocks.
 *   Layout: rank s's workspace holds two halves of R = roundup(max_q b_q · T · D · esize, 256);
 *     the half of a call with epoch e starts at (e & 1) · fco_ws_half_bytes(ws_bytes) (the
 *     workspace rule in src/core/internal.h; ≥ R since ws ≥ 2·R) and is laid out exactly as out_s
 *     [b_s, T, D]: source r's pooled vector for (sample i of s, table t) lands at the place it
 *     takes in out_s. Every pooled vector crosses NVLink once.
 *   Counters: source r cuts destination s's samples into chunks of ns_r, the chunks into ≤ 64
 *     groups of cpg_r. Counter (r, g) of s is slot g of s's signal row r; it ends at
 *     (e << 32) + tiles of group g = (e << 32) + chunks(g) · ceil(T_r / nt_r).
 *   Tasks of rank me: pool tiles for destinations me+1, me+2, ..., me-1 (the remote phase), then
 *     for me (the local phase, straight into out); land units (source, group, slice of about
 *     FCO_EA_LAND_KB KiB): once the group's counter is complete, copy those rows' source columns
 *     from the workspace half into out. Block `part` takes pool tiles part, part + bpr, ... and
 *     land units part, part + bpr, ... (static; sources me-1, me-2, ...: who sent first).
 *   Signals, in batches: after every FCO_EA_SIGNAL_EVERY remote tiles, and after its last one,
 *     a block syncs and thread 0 does, for each counter it advanced since the last batch,
 *     red.max.relaxed(counter, e << 32); then one fence.acq_rel.sys; then
 *     red.add.relaxed(counter, tiles). bar.sync orders every thread's stores before the fence,
 *     and fence + relaxed add is a release pattern (the fence also orders the max before the
 *     add). The max lifts the previous call's value (≤ (e-1) << 32 | n) and, being done by every
 *     adder before its add, no add is lost; so the counter ends at (e << 32) + tiles. Values
 *     only grow and keep the (epoch << 32 | n) form of prims.cuh, so slots shared with other
 *     ops stay consistent. The fence waits until the block's NVLink stores are acknowledged
 *     (µs); batching pays it once per batch, and only warp 0 waits (the others go on pooling).
 *   Landing: in the local phase, before each local tile, thread 0 polls the block's next land
 *     unit (acquire loads of its counters, no wait); ready units are copied at once (8 16-byte
 *     loads in flight per thread), so landing overlaps the local lookup. After its last pool
 *     tile a block waits (bounded) for its remaining land units in order.
 *     FCO_EA_LAND_POLL=0: no polling, every land unit after the block's pool tiles.
 *   Progress: pool tiles and polls never wait; a block waits only after its last pool tile,
 *     and only for other ranks' remote-phase tiles, which they finish and signal (at the latest
 *     at the end of their remote phase) without waiting for anything.
 *   Presence: block 0 lifts every (destination, group) counter and slot 64 (presence) at start;
 *     every rank waits for every source's presence each call (the source's first land unit,
 *     also when it carries no data). So no rank finishes call e+1 before every peer started
 *     e+1, i.e. finished e: a write of call e+2 into the half of call e never meets a
 *     destination still landing call e.
 *   Completion: out is complete when the kernel ends (every land unit of every source ran);
 *     the last block advances dev->epoch.
 *   Launch requirements: all blocks co-resident on the local transport (land waits spin on
 *   other ranks' pool tiles): bpr ≤ occupancy × SMs / num_local. dev->ws_bytes ≥ 2R when P > 1
 *   (checked on the device: FCO_ERR_INTERNAL). Bad data does not stop the protocol (peers never
 *   wait in vain), and waits ignore FCO_ERR_INVALID_ARGUMENT, so out is complete (bad entries
 *   skipped) also then. Every rank must use the same tiling (it does: agreed values only); the
 *   FCO_EA_* knobs are local choices (batching, land slices, kB) and may differ between ranks.
 *
 * impl 0 — unfused: ea_kernel_lookup pools [B, T_r, D] (sample-major, the all_to_all_single send
 *   buffer) into ws[0, S); the All-to-All moves block [bstart_s, +b_s) to rank s's ws[S + b_s ·
 *   toff_r · D · esize, ...): grouped ncclSend/ncclRecv of those byte counts on nccl (zero-byte
 *   pairs skipped), cudaMemcpyAsync between the virtual ranks' workspaces on local; then
 *   ea_kernel_permute writes out[i][toff_r + t] = recv_r[i][t]. On nccl the permute is
 *   enqueued by fco_cuda_embedding_alltoall_after_group, after the transport's NCCL group ended
 *   (inside a group, NCCL issues its work only at ncclGroupEnd). P == 1: the lookup writes out.
 *   No signals, no epoch.
 *
 * Knobs (read on the host at every launch; defaults are guesses to confirm on 2×H200):
 *   FCO_EA_SIGNAL_EVERY  remote tiles per counter batch, 1..16 (default 4)
 *   FCO_EA_LAND_KB       land unit size in KiB, 4..16384 (default 64)
 *   FCO_EA_LAND_POLL     1 = land between local tiles (default), 0 = only after them
 *   FCO_EA_BAGS          bags per lane group in flight: 0 = auto (default), 1 or 4
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
constexpr int kBagsPerLane = 4;   /* bags per tile C = kWarps · (32/Gv) · kBagsPerLane */
constexpr int kMaxGroups = 64;    /* counter slots 0..63 of a source's row */
constexpr int kPresenceSlot = kMaxGroups;
constexpr int kMaxPending = 16;   /* counters one signal batch can advance (≥ SIGNAL_EVERY) */
constexpr int kLandUnroll = 8;    /* loads in flight per thread when landing */
constexpr int kRowBaseCap = FCO_EMBEDDING_MAX_TABLES + FCO_MAX_GPU_RANKS;
static_assert(kThreads >= FCO_MAX_GPU_RANKS + 1, "load_rank_view needs MAX+1 threads");
static_assert(kPresenceSlot < FCO_SIG_SLOTS, "counter slots must fit the signal row");

/* Knob defaults (see the header). */
constexpr int kDefaultSignalEvery = 4;
constexpr int kDefaultLandKiB = 64;
constexpr int kAutoBagsMaxLen = 16; /* FCO_EA_BAGS=0: kB = 4 when the mean bag length is ≤ this */

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
};

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

/* Pool tile `task` of rank me: destination d, chunk c (samples [c·ns, +ns) of d), table group
 * tg (local tables [tg·nt, +nt)). */
struct EaTile {
  int d, tg;
  int64_t c;
};
__host__ __device__ __forceinline__ EaTile ea_tile(const EaParams& p, int me, int64_t task,
                                                   int64_t n_remote) {
  const int P = p.nranks, ntg = ea_tgroups(p, me);
  EaTile t;
  int64_t rem = task;
  t.d = me;
  if (task < n_remote) {
    for (int k = 1; k < P; ++k) {
      t.d = (me + k) % P;
      const int64_t n = ea_chunks(p, me, ea_batch(p, t.d)) * ntg;
      if (rem < n) break;
      rem -= n;
    }
  } else {
    rem -= n_remote;
  }
  t.c = rem / ntg;
  t.tg = (int)(rem - t.c * ntg);
  return t;
}

/* A land unit of destination me: rows [r0, r1) of source src's columns, complete when the
 * source's counter `slot` reaches `want`; `presence`: also wait for the source's presence. */
struct LandUnit {
  int64_t r0, r1;
  uint64_t want;
  int32_t src, slot; /* slot < 0: no data (presence only) */
  bool presence;
};
__host__ __device__ __forceinline__ LandUnit ea_land_unit(const EaParams& p, int me, int64_t lu,
                                                          uint64_t base) {
  const int P = p.nranks;
  LandUnit u;
  int64_t rem = lu;
  int src = me;
  for (int k = 1; k < P; ++k) {
    src = (me - k + P) % P;
    const int64_t n = ea_land_units(p, src, me);
    if (rem < n) break;
    rem -= n;
  }
  u.src = src;
  u.presence = rem == 0;
  u.slot = -1;
  u.r0 = u.r1 = 0;
  u.want = base;
  const int64_t ng = ea_groups(p, src, me);
  if (ea_tables(p, src) > 0 && ng > 0) {
    const int split = p.land_split[src];
    const int64_t g = rem / split, sl = rem - g * split;
    const int64_t cpg = p.cpg[src], bme = ea_batch(p, me);
    const int64_t chunks = ea_min(cpg, ea_chunks(p, src, bme) - g * cpg);
    u.slot = (int32_t)g;
    u.want = base + (uint64_t)(chunks * ea_tgroups(p, src));
    const int64_t g0 = g * cpg * p.tile_s[src], g1 = ea_min(bme, g0 + cpg * p.tile_s[src]);
    const int64_t per = (g1 - g0 + split - 1) / split;
    u.r0 = ea_min(g1, g0 + sl * per);
    u.r1 = ea_min(g1, u.r0 + per);
  }
  return u;
}

/* ---- small device helpers ---------------------------------------------------------------- */
/* Index loads in two steps: ld_index_raw, an int64 or a zero-extended int32 into one 64-bit
 * register (two predicated loads, no branch), then ix_fix (the sign) once every load of the
 * batch is issued. A branch on the index type, or a conversion right after each load, puts a
 * move that waits for the load before the next one: the loads meant to be in flight together
 * would go one at a time. p: the element, or g_ea_dummy when there is none to read. */
__device__ __forceinline__ int64_t ld_index_raw(const void* p, int idx64) {
  uint64_t v;
  asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t"
      "@q ld.global.nc.u64 %0, [%1];\n\t"
      "@!q ld.global.nc.u32 %0, [%1];\n\t}"
      : "=l"(v)
      : "l"(p), "r"(idx64));
  return (int64_t)v;
}
__device__ __forceinline__ int64_t ix_fix(int64_t x, int idx64) {
  return idx64 ? x : (int64_t)(int32_t)(uint32_t)x;
}
/* A valid address for the loads of lanes that have nothing to load (never written). */
__device__ uint4 g_ea_dummy;
__device__ __forceinline__ const void* ix_addr(const void* base, int idx64, int64_t i, bool in) {
  return in ? (const void*)((const char*)base + (i << (idx64 ? 3 : 2))) : (const void*)&g_ea_dummy;
}

__device__ __forceinline__ void red_max_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_add_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
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
  /* x = row[u] when pred, else a load of g_ea_dummy (not used). Every lane loads into x's
   * registers unconditionally: with `if (pred) x = __ldg(..)` the compiler loads into
   * temporaries and moves them, and each move waits for its load, so the rows meant to be in
   * flight together went one or two at a time. */
  __device__ static __forceinline__ void load(U& x, const T* row, int u, bool pred) {
    x = __ldg(pred ? (const uint4*)row + u : &g_ea_dummy);
  }
  __device__ static __forceinline__ void unpack(const U& x, float* f) { Pack<T>::unpack(x, f); }
  __device__ static __forceinline__ void store(T* dst, int u, const float* f) {
    st_global_v4((uint4*)dst + u, Pack<T>::pack(f));
  }
};
template <typename T>
struct Unit<T, false> {
  using U = T;
  static constexpr int kE = 1;
  __device__ static __forceinline__ void load(U& x, const T* row, int u, bool pred) {
    if (pred) x = __ldg(row + u);
  }
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

/* Pool the ns × nt bags (sample b0 + i, local table t0 + t) of a tile into
 * dst + i · stride + t · D (elements). All threads of the block; no synchronisation inside. */
template <typename T, bool kVec, int kNV, int kB>
__device__ __forceinline__ void pool_tile(const EaParams& p, const EaRank& rk, int t0, int nt,
                                          int64_t b0, int ns, T* dst, int64_t stride,
                                          const ErrCtx& ec) {
  using Un = Unit<T, kVec>;
  constexpr int kE = Un::kE;
  /* Rows in flight per lane: kB · kU (as many as fit in 128 registers without spilling in the
   * loops below: check ptxas / SASS when changing). */
  constexpr int kU = kB > 1 ? (kE == 4 ? 2 : 1) : (kNV == 1 ? 8 : 2);
  const int D = p.D, G = p.lanes, nunits = D / kE;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gl = lane & (G - 1), gi = lane / G;
  const int per_step = kWarps * (32 / G);
  const int nbags = ns * nt;
  const int steps = (nbags + per_step - 1) / per_step;
  const int64_t nidx = rk.num_indices;
  const int chunk_units = G * kNV;
  const int nchunks = (nunits + chunk_units - 1) / chunk_units;
  const int bag0 = warp * (32 / G) + gi;
  for (int s0 = 0; s0 < steps; s0 += kB) {
    int64_t lo[kB], hi[kB], rows[kB];
    const T* table[kB];
    /* Offsets of the kB bags first (all loads in flight), then their checks. */
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const int bag = (s0 + j) * per_step + bag0;
      const bool have = bag < nbags;
      const int i = have ? bag / nt : 0;
      const int64_t k = (int64_t)(t0 + bag - i * nt) * p.B + b0 + i;
      lo[j] = ld_index_raw(ix_addr(rk.offsets, rk.idx64, k, have), rk.idx64);
      hi[j] = ld_index_raw(ix_addr(rk.offsets, rk.idx64, k + 1, have), rk.idx64);
    }
    int maxit = 0;
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const int bag = (s0 + j) * per_step + bag0;
      const int i = bag < nbags ? bag / nt : 0;
      const int t = t0 + (bag < nbags ? bag - i * nt : 0);
      lo[j] = bag < nbags ? ix_fix(lo[j], rk.idx64) : 0;
      hi[j] = bag < nbags ? ix_fix(hi[j], rk.idx64) : 0;
      if (lo[j] < 0 || hi[j] < lo[j] || hi[j] > nidx) {
        if (gl == 0) note_bad(ec, t, FCO_EA_BAD_OFFSETS, (int64_t)t * p.B + b0 + i, hi[j]);
        lo[j] = hi[j] = 0;
      }
      const int64_t row0 = p.row_base[rk.row_base0 + t];
      rows[j] = p.row_base[rk.row_base0 + t + 1] - row0;
      table[j] = (const T*)rk.weight + row0 * (int64_t)D;
      maxit = max(maxit, (int)((hi[j] - lo[j] + G - 1) / G));
    }
    const int iters = warp_max(maxit);
    for (int cc = 0; cc < nchunks; ++cc) {
      const int u0 = cc * chunk_units + gl;
      float acc[kB][kNV][kE];
#pragma unroll
      for (int j = 0; j < kB; ++j)
#pragma unroll
        for (int v = 0; v < kNV; ++v)
#pragma unroll
          for (int e = 0; e < kE; ++e) acc[j][v][e] = 0.0f;
      for (int it = 0; it < iters; ++it) {
        int64_t idx[kB];
        float w[kB];
        bool ok[kB];
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          const int64_t pos = lo[j] + (int64_t)it * G + gl;
          const bool in = pos < hi[j];
          idx[j] = ld_index_raw(ix_addr(rk.indices, rk.idx64, pos, in), rk.idx64);
          /* w is used only with weights, and only where in */
          w[j] = __ldg(rk.psw && in ? rk.psw + pos : (const float*)&g_ea_dummy);
        }
        int cnt = 0;
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          const int64_t pos = lo[j] + (int64_t)it * G + gl;
          const bool in = pos < hi[j];
          idx[j] = ix_fix(idx[j], rk.idx64);
          ok[j] = in && idx[j] >= 0 && idx[j] < rows[j];
          if (in && !ok[j] && cc == 0) {
            const int bag = (s0 + j) * per_step + bag0;
            note_bad(ec, t0 + bag % nt, FCO_EA_BAD_INDEX, pos, idx[j]);
          }
          cnt = max(cnt, (int)max((int64_t)0, min((int64_t)G, hi[j] - (lo[j] + (int64_t)it * G))));
        }
        const int nq = warp_max(cnt);
        for (int q0 = 0; q0 < nq; q0 += kU) {
          typename Un::U x[kB][kU][kNV];
          float wq[kB][kU];
          bool okq[kB][kU];
#pragma unroll
          for (int j = 0; j < kB; ++j)
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              const int q = q0 + u < G ? q0 + u : G - 1;
              const int64_t iq = __shfl_sync(0xffffffffu, (long long)idx[j], q, G);
              wq[j][u] = __shfl_sync(0xffffffffu, w[j], q, G);
              okq[j][u] = __shfl_sync(0xffffffffu, (int)ok[j], q, G) && q0 + u < nq;
              const T* row = table[j] + iq * (int64_t)D;
#pragma unroll
              for (int v = 0; v < kNV; ++v) {
                const int un = u0 + v * G;
                Un::load(x[j][u][v], row, un, okq[j][u] && un < nunits);
              }
            }
#pragma unroll
          for (int j = 0; j < kB; ++j)
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              if (!okq[j][u]) continue;
#pragma unroll
              for (int v = 0; v < kNV; ++v) {
                if (u0 + v * G >= nunits) continue;
                float f[kE];
                Un::unpack(x[j][u][v], f);
                if (rk.psw) {
#pragma unroll
                  for (int e = 0; e < kE; ++e) acc[j][v][e] = fmaf(wq[j][u], f[e], acc[j][v][e]);
                } else {
#pragma unroll
                  for (int e = 0; e < kE; ++e) acc[j][v][e] += f[e];
                }
              }
            }
        }
      }
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const int bag = (s0 + j) * per_step + bag0;
        if (bag >= nbags) continue;
        const int64_t len = hi[j] - lo[j];
        if (p.mean && len > 0) {
          const float n = (float)len;
#pragma unroll
          for (int v = 0; v < kNV; ++v)
#pragma unroll
            for (int e = 0; e < kE; ++e) acc[j][v][e] = acc[j][v][e] / n;
        }
        const int i = bag / nt;
        T* o = dst + (int64_t)i * stride + (int64_t)(bag - i * nt) * D;
#pragma unroll
        for (int v = 0; v < kNV; ++v)
          if (u0 + v * G < nunits) Un::store(o, u0 + v * G, acc[j][v]);
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

template <typename U>
__device__ __forceinline__ void st_unit(U* p, const U& x) { *p = x; }
template <>
__device__ __forceinline__ void st_unit<uint4>(uint4* p, const uint4& x) { st_global_v4(p, x); }

/* Copy rows [r0, r1) × bytes [col, col + seg) of a [*, row] byte matrix from src to dst, units
 * of U bytes (all of col, seg, row, src, dst multiples of U). All threads of the block;
 * kLandUnroll loads in flight per thread before their stores. src was written by peers: read
 * through L2 (ld.global.cg). Rows go in batches that keep the flat unit index in 32 bits. */
template <typename U>
__device__ __forceinline__ void copy_cols(char* dst, const char* src, int64_t r0, int64_t r1,
                                          size_t row, size_t col, size_t seg) {
  const uint32_t upr = (uint32_t)(seg / sizeof(U));
  if (upr == 0) return;
  const int64_t rows_per_batch = upr >= (1u << 30) ? 1 : (int64_t)((1u << 30) / upr);
  for (int64_t rb = r0; rb < r1; rb += rows_per_batch) {
    const uint32_t n = (uint32_t)(min(r1, rb + rows_per_batch) - rb) * upr;
    const char* s = src + (size_t)rb * row + col;
    char* d = dst + (size_t)rb * row + col;
    for (uint32_t x0 = threadIdx.x; x0 < n; x0 += kLandUnroll * blockDim.x) {
      U r[kLandUnroll];
      size_t off[kLandUnroll];
#pragma unroll
      for (int u = 0; u < kLandUnroll; ++u) {
        const uint32_t x = x0 + (uint32_t)u * blockDim.x;
        const uint32_t rr = x / upr;
        off[u] = (size_t)rr * row + (size_t)(x - rr * upr) * sizeof(U);
        if (x < n) r[u] = __ldcg((const U*)(s + off[u]));
      }
#pragma unroll
      for (int u = 0; u < kLandUnroll; ++u)
        if (x0 + (uint32_t)u * blockDim.x < n) st_unit((U*)(d + off[u]), r[u]);
    }
  }
}
__device__ __forceinline__ void copy_cols_any(char* dst, const char* src, int64_t r0, int64_t r1,
                                              size_t row, size_t col, size_t seg) {
  const uintptr_t m = (uintptr_t)dst | (uintptr_t)src | row | col | seg;
  if (m % 16 == 0) copy_cols<uint4>(dst, src, r0, r1, row, col, seg);
  else if (m % 4 == 0) copy_cols<uint32_t>(dst, src, r0, r1, row, col, seg);
  else copy_cols<uint16_t>(dst, src, r0, r1, row, col, seg);
}

/* ---- impl 1 ------------------------------------------------------------------------------- */
/* Thread 0: is the unit's data complete (no waiting)? */
__device__ __forceinline__ bool land_ready(const LandUnit& u, const RankView& v, int me, uint64_t base) {
  const uint64_t* row = v.peer_sig[me] + (size_t)u.src * FCO_SIG_SLOTS;
  if (u.presence && ld_acquire_sys(row + kPresenceSlot) < base) return false;
  return u.slot < 0 || ld_acquire_sys(row + u.slot) >= u.want;
}
/* Thread 0: wait (bounded) until it is; false on a timeout or another error. */
__device__ __forceinline__ bool land_wait(const LandUnit& u, const RankView& v, int me, uint64_t base) {
  const uint64_t* row = v.peer_sig[me] + (size_t)u.src * FCO_SIG_SLOTS;
  if (u.presence && !wait_count(row + kPresenceSlot, base, v, u.src, kPresenceSlot)) return false;
  return u.slot < 0 || wait_count(row + u.slot, u.want, v, u.src, u.slot);
}

/* All threads: publish the block's remote tiles since the last batch (see the header). */
__device__ __forceinline__ void signal_batch(uint64_t* const* ctr, const uint32_t* n, int npend,
                                             uint64_t base) {
  __syncthreads(); /* every thread's stores before thread 0's fence */
  if (threadIdx.x == 0) {
    for (int i = 0; i < npend; ++i) red_max_relaxed_sys(ctr[i], base);
    fence_acq_rel_sys();
    for (int i = 0; i < npend; ++i) red_add_relaxed_sys(ctr[i], n[i]);
  }
}

/* All threads: land unit lu of destination me — wait for it (blocking) or only test it, then
 * copy it from the workspace half into out. Returns 1 landed, 0 not ready (only when not
 * blocking), -1 gave up (timeout or another error). */
__device__ __forceinline__ int land(const EaParams& p, const RankView& v, char* out, int me,
                                 int64_t lu, uint64_t base, size_t half, bool blocking) {
  const LandUnit u = ea_land_unit(p, me, lu, base);
  bool done = true;
  if (threadIdx.x == 0)
    done = blocking ? land_wait(u, v, me, base) : land_ready(u, v, me, base);
  /* thread 0's acquire, then bar.sync: every thread's reads of the unit come after. */
  if (__syncthreads_or(!done)) return blocking ? -1 : 0;
  if (u.r1 > u.r0) {
    const size_t vec = (size_t)p.D * (size_t)p.esize;
    copy_cols_any(out, v.peer_data[me] + half, u.r0, u.r1, (size_t)p.T * vec,
                  (size_t)p.toff[u.src] * vec, (size_t)ea_tables(p, u.src) * vec);
  }
  return 1;
}

template <typename T, bool kVec, int kNV, int kB>
__global__ void __launch_bounds__(kThreads, 2) ea_kernel_fused(const __grid_constant__ EaParams p) {
  __shared__ RankView v;
  __shared__ int err_done;
  __shared__ uint64_t* pend_ctr[kMaxPending]; /* thread 0's signal batch */
  __shared__ uint32_t pend_n[kMaxPending];
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
  /* Halves at 0 and ws/2 whatever this call's size: the workspace rule (src/core/internal.h). */
  const size_t half = (size_t)(e & 1) * fco_ws_half_bytes(v.ws_bytes);
  const uint64_t base = e << 32;
  const int64_t bpr = p.blocks_per_rank;

  /* Presence and group counters of every destination lifted to this call. */
  if (part == 0 && P > 1) {
    for (int k = 1; k < P; ++k) {
      const int d = (me + k) % P;
      const int ng = (int)ea_groups(p, me, d);
      uint64_t* row = v.peer_sig[d] + (size_t)me * FCO_SIG_SLOTS;
      for (int g = threadIdx.x; g <= ng; g += blockDim.x)
        red_max_relaxed_sys(row + (g == ng ? kPresenceSlot : g), base);
    }
  }

  const EaCounts n = ea_counts(p, me);
  const int64_t n_remote = n.n_remote, n_pool = n.n_pool, n_land = n.n_land;

  /* Pool tiles: remote ones first (destinations me+1, me+2, ...; signalled in batches), then
   * local ones into out, each preceded by the land units that are ready; then the remaining
   * land units, waiting for each. One loop with one call site each for pool_tile and land
   * (inlined once: registers). Every branch below is block-uniform. */
  int64_t task = part, lu = part; /* this block's next pool tile and land unit */
  bool poll = true;               /* try land units before the next local tile */
  int npend = 0, since = 0;
  uint64_t* last = nullptr;
  for (;;) {
    const bool pools_left = task < n_pool;
    if (lu < n_land && (!pools_left || (poll && p.land_poll && task >= n_remote))) {
      const int r = land(p, v, rk.out, me, lu, base, half, !pools_left);
      if (r > 0) {
        lu += bpr;
        continue;
      }
      if (r < 0) break; /* timeout or another error: give up */
      poll = false;     /* not ready: one more local tile first */
    }
    if (!pools_left) break;
    const bool remote = task < n_remote;
    const EaTile tile = ea_tile(p, me, task, n_remote);
    const int d = tile.d;
    const int64_t c = tile.c;
    const int t0 = tile.tg * p.tile_t[me];
    const int64_t i0 = c * p.tile_s[me];
    const int nt = min(p.tile_t[me], ea_tables(p, me) - t0);
    const int ns = (int)min((int64_t)p.tile_s[me], ea_batch(p, d) - i0);
    char* dbase = remote ? v.peer_data[d] + half : rk.out;
    T* dst = (T*)(dbase + ((size_t)i0 * p.T + (size_t)(p.toff[me] + t0)) * p.D * es);
    pool_tile<T, kVec, kNV, kB>(p, rk, t0, nt, p.bstart[d] + i0, ns, dst, (int64_t)p.T * p.D, ec);
    if (remote) {
      uint64_t* ctr = v.peer_sig[d] + (size_t)me * FCO_SIG_SLOTS + (size_t)(c / p.cpg[me]);
      if (ctr == last) {
        if (threadIdx.x == 0) ++pend_n[npend - 1];
      } else {
        if (threadIdx.x == 0) {
          pend_ctr[npend] = ctr;
          pend_n[npend] = 1;
        }
        ++npend;
        last = ctr;
      }
      if (++since >= p.sig_every || npend == kMaxPending || task + bpr >= n_remote) {
        signal_batch(pend_ctr, pend_n, npend, base);
        npend = since = 0;
        last = nullptr;
      }
    }
    task += bpr;
    poll = true;
  }
  epoch_end(dev, e, p.blocks_per_rank);
}

/* ---- impl 0 ------------------------------------------------------------------------------- */
/* Pooled [B, T_r, D] into ws[0, S) (P > 1) or out (P == 1). Grid: num_local × bpr blocks. */
template <typename T, bool kVec, int kNV, int kB>
__global__ void __launch_bounds__(kThreads, 2) ea_kernel_lookup(const __grid_constant__ EaParams p) {
  __shared__ int err_done;
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  if (threadIdx.x == 0) err_done = 0;
  __syncthreads();
  const int me = rk.rank;
  const ErrCtx ec{rk.dev->err, &err_done, p.toff[me]};
  const int Tme = ea_tables(p, me), ntg = ea_tgroups(p, me);
  const int tile_t = p.tile_t[me], tile_s = p.tile_s[me];
  T* base = (T*)(p.nranks > 1 ? rk.ws : rk.out);
  const int64_t ntask = ea_chunks(p, me, p.B) * ntg;
  for (int64_t task = part; task < ntask; task += p.blocks_per_rank) {
    const int64_t c = task / ntg;
    const int t0 = (int)(task - c * ntg) * tile_t;
    const int64_t b0 = c * tile_s;
    const int nt = min(tile_t, Tme - t0);
    const int ns = (int)min((int64_t)tile_s, p.B - b0);
    pool_tile<T, kVec, kNV, kB>(p, rk, t0, nt, b0, ns, base + (b0 * Tme + t0) * (int64_t)p.D,
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

/* Which kernel variant: kVec, kNV, kB, and the lanes per bag of that variant. */
struct Variant {
  bool vec;
  int nv;
  int bags; /* kB */
  int lanes;
};

/* kB = 4 only on the 16-byte path with one vector per lane (rows ≤ 512 bytes): elsewhere the
 * rows themselves keep enough bytes in flight, and registers are short. */
Variant pick_variant(const fco_gpu_launch_t* l, const fco_ea_args_t* a0, size_t es) {
  bool vec = ((size_t)a0->dim * es) % 16 == 0;
  int64_t nidx = 0, nbags = 0;
  for (int i = 0; i < l->num_local; i++) {
    const fco_ea_args_t* a = fco_ea_args(l->r[i].op);
    if ((uintptr_t)a->weight % 16 || (uintptr_t)a->out % 16) vec = false;
    nidx += a->num_indices;
    nbags += (int64_t)a->tables_per_rank[a->rank] * a->batch;
  }
  const int64_t units = vec ? (int64_t)a0->dim * (int64_t)es / 16 : a0->dim;
  Variant v;
  v.vec = vec;
  v.nv = units > 32 ? 4 : 1;
  v.lanes = units >= 32 ? 32 : pow2_at_least((int)units);
  const long long knob = fco_env_int("FCO_EA_BAGS", 0);
  const bool short_bags = nidx <= (int64_t)kAutoBagsMaxLen * nbags; /* mean length */
  v.bags = vec && v.nv == 1 && (knob == 4 || (knob != 1 && short_bags)) ? 4 : 1;
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
  /* Tiling per source: agreed values only (D, dtype, the splits), never the path taken. */
  const int per_warp = 32 / vec_lanes(a0->dim, es);
  const int bags = kWarps * per_warp * kBagsPerLane;
  long long land_kib = fco_env_int("FCO_EA_LAND_KB", kDefaultLandKiB);
  land_kib = land_kib < 4 ? 4 : land_kib > 16384 ? 16384 : land_kib;
  int64_t bmax = 0;
  for (int q = 0; q < P; q++)
    if (a0->batch_per_rank[q] > bmax) bmax = a0->batch_per_rank[q];
  for (int q = 0; q < P; q++) {
    const int Tq = a0->tables_per_rank[q];
    p->tile_t[q] = Tq < 1 ? 1 : Tq < per_warp ? Tq : per_warp;
    p->tile_s[q] = bags / p->tile_t[q];
    const int64_t nch_max = (bmax + p->tile_s[q] - 1) / p->tile_s[q];
    const int64_t cpg = (nch_max + kMaxGroups - 1) / kMaxGroups;
    p->cpg[q] = (int32_t)(cpg < 1 ? 1 : cpg);
    /* Land slices: about land_kib KiB each, at least one row. */
    const int64_t grows = (int64_t)p->cpg[q] * p->tile_s[q];
    const double gbytes = (double)grows * (double)Tq * (double)a0->dim * (double)es;
    double split = gbytes / ((double)land_kib * 1024.0);
    split = split < 1.0 ? 1.0 : split > (double)grows ? (double)grows : split;
    p->land_split[q] = (int32_t)split + ((double)(int32_t)split < split ? 1 : 0);
    if (p->land_split[q] > grows) p->land_split[q] = (int32_t)grows;
  }
  long long sig_every = fco_env_int("FCO_EA_SIGNAL_EVERY", kDefaultSignalEvery);
  p->sig_every = (int32_t)(sig_every < 1 ? 1 : sig_every > kMaxPending ? kMaxPending : sig_every);
  p->land_poll = fco_env_int("FCO_EA_LAND_POLL", 1) != 0;
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
  /* No more blocks than work items; never more than fit at once (fused: land units spin). */
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

template <typename T, bool kVec, int kNV, int kB>
fco_result_t run_fused(const EaParams& p, int64_t max_tasks, int num_local, void* stream, char* err) {
  /* Persistent: every block of the grid exists at once (land units spin on pool tiles). */
  return launch<ea_kernel_fused<T, kVec, kNV, kB>>(p, max_tasks, num_local, stream, "fused", err);
}
template <typename T, bool kVec, int kNV, int kB>
fco_result_t run_lookup(const EaParams& p, int64_t max_tasks, int num_local, void* stream, char* err) {
  return launch<ea_kernel_lookup<T, kVec, kNV, kB>>(p, max_tasks, num_local, stream, "lookup", err);
}

template <bool kFused, typename T, bool kVec, int kNV, int kB>
RunFn run_fn() {
  return kFused ? run_fused<T, kVec, kNV, kB> : run_lookup<T, kVec, kNV, kB>;
}
template <bool kFused, typename T>
RunFn pick_t(const Variant& v) {
  if (v.vec) {
    if (v.nv != 1) return run_fn<kFused, T, true, 4, 1>();
    return v.bags == 4 ? run_fn<kFused, T, true, 1, 4>() : run_fn<kFused, T, true, 1, 1>();
  }
  return v.nv == 1 ? run_fn<kFused, T, false, 1, 1>() : run_fn<kFused, T, false, 4, 1>();
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

/* Most work items one block list holds, over the local ranks: pool tiles, or land units when
 * fused (a block takes both lists round-robin: more blocks than either list would idle). */
int64_t max_tasks(const EaParams& p, bool fused) {
  int64_t best = 0;
  for (int i = 0; i < p.num_local; i++) {
    const int me = p.r[i].rank;
    int64_t n = 0;
    if (fused) {
      const EaCounts c = ea_counts(p, me);
      n = c.n_pool > c.n_land ? c.n_pool : c.n_land;
    } else {
      n = ea_chunks(p, me, p.B) * ea_tgroups(p, me);
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

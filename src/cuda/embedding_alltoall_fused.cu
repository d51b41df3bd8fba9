/*
 * embedding_alltoall_fused.cu — impl 1 of fco_embedding_alltoall: the fused kernel
 * (ea_kernel_fused: pool tiles stored straight into their destination's workspace, counters
 * signalled in batches, landing into out) and its launcher (pick_fused, called by
 * fco_cuda_embedding_alltoall_run). Parameters and tiles: embedding_alltoall.cuh; the pooling:
 * embedding_alltoall_pool.cuh; impl 0, the host side and the entry points: embedding_alltoall.cu.
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
 *     FCO_EA_MIX (a kernel variant, kMix): a block pools the same tiles, its remote ones spread
 *     evenly among its local ones (ea_mix), so its NVLink stores overlap HBM-bound local pooling
 *     instead of forming a phase of their own.
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
 *   Landing: after its last pool tile a block waits (bounded) for its land units in order and
 *     copies each (8 16-byte loads in flight per thread) while other blocks still pool.
 *     FCO_EA_LAND_POLL=1: also, in the local phase, before each local tile thread 0 polls the
 *     block's next land unit (acquire loads of its counters, no wait) and ready units are
 *     copied at once. Measured on 2×H200 (run 6a09520, bf16, the 7 fco-bench workloads) polling
 *     was 0.3-4 % slower everywhere: the poll's block-wide sync makes every warp wait for the
 *     fence of the block's last signal batch (its NVLink puts), so 0 is the default.
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
 *   ea_kernel_fused32 (the default; FCO_EA_DECODE=old runs ea_kernel_fused): the same kernel
 *     but for how a block finds its next tile (a 32-bit cursor instead of decoding the tile
 *     number) and where its loop state waits while it pools (see there).
 *   Launch requirements: all blocks co-resident on the local transport (land waits spin on
 *   other ranks' pool tiles): bpr ≤ occupancy × SMs / num_local. dev->ws_bytes ≥ 2R when P > 1
 *   (checked on the device: FCO_ERR_INTERNAL). Bad data does not stop the protocol (peers never
 *   wait in vain), and waits ignore FCO_ERR_INVALID_ARGUMENT, so out is complete (bad entries
 *   skipped) also then. Every rank must use the same tiling (it does: agreed values only); the
 *   FCO_EA_* knobs are local choices (batching, land slices, kB, order) and may differ between ranks.
 */
#include <stdint.h>

#include "embedding_alltoall_pool.cuh"
#include "embedding_alltoall_proto.cuh"

namespace fco {
namespace ea {
namespace {

/* ---- work items of rank me (their counts: ea_counts) ------------------------------------ */
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

/* FCO_EA_MIX's order of one block (the kMix kernel variant): the block keeps its tiles — part,
 * part + bpr, ... — and pools its nr remote ones (in their order) spread evenly over the first
 * w of its nj positions, local ones (in theirs) in the others; w = nr + ceil(mix% · (nj − nr)):
 * mix % of the local tiles are interleaved. 0 is remote first, 100 spreads the remote tiles
 * over the whole order, and every value between changes the order whatever the remote share
 * (83683bd's w = max(nr, mix% · nj) left mix ≤ 50 remote-first at P = 2). Computed once per
 * block; in the loop a Bresenham step (err += nr, wrap at w; remote while err < nr) decides
 * with adds and compares only: remote at position k iff (k · nr) mod w < nr, exactly nr of the
 * first w positions, the first one included, gaps ⌊w/nr⌋ or ⌈w/nr⌉. 32 bits (fewer registers
 * live across the pooling): n_pool < 2^31 (the launcher runs the variant only then), so the
 * local cursor and err + nr < 2w fit unsigned. */
struct EaMix {
  uint32_t ltask; /* the block's first local tile */
  uint32_t nr, w;
};
__host__ __device__ __forceinline__ EaMix ea_mix(int64_t n_remote, int64_t n_pool, int64_t part,
                                                 int64_t bpr, int mix) {
  const int64_t nr = part < n_remote ? (n_remote - part + bpr - 1) / bpr : 0;
  const int64_t nj = part < n_pool ? (n_pool - part + bpr - 1) / bpr : 0;
  const int64_t w = nr + ((nj - nr) * mix + 99) / 100;
  return EaMix{(uint32_t)(part + nr * bpr), (uint32_t)nr, (uint32_t)w};
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
    copy_cols_any<>(out, v.peer_data[me] + half, u.r0, u.r1, (size_t)p.T * vec,
                  (size_t)p.toff[u.src] * vec, (size_t)ea_tables(p, u.src) * vec);
  }
  return 1;
}

template <typename T, bool kVec, int kNV, int kB, bool kProf, bool kMix>
__global__ void __launch_bounds__(kThreads, kB == 0 ? kStreamMinBlocks : 2) ea_kernel_fused(const __grid_constant__ EaParams p) {
  __shared__ RankView v;
  __shared__ int err_done;
  __shared__ uint64_t* pend_ctr[kMaxPending]; /* thread 0's signal batch */
  __shared__ uint32_t pend_n[kMaxPending];
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  fco_dev_rank_t* dev = rk.dev;
  if (threadIdx.x == 0) err_done = 0;
  load_rank_view(dev, &v, FCO_OP_EMBEDDING_ALLTOALL);
  const uint64_t e = v.epoch + 1;
  const int P = p.nranks, me = v.rank;
  const size_t es = sizeof(T);
  if (!ea_view_ok(p, v, rk.rank)) {
    epoch_end(dev, e, p.blocks_per_rank);
    return;
  }
  const ErrCtx ec{v.err, &err_done, p.toff[me]};
  for (int k = 0; k < 3; ++k) prof_stamp<kProf>(p, k);
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
   * land units, waiting for each. kMix (FCO_EA_MIX): the same tiles, remote ones spread over
   * the block's order (ea_mix); `task` walks the remote ones, mx.ltask the local ones, and a
   * batch still ends at the block's last remote tile. One loop with one call site each for
   * pool_tile and land (inlined once: registers). Every branch below is block-uniform. */
  int64_t task = part, lu = part; /* this block's next pool tile and land unit */
  bool poll = true;               /* try land units before the next local tile */
  int npend = 0, since = 0;
  uint64_t* last = nullptr;
  EaMix mx{};
  uint32_t err = 0; /* Bresenham: (position · nr) mod w */
  if constexpr (kMix) mx = ea_mix(n_remote, n_pool, part, bpr, p.mix);
  for (;;) {
    int64_t cur = task; /* the tile of this step */
    if constexpr (kMix)
      cur = task < n_remote && (err < mx.nr || mx.ltask >= n_pool) ? task : (int64_t)mx.ltask;
    const bool pools_left = cur < n_pool;
    if (lu < n_land && (!pools_left || (poll && p.land_poll && cur >= n_remote))) {
      const int r = land(p, v, rk.out, me, lu, base, half, !pools_left);
      if (r > 0) {
        lu += bpr;
        continue;
      }
      if (r < 0) break; /* timeout or another error: give up */
      poll = false;     /* not ready: one more local tile first */
    }
    if (!pools_left) break;
    const bool remote = cur < n_remote;
    const EaTile tile = ea_tile(p, me, cur, n_remote);
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
        if (task + bpr >= n_remote) prof_stamp<kProf>(p, 1);
      }
    }
    if constexpr (kMix) {
      if (remote) task += bpr;
      else mx.ltask += bpr;
      err += mx.nr;
      if (err >= mx.w) err -= mx.w;
    } else {
      task += bpr;
    }
    poll = true;
    if (kMix ? task >= n_remote && mx.ltask >= n_pool : task >= n_pool) prof_stamp<kProf>(p, 2);
  }
  if (kMix ? task < n_remote || mx.ltask < n_pool : task < n_pool)
    prof_stamp<kProf>(p, 2); /* gave up early */
  prof_stamp<kProf>(p, 3);
  epoch_end(dev, e, p.blocks_per_rank);
}

/* ---- impl 1, the 32-bit tile cursor (default; FCO_EA_DECODE=old: ea_kernel_fused) ------- */
/* ea_kernel_fused32: the same protocol, tiles, order, batches and pool_tile as ea_kernel_fused;
 * only the way a block finds its next tile differs. ea_kernel_fused decodes every tile from its
 * 64-bit number (ea_tile: a loop over the destinations with a 64-bit division each, then two more,
 * and the group by another), and keeps n_remote, n_pool, the task, the last counter pointer, ...
 * live across pool_tile: the tile loop spilled (SASS). Here the destinations' constants are in
 * shared memory (EaDest, once per block), and a block walks its tiles part, part + bpr, ... with a
 * cursor (k, c, tg): destination position k (0..P-2 remote me+1.., P-1 me, P done), chunk c, table
 * group tg; stepping by bpr = bq·ntg + br adds and carries, with no division. 32 bits: c < chunks
 * of a destination < 2^31 and bpr < 2^31, so c + bq + 1 < 2^32, and the counter group c / cpg is a
 * multiply-shift (FastDiv, exact below 2^31); land units number < 2^31. ea_dec32_ok checks these
 * on the host; otherwise the launcher runs ea_kernel_fused. Registers: the block constants are in
 * shared memory (EaBlk), rank me is read as rk.rank where used, and the loop state waits in per-
 * thread shared slots while pool_tile runs, so pool_tile has the registers it has in the lookup
 * kernel. SASS (sm_90, CUDA 13; tables in docs/embedding_alltoall_history.md): the per-tile code
 * outside pool_tile's loops is ~150 instructions and ~50 local-memory spill operations shorter,
 * without 64-bit division calls; the row loops are the same length (±2 %), but the kB = 4 chunk
 * level has 4-7 % more instructions (moves, parameter reloads). Measured on 2×H200 (run 2ee934f,
 * bf16, the 7 fco-bench workloads): 1-13 % faster than ea_kernel_fused on all, most where bags are
 * short; the default. */
struct EaDest {
  char* dst;     /* where its tiles go: (peer workspace half or out) + toff_me · D · esize */
  uint64_t* ctr; /* me's counter row at the destination (remote only) */
  int64_t b0;    /* bstart of the destination */
  int64_t b;     /* its batch b_d */
  uint32_t nch;  /* chunks of rank me's tiles for it */
};
struct EaCur {
  uint32_t k, c, tg;
};
/* The 32-bit bounds of ea_kernel_fused32 for rank me (bpr < 2^31: a grid dimension). */
__host__ __device__ __forceinline__ bool ea_dec32_ok(const EaParams& p, int me) {
  const int64_t lim = (int64_t)1 << 31;
  for (int q = 0; q < p.nranks; ++q)
    if (ea_chunks(p, me, ea_batch(p, q)) >= lim) return false;
  return ea_counts(p, me).n_land < lim;
}
/* The cursor of tile `task` (once per block: 64-bit arithmetic); k = P when past the end. */
__device__ __forceinline__ EaCur ea_cur_at(const EaDest* ds, int P, uint32_t ntg, int64_t task) {
  EaCur u{0, 0, 0};
  int64_t rem = task;
  while ((int)u.k < P && rem >= (int64_t)ds[u.k].nch * ntg)
    rem -= (int64_t)ds[u.k].nch * ntg, ++u.k;
  if ((int)u.k < P) {
    u.c = (uint32_t)(rem / ntg);
    u.tg = (uint32_t)(rem - (int64_t)u.c * ntg);
  }
  return u;
}
/* Step a cursor by bpr = bq · ntg + br tiles (see above: no overflow). */
__device__ __forceinline__ void ea_cur_step(EaCur& u, const EaDest* ds, int P, uint32_t ntg,
                                            uint32_t bq, uint32_t br) {
  u.tg += br;
  u.c += bq;
  if (u.tg >= ntg) u.tg -= ntg, ++u.c;
  while ((int)u.k < P && u.c >= ds[u.k].nch) u.c -= ds[u.k].nch, ++u.k;
}

/* Block constants of ea_kernel_fused32, in shared memory: read where used, not held in
 * registers across pool_tile (which needs all 128). */
struct EaBlk {
  uint64_t base; /* e << 32 */
  size_t half;   /* this call's workspace half */
  FastDiv gdiv;  /* chunk → counter group (cpg of rank me) */
  uint32_t ntg, bq, br; /* table groups; bpr = bq · ntg + br */
  uint32_t n_land;
};

template <typename T, bool kVec, int kNV, int kB, bool kProf, bool kMix>
__global__ void __launch_bounds__(kThreads, kB == 0 ? kStreamMinBlocks : 2)
    ea_kernel_fused32(const __grid_constant__ EaParams p) {
  __shared__ RankView v;
  __shared__ int err_done;
  __shared__ uint64_t* pend_ctr[kMaxPending]; /* thread 0's signal batch */
  __shared__ uint32_t pend_n[kMaxPending];
  __shared__ EaDest dest[FCO_MAX_GPU_RANKS];  /* by position k: destination me+1+k mod P */
  __shared__ EaBlk blk;
  __shared__ uint32_t save[kMix ? 11 : 7][kThreads]; /* per thread: loop state across pool_tile */
  const uint32_t li = blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  fco_dev_rank_t* dev = rk.dev;
  if (threadIdx.x == 0) err_done = 0;
  load_rank_view(dev, &v, FCO_OP_EMBEDDING_ALLTOALL);
  const uint64_t e = v.epoch + 1;
  const int P = p.nranks;
  const size_t es = sizeof(T);
  if (!ea_view_ok(p, v, rk.rank)) {
    epoch_end(dev, e, p.blocks_per_rank);
    return;
  }
  /* Rank me is read as rk.rank (= v.rank, checked above) at every use and, in the loop, e from
   * blk: parameter and shared-memory loads where used. Held in registers across pool_tile
   * (const int me = rk.rank), they cost the 16-byte path's row loop 10 % more instructions
   * (moves, SASS). */
  const ErrCtx ec{v.err, &err_done, p.toff[rk.rank]};
  for (int k = 0; k < 3; ++k) prof_stamp<kProf>(p, k);
  const uint32_t bpr = p.blocks_per_rank;
  {
    const size_t half = (size_t)(e & 1) * fco_ws_half_bytes(v.ws_bytes);
    if (part == 0 && P > 1) {
      for (int k = 1; k < P; ++k) {
        const int d = (rk.rank + k) % P;
        const int ng = (int)ea_groups(p, rk.rank, d);
        uint64_t* row = v.peer_sig[d] + (size_t)rk.rank * FCO_SIG_SLOTS;
        for (int g = threadIdx.x; g <= ng; g += blockDim.x)
          red_max_relaxed_sys(row + (g == ng ? kPresenceSlot : g), e << 32);
      }
    }
    if ((int)threadIdx.x < P) {
      const int k = threadIdx.x, d = (rk.rank + 1 + k) % P;
      EaDest x;
      x.dst = (k < P - 1 ? v.peer_data[d] + half : rk.out) + (size_t)p.toff[rk.rank] * p.D * es;
      x.ctr = v.peer_sig[d] + (size_t)rk.rank * FCO_SIG_SLOTS;
      x.b0 = p.bstart[d];
      x.b = ea_batch(p, d);
      x.nch = (uint32_t)ea_chunks(p, rk.rank, x.b);
      dest[k] = x;
    } else if (threadIdx.x == kThreads - 1) {
      EaBlk b;
      b.base = e << 32;
      b.half = half;
      b.gdiv = fast_div((uint32_t)p.cpg[rk.rank]);
      b.ntg = (uint32_t)ea_tgroups(p, rk.rank);
      b.bq = b.ntg ? bpr / b.ntg : 0;
      b.br = bpr - b.bq * b.ntg;
      b.n_land = (uint32_t)ea_counts(p, rk.rank).n_land;
      blk = b;
    }
    __syncthreads();
  }

  /* As ea_kernel_fused: remote tiles first (positions 0..P-2), then local ones (P-1); kMix: the
   * remote cursor rc and the local one lc, interleaved by the Bresenham step of ea_mix. The
   * cursor steps before pool_tile, so only it, the counter key and the batch state stay live
   * across it. */
  EaCur rc = ea_cur_at(dest, P, blk.ntg, part);
  EaCur lc{};
  uint32_t lu = part; /* this block's next land unit */
  bool poll = true;
  int npend = 0, since = 0;
  uint32_t last = ~0u; /* key k · kMaxGroups + group of the batch's last counter */
  EaMix mx{};
  uint32_t err = 0;
  if constexpr (kMix) {
    const EaCounts n = ea_counts(p, rk.rank);
    mx = ea_mix(n.n_remote, n.n_pool, part, bpr, p.mix);
    lc = ea_cur_at(dest, P, blk.ntg, mx.ltask);
  }
  for (;;) {
    const bool use_rc = !kMix || ((int)rc.k < P - 1 && (err < mx.nr || (int)lc.k >= P));
    const EaCur cur = use_rc ? rc : lc;
    const bool pools_left = (int)cur.k < P;
    const bool remote = (int)cur.k < P - 1;
    if (lu < blk.n_land && (!pools_left || (poll && p.land_poll && !remote))) {
      const int r = land(p, v, rk.out, rk.rank, lu, blk.base, blk.half, !pools_left);
      if (r > 0) {
        lu += bpr;
        continue;
      }
      if (r < 0) break;
      poll = false;
    }
    if (!pools_left) break;
    const EaDest& ds = dest[cur.k];
    const int t0 = (int)cur.tg * p.tile_t[rk.rank];
    const int64_t i0 = (int64_t)((uint64_t)cur.c * (uint32_t)p.tile_s[rk.rank]);
    const int nt = min(p.tile_t[rk.rank], ea_tables(p, rk.rank) - t0);
    const int ns = (int)min((int64_t)p.tile_s[rk.rank], ds.b - i0);
    T* dst = (T*)(ds.dst + ((size_t)i0 * p.T + (size_t)t0) * p.D * es);
    const int64_t b0 = ds.b0 + i0;
    uint32_t key = remote ? cur.k * kMaxGroups + fast_div(cur.c, blk.gdiv) : ~0u;
    if (use_rc) ea_cur_step(rc, dest, P, blk.ntg, blk.bq, blk.br);
    else ea_cur_step(lc, dest, P, blk.ntg, blk.bq, blk.br);
    {
      /* The loop state waits in this thread's shared slots while pool_tile runs (the compiler
       * barrier forces the reload): pool_tile keeps all 128 registers, as in the lookup. */
      uint32_t* sv = &save[0][threadIdx.x];
      const uint32_t fl = (uint32_t)poll | (uint32_t)npend << 8 | (uint32_t)since << 16;
      sv[0 * kThreads] = rc.k, sv[1 * kThreads] = rc.c, sv[2 * kThreads] = rc.tg;
      sv[3 * kThreads] = lu, sv[4 * kThreads] = fl, sv[5 * kThreads] = last;
      sv[6 * kThreads] = key;
      if constexpr (kMix) {
        sv[7 * kThreads] = lc.k, sv[8 * kThreads] = lc.c, sv[9 * kThreads] = lc.tg;
        sv[10 * kThreads] = err;
      }
      pool_tile<T, kVec, kNV, kB>(p, rk, t0, nt, b0, ns, dst, (int64_t)p.T * p.D, ec);
      asm volatile("" ::: "memory");
      rc.k = sv[0 * kThreads], rc.c = sv[1 * kThreads], rc.tg = sv[2 * kThreads];
      lu = sv[3 * kThreads];
      const uint32_t f2 = sv[4 * kThreads];
      poll = f2 & 1, npend = (f2 >> 8) & 0xff, since = f2 >> 16;
      last = sv[5 * kThreads];
      key = sv[6 * kThreads];
      if constexpr (kMix) {
        lc.k = sv[7 * kThreads], lc.c = sv[8 * kThreads], lc.tg = sv[9 * kThreads];
        err = sv[10 * kThreads];
      }
    }
    if (remote) {
      if (key == last) {
        if (threadIdx.x == 0) ++pend_n[npend - 1];
      } else {
        if (threadIdx.x == 0) {
          pend_ctr[npend] = dest[key / kMaxGroups].ctr + key % kMaxGroups;
          pend_n[npend] = 1;
        }
        ++npend;
        last = key;
      }
      const bool last_remote = (int)rc.k >= P - 1; /* the block's last remote tile */
      if (++since >= p.sig_every || npend == kMaxPending || last_remote) {
        signal_batch(pend_ctr, pend_n, npend, blk.base);
        npend = since = 0;
        last = ~0u;
        if (last_remote) prof_stamp<kProf>(p, 1);
      }
    }
    if constexpr (kMix) {
      err += mx.nr;
      if (err >= mx.w) err -= mx.w;
    }
    poll = true;
    if (kMix ? (int)rc.k >= P - 1 && (int)lc.k >= P : (int)rc.k >= P) prof_stamp<kProf>(p, 2);
  }
  if (kMix ? (int)rc.k < P - 1 || (int)lc.k < P : (int)rc.k < P)
    prof_stamp<kProf>(p, 2); /* gave up early */
  prof_stamp<kProf>(p, 3);
  epoch_end(rk.dev, blk.base >> 32, p.blocks_per_rank);
}

/* fco_last_plan: whether this thread's last successful launch ran ea_kernel_fused32. */
thread_local bool t_last_dec32 = false;

template <typename T, bool kVec, int kNV, int kB>
struct RunFused {
  template <bool kProf, bool kMix>
  static fco_result_t go(const EaParams& p, bool dec, int64_t max_tasks, int num_local,
                         void* stream, char* err) {
    const int smem = kB == 0 ? kStreamSmem : 0;
    const fco_result_t r =
        dec ? launch<ea_kernel_fused32<T, kVec, kNV, kB, kProf, kMix>>(p, max_tasks, num_local,
                                                                       stream, "fused", err, smem)
            : launch<ea_kernel_fused<T, kVec, kNV, kB, kProf, kMix>>(p, max_tasks, num_local,
                                                                     stream, "fused", err, smem);
    if (r == FCO_OK) t_last_dec32 = dec;
    return r;
  }
  static fco_result_t run(const EaParams& p, int64_t max_tasks, int num_local, void* stream,
                          char* err) {
    /* Persistent: every block of the grid exists at once (land units spin on pool tiles).
     * The diagnostic (kProf) and FCO_EA_MIX (kMix) variants only when asked for: the default
     * kernel stays the one without them (SASS). The 32-bit cursor kernel (ea_kernel_fused32)
     * unless FCO_EA_DECODE=old or a local rank's counts exceed its bounds (ea_dec32_ok): then
     * ea_kernel_fused. */
    bool dec = p.decode != 0;
    for (int i = 0; i < num_local && dec; ++i) dec = ea_dec32_ok(p, p.r[i].rank);
    const bool mix = p.mix >= 0;
    if (p.prof && mix) return go<true, true>(p, dec, max_tasks, num_local, stream, err);
    if (p.prof) return go<true, false>(p, dec, max_tasks, num_local, stream, err);
    if (mix) return go<false, true>(p, dec, max_tasks, num_local, stream, err);
    return go<false, false>(p, dec, max_tasks, num_local, stream, err);
  }
};

}  // namespace

RunFn pick_fused(fco_dtype_t dt, const Variant& v) { return pick<RunFused>(dt, v); }

/* Declared in embedding_alltoall.cu (fco_last_plan). */
const char* fused_kernel_name() { return t_last_dec32 ? "fused32" : "fused"; }

}  // namespace ea
}  // namespace fco

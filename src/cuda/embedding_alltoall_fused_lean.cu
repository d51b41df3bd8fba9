/*
 * embedding_alltoall_fused_lean.cu — impl 1 of fco_embedding_alltoall on the lean lookup
 * (ea_kernel_fused_lean, the default where rows are whole 16-byte units of ≤ 512 bytes;
 * FCO_EA_LEAN=0 runs ea_kernel_fused32 / ea_kernel_fused of embedding_alltoall_fused.cu).
 *
 * Why: the lean lookup (embedding_alltoall_lean.cuh: a warp streams a tile of consecutive bags
 *   of one table through a cp.async ring) ran impl 0's lookup 1.2–2.3× faster than the kB paths
 *   on all 14 fco-bench workloads (run c09f78d, 2×H200), faster than the fused kernel's own
 *   pooling; the fused kernel's tiles (agreed by every rank, ~4 bags a lane group) cannot feed
 *   that ring. So this kernel keeps the fused protocol's shape and changes its unit of work.
 *
 * Work of rank me: warp tiles (destination position k, local table t, chunk c of W samples):
 *   positions k = 0..P−2 are destinations me+1, me+2, ... (remote: stores over NVLink into the
 *   destination's workspace half, laid out as out_d [b_d, T, D], at their final place), k = P−1
 *   is me (straight into out). Tiles are numbered k-major, then t, then c (a warp's bags are
 *   consecutive samples of one table: one contiguous index range). Order (a local choice):
 *   claimed (lean_pool_dyn, FCO_EA_LEAN_DYN; the default; before session 12 only where bags held ≤ 16 rows):
 *   warps claim tiles from the rank's remote and local queues, blocks on FCO_EA_LEAN_SPLIT % of
 *   the SMs remote first, the others local first, so NVLink pushes and HBM-bound pooling run at
 *   once (run 07fcd7a: 1.1–1.3× where bags hold 1–4 rows). Static (lean_pool_all): warp w of the
 *   rank takes order positions w, w + nw, ... (nw = warps of the rank's blocks); position j is
 *   tile j (remote ones first, as every warp's remote tiles come before its local ones), or with
 *   FCO_EA_LEAN_MIX = m the nR remote tiles spread evenly over the first nR + m % · nL positions
 *   (fco_ea_lean_order). W (a power
 *   of two ≤ kLeanMaxTileBags) is a local choice (lean_tile_bags: from this rank's mean bag
 *   length), so destinations do not count tiles but bags.
 * Counters: slot kLeanSlot of destination d's signal row me counts the bags me pooled for d; it
 *   ends at (e << 32) + b_d · T_me. A block adds its bags per destination (shared counts, added
 *   by each warp's lane 0 with each remote tile) once, when all its warps are past their remote
 *   tiles (static: the last remote position; claimed: the remote queue found empty): bar.sync,
 *   then thread 0 does red.max.relaxed(e << 32) on each counter it advances,
 *   one fence.acq_rel.sys, and red.add.relaxed(bags) — the release pattern of ea_kernel_fused's
 *   signal batches (embedding_alltoall_fused.cu: the max lifts the previous call's value and no
 *   add is lost), once a block; only warp 0 waits for the fence, the others pool local tiles.
 *   A different slot from ea_kernel_fused's group counters (0..63), so ranks that disagree on
 *   FCO_EA_LEAN end in FCO_ERR_TIMEOUT, never in data landed early.
 * Presence: block 0 lifts slot kPresenceSlot of every destination at start; every rank waits
 *   for every source's presence each call (its first land unit), as ea_kernel_fused does — so no
 *   rank starts call e + 2 (which writes the half of call e) before its peers finished call e.
 *   Its value is (e << 32) | (1 + the slot of the symmetric buffer holding my out) << 1 (0: an
 *   ordinary out, or one not 16-byte aligned: the host announces only outs the peers' 16-byte
 *   stores may target), whose byte offset is in kOutOffSlot first (a fence between), as
 *   (e << 32) | offset / 16: the slot is also other ops' flag slot, whose values must only grow
 *   (dev.h). Nothing else lifts it during the call (until session 56's review, R2, a staging
 *   sender lifted bit 6; bit 0 said "I store into symmetric outs").
 * Symmetric outs: a capable sender (it holds a symmetric buffer, fco_mem_alloc, and
 *   FCO_EA_DIRECT is not 0) waits, in a warp before its block's first remote tile for d, for d's
 *   presence of this call (d began it, so its stream's earlier readers of out are done), then
 *   stores d's rows at d's out as its own table maps it (lean_resolve) instead of d's workspace
 *   half, and says so with its direct word: the LL word {1, fco_ll_flag(e)} at index me of d's
 *   LL half e & 1 (src/core/internal.h, rule (3); lean_direct_word), stored before the block's
 *   signal. d skips the land units of a source whose word of this call it finds after the
 *   counter's acquire; it lands every other source. A sender that is not capable never waits
 *   (the default: no symmetric buffer) and stores no word; nor does one that cannot use the out
 *   d announced (its table lacks that slot: fco_mem_free is local; an offset of another epoch,
 *   or a misaligned address): it stages d's rows, d lands them. Every block of a sender decides
 *   alike for d (the same presence, offset and table), so a source's rows are all direct or
 *   all staged — but for a block whose wait fails (a timeout, or this rank's error stopping it):
 *   it stages and signals none of its bags to d (bit 31 of b->sent[k]), so d times out with
 *   its own error rather than skip the source for a sibling's word and keep the block's rows
 *   stale — spare bits, no shared memory added: a separate mask and flag in LeanBlk made the
 *   kernel 2–4 % slower with any out (session 58, runs 203fb7e-ab and 1580f40-ab2). Why a word
 *   in d's workspace and not a signal slot: d reads it after its counter, when the sender may
 *   already run its next call e + 1, which may rewrite any slot of d's row for it (its
 *   presence of e + 1 at start, or another op's flags: they use slots 0..blocks − 1 and the
 *   last three) — the R2 race: d read e + 1's presence bits and missed "staged" (poison
 *   kept), or missed "direct" (a next call that does not store directly, another op's flag:
 *   stale staging landed over direct rows).
 *   The LL half e & 1 is d's workspace of call e: e + 1 writes the other half, and no call
 *   e + 2 starts before d finished e (the workspace rule: e + 1 waits for a signal d raises in
 *   e + 1), so nothing overwrites the word before d read it; a stale word (an earlier call of
 *   that parity, another op's, the zeroed area) carries another flag. The LL half holds the P
 *   words wherever a row moves: ea_view_ok's workspace of ≥ 2 · recv_bytes, a multiple of 256,
 *   is then ≥ 512 bytes, and its LL half ≥ 256.
 * Landing: land units (source me−1, me−2, ...; slices of about FCO_EA_LAND_KB KiB of the rows
 *   of out, at least a row; one presence-only unit for a source that sends nothing), dealt
 *   round-robin over the rank's blocks and run after a block's last pool tile: thread 0 waits
 *   (bounded) for the source's presence (first unit) and counter (when my out is symmetric it
 *   then reads the source's direct word), then the block copies the source's columns of those
 *   rows from the workspace half into out (copy_cols_any) — unless the source stored them into
 *   my symmetric out (run 5d02c14: 8–14 % faster on the short-bag workloads).
 * Progress: pool tiles never wait; a block waits only after its last pool tile, and only for
 *   counters other ranks complete without waiting (their blocks' signals follow their remote
 *   tiles). Every block of the grid must be co-resident (the launcher sizes the grid from the
 *   occupancy at this launch's shared memory): on the local transport because the virtual ranks
 *   wait for each other inside one grid; on nccl because blocks waiting for a peer's counter
 *   hold SMs this rank's not-yet-started blocks need, while the peer waits for this rank's
 *   counter the same way — if other work keeps part of the grid from being resident (another
 *   stream's kernels, MPS), both can wait until FCO_ERR_TIMEOUT, as ea_kernel_fused can.
 * Bad data: lean_tile skips bad indices, pools bad bags as empty and reports through dev->err;
 *   the tile still counts all its bags, so the protocol completes and out is complete.
 * Bounds (checked by fused_lean_applies on the host, agreed values only): tiles of a rank
 *   ≤ T_me · (B + P) < 2^31 (32-bit tile numbers and steps), b_d · T_q < 2^31 (counter values).
 * Index types may differ between the local ranks of a launch: a block branches once on its
 *   rank's type (two instances of the tile loop in one kernel).
 */
#include <stdint.h>
#include <string.h>

#include "embedding_alltoall_pool.cuh"
#include "embedding_alltoall_lean.cuh"
#include "embedding_alltoall_proto.cuh"

namespace fco {
namespace ea {
namespace {

constexpr double kLeanFourMinLen = 4.0; /* the claimed order's 4-block default: bags of > 4 rows (run_t) */
constexpr int kLeanLandUnroll = 4; /* landing loads in flight a thread: 8 spill at 64 registers */
constexpr int kLeanSlot = kPresenceSlot + 1; /* the bag counter, slot of the source's row */
constexpr int kLeanQueueSlot = kLeanSlot + 1; /* FCO_EA_LEAN_DYN: 2 queues, the rank's own row */
constexpr int kOutOffSlot = kLeanQueueSlot + 2; /* a symmetric out's offset / 16 (see Presence) */
static_assert(kOutOffSlot < FCO_SIG_SLOTS, "the lean counters must fit the signal row");
static_assert(kThreads > FCO_MAX_GPU_RANKS + 1, "thread FCO_MAX_GPU_RANKS + 1 fills the tables");

/* Per local rank (by index li): its lean source and its land unit size. */
struct LeanFusedArgs {
  LeanSrc s[FCO_MAX_GPU_RANKS];
  int32_t aligned[FCO_MAX_GPU_RANKS]; /* weight and out 16-byte aligned: lean_tile, else lean_tile_any */
  int64_t land_bytes;
  int32_t mix; /* FCO_EA_LEAN_MIX: % of the local tiles the remote ones are spread over (0: remote first) */
  int32_t split; /* FCO_EA_LEAN_SPLIT (kDyn): % of the SMs whose blocks take remote tiles first */
  int32_t fake;  /* FCO_EA_PROFILE=2 (kProf only): remote tiles stored locally, see run_t */
  int32_t fault_rank; /* FCO_FAULT_EA_RESOLVE (test hook): this rank's odd blocks fail to resolve */
};

/* The block's tables, filled by one thread before load_rank_view's closing barrier. */
struct LeanBlk {
  uint32_t tstart[FCO_MAX_GPU_RANKS + 1]; /* first tile of position k; [P] = all tiles */
  uint32_t w;                             /* the remote tiles lie in order positions [0, w) */
  uint32_t tpk[FCO_MAX_GPU_RANKS];        /* chunks of W samples a table at position k */
  int64_t lstart[FCO_MAX_GPU_RANKS + 1];  /* first land unit of source position k (1..P−1) */
  /* bags this block pooled for position k; bit 31: its resolve failed, so they are not
   * signalled (lean_resolve; counts stay below 2^31, see Bounds) */
  uint32_t sent[FCO_MAX_GPU_RANKS];
  uint32_t park[kWarps][2];               /* a warp's loop state across lean_tile */
  char* rdst[FCO_MAX_GPU_RANKS];          /* cap: where position k's rows go (lean_remote_base) */
  int32_t cap; /* bit 0: this rank stores into peers' symmetric outs; bit 1: FCO_FAULT_EA_RESOLVE */
  int32_t direct_me;                      /* this rank's out is symmetric */
  /* thread 0 only (set after load_rank_view, read by lean_land: out of its unit loop's
   * registers): the sources' direct words of this call at this rank, the value "stored
   * directly" (lean_direct_word) */
  const uint64_t* dword;
  uint64_t dval;
};

/* One thread: the tile and land-unit tables of rank me (see the header; the arithmetic is
 * src/ops/embedding_alltoall_plan.h's, checked on the CPU by tests/test_ea_plan.c). */
__device__ __forceinline__ void lean_blk(const EaParams& p, int me, int W, int x_nt,
                                         int64_t land_bytes, int mix, int32_t sym_bits, LeanBlk* b) {
  const int P = p.nranks;
  b->cap = sym_bits & 1;
  b->direct_me = (sym_bits >> 1) != 0;
  for (int k = 0; k < P; ++k) b->rdst[k] = nullptr;
  const int nt = x_nt < 1 ? 1 : x_nt;
  fco_ea_lean_tiles(P, me, (ea_tables(p, me) + nt - 1) / nt, W, p.bstart, b->tstart, b->tpk);
  for (int k = 0; k < P; ++k) b->sent[k] = 0;
  const uint32_t nR = b->tstart[P - 1];
  b->w = fco_ea_lean_w(nR, b->tstart[P] - nR, mix);
  const int64_t bme = ea_batch(p, me), vec = (int64_t)p.D * p.esize;
  int64_t lu = 0;
  b->lstart[0] = b->lstart[1] = 0;
  for (int k = 1; k < P; ++k) {
    b->lstart[k] = lu;
    lu += fco_ea_lean_land_units(bme, ea_tables(p, (me - k + P) % P), vec, land_bytes);
  }
  b->lstart[P] = lu;
}

/* Thread 0, once all warps of the block are past their remote tiles (after a bar.sync): the
 * block's remote bags to each destination's counter (see the header: max, one fence, adds) —
 * none to a destination whose resolve failed in this block (bit 31 of sent, lean_resolve). */
__device__ __forceinline__ void lean_signal(const EaParams& p, const RankView& v, const LeanBlk* b,
                                            uint64_t base) {
  const int P = p.nranks, me = v.rank;
  if (threadIdx.x != 0 || b->tstart[P - 1] == 0) return;
  bool any = false;
  for (int q = 0; q < P - 1; ++q)
    if ((int32_t)b->sent[q] > 0) {
      red_max_relaxed_sys(v.peer_sig[(me + 1 + q) % P] + (size_t)me * FCO_SIG_SLOTS + kLeanSlot, base);
      any = true;
    }
  if (any) {
    fence_acq_rel_sys();
    for (int q = 0; q < P - 1; ++q)
      if ((int32_t)b->sent[q] > 0)
        red_add_relaxed_sys(v.peer_sig[(me + 1 + q) % P] + (size_t)me * FCO_SIG_SLOTS + kLeanSlot,
                            b->sent[q]);
  }
}

/* All warps of the block, each once, when it is past its remote tiles: the barrier (its remote
 * stores are issued before it; thread 0's fence orders them before the adds), the signal, the
 * profile's stamp 1. */
template <bool kProf>
__device__ __forceinline__ void lean_block_signal(const EaParams& p, const RankView& v, const LeanBlk* b) {
  __syncthreads();
  lean_signal(p, v, b, (v.epoch + 1) << 32);
  prof_stamp<kProf>(p, 1);
}

/* The low bits of this rank's presence value (see the header): (1 + my out's slot) << 1. */
__device__ __forceinline__ uint64_t lean_pres_bits(const LeanBlk* b, int32_t sym_bits) {
  return b->direct_me ? (uint64_t)(sym_bits & ~1) : 0u;
}

/* Source s's direct word in rank `at`'s LL half of call e (see the header: "Symmetric outs"),
 * and its value: an LL word (src/core/internal.h, rule (3)), so no earlier call's word, of any
 * op, equals it. */
__device__ __forceinline__ uint64_t* lean_direct_word(const RankView& v, int at, uint64_t e,
                                                      int s) {
  return (uint64_t*)(v.peer_data[at] + fco_ws_ll_offset(v.ws_bytes) +
                     (size_t)(e & 1) * fco_ws_ll_half_bytes(v.ws_bytes)) + s;
}
__device__ __forceinline__ uint64_t lean_direct_value(uint64_t e) {
  return (uint64_t)fco_ll_flag(e) << 32 | 1u;
}
/* One single-copy-atomic 64-bit store, as LL words need (internal.h, rule (3)). */
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* All lanes of a warp, the first remote tile of the block for position k (destination d) when
 * the rank stores into symmetric outs (b->cap): lane 0 waits for d's presence of this call (d
 * began it: its stream's earlier readers of out are done), whose low bits say whether d's out
 * is symmetric (slot kk − 1, (e << 32) | offset / 16 in d's kOutOffSlot, stored before the
 * presence with a fence); then d's out as this rank's table maps it, else `staging`. Kept in
 * b->rdst[k] (warps of the block may race here: they store the same value). Storing into d's
 * out, it first stores this rank's direct word at d (lean_direct_word), before the block's
 * stores and signal, so d's counter acquire sees it; staging stores none, and d lands this
 * rank's rows (a table without d's slot is no error: staging is correct). A wait that fails (a
 * timeout, or another error of this rank that stops waits) stages too, but sets bit 31 of
 * b->sent[k]: the block then signals none of its bags to d, so d times out with its own error —
 * a sibling block that resolved later may have stored directly and said so, and d would skip
 * this block's staged rows (keep them stale) with no error of its own. Not inlined: the pool
 * loop's registers stay as they are. */
__device__ __noinline__ char* lean_resolve(const RankView& v, LeanBlk* b, int k, int d,
                                           void* const* sym, char* staging) {
  char* r = staging;
  if ((threadIdx.x & 31) == 0) {
    const uint64_t* row = v.peer_sig[v.rank] + (size_t)d * FCO_SIG_SLOTS;
    const uint64_t e = v.epoch + 1;
    /* Of this call: d cannot finish it (and raise another call's values here) before this
     * block's signal, which follows. */
    bool failed = !wait_count(row + kPresenceSlot, e << 32, v, d, kPresenceSlot);
    if (!failed) {
      const uint64_t pres = ld_acquire_sys(row + kPresenceSlot);
      const int kk = (int)((pres >> 1) & 31);
      char* q = kk > 0 ? (char*)sym[(size_t)(kk - 1) * FCO_MAX_GPU_RANKS + d] : nullptr;
      /* d's block 0 writes the offset before the presence (a fence between), so this wait
       * passes at once; kept so that no block decides on another call's offset (session 56's
       * review, R3: a staging block's lift of the presence, since removed, could come first,
       * and the blocks of one sender then decided differently for d). */
      if (q) failed = !wait_count(row + kOutOffSlot, e << 32, v, d, kOutOffSlot);
      if (q && !failed) {
        const uint64_t off = __ldcg((const unsigned long long*)(row + kOutOffSlot));
        q += (off & 0xffffffffull) << 4;
        /* st.global.v4 into it (lean_tile): 16-byte aligned rows only */
        if (off >> 32 == e && (uintptr_t)q % 16 == 0) r = q;
      }
    }
    if ((b->cap & 2) && !failed) { /* FCO_FAULT_EA_RESOLVE: as if the wait timed out after all */
      record_error(v.err, FCO_ERR_TIMEOUT, FCO_OP_EMBEDDING_ALLTOALL, d, kPresenceSlot, e << 32,
                   e << 32);
      failed = true;
    }
    if (failed) {
      r = staging;
      atomicOr(&b->sent[k], 0x80000000u);
    }
    if (r != staging) st_relaxed_sys(lean_direct_word(v, d, e, v.rank), lean_direct_value(e));
    b->rdst[k] = r;
  }
  return (char*)__shfl_sync(0xffffffffu, (unsigned long long)r, 0);
}

/* Where position k's rows start: staging (d's workspace half, laid out as out_d) unless the rank
 * stores into symmetric outs (b->cap), then lean_resolve's answer. */
__device__ __forceinline__ char* lean_remote_base(const RankView& v, LeanBlk* b, const EaRank& rk,
                                                  int k, int d, char* staging) {
  if (!b->cap) return staging;
  char* r = *(char* volatile*)&b->rdst[k];
  return r ? r : lean_resolve(v, b, k, d, rk.sym, staging);
}

/* One warp tile (all lanes): tile number `tile` of the rank (k-major, then table, then chunk),
 * its bags counted for the block's signal when remote, pooled by lean_tile / lean_tile_any at
 * their final place. park() saves the caller's loop state to shared memory just before the
 * pooling (the compiler barriers force its reload after): lean_tile keeps the registers it has
 * in the lookup kernel. */
template <typename T, typename I, bool kMT, int kS, typename Park>
__device__ __forceinline__ void lean_one_tile(const EaParams& p, const LeanSrc& src, const EaRank& rk,
                                              const RankView& v, LeanBlk* b, uint32_t tile,
                                              bool aligned, Park park, bool fake = false) {
  const int P = p.nranks;
  const int me = v.rank, W = src.W;
  int k, t;
  int64_t i0;
  fco_ea_lean_decode(tile, b->tstart, b->tpk, W, &k, &t, &i0);
  const int d = (me + 1 + k) % P;
  const int nb = (int)min((int64_t)W, ea_batch(p, d) - i0);
  const bool remote = k < P - 1;
  /* kMT: t is a group of nt tables, ntab of them present */
  const int nt = kMT ? src.nt : 1;
  if constexpr (kMT) t *= nt;
  const int ntab = kMT ? min(nt, ea_tables(p, me) - t) : 1;
  /* counted before the stores: sent is read only after the signal's barrier */
  if (remote && (threadIdx.x & 31) == 0) atomicAdd(&b->sent[k], (uint32_t)(nb * ntab));
  const size_t half = (size_t)((v.epoch + 1) & 1) * fco_ws_half_bytes(v.ws_bytes);
  char* const rbase = remote ? (fake ? v.peer_data[me] + half
                                     : lean_remote_base(v, b, rk, k, d, v.peer_data[d] + half))
                             : rk.out;
  T* const dst = (T*)rbase + ((size_t)i0 * p.T + (size_t)(p.toff[me] + t)) * p.D;
  const int64_t row0 = p.row_base[rk.row_base0 + t];
  park();
  asm volatile("" ::: "memory");
  if (aligned) {
    lean_tile<T, I, kS, kLeanRows, kMT>(src, t, p.bstart[d] + i0, nb, row0,
                                                p.row_base[rk.row_base0 + t + 1] - row0, dst,
                                                (int64_t)p.T * p.D, nt, ntab,
                                                p.row_base + rk.row_base0);
  } else if constexpr (kMT) {
    for (int u = 0; u < ntab; ++u)
      lean_tile_any<T, I>(src, t + u, p.bstart[d] + i0, nb, p.row_base[rk.row_base0 + t + u],
                          p.row_base[rk.row_base0 + t + u + 1] - p.row_base[rk.row_base0 + t + u],
                          dst + (size_t)u * p.D, (int64_t)p.T * p.D);
  } else {
    lean_tile_any<T, I>(src, t, p.bstart[d] + i0, nb, row0, p.row_base[rk.row_base0 + t + 1] - row0,
                        dst, (int64_t)p.T * p.D);
  }
  asm volatile("" ::: "memory");
}

/* All warps of the block: pool this rank's tiles from order position j on (step nw: the rank's
 * warps), signal the block's remote bags once every warp is past the last remote position w. The
 * warp's loop state (j, whether it signalled) waits in shared memory while lean_tile runs (the
 * compiler barriers force the reload), so lean_tile keeps the registers it has in the lookup
 * kernel: with the state live across it, ptxas spilled 532 bytes at 64 registers. */
template <typename T, typename I, bool kProf, bool kMT, int kS>
__device__ __forceinline__ void lean_pool_all(const EaParams& p, const LeanSrc& src, const EaRank& rk,
                                              const RankView& v, LeanBlk* b, uint32_t j, bool aligned,
                                              bool fake) {
  const int P = p.nranks;
  uint32_t* const park = &b->park[threadIdx.x >> 5][0];
  bool signalled = false;
  for (;; j += p.blocks_per_rank * kWarps) {
    /* Lanes leave lean_tile at different times (their groups' bags differ). Reconverge here:
     * every lane has read the parked state (below) before any lane overwrites it in this
     * iteration (run ac50ff3 without a sync: a fast lane's next j reached a slow lane, the warp
     * split between tiles and hung in lean_tile's full-warp shuffles), and the warp reaches the
     * block barrier below converged. */
    __syncwarp();
    if (!signalled && j >= b->w) { /* every warp passes here exactly once */
      lean_block_signal<kProf>(p, v, b);
      signalled = true;
    }
    if (j >= b->tstart[P]) break;
    /* (every lane writes the same values, and reads back what it wrote or an equal value) */
    lean_one_tile<T, I, kMT, kS>(p, src, rk, v, b, fco_ea_lean_order(j, b->tstart[P - 1], b->w), aligned,
                             [&]() {
                               park[0] = j;
                               park[1] = (uint32_t)signalled;
                             }, kProf && fake);
    j = park[0];
    signalled = park[1] != 0;
  }
  __syncwarp(); /* converged into the landing's block barriers */
}

/* FCO_EA_LEAN_DYN: the next index of queue ctr, claimed by lane 0 (fco_ea_claim of the plan
 * header: the queue is a 64-bit counter (epoch << 32) + claims in the rank's own signal row, no
 * peer writes there, lifted to this call's epoch by each block's thread 0 before its warps
 * claim, or by a claim that gets there first — no reset between calls);
 * the other lanes get it by shuffle. */
__device__ __forceinline__ uint32_t lean_claim(unsigned long long* ctr, uint64_t base) {
  uint32_t i = 0xffffffffu;
  if ((threadIdx.x & 31) == 0) i = fco_ea_claim(ctr, base);
  return __shfl_sync(0xffffffffu, i, 0);
}

/* The claimed order (FCO_EA_LEAN_DYN; the default but where a launch has no more tiles than its
 * warps): warps claim tiles from two queues of the rank — its remote tiles and its local ones —
 * one atomic a tile, so blocks
 * finish within a tile of each other whatever their speed; a warp takes its preferred queue
 * (remote when pref_remote) until empty, then the other. Every warp sees the remote queue empty exactly once (a remote-first warp
 * before its local tiles, a local-first one at its end): there it meets the block barrier and
 * the block signals, as lean_pool_all at w. The loop state (queue, whether it switched,
 * signalled) is parked around the pooling as there. */
template <typename T, typename I, bool kProf, bool kMT, int kS>
__device__ __forceinline__ void lean_pool_dyn(const EaParams& p, const LeanSrc& src, const EaRank& rk,
                                              const RankView& v, LeanBlk* b, bool aligned,
                                              bool pref_remote, bool fake) {
  const int P = p.nranks;
  uint32_t* const park = &b->park[threadIdx.x >> 5][0];
  /* re-read at each use (shared memory): nothing but the parked state is held across a tile */
  auto base = [&]() { return (v.epoch + 1) << 32; };
  auto queue = [&](uint32_t q) {
    return (unsigned long long*)(v.peer_sig[v.rank] + (size_t)v.rank * FCO_SIG_SLOTS + kLeanQueueSlot + q);
  };
  uint32_t st = pref_remote ? 0u : 1u; /* bit 0: the queue (1 local); bit 1: switched; bit 2: signalled */
  for (;;) {
    __syncwarp(); /* as lean_pool_all: the parked state read by all lanes, converged */
    const uint32_t q = st & 1u;
    const uint32_t nR = b->tstart[P - 1];
    const uint32_t n = q ? b->tstart[P] - nR : nR;
    /* an empty queue (one rank, or nothing for the peers) is not claimed from at all: every
     * warp of the grid meets it at once, and one rank's remote-first blocks reached local
     * pooling only ~7 µs in (run 88b00dd-ea-short) */
    const uint32_t i = n == 0 ? 0u : lean_claim(queue(q), base());
    if (i >= n) {
      if (q == 0 && !(st & 4u)) {
        lean_block_signal<kProf>(p, v, b);
        st |= 4u;
      }
      if (st & 2u) break;
      st = (st ^ 1u) | 2u;
      continue;
    }
    lean_one_tile<T, I, kMT, kS>(p, src, rk, v, b, q ? nR + i : i, aligned, [&]() { park[0] = st; },
                             kProf && fake);
    st = park[0];
  }
  __syncwarp(); /* converged into the landing's block barriers */
}

/* All threads: this block's land units, part, part + bpr, ...: sources me−1, me−2, ... (see the
 * header). Not inlined: its copy holds more registers than the pooling loop needs, and inlined
 * ptxas spilled inside the pooling loops to make room. */
template <typename T>
__device__ __noinline__ void lean_land(const EaParams& p, const EaRank& rk, const RankView& v,
                                       const LeanBlk& b, size_t half, uint64_t base, uint32_t part,
                                       uint32_t bpr) {
  const int P = p.nranks, me = v.rank;
  const int64_t bme = ea_batch(p, me);
  const size_t vec = (size_t)p.D * sizeof(T);
  int k = 1;
  for (int64_t lu = part; lu < b.lstart[P]; lu += bpr) {
    while (lu >= b.lstart[k + 1]) ++k;
    const int s = (me - k + P) % P;
    const int64_t rem = lu - b.lstart[k], units = b.lstart[k + 1] - b.lstart[k];
    const int Ts = ea_tables(p, s);
    const bool data = bme > 0 && Ts > 0;
    bool done = true, direct = false;
    if (threadIdx.x == 0) {
      const uint64_t* row = v.peer_sig[me] + (size_t)s * FCO_SIG_SLOTS;
      if (rem == 0) done = wait_count(row + kPresenceSlot, base, v, s, kPresenceSlot);
      if (done && data) done = wait_count(row + kLeanSlot, base + (uint64_t)(bme * Ts), v, s, kLeanSlot);
      /* my out symmetric: did s store into it (its direct word of this call)? then nothing to
       * copy. Read after the counter's acquire: a block of s that stored into my out stored
       * the word before its signal's release. Not the presence (or any slot of s's row): s may
       * already run its next call and have rewritten it (see the header). */
      if (done && data && b.direct_me) direct = ld_acquire_sys(b.dword + s) == b.dval;
    }
    /* thread 0's acquire, then bar.sync: every thread's reads of the unit come after */
    if (__syncthreads_or(!done)) break; /* timeout or another error: give up */
    if (b.direct_me) direct = __syncthreads_or(direct);
    if (data && !direct) {
      int64_t r0, r1;
      fco_ea_lean_land_rows(bme, units, rem, &r0, &r1);
      if (r1 > r0)
        copy_cols_any<kLeanLandUnroll>(rk.out, v.peer_data[me] + half, r0, r1, (size_t)p.T * vec,
                      (size_t)p.toff[s] * vec, (size_t)Ts * vec);
    }
  }
}

/* kOne: one local rank (the nccl transport): its arguments are addressed in the parameter bank
 * (x.s[0], p.r[0]), which lean_tile reads as operands, as in the lookup kernel. Several (local):
 * the block's rank's LeanSrc is copied to shared memory (more registers: a few more spills; the
 * local transport is for correctness). kMinB: 3 (80 registers, the default) or 4 blocks a SM
 * (FCO_EA_LEAN_BLOCKS). kProf: FCO_EA_PROFILE's stamps (start, the block's signal, pool tiles
 * done, landed), a variant so that the default kernel has none of it. kIdx: 0 = any index type
 * and alignment (a branch each); 32 / 64 = one local rank whose pointers are aligned and whose
 * indices are int32 / int64 — lean_tile alone, one instance: at 64 registers (4 blocks a SM) the
 * branches' code cost ~90 B of spills, this ~4 (ptxas). kDyn: FCO_EA_LEAN_DYN's
 * queues (lean_pool_dyn; the blocks on the first x.split % of the SMs take remote tiles first). */
template <typename T, bool kOne, int kMinB, bool kProf, bool kMT, bool kDyn, int kS, int kIdx>
__global__ void __launch_bounds__(kThreads, kMinB)
    ea_kernel_fused_lean(const __grid_constant__ EaParams p, const __grid_constant__ LeanFusedArgs x) {
  __shared__ RankView v;
  __shared__ LeanBlk b;
  __shared__ LeanSrc src_sh;
  const uint32_t li = kOne ? 0 : blockIdx.x / p.blocks_per_rank;
  const uint32_t part = blockIdx.x - li * p.blocks_per_rank;
  const EaRank& rk = p.r[li];
  const LeanSrc& src = kOne ? x.s[0] : src_sh;
  fco_dev_rank_t* dev = rk.dev;
  if (threadIdx.x == FCO_MAX_GPU_RANKS + 1) {
    if (!kOne) src_sh = x.s[li];
    lean_blk(p, rk.rank, x.s[li].W, kMT ? x.s[li].nt : 1, x.land_bytes, x.mix,
             kProf && x.fake ? 0 : rk.sym_bits, &b);
    if (b.cap && x.fault_rank == rk.rank && (part & 1)) b.cap |= 2;
  }
  load_rank_view(dev, &v, FCO_OP_EMBEDDING_ALLTOALL); /* ends with a barrier: b is filled */
  const uint64_t e = v.epoch + 1;
  const int P = p.nranks, me = v.rank;
  if (!ea_view_ok(p, v, rk.rank)) {
    epoch_end(dev, e, p.blocks_per_rank);
    return;
  }
  /* Halves at 0 and ws/2 whatever this call's size: the workspace rule (src/core/internal.h). */
  const size_t half = (size_t)(e & 1) * fco_ws_half_bytes(v.ws_bytes);
  const uint64_t base = e << 32;
  const uint32_t bpr = p.blocks_per_rank;
  if (threadIdx.x == 0) { /* for lean_land (the same thread) */
    b.dword = lean_direct_word(v, me, e, 0);
    b.dval = lean_direct_value(e);
  }
  if (part == 0 && (int)threadIdx.x < P - 1) {
    /* presence, its low bits (1 + my out's symmetric slot) << 1 (the offset before it) */
    uint64_t* row = v.peer_sig[(me + 1 + threadIdx.x) % P] + (size_t)me * FCO_SIG_SLOTS;
    if (b.direct_me) {
      /* epoch-tagged, lifted by max: other ops flag this slot (the host announces only
       * offsets that are multiples of 16 below 2^36) */
      red_max_relaxed_sys(row + kOutOffSlot, base | ((uint64_t)rk.out_off >> 4));
      fence_acq_rel_sys();
    }
    red_max_relaxed_sys(row + kPresenceSlot, base | lean_pres_bits(&b, rk.sym_bits));
  }

  const uint32_t j0 = part * kWarps + (threadIdx.x >> 5);
  const bool aligned = x.aligned[li] != 0;
  /* FCO_EA_PROFILE=2 (diagnostic, kProf only): remote tiles go to this rank's own workspace half
   * (same offsets, local HBM) — the peers land garbage — to time pooling without NVLink stores */
  const bool fake = kProf && x.fake != 0;
  prof_stamp<kProf>(p, 0);
  bool pref_remote = false; /* claimed order: this block's SM takes remote tiles first */
  if constexpr (kDyn) {
    /* Lift both queues to this call's epoch once a block, before its warps claim: otherwise
     * the first claim of nearly every warp finds the previous epoch, adds in vain, lifts with
     * atomicMax and retries — ~3 same-address atomics a warp where 1 does (fco_ea_claim still
     * lifts if it gets there first). Monotonic: a max with this call's base never undoes a
     * claim of it, and no later call's claims can precede this kernel on the rank's stream. */
    if (threadIdx.x == 0) {
      unsigned long long* qs =
          (unsigned long long*)(v.peer_sig[me] + (size_t)me * FCO_SIG_SLOTS + kLeanQueueSlot);
      atomicMax(qs, (unsigned long long)base);
      atomicMax(qs + 1, (unsigned long long)base);
    }
    __syncthreads();
    uint32_t smid, nsmid;
    asm("mov.u32 %0, %%smid;" : "=r"(smid));
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsmid));
    pref_remote = (uint64_t)smid * 100 < (uint64_t)x.split * nsmid;
  }
  /* the pooling loop for index type I (of the tag) and alignment al */
  auto pool = [&](auto tag, bool al) {
    using I = decltype(tag);
    if constexpr (kDyn) {
      lean_pool_dyn<T, I, kProf, kMT, kS>(p, src, rk, v, &b, al, pref_remote, fake);
    } else {
      lean_pool_all<T, I, kProf, kMT, kS>(p, src, rk, v, &b, j0, al, fake);
    }
  };
  if constexpr (kIdx == 64) pool(int64_t{}, true);
  else if constexpr (kIdx == 32) pool(int32_t{}, true);
  else if (rk.idx64) pool(int64_t{}, aligned);
  else pool(int32_t{}, aligned);
  prof_stamp<kProf>(p, 2);

  lean_land<T>(p, rk, v, b, half, base, part, bpr);
  prof_stamp<kProf>(p, 3);
  epoch_end(dev, e, bpr);
}

/* Rows a bag on local rank i, on average over its tables and the global batch (0: none). */
inline double lean_mean_len(const EaParams& p, int i) {
  const int Tr = ea_tables(p, p.r[i].rank);
  return Tr > 0 && p.B > 0 ? (double)p.r[i].num_indices / ((double)Tr * (double)p.B) : 0.0;
}

/* Lanes a bag: the 16-byte units of a row, rounded up to a power of two (agreed values; a rank
 * whose pointers are not 16-byte aligned pools by lean_tile_any, which ignores G — so not
 * p.lanes, which follows the element path there). */
inline int lean_lanes(const EaParams& p) {
  const int units = (int)((int64_t)p.D * p.esize / 16);
  int G = 1;
  while (G < units) G *= 2;
  return G;
}

/* fco_last_plan: what this thread's last successful launch of the lean fused kernel ran (its
 * variant, W and nt over the local ranks, the symmetric-out roles, the grid). */
struct LeanNote {
  bool dyn, mt, prof, fake, unaligned;
  int idx, stages, min_blocks, split, mix, nranks, num_local, per_sm;
  PlanSpan W, nt;
  int send, out; /* local ranks storing into peers' symmetric outs / whose out is symmetric */
  long long bpr;
};
thread_local LeanNote t_note;

/* Launch with p0's parameters; p0.blocks_per_rank is set to the grid's blocks a rank. */
template <typename T, bool kOne, int kMinB, bool kProf, bool kMT = false, bool kDyn = false,
          int kS = kLeanStages, int kIdx = 0>
fco_result_t launch_t(EaParams& p0, int num_local, void* stream, char* err, int nt_knob = 1) {
  constexpr auto kern = ea_kernel_fused_lean<T, kOne, kMinB, kProf, kMT, kDyn, kS, kIdx>;
  auto lean_smem = [](int G, int W) { return fco_ea_lean_smem_s(G, W, kS); };
  int device = 0, sms = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  const int G = lean_lanes(p0);
  /* the most any G, W and nt need (kMT: W · nt ≤ kLeanMaxTileBags, so nt·(W + 1) ≤ that + 32) */
  const int most = (int)(lean_smem(1, kLeanMaxTileBags) + (size_t)kWarps * 32 * 4);
  if ((res = opt_in_smem<kern>(device, most, err)) != FCO_OK) return res;
  int per_sm = 0;
  cudaError_t ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads,
                                                                 lean_smem(G, kLeanMaxTileBags));
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  /* W per local rank from the warps each can have resident (the GPU shared by num_local). */
  const int64_t warps = (int64_t)sms * (per_sm > 0 ? per_sm : 1) * kWarps / num_local;
  static thread_local LeanFusedArgs x;
  memset(&x, 0, sizeof x);
  const fco_ea_knobs_t& kn = *p0.knobs;
  x.land_bytes = land_kib(kn) * 1024;
  const long long mix = kn.lean_mix;
  x.mix = (int32_t)(mix < 0 ? 0 : mix > 100 ? 100 : mix);
  /* run 07fcd7a (2×H200, bags of 1–8 rows): 60 within 3 % of the best of 50..80, both dtypes */
  const long long split = kn.lean_split;
  x.split = (int32_t)(split < 0 ? 0 : split > 100 ? 100 : split);
  x.fake = kProf && kn.profile == 2;
  x.fault_rank = (int32_t)kn.fault_resolve; /* test hook (read_knobs): -1 = none */
  int lg = 0;
  while ((1 << lg) < G) lg++;
  int slots = 2; /* staged offsets a warp, the most of any local rank: nt · (W + 1) */
  for (int i = 0; i < num_local; i++) {
    const EaRank& rk = p0.r[i];
    const int Tr = ea_tables(p0, rk.rank);
    const double mean_len = lean_mean_len(p0, i);
    LeanSrc& s = x.s[i];
    s.weight = rk.weight;
    s.indices = rk.indices;
    s.offsets = rk.offsets;
    s.psw = rk.psw;
    s.nbad = nullptr;
    s.dev = rk.dev;
    s.num_indices = rk.num_indices;
    s.B = p0.B;
    s.table0 = p0.toff[rk.rank];
    s.D = p0.D;
    s.lg_G = lg;
    s.mean = p0.mean;
    /* kMT: nt tables a tile (a power of two ≤ the groups of a warp and ≤ T_r), the groups of a
     * table 32/G/nt, W sized for them, its staged offsets nt·(W + 1) ≤ kLeanMaxTileBags + nt */
    int nt = 1;
    if (kMT)
      while (nt * 2 <= nt_knob && nt * 2 <= 32 / G && nt * 2 <= Tr) nt *= 2;
    s.nt = nt;
    s.W = lean_tile_bags(kn, G * nt, mean_len, p0.B, Tr > 0 ? (Tr + nt - 1) / nt : 1, warps);
    while (kMT && s.W > 32 / G / nt && (int64_t)s.W * nt > kLeanMaxTileBags) s.W /= 2;
    if (s.nt * (s.W + 1) > slots) slots = s.nt * (s.W + 1);
    x.aligned[i] = (uintptr_t)rk.weight % 16 == 0 && (uintptr_t)rk.out % 16 == 0;
  }
  const size_t smem = lean_smem(G, slots - 1); /* lean_smem(G, W) holds W + 1 offsets a warp */
  ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, smem);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int64_t bpr = (int64_t)sms * per_sm / num_local;
  if (bpr < 1)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "fco_embedding_alltoall: %d blocks a SM on %d SMs cannot give each of %d ranks one "
                "block (lean fused kernel)", per_sm, sms, num_local);
  p0.blocks_per_rank = (uint32_t)bpr;
  const unsigned grid = (unsigned)(bpr * num_local);
  kern<<<grid, kThreads, smem, (cudaStream_t)stream>>>(p0, x);
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    char w[160];
    snprintf(w, sizeof w, "fco_embedding_alltoall: lean fused launch of %u blocks x %d threads, %zu B smem",
             grid, kThreads, smem);
    return cuda_fail(err, ce, w);
  }
  LeanNote& n = t_note;
  n = LeanNote{};
  n.dyn = kDyn;
  n.mt = kMT;
  n.prof = kProf;
  n.fake = x.fake != 0;
  n.idx = kIdx;
  n.stages = kS;
  n.min_blocks = kMinB;
  n.split = x.split;
  n.mix = x.mix;
  n.nranks = p0.nranks;
  n.num_local = num_local;
  n.per_sm = per_sm;
  n.bpr = bpr;
  for (int i = 0; i < num_local; i++) {
    n.W.add(x.s[i].W);
    n.nt.add(x.s[i].nt);
    if (!x.aligned[i]) n.unaligned = true;
    /* as lean_blk reads them (FCO_EA_PROFILE=2 passes 0) */
    const int32_t bits = kProf && x.fake ? 0 : p0.r[i].sym_bits;
    n.send += bits & 1;
    n.out += (bits >> 1) != 0;
  }
  return FCO_OK;
}

template <typename T>
fco_result_t run_t(EaParams& p, int num_local, void* stream, char* err) {
  /* 4 blocks a SM possible for one local rank with 16-byte aligned weight and out: the kernel
   * specialized to its index type (kIdx; ptxas: ~4 B of spills at 64 registers instead of ~90) */
  const bool spec = num_local == 1 && (uintptr_t)p.r[0].weight % 16 == 0 && (uintptr_t)p.r[0].out % 16 == 0;
  /* FCO_EA_LEAN_TABLES = nt > 1: the kMT variant (3 blocks a SM, no profile); experimental */
  const long long nt = p.knobs->lean_tables;
  if (nt > 1) {
    p.prof = nullptr;
    const int n = (int)(nt > 32 ? 32 : nt);
    return num_local == 1 ? launch_t<T, true, 3, false, true>(p, 1, stream, err, n)
                          : launch_t<T, false, 3, false, true>(p, num_local, stream, err, n);
  }
  /* FCO_EA_LEAN_DYN: the kDyn variant (claimed tiles, remote first on FCO_EA_LEAN_SPLIT % of the
   * SMs), by default (unset or -1) everywhere but where FCO_EA_LEAN_MIX is 1..100 (which spreads
   * the static order; until session 41 it was read here as a 0 / 1 flag, so any other value was
   * warned about and left the claimed order on: the mix ran only at 1). Where bags are short it
   * lets NVLink pushes and HBM-bound pooling run at once (run 1fc5c61's timeline: 65536/8/64/8 bf16
   * pushed 325 GB/s with all SMs on remote tiles, HBM at 2.6 TB/s; 1.1–1.3× faster on bags of 1–4
   * rows, run 07fcd7a). Until session 12 the static order ran bags of > 16 rows (Zipf 1.0–1.3×
   * slower claimed, run 07fcd7a) — measured with the ring misaligned (ea_ring); with it aligned, at
   * P = 1 (run 6cc8f88, 4 blocks a SM) the claimed order pools long uniform bags within 0.5 % of
   * the static one and Zipf bags 5–7 % faster (bf16 210.6 vs 222.3 µs, f32 342.0 vs 366.3), so it
   * is the default there too; the P = 2 comparison on two GPUs is still to be made. Static by
   * default also where no local rank has more tiles than the warps of 3 blocks a SM (the kernels'
   * fewest; fco_ea_few_tiles: every warp pools at most one tile, the claims balance nothing and
   * cost a fixed 0.3–4 µs). A local choice (the protocol is the same): ranks may differ. 1 / 0:
   * always / never. */
  long long dyn = p.knobs->lean_dyn;
  if (dyn < 0 && p.knobs->lean_mix > 0) dyn = 0;
  if (dyn < 0) {
    int device = 0, sms = 0;
    const fco_result_t res = current_device(err, &device, &sms);
    if (res != FCO_OK) return res;
    bool few = true;
    for (int i = 0; i < num_local; i++)
      if (!fco_ea_few_tiles(ea_tables(p, p.r[i].rank), p.bstart, p.nranks, lean_lanes(p),
                            (int64_t)sms * 3 * kWarps / num_local))
        few = false;
    dyn = few ? 0 : 1;
  }
  bool longer = true; /* every local rank's bags hold > kLeanFourMinLen rows on average */
  for (int i = 0; i < num_local; i++)
    if (lean_mean_len(p, i) <= kLeanFourMinLen) longer = false;
  /* FCO_EA_LEAN_BLOCKS: the kernel compiled for 4 blocks a SM (64 registers) or 3 (80 registers,
   * 0–36 B of spills). Default (unset or -1): 4 where the kIdx kernel applies (spec) for the
   * static order, and for the claimed one where bags hold > kLeanFourMinLen rows; else 3.
   * Static: run c32d1a1 (2×H200, P = 2): 4 blocks pooled the long-bag workloads 2–7 % faster
   * (bf16 16384/8/128/32 292.0 vs 312.7 µs, Zipf 278.0 vs 296.7; f32 563.9 vs 571.3, Zipf 468.0
   * vs 489.9; 4096/16/128/64 bf16 −2.7 %, f32 +1.5 %). Claimed: run 65443c9 (one H200, P = 1,
   * the rings aligned): 4 blocks 2–7 % faster where bags hold ≥ 8 rows (65536/8/64/8 bf16 167.5
   * vs 174.9, f32 293.1 vs 304.6; Zipf f32 344.0 vs 368.5), 1–7 % slower where they hold ≤ 4.
   * The generic 64-register kernel (not spec) spills ~0.1 KB and was 0–12 % slower (runs
   * ac50ff3, 07fcd7a). */
  const long long blocks = p.knobs->lean_blocks;
  const bool stages4 = p.knobs->lean_stages == 4;
  const bool four = blocks == 4 || (blocks < 0 && (dyn == 0 || longer) && spec && !p.prof && !stages4);
  /* FCO_EA_LEAN_STAGES = 4 (experimental): a 4-stage cp.async ring (65 KB a block, still 3
   * blocks a SM) — a third more rows in flight a warp, against the 24 warps a SM that 80
   * registers leave (impl 0's lookup runs 32 at 64: at P = 1 it pools 10 % faster, ncu run
   * 27eeceb). The 3-block kernels without the profile. */
  const bool deep = stages4 && !four && !p.prof;
  if (dyn == 1) {
    if (num_local != 1) {
      p.prof = nullptr;
      return deep ? launch_t<T, false, 3, false, false, true, 4>(p, num_local, stream, err)
                  : launch_t<T, false, 3, false, false, true>(p, num_local, stream, err);
    }
    if (deep) return launch_t<T, true, 3, false, false, true, 4>(p, 1, stream, err);
    if (p.prof) return launch_t<T, true, 3, true, false, true>(p, 1, stream, err);
    if (four && spec)
      return p.r[0].idx64 ? launch_t<T, true, 4, false, false, true, kLeanStages, 64>(p, 1, stream, err)
                          : launch_t<T, true, 4, false, false, true, kLeanStages, 32>(p, 1, stream, err);
    return four ? launch_t<T, true, 4, false, false, true>(p, 1, stream, err)
                : launch_t<T, true, 3, false, false, true>(p, 1, stream, err);
  }
  if (p.prof && (num_local != 1 || four)) p.prof = nullptr;
  if (p.prof) return launch_t<T, true, 3, true>(p, 1, stream, err);
  if (deep)
    return num_local == 1 ? launch_t<T, true, 3, false, false, false, 4>(p, 1, stream, err)
                          : launch_t<T, false, 3, false, false, false, 4>(p, num_local, stream, err);
  if (num_local == 1 && four && spec)
    return p.r[0].idx64 ? launch_t<T, true, 4, false, false, false, kLeanStages, 64>(p, 1, stream, err)
                        : launch_t<T, true, 4, false, false, false, kLeanStages, 32>(p, 1, stream, err);
  if (num_local == 1)
    return four ? launch_t<T, true, 4, false>(p, 1, stream, err)
                : launch_t<T, true, 3, false>(p, 1, stream, err);
  return four ? launch_t<T, false, 4, false>(p, num_local, stream, err)
              : launch_t<T, false, 3, false>(p, num_local, stream, err);
}

}  // namespace

bool fused_lean_applies(const EaParams& p) {
  const int64_t row = (int64_t)p.D * p.esize, lim = (int64_t)1 << 31;
  if (!p.knobs->lean || row % 16 != 0 || row > 512) return false;
  for (int q = 0; q < p.nranks; q++) {
    const int64_t Tq = ea_tables(p, q);
    if (Tq > kLeanMaxTables || Tq * (p.B + p.nranks) >= lim) return false;
  }
  return true;
}

/* Declared in embedding_alltoall.cu. The words of t_note, e.g. " kernel fused lean claimed
 * split=60 idx32 W=64 minB=4 direct=send+out, 528 blocks/rank (4/SM)": claimed (kDyn; split: %
 * of the SMs taking remote tiles first) or static (mix: FCO_EA_LEAN_MIX); tables (kMT), idx32 /
 * idx64 (kIdx), unaligned (a rank pools by lean_tile_any), stages (kS, when not the default);
 * W (bags a warp tile), minB (kMinB), prof (kProf); direct: send = stores into the symmetric
 * outs its peers announce, out = its out is symmetric (capable peers store into it, nothing is
 * landed from them), staged = neither, (k/n) where k of the n local ranks do; the grid, and
 * the blocks an SM holds at its shared memory. */
void fused_lean_plan_append(char* plan) {
  const LeanNote& n = t_note;
  char w[32], nt[32];
  if (n.dyn) fco_plan_append(plan, " kernel fused lean claimed split=%d", n.split);
  else if (n.mix > 0) fco_plan_append(plan, " kernel fused lean static mix=%d", n.mix);
  else fco_plan_append(plan, " kernel fused lean static");
  if (n.mt) fco_plan_append(plan, " tables=%s", n.nt.str(nt, sizeof nt));
  if (n.idx) fco_plan_append(plan, " idx%d", n.idx);
  if (n.unaligned) fco_plan_append(plan, " unaligned");
  if (n.stages != kLeanStages) fco_plan_append(plan, " stages=%d", n.stages);
  fco_plan_append(plan, " W=%s minB=%d%s", n.W.str(w, sizeof w), n.min_blocks,
                  n.prof ? (n.fake ? " prof=2" : " prof") : "");
  if (n.nranks > 1) {
    auto role = [&](char* b, size_t sz, const char* name, int k) {
      if (k == n.num_local) snprintf(b, sz, "%s", name);
      else snprintf(b, sz, "%s(%d/%d)", name, k, n.num_local);
      return b;
    };
    char a[24], b[24];
    if (n.send && n.out)
      fco_plan_append(plan, " direct=%s+%s", role(a, sizeof a, "send", n.send),
                      role(b, sizeof b, "out", n.out));
    else if (n.send) fco_plan_append(plan, " direct=%s", role(a, sizeof a, "send", n.send));
    else if (n.out) fco_plan_append(plan, " direct=%s", role(b, sizeof b, "out", n.out));
    else fco_plan_append(plan, " staged");
  }
  fco_plan_append(plan, ", %lld blocks/rank (%d/SM)", n.bpr, n.per_sm);
}

fco_result_t run_fused_lean(EaParams& p, fco_dtype_t dt, int num_local, void* stream, char* err) {
  switch (dt) {
    case FCO_F32: return run_t<float>(p, num_local, stream, err);
    case FCO_F16: return run_t<__half>(p, num_local, stream, err);
    case FCO_BF16: return run_t<__nv_bfloat16>(p, num_local, stream, err);
    default: return fail(err, FCO_ERR_UNSUPPORTED, "fco_embedding_alltoall: dtype %d", (int)dt);
  }
}

}  // namespace ea
}  // namespace fco

/*
 * embedding_alltoall_lean.cuh — the lean streaming lookup (variant (e) of
 * bench/probe/ea_gather_probe.cu): the probe's (d2) CSR streaming (warp tiles sized to the work, a
 * per-thread cp.async ring) with the library's pooling semantics — what pool_tile_stream
 * (embedding_alltoall_pool.cuh) was meant to be: that port of d2 ran 1.3–2.5× slower than d2 in
 * the probe (run 80deada; docs/embedding_alltoall_history.md). The warp tile (lean_tile, and
 * lean_tile_any for unaligned pointers), the lookup kernel ea_kernel_lean_stream and the launch
 * shape (lean_smem, lean_tile_bags). Included by embedding_alltoall.cu (impl 0's lookup), by
 * embedding_alltoall_fused_lean.cu (impl 1) and by the probe, after embedding_alltoall_pool.cuh's
 * helpers (ea_ring, g_ea_dummy, Unit; cp_async.cuh's copies).
 * Status: the default lookup of impl 0 (one launch per local rank) and, through lean_tile, the
 *   pooling of impl 1's ea_kernel_fused_lean, wherever rows are whole 16-byte units of ≤ 512
 *   bytes (FCO_EA_LEAN=0: the previous kernels). First run on a GPU in c09f78d (the probe's (e)
 *   rows: within 2–12 % of d2; as impl 0's lookup 1.1–2.8× faster than the kB paths on all 14
 *   fco-bench workloads); tests pass on local and nccl since 3cf8337.
 *
 * Work: a warp takes tiles of W bags of one table (tile j: table t = j / tpt, samples [(j mod tpt)
 *   · W, +W), tpt = ⌈B / W⌉) — in the lookup kernel j = warp, warp + warps, ... or claimed from a
 *   queue (kDyn, see ea_kernel_lean_stream). It stages the tile's W + 1 offsets in shared memory
 *   with one coalesced load, as int32 positions relative to the tile's first, checking them on the
 *   way (each within [0, num_indices], none below its predecessor, the tile's span < 2^31: exactly
 *   "every bag of the tile valid"). Each lane group (G lanes, one 16-byte unit of the row each; RW
 *   = 32/G groups) streams one contiguous share of the tile's positions: where every bag of the
 *   tile holds the same rows, group r takes bags [r · W/RW, +W/RW); otherwise (ragged bags) it
 *   takes the rows [r · span / RW, (r + 1) · span / RW) (span = the tile's rows) — equal shares of
 *   rows whatever the bags' lengths (session 38: with equal shares of bags a warp ran as long as
 *   its longest share, and ragged bags cost the lookup up to 50 %, run
 *   2026-12-04_nvidia-h200_c174235-ragged; lean_tile says more). The share is streamed in chunks of
 *   kU rows, chunk i copied by cp.async into stage i mod kS of a per-thread ring (a thread reads
 *   only the slots it copied itself: no barrier), chunk i + kS − 1 issued before chunk i is waited
 *   for, indices one chunk ahead of that. A bag is stored when the stream crosses its end offset
 *   (empty bags as zeros). In a ragged tile a group stores the bags that end inside its share; a
 *   bag that began in an earlier share (its head) is put aside (hacc) and completed after the
 *   stream: the part each group summed of the bag it ends in (its tail) goes through a segmented
 *   scan over the groups (log2 RW rounds of shuffles), and the group of the head adds what the
 *   groups before it summed. Positions inside the tile are 32-bit; a row's address is the table's
 *   plus a 32-bit index times the row's bytes (one IMAD.WIDE: a table of ≥ 2^32 rows goes the plain
 *   way below); 64-bit: a chunk's index (and weight) address.
 * Semantics (pool_tile's): per-sample weights (fmaf(w, x, acc) in bag order within a group's
 *   share; a bag that spans shares is the sum of its parts, earlier parts first — exact for the
 *   tests' integer values, within rounding otherwise), mean (acc / len
 *   once at the store, len = hi − lo counting skipped rows), int32 or int64 indices and offsets
 *   (template I). An index outside [0, rows_t) is skipped: its copy reads nothing and lands as
 *   zeros, its weight's as 0 (cp.async's ignore-src), so it adds nothing to the sum whatever its
 *   own weight (NaN, Inf); rows past a share's end land the same way, so every ring slot is
 *   summed without a valid bit; counted in nbad[0] when its chunk is issued (one compare a
 *   chunk) and, with dev set, reported as the library reports it (record_error: first wins; the
 *   index reloaded there for the report). A tile with a bad bag (or a span ≥ 2^31, or a table of
 *   ≥ 2^32 rows) is pooled by a plain bag-by-bag loop with 64-bit positions (warp vote over the
 *   staging checks); there a bad bag is stored as zeros and counted in nbad[1], a bad index
 *   skipped and counted as above; with dev set both are reported (FCO_EA_BAD_OFFSETS: position
 *   = the bag's offsets entry, value = its end; FCO_EA_BAD_INDEX: position, index).
 * Weights: the kU weights of a chunk are copied with the rows (4-byte cp.async, lane gl copies
 *   row u when u mod G = gl) into a per-group ring of kS · kU floats, read by all G lanes after a
 *   __syncwarp of the group (and a second one before a stage is refilled): no registers held for
 *   them, 48 bytes a group (6 KB a block at G = 2) instead of 48 a thread.
 * Shared memory (dynamic): ring [kS][kU][kThreads] uint4, then the offsets [kWarps][W + 1] int32,
 *   then (weights only) [kThreads / G][kS][kU] float.
 * The fused kernel ea_kernel_fused (impl 1 with FCO_EA_LEAN=0) cannot take this: its tiles
 *   (agreed by every rank) give a lane group ~4 bags, too few to fill the ring at small L. So
 *   ea_kernel_fused_lean counts bags, not tiles, and runs these warp tiles (lean_tile).
 * Launch: kThreads threads, __launch_bounds__(kThreads, 4) (64 registers; nvcc 13.0, the
 *   lookup kernels: no spills in session 43 — the claimed order's 12 bytes for 16-bit tables with
 *   int64 indices went with lean_tile's kWIdx; since session 47's kPool those two claimed kernels
 *   store 8 and load 12 bytes of spills, at the kernel's start and the tile loop's head), any
 *   grid; W a multiple of RW,
 *   T ≤ kLeanMaxTables, T · ⌈B / W⌉ + warps < 2^31, rows of ≤ 512 bytes that are whole 16-byte
 *   units, 16-byte aligned, G = a power of two ≥ the row's units.
 */
#ifndef FCO_CUDA_EMBEDDING_ALLTOALL_LEAN_CUH_
#define FCO_CUDA_EMBEDDING_ALLTOALL_LEAN_CUH_

#include <stdint.h>

#include <type_traits>

#include "../ops/embedding_alltoall_plan.h"
#include "embedding_alltoall_pool.cuh"

namespace fco {
namespace ea {

constexpr int kLeanMaxTables = FCO_EMBEDDING_MAX_TABLES; /* row_base by value: ≤ 8 KB */
constexpr int kLeanMinBlocks = 4;

/* What a warp tile reads and where it reports, for one local rank: the lookup kernel's
 * LeanParams and the fused kernel's per-rank arguments (embedding_alltoall_fused_lean.cu). */
struct LeanSrc {
  const void* weight;        /* T rows; table t = rows [row_base[t], row_base[t + 1]) */
  const void* indices;       /* I [num_indices] */
  const void* offsets;       /* I [T · B + 1]; bag (b, t) = k = t · B + b */
  const float* psw;          /* per-sample weights [num_indices], or nullptr */
  unsigned long long* nbad;  /* [0] indices skipped, [1] bags pooled as empty (bad offsets),
                                or nullptr */
  fco_dev_rank_t* dev;       /* bad data reported to dev->err (the library), or nullptr */
  int64_t num_indices, B;
  int32_t table0;            /* global id of table 0 (reports) */
  int32_t D, lg_G, mean;
  int32_t W;                 /* bags of a warp tile (at most; the smem), a multiple of 32/G */
  int32_t nt;                /* tables a warp tile (FCO_EA_LEAN_TABLES, the fused kernel's kMT) */
};
struct LeanParams : LeanSrc {
  void* out;                 /* bag (b, t) at out + b · stride + t · D (elements) */
  unsigned int* queue;       /* kDyn: the tile queue (fco_dev_rank_t.lookup_q), 0 between
                                launches */
  int64_t stride;
  int64_t row_base[kLeanMaxTables + 1];
  int32_t T;
  uint32_t ntiles, nw;       /* kDyn: the launch's tiles (T · tiles a table) and warps */
};

/* ---- the launch shape of both lean kernels: src/ops/embedding_alltoall_plan.h (plain C, tested
 * on the CPU by tests/test_ea_plan.c) ------------------------------------------------------- */
constexpr int kLeanStages = FCO_EA_LEAN_STAGES, kLeanRows = FCO_EA_LEAN_ROWS,
              kLeanMaxTileBags = FCO_EA_LEAN_MAX_TILE_BAGS;
static_assert(FCO_EA_LEAN_THREADS == kThreads, "the plan's block size");
__host__ inline size_t lean_smem(int G, int W) { return fco_ea_lean_smem(G, W); }
/* The chunks of kLeanRows rows a lane group's share of a tile should hold at the mean bag length
 * (fco_ea_lean_tile_bags): 16 where bags hold ≥ 16 rows on average, 8 where ≥ 8, else 4 —
 * larger tiles spread the per-tile work (offset staging, the ring's fill and drain, the fused
 * kernel's tile decode) over more rows. Run 731ced0 (one H200, P = 1, the rings aligned; µs
 * chunks 4 → 16 / 8): Zipf bf16 lookup 224.7 → 213.0, fused 238.0 → 223.1; Zipf f32 392.6 →
 * 351.4, fused 417.1 → 365.8; 65536/8/64/8 (chunks 8) f32 lookup 290.4 → 279.1, fused 308.3 →
 * 286.8, bf16 fused 172.3 → 166.9; long uniform bags within ±1 %; bags of ≤ 4 rows were slower
 * with more (131072/8/32/4 bf16 lookup 133.2 → 138.0 at 8), so they keep 4. FCO_EA_LEAN_CHUNKS
 * (1..64) overrides. A local choice of each rank, by both lean kernels (read once a call:
 * fco_ea_knobs_t). */
__host__ inline int lean_tile_bags(const fco_ea_knobs_t& k, int G, double mean_len, int64_t B,
                                   int T, int64_t resident_warps) {
  const int64_t c = k.lean_chunks > 0 ? k.lean_chunks /* 1..64: read_knobs */
                    : mean_len >= 16.0 ? 16 : mean_len >= 8.0 ? 8 : 4;
  return fco_ea_lean_tile_bags(G, mean_len, B, T, resident_warps, (int)c);
}

/* FCO_EA_LAND_KB: the land unit of both fused kernels in KiB, 4..16384 (default 64; the call's
 * fco_ea_knobs_t, embedding_alltoall.cu's header). */
__host__ inline int64_t land_kib(const fco_ea_knobs_t& knobs) {
  const int64_t k = knobs.land_kb;
  return k < 4 ? 4 : k > 16384 ? 16384 : k;
}

/* Bad data at (local table t, kind, position, value): counted and/or reported. */
__device__ __forceinline__ void lean_bad(const LeanSrc& p, int slot, int t, int kind, int64_t pos,
                                         int64_t value, unsigned long long n) {
  if (p.nbad) atomicAdd(p.nbad + slot, n);
  if (p.dev)
    record_error(p.dev->err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_EMBEDDING_ALLTOALL, p.table0 + t, kind,
                 (uint64_t)pos, (uint64_t)value);
}

/* base + a · b, a and b 32-bit (one IMAD.WIDE.U32) */
__device__ __forceinline__ const void* addr_wide(const void* base, uint32_t a, uint32_t b) {
  uint64_t r;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(r) : "r"(a), "r"(b), "l"((uint64_t)base));
  return (const void*)r;
}

/* One warp tile: bags (b0 + i, local table t), i < nb ≤ p.W, pooled by the calling warp (all 32
 * lanes) into obase + i · stride (elements; obase = bag (b0, t)'s output). Table t's rows are
 * [row0, row0 + rows) of p.weight. See the header for the algorithm.
 * kMT (FCO_EA_LEAN_TABLES = nt > 1, the fused kernel only; experimental): the tile spans the ntab
 * ≤ nt tables t, t + 1, ... of the same samples; lane group r takes table t + r mod nt (idle
 * when that is ≥ ntab) and the (r / nt)-th share of that table's rows (the row split below, over
 * its RW / nt groups), so the groups that store in the
 * same instruction write neighbouring tables of a sample — runs of up to nt rows instead of rows
 * T·D apart (small rows over NVLink). Rows of table u are [rb[u], rb[u + 1]); row0 and rows are
 * unused; the warp's staged offsets take nt · (p.W + 1) slots (the launcher sizes the shared
 * memory as lean_smem(G, nt · (W + 1) − 1)). kMT = false
 * compiles to the single-table tile.
 * kPool (the claimed lookup kernel): the stream is compiled once for sum and once for mean (p.mean
 * chosen per tile), so a bag end of a sum stores without computing a length (bag_store with a
 * constant mean; the length and the run-time test were ~14 of a bag end's ~43 instructions, and a
 * ragged tile runs its bag ends once per lane group). Run 2026-12-05_nvidia-h200_9ad3459-kpool
 * (one H200, impl 0, bf16, P = 1, three rounds side by side): the claimed lookup 1.066x on ragged
 * 65536/8/64/8 (170.0 -> 159.5 us, 73 -> 78 % of HBM), 1.02x on ragged 16384/8/128/32,
 * 0.99-1.00x on even bags, 0.98x on Zipf (on one H100 no gain: run
 * 2026-12-05_nvidia-h100-x1_571244b-fkpool, 0.997-1.004x ragged, 0.98x Zipf); in the static lookup
 * (bags of < 8 rows) it cost 2-4 %, and the fused kernel's lean kernels spill more with it
 * (session 46), so both keep one stream that reads p.mean at each bag end. */
template <typename T, typename I, int kS, int kU, bool kMT = false, bool kWIdx = true,
          bool kPool = false>
__device__ __forceinline__ void lean_tile(const LeanSrc& p, int t, int64_t b0, int nb, int64_t row0,
                                          int64_t rows, T* const obase, int64_t stride, int nt = 1,
                                          int ntab = 1, const int64_t* rb = nullptr) {
  using Un = Unit<T, true>;
  constexpr int kE = Un::kE;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = 1 << p.lg_G, gl = lane & (G - 1), r = lane >> p.lg_G, RW = 32 >> p.lg_G;
  const bool lane_on = gl < p.D / kE;
  const bool weighted = p.psw != nullptr;
  /* kMT: this lane group's table t + tt (idle past ntab), its slice rq of RWq a table */
  const int tt = kMT ? r & (nt - 1) : 0, rq = kMT ? r / nt : r, RWq = kMT ? RW / nt : RW;
  const bool idle = kMT && tt >= ntab;
  const int tl = t + (idle ? 0 : tt);
  const int sw = kMT ? nt * (p.W + 1) : p.W + 1; /* staged offsets a warp */
  uint4* const g_ring = ea_ring();
  int* const so_w = (int*)(g_ring + kS * kU * kThreads) + warp * sw;
  int* const so = kMT ? so_w + (idle ? 0 : tt) * (p.W + 1)
                      : (int*)(g_ring + kS * kU * kThreads) + warp * (p.W + 1);
  const float* const wr = kMT ? (const float*)((int*)(g_ring + kS * kU * kThreads) + kWarps * sw) +
                                    (threadIdx.x >> p.lg_G) * (kS * kU)
                              : (const float*)(so - warp * (p.W + 1) + kWarps * (p.W + 1)) +
                                    (threadIdx.x >> p.lg_G) * (kS * kU);
  const uint32_t ring = smem_u32(g_ring + threadIdx.x), wring = smem_u32(wr);
  /* rows u of a chunk whose weight this lane copies (u mod G = gl), none without weights */
  uint32_t wmine = 0;
#pragma unroll
  for (int u = 0; u < kU; ++u) wmine |= (uint32_t)(weighted && (u & (G - 1)) == gl) << u;
  const I* offs = (const I*)p.offsets + ((int64_t)tl * p.B + b0);
  /* Stage and check the tile's offsets (each table's, kMT); lane 0's predecessor is the last
   * lane's of the step before. */
  __syncwarp(); /* the previous tile's offsets are read */
  bool bad = false;
  /* Stage the nb + 1 offsets at o into sd as positions relative to pf, checking them. */
  auto stage = [&](const I* o, int* sd, int64_t pf) {
    int64_t carry = 0;
    for (int i0 = 0; i0 <= nb; i0 += 32) {
      const int i = i0 + lane;
      const int64_t v = i <= nb ? (int64_t)__ldg(o + i) : 0;
      int64_t pv = __shfl_up_sync(0xffffffffu, v, 1);
      if (lane == 0) pv = carry;
      carry = __shfl_sync(0xffffffffu, v, 31);
      if (i <= nb) {
        bad |= v < 0 || v > p.num_indices || (i > 0 && v < pv) || v - pf > INT32_MAX - 64;
        sd[i] = (int)(v - pf);
      }
    }
  };
  int64_t pfirst = 0;
  if constexpr (kMT) {
    for (int t2 = 0; t2 < ntab; ++t2) {
      const I* const o2 = (const I*)p.offsets + ((int64_t)(t + t2) * p.B + b0);
      const int64_t pf = (int64_t)__ldg(o2);
      if (t2 == tt) pfirst = pf;
      stage(o2, so_w + t2 * (p.W + 1), pf);
    }
  } else {
    pfirst = (int64_t)__ldg(offs);
    stage(offs, so, pfirst);
  }
  __syncwarp();
  if constexpr (kMT) {
    row0 = rb[tl];
    rows = rb[tl + 1] - row0;
  }
  /* a table of ≥ 2^32 rows goes the plain way too: the stream's row addresses take 32-bit indices */
  const bool bad_tile = __any_sync(0xffffffffu, bad || (uint64_t)rows > 0xffffffffull);
  /* this lane's unit of row 0 of the table, of the tile's first bag's output */
  const uint4* const tb = (const uint4*)((const T*)p.weight + row0 * p.D) + gl;
  T* const ob = obase + (kMT ? (tl - t) * p.D : 0) + gl * kE;
  const int64_t row_units = p.D / kE; /* row stride in uint4 */
  const uint32_t row_bytes = (uint32_t)p.D * (uint32_t)sizeof(T);
  float acc[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) acc[e] = 0.f;
  /* the bag split: lane group rq's bags [rq · W / RWq, +W / RWq) of the tile (none when idle) */
  auto bag_split = [&](int& kb, int& ke) {
    const int bpg = p.W / RWq;
    kb = idle ? 0 : min(rq * bpg, nb);
    ke = idle ? 0 : min(kb + bpg, nb);
  };
  if (bad_tile) {
    /* Bag by bag, 64-bit positions, one row at a time: only tiles with bad data (or huge), over
     * the bag split. */
    int kb, ke;
    bag_split(kb, ke);
    for (int k = kb; k < ke; ++k) {
      int64_t lo = (int64_t)__ldg(offs + k), hi = (int64_t)__ldg(offs + k + 1);
      if (lo < 0 || hi < lo || hi > p.num_indices) {
        if (gl == 0) lean_bad(p, 1, tl, FCO_EA_BAD_OFFSETS, (int64_t)tl * p.B + b0 + k, hi, 1);
        lo = hi = 0;
      }
      for (int64_t q = lo; q < hi; ++q) {
        const int64_t ix = (int64_t)__ldg((const I*)p.indices + q);
        if ((uint64_t)ix >= (uint64_t)rows) {
          if (gl == 0) lean_bad(p, 0, tl, FCO_EA_BAD_INDEX, q, ix, 1);
          continue;
        }
        bag_add<T>(acc, __ldg(lane_on ? tb + ix * row_units : &g_ea_dummy), p.psw, q);
      }
      bag_store<T>(acc, p.mean, hi - lo, ob + (int64_t)k * stride, 0, lane_on);
    }
    return;
  }
  /* Two ways to share the tile's rows among the lane groups (one code, kSplit a compile-time
   * flag of the stream below), chosen per tile by a warp vote:
   * - even tiles (every bag of the tile, of each table's with kMT, holds the same rows: fixed-length
   *   features, the benchmarks' uniform and Zipf workloads): group rq takes bags [rq · W / RWq,
   *   +W / RWq) — equal rows, no bag across groups; a chunk inside one bag is summed unrolled (its
   *   kU ring reads together), one that crosses bag ends row by row through a rolled loop.
   * - other tiles (kSplit): the row split. Group rq streams the tile's positions [qa, qb), an
   *   equal share of its span (so[nb]) whatever the bags' lengths, and stores the bags [kb, ke)
   *   whose end falls in (qa, qb] (group 0 also those ending at 0: the empty bags in front). A bag
   *   that began before qa (the head, bag kb when so[kb] < qa) is completed after the stream by
   *   what the groups before it summed of it; a bag that goes on past qb (the tail, bag ke) is
   *   summed here only in part and handed on. Every chunk is summed row by row (unrolled), a
   *   group whose row starts a new bag storing the bag(s) that ended before it: the groups' bag
   *   ends fall in different chunks, and one path for all keeps them from running both.
   * Run 2026-12-04_nvidia-h200_7900cd8-consume / a6071c1-vote (one H200, impl 0's lookup, bf16):
   * the row split on every tile cost the even workloads 1–5 % and Zipf 15 % (more instructions a
   * row), and gained 7 % / 20 % on ragged bags; the unrolled sum of crossing-free chunks inside
   * the row split (by group, or by warp vote) was slower still. */
  bool even = true;
  if (!idle) {
    const int len0 = so[1] - so[0];
    for (int i = lane + 1; i <= nb; i += 32) even = even && so[i] - so[i - 1] == len0;
  }
  /* kMode: 0 = pooling read at each bag end (p.mean), 1 = sum, 2 = mean (kPool: claimed lookup) */
  auto stream = [&](auto split_t, auto mode_t) {
    constexpr bool kSplit = decltype(split_t)::value;
    constexpr int kMode = decltype(mode_t)::value;
    int qa, qb, kb, ke;
    bool head = false, seg = true;
    if constexpr (kSplit) {
      /* fco_ea_row_share (embedding_alltoall_plan.h, checked on the CPU); an idle group none */
      if (idle) {
        qa = qb = kb = ke = 0;
      } else {
        const fco_ea_share_t h = fco_ea_row_share(so, nb, rq, RWq);
        qa = h.qa, qb = h.qb, kb = h.kb, ke = h.ke;
        head = h.head;
        seg = h.seg;
      }
    } else {
      bag_split(kb, ke);
      qa = so[kb];
      qb = so[ke];
    }
    /* The group's stream: tile positions [qa, qe); chunk at q0 in stage s, the chunk at
     * q0 + (kS − 1)·kU issued into the stage before s, indices of the one after in nx. */
    const int qe = qb;
    int q0 = qa;
    /* bag cur ends at next_end (= so[cur + 1] while cur < ke) and is stored at op (a running
     * pointer: a bag's store multiplies nothing; sum pooling reads no shared memory there) —
     * session 40: in a ragged tile a bag end runs once per bag and lane group, not once per
     * RW groups as in even ones */
    int cur = kb, next_end = kb < ke ? so[kb + 1] : qe;
    T* op = ob + (int64_t)kb * stride;
    float hacc[kE]; /* kSplit: the head's part summed here, set at its end */
#pragma unroll
    for (int e = 0; e < kE; ++e) hacc[e] = 0.f;
    /* Bag cur ends: store it (mean: divided by its length, skipped rows included) and clear acc;
     * the head is kept aside instead. */
    auto flush = [&]() {
      if (kSplit && head && cur == kb) {
#pragma unroll
        for (int e = 0; e < kE; ++e) hacc[e] = acc[e], acc[e] = 0.f;
      } else {
        if constexpr (kMode == 0)
          bag_store<T>(acc, p.mean, p.mean ? next_end - so[cur] : 0, op, 0, lane_on);
        else /* a constant mean: a sum's bag end computes no length */
          bag_store<T>(acc, kMode == 2, kMode == 2 ? next_end - so[cur] : 0, op, 0, lane_on);
      }
    };
    /* on to bag cur + 1, reading its end when asked (end_bags: there cur + 1 ≤ ke < nb; the
     * final loop asks only while cur + 1 < ke) */
    auto next_bag = [&](bool read_end) {
      ++cur;
      op += stride;
      if (read_end) next_end = so[cur + 1];
    };
    /* Store every bag that ends at or before position q (q inside the share: the bags stored
     * are < ke, and cur reaches ke only where ke < nb, so so[cur + 1] is staged). */
    auto end_bags = [&](int q) {
      while (q >= next_end) {
        flush();
        next_bag(true);
      }
    };
    I nx[kU]; /* raw indices of the next chunk to issue */
    /* The indices of the chunk at qc (0 past qe: not read). */
    auto load_ix = [&](int qc) {
      const I* ip = (const I*)p.indices + (pfirst + qc);
      if (qc + kU <= qe) { /* most chunks: kU loads at immediate offsets */
#pragma unroll
        for (int u = 0; u < kU; ++u) nx[u] = __ldg(ip + u);
      } else {
#pragma unroll
        for (int u = 0; u < kU; ++u) nx[u] = qc + u < qe ? __ldg(ip + u) : (I)0;
      }
    };
    /* Copies of the chunk at qc (rows from nx) into stage si; always commit (the wait counts
     * groups). Every slot of the stage is written: a row past qe or outside the table (a bad
     * index) reads nothing (ignore-src, so its address needs no guard; where a row is read,
     * ix < rows < 2^32) and lands as zeros, its weight as 0, so it adds nothing to the sum
     * (fmaf(0, 0, acc) = acc whatever its own weight). Bad indices are counted and reported here
     * (rare). Session 39: the guarded 64-bit row addresses, the address selects and the valid
     * bits took ~40 % of the lookup's instructions (run 2026-12-04_nvidia-h200_140d938-ragncu);
     * without them impl 0's lookup ran 1.00–1.34× faster on all nine workloads (run
     * 2026-12-04_nvidia-h200_v2-ab). */
    auto issue = [&](int qc, int si) {
      uint32_t okm = 0;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const bool ok = qc + u < qe && (uint64_t)(int64_t)nx[u] < (uint64_t)rows;
        okm |= (uint32_t)ok << u;
        cp_async16_or_zero(ring + (uint32_t)((si * kU + u) * kThreads * 16),
                           addr_wide(tb, (uint32_t)nx[u], row_bytes), !(ok && lane_on));
      }
      if (weighted) {
        const float* w = p.psw + (pfirst + qc);
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (wmine >> u & 1u)
            cp_async4(wring + (uint32_t)((si * kU + u) * 4), w + u, (okm >> u & 1u) ? 4 : 0);
      }
      const uint32_t inm = (1u << max(0, min(kU, qe - qc))) - 1u;
      if (okm != inm && gl == 0) { /* rows skipped: bad indices (rare) */
        const int u = __ffs(inm & ~okm) - 1;
        const int64_t q = pfirst + qc + u;
        lean_bad(p, 0, tl, FCO_EA_BAD_INDEX, q, (int64_t)__ldg((const I*)p.indices + q),
                 (unsigned long long)__popc(inm & ~okm));
      }
      cp_async_commit();
    };
    /* fmaf(1, x, acc) is acc + x exactly: one code for both. kWIdx: take() gets row wi of the
     * weights' ring as an index (read only with weights: its address is then not computed
     * without them), else its address. Run 2026-12-05_nvidia-h200_ragpath (one H200, impl 0's
     * lookup, bf16, P = 1): the index made the claimed order 1.05x faster on ragged 65536/8/64/8
     * (178.4 -> 170.0 us), 1.07x on Zipf, ~1 % on even bags, and the static order 2 % slower
     * (12 B of spills for 16-bit tables with int64 indices): the static lookup keeps the
     * address (ea_kernel_lean_stream: kWIdx = kDyn); the fused kernel takes the index. */
    using WRef = std::conditional_t<kWIdx, int, const float*>;
    auto take = [&](const uint4& x, WRef w) {
      float f[kE];
      Un::unpack(x, f);
      float wt = 1.f;
      if constexpr (kWIdx) {
        wt = weighted ? wr[w] : 1.f;
      } else {
        wt = weighted ? *w : 1.f;
      }
#pragma unroll
      for (int e = 0; e < kE; ++e) acc[e] = fmaf(wt, f[e], acc[e]);
    };
    load_ix(q0);
#pragma unroll
    for (int si = 0; si < kS - 1; ++si) {
      issue(q0 + si * kU, si);
      load_ix(q0 + (si + 1) * kU);
    }
    int s = 0;
#pragma unroll 1
    for (; q0 < qe; q0 += kU) {
      const uint32_t gmask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
      if (weighted) __syncwarp(gmask); /* the stage refilled next: its weights read by the group */
      issue(q0 + (kS - 1) * kU, s == 0 ? kS - 1 : s - 1);
      load_ix(q0 + kS * kU);
      cp_async_wait<kS - 1>(); /* the chunk at q0 (stage s) landed: this thread's copies */
      if (weighted) __syncwarp(gmask); /* ... and the group's weight copies */
      const int nq = min(kU, qe - q0);
      const uint4* slot0 = g_ring + s * kU * kThreads + threadIdx.x;
      WRef w0;
      if constexpr (kWIdx) {
        w0 = s * kU;
      } else {
        w0 = wr + s * kU;
      }
      if constexpr (kSplit) { /* row by row, unrolled: one path for every group */
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          if (u < nq) {
            end_bags(q0 + u);
            take(slot0[u * kThreads], w0 + u);
          }
        }
      } else if (q0 + nq <= next_end) { /* inside one bag: the kU ring reads together */
        uint4 x[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) x[u] = slot0[u * kThreads];
#pragma unroll
        for (int u = 0; u < kU; ++u) take(x[u], w0 + u); /* rows past nq: zeros */
      } else { /* across bag ends: rolled, so flush (its divisions) is inlined once */
#pragma unroll 1
        for (int u = 0; u < nq; ++u) {
          end_bags(q0 + u);
          if (u == 0 && q0 + nq <= next_end) {
            /* the chunk starts a bag (the bags before stored just now) and lies inside it: the
             * kU ring reads together, as above — in even tiles every chunk that starts a bag
             * (half of them at 8 rows a bag, all at 4) instead of row by row. Run
             * 2026-12-04_nvidia-h200_chunkstart (P = 1): bags of 4 rows 1.03× (lookup, bf16) /
             * 1.04× (fused, f32), L = 1 1.02×, Zipf 1.3 % slower, within 0.5 % elsewhere. (The
             * in-bag sum above is written out twice: as one lambda ptxas scheduled it
             * differently, untested on a GPU.) */
            uint4 x[kU];
#pragma unroll
            for (int v = 0; v < kU; ++v) x[v] = slot0[v * kThreads];
#pragma unroll
            for (int v = 0; v < kU; ++v) take(x[v], w0 + v);
            break;
          }
          take(slot0[u * kThreads], w0 + u);
        }
      }
      s = s + 1 == kS ? 0 : s + 1;
    }
    cp_async_wait<0>();
    while (cur < ke) { /* the bags ending at qb, trailing empty ones */
      flush();
      next_bag(cur + 1 < ke);
    }
    if constexpr (kSplit) {
      /* acc: the tail's part (zero without one). A segmented inclusive scan over the table's groups
       * (neighbours step lanes apart) sums each run of groups inside one bag; the group before a
       * head holds what the groups before this one summed of it. */
      const int step = (kMT ? nt : 1) << p.lg_G;
      int f = seg;
      for (int d = 1; d < RWq; d <<= 1) {
        const int pf = __shfl_up_sync(0xffffffffu, f, d * step);
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          const float pv = __shfl_up_sync(0xffffffffu, acc[e], d * step);
          if (rq >= d && !f) acc[e] = pv + acc[e];
        }
        if (rq >= d) f |= pf;
      }
#pragma unroll
      for (int e = 0; e < kE; ++e) acc[e] = __shfl_up_sync(0xffffffffu, acc[e], step) + hacc[e];
      if (head) bag_store<T>(acc, p.mean, so[kb + 1] - so[kb], ob + (int64_t)kb * stride, 0, lane_on);
    }
  };
  const bool all_even = __all_sync(0xffffffffu, even);
  using M0 = std::integral_constant<int, 0>;
  using M1 = std::integral_constant<int, 1>;
  using M2 = std::integral_constant<int, 2>;
  if constexpr (!kPool) {
    if (all_even)
      stream(std::false_type{}, M0{});
    else
      stream(std::true_type{}, M0{});
  } else if (p.mean) {
    if (all_even)
      stream(std::false_type{}, M2{});
    else
      stream(std::true_type{}, M2{});
  } else {
    if (all_even)
      stream(std::false_type{}, M1{});
    else
      stream(std::true_type{}, M1{});
  }
}

/* The same warp tile for rows or outputs that are not 16-byte aligned (the fused kernel takes
 * every rank's call, whatever its pointers: its protocol is agreed; embedding_alltoall_fused_lean.cu):
 * a warp pools one bag at a time, lane l the elements l, l + 32, ... (D ≤ kLeanAnyMaxD), element
 * loads and stores. Same semantics and reports as lean_tile (fmaf with weights in bag order, one
 * division for mean, bad bags empty, bad indices skipped); slow, for correctness. */
constexpr int kLeanAnyPer = 8;                    /* elements a lane */
constexpr int kLeanAnyMaxD = 32 * kLeanAnyPer;    /* ≥ the lean kernels' rows: 512 B of 16-bit */
template <typename T, typename I>
__device__ __forceinline__ void lean_tile_any(const LeanSrc& p, int t, int64_t b0, int nb, int64_t row0,
                                              int64_t rows, T* const obase, int64_t stride) {
  const int lane = threadIdx.x & 31;
  const I* offs = (const I*)p.offsets + ((int64_t)t * p.B + b0);
  for (int k = 0; k < nb; ++k) {
    int64_t lo = (int64_t)__ldg(offs + k), hi = (int64_t)__ldg(offs + k + 1);
    if (lo < 0 || hi < lo || hi > p.num_indices) {
      if (lane == 0) lean_bad(p, 1, t, FCO_EA_BAD_OFFSETS, (int64_t)t * p.B + b0 + k, hi, 1);
      lo = hi = 0;
    }
    float acc[kLeanAnyPer];
#pragma unroll
    for (int i = 0; i < kLeanAnyPer; ++i) acc[i] = 0.f;
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t ix = (int64_t)__ldg((const I*)p.indices + q);
      if ((uint64_t)ix >= (uint64_t)rows) {
        if (lane == 0) lean_bad(p, 0, t, FCO_EA_BAD_INDEX, q, ix, 1);
        continue;
      }
      const T* row = (const T*)p.weight + (row0 + ix) * p.D;
      const float wt = p.psw ? __ldg(p.psw + q) : 1.f;
#pragma unroll
      for (int i = 0; i < kLeanAnyPer; ++i) {
        const int e = lane + 32 * i;
        if (e < p.D) acc[i] = p.psw ? fmaf(wt, to_f32<T>(__ldg(row + e)), acc[i]) : acc[i] + to_f32<T>(__ldg(row + e));
      }
    }
    const float n = (float)(hi - lo);
    T* const o = obase + (int64_t)k * stride;
#pragma unroll
    for (int i = 0; i < kLeanAnyPer; ++i) {
      const int e = lane + 32 * i;
      if (e < p.D) Pack<T>::store(o + e, p.mean && hi > lo ? acc[i] / n : acc[i]);
    }
  }
}

/* The lookup: tile j = table j / tpt, samples [(j mod tpt) · W, +W). Static order (kDyn false):
 * warp w takes tiles w, w + nw, ... (nw warps in the grid). Claimed order (kDyn; the launcher's
 * rule fco_ea_lookup_dyn: bags of ≥ 8 rows on average): warp w takes tile w, then claims its
 * next tiles from p.queue (lane 0, one atomicAdd: fco_ea_lookup_next), so warps whose tiles hold
 * fewer rows take more of them (ragged bags: the static order ends with the warp whose tiles
 * summed the most rows). The launch's final claim sets the queue back to 0 — all claims of the
 * launch are made by then, and the next launch on the stream starts after this one ends, so each
 * launch (a CUDA-graph replay too) starts at 0 without a memset. Two lookups of one rank running
 * at once (one communicator on two streams) would share the queue: a communicator's calls are
 * ordered on one stream (as its epochs need). The claimed lookup also takes the weights' ring
 * index (kWIdx) and the stream per pooling mode (kPool); the static one neither (lean_tile says
 * why). */
template <typename T, typename I, int kS, int kU, bool kDyn = false>
__global__ void __launch_bounds__(kThreads, kLeanMinBlocks)
    ea_kernel_lean_stream(const __grid_constant__ LeanParams p) {
  const int tpt = (int)((p.B + p.W - 1) / p.W); /* tiles a table; T · tpt + nw < 2^31 (host) */
  const int nw = (gridDim.x * blockDim.x) >> 5;
  const int ntiles = p.T * tpt;
  auto tile = [&](int j) {
    const int t = j / tpt;
    const int64_t b0 = (int64_t)(j - t * tpt) * p.W;
    const int nb = (int)min((int64_t)p.W, p.B - b0);
    lean_tile<T, I, kS, kU, false, kDyn, kDyn>(p, t, b0, nb, p.row_base[t],
                                               p.row_base[t + 1] - p.row_base[t],
                                               (T*)p.out + b0 * p.stride + (int64_t)t * p.D,
                                               p.stride);
  };
  if constexpr (kDyn) {
    for (unsigned j = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; j < p.ntiles;) {
      tile((int)j);
      unsigned n = 0; /* not j: nothing of the loop's live across tile (the counts are p's) */
      if ((threadIdx.x & 31) == 0) n = fco_ea_lookup_next(p.queue, p.ntiles, p.nw);
      j = __shfl_sync(0xffffffffu, n, 0);
    }
  } else {
    for (int j = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; j < ntiles; j += nw) tile(j);
  }
}

}  // namespace ea
}  // namespace fco

#endif /* FCO_CUDA_EMBEDDING_ALLTOALL_LEAN_CUH_ */

/*
 * gemm_alltoall_fused.cu — the peer-table side of fco_gemm_alltoall:
 *   impl 1 "tiles": one persistent kernel per call (ga_kernel_tiles) whose blocks compute output
 *     tiles with tensor cores and store each finished tile straight into the destination rank's
 *     rows, then signal it. Tile math (pick_tile): for bf16 / f16 with K, N multiples of 8 and
 *     16-byte aligned pointers on compute capability 9.0 when the sm_90a image is loaded
 *     (wgmma_usable), WgmmaTileTma (gemm_tile_wgmma.cuh: wgmma, TMA loads, tensor maps encoded
 *     per rank by the launcher, 193 KB of shared memory); if a map cannot be encoded, WgmmaTile
 *     (wgmma, cp.async loads) instead. FCO_GA_TILE=wgmma forces WgmmaTile, =tma2 WgmmaTileTma in
 *     cluster pairs, =mma MmaTile (gemm_tile.cuh, mma.sync), which also runs wherever wgmma
 *     cannot; FfmaTile for f32. The tensor-core tiles are 128×256 and 256 threads, so the plan,
 *     tile order and flags do not depend on the choice.
 *     Status (2×H200, run ad0463c, bench/results/2026-11-30_nvidia-h200-x2_ad0463c): with
 *     WgmmaTileTma, the expert-major order and M tiles per expert, µs impl 0 / tiles = 1433 /
 *     1453 (4096,14336,4096,8,2), 374 / 335 (1024,...), 394 / 241 (512,2048,7168,32,8), 552 /
 *     650 (skew 4), 249 / 161 (128,2048,7168,32,8), 0 wrong; test_gemm_alltoall passes on local
 *     and nccl (the tma2, wgmma and mma tiles last checked in run 0f4e81f);
 *   impl 2 "chunks": the exchange, push and finish kernels around the cuBLAS chunks issued by
 *     gemm_alltoall.cu.
 *
 * impl 1, per call (e = epoch + 1, h = e & 1), blocks_per_rank = G blocks per rank, part = block
 * in rank:
 *   1. part 0 reads the device counts, builds the segment table (one segment per (expert,
 *      destination), in A's row order: rows, first A row, first row among my rows at the
 *      destination; per expert its rows and first tile) in the private plan area of half h, and
 *      posts the header (gemm_alltoall.cuh) to every rank.
 *   2. every block waits for all headers: verdict (bad counts → FCO_ERR_INVALID_ARGUMENT on every
 *      rank, nothing written), base[s] = where my rows start in s's out.
 *   3. tiles t = part, part + G, ... of the tile list: experts in order; an expert's M tiles run
 *      over its rows of every destination at once (A holds them contiguously: one tile may hold
 *      rows for two destinations, and the store cuts it), so a segment of few rows costs no tile
 *      row of its own (decode: 32 rows per segment, 64 per expert at P = 2 — one 128-row tile
 *      per N tile instead of two); taken in groups of kGroupM M tiles × every N tile, M fastest
 *      (the blocks running at once share W's column tiles in L2). Remote and local rows
 *      alternate over the whole kernel instead of all remote tiles first, so NVLink and the
 *      tensor cores work together. A piece for a peer is stored into the peer's staging of
 *      half h (laid out as its out), a piece for me into out. When all its tiles are stored,
 *      the block raises sig_value(e, 0) on slot [me][part] of every peer (one release for all
 *      its stores).
 *   4. receive: every block waits for the flags of all G_r blocks of each peer r that sends me
 *      rows (G_r from r's header), then copies its slice (slice_of: the slices cover every
 *      byte) of r's rows from staging into out. The order of tiles is free.
 * Why staging and not the peer's out: only the workspace is mapped by peers; the copy costs one
 * read and write of the received rows in HBM. With remote and local tiles interleaved a peer's
 * rows are complete only when its last block ends, so the copy runs after the tiles (15–20 µs
 * at 512 tokens: what kept the kernel above the overlap bound). Unless the receiver's out lies
 * in a symmetric buffer (fco_mem_alloc): its header says so (FCO_GA_H_SYM: slot, offset), the
 * senders store there (dest_rows) and it copies nothing — run 4868f9b: 242.0 → 224.3 µs at 512
 * tokens (under the bound, 233.7), 162.2 → 155.6 at decode. FCO_GA_DIRECT=0: staging anyway.
 * Launch: one grid of G · num_local blocks, every block co-resident (G from occupancy).
 *
 * impl 2, per call (e = epoch + 1 in every kernel: only the finish kernel's end advances it):
 *   exchange (one block per rank): header → every rank, wait for all, verdict; the plan (verdict,
 *     base, roff, recv) into the private plan area of half h. The header is invalid also when
 *     the device counts differ from the counts_host the GEMMs were sized from (digest).
 *   push (per chunk, a few blocks): the chunk's rows from y into out (own) or plan.dst[s] (the
 *     destination's staging of half h, or its symmetric out) at plan.base[s] + row; the plan's
 *     placement read once into shared memory (a dependent load a piece cost 40–80 µs a call,
 *     run 5d02c14);
 *   finish (grid of ≤ 64 blocks per rank): after every push of this rank (stream order), part 0
 *     release-signals kDoneSlot to every peer; every block waits for every peer's, then copies
 *     its slice of the received rows from staging into out (none when its out is symmetric),
 *     and the last block ends the epoch.
 *
 * Back-to-back calls, of this op or any other, without a handshake at the start (the first
 * version made every rank wait for each peer's "I started this call" before writing to it: a
 * round trip of latency per call). The workspace rule (src/core/internal.h) makes it needless:
 *   (1) everything a peer writes into my workspace in call e (headers, staging rows) lies in
 *       half e & 1; what only I write (segment table, plan) lies after it in the same half, or
 *       (impl 2's y) outside both halves' peer bytes;
 *   (2) in every call each rank waits for every peer's header of that call (and impl 2 for every
 *       peer's "all pushed"), raised after the peer started the call.
 *   A peer writes call e's data into me only once it finished its call e - 1, which needed my
 *   signal of call e - 1, raised after I finished call e - 2. So my call e - 2 (the same half)
 *   is over, and my call e - 1, which may still run, reads the other half. Whatever op the next
 *   call is, a peer racing ahead into it writes the other half of the one I am reading. The data
 *   of call e is complete when my waits of call e end: every peer signals after its stores to
 *   me (release / acquire at system scope).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "gemm_alltoall.cuh"
#include "gemm_tile.cuh"
#include "gemm_tile_wgmma.cuh"

namespace fco {
namespace ga {
namespace {

struct TilesParams {
  RankArgs r[kMaxP];
  int64_t a_rows, out_rows;
  int32_t K, N, P, blocks_per_rank;
  CUtensorMap ma[kMaxP], mw[kMaxP]; /* per local rank: A and W for TMA tiles (else unused) */
};

constexpr int kGroupM = 8; /* M tiles per group of the tile order (L2 reuse of W) */

/* Segment (local expert e, destination s) at index e·P + s: the order of A's rows. The first
 * segment of each expert also holds the expert's first tile and rows (tile_begin, erows). */
struct Seg { /* FCO_GA_SEG_BYTES; the first four words are read as one int4 */
  int32_t rows, a_row, d_local, s;
  int64_t tile_begin;
  int32_t e, erows;
};
static_assert(sizeof(Seg) == FCO_GA_SEG_BYTES, "segment entry size");

/* Part 0 of a rank, all threads: segment table + header, then post it. */
template <int kBM, int kBN>
__device__ void build_plan(const TilesParams& p, const RankArgs& ra, const RankView& v, uint64_t e,
                           char* smem, Seg* segs) {
  __shared__ unsigned long long s_tot[kMaxP];
  __shared__ long long s_sum;
  __shared__ int s_bad;
  __shared__ int64_t s_totpre[kMaxP];
  __shared__ int64_t hdr[kHdrWords];
  __shared__ int64_t tmp[kThreads / 32 + 1];
  const int P = v.nranks, me = v.rank, E = ra.num_experts, n = E * P;
  const int64_t nN = (p.N + kBN - 1) / kBN;
  int* cnt = reinterpret_cast<int*>(smem);
  if ((int)threadIdx.x < P) s_tot[threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    s_sum = 0;
    s_bad = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int x = ra.counts[i];
    cnt[i] = x < 0 ? 0 : x;
    if (x < 0) {
      s_bad = 1;
    } else {
      atomicAdd(&s_tot[i % P], (unsigned long long)x);
      atomicAdd((unsigned long long*)&s_sum, (unsigned long long)x);
    }
  }
  __syncthreads();
  const bool valid = !s_bad && s_sum <= p.a_rows;
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (int s = 0; s < P; ++s) {
      s_totpre[s] = run;
      run += (int64_t)s_tot[s];
    }
    for (int k = 0; k < kHdrWords; ++k) hdr[k] = 0;
    hdr[FCO_GA_H_VALID] = valid ? 1 : 0;
    hdr[FCO_GA_H_E] = E;
    hdr[FCO_GA_H_BLOCKS] = p.blocks_per_rank;
    hdr[3] = valid ? 0 : kBadCounts;
    header_sym(ra, P, hdr);
    /* Flags, not tiles: every block raises one flag per peer (step 3), announced as the
     * Triton operator does — tiles[s] = blocks where I send s rows, tstart[s] their running
     * sum in the order me+1, me+2, ... — so that count_mod(tstart, tstart + tiles, q, blocks)
     * is 1 for every part q, and a Triton receiver (python/fco/triton/gemm_alltoall.py) counts
     * a C sender's flags unchanged. */
    int64_t t = 0;
    for (int j = 0; j < P; ++j) {
      const int s = (me + 1 + j) % P;
      const int64_t f = valid && s_tot[s] > 0 ? p.blocks_per_rank : 0;
      hdr[FCO_GA_H_TOT(P, s)] = (int64_t)s_tot[s];
      hdr[FCO_GA_H_TILES(P, s)] = f;
      hdr[FCO_GA_H_TSTART(P, s)] = t;
      t += f;
    }
  }
  __syncthreads();
  if (valid) {
    /* A rows: expert-major order. */
    block_scan(
        n, [&](int i) -> int64_t { return cnt[i]; },
        [&](int i, int64_t pre) {
          const int ex = i / P, s = i - ex * P;
          Seg* g = segs + i;
          g->rows = cnt[i];
          g->a_row = (int32_t)pre;
          g->s = s;
          g->e = ex;
        },
        tmp);
    /* Rows of earlier experts for the same destination: destination-major order. */
    block_scan(
        n, [&](int i) -> int64_t { return cnt[(i % E) * P + i / E]; },
        [&](int i, int64_t pre) {
          const int s = i / E, ex = i - s * E;
          segs[ex * P + s].d_local = (int32_t)(pre - s_totpre[s]);
        },
        tmp);
    /* Each expert's M tiles run over its rows of every destination at once (one tile may hold
     * rows for two destinations: the store splits it), so few rows per segment cost one tile
     * row per expert, not one per segment. First tile of each expert: expert order. */
    block_scan(
        E,
        [&](int ex) -> int64_t {
          int64_t r = 0;
          for (int s = 0; s < P; ++s) r += cnt[ex * P + s];
          return (r + kBM - 1) / kBM * nN;
        },
        [&](int ex, int64_t pre) {
          int64_t r = 0;
          for (int s = 0; s < P; ++s) r += cnt[ex * P + s];
          segs[ex * P].tile_begin = pre;
          segs[ex * P].erows = (int32_t)r;
        },
        tmp);
  }
  /* The release in post_header publishes the segment table to this rank's other blocks. */
  post_header(v, e, hdr);
}

template <class Tile>
__global__ void __launch_bounds__(kThreads, 1) ga_kernel_tiles(const __grid_constant__ TilesParams p) {
  using T = typename Tile::Elem;
  extern __shared__ __align__(16) char smem[];
  __shared__ RankView v;
  __shared__ Ctl c;
  const int li = blockIdx.x / p.blocks_per_rank;
  const int part = blockIdx.x - li * p.blocks_per_rank;
  const RankArgs& ra = p.r[li];
  load_rank_view(ra.dev, &v, FCO_OP_GEMM_ALLTOALL);
  const uint64_t e = v.epoch + 1;
  const int P = v.nranks, me = v.rank;
  const size_t es = sizeof(T), rb = (size_t)p.N * es;
  const size_t need = fco_ga_half_need(1, 0, P, p.a_rows, p.out_rows, p.N, es);
  if (P != p.P || me < 0 || me >= P || fco_ws_half_bytes(v.ws_bytes) < need) {
    if (part == 0 && threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_GEMM_ALLTOALL, me, -1, 2 * need, v.ws_bytes);
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }
  /* This call's half: peers' headers and staging, then my private segment table. */
  const size_t half = fco_ga_half_off(v.ws_bytes, e);
  Seg* segs = reinterpret_cast<Seg*>(ra.ws + half + fco_ga_peer_bytes(P, p.out_rows, p.N, es));
  if (part == 0) build_plan<Tile::BM, Tile::BN>(p, ra, v, e, smem, segs);
  if (!gather_headers(v, e, p.out_rows, &c)) {
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }
  if (c.verdict) {
    if (part == 0 && threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, c.bad_rank, c.verdict,
                   0, 0);
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }

  /* ---- tiles ---- */
  const int E = ra.num_experts;
  const int64_t nN = (p.N + Tile::BN - 1) / Tile::BN;
  const Seg* last = segs + (E - 1) * P;
  const int64_t total = __ldcg((const long long*)&last->tile_begin) +
                        (__ldcg(&last->erows) + Tile::BM - 1) / Tile::BM * nN;
  const size_t off_staging = half + fco_ga_off_staging(P);
  if (threadIdx.x == 0) dest_rows(v, ra, off_staging, c.h, c.dst);
  __syncthreads();
  /* Where tile t lies: its expert (binary search on tile_begin) and grouped position. */
  struct Loc {
    int ex, erows, a_row, m0, n0; /* a_row: the expert's first A row; m0: row in the expert */
  };
  auto locate = [&](int64_t t) {
    int lo = 0, hi = E - 1; /* last expert with tile_begin <= t (experts without rows share
                               their successor's tile_begin: the last one is the one with t) */
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (__ldcg((const long long*)&segs[mid * P].tile_begin) <= t) lo = mid;
      else hi = mid - 1;
    }
    /* Grouped order over the expert's M tiles, kGroupM M tiles × every N tile, M fastest, so
     * the blocks running at once share W's column tiles in L2 (W of an expert exceeds L2). */
    const Seg* g = segs + lo * P;
    Loc L;
    L.ex = lo;
    L.erows = __ldcg(&g->erows);
    L.a_row = __ldcg(&g->a_row);
    const int64_t l = t - __ldcg((const long long*)&g->tile_begin);
    const int64_t nM = (L.erows + Tile::BM - 1) / Tile::BM;
    const int64_t grp = l / (kGroupM * nN), in = l - grp * kGroupM * nN;
    const int64_t gm = min((int64_t)kGroupM, nM - grp * kGroupM);
    L.m0 = (int)(grp * kGroupM + in % gm) * Tile::BM;
    L.n0 = (int)(in / gm) * Tile::BN;
    return L;
  };
  /* kCta = 2 (cluster pairs): blocks 2c, 2c + 1 of a rank run tiles 2q, 2q + 1, q = c, c + G/2,
   * ...: tile t is still block t % G's, so the receivers' counts are unchanged. A block whose
   * tile is past the end computes its partner's (the pair's barriers need both) and stores
   * nothing. */
  constexpr int kCta = tile::TileCta<Tile>::value;
  constexpr bool kAsync = tile::AsyncC<Tile>::value;
  const int rank_in_pair = part % kCta;
  const int64_t slots = (total + kCta - 1) / kCta, slot_step = p.blocks_per_rank / kCta;
  for (int64_t q = part / kCta; q < slots; q += slot_step) {
    const int64_t t_first = q * kCta;
    const bool mine = t_first + rank_in_pair < total;
    const Loc L = locate(mine ? t_first + rank_in_pair : t_first);
    const int ex = L.ex, m0 = L.m0, n0 = L.n0;
    const int rows = min(Tile::BM, L.erows - m0), cols = min(Tile::BN, p.N - n0);
    if constexpr (tile::IsTmaTile<Tile>::value) {
      int share = 0; /* what the pair's tiles have in common: 1 W columns, 2 A rows */
      if (kCta == 2 && t_first + 1 < total) {
        const Loc o = locate(t_first + (rank_in_pair ^ 1));
        share = o.ex == ex && o.n0 == n0 ? 1 : o.a_row + o.m0 == L.a_row + m0 ? 2 : 0;
      }
      Tile::run(smem, &p.ma[li], L.a_row + m0, &p.mw[li], ex, p.K, p.N, n0, share);
    } else {
      const T* a = reinterpret_cast<const T*>(ra.a) + ((size_t)L.a_row + m0) * p.K;
      const T* w = reinterpret_cast<const T*>(ra.w) + (size_t)ex * p.K * p.N;
      Tile::run(smem, a, rows, w, p.K, p.N, n0);
    }
    if (!mine) { /* kCta = 2 only */
      __syncthreads();
      continue;
    }
    /* The tile's rows [m0, m0 + rows) of the expert, cut by destination (the expert's
     * segments, in A order): each piece to its destination's rows. */
    for (int j = 0; j < P; ++j) {
      const int4 sg = __ldcg(reinterpret_cast<const int4*>(segs + ex * P + j));
      const int off = sg.y - L.a_row; /* the segment's first row in the expert */
      const int r0 = max(m0, off), r1 = min(m0 + rows, off + sg.x);
      if (r1 <= r0) continue;
      const int s = sg.w;
      const int64_t drow = c.base[s] + sg.z + (r0 - off);
      if (!c.dst[s]) continue; /* a freed symmetric buffer (recorded by dest_rows) */
      char* dst = c.dst[s] + (size_t)drow * rb + (size_t)n0 * es;
      tile::store_c_part<Tile>(smem, r0 - m0, r1 - m0, cols, dst, rb); /* kAsync: drains while
                                                                          the next computes */
    }
    tile::store_c_done<Tile>();
  }
  /* One flag per peer when all this block's tiles are stored (one release covers them all):
   * receivers wait for every block of every sender, whatever the tile order. */
  if (kAsync && threadIdx.x < 32) bulk_wait_all();
  __syncthreads();
  if ((int)threadIdx.x < P && (int)threadIdx.x != me)
    st_release_sys(v.peer_sig[threadIdx.x] + (size_t)me * FCO_SIG_SLOTS + part, sig_value(e, 0));

  /* ---- receive: wait for each peer's tiles, copy my slice of its rows into out (nothing
   * to copy when my out is symmetric: the peers stored into it) ---- */
  const bool land = ra.out_sym < 0;
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
  for (int k = 1; k < P; ++k) {
    const int r = (me + k) % P;
    if (c.recv[r] == 0) continue;
    const int64_t g = c.h[r][FCO_GA_H_BLOCKS];
    bool ok = true;
    for (int64_t q = threadIdx.x; q < g && ok; q += blockDim.x)
      ok = wait_ge(v.peer_sig[me] + (size_t)r * FCO_SIG_SLOTS + q, sig_value(e, 0), ctx, r, (int)q);
    if (__syncthreads_or(!ok)) break;
    if (!land) continue;
    const size_t bytes = (size_t)c.recv[r] * rb, off = (size_t)c.roff[r] * rb;
    size_t b0, b1;
    slice_of(bytes, p.blocks_per_rank, part, &b0, &b1);
    if (b1 > b0)
      copy_cg(ra.out + off + b0, v.peer_data[me] + off_staging + off + b0, b1 - b0, threadIdx.x,
              blockDim.x);
  }
  epoch_end(ra.dev, e, p.blocks_per_rank);
}

/* ---- impl 2: exchange, push, finish -------------------------------------------------------- */
struct ExParams {
  RankArgs r[kMaxP];
  int64_t a_rows, out_rows;
  int32_t N, P, es;
};

__global__ void __launch_bounds__(kThreads) ga_kernel_exchange(const ExParams p) {
  __shared__ RankView v;
  __shared__ Ctl c;
  __shared__ unsigned long long s_tot[kMaxP], s_digest;
  __shared__ long long s_sum;
  __shared__ int s_bad;
  __shared__ int64_t hdr[kHdrWords];
  const RankArgs& ra = p.r[blockIdx.x];
  uint64_t e;
  Plan* plan = call_plan(ra.dev, &v, &e, ra.ws, p.P, p.out_rows, p.N, p.es);
  const int P = v.nranks, me = v.rank, E = ra.num_experts, n = E * P;
  const size_t need = fco_ga_half_need(2, 0, p.P, p.a_rows, p.out_rows, p.N, p.es);
  if (P != p.P || me < 0 || me >= P || fco_ws_half_bytes(v.ws_bytes) < need) {
    /* The launcher checked the workspace: only a corrupted table gets here. Peers time out. */
    if (threadIdx.x == 0)
      record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_GEMM_ALLTOALL, me, -1, 2 * need, v.ws_bytes);
    return;
  }
  if ((int)threadIdx.x < P) s_tot[threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    s_sum = 0;
    s_bad = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int x = ra.counts[i];
    if (x < 0) {
      s_bad = 1;
    } else {
      atomicAdd(&s_tot[i % P], (unsigned long long)x);
      atomicAdd((unsigned long long*)&s_sum, (unsigned long long)x);
    }
  }
  const uint64_t digest = block_digest(ra.counts, E, P, &s_digest); /* syncs */
  if (threadIdx.x == 0) {
    for (int k = 0; k < kHdrWords; ++k) hdr[k] = 0;
    const int why = s_bad || s_sum > p.a_rows ? kBadCounts
                    : digest != ra.digest     ? kCountsChanged
                                              : 0;
    hdr[FCO_GA_H_VALID] = why == 0;
    hdr[FCO_GA_H_E] = E;
    hdr[3] = why;
    for (int s = 0; s < P; ++s) hdr[FCO_GA_H_TOT(P, s)] = (int64_t)s_tot[s];
    header_sym(ra, P, hdr);
  }
  post_header(v, e, hdr); /* syncs first */
  const bool ok = gather_headers(v, e, p.out_rows, &c);
  if (threadIdx.x == 0) {
    plan->verdict = !ok ? -1 : c.verdict;
    if (ok) dest_rows(v, ra, fco_ga_half_off(v.ws_bytes, e) + fco_ga_off_staging(P), c.h, c.dst);
    for (int s = 0; s < P && ok; ++s) {
      plan->base[s] = c.base[s];
      plan->roff[s] = c.roff[s];
      plan->recv[s] = c.recv[s];
      plan->dst[s] = c.dst[s];
    }
    for (int s = 0; s < kMaxP; ++s) plan->landed[s] = plan->seen[s] = 0;
    if (ok && c.verdict)
      record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, c.bad_rank, c.verdict, 0,
                   0);
  }
}

struct PushPiece {
  int32_t s, rows;
  int64_t y_row, d_local;
};
struct PushParams {
  fco_dev_rank_t* dev;
  const char* y;
  char* out;
  char* ws;
  int64_t out_rows, n;
  int64_t row_bytes;
  int32_t npieces, P, es;
  PushPiece pc[kMaxPieces];
};

__global__ void __launch_bounds__(kThreads) ga_kernel_push(const PushParams p) {
  __shared__ RankView v;
  uint64_t e;
  const Plan* plan = call_plan(p.dev, &v, &e, p.ws, p.P, p.out_rows, p.n, p.es);
  if (*(volatile const int32_t*)&plan->verdict != 0) return; /* uniform: every thread reads it */
  /* The plan's placement, read once into shared memory: a load per piece in the loop (one a
   * thread, dependent, before each piece's copy) cost 40–80 µs a call at 512 tokens (run
   * 4de9ac2, two loads a piece; one before). */
  __shared__ int64_t s_base[kMaxP];
  __shared__ char* s_dst[kMaxP];
  if ((int)threadIdx.x < p.P) {
    s_base[threadIdx.x] = __ldcg((const long long*)&plan->base[threadIdx.x]);
    s_dst[threadIdx.x] = (char*)__ldcg((const unsigned long long*)&plan->dst[threadIdx.x]);
  }
  __syncthreads();
  const size_t idx0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int i = 0; i < p.npieces; ++i) {
    const PushPiece pc = p.pc[i];
    const int64_t drow = s_base[pc.s] + pc.d_local;
    if (drow < 0 || drow + pc.rows > p.out_rows) { /* the verdict rules this out; belt and braces */
      if (idx0 == 0)
        record_error(v.err, FCO_ERR_INVALID_ARGUMENT, FCO_OP_GEMM_ALLTOALL, pc.s, kBadPlan,
                     (uint64_t)(drow + pc.rows), (uint64_t)p.out_rows);
      continue;
    }
    /* my out, the destination's symmetric out or its staging (dest_rows); NULL: skipped */
    char* dst = pc.s == v.rank ? p.out : s_dst[pc.s];
    if (!dst) continue;
    copy_cg(dst + (size_t)drow * p.row_bytes, p.y + (size_t)pc.y_row * p.row_bytes,
            (size_t)pc.rows * p.row_bytes, idx0, stride);
  }
  /* The finish kernel's release flag follows in stream order (after a join): make these
   * stores visible at system scope before it, whatever block raises it. */
  __threadfence_system();
}

struct FinishParams {
  RankArgs r[kMaxP];
  int64_t out_rows, n, row_bytes;
  int32_t P, es, blocks_per_rank;
};

__global__ void __launch_bounds__(kThreads) ga_kernel_finish(const FinishParams p) {
  __shared__ RankView v;
  __shared__ Plan pl;
  const int li = blockIdx.x / p.blocks_per_rank;
  const int part = blockIdx.x - li * p.blocks_per_rank;
  const RankArgs& ra = p.r[li];
  uint64_t e;
  /* written by this call's exchange kernel (an earlier kernel of this rank's call) */
  const Plan* g = call_plan(ra.dev, &v, &e, ra.ws, p.P, p.out_rows, p.n, p.es);
  const int P = v.nranks, me = v.rank;
  if (P != p.P) { /* the exchange recorded it */
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }
  if (threadIdx.x == 0) pl.verdict = __ldcg(&g->verdict);
  if ((int)threadIdx.x < kMaxP) {
    pl.roff[threadIdx.x] = __ldcg((const long long*)&g->roff[threadIdx.x]);
    pl.recv[threadIdx.x] = __ldcg((const long long*)&g->recv[threadIdx.x]);
    pl.seen[threadIdx.x] = __ldcg((const long long*)&g->seen[threadIdx.x]); /* landed early */
  }
  __syncthreads();
  if (pl.verdict != 0) { /* the same verdict on every rank: nobody pushed */
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }
  /* "All my pushes landed": they precede this kernel in stream order and each push kernel
   * ended with a system fence. */
  if (part == 0 && (int)threadIdx.x < P && (int)threadIdx.x != me)
    st_release_sys(v.peer_sig[threadIdx.x] + (size_t)me * FCO_SIG_SLOTS + kDoneSlot,
                   sig_value(e, 0));
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
  bool ok = true;
  if ((int)threadIdx.x < P && (int)threadIdx.x != me)
    ok = wait_ge(v.peer_sig[me] + (size_t)threadIdx.x * FCO_SIG_SLOTS + kDoneSlot,
                 sig_value(e, 0), ctx, (int)threadIdx.x, kDoneSlot);
  if (!__syncthreads_or(!ok) && ra.out_sym < 0) { /* symmetric out: the peers stored into it */
    const char* staging = v.peer_data[me] + fco_ga_half_off(v.ws_bytes, e) + fco_ga_off_staging(P);
    for (int r = 0; r < P; ++r) {
      const int64_t done = min(max(pl.seen[r], (int64_t)0), pl.recv[r]);
      if (r == me || pl.recv[r] == done) continue;
      const size_t bytes = (size_t)(pl.recv[r] - done) * p.row_bytes;
      const size_t off = (size_t)(pl.roff[r] + done) * p.row_bytes;
      size_t b0, b1;
      slice_of(bytes, p.blocks_per_rank, part, &b0, &b1);
      if (b1 > b0) copy_cg(ra.out + off + b0, staging + off + b0, b1 - b0, threadIdx.x, blockDim.x);
    }
  }
  epoch_end(ra.dev, e, p.blocks_per_rank);
}

/* ---- impl 2's early landing (FCO_GA_LAND_EARLY=1) --------------------------------------------
 * A receiver with an ordinary out copies its staged rows into out at the end of the call (the
 * finish kernel): one read and write of every received row after the last GEMM. Early, the
 * rows come in as they are pushed: after each chunk's push kernel, on the push stream,
 *   progress (one block): the rows this rank has pushed to each peer s so far (a prefix of its
 *     rows for s: chunks go in expert and row order) → release on slot [me][kProgSlot] at s
 *     (after the push kernel in stream order, which ended with a system fence: the finish
 *     kernel's pattern); then, if this rank lands early, it snapshots every peer's published
 *     count (acquire): landed = seen, seen = the count;
 *   land (a few blocks): copies rows [landed, seen) of each peer from staging into out.
 * Nothing waits, so a peer that is behind only leaves more for the finish kernel, which copies
 * [seen, recv). A peer's next call cannot publish into the slot before this call's finish let
 * it (rule (2) of src/core/internal.h). Off by default until measured on 2 GPUs. */
struct ProgParams {
  fco_dev_rank_t* dev;
  char* ws;
  int64_t out_rows, n;
  int32_t P, es, snap;
  int64_t rows_to[kMaxP];
};

__global__ void __launch_bounds__(kThreads) ga_kernel_progress(const ProgParams p) {
  __shared__ RankView v;
  uint64_t e;
  Plan* plan = call_plan(p.dev, &v, &e, p.ws, p.P, p.out_rows, p.n, p.es);
  if (*(volatile const int32_t*)&plan->verdict != 0 || v.nranks != p.P) return;
  const int s = threadIdx.x, me = v.rank;
  if (s >= p.P || s == me) return;
  st_release_sys(v.peer_sig[s] + (size_t)me * FCO_SIG_SLOTS + kProgSlot,
                 (e << 32) | (uint64_t)(p.rows_to[s] + 1));
  if (!p.snap) return;
  const uint64_t got = ld_acquire_sys(v.peer_sig[me] + (size_t)s * FCO_SIG_SLOTS + kProgSlot);
  int64_t rows = (got >> 32) == e ? (int64_t)(got & 0xffffffffull) - 1 : 0;
  const int64_t recv = __ldcg((const long long*)&plan->recv[s]);
  const int64_t prev = __ldcg((const long long*)&plan->seen[s]);
  rows = min(max(rows, prev), recv);
  plan->landed[s] = prev;
  plan->seen[s] = rows;
}

struct LandParams {
  fco_dev_rank_t* dev;
  char* ws;
  char* out;
  int64_t out_rows, n, row_bytes;
  int32_t P, es;
};

__global__ void __launch_bounds__(kThreads) ga_kernel_land(const LandParams p) {
  __shared__ RankView v;
  __shared__ int64_t s_lo[kMaxP], s_hi[kMaxP], s_roff[kMaxP];
  __shared__ int s_ok;
  uint64_t e;
  const Plan* plan = call_plan(p.dev, &v, &e, p.ws, p.P, p.out_rows, p.n, p.es);
  if (threadIdx.x == 0) s_ok = __ldcg(&plan->verdict) == 0 && v.nranks == p.P;
  if ((int)threadIdx.x < kMaxP) { /* written by this rank's progress kernel, just before */
    s_lo[threadIdx.x] = __ldcg((const long long*)&plan->landed[threadIdx.x]);
    s_hi[threadIdx.x] = __ldcg((const long long*)&plan->seen[threadIdx.x]);
    s_roff[threadIdx.x] = __ldcg((const long long*)&plan->roff[threadIdx.x]);
  }
  __syncthreads();
  if (!s_ok) return;
  const char* staging =
      v.peer_data[v.rank] + fco_ga_half_off(v.ws_bytes, e) + fco_ga_off_staging(p.P);
  for (int r = 0; r < p.P; ++r) {
    if (r == v.rank || s_hi[r] <= s_lo[r]) continue;
    const size_t bytes = (size_t)(s_hi[r] - s_lo[r]) * p.row_bytes;
    const size_t off = (size_t)(s_roff[r] + s_lo[r]) * p.row_bytes;
    size_t b0, b1;
    slice_of(bytes, gridDim.x, blockIdx.x, &b0, &b1);
    if (b1 > b0) copy_cg(p.out + off + b0, staging + off + b0, b1 - b0, threadIdx.x, blockDim.x);
  }
}

/* ---- impl 0 on nccl: barrier after the send/recv ------------------------------------------ */
__global__ void __launch_bounds__(kThreads) ga_kernel_barrier(fco_dev_rank_t* dev) {
  rank_barrier(dev, FCO_OP_GEMM_ALLTOALL, kDoneSlot);
}

/* ---- host side -------------------------------------------------------------------------------- */
int env_int(const char* name, int dflt) {
  const char* s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

/* Blocks of `kernel` co-resident on the current device at kThreads threads and `smem` dynamic
 * shared memory (cached per kernel and device). */
template <auto kKernel>
fco_result_t coresident(char* err, int smem, int* blocks) {
  static std::atomic<int> cache[kMaxDevices]; /* 0 = not computed; benign duplicate work */
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  int per_sm = device < kMaxDevices ? cache[device].load() : 0;
  if (per_sm == 0) {
    if (smem > 48 * 1024) {
      cudaError_t ce = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaFuncSetAttribute(max dynamic smem)");
    }
    cudaError_t ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, kThreads, smem);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (device < kMaxDevices) cache[device].store(per_sm);
  }
  *blocks = per_sm * sms;
  return FCO_OK;
}

/* Launch configuration of a grid of clusters of 2 blocks (kThreads each). */
void pair_config(cudaLaunchConfig_t* cfg, cudaLaunchAttribute* at, unsigned grid, int smem,
                 cudaStream_t stream) {
  *cfg = cudaLaunchConfig_t{};
  *at = cudaLaunchAttribute{};
  at->id = cudaLaunchAttributeClusterDimension;
  at->val.clusterDim.x = 2;
  at->val.clusterDim.y = 1;
  at->val.clusterDim.z = 1;
  cfg->gridDim = dim3(grid);
  cfg->blockDim = dim3(kThreads);
  cfg->dynamicSmemBytes = (size_t)smem;
  cfg->stream = stream;
  cfg->attrs = at;
  cfg->numAttrs = 1;
}

/* coresident for clusters of 2: blocks in co-resident clusters (cached per kernel and device). */
template <auto kKernel>
fco_result_t coresident_pairs(char* err, int smem, int* blocks) {
  static std::atomic<int> cache[kMaxDevices];
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  int clusters = device < kMaxDevices ? cache[device].load() : 0;
  if (clusters == 0) {
    cudaError_t ce = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaFuncSetAttribute(max dynamic smem)");
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[1];
    pair_config(&cfg, at, 2u * (unsigned)sms, smem, 0);
    ce = cudaOccupancyMaxActiveClusters(&clusters, kKernel, &cfg);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveClusters");
    if (device < kMaxDevices) cache[device].store(clusters);
  }
  *blocks = 2 * clusters;
  return FCO_OK;
}

void fill_ranks(const fco_gpu_launch_t* l, RankArgs* out) {
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
    out[i].a = (const char*)a->a;
    out[i].w = (const char*)a->w;
    out[i].out = (char*)a->out;
    out[i].counts = a->counts;
    out[i].dev = l->r[i].dev;
    out[i].ws = (char*)l->r[i].ws;
    out[i].num_experts = a->num_experts;
    rank_sym(l, i, &out[i]);
  }
}

/* fco_last_plan words of a tile: its math and loads. */
template <class Tile>
struct TileWords;
template <typename T, bool kBT, bool kAligned>
struct TileWords<tile::MmaTile<T, kBT, kAligned>> {
  static const char* get() { return kAligned ? "mma.sync" : "mma.sync unaligned"; }
};
template <bool kBT>
struct TileWords<tile::FfmaTile<kBT>> {
  static const char* get() { return "ffma"; }
};
template <typename T, bool kBT>
struct TileWords<tile::WgmmaTile<T, kBT>> {
  static const char* get() { return "wgmma cp.async"; }
};
template <typename T, bool kBT, int kCta, bool kAsyncC>
struct TileWords<tile::WgmmaTileTma<T, kBT, kCta, kAsyncC>> {
  static const char* get() {
    return kCta == 2 ? (kAsyncC ? "wgmma tma cluster=2 epi=async" : "wgmma tma cluster=2")
                     : (kAsyncC ? "wgmma tma epi=async" : "wgmma tma");
  }
};

/* What launch_tiles_t launched (fco_last_plan). */
struct TilesNote {
  const char* tile; /* TileWords */
  int bm, bn, blocks_per_rank;
  char recv[24]; /* recv_words */
};

/* Launches impl 1 with `Tile`. A TMA tile first encodes its tensor maps (host only, nothing
 * issued yet): when that fails for any local rank, *no_maps says what failed and nothing is
 * launched, so the caller can fall back to a pointer tile. */
template <class Tile>
fco_result_t launch_tiles_t(const fco_gpu_launch_t* l, char* err, const char** no_maps,
                            TilesNote* note) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  constexpr int kCta = tile::TileCta<Tile>::value;
  TilesParams p;
  memset(&p, 0, sizeof p);
  if constexpr (tile::IsTmaTile<Tile>::value) {
    for (int i = 0; i < l->num_local; ++i) {
      const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
      if (a->a_rows <= 0) continue; /* no tiles read the maps */
      const char* why = Tile::encode(&p.ma[i], &p.mw[i], a->a, (long long)a->a_rows, a->w,
                                     (int)a->k, (int)a->n, a->num_experts);
      if (why) {
        *no_maps = why;
        return FCO_ERR_UNSUPPORTED;
      }
    }
  }
  int cap = 0;
  fco_result_t r = kCta == 1 ? coresident<ga_kernel_tiles<Tile>>(err, Tile::kSmemBytes, &cap)
                             : coresident_pairs<ga_kernel_tiles<Tile>>(err, Tile::kSmemBytes, &cap);
  if (r != FCO_OK) return r;
  int bpr = cap / l->num_local;
  int want = env_int("FCO_GA_TILES_BLOCKS", 0);
  if (want > 0 && want < bpr) bpr = want;
  if (bpr > kMaxParts) bpr = kMaxParts;
  bpr -= bpr % kCta; /* whole clusters per rank */
  if (bpr < kCta)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "gemm_alltoall tiles: %d co-resident blocks cannot give each of %d ranks %d", cap,
                l->num_local, kCta);
  /* Tile indices and per-block tile counts must fit the 32-bit halves of the flags. */
  const double nN = (double)((a0->n + Tile::BN - 1) / Tile::BN);
  const double tiles = ((double)a0->a_rows / Tile::BM + (double)FCO_GEMM_ALLTOALL_MAX_EXPERTS *
                        l->nranks) * nN;
  if (tiles > 2e9)
    return fail(err, FCO_ERR_UNSUPPORTED,
                "gemm_alltoall tiles: up to %.3g output tiles (a_rows %lld, n %lld): more than the "
                "2^31 the flags count",
                tiles, (long long)a0->a_rows, (long long)a0->n);
  fill_ranks(l, p.r);
  p.a_rows = a0->a_rows;
  p.out_rows = a0->out_rows;
  p.K = (int32_t)a0->k;
  p.N = (int32_t)a0->n;
  p.P = l->nranks;
  p.blocks_per_rank = bpr;
  const unsigned grid = (unsigned)bpr * (unsigned)l->num_local;
  cudaError_t ce;
  if constexpr (kCta == 1) {
    ga_kernel_tiles<Tile><<<grid, kThreads, Tile::kSmemBytes, (cudaStream_t)l->stream>>>(p);
    ce = cudaGetLastError();
  } else {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[1];
    pair_config(&cfg, at, grid, Tile::kSmemBytes, (cudaStream_t)l->stream);
    ce = cudaLaunchKernelEx(&cfg, ga_kernel_tiles<Tile>, p);
  }
  if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall tiles: kernel launch");
  note->tile = TileWords<Tile>::get();
  note->bm = Tile::BM;
  note->bn = Tile::BN;
  note->blocks_per_rank = bpr;
  recv_words(p.r, l->num_local, l->nranks, note->recv, sizeof note->recv);
  return FCO_OK;
}

using LaunchFn = fco_result_t (*)(const fco_gpu_launch_t*, char*, const char**, TilesNote*);

template <typename T>
LaunchFn pick_mma(bool bt, bool aligned) {
  if (bt) return aligned ? launch_tiles_t<tile::MmaTile<T, true, true>>
                         : launch_tiles_t<tile::MmaTile<T, true, false>>;
  return aligned ? launch_tiles_t<tile::MmaTile<T, false, true>>
                 : launch_tiles_t<tile::MmaTile<T, false, false>>;
}
/* The epilogue of the TMA tile: FCO_GA_EPI=async (C in its own shared memory, drained by bulk
 * copies while the next tile computes, 3 pipeline stages; measured slower, runs 689b8cb and
 * 0f4e81f) or anything else (the default: stores from the C staging in the pipeline's bytes,
 * 4 stages). */
bool async_epilogue() {
  const char* env = getenv("FCO_GA_EPI");
  return env && !strcmp(env, "async");
}
/* The tile of impl 1 (*fallback: what runs when the chosen TMA tile's maps cannot be encoded).
 * Where wgmma runs (bf16 / f16, aligned, wgmma_usable): WgmmaTileTma by default (0.81–0.96 of
 * cuBLAS in tests/gpu/wgmma_tile_check.cu on H200, run 054dd36, against WgmmaTile's 0.61–0.95);
 * FCO_GA_TILE=wgmma WgmmaTile (cp.async), =tma2 WgmmaTileTma in cluster pairs (0.50–0.77: slower,
 * kept for A/B runs), =mma MmaTile (wgmma_usable says no); unset, =tma (the former opt-in) or
 * any other value: the default. Elsewhere MmaTile. */
template <typename T>
LaunchFn pick_tile(bool bt, bool aligned, bool wgmma, LaunchFn* fallback) {
  *fallback = pick_mma<T>(bt, aligned);
  if (!wgmma || !aligned) return *fallback;
  const LaunchFn cp = bt ? launch_tiles_t<tile::WgmmaTile<T, true>>
                         : launch_tiles_t<tile::WgmmaTile<T, false>>;
  const char* env = getenv("FCO_GA_TILE");
  if (env && !strcmp(env, "wgmma")) return cp;
  *fallback = cp;
  if (env && !strcmp(env, "tma2"))
    return bt ? launch_tiles_t<tile::WgmmaTileTma<T, true, 2>>
              : launch_tiles_t<tile::WgmmaTileTma<T, false, 2>>;
  if (async_epilogue())
    return bt ? launch_tiles_t<tile::WgmmaTileTma<T, true, 1, true>>
              : launch_tiles_t<tile::WgmmaTileTma<T, false, 1, true>>;
  return bt ? launch_tiles_t<tile::WgmmaTileTma<T, true>>
            : launch_tiles_t<tile::WgmmaTileTma<T, false>>;
}

/* Which image of this file the driver loaded for the device: the sm_90a pass (WgmmaTile real)
 * gives this kernel 16 bytes of static shared memory, any other pass none (either may add the
 * 1 KB the system reserves per block, hence the test modulo 1024). Never launched;
 * cudaFuncGetAttributes reports the loaded image without touching a stream (capture-safe). */
__global__ void ga_kernel_wgmma_probe(int* out) {
#if FCO_WGMMA_COMPILED
  __shared__ int s[4];
  s[threadIdx.x & 3] = (int)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) & 3];
#endif
}

/* The wgmma tiles for impl 1: compute capability 9.0 with the sm_90a image loaded (the Makefile
 * builds this file for sm_90a where CUDA_ARCH asks for sm_90), unless FCO_GA_TILE=mma. Cached
 * per device. */
fco_result_t wgmma_usable(char* err, bool* usable) {
  static std::atomic<int> cache[kMaxDevices]; /* 0 unknown, 1 no, 2 yes */
  *usable = false;
  const char* env = getenv("FCO_GA_TILE");
  if (env && !strcmp(env, "mma")) return FCO_OK;
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  int v = device < kMaxDevices ? cache[device].load() : 0;
  if (v == 0) {
    int major = 0, minor = 0;
    cudaError_t ce = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (ce == cudaSuccess)
      ce = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall tiles: compute capability");
    v = 1;
    if (major == 9 && minor == 0) {
      cudaFuncAttributes fa;
      ce = cudaFuncGetAttributes(&fa, ga_kernel_wgmma_probe);
      if (ce == cudaSuccess && fa.sharedSizeBytes % 1024 == 4 * sizeof(int)) v = 2;
      if (ce != cudaSuccess) (void)cudaGetLastError(); /* no image for this device: not sticky */
    }
    if (device < kMaxDevices) cache[device].store(v);
  }
  *usable = v == 2;
  return FCO_OK;
}

}  // namespace

fco_result_t launch_tiles(const fco_gpu_launch_t* l, char* err) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  const bool bt = a0->w_layout == FCO_W_NK;
  bool aligned = a0->k % 8 == 0 && a0->n % 8 == 0;
  for (int i = 0; i < l->num_local; ++i) {
    const fco_gemm_a2a_args_t* a = (const fco_gemm_a2a_args_t*)l->r[i].op->u.raw;
    if (((uintptr_t)a->a | (uintptr_t)a->w | (uintptr_t)a->out) % 16) aligned = false;
  }
  bool wgmma = false;
  if (aligned && (a0->dtype == FCO_BF16 || a0->dtype == FCO_F16)) {
    fco_result_t r = wgmma_usable(err, &wgmma);
    if (r != FCO_OK) return r;
  }
  LaunchFn fn = nullptr, fallback = nullptr;
  switch (a0->dtype) {
    case FCO_BF16: fn = pick_tile<__nv_bfloat16>(bt, aligned, wgmma, &fallback); break;
    case FCO_F16: fn = pick_tile<__half>(bt, aligned, wgmma, &fallback); break;
    case FCO_F32:
      fn = bt ? launch_tiles_t<tile::FfmaTile<true>> : launch_tiles_t<tile::FfmaTile<false>>;
      break;
    default: break;
  }
  if (!fn) return fail(err, FCO_ERR_UNSUPPORTED, "gemm_alltoall tiles: dtype %d", (int)a0->dtype);
  const char* no_maps = nullptr;
  TilesNote note;
  fco_result_t r = fn(l, err, &no_maps, &note);
  /* fco_last_plan, e.g. " kernel tiles wgmma tma 128x256 direct, 132 blocks/rank" */
  if (!no_maps) {
    if (r == FCO_OK)
      fco_plan_append(l->plan, " kernel tiles %s %dx%d%s, %d blocks/rank", note.tile, note.bm,
                      note.bn, note.recv, note.blocks_per_rank);
    return r;
  }
  /* Tensor maps refused (cuTensorMapEncodeTiled missing or rejecting a stride / address):
   * nothing was launched; the same plan with the cp.async tile. The tile never changes the
   * plan, tile order or flags, so ranks that chose differently still agree. */
  fco_log(l->r[0].op->comm, "gemm_alltoall tiles: %s failed, falling back to the cp.async tile",
          no_maps);
  no_maps = nullptr;
  r = fallback(l, err, &no_maps, &note);
  if (no_maps) return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall tiles: %s failed", no_maps);
  if (r == FCO_OK)
    fco_plan_append(l->plan, " kernel tiles %s (no tensor maps) %dx%d%s, %d blocks/rank",
                    note.tile, note.bm, note.bn, note.recv, note.blocks_per_rank);
  return r;
}

fco_result_t launch_exchange(const fco_gpu_launch_t* l, const RankArgs* ra, void* stream,
                             char* err) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  ExParams p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < l->num_local; ++i) p.r[i] = ra[i];
  p.a_rows = a0->a_rows;
  p.out_rows = a0->out_rows;
  p.N = (int32_t)a0->n;
  p.P = l->nranks;
  p.es = (int32_t)fco_dtype_size(a0->dtype);
  ga_kernel_exchange<<<(unsigned)l->num_local, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: exchange launch");
}

fco_result_t launch_push(const RankArgs& ra, const char* y, int P, int64_t out_rows, int64_t n,
                         int es, const int64_t (*pieces)[4], int npieces, int blocks,
                         void* stream, char* err) {
  if (npieces > kMaxPieces)
    return fail(err, FCO_ERR_INTERNAL, "gemm_alltoall chunks: %d pieces in one push (max %d)",
                npieces, kMaxPieces);
  PushParams p;
  memset(&p, 0, sizeof p);
  p.dev = ra.dev;
  p.y = y;
  p.out = ra.out;
  p.ws = ra.ws;
  p.out_rows = out_rows;
  p.n = n;
  p.row_bytes = n * es;
  p.P = P;
  p.es = es;
  p.npieces = npieces;
  for (int i = 0; i < npieces; ++i) {
    p.pc[i].s = (int32_t)pieces[i][0];
    p.pc[i].rows = (int32_t)pieces[i][1];
    p.pc[i].y_row = pieces[i][2];
    p.pc[i].d_local = pieces[i][3];
  }
  ga_kernel_push<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: push launch");
}

fco_result_t launch_progress(const RankArgs& ra, int P, int64_t out_rows, int64_t n, int es,
                             const int64_t* rows_to, bool snap, void* stream, char* err) {
  ProgParams p;
  memset(&p, 0, sizeof p);
  p.dev = ra.dev;
  p.ws = ra.ws;
  p.out_rows = out_rows;
  p.n = n;
  p.P = P;
  p.es = es;
  p.snap = snap;
  for (int s = 0; s < P && s < kMaxP; ++s) p.rows_to[s] = rows_to[s];
  ga_kernel_progress<<<1, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: progress launch");
}

fco_result_t launch_land(const RankArgs& ra, int P, int64_t out_rows, int64_t n, int es,
                         int blocks, void* stream, char* err) {
  LandParams p;
  memset(&p, 0, sizeof p);
  p.dev = ra.dev;
  p.ws = ra.ws;
  p.out = ra.out;
  p.out_rows = out_rows;
  p.n = n;
  p.row_bytes = n * es;
  p.P = P;
  p.es = es;
  ga_kernel_land<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall chunks: land launch");
}

fco_result_t launch_finish(const fco_gpu_launch_t* l, const RankArgs* ra, int* blocks_per_rank,
                           char* err) {
  const fco_gemm_a2a_args_t* a0 = (const fco_gemm_a2a_args_t*)l->r[0].op->u.raw;
  int cap = 0;
  fco_result_t r = coresident<ga_kernel_finish>(err, 0, &cap);
  if (r != FCO_OK) return r;
  /* Every block waits for each peer's "all pushed", raised by the peer's part 0: on the local
   * transport that is a block of this grid, so the grid must be co-resident. */
  int bpr = cap / l->num_local;
  if (bpr > 64) bpr = 64;
  if (bpr < 1)
    return fail(err, FCO_ERR_UNSUPPORTED, "gemm_alltoall chunks: no room for %d ranks' finish",
                l->num_local);
  FinishParams p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < l->num_local; ++i) p.r[i] = ra[i];
  p.es = (int32_t)fco_dtype_size(a0->dtype);
  p.n = a0->n;
  p.out_rows = a0->out_rows;
  p.row_bytes = a0->n * (int64_t)p.es;
  p.P = l->nranks;
  p.blocks_per_rank = bpr;
  ga_kernel_finish<<<(unsigned)(bpr * l->num_local), kThreads, 0, (cudaStream_t)l->stream>>>(p);
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) return cuda_fail(err, ce, "gemm_alltoall chunks: finish launch");
  *blocks_per_rank = bpr;
  return FCO_OK;
}

fco_result_t launch_barrier(fco_dev_rank_t* dev, void* stream, char* err) {
  ga_kernel_barrier<<<1, kThreads, 0, (cudaStream_t)stream>>>(dev);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? FCO_OK : cuda_fail(err, ce, "gemm_alltoall nccl: barrier launch");
}

fco_result_t preload_kernels(char* err) {
  static std::atomic<int> done[kMaxDevices];
  int device = 0, sms = 0;
  fco_result_t r = current_device(err, &device, &sms);
  if (r != FCO_OK) return r;
  if (device < kMaxDevices && done[device].load()) return FCO_OK;
  const void* fns[] = {(const void*)ga_kernel_exchange, (const void*)ga_kernel_push,
                       (const void*)ga_kernel_finish, (const void*)ga_kernel_barrier,
                       (const void*)ga_kernel_progress, (const void*)ga_kernel_land};
  if ((r = load_kernels(err, fns, 6, "gemm_alltoall: cudaFuncGetAttributes")) != FCO_OK) return r;
  int cap = 0;
  if ((r = coresident<ga_kernel_finish>(err, 0, &cap)) != FCO_OK) return r;
  bool wgmma = false; /* decide (and load the probe) before any capture or spinning kernel */
  if ((r = wgmma_usable(err, &wgmma)) != FCO_OK) return r;
  if (device < kMaxDevices) done[device].store(1);
  return FCO_OK;
}

}  // namespace ga
}  // namespace fco

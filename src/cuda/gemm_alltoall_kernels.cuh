/*
 * gemm_alltoall_kernels.cuh — the device side of fco_gemm_alltoall's peer-table impls
 * (gemm_alltoall_fused.cu, the only includer, has the protocol in its header and the launchers):
 * impl 1's persistent tile kernel (ga_kernel_tiles: the part-0 segment table and header, the
 * tile order, the stores into the destinations' rows, the receive), impl 2's exchange, push and
 * finish kernels and its early landing (FCO_GA_LAND_EARLY: progress, land), and the barrier
 * impl 0 runs on nccl after its send / receive. The tiles' math is in gemm_tile.cuh and
 * gemm_tile_wgmma.cuh, the shared protocol pieces in gemm_alltoall.cuh.
 */
#ifndef FCO_CUDA_GEMM_ALLTOALL_KERNELS_CUH_
#define FCO_CUDA_GEMM_ALLTOALL_KERNELS_CUH_

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
  const bool row_held = sym_row_held(ra, P, me);
  block_count_sums(ra.counts, E, P, s_tot, &s_sum, &s_bad, cnt); /* syncs */
  const bool valid = !s_bad && s_sum <= p.a_rows;
  const uint32_t held = threadIdx.x < 32 ? sym_held(row_held) : 0;
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (int s = 0; s < P; ++s) {
      s_totpre[s] = run;
      run += (int64_t)s_tot[s];
    }
    for (int k = 0; k < kHdrWords; ++k) hdr[k] = 0;
    hdr[FCO_GA_H_VALID] = valid ? FCO_GA_PROTO_TILES : 0;
    hdr[FCO_GA_H_E] = E;
    hdr[FCO_GA_H_BLOCKS] = p.blocks_per_rank;
    hdr[3] = valid ? 0 : kBadCounts;
    header_sym(ra, P, held, hdr);
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
  /* This call's half: peers' headers and staging, then my private segment table (my workspace
   * through the table, as the peers reach it: RankArgs.ws). */
  const size_t half = fco_ga_half_off(v.ws_bytes, e);
  Seg* segs =
      reinterpret_cast<Seg*>(v.peer_data[me] + half + fco_ga_peer_bytes(P, p.out_rows, p.N, es));
  if (part == 0) build_plan<Tile::BM, Tile::BN>(p, ra, v, e, smem, segs);
  if (!gather_headers(v, e, p.out_rows, &c)) {
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }
  if (c.verdict) {
    if (part == 0 && threadIdx.x == 0) record_verdict(v, c);
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
   * to copy from a peer that stored into my symmetric out: fco_ga_direct, as it decided) ---- */
  const WaitCtx ctx{v.err, v.timeout_ns, FCO_OP_GEMM_ALLTOALL};
  for (int k = 1; k < P; ++k) {
    const int r = (me + k) % P;
    if (c.recv[r] == 0) continue;
    const int64_t g = c.h[r][FCO_GA_H_BLOCKS];
    if (g < 1) { /* no flags to wait for: r's rows would land unstored (the verdict rules it out) */
      if (part == 0 && threadIdx.x == 0)
        record_error(v.err, FCO_ERR_INVALID_USAGE, FCO_OP_GEMM_ALLTOALL, r, kMixedImpls, 1,
                     (uint64_t)g);
      continue;
    }
    bool ok = true;
    for (int64_t q = threadIdx.x; q < g && ok; q += blockDim.x)
      ok = wait_ge(v.peer_sig[me] + (size_t)r * FCO_SIG_SLOTS + q, sig_value(e, 0), ctx, r, (int)q);
    if (__syncthreads_or(!ok)) break;
    if (fco_ga_direct(c.h[r], c.h[me], P, r, me)) continue;
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
  Plan* plan = call_plan(ra.dev, &v, &e, p.P, p.out_rows, p.N, p.es);
  const int P = v.nranks, me = v.rank, E = ra.num_experts;
  const size_t need = fco_ga_half_need(2, 0, p.P, p.a_rows, p.out_rows, p.N, p.es);
  if (P != p.P || me < 0 || me >= P || fco_ws_half_bytes(v.ws_bytes) < need) {
    /* The launcher checked the workspace: only a corrupted table gets here. Peers time out.
     * This call's push and finish kernels must not use the plan call e - 2 left here. */
    if (threadIdx.x == 0) {
      record_error(v.err, FCO_ERR_INTERNAL, FCO_OP_GEMM_ALLTOALL, me, -1, 2 * need, v.ws_bytes);
      if (plan) plan->verdict = -1;
    }
    return;
  }
  const bool row_held = sym_row_held(ra, P, me);
  block_count_sums(ra.counts, E, P, s_tot, &s_sum, &s_bad, nullptr); /* syncs */
  const uint64_t digest = block_digest(ra.counts, E, P, &s_digest); /* syncs */
  const uint32_t held = threadIdx.x < 32 ? sym_held(row_held) : 0;
  if (threadIdx.x == 0) {
    for (int k = 0; k < kHdrWords; ++k) hdr[k] = 0;
    const int why = s_bad || s_sum > p.a_rows ? kBadCounts
                    : digest != ra.digest     ? kCountsChanged
                                              : 0;
    hdr[FCO_GA_H_VALID] = why == 0 ? FCO_GA_PROTO_CHUNKS : 0;
    hdr[FCO_GA_H_E] = E;
    hdr[3] = why;
    for (int s = 0; s < P; ++s) hdr[FCO_GA_H_TOT(P, s)] = (int64_t)s_tot[s];
    header_sym(ra, P, held, hdr);
  }
  post_header(v, e, hdr); /* syncs first */
  const bool ok = gather_headers(v, e, p.out_rows, &c);
  if (threadIdx.x == 0) {
    plan->verdict = !ok ? -1 : c.verdict;
    if (ok) dest_rows(v, ra, fco_ga_half_off(v.ws_bytes, e) + fco_ga_off_staging(P), c.h, c.dst);
    plan->stage_from = 0;
    for (int s = 0; s < P && ok; ++s) {
      plan->base[s] = c.base[s];
      plan->roff[s] = c.roff[s];
      plan->recv[s] = c.recv[s];
      plan->dst[s] = c.dst[s];
      if (s != me && !fco_ga_direct(c.h[s], c.h[me], P, s, me)) plan->stage_from |= 1u << s;
    }
    for (int s = 0; s < kMaxP; ++s) plan->landed[s] = plan->seen[s] = 0;
    if (ok && c.verdict) record_verdict(v, c);
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
  int64_t out_rows, n;
  int64_t row_bytes;
  int32_t npieces, P, es;
  PushPiece pc[kMaxPieces];
};

__global__ void __launch_bounds__(kThreads) ga_kernel_push(const PushParams p) {
  __shared__ RankView v;
  uint64_t e;
  const Plan* plan = call_plan(p.dev, &v, &e, p.P, p.out_rows, p.n, p.es);
  if (!plan) return; /* the exchange recorded it */
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
  const Plan* g = call_plan(ra.dev, &v, &e, p.P, p.out_rows, p.n, p.es);
  const int P = v.nranks, me = v.rank;
  if (P != p.P || !g) { /* the exchange recorded it */
    epoch_end(ra.dev, e, p.blocks_per_rank);
    return;
  }
  if (threadIdx.x == 0) {
    pl.verdict = __ldcg(&g->verdict);
    pl.stage_from = __ldcg(&g->stage_from);
  }
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
  if (!__syncthreads_or(!ok)) {
    const char* staging = v.peer_data[me] + fco_ga_half_off(v.ws_bytes, e) + fco_ga_off_staging(P);
    for (int r = 0; r < P; ++r) {
      const int64_t done = min(max(pl.seen[r], (int64_t)0), pl.recv[r]);
      /* not from me, nor from a peer that stored into my symmetric out (fco_ga_direct) */
      if (r == me || !(pl.stage_from >> r & 1) || pl.recv[r] == done) continue;
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
  int64_t out_rows, n;
  int32_t P, es, snap;
  int64_t rows_to[kMaxP];
};

__global__ void __launch_bounds__(kThreads) ga_kernel_progress(const ProgParams p) {
  __shared__ RankView v;
  uint64_t e;
  Plan* plan = call_plan(p.dev, &v, &e, p.P, p.out_rows, p.n, p.es);
  if (!plan) return;
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
  char* out;
  int64_t out_rows, n, row_bytes;
  int32_t P, es;
};

__global__ void __launch_bounds__(kThreads) ga_kernel_land(const LandParams p) {
  __shared__ RankView v;
  __shared__ int64_t s_lo[kMaxP], s_hi[kMaxP], s_roff[kMaxP];
  __shared__ int s_ok;
  __shared__ uint32_t s_from;
  uint64_t e;
  const Plan* plan = call_plan(p.dev, &v, &e, p.P, p.out_rows, p.n, p.es);
  if (!plan) return;
  if (threadIdx.x == 0) {
    s_ok = __ldcg(&plan->verdict) == 0 && v.nranks == p.P;
    s_from = __ldcg(&plan->stage_from); /* every peer: launched for an ordinary out only */
  }
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
    if (r == v.rank || !(s_from >> r & 1) || s_hi[r] <= s_lo[r]) continue;
    const size_t bytes = (size_t)(s_hi[r] - s_lo[r]) * p.row_bytes;
    const size_t off = (size_t)(s_roff[r] + s_lo[r]) * p.row_bytes;
    size_t b0, b1;
    slice_of(bytes, gridDim.x, blockIdx.x, &b0, &b1);
    if (b1 > b0) copy_cg(p.out + off + b0, staging + off + b0, b1 - b0, threadIdx.x, blockDim.x);
  }
}

/* ---- impl 0 on nccl: barrier after the send/recv ------------------------------------------ */
__global__ void __launch_bounds__(kThreads) ga_kernel_barrier(fco_dev_rank_t* dev) {
  /* bad data (every rank records a sender's changed counts: ga_kernel_land0) must not end the
   * wait: a rank's next call could write a slower peer's workspace (as the embedding's E3) */
  rank_barrier(dev, FCO_OP_GEMM_ALLTOALL, kDoneSlot, FCO_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace ga
}  // namespace fco

#endif  // FCO_CUDA_GEMM_ALLTOALL_KERNELS_CUH_

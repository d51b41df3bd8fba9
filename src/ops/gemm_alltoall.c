/*
 * gemm_alltoall.c — fco_gemm_alltoall: argument checks, impl choice (AUTO), workspace need,
 * capture rules, submit. Kernels: src/cuda/gemm_alltoall*.cu; CPU reference:
 * src/cpu/gemm_alltoall.c; workspace layout: gemm_alltoall.h.
 *
 * Shape every rank must agree on: k, n, dtype, w_layout, a_rows, out_rows. The capacities are
 * agreed because the workspace is sized from them and growth is collective.
 *
 * Workspace per rank (layout: gemm_alltoall.h), S(x) = roundup(x·N·es, 256),
 * R = headers + S(out_rows):
 *   impl 1 (and cpu, every impl):  2·(R + plan)             two halves (the workspace rule)
 *   impl 2:                         2·(R + plan + S(a_rows))
 *   impl 0: one rank                0                        the GEMMs write out directly
 *           local                   S(a_rows)                private scratch, no halves
 *           nccl                    2·S(a_rows) + totals + S(out_rows) (receives into the
 *                                   workspace: gemm_alltoall.h says why)
 *   AUTO: the most of the three (whatever it resolves to).
 *
 * CUDA graphs: impl 1 reads the counts on the device only and is always capturable. Impls 0
 * and 2 size their cuBLAS GEMMs on the host: while capturing they need counts_host (else
 * FCO_ERR_INVALID_USAGE here, before anything is issued), and a replay must keep those counts
 * (the kernels compare a digest and report FCO_ERR_INVALID_ARGUMENT otherwise). impl 0 on nccl
 * also needs recv_rows_host while capturing or when one thread drives several ranks.
 */
#include <string.h>

#include "../core/internal.h"
#include "gemm_alltoall.h"

_Static_assert(sizeof(fco_gemm_a2a_args_t) <= FCO_OP_ARGS_BYTES, "args fit fco_op_t.u.raw");

/* Can `impl` run here (GPU transports)? NULL when it can, else why not. */
static const char* impl_blocked(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int impl,
                                int capturing) {
  if (impl == 1 || comm->transport == FCO_TRANSPORT_CPU) return NULL;
  if (!a->counts_host && capturing)
    return "without counts_host it copies the counts to the host and synchronises the stream, "
           "which cannot be captured into a CUDA graph: pass counts_host (and replay with those "
           "counts) or use impl 1";
  if (impl == 0 && comm->transport == FCO_TRANSPORT_NCCL && comm->nranks > 1 &&
      !a->recv_rows_host && (comm->world || capturing))
    return "on the nccl transport it needs recv_rows_host when one thread drives several ranks "
           "or the stream is being captured (ncclSend/Recv sizes must be known on the host)";
  return NULL;
}

/* AUTO (GPU transports): impl 1 (tiles) where the GEMM reads W more than it computes (K ≤ 2048,
 * below; at one rank: where experts are small, at the end of this comment), else on nccl impl 2 (chunks) whenever it can run, else impl 0, else impl 1 (the only
 * impl that captures without counts_host); on local impl 0, else 2, else 1.
 * Measured on 2×H200, CUDA graphs, bf16, 0 wrong, µs impl 0 / tiles / chunks, impl 1 with
 * WgmmaTileTma and its expert-major tile order (bench/results/2026-11-30_nvidia-h200-x2_0f4e81f):
 *   4096,14336,4096,8,2   1413 / 1451 / 1375     1024,14336,4096,8,2 skew 4   547 / 649 / 516
 *   1024,14336,4096,8,2    366 /  337 / 334      128,2048,7168,32,8 (decode)  249 / 206 / 232
 *   512,2048,7168,32,8     393 /  249 / 376
 * local (2 virtual ranks on one H200, same run, copy / tiles / chunks): 2353 / 2472 / 2372,
 * 615 / 637 / 634, 533 / 444 / 681, 745 / 1068 / 777, 418 / 386 / 448.
 * Tiles win where K is small (2048: W of 32 experts is read once per call, the GEMM is bound by
 * reading it, and the tiles' stores to peers hide behind those reads: 1.58× impl 0 at 512 tokens,
 * 1.21× at decode) and tie or lose by up to 5 % at K = 14336 (compute-bound: cuBLAS's GEMM is
 * faster than the tile there) and under skew. The host knows neither the routing nor the rows
 * without a sync (counts are device-side; counts_host is an optional hint and may be NULL), so
 * the rule reads agreed values only (shape[] is compared across ranks): dtype, k, n and P.
 * Tiles when bf16 / f16 (tensor-core tile), k and n multiples of 8 (the wgmma tiles'
 * requirement) and k ≤ 2048. The threshold is a measured point, not an interpolated crossover:
 * K between 2048 and 14336 is unmeasured, as are skewed routing at K 2048, P > 2 and devices
 * without wgmma (the default build, sm_90, runs only on compute capability 9.x, where impl 1 has
 * the wgmma tiles; a rank with unaligned pointers or FCO_GA_TILE=mma runs impl 1 with a slower
 * tile). Outside the rule, impl = 1 remains the caller's choice. So AUTO is never slower than
 * impl 0 on the measured shapes (nccl and local).
 * One rank (P = 1): impl 0 is the GEMMs straight into out (the all-to-all is the identity;
 * since session 16), so tiles race cuBLAS's per-expert GEMMs alone. They win where an expert
 * has few rows (a GEMM of 256 rows × N 4096 is 64 of cuBLAS's 128×128 tiles, half of the 132
 * SMs; the persistent tile kernel fills them across experts) and lose where experts are large,
 * at every K: one H200, run 2026-12-01_nvidia-h200_d558715-probe, graphs, µs cuBLAS GEMMs alone
 * / tiles, N 4096 E 8 top-2 (rows per expert = tokens / 4) at K 2048 / 4096 / 8192 / 14336:
 *   64 rows   60.6 / 47.8    95.8 / 81.0   180.6 / 146.2   280.0 / 240.3
 *   128       64.9 / 50.0   112.3 / 83.7   206.1 / 149.3   295.4 / 247.4
 *   256       78.1 / 65.1   132.8 / 108.0  237.1 / 196.3   387.2 / 340.5
 *   512      107.7 / 112.6  188.8 / 194.1  366.5 / 379.9   637.6 / 667.9
 *   1024     190.9 / 207.9  352.5 / 381.4  705.1 / 746.0  1179.2 / 1339.5
 * and N 7168 K 2048 E 32 top-8 at 32 / 64 / 128 / 256 / 512 rows per expert: 333.0 / 257.2,
 * 341.0 / 263.1, 342.2 / 276.5, 412.9 / 395.6, 710.3 / 773.4. With impl 0 writing out
 * directly (run 2026-12-01_nvidia-h200_650f691, impl 0 / tiles, -R 6): 384 rows per expert
 * 92.4 / 88.0 (K 2048), 543.8 / 565.3 (K 14336), 601.6 / 603.1 (E 32); 512 rows 114.3 / 114.6,
 * 673.8 / 703.5 — and skewed routing (1024 tokens, expert 0 4× the mean: 1024 of its 2048 rows)
 * 454.8 / 491.5 although the mean is 256. So at one rank: tiles when the tile rule's dtype /
 * alignment hold and every expert has ≤ 256 rows — from counts_host when given, else the mean
 * of the capacity a_rows (with padding it sees more rows than run; without the hint skew is
 * invisible) — else impl 0 (else 2, else 1). Session 36 (run 2026-12-04_nvidia-h200_d9de2c3-ga1rule,
 * P = 1, hints passed, µs impl 0 / tiles, graphs): at K ≤ 2048 N decides as much as the rows — an
 * expert's GEMM of m rows is about m·N / 16384 of cuBLAS's 128×128 tiles, fewer than the SMs
 * until m·N nears 2^21 — and skew does not hurt the tiles: 2048 tokens, K 1408, N 2048, E 16,
 * top-2 (mean 256 rows) 95.1 / 54.3, and 101.5 / 69.1 with expert 0 at 4× the mean (1024 rows);
 * top-4 (mean 512) 119.3 / 88.7; 512 tokens, K 2048, N 7168, E 32, top-8 with expert 0 at
 * 2 / 3 / 4× the mean of 128 349.8 / 285.8, 354.9 / 295.5, 358.3 / 294.7; 1536 tokens, K 2048,
 * N 4096, E 8 (mean 384) 94.7 / 90.2 — the ≤ 256 rule took impl 0 in all but the balanced
 * 2048-token row and the 2× skew (256 rows)
 * (examples/moe_layer.py at one rank: random routing, ~300 rows on the largest expert, impl 0
 * 266 µs eager against the tiles' 79, run ..._d9de2c3-examples). At K 14336 skew does hurt the
 * tiles (long tiles, quantised waves: 1024 tokens, mean 256, expert 0 at 1.25× 467.6 / 504.5,
 * 2× 465.1 / 500.8; mean 384 557.8 / 558.1). So at one rank, K ≤ 2048: tiles where the mean
 * rows per expert · N < 2^21 (kOneRankMeanCells; N 4096: < 512 rows, N 7168: < 293) and, with
 * counts_host, no expert's rows · N exceed 2^23 (kOneRankMaxCells: 4× that, above every
 * measured win; one giant expert is where cuBLAS is at its best, unmeasured); K > 2048: the
 * ≤ 256 rule above. Before session 16 impl 0 at one rank went through
 * scratch, pack, a self send / receive and a copy (1370 µs at 4096 tokens × K 14336, now
 * 1258.6), and one rank took tiles where K ≤ 2048 (session 15), before that chunks.
 * Local transport above two ranks (session 18): the P virtual ranks share one GPU, each rank's
 * tile kernel gets 1/P of the SMs while impl 0 runs every rank's GEMMs with all of them, so the
 * tiles' lead shrinks with P and turns into a loss where the experts are large — one H200,
 * graphs, µs impl 0 / tiles, K 2048 (runs 2026-12-01_nvidia-h200_8b9715b-local, 7a8c689-local8):
 * 512 tokens × 32 experts top-8 (a_rows 4096) P = 2 489.7 / 449.8, P = 4 800.7 / 845.3, P = 8
 * 1681.7 / 1792.0; 128 tokens (a_rows 1024) P = 2 374.6 / 277.5, P = 4 386.5 / 318.0, P = 8
 * 495.0 / 478.0. So on local with P > 2 tiles only where a_rows (agreed by every rank) ≤
 * kLocalTilesMaxRows = 2048 (P = 3 unmeasured: it takes the P > 2 rule).
 * Local transport at P ≥ 2, routing that is not balanced (session 37, run
 * 2026-12-04_nvidia-h200_0d43f65-random, graphs, µs impl 0 / tiles, random routing: each token's
 * top-k distinct experts drawn at random, fco-bench's skew "r"): at P = 2, K 2048, N 4096, 8
 * experts, top-2, 1024 tokens (mean 512 rows per expert) 137.0 / 147.4, 2048 tokens 238.5 /
 * 257.8 — the tiles lose as with skew (session 36: 0.92× / 0.78× at 2× / 4×), while the balanced
 * 1024-token row wins (134.3 / 123.1): a virtual rank's busiest expert runs on the half of the
 * SMs its tile kernel holds. They still win where mean rows · N is smaller (2048 tokens, K 1408,
 * N 2048, 16 experts: 150.3 / 117.5; 128 tokens, N 7168, 32 experts: 375.9 / 280.9) and tie at
 * 512 tokens there (537.9 / 529.8). The host sees the routing of no rank but its own, so the
 * rule reads a_rows (agreed; a capacity larger than the rows run makes it pick impl 0 sooner):
 * on local at P ≥ 2 tiles only where a_rows / E_r · N < 2^21 (kOneRankMeanCells, the one-rank
 * bound), which gives up the balanced 1024-token row's 1.09× for the random rows' 1.07–1.08×
 * and the skewed ones' up to 1.28×. The nccl transport's rule (two GPUs, each rank's tiles on
 * all of its SMs) is unchanged: those rows are unmeasured there
 * (bench/results/pending/x2-session15.sh).
 * Then impl 0 got its strided batched GEMM for balanced routing (fco_ga_batched_rows; run
 * 2026-12-04_nvidia-h200_27ecec1-batched, local P = 2, balanced, µs impl 0 / tiles): 512 tokens,
 * K 2048, N 7168, 32 experts, top-8 (a_rows / E_r · N ≈ 1.8 · 2^20) 419.4 / 453.8, 2048 tokens,
 * K 1408, N 2048, 16 experts, top-2 (2^20) 96.5 / 99.2, decode (128 tokens, ≈ 0.44 · 2^20) 280.0 /
 * 277.6. Under random routing impl 0 keeps its GEMM per expert and the tiles lead there (1.02×,
 * 1.28×, 1.34×, run ..._0d43f65-random), but the rule cannot tell the two apart; never slower than
 * impl 0 wins: on local the bound is a_rows / E_r · N < 2^20 (kLocalMeanCells), decode-sized
 * rows keep the tiles; with E_r unlike across ranks, a_rows · P / Σ E_r · N (fco_ga_agree).
 * FCO_GEMM_A2A_AUTO=<impl> forces a choice for experiments (when that impl can run). The rule
 * depends only on agreed values, E_r (local) and on whether hints are passed / the stream
 * captures (at one rank, where nothing needs agreeing, also on counts_host's values); on local,
 * where E_r and the hints may differ across ranks, fco_ga_agree makes one choice for all. */
enum { kLocalTilesMaxRows = 2048 };
static const int64_t kOneRankMeanCells = (int64_t)1 << 21, kOneRankMaxCells = (int64_t)1 << 23;
static const int64_t kLocalMeanCells = (int64_t)1 << 20;

/* impl 0's strided batched GEMM (gemm_alltoall.h). One H200, bf16, CUDA graphs, P = 1, balanced
 * routing, µs impl 0 with one cublasGemmEx per expert / with the batched GEMM / impl 1 (run
 * 2026-12-04_nvidia-h200_27ecec1-batched): 2048 tokens, K 1408, N 2048, 16 experts, top-2 (256
 * rows per expert) 95.1 / 40.3 / 53.7; 1024, 2048, 4096, 8, 2 (256 rows) 81.6 / 51.0 / 64.4;
 * 128, 2048, 7168, 32, 8 (32 rows) 339.3 / 235.9 / 255.4; 512, 2048, 7168, 32, 8 (128 rows)
 * 346.7 / 260.1 / 279.0; 1024, 14336, 4096, 8, 2 (256 rows) 422.2 / 343.8 / 368.0 — but 4096,
 * 14336, 4096, 8, 2 (1024 rows, m · N = 2^22) 1253.6 / 1293.5: 3 % slower, where each expert's
 * GEMM fills the GPU on its own. So batched where m · N ≤ 2^21 (at most 128 of cuBLAS's 128×128
 * tiles an expert, fewer than the 132 SMs; measured wins up to 2^20). */
static const int64_t kBatchedMaxCells = (int64_t)1 << 21;
int64_t fco_ga_batched_rows(const int32_t* counts, int E, int P, int64_t n, int blas_loop) {
  if (E < 2 || blas_loop) return 0;
  int64_t first = 0;
  for (int e = 0; e < E; e++) {
    int64_t m = 0;
    for (int s = 0; s < P; s++) m += counts[(size_t)e * P + s];
    if (m <= 0 || (e > 0 && m != first)) return 0;
    first = m;
  }
  return first * n <= kBatchedMaxCells ? first : 0;
}

static int one_rank_tiles_win(const fco_gemm_a2a_args_t* a) {
  const int64_t E = a->num_experts;
  /* Balanced (hint): impl 0 runs one strided batched GEMM, 1.06–1.33× faster than the tiles
   * on the five rows above where it runs (run 27ecec1-batched). */
  if (a->counts_host &&
      fco_ga_batched_rows(a->counts_host, (int)E, 1, a->n, a->knobs.blas_loop) > 0)
    return 0;
  if (a->k <= 2048) {
    int64_t rows = a->a_rows; /* without the hint: the capacity's mean */
    if (a->counts_host) {
      rows = 0;
      for (int e = 0; e < E; e++) {
        if ((int64_t)a->counts_host[e] * a->n > kOneRankMaxCells) return 0;
        rows += a->counts_host[e];
      }
    }
    return rows * a->n < kOneRankMeanCells * E;
  }
  if (!a->counts_host) return a->a_rows <= 256 * E;
  for (int e = 0; e < E; e++)
    if (a->counts_host[e] > 256) return 0;
  return 1;
}

/* esum: the experts of all P ranks as the rule counts them (a rank alone: P · E_r; fco_ga_agree:
 * Σ E_r, so that ranks with different E_r choose alike: a_rows · P / Σ E_r is the mean rows an
 * expert over the world, a_rows / E_r where every E_r is the same). */
static int tiles_win(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int64_t esum) {
  if (!((a->dtype == FCO_BF16 || a->dtype == FCO_F16) && a->k % 8 == 0 && a->n % 8 == 0))
    return 0;
  if (comm->nranks == 1) return one_rank_tiles_win(a);
  if (comm->transport == FCO_TRANSPORT_LOCAL &&
      ((comm->nranks > 2 && a->a_rows > kLocalTilesMaxRows) ||
       (double)a->a_rows * (double)a->n * comm->nranks >= (double)(kLocalMeanCells * esum)))
    return 0;
  return a->k <= 2048;
}

/* AUTO's choice (GPU transports) given which impls cannot run (bit i: impl i is blocked, on this
 * rank or, from fco_ga_agree, on any rank). Impl 1 is never blocked. */
static int choose_impl(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int64_t esum,
                       unsigned blocked) {
  const int forced = a->knobs.auto_impl - 1; /* FCO_GEMM_A2A_AUTO (read_knobs), −1: unset */
  if (forced >= 0 && forced < FCO_GEMM_ALLTOALL_NUM_IMPLS && !(blocked >> forced & 1u))
    return forced;
  if (tiles_win(comm, a, esum)) return 1;
  /* One rank has nothing to push while the next chunk computes: impl 0 first (below). */
  const int first = comm->transport == FCO_TRANSPORT_NCCL && comm->nranks > 1 ? 2 : 0;
  if (!(blocked >> first & 1u)) return first;
  if (!(blocked >> (2 - first) & 1u)) return 2 - first;
  return 1;
}

static unsigned blocked_mask(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int capturing) {
  unsigned m = 0;
  for (int i = 0; i < FCO_GEMM_ALLTOALL_NUM_IMPLS; i++)
    if (impl_blocked(comm, a, i, capturing)) m |= 1u << i;
  return m;
}

int fco_ga_auto_impl(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int capturing) {
  if (comm->transport == FCO_TRANSPORT_CPU) return 1;
  return choose_impl(comm, a, (int64_t)comm->nranks * a->num_experts,
                     blocked_mask(comm, a, capturing));
}

static int resolve_impl(fco_comm_t comm, const fco_gemm_a2a_args_t* a, int impl, int capturing) {
  return impl != FCO_IMPL_AUTO ? impl : fco_ga_auto_impl(comm, a, capturing);
}

static size_t workspace(fco_comm_t comm, int64_t a_rows, int64_t out_rows, int64_t n,
                        fco_dtype_t dtype, int impl);

/* AUTO revised with every rank's call at hand (fco_op_info_t.agree; src/core/group.c calls it
 * for each batch). The per-rank rule reads two things ranks need not share: E_r (the local rule's
 * mean rows an expert, a_rows / E_r) and whether the hints are passed / the stream captures
 * (which impls can run). On the local transport a batch of all P ranks' AUTO calls has both at
 * hand: every rank runs the rule with Σ E_r and with the impls any rank cannot run left out —
 * the per-rank choice wherever the ranks' E_r and hints are alike, one choice where they are not
 * (before session 42 such a batch was refused: "impl differs across ranks"). Other transports,
 * explicit impls, and batches that are not every rank's keep the per-rank choice (on nccl the
 * rule reads agreed values only; a mismatch is the transport's to report). */
void fco_ga_agree(fco_op_t* ops, int n) {
  fco_comm_t c0 = ops[0].comm;
  if (c0->transport != FCO_TRANSPORT_LOCAL || n != c0->nranks || n < 2) return;
  fco_gemm_a2a_args_t a;
  int64_t esum = 0;
  unsigned blocked = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].kind != FCO_OP_GEMM_ALLTOALL || !ops[i].impl_auto) return;
    memcpy(&a, ops[i].u.raw, sizeof a);
    esum += a.num_experts;
    fco_comm_t c = ops[i].comm;
    int capturing = c->tops && c->tops->capturing ? c->tops->capturing(c, ops[i].stream) : 0;
    blocked |= blocked_mask(c, &a, capturing);
  }
  memcpy(&a, ops[0].u.raw, sizeof a); /* k, n, dtype, a_rows: agreed (shape[]) */
  const int impl = choose_impl(c0, &a, esum, blocked);
  for (int i = 0; i < n; i++) {
    memcpy(&a, ops[i].u.raw, sizeof a);
    ops[i].impl = impl;
    ops[i].ws_bytes = workspace(ops[i].comm, a.a_rows, a.out_rows, a.n, a.dtype, impl);
  }
}

static size_t workspace(fco_comm_t comm, int64_t a_rows, int64_t out_rows, int64_t n,
                        fco_dtype_t dtype, int impl) {
  const int P = comm->nranks, nccl = comm->transport == FCO_TRANSPORT_NCCL;
  const size_t es = fco_dtype_size(dtype);
  if (comm->transport == FCO_TRANSPORT_CPU) impl = 1;
  size_t most = 0;
  for (int i = 0; i < FCO_GEMM_ALLTOALL_NUM_IMPLS; i++)
    if (impl == FCO_IMPL_AUTO || impl == i) {
      /* Fused impls: two halves. impl 0: private scratch from offset 0, no halves. */
      size_t h = fco_ga_half_need(i, nccl, P, a_rows, out_rows, n, es) * (i == 0 ? 1 : 2);
      if (h > most) most = h;
    }
  return most;
}

static const int64_t kMaxElems = (int64_t)1 << 40;

static fco_result_t check_shape(fco_comm_t comm, int64_t a_rows, int64_t out_rows, int64_t k,
                                int64_t n, fco_dtype_t dtype, int impl, const char* fn) {
  if (!comm) return fco_set_error(NULL, FCO_ERR_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  if (fco_dtype_size(dtype) == 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: dtype %d is not FCO_F32, FCO_F16 or FCO_BF16", fn, (int)dtype);
  if (k < 1 || k > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: k %lld is not in 1..2^31-1", fn,
                         (long long)k);
  if (n < 1 || n > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: n %lld is not in 1..2^31-1", fn,
                         (long long)n);
  if (a_rows < 0 || a_rows > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: a_rows %lld is not in 0..2^31-1",
                         fn, (long long)a_rows);
  if (out_rows < 0 || out_rows > INT32_MAX)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: out_rows %lld is not in 0..2^31-1", fn, (long long)out_rows);
  /* Each size fits an int32, their products not always a size_t in bytes: the workspace and
   * the overlap checks multiply them (until session 55 out_rows 2^30 + 1 by n 2^31 - 2 wrapped the
   * workspace query to 35 KB). The cap the other ops use: 2^40 elements of one matrix. */
  static const struct { const char* what; int i, j; } kProducts[] = {
      {"a_rows x k (elements of a)", 0, 2}, {"a_rows x n (rows of a times n)", 0, 3},
      {"out_rows x n (elements of out)", 1, 3}};
  const int64_t v[4] = {a_rows, out_rows, k, n};
  for (size_t i = 0; i < sizeof kProducts / sizeof kProducts[0]; i++)
    if (v[kProducts[i].i] * v[kProducts[i].j] > kMaxElems)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: %s = %lld x %lld is absurd (> 2^40)", fn, kProducts[i].what,
                           (long long)v[kProducts[i].i], (long long)v[kProducts[i].j]);
  if (impl != FCO_IMPL_AUTO && (impl < 0 || impl >= FCO_GEMM_ALLTOALL_NUM_IMPLS))
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: impl %d is not 0..%d or FCO_IMPL_AUTO (-1)", fn, impl,
                         FCO_GEMM_ALLTOALL_NUM_IMPLS - 1);
  return FCO_OK;
}

fco_result_t fco_gemm_alltoall_workspace(fco_comm_t comm, int64_t a_rows, int64_t out_rows,
                                         int64_t k, int64_t n, fco_dtype_t dtype, int impl,
                                         size_t* bytes) {
  FCO_CHECK(check_shape(comm, a_rows, out_rows, k, n, dtype, impl, "fco_gemm_alltoall_workspace"));
  if (!bytes)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "fco_gemm_alltoall_workspace: bytes is NULL");
  *bytes = workspace(comm, a_rows, out_rows, n, dtype, impl);
  return FCO_OK;
}

const char* fco_gemm_alltoall_impl_name(fco_comm_t comm, int impl) {
  if (!comm) return NULL;
  if (impl == FCO_IMPL_AUTO) return "auto";
  return fco_op_impl_name(FCO_OP_GEMM_ALLTOALL, comm->transport, impl);
}

/* Host-side checks of the hints, each whenever it is given: nothing is launched when one fails
 * (recv_rows_host was checked only beside counts_host before session 42: alone, a negative
 * entry passed, and the cpu backend read it as "no hint"). */
static fco_result_t check_hints(fco_comm_t comm, const fco_gemm_a2a_args_t* a) {
  int P = comm->nranks;
  int64_t sum = 0;
  if (a->counts_host) {
    for (int e = 0; e < a->num_experts; e++)
      for (int s = 0; s < P; s++) {
        int32_t c = a->counts_host[(size_t)e * P + s];
        if (c < 0)
          return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                               "fco_gemm_alltoall: counts_host[%d][%d] = %d is negative", e, s, c);
        sum += c;
      }
    if (sum > a->a_rows)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "fco_gemm_alltoall: counts_host sum to %lld rows, more than a_rows %lld",
                           (long long)sum, (long long)a->a_rows);
  }
  if (a->recv_rows_host) {
    int64_t r = 0;
    for (int s = 0; s < P; s++) {
      if (a->recv_rows_host[s] < 0)
        return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                             "fco_gemm_alltoall: recv_rows_host[%d] = %d is negative", s,
                             a->recv_rows_host[s]);
      r += a->recv_rows_host[s];
    }
    if (r > a->out_rows)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "fco_gemm_alltoall: recv_rows_host sum to %lld rows, more than "
                           "out_rows %lld",
                           (long long)r, (long long)a->out_rows);
  }
  return FCO_OK;
}

/* The call's launch knobs (fco_ga_knobs_t), read once here on every transport: the launchers
 * (src/cuda/gemm_alltoall*.cu) and AUTO's rule read no environment (until session 53 they read it
 * at every launch). Refused: FCO_GEMM_A2A_AUTO outside -1..2 (an impl that does not exist; until
 * session 52 ignored without a word) and FCO_GA_EPI=async beside a FCO_GA_TILE other than tma
 * (the asynchronous epilogue exists for the default tile only; until session 53 ignored without a
 * word). An unknown name of the string knobs, or an on/off knob not 0 or 1, is said on stderr and
 * taken as unset; the sizes are clamped by the launchers (the docs' knob list). */
static fco_result_t read_knobs(fco_comm_t comm, const char* fn, fco_ga_knobs_t* k) {
  memset(k, 0, sizeof *k);
  const long long forced = fco_env_int("FCO_GEMM_A2A_AUTO", -1);
  if (forced < -1 || forced >= FCO_GEMM_ALLTOALL_NUM_IMPLS)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GEMM_A2A_AUTO=%lld is not 0..%d (unset or -1: off)", fn, forced,
                         FCO_GEMM_ALLTOALL_NUM_IMPLS - 1);
  k->auto_impl = (int32_t)forced + 1;
  static const char* const kTiles[] = FCO_GA_TILE_NAMES, *const kEpi[] = FCO_GA_EPI_NAMES;
  static const char* const kBlas[] = {"batched", "loop", NULL};
  k->tile = fco_env_choice("FCO_GA_TILE", kTiles, 0);
  k->epi_async = fco_env_choice("FCO_GA_EPI", kEpi, 0) == 1;
  if (k->epi_async && k->tile != 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: FCO_GA_EPI=async is the epilogue of FCO_GA_TILE=tma (the default), "
                         "not of FCO_GA_TILE=%s", fn, kTiles[k->tile]);
  k->blas_loop = fco_env_choice("FCO_GA_BLAS", kBlas, 0) == 1;
  k->tiles_blocks = fco_env_int("FCO_GA_TILES_BLOCKS", 0);
  k->chunk_rows = fco_env_int("FCO_GA_CHUNK_ROWS", 0);
  k->push_blocks = fco_env_int("FCO_GA_PUSH_BLOCKS", 0);
  k->staged = !fco_env_flag("FCO_GA_DIRECT", 1);
  k->land_early = fco_env_flag("FCO_GA_LAND_EARLY", 0);
  k->fault_push = fco_env_int("FCO_FAULT_GA_PUSH", 0) == 1;
  return FCO_OK;
}

static fco_result_t gemm_alltoall_call(fco_comm_t comm, const void* a, int64_t a_rows,
                                       const void* w, int w_layout, int num_experts,
                                       const int32_t* counts, const int32_t* counts_host,
                                       const int32_t* recv_rows_host, void* out, int64_t out_rows,
                                       int64_t k, int64_t n, fco_dtype_t dtype, int impl,
                                       void* stream) {
  const char* fn = "fco_gemm_alltoall";
  FCO_CHECK(check_shape(comm, a_rows, out_rows, k, n, dtype, impl, fn));
  if (comm->async_error != FCO_OK) return fco_async_refuse(comm, fn);
  if (w_layout != FCO_W_KN && w_layout != FCO_W_NK)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: w_layout %d is not FCO_W_KN (0) or FCO_W_NK (1)", fn, w_layout);
  fco_ga_knobs_t knobs;
  FCO_CHECK(read_knobs(comm, fn, &knobs));
  if (num_experts < 1 || num_experts > FCO_GEMM_ALLTOALL_MAX_EXPERTS)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: num_experts %d is not in 1..%d", fn,
                         num_experts, FCO_GEMM_ALLTOALL_MAX_EXPERTS);
  if (k * n > kMaxElems / num_experts)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                         "%s: num_experts x k x n = %d x %lld x %lld elements of w is absurd "
                         "(> 2^40)", fn, num_experts, (long long)k, (long long)n);
  if (!a && a_rows > 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: a is NULL (a_rows %lld)", fn,
                         (long long)a_rows);
  if (!w) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: w is NULL", fn);
  if (!counts) return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: counts is NULL", fn);
  if (!out && out_rows > 0)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: out is NULL (out_rows %lld)", fn,
                         (long long)out_rows);
  size_t es = fco_dtype_size(dtype);
  const void* const ptrs[3] = {a, w, out};
  for (int i = 0; i < 3; i++)
    if ((uintptr_t)ptrs[i] % es)
      return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT,
                           "%s: %s %p is not aligned to the element size %zu", fn,
                           (const char* const[]){"a", "w", "out"}[i], ptrs[i], es);
  if ((uintptr_t)counts % 4)
    return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: counts %p is not 4-byte aligned",
                         fn, (const void*)counts);
  if (out) {
    /* out is written while every input is still being read: a and w (w: [E_r, K, N] or
     * [E_r, N, K], checked since session 42), counts (device) and the host hints (until session
     * 55 a counts array carved out of out's tail was accepted, and the cpu reference re-read it
     * after rows had overwritten it: a crash) */
    const char* po = (const char*)out;
    const size_t bo = (size_t)out_rows * (size_t)n * es;
    const size_t EP = (size_t)num_experts * (size_t)comm->nranks;
    const struct { const char* name; const void* p; size_t bytes; } in[5] = {
        {"a", a, (size_t)a_rows * (size_t)k * es},
        {"w", w, (size_t)num_experts * (size_t)k * (size_t)n * es},
        {"counts", counts, EP * 4},
        {"counts_host", counts_host, EP * 4},
        {"recv_rows_host", recv_rows_host, (size_t)comm->nranks * 4}};
    for (int i = 0; i < 5; i++) {
      const char* pi = (const char*)in[i].p;
      if (pi && pi < po + bo && po < pi + in[i].bytes)
        return fco_set_error(comm, FCO_ERR_INVALID_ARGUMENT, "%s: out overlaps %s", fn,
                             in[i].name);
    }
  }
  fco_op_t op;
  memset(&op, 0, sizeof op);
  fco_gemm_a2a_args_t* g = (fco_gemm_a2a_args_t*)op.u.raw;
  g->a = a;
  g->w = w;
  g->out = out;
  g->counts = counts;
  g->counts_host = counts_host;
  g->recv_rows_host = recv_rows_host;
  g->a_rows = a_rows;
  g->out_rows = out_rows;
  g->k = k;
  g->n = n;
  g->num_experts = num_experts;
  g->w_layout = w_layout;
  g->dtype = dtype;
  g->knobs = knobs;
  FCO_CHECK(check_hints(comm, g));
  int capturing = comm->tops->capturing ? comm->tops->capturing(comm, stream) : 0;
  op.kind = FCO_OP_GEMM_ALLTOALL;
  op.comm = comm;
  op.impl = resolve_impl(comm, g, impl, capturing);
  op.impl_auto = impl == FCO_IMPL_AUTO;
  const char* why = impl_blocked(comm, g, op.impl, capturing);
  if (why)
    return fco_set_error(comm, FCO_ERR_INVALID_USAGE, "%s: impl %d cannot run here: %s", fn,
                         op.impl, why);
  op.stream = stream;
  op.ws_bytes = workspace(comm, a_rows, out_rows, n, dtype, op.impl);
  op.shape[0] = k;
  op.shape[1] = n;
  op.shape[2] = (int64_t)dtype;
  op.shape[3] = w_layout;
  op.shape[4] = a_rows;
  op.shape[5] = out_rows;
  return fco_op_submit(&op);
}

/* The public entry: a refusal inside a group is noted (fco_op_call_result). */
fco_result_t fco_gemm_alltoall(fco_comm_t comm, const void* a, int64_t a_rows, const void* w,
                               int w_layout, int num_experts, const int32_t* counts,
                               const int32_t* counts_host, const int32_t* recv_rows_host,
                               void* out, int64_t out_rows, int64_t k, int64_t n,
                               fco_dtype_t dtype, int impl, void* stream) {
  return fco_op_call_result(comm, gemm_alltoall_call(comm, a, a_rows, w, w_layout, num_experts,
                                                     counts, counts_host, recv_rows_host, out,
                                                     out_rows, k, n, dtype, impl, stream));
}

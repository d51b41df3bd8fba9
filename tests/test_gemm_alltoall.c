/*
 * test_gemm_alltoall.c — fco_gemm_alltoall (grouped GEMM + combine all-to-all) against a float64
 * host reference; the operator's semantics (its input checks and AUTO's rule:
 * test_gemm_alltoall_checks.c; the fixture both share, with the error bound:
 * tests/common/ga_fixture.h).
 *   P = 1..4 ranks, E_r = 1..3 experts per rank (different per rank), ragged counts with zero
 *   rows for some (expert, source) pairs and whole sources, K and N odd or not a multiple of the
 *   tile (1, 17, 100, 136, ...), both weight layouts, f32 / f16 / bf16, impls 0, 1, 2 and AUTO,
 *   with and without the host hints; outputs poisoned first and guarded after their capacity
 *   (rows past the received total must stay poison). The same with impl 2's small chunks and
 *   early landing and impl 1's asynchronous epilogue (FCO_GA_* knobs, set and reset in main).
 *   Then calls back to back without a sync, outputs in symmetric memory (fco_mem_alloc) on some
 *   or every rank, a fixed asymmetric routing (rank 0 → 1 ≠ rank 1 → 0, one direction empty),
 *   MiB-sized messages per peer (nccl impl 0: NCCL's SIMPLE protocol, not LL), balanced routing
 *   (impl 0's one strided batched GEMM where experts are small, else and with FCO_GA_BLAS=loop
 *   its GEMM per expert, named in fco_last_plan on GPU transports), and on the local
 *   transport CUDA-graph replays with changing device counts, and with the host hints (impls 2
 *   and 0, impl 0 also on balanced routing, its batched GEMM: capture without counts_host
 *   refused, new inputs, other device counts refused).
 *   make test   or   build/tests/test_gemm_alltoall   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 runs fewer shapes; FCO_TEST_MAX_RANKS (up to
 * 8) the largest world.
 */
#include <stdlib.h>
#include <string.h>

#include "ga_fixture.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};
static const int kImpls[] = {0, 1, 2, FCO_IMPL_AUTO};

static void one(const t_world_t* w, int K, int N, int layout, fco_dtype_t dt, int impl, int hints,
                int big) {
  uint64_t seed = t_next_seed();
  t_context("P=%d K=%d N=%d %s %s impl=%d hints=%d big=%d sym=0x%x seed=0x%016llx", w->n, K, N,
            layout ? "W[N,K]" : "W[K,N]", fco_dtype_name(dt), impl, hints, big, ga_sym_mask,
            (unsigned long long)seed);
  ga_case_t c;
  ga_make_case(&c, w->n, K, N, layout, dt, seed, big, (int)(seed % 3));
  ga_run_checked(w, &c, impl, hints);
}

/* Calls issued back to back without a sync, with allreduces (fused impl 1) between them:
 * gemm_alltoall impls 1, 2, 0, 1, 2, 0, 1 with different counts, buffers and shapes, so calls
 * alternate workspace halves, mix ops and follow impl 0 (scratch in the workspace, a barrier on
 * nccl) — the workspace rule of src/core/internal.h without any handshake. One sync, then
 * check all. */
#define B2B 7
static void back_to_back(const t_world_t* w) {
  static const int kSeq[B2B] = {1, 2, 0, 1, 2, 0, 1};
  ga_case_t c[B2B];
  ga_bufs_t b[B2B];
  t_ar_bufs_t ar[2];
  uint64_t ar_seed[2];
  size_t ws = 0, x = 0;
  for (int i = 0; i < B2B; i++) {
    ga_make_case(&c[i], w->n, 33 + 8 * i, 24 + i, i % 2, i % 3 == 2 ? FCO_F16 : FCO_BF16,
                 t_next_seed(), i == 3, 1 + i % 2);
    ga_upload(w, &c[i], &b[i]);
    ASSERT_OK(fco_gemm_alltoall_workspace(w->comms[0], c[i].a_rows, c[i].out_rows, c[i].K, c[i].N,
                                          c[i].dtype, kSeq[i], &x));
    if (x > ws) ws = x;
  }
  for (int j = 0; j < 2; j++) {
    t_ar_alloc(w, &ar[j], 3000);
    ar_seed[j] = t_next_seed();
    t_ar_prepare(w, &ar[j], 1000 + 1000 * j, FCO_F32, 0, ar_seed[j]);
    ASSERT_OK(fco_allreduce_workspace(w->comms[0], ar[j].count, FCO_F32, 1, &x));
    if (x > ws) ws = x;
  }
  ASSERT_OK(fco_comm_reserve(w->comms[0], ws)); /* no growth between the calls */
  t_context("P=%d back-to-back calls impls 1,AR,2,0,AR,1,2,0,1", w->n);
  for (int i = 0; i < B2B; i++) {
    ASSERT_OK(ga_issue(w, &c[i], &b[i], kSeq[i], 1, NULL));
    if (i == 0 || i == 2) ASSERT_OK(t_ar_run(w, &ar[i / 2], 1));
  }
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int i = 0; i < B2B; i++) {
    t_context("P=%d back-to-back call %d (impl %d)", w->n, i, kSeq[i]);
    ASSERT_EQ(ga_check(w, &c[i], &b[i]), 0);
    ga_free_bufs(w, &c[i], &b[i]);
    ga_free_case(&c[i]);
  }
  for (int j = 0; j < 2; j++) {
    t_context("P=%d back-to-back allreduce %d", w->n, j);
    ASSERT_EQ(t_ar_check(w, &ar[j], ar_seed[j]), 0);
    t_ar_free(w, &ar[j]);
  }
}

/* Outputs in symmetric buffers (fco_mem_alloc): every rank's, rank 0's only, every rank's but
 * rank 0's — peers store straight into a symmetric out and stage for the others, in one call —
 * for the fused impls and AUTO; with FCO_GA_DIRECT=0 (staging despite symmetric outs); then calls
 * back to back (halves alternate, other ops between) with every out symmetric. */
static void sym_outputs(const t_world_t* w) {
  const unsigned all = (1u << w->n) - 1, masks[3] = {all, 1u, all & ~1u};
  static const int impls[] = {1, 2, FCO_IMPL_AUTO};
  for (int m = 0; m < 3; m++) {
    if (!masks[m] || (m > 0 && masks[m] == all)) continue;
    ga_sym_mask = masks[m];
    for (int i = 0; i < 3; i++) {
      t_context("P=%d symmetric outs mask 0x%x impl %d", w->n, ga_sym_mask, impls[i]);
      one(w, 40, 24, i % 2, i == 1 ? FCO_F16 : FCO_BF16, impls[i], 1, 1);
    }
    one(w, 64, 136, 1, FCO_F32, 1, 0, 0);
  }
  ga_sym_mask = all;
  t_knob_set("FCO_GA_DIRECT", "0");
  one(w, 40, 24, 0, FCO_BF16, 1, 1, 1);
  one(w, 17, 136, 1, FCO_F16, 2, 1, 1);
  t_knob_reset("FCO_GA_DIRECT");
  back_to_back(w);
  ga_sym_mask = 0;
}

/* Asymmetric routing, fixed counts: rank 0 sends rank 1 42 rows (experts 0, 1: 37 + 5); rank 1
 * sends rank 0 none (variant 0) or 13 (variant 1), so what a pair of ranks sends each other
 * differs, one direction may be empty, and every rank gets a different total. Every impl; with
 * the hints (impl 0 on nccl sizes its ncclSend / ncclRecv from them) and without. */
static void asymmetric(const t_world_t* w) {
  const int P = w->n;
  if (P < 2) return;
  for (int variant = 0; variant < 2; variant++)
    for (int i = 0; i < 4; i++)
      for (int hints = 1; hints >= 0; hints--) {
        if (!hints && t_transport() == FCO_TRANSPORT_NCCL && kImpls[i] == 0) continue;
        ga_case_t c;
        ga_two_expert_case(&c, P, 24, 40, variant, FCO_BF16);
        for (int r = 0; r < P; r++)
          for (int e = 0; e < 2; e++)
            for (int s = 0; s < P; s++)
              c.counts[r][e * P + s] = r == 0 && s == 1   ? (e ? 5 : 37)
                                       : r == 1 && s == 0 ? (variant && !e ? 13 : 0)
                                                          : (r + 2 * s + e) % 4;
        ga_finish_case(&c, t_next_seed(), 1);
        t_context("P=%d asymmetric routing %d (0→1: %d rows, 1→0: %d), impl %d, hints %d", P,
                  variant, c.recv[1][0], c.recv[0][1], kImpls[i], hints);
        ga_run_checked(w, &c, kImpls[i], hints);
      }
}

/* Messages of MiBs per peer (every earlier case sends KiBs): on nccl impl 0's ncclSend/Recv
 * then use NCCL's SIMPLE protocol, whose zero-copy path needs the send and receive buffers
 * registered alike on both sides (LL, below tens of KiB, never registers). Sending from the
 * registered workspace into the caller's unregistered out hung there (fco-bench, moe_layer.py)
 * while every smaller case passed. Fixed counts, a different number per (rank, expert, source). */
static void large(const t_world_t* w) {
  const int P = w->n;
  static const int kIdx[] = {0, 2, 3}; /* impls 0, 2 and AUTO (1 on GPUs: K ≤ 2048), with the hints */
  for (int ii = 0; ii < 3; ii++) {
    const int i = kIdx[ii];
    ga_case_t c;
    ga_two_expert_case(&c, P, 16, 1024, FCO_W_NK, FCO_BF16);
    for (int r = 0; r < P; r++)
      for (int e = 0; e < 2; e++)
        for (int s = 0; s < P; s++) c.counts[r][e * P + s] = 1000 + 37 * e + 11 * s + 5 * r;
    ga_finish_case(&c, t_next_seed(), 3);
    t_context("P=%d large messages (%d rows 0→%d, %.1f MiB), impl %d", P, c.recv[P - 1][0],
              P - 1, c.recv[P - 1][0] * (double)c.N * 2 / (1 << 20), kImpls[i]);
    ga_run_checked(w, &c, kImpls[i], 1);
  }
}

/* Balanced counts for a two-expert case: each of a rank's experts gets the same rows in total
 * (sources differ, 3 + 5 · ((s + e + r) mod P)). */
static void balance_counts(ga_case_t* c, int P) {
  for (int r = 0; r < P; r++)
    for (int e = 0; e < 2; e++)
      for (int s = 0; s < P; s++) c->counts[r][e * P + s] = 3 + 5 * ((s + e + r) % P);
}

/* Every rank's fco_last_plan holds want (what impl 0's GEMMs were). */
static void expect_plan_has(const t_world_t* w, const char* want) {
  for (int r = 0; r < w->n; r++)
    if (!strstr(fco_last_plan(w->comms[r]), want))
      t_fail(__FILE__, __LINE__, "rank %d: impl 0 ran \"%s\", expected \"%s\" in it", r,
             fco_last_plan(w->comms[r]), want);
}

/* Balanced routing (balance_counts), where impl 0 runs one strided batched GEMM for all experts
 * (src/cuda/gemm_alltoall.cu, gemm_all); FCO_GA_BLAS=loop runs one GEMM per expert. Every impl,
 * both layouts, f32 with odd K and bf16, with the hints; on GPU transports impl 0's plan must
 * name the GEMMs that ran. */
static void balanced(const t_world_t* w) {
  const int P = w->n;
  const int gpu = t_transport() != FCO_TRANSPORT_CPU;
  for (int loop = 0; loop < 2; loop++) {
    t_knob_set("FCO_GA_BLAS", loop ? "loop" : NULL);
    for (int i = 0; i < 4; i++)
      for (int d = 0; d < 2; d++) {
        ga_case_t c;
        ga_two_expert_case(&c, P, d ? 40 : 17, d ? 24 : 136, (i + d) % 2,
                           d ? FCO_BF16 : FCO_F32);
        balance_counts(&c, P);
        ga_finish_case(&c, t_next_seed(), 2);
        t_context("P=%d balanced routing (%s), impl %d, %s", P, loop ? "FCO_GA_BLAS=loop" : "",
                  kImpls[i], fco_dtype_name(c.dtype));
        ga_run_checked(w, &c, kImpls[i], 1);
        if (gpu && kImpls[i] == 0)
          expect_plan_has(w, loop ? " kernel cublasGemmEx/expert "
                                  : " kernel cublasGemmStridedBatchedEx ");
      }
  }
  t_knob_reset("FCO_GA_BLAS");
  /* Balanced but large: 257 rows an expert · N 8192 > 2^21, where each expert's GEMM fills the
   * GPU on its own: one GEMM per expert (fco_ga_batched_rows). */
  ga_case_t c;
  ga_two_expert_case(&c, P, 16, 8192, FCO_W_NK, FCO_BF16);
  for (int r = 0; r < P; r++)
    for (int e = 0; e < 2; e++)
      for (int s = 0; s < P; s++) c.counts[r][e * P + s] = s ? 3 : 257 - 3 * (P - 1);
  ga_finish_case(&c, t_next_seed(), 0);
  t_context("P=%d balanced routing, 257 rows an expert, N 8192, impl 0", P);
  ga_run_checked(w, &c, 0, 1);
  if (gpu) expect_plan_has(w, " kernel cublasGemmEx/expert ");
}

#ifdef FCO_HAVE_CUDA
/* Local transport: capture one call (impl 1, no hints), replay it with new counts and inputs
 * written into the same device buffers, check every replay. */
static void graph_replay(const t_world_t* w) {
  cudaStream_t st;
  ASSERT_EQ(cudaSetDevice(ga_dev_of(w, 0)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  ga_case_t c;
  ga_bufs_t b;
  /* Slack 72 ≥ the most rows the replays' counts (each < 7, E ≤ 3, P ≤ 4) can need. */
  ga_make_case(&c, w->n, 72, 40, 1, FCO_BF16, t_next_seed(), 0, 72);
  ga_upload(w, &c, &b);
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(w->comms[0], c.a_rows, c.out_rows, c.K, c.N, c.dtype, 1,
                                        &ws));
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_reserve(w->comms[r], ws));
  t_context("P=%d graph capture", w->n);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = ga_issue(w, &c, &b, 1, 0, st);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_OK(r);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int it = 0; it < 3; it++) {
    t_context("P=%d graph replay %d", w->n, it);
    /* New counts (same E per rank) that fit the captured capacities. */
    uint64_t s = t_next_seed();
    memset(c.recv, 0, sizeof c.recv);
    for (int q = 0; q < w->n; q++) {
      for (int i = 0; i < c.E[q] * w->n; i++) {
        s = t_mix(s);
        c.counts[q][i] = (int32_t)(s % 7);
      }
      int64_t sum = 0;
      for (int i = 0; i < c.E[q] * w->n; i++) sum += c.counts[q][i];
      if (sum > c.a_rows) memset(c.counts[q], 0, (size_t)c.E[q] * w->n * 4);
      for (int i = 0; i < c.E[q] * w->n; i++) c.recv[i % w->n][q] += c.counts[q][i];
      t_put(w->transport, ga_dev_of(w, q), b.counts[q], c.counts[q], (size_t)c.E[q] * w->n * 4);
    }
    ga_poison(w, &c, &b);
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    for (int q = 0; q < w->n; q++) ASSERT_OK(fco_comm_get_async_error(w->comms[q]));
    ASSERT_EQ(ga_check(w, &c, &b), 0);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  ga_free_bufs(w, &c, &b);
  ga_free_case(&c);
}

/* Local transport, impls 0 and 2 (GEMM sizes from counts_host): capture without counts_host is
 * refused up front (FCO_ERR_INVALID_USAGE, nothing captured, the capture ends cleanly); with the
 * hints, replays with new inputs are right; a replay with other device counts reports
 * FCO_ERR_INVALID_ARGUMENT (the digest) and writes nothing. Own world: the last step leaves an
 * asynchronous error behind. */
static void graph_hinted(fco_transport_t t, int P, int impl, int balanced) {
  t_world_t w;
  t_context("P=%d graph impl %d%s: init", P, impl, balanced ? " balanced" : "");
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  cudaStream_t st;
  ASSERT_EQ(cudaSetDevice(ga_dev_of(&w, 0)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  ga_case_t c;
  ga_bufs_t b;
  if (balanced) { /* every expert the same rows: impl 0 captures its one strided batched GEMM */
    ga_two_expert_case(&c, P, 72, 40, 1, FCO_BF16);
    balance_counts(&c, P);
    ga_finish_case(&c, t_next_seed(), 8);
  } else {
    ga_make_case(&c, P, 72, 40, 1, FCO_BF16, t_next_seed(), 1, 8);
  }
  ga_upload(&w, &c, &b);
  size_t ws = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(w.comms[0], c.a_rows, c.out_rows, c.K, c.N, c.dtype, impl,
                                        &ws));
  ASSERT_OK(fco_comm_reserve(w.comms[0], ws));
  t_context("P=%d graph impl %d: capture without counts_host is refused", P, impl);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fco_result_t r = ga_issue(&w, &c, &b, impl, 0, st);
  cudaGraph_t g = NULL;
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_EQ(r, FCO_ERR_INVALID_USAGE);
  ASSERT_MSG(w.comms[0], "counts_host");
  if (g) cudaGraphDestroy(g);
  t_context("P=%d graph impl %d: capture with hints", P, impl);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  r = ga_issue(&w, &c, &b, impl, 1, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_OK(r);
  if (balanced && impl == 0) expect_plan_has(&w, " kernel cublasGemmStridedBatchedEx ");
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int it = 0; it < 2; it++) {
    t_context("P=%d graph impl %d: replay %d, new inputs", P, impl, it);
    ga_refill_a(&w, &c, &b, t_next_seed());
    ga_poison(&w, &c, &b);
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    for (int q = 0; q < P; q++) ASSERT_OK(fco_comm_get_async_error(w.comms[q]));
    ASSERT_EQ(ga_check(&w, &c, &b), 0);
  }
  t_context("P=%d graph impl %d: replay with other device counts", P, impl);
  c.counts[0][0] += c.counts[0][0] > 0 ? -1 : 1; /* still fits the capacities (slack 8) */
  t_put(w.transport, ga_dev_of(&w, 0), b.counts[0], c.counts[0], (size_t)c.E[0] * P * 4);
  ga_poison(&w, &c, &b);
  ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  ga_expect_rejected(&w, &c, &b, FCO_OK);
}
#endif

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = t_quick();
  int max = t_test_max_ranks(t) < GA_MAXP ? t_test_max_ranks(t) : GA_MAXP;
  static const int kShapes[][2] = {{1, 1},   {17, 17}, {100, 33}, {64, 136},
                                   {136, 64}, {3, 100}, {33, 300}};
  int nshapes = quick ? 3 : 7;
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    int k = 0;
    for (int sh = 0; sh < nshapes; sh++)
      for (int d = 0; d < 3; d++)
        for (int i = 0; i < 4; i++, k++) {
          int hints = (k % 3) != 0;
          /* impl 0 on a nccl world driven by one thread needs the host hints */
          if (t == FCO_TRANSPORT_NCCL && kImpls[i] == 0) hints = 1;
          one(&w, kShapes[sh][0], kShapes[sh][1], k % 2, kDtypes[d], kImpls[i], hints, 0);
        }
    /* Segments spanning several 128-row tiles, every impl. */
    for (int i = 0; i < 4; i++)
      one(&w, 40, 24, i % 2, i < 2 ? FCO_BF16 : FCO_F16, kImpls[i], 1, 1);
    if (!quick) one(&w, 256, 256, 0, FCO_BF16, 1, 0, 1);
    /* impl 2 with small chunks (experts split into 128-row GEMMs, groups, several pushes) and
     * few push blocks; read per call. */
    t_knob_set("FCO_GA_CHUNK_ROWS", "100");
    t_knob_set("FCO_GA_PUSH_BLOCKS", "3");
    one(&w, 40, 24, 0, FCO_BF16, 2, 1, 1);
    one(&w, 17, 136, 1, FCO_F16, 2, 0, 1);
    /* impl 2's early landing (FCO_GA_LAND_EARLY=1): with small chunks each push is followed by
     * a progress kernel and a land kernel; ordinary outs, then outs symmetric on some ranks
     * only (those land nothing early), then calls back to back (halves alternate, the
     * progress flags of one call never read in the next). */
    t_knob_set("FCO_GA_LAND_EARLY", "1");
    one(&w, 40, 24, 0, FCO_BF16, 2, 1, 1);
    one(&w, 17, 136, 1, FCO_F32, 2, 1, 1);
    if (p > 1) {
      ga_sym_mask = 1u; /* rank 0's out symmetric: its peers store into it, it lands nothing */
      one(&w, 40, 24, 1, FCO_F16, 2, 1, 1);
      ga_sym_mask = 0;
    }
    back_to_back(&w);
    t_knob_reset("FCO_GA_LAND_EARLY");
    t_knob_reset("FCO_GA_CHUNK_ROWS");
    t_knob_reset("FCO_GA_PUSH_BLOCKS");
    /* impl 1's asynchronous epilogue (FCO_GA_EPI=async: the TMA tile drains C with bulk copies
     * while the next tile computes; read per call, the same path elsewhere): 16-byte rows
     * (N 24, 136, 256) in both layouts and dtypes, several tiles per block and segments
     * spanning tiles, then calls back to back with other ops. */
    t_knob_set("FCO_GA_EPI", "async");
    for (int i = 0; i < 4; i++)
      one(&w, i < 2 ? 64 : 40, i < 2 ? 136 : 24, i % 2, i % 3 ? FCO_BF16 : FCO_F16, 1, i & 1, 1);
    one(&w, 256, 256, 1, FCO_BF16, 1, 0, 1);
    t_knob_set("FCO_GA_TILES_BLOCKS", "3"); /* many tiles per block: flags raised one tile late */
    one(&w, 64, 136, 0, FCO_BF16, 1, 0, 1);
    one(&w, 256, 256, 1, FCO_F16, 1, 1, 1);
    t_knob_reset("FCO_GA_TILES_BLOCKS");
    back_to_back(&w);
    t_knob_reset("FCO_GA_EPI");
    back_to_back(&w);
    sym_outputs(&w);
    asymmetric(&w);
    balanced(&w);
    large(&w);
#ifdef FCO_HAVE_CUDA
    if (t == FCO_TRANSPORT_LOCAL) graph_replay(&w);
#endif
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
#ifdef FCO_HAVE_CUDA
  if (t == FCO_TRANSPORT_LOCAL) {
    graph_hinted(t, max, 2, 0);
    graph_hinted(t, max, 0, 0);
    graph_hinted(t, max, 0, 1);
    printf("graphs with hints (impls 2, 0; 0 on balanced routing): ok\n");
  }
#endif
  return t_pass(t, max, t_test_rank_cap() < GA_MAXP ? t_test_rank_cap() : GA_MAXP);
}

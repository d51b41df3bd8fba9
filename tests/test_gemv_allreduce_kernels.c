/*
 * test_gemv_allreduce_kernels.c — fco_gemv_allreduce's kernel variants and call ordering: the LL
 * one-shot, the grouped / split tiles, PDL, and the chain (its semantics: test_gemv_allreduce.c;
 * the fixture both share: tests/common/gemv_fixture.h — every output poisoned first, fresh
 * seeded inputs per call, the float64 reference check, ranks' y bit-identical, guards intact).
 *   Every transport runs the chain: a call that reads the previous call's y (not yet synced)
 *   as its x and W (impls 0..3 and AUTO in pairs; f32 / bf16; the vector and the scalar path).
 *   On the cpu transport that is all; the rest runs on GPU transports.
 *   The LL one-shot (FCO_GEMV_AR_LL=1, impl 1 and AUTO): a sweep of
 *   M (up to 17: the fallback), N, K; y bit-identical to the plain one-shot's with fp32 LL
 *   words (FCO_GEMV_LL_FP32=1; by default bf16 / f16 partials travel rounded to the dtype,
 *   checked against the reference and across ranks); calls whose LL half holds stale words of
 *   earlier LL calls of other shapes / inputs, with other ops (gemv impl 0/1/2/3,
 *   fco_allreduce) issued in between without a sync; back-to-back LL calls of
 *   changing shapes; a CUDA graph; FCO_CHECK_ARGS; a silent peer (timeout, not a hang).
 *   FCO_TEST_LL=only runs just that part (GPU transports; 77 = skip elsewhere).
 *   The grouped tiles of M 17..64 (group_tests: every FCO_GEMV_GROUP
 *   value, K_r up to ~4600 so the cp.async ring wraps, K off the vector path, partial groups,
 *   split groups (FCO_GEMV_SPLIT auto, 1, 2, 3; slices left empty by a short K); partials pushed
 *   in the dtype (the default) and as fp32 (FCO_GEMV_GROUP_FP32=1, a third of the calls); the
 *   default TMA tile in groups of 8 (split 2 as cluster pairs and with FCO_GEMV_SPLIT_PAIR=0,
 *   3 and 2 ring stages, the mma.sync tile in groups of 8) and of 4 (FCO_GEMV_GROUP_TMA=4, and
 *   the automatic choice between the two checked against the plan) and the older tiles with
 *   FCO_GEMV_GROUP_TMA=0, each read back from fco_last_plan; the pairs' split finalise
 *   (FCO_GEMV_PAIR_FIN, on by default) and the owner's whole-group one; N 8192 at M 64, where
 *   one rank a GPU ties pairs of groups of 8 with unsplit groups of 4 (the pairs take it);
 *   then impl 2 on those groups, twophase_group_tests: several groups a block, split groups,
 *   fewer groups than ranks, back to back and in a CUDA graph; then impl 1 in rounds,
 *   FCO_GEMV_ROUNDS, rounds_tests);
 *   FCO_TEST_GROUP=only runs just that part (GPU transports; 77 = skip elsewhere).
 *   Then much of the operator's tests again with FCO_GEMV_PDL=1
 *   (programmatic dependent launch + W prefetch, pdl_tests): every fused kernel family, the
 *   prefetch knob's edges, back-to-back calls with PDL switched per call and among other ops,
 *   the chain eagerly and captured in CUDA graphs (a programmatic edge into a data dependency),
 *   graphs of single calls, FCO_CHECK_ARGS. FCO_TEST_PDL=only runs just that part (the chain
 *   alone on cpu).
 *   make test   or   build/tests/test_gemv_allreduce_kernels   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 makes the loops shorter.
 */
#include <stdlib.h>

#include "gemv_fixture.h"

/* ---- PDL chain (FCO_GEMV_PDL=1 on GPU transports; the same semantics everywhere) ---------- */
/* Call 1 (b's inputs, M1 = 16, N1 = 1000) writes y; call 2 reads that y, viewed as W2
 * [N2][K2] (N2 · K2 = 16 000: K2 = 128, the vector path for both calls, or 125, the scalar
 * one), and its
 * first M2 · K2 elements as x2 [M2][K2], on every rank, and writes y2; issued back to back
 * without a sync. With PDL, call 2's blocks are scheduled (and prefetch W2 = y into L2) while
 * call 1 still writes y: a read of x or W before griddepcontrol.wait, or a stale prefetched
 * line, shows as a wrong y2. y2 = Σ_r x2 · W2^T (every rank's y is the same), checked by the
 * same reference as any call, from the y that call 1 left (itself checked first). */
typedef struct {
  int impl1, impl2;
  fco_dtype_t dt;
  size_t M2, K2;
  int bias1;
} chain_t;

static fco_result_t issue_chain2(const t_world_t* w, const gemv_bufs_t* b, void* const* y2,
                                 const chain_t* c, void* const* streams) {
  const size_t N2 = 16 * 1000 / c->K2;
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    fco_result_t e = fco_gemv_allreduce(w->comms[r], b->y[r], b->y[r], NULL, y2[r], c->M2, N2,
                                        c->K2, c->dt, c->impl2, streams ? streams[r] : NULL);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* Before the calls: call 1's inputs, y and y2 poisoned (with their guards). */
static void chain_prepare(const t_world_t* w, gemv_bufs_t* b, void* const* y2, const chain_t* c,
                          uint64_t seed) {
  gemv_prepare(b, 16, 1000, c->K2 == 128 ? gemv_vec_kt(w->n) : 777, c->dt, c->bias1, seed);
  const size_t n2 = c->M2 * (16 * 1000 / c->K2) * fco_dtype_size(c->dt);
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(w->transport, r);
    t_memset(w->transport, d, y2[r], T_POISON, n2);
    t_memset(w->transport, d, (char*)y2[r] + n2, T_GUARD_BYTE, T_GUARD);
  }
}

/* After the sync: check call 1 (b), then call 2 against y as its inputs (b's host copies are
 * overwritten: b describes call 2 afterwards, with y = y2). */
static void chain_check(const t_world_t* w, gemv_bufs_t* b, void* const* y2, const chain_t* c) {
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0); /* call 1; rank 0's y now in hy0 (every rank's is the same) */
  const size_t N2 = 16 * 1000 / c->K2;
  for (int r = 0; r < w->n; r++) {
    for (size_t i = 0; i < c->M2 * c->K2; i++) b->hx[r][i] = t_get_elem(c->dt, b->hy0, i);
    for (size_t i = 0; i < N2 * c->K2; i++) b->hw[r][i] = t_get_elem(c->dt, b->hy0, i);
    b->K[r] = c->K2;
    b->y[r] = y2[r];
  }
  for (size_t n = 0; n < N2; n++) b->hb[n] = 0.f;
  b->M = c->M2;
  b->N = N2;
  b->has_bias = 0;
  ASSERT_EQ(gemv_check(w, b), 0);
}

static void chain(const t_world_t* w, gemv_bufs_t* b, void* const* y2, const chain_t* c) {
  void* y1[T_MAX_RANKS];
  memcpy(y1, b->y, sizeof y1);
  uint64_t seed = t_next_seed();
  const char* pdl = getenv("FCO_GEMV_PDL");
  t_context("P=%d chain: impl %d then impl %d reading its y as x and W, %s M2=%zu K2=%zu%s%s "
            "seed=0x%016llx", w->n, c->impl1, c->impl2, fco_dtype_name(c->dt), c->M2, c->K2,
            c->bias1 ? " bias" : "", pdl && atoi(pdl) > 0 ? " PDL" : "",
            (unsigned long long)seed);
  chain_prepare(w, b, y2, c, seed);
  ASSERT_OK(gemv_issue(w, b, c->impl1, NULL));
  ASSERT_OK(issue_chain2(w, b, y2, c, NULL));
  t_sync(w);
  chain_check(w, b, y2, c);
  memcpy(b->y, y1, sizeof y1);
}

static void chains(const t_world_t* w, gemv_bufs_t* b, void* const* y2) {
  static const int impls[][2] = {{1, 1}, {1, 2}, {2, 1}, {FCO_IMPL_AUTO, FCO_IMPL_AUTO},
                                 {0, 1}, {1, 0}, {3, 2}, {2, 3}};
  static const size_t m2s[] = {1, 16, 5, 64};
  for (int i = 0; i < 8; i++) {
    /* No f16 in the chain: y2 sums P·K2 products of call 1's outputs, which can pass f16's
     * 65504 (a correct inf against a finite reference: run 63585a1, P = 4). The ordering the
     * chain checks does not depend on the dtype; f16's PDL kernels run in pdl_tests. */
    static const fco_dtype_t dts[] = {FCO_F32, FCO_BF16};
    chain_t c = {impls[i][0], impls[i][1], dts[(i / 2) % 2], m2s[i % 4], i % 3 == 1 ? 125 : 128,
                 i % 2};
    chain(w, b, y2, &c);
  }
}

#ifdef FCO_HAVE_CUDA
/* The chain (above) captured into one CUDA graph, on the capture's streams: with
 * FCO_GEMV_PDL=1 call 2 hangs off call 1 by a programmatic edge. Replayed 50 times; y and y2
 * poisoned before the last replay, then both checked. */
static void graph_chain(const t_world_t* w, gemv_bufs_t* b, void* const* y2, const chain_t* ch) {
  gemv_capture_t c;
  void* y1[T_MAX_RANKS];
  memcpy(y1, b->y, sizeof y1);
  gemv_capture_init(&c, w);
  uint64_t seed = t_next_seed();
  t_context("P=%d CUDA graph of the chain: impl %d then impl %d, %s M2=%zu K2=%zu seed=0x%016llx",
            w->n, ch->impl1, ch->impl2, fco_dtype_name(ch->dt), ch->M2, ch->K2,
            (unsigned long long)seed);
  chain_prepare(w, b, y2, ch, seed);
  ASSERT_OK(gemv_issue(w, b, ch->impl1, c.sp)); /* eager: workspace growth, cuBLAS handle */
  ASSERT_OK(issue_chain2(w, b, y2, ch, c.sp));
  gemv_capture_sync(&c);
  gemv_capture_begin(&c);
  ASSERT_OK(gemv_issue(w, b, ch->impl1, c.sp));
  ASSERT_OK(issue_chain2(w, b, y2, ch, c.sp));
  gemv_capture_end(&c);
  gemv_capture_replay(&c, 49);
  chain_prepare(w, b, y2, ch, seed); /* the same inputs, y and y2 poisoned again */
  gemv_capture_replay(&c, 1);
  chain_check(w, b, y2, ch);
  memcpy(b->y, y1, sizeof y1);
  gemv_capture_free(&c);
}

/* ---- LL one-shot (FCO_GEMV_AR_LL=1) --------------------------------------------------- */
static void ll_set(int on) { t_knob_set("FCO_GEMV_AR_LL", on ? "1" : "0"); }

/* Every M of both LL kernels and the first past them (17: the plain one-shot), N, K; bf16 / f16
 * with the default half-width LL words, and every 4th call with fp32 ones (FCO_GEMV_LL_FP32). */
static void ll_sweep(const t_world_t* w, gemv_bufs_t* b) {
  static const size_t ms[] = {1, 2, 3, 8, 9, 16, 17};
  static const size_t ns[] = {1, 7, 33, 1000};
  static const size_t ks[] = {1, 33, 1000};
  unsigned k = 0;
  ll_set(1);
  for (size_t mi = 0; mi < 7; mi++)
    for (size_t ni = 0; ni < 4; ni++)
      for (size_t ki = 0; ki < 3; ki++, k++) {
        if (k % 4 == 3) t_knob_set("FCO_GEMV_LL_FP32", "1");
        gemv_one_call(w, b, ms[mi], ns[ni], ks[ki], gemv_dtypes[(k + ni) % 3], (int)((k / 3) % 2),
                      k % 5 == 4 ? FCO_IMPL_AUTO : 1);
        t_knob_reset("FCO_GEMV_LL_FP32");
      }
  ll_set(0);
}

/* Exact: with fp32 LL words (FCO_GEMV_LL_FP32=1; by default bf16 / f16 partials travel rounded
 * to the dtype, which ll_sweep and the rest check against the reference and across ranks) the
 * LL one-shot sums the same fp32 partials in the same rank order as the plain one, so every
 * rank's y must equal the plain one-shot's bit for bit (same inputs, y poisoned) — with the
 * same block shape: the wide blocks (FCO_GEMV_WIDE, where N is small; LL only until e9c20d3,
 * both since) split K over 8 warps instead of 4, another fp32 order (run a70f468 caught it when
 * only LL had them), so this runs with FCO_GEMV_WIDE=0 — and FCO_GEMV_GROUP_TMA=0: since
 * session 30 the plain one-shot runs the TMA tile from M 9 (its K order is the wgmma's);
 * the wide kernels and the tile are checked against the reference everywhere else. */
static void ll_vs_plain(const t_world_t* w, gemv_bufs_t* b) {
  t_knob_set("FCO_GEMV_WIDE", "0");
  t_knob_set("FCO_GEMV_GROUP_TMA", "0");
  t_knob_set("FCO_GEMV_LL_FP32", "1");
  static const size_t shapes[][3] = {{1, 1000, 1000}, {4, 999, 517}, {16, 1000, 33}, {9, 17, 1000}};
  unsigned char* plain = (unsigned char*)malloc(gemv_y_bytes());
  ASSERT_NOT_NULL(plain);
  for (int i = 0; i < 4 * 3; i++) {
    const size_t M = shapes[i % 4][0], N = shapes[i % 4][1], kt = shapes[i % 4][2];
    const fco_dtype_t dt = gemv_dtypes[i % 3];
    const size_t n = M * N * fco_dtype_size(dt);
    uint64_t seed = t_next_seed();
    t_context("P=%d LL vs plain one-shot, bit for bit: M=%zu N=%zu K=%zu %s seed=0x%016llx", w->n,
              M, N, kt, fco_dtype_name(dt), (unsigned long long)seed);
    gemv_prepare(b, M, N, kt, dt, i % 2, seed);
    ASSERT_OK(gemv_issue(w, b, 1, NULL)); /* FCO_GEMV_AR_LL=0 (ll_sweep): plain */
    t_sync(w);
    t_get(b->t, t_rank_device(b->t, 0), plain, b->y[0], n);
    for (int r = 0; r < w->n; r++)
      t_memset(b->t, t_rank_device(b->t, r), b->y[r], T_POISON, n);
    ll_set(1);
    ASSERT_OK(gemv_issue(w, b, 1, NULL));
    ll_set(0);
    t_sync(w);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(gemv_check(w, b), 0); /* reference, guards, ranks identical */
    if (memcmp(b->hy0, plain, n))
      t_fail(__FILE__, __LINE__, "the LL one-shot's y differs from the plain one-shot's");
  }
  free(plain);
  t_knob_reset("FCO_GEMV_WIDE");
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_reset("FCO_GEMV_LL_FP32");
}

/* Another op on ranks' y2 (not y), issued without a sync: a gemv of another shape and impl
 * (workspace halves, and impl 0/3's all-reduce) or an in-place fco_allreduce. None may touch
 * the LL area; the next LL call must not be fooled by whatever they leave. */
static void other_op(const t_world_t* w, gemv_bufs_t* b, void* const* y2, int k) {
  void* y[T_MAX_RANKS];
  size_t M = b->M, N = b->N;
  fco_dtype_t dt = b->dt;
  int has_bias = b->has_bias;
  memcpy(y, b->y, sizeof y);
  memcpy(b->y, y2, sizeof y);
  b->has_bias = 0;
  switch (k % 5) {
    case 0: b->M = 8, b->N = 500; ASSERT_OK(gemv_issue(w, b, 2, NULL)); break;
    case 1: b->M = 3, b->N = 1000; ASSERT_OK(gemv_issue(w, b, 3, NULL)); break;
    case 2: b->M = 16, b->N = 999; ASSERT_OK(gemv_issue(w, b, 0, NULL)); break;
    case 3: b->M = 2, b->N = 640; ASSERT_OK(gemv_issue(w, b, 1, NULL)); break; /* LL as well */
    default: {
      fco_result_t first = FCO_OK;
      ASSERT_OK(fco_group_start());
      for (int r = 0; r < w->n; r++) {
        fco_result_t e = fco_allreduce(w->comms[r], y2[r], y2[r], 16 * 1000, FCO_BF16,
                                       FCO_IMPL_AUTO, NULL);
        if (e != FCO_OK && first == FCO_OK) first = e;
      }
      fco_result_t e = fco_group_end();
      ASSERT_OK(first != FCO_OK ? first : e);
    }
  }
  memcpy(b->y, y, sizeof y);
  b->M = M, b->N = N, b->dt = dt, b->has_bias = has_bias;
}

/* Fresh inputs per LL call (so an earlier call's words differ from this call's), shapes that
 * repeat (same addresses, stale words of the same layout) and vary (other layouts), 0-3 other
 * ops before and one after each LL call, no sync until the check: a stale word taken for this
 * call's would show as a wrong y, a lost word as a timeout. */
static void ll_stale(const t_world_t* w, gemv_bufs_t* b, void* const* y2, int calls) {
  static const size_t shapes[][2] = {{16, 1000}, {1, 1000}, {3, 33}, {16, 1000}, {9, 7},
                                     {1, 1}, {5, 1000}, {16, 999}};
  ll_set(1);
  for (int i = 0; i < calls; i++) {
    const size_t M = shapes[i % 8][0], N = shapes[i % 8][1];
    const fco_dtype_t dt = gemv_dtypes[i % 3];
    uint64_t seed = t_next_seed();
    t_context("P=%d LL call %d among other ops: M=%zu N=%zu %s seed=0x%016llx", w->n, i, M, N,
              fco_dtype_name(dt), (unsigned long long)seed);
    gemv_prepare(b, M, N, 1000, dt, i % 2, seed);
    for (int j = 0; j < i % 4; j++) other_op(w, b, y2, i + j);
    ASSERT_OK(gemv_issue(w, b, i % 3 == 2 ? FCO_IMPL_AUTO : 1, NULL));
    other_op(w, b, y2, i * 7 + 1);
    t_sync(w);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(gemv_check(w, b), 0);
  }
  ll_set(0);
}

/* Back to back without any sync: LL calls of changing shapes (each LL half keeps the words of
 * other layouts) and other ops; only the last call, (16, 1000), is checked, and the LL call
 * before it of the same parity has another shape. */
static void ll_back_to_back(const t_world_t* w, gemv_bufs_t* b, void* const* y2, int calls) {
  static const size_t shapes[][2] = {{1, 1000}, {16, 333}, {4, 1000}, {15, 1000}, {7, 999}};
  uint64_t seed = t_next_seed();
  t_context("P=%d LL %d back-to-back calls seed=0x%016llx", w->n, calls, (unsigned long long)seed);
  ll_set(1);
  gemv_prepare(b, 16, 1000, 517, FCO_BF16, 1, seed); /* inputs for every shape below */
  for (int i = 0; i < calls; i++) {
    b->M = shapes[i % 5][0];
    b->N = shapes[i % 5][1];
    if (i % 6 == 5) other_op(w, b, y2, i);
    ASSERT_OK(gemv_issue(w, b, i % 4 == 3 ? FCO_IMPL_AUTO : 1, NULL));
  }
  b->M = 15, b->N = 1000; /* same parity as the last call: another layout */
  ASSERT_OK(gemv_issue(w, b, 1, NULL));
  b->M = 7, b->N = 999;
  ASSERT_OK(gemv_issue(w, b, 1, NULL));
  b->M = 16, b->N = 1000;
  ASSERT_OK(gemv_issue(w, b, 1, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
  ll_set(0);
}

/* A peer that never calls: the LL wait ends in FCO_ERR_TIMEOUT naming peer 1, within the
 * bound, y untouched; the communicator is then destroyed. nccl: only rank 0's op is issued;
 * local: the transport's hook FCO_FAULT_SKIP_RANK=1 leaves rank 1 out of the launch. */
static void ll_silent_peer(fco_transport_t t) {
  fco_config_t cfg;
  t_world_t w;
  gemv_bufs_t b;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 300;
  t_context("LL, silent peer (%s)", fco_transport_name(t));
  ASSERT_OK(t_world_init(&w, t, 2, &cfg));
  gemv_bufs_alloc(&b, &w);
  gemv_one_call(&w, &b, 4, 1000, 1000, FCO_BF16, 1, 1); /* epochs past 0, workspace grown */
  t_context("LL, silent peer (%s)", fco_transport_name(t));
  ll_set(1);
  gemv_prepare(&b, 4, 1000, 1000, FCO_BF16, 1, t_next_seed());
  size_t need = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w.comms[0], 4, 1000, b.K[0], FCO_BF16, 1, &need));
  ASSERT_OK(fco_comm_reserve(w.comms[0], need)); /* growth would wait for the silent peer */
  double t0 = t_now_ms();
  if (t == FCO_TRANSPORT_LOCAL) {
    t_knob_set("FCO_FAULT_SKIP_RANK", "1");
    ASSERT_OK(gemv_issue(&w, &b, 1, NULL));
    t_knob_reset("FCO_FAULT_SKIP_RANK");
  } else {
    ASSERT_OK(fco_gemv_allreduce(w.comms[0], b.x[0], b.w[0], b.bias[0], b.y[0], 4, 1000, b.K[0],
                                 FCO_BF16, 1, NULL));
  }
  t_sync_device(t, t_rank_device(t, 0));
  double ms = t_now_ms() - t0;
  fco_result_t r = fco_comm_get_async_error(w.comms[0]);
  printf("LL silent peer: rank 0 got %s after %.0f ms: %s\n", fco_result_string(r), ms,
         fco_last_error(w.comms[0]));
  ASSERT_RES(r, FCO_ERR_TIMEOUT);
  ASSERT_LT(ms, 6000.0);
  if (!t_contains_word(fco_last_error(w.comms[0]), "peer 1"))
    t_fail(__FILE__, __LINE__, "the timeout message does not name peer 1");
  ll_set(0);
  t_sync(&w);
  {
    size_t n = b.M * b.N * fco_dtype_size(b.dt);
    t_get(t, t_rank_device(t, 0), b.hy, b.y[0], n + T_GUARD);
    for (size_t i = 0; i < n + T_GUARD; i++)
      if (b.hy[i] != (i < n ? T_POISON : T_GUARD_BYTE))
        t_fail(__FILE__, __LINE__, "rank 0: the timed-out LL call wrote byte %zu of y", i);
  }
  gemv_bufs_free(&b);
  t_world_destroy(&w, 0);
}

static void ll_tests(const t_world_t* w, gemv_bufs_t* b, int quick) {
  t_context("P=%d LL workspace", w->n);
  size_t plain = 0, ll = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 16, 1000, 1000, FCO_BF16, 1, &plain));
  ll_set(1);
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 16, 1000, 1000, FCO_BF16, 1, &ll));
  ll_set(0);
  /* 2·P·SL, SL = roundup(T·16·M·8, 256) with T = 63 (internal layout, docs/gemv_allreduce.md) */
  if (w->n > 1) ASSERT_EQ(ll, 2 * (size_t)w->n * ((63 * 16 * 16 * 8 + 255) / 256 * 256));
  else ASSERT_EQ(ll, plain);
  void* y2[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    y2[r] = t_alloc(w->transport, t_rank_device(w->transport, r), gemv_y_bytes());
  ll_sweep(w, b);
  ll_vs_plain(w, b);
  ll_stale(w, b, y2, quick ? 16 : 48);
  ll_back_to_back(w, b, y2, quick ? 100 : 1000);
  ll_set(1);
  gemv_graph(w, b, 1);
  gemv_graph(w, b, FCO_IMPL_AUTO);
  t_knob_set("FCO_CHECK_ARGS", "1");
  gemv_one_call(w, b, 3, 1000, 1000, FCO_BF16, 1, 1);
  gemv_one_call(w, b, 16, 7, 33, FCO_F32, 0, 1);
  t_knob_reset("FCO_CHECK_ARGS");
  ll_set(0);
  /* The plain one-shot right after LL calls (its flags were not raised by them). */
  gemv_one_call(w, b, 3, 1000, 1000, FCO_F16, 1, 1);
  for (int r = 0; r < w->n; r++) t_free(w->transport, t_rank_device(w->transport, r), y2[r]);
}

/* ---- PDL (FCO_GEMV_PDL=1) ------------------------------------------------------------------ */
/* PDL is on by default (unset): the parts before pdl_tests run with it; off is "0", which
 * the parts after pdl_tests keep (here and, by setting it, in test_gemv_allreduce), so both
 * kernel families run the whole suite's other cases. */
static void pdl_set(int on) { t_knob_set("FCO_GEMV_PDL", on ? "1" : "0"); }

/* Back to back without a sync, FCO_GEMV_PDL switched from call to call (kernels with and
 * without the PDL prologue, cuBLAS and NCCL / the all-reduce kernels follow each other), impls
 * 0..3 and AUTO, LL as by default; inputs fixed, only the last y is checked. */
static void pdl_back_to_back(const t_world_t* w, gemv_bufs_t* b, int calls) {
  static const int impls[] = {1, 2, FCO_IMPL_AUTO, 0, 1, 3, 2};
  uint64_t seed = t_next_seed();
  t_context("P=%d %d back-to-back calls, PDL on and off, seed=0x%016llx", w->n, calls,
            (unsigned long long)seed);
  gemv_prepare(b, 5, 333, gemv_vec_kt(w->n), FCO_BF16, 1, seed);
  for (int i = 0; i < calls; i++) {
    pdl_set(i % 3 != 1);
    ASSERT_OK(gemv_issue(w, b, impls[i % 7], NULL));
  }
  pdl_set(1);
  ASSERT_OK(gemv_issue(w, b, 1, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
}

/* Everything with FCO_GEMV_PDL=1: every fused kernel family (kMT 1, 2, 4, 8; LL, plain
 * one-shot, two-phase; every dtype; N < 16 and K off the vector path), the prefetch knob's
 * edges, back-to-back calls (among other ops, PDL switched per call, LL), the chain (a call
 * reading the previous call's y as x and W) eagerly and in CUDA graphs, graphs of single
 * calls, FCO_CHECK_ARGS. Exact checks as everywhere else. */
static void pdl_tests(const t_world_t* w, gemv_bufs_t* b, int quick) {
  static const size_t ms[] = {1, 9, 17, 64};
  static const size_t ns[] = {7, 1000};
  const size_t ks[] = {33, gemv_vec_kt(w->n)}; /* K_r off and on the vector path */
  static const int impls[] = {1, 2, FCO_IMPL_AUTO};
  static const char* const prefetch[] = {"0", "1", "4096", "262144", "1073741824", "-5"};
  void* y2[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    y2[r] = t_alloc(w->transport, t_rank_device(w->transport, r), gemv_y_bytes());
  t_knob_reset("FCO_GEMV_AR_LL");
  pdl_set(1);
  unsigned k = 0;
  for (size_t mi = 0; mi < 4; mi++)
    for (size_t ni = 0; ni < 2; ni++)
      for (size_t ki = 0; ki < 2; ki++)
        for (int ii = 0; ii < 3; ii++, k++) {
          if (k % 4 == 3) ll_set(0); /* the plain one-shot too */
          gemv_one_call(w, b, ms[mi], ns[ni], ks[ki], gemv_dtypes[(k + ni) % 3], (int)(k % 2),
                        impls[ii]);
          t_knob_reset("FCO_GEMV_AR_LL");
        }
  for (int i = 0; i < 6; i++) {
    t_knob_set("FCO_GEMV_PDL_PREFETCH", prefetch[i]);
    gemv_one_call(w, b, 3, 1000, gemv_vec_kt(w->n), FCO_BF16, 1, 1);
    gemv_one_call(w, b, 16, 999, gemv_vec_kt(w->n), FCO_F32, 0, 2);
  }
  t_knob_reset("FCO_GEMV_PDL_PREFETCH");
  gemv_back_to_back(w, b, quick ? 100 : 1000);
  pdl_back_to_back(w, b, quick ? 100 : 1000);
  ll_back_to_back(w, b, y2, quick ? 50 : 300);
  ll_stale(w, b, y2, quick ? 8 : 24);
  t_knob_reset("FCO_GEMV_AR_LL");
  pdl_set(1);
  chains(w, b, y2);
  {
    const chain_t g[] = {{1, 1, FCO_BF16, 16, 128, 1},
                         {2, FCO_IMPL_AUTO, FCO_BF16, 3, 128, 0}, /* no f16: chains() */
                         {FCO_IMPL_AUTO, 2, FCO_F32, 1, 125, 1}};
    for (int i = 0; i < 3; i++) graph_chain(w, b, y2, &g[i]);
  }
  gemv_graph(w, b, 1);
  gemv_graph(w, b, 2);
  gemv_graph(w, b, FCO_IMPL_AUTO);
  t_knob_set("FCO_CHECK_ARGS", "1");
  for (int i = 1; i <= 2; i++) gemv_one_call(w, b, 3, 1000, 1000, FCO_BF16, 1, i);
  t_knob_reset("FCO_CHECK_ARGS");
  pdl_set(0);
  for (int r = 0; r < w->n; r++) t_free(w->transport, t_rank_device(w->transport, r), y2[r]);
}

/* Grouped tiles (FCO_GEMV_GROUP: impl 1 at M 17..64 in bf16 / f16): every knob value (unset,
 * 2, 4, 0 = the one-tile kernels; 4 again with FCO_GEMV_GROUP_MMA=1, the mma.sync tile instead
 * of wgmma on the vector path) on M of 3..8 m-tiles, N with a partial last group (1000, 100) or
 * a single partial tile (15), K_r up to ~4600 (both tiles' rings wrap: wgmma 12 slabs of 64,
 * mma.sync 6 chunks of 128; then K's tail), a shorter vector-path K and K off the vector path
 * (4095: every rank's chunks through the guarded loads); bf16 and f16, bias on and off, each
 * call checked against the float64 reference (gemv_check()). PDL as the caller set it.
 * Split groups (FCO_GEMV_SPLIT, M 33..64): these N leave most blocks without a group, so unset
 * splits each group's K in 2..4 slices (4 at P = 1, 2 at P = 4 on one H200); the runs set it
 * to 1 (off) with groups of 4, 3 with the mma.sync tile, and 2 once more, and a K of one slab
 * a rank (helpers with empty slices) runs split, and one more call after. (Refused knob values:
 * bad_args in test_gemv_allreduce.c.) */
/* Every rank's fco_last_plan names grouped tiles with K in `split` slices (0: the automatic rule
 * for N columns — at least 2 slices where the groups fill at most half of the co-resident slots
 * the plan reports, else 1: with P = 5..8 virtual ranks on one GPU the slots per rank shrink;
 * a split asked for: fewer where the slots a group do not hold it). */
static void expect_split(const t_world_t* w, size_t N, int split) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "split=");
    const char* kg = strstr(plan, "kG=");
    const char* of = strstr(plan, "blocks/rank of ");
    int got = at ? atoi(at + 6) : -1, want = split;
    if (kg && of) {
      const size_t cols = 16 * (size_t)atoi(kg + 3); /* a group's columns */
      const long groups = (long)((N + cols - 1) / cols), slots = atol(of + 15);
      if (!split && 2 * groups > slots) want = 1; /* too many to split */
      /* a split asked for: at most as many slices as there are slots per group (pick_split;
       * with 5..8 virtual ranks on one GPU, e.g. 22 slots for 8 groups: 2 of the 3 asked) */
      if (split > 1 && groups > 0 && slots / groups < split)
        want = slots / groups < 1 ? 1 : (int)(slots / groups);
    }
    if (!strstr(plan, "grouped") || !of || (want ? got != want : got < 2))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected grouped tiles with split %s%d", r,
             plan, want ? "" : ">= ", want ? want : 2);
  }
}

/* Every rank's fco_last_plan names the grouped tile kernel `tile` ("grouped wgmma tma", ...). */
static void expect_tile(const t_world_t* w, const char* tile) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, tile);
    if (!at || at[strlen(tile)] != ' ')
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected the kernel \"%s\"", r, plan, tile);
  }
}

/* Every rank's fco_last_plan has (want) or lacks (!want) the words `what` ("split=2 pair"). */
static void expect_plan_has(const t_world_t* w, const char* what, int want) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    if ((strstr(plan, what) != NULL) != want)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected %s\"%s\"", r, plan,
             want ? "" : "no ", what);
  }
}

/* Every rank's grouped TMA tile, where split in 2..4, ran as a cluster: "split=2 pair",
 * "split=3 cluster", "split=4 cluster" (where the caller knows the device holds them); split 1
 * (expect_split's rule) has none. */
static void expect_cluster(const t_world_t* w) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "split=");
    const int split = at ? atoi(at + 6) : 0;
    char want[32];
    snprintf(want, sizeof want, "split=%d %s", split, split == 2 ? "pair" : "cluster");
    if (split < 1 || (split > 1 && !strstr(plan, want)))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected a split group as a cluster", r,
             plan);
  }
}

/* FCO_GEMV_GROUP_TMA unset (M 33..64, the TMA tile): every rank ran groups of 4 exactly where
 * its plan says they stream W from more blocks than groups of 8 would, or from as many in
 * fewer K slices — "(groups of 4: B4 blocks, split S4; of 8: B8, split S8)" — unless that tie
 * went to pairs of groups of 8 (", pairs)": only impl 1, one local rank, S4 1 and S8 2, run as
 * "split=2 pair"), and all ranks chose alike. */
static void expect_tma_groups(const t_world_t* w) {
  int first = -1;
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "(groups of 4: ");
    int b4 = 0, s4 = 0, b8 = 0, s8 = 0;
    if (!at ||
        sscanf(at, "(groups of 4: %d blocks, split %d; of 8: %d, split %d)", &b4, &s4, &b8, &s8) !=
            4 ||
        b4 < 1 || b8 < 1 || s4 < 1 || s8 < 1) {
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\": no TMA group rule in the plan", r, plan);
      continue;
    }
    const int pairs8 = strstr(at, ", pairs)") != NULL;
    const int one_local = w->transport != FCO_TRANSPORT_LOCAL || w->n == 1; /* num_local 1 */
    if (pairs8 && !(one_local && b4 == b8 && s4 == 1 && s8 == 2 && strstr(plan, "impl 1 ") &&
                    strstr(plan, "kG=8 split=2 pair")))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\": pairs of groups of 8 off their rule", r, plan);
    const int four = strstr(plan, "kG=4") != NULL,
              want = b4 > b8 || (b4 == b8 && s4 < s8 && !pairs8);
    if (four != want || (!four && !strstr(plan, "kG=8")))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\": groups of %s against the rule", r, plan,
             four ? "4" : "8");
    if (first < 0) first = four;
    else if (first != four)
      t_fail(__FILE__, __LINE__, "rank %d chose groups of %d, rank 0 of %d", r, four ? 4 : 8,
             first ? 4 : 8);
  }
}

/* impl 2 (two-phase) at M 17..64 on the grouped tiles (session 27: run_twophase_group; M 24 on
 * the TMA tile since session 30, FCO_GEMV_GROUP_TMA=0 the one-tile kernels there), one
 * knob row at a time: the TMA tile with the group size unset (the launcher's rule), groups of 4,
 * groups of 8 split 2 (cluster pairs), split 2 through the split area (FCO_GEMV_SPLIT_PAIR=0:
 * the area past impl 2's gather area), the mma.sync tile in groups of 8 split 3 (the split
 * area), and FCO_GEMV_GROUP_TMA=0 (GroupWgmma, groups of 4 / 2). N 1000 and 100 (few groups:
 * split; fewer groups than ranks: the grouped one-shot in impl 2's half), 15, and 8192 with a
 * short K (more groups than a rank's co-resident blocks at P ≥ 2 with groups of 4, P ≥ 3 with
 * 8: several a block, the remote-owned ones first); K off the vector path (4095) now and then.
 * Then back-to-back calls (impls 2, 1, 3, 0 in turn, no sync) and a CUDA graph of impl 2 at M
 * 64, N 8192. */
/* impl 2 on the grouped tiles: every rank's plan names the two-phase kernel where there are at
 * least as many groups (of the plan's kG) as ranks, else the grouped one-shot (no "two-phase"). */
static void expect_twophase(const t_world_t* w, size_t N) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* kg = strstr(plan, "kG=");
    const size_t g = kg ? (size_t)atoi(kg + 3) : 0;
    const int want = g > 0 && ((N + 15) / 16 + g - 1) / g >= (size_t)w->n;
    if (!kg || (strstr(plan, " two-phase ") != NULL) != want)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected the grouped %s", r, plan,
             want ? "two-phase" : "one-shot (fewer groups than ranks)");
  }
}

static void twophase_group_tests(const t_world_t* w, gemv_bufs_t* b) {
  static const char* const tmas[] = {NULL, "4", "1", "1", "1", "0"};
  static const char* const splits[] = {NULL, NULL, "2", "2", "3", NULL};
  static const size_t ms[] = {24, 40, 64};
  static const size_t ns[] = {1000, 100, 15, 8192};
  const size_t kt8192 = gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192);
  unsigned k = 0;
  for (int gi = 0; gi < 6; gi++) {
    t_knob_set("FCO_GEMV_GROUP_TMA", tmas[gi]);
    t_knob_set("FCO_GEMV_SPLIT", splits[gi]);
    t_knob_set("FCO_GEMV_SPLIT_PAIR", gi == 3 ? "0" : NULL);
    t_knob_set("FCO_GEMV_GROUP_MMA", gi == 4 ? "1" : NULL);
    for (size_t mi = 0; mi < 3; mi++)
      for (size_t ni = 0; ni < 4; ni++, k++) {
        const size_t N = ns[ni];
        const int off_vec = N <= 1000 && k % 5 == 2; /* K 4095: the mma.sync tile */
        const size_t kt = N == 8192 ? kt8192 : off_vec ? 4095 : gemv_vec_kt_le(w->n, GEMV_MAX_KT);
        gemv_one_call(w, b, ms[mi], N, kt, k % 2 ? FCO_F16 : FCO_BF16, (int)((k / 2) % 2), 2);
        expect_plan_has(w, "impl 2 ", 1);
        const int vec = !off_vec && gi != 4;
        const int area = ms[mi] > 32; /* M 24: no split area, a split only in clusters */
        if (gi != 5 || area) expect_twophase(w, N);
        if (gi == 5 && !area) expect_plan_has(w, "grouped", 0); /* the one-tile kernels */
        else
          expect_tile(w, !vec    ? "grouped mma.sync"
                         : gi == 5 ? "grouped wgmma"
                                   : "grouped wgmma tma");
        if (vec && (gi == 1 || gi == 2)) expect_plan_has(w, "kG=4", gi == 1);
        if (gi == 0 && vec) expect_tma_groups(w);
        if ((gi == 2 || gi == 3) && N <= 1000) {
          expect_split(w, N, area || (vec && gi == 2) ? 2 : 1);
          expect_plan_has(w, "split=2 pair", vec && gi == 2);
        }
        if (gi == 4 && N <= 100) expect_split(w, N, area ? 3 : 1);
      }
  }
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_SPLIT_PAIR");
  t_knob_reset("FCO_GEMV_GROUP_MMA");
  /* back to back, no sync between: the last call's y must be right */
  uint64_t seed = t_next_seed();
  t_context("P=%d two-phase groups back to back seed=0x%016llx", w->n, (unsigned long long)seed);
  gemv_prepare(b, 64, 8192, kt8192, FCO_BF16, 1, seed);
  static const int impls[] = {2, 1, 2, 3, 2, 0, 2, 2};
  for (int i = 0; i < 40; i++) ASSERT_OK(gemv_issue(w, b, impls[i % 8], NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
  gemv_graph_shape(w, b, 2, 64, 8192, kt8192, FCO_F16);
  expect_plan_has(w, "impl 2 ", 1);
  expect_twophase(w, 8192);
}

/* A TMA-tile plan's numbers: its groups for N columns (from "kG="), split, rounds (0 where
 * the plan names none), blocks a rank and co-resident slots ("B blocks/rank of S"). 0 where
 * the plan is not the TMA grouped tile or lacks one of them. */
typedef struct {
  long units, blocks, slots, rounds;
  int split;
} tma_plan_t;
static int tma_plan(const char* plan, size_t N, tma_plan_t* tp) {
  const char* kg = strstr(plan, "kG=");
  const char* sp = strstr(plan, "split=");
  const char* of = strstr(plan, " blocks/rank of ");
  const char* at = strstr(plan, " rounds=");
  if (!kg || !sp || !of || !strstr(plan, "grouped wgmma tma ")) return 0;
  const long cols = 16L * atoi(kg + 3);
  const char* nb = of; /* the number before " blocks/rank of " */
  while (nb > plan && nb[-1] >= '0' && nb[-1] <= '9') nb--;
  tp->units = ((long)N + cols - 1) / cols;
  tp->split = atoi(sp + 6);
  tp->blocks = atol(nb);
  tp->slots = atol(of + 16);
  tp->rounds = at ? atol(at + 8) : 0;
  return cols > 0;
}

/* FCO_GEMV_ROUNDS = R (impl 1 on the TMA tile at M 33..64: a block takes its groups as rounds
 * of one ring, run_oneshot_rounds): every rank's plan says "rounds=R" and runs
 * min(the owners of the usual rule, ceil(groups / R)) owner blocks, times the split (1, or 2
 * as a cluster pair: never the split area). */
static void expect_rounds(const t_world_t* w, size_t N, int R) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    tma_plan_t tp;
    int ok = tma_plan(plan, N, &tp) && tp.rounds == R;
    if (ok) {
      long B = tp.slots < tp.units ? tp.slots : tp.units; /* owner_blocks, then R's cap */
      B = (tp.units + (tp.units + B - 1) / B - 1) / ((tp.units + B - 1) / B);
      if ((tp.units + R - 1) / R < B) B = (tp.units + R - 1) / R;
      ok = (tp.split == 1 || (tp.split == 2 && strstr(plan, "split=2 pair"))) &&
           tp.blocks == B * tp.split;
    }
    if (!ok)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected the TMA tile in rounds of %d", r,
             plan, R);
  }
}

/* FCO_GEMV_ROUNDS unset (or 1: off): every rank's TMA tile runs in rounds exactly where its
 * owners, unsplit, take several groups each ("rounds=ceil(groups / blocks)"), never where
 * rounds are off. */
static void expect_auto_rounds(const t_world_t* w, size_t N, int off) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    tma_plan_t tp;
    int ok = tma_plan(plan, N, &tp);
    if (ok) {
      const int several = !off && tp.split == 1 && tp.units > tp.blocks;
      ok = tp.rounds == (several ? (tp.units + tp.blocks - 1) / tp.blocks : 0);
    }
    if (!ok)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected rounds %s", r, plan,
             off ? "off" : "where owners take several groups");
  }
}

/* The pair's split finalise (FCO_GEMV_PAIR_FIN unset or 1, `off` 0 or FCO_GEMV_ROUNDS=1):
 * every rank's one-shot TMA tile in cluster pairs ("split=2 pair", not "two-phase") says
 * " fin-split" unless off, and no other plan does. */
static void expect_fin_split(const t_world_t* w, int off) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const int want = !off && strstr(plan, "grouped wgmma tma ") && !strstr(plan, "two-phase") &&
                     strstr(plan, "split=2 pair");
    if ((strstr(plan, " fin-split") != NULL) != want)
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected %s", r, plan,
             want ? "the split finalise (fin-split)" : "no fin-split");
  }
}

/* Rounds (FCO_GEMV_ROUNDS), one knob row at a time: R = 2 and 3 in groups of 8 and of 4
 * (FCO_GEMV_GROUP_TMA), the split unset (pairs where the owners leave room), 1 (no hand-off)
 * and pairs off (FCO_GEMV_SPLIT_PAIR=0: then not split), R = 8 on 2 ring stages. N 8192 (64 /
 * 128 groups: several rounds a block, the last owners one fewer where R does not divide them;
 * its short K wraps the ring within a round and across rounds), 1000 (a partial last group,
 * long K), 15 (one group, one round); M 40 / 64, bf16 / f16, bias on / off, a third of the
 * calls with fp32 partials; the pairs' split finalise on (FCO_GEMV_PAIR_FIN unset) but in
 * the third row and at M 40 of the first (0: the owner finalises the whole group), checked
 * against the plans (expect_fin_split). Then back to back (impls 1 in rounds, 0, 2, 3, no
 * sync) and a CUDA graph, the split finalise on. The last three rows: rounds unset in groups of 8 and of 4 (in rounds where the owners
 * take several groups: N 8192 from P = 2 or 3 on one H200) and 1 (off), expect_auto_rounds. */
static void rounds_tests(const t_world_t* w, gemv_bufs_t* b) {
  static const char* const rs[] = {"2", "3", "2", "3", "2", "8", NULL, NULL, "1"};
  static const char* const tmas[] = {"1", "1", "4", "4", "1", "4", "1", "4", "4"};
  static const char* const splits[] = {NULL, NULL, NULL, "1", NULL, NULL, NULL, NULL, NULL};
  static const int rv[] = {2, 3, 2, 3, 2, 8, 0, 0, 1};
  static const size_t ms[] = {40, 64};
  static const size_t ns[] = {8192, 1000, 15};
  const size_t kt8192 = gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192);
  unsigned k = 0;
  for (int gi = 0; gi < 9; gi++) {
    t_knob_set("FCO_GEMV_ROUNDS", rs[gi]);
    t_knob_set("FCO_GEMV_GROUP_TMA", tmas[gi]);
    t_knob_set("FCO_GEMV_SPLIT", splits[gi]);
    t_knob_set("FCO_GEMV_SPLIT_PAIR", gi == 4 ? "0" : NULL);
    t_knob_set("FCO_GEMV_TMA_STAGES", gi == 5 ? "2" : NULL);
    for (size_t mi = 0; mi < 2; mi++)
      for (size_t ni = 0; ni < 3; ni++, k++) {
        const int fin_off = gi == 2 || (gi == 0 && mi == 0);
        t_knob_set("FCO_GEMV_PAIR_FIN", fin_off ? "0" : NULL);
        const size_t N = ns[ni];
        const size_t kt = N == 8192 ? kt8192 : gemv_vec_kt_le(w->n, GEMV_MAX_KT);
        if ((mi + ni + (size_t)gi) % 3 == 2) t_knob_set("FCO_GEMV_GROUP_FP32", "1");
        gemv_one_call(w, b, ms[mi], N, kt, k % 2 ? FCO_F16 : FCO_BF16, (int)((k / 2) % 2), 1);
        t_knob_reset("FCO_GEMV_GROUP_FP32");
        if (rv[gi] > 1) expect_rounds(w, N, rv[gi]);
        else expect_auto_rounds(w, N, rv[gi] == 1);
        expect_plan_has(w, "kG=4", tmas[gi][0] == '4');
        if (gi == 3 || gi == 4) expect_plan_has(w, "split=1 ", 1);
        expect_fin_split(w, fin_off || rv[gi] == 1);
      }
  }
  t_knob_reset("FCO_GEMV_PAIR_FIN");
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_SPLIT_PAIR");
  t_knob_reset("FCO_GEMV_TMA_STAGES");
  t_knob_set("FCO_GEMV_ROUNDS", "2");
  uint64_t seed = t_next_seed();
  t_context("P=%d rounds back to back seed=0x%016llx", w->n, (unsigned long long)seed);
  gemv_prepare(b, 64, 8192, kt8192, FCO_BF16, 1, seed);
  static const int impls[] = {1, 0, 1, 2, 1, 3, 1, 1};
  for (int i = 0; i < 40; i++) ASSERT_OK(gemv_issue(w, b, impls[i % 8], NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
  gemv_graph_shape(w, b, 1, 64, 8192, kt8192, FCO_F16);
  expect_rounds(w, 8192, 2);
  expect_fin_split(w, 0);
  t_knob_reset("FCO_GEMV_ROUNDS");
}

static void group_tests(const t_world_t* w, gemv_bufs_t* b) {
  /* The first six with FCO_GEMV_GROUP_TMA=0 (groups of 4 or 2, GroupWgmma): the fifth the
   * mma.sync tile, the sixth groups as unset, split in 2. The seventh to tenth: groups of 8 on
   * the TMA-fed tile (the default; FCO_GEMV_GROUP_TMA unset, then 1): split unset (up to 4, as
   * clusters: lowered to a split whose clusters fit, e.g. 3 at P = 4 on H200); split 2 (owner and helper a cluster pair) on 3 ring stages;
   * split 3 with FCO_GEMV_GROUP_MMA=1 (the mma.sync tile in groups of 8); split 2 with
   * FCO_GEMV_SPLIT_PAIR=0 (the split area) on 2 ring stages (FCO_GEMV_TMA_STAGES). The
   * eleventh: split 3 on the TMA tile (a cluster of 3: the helpers' slices in the owner's
   * finished ring) on 2 ring stages. The twelfth: groups of 4 on the TMA tile
   * (FCO_GEMV_GROUP_TMA=4), split unset (in clusters), on 2 of its 6 ring stages. The seventh
   * (TMA unset) takes groups of 4 or 8 by the launcher's rule (expect_tma_groups; at N 1000
   * and 100 groups of 4, at N 15 groups of 8, on all their stages). */
  static const char* const knobs[] = {NULL, "2", "4", "0", "4", NULL,
                                      NULL, NULL, NULL, NULL, NULL, NULL};
  static const char* const splits[] = {NULL, NULL, "1", NULL, "3", "2",
                                       NULL, "2", "3",  "2",  "3", NULL};
  static const size_t ms[] = {17, 32, 40, 64};
  static const size_t ns[] = {1000, 100, 15};
  const size_t ks[] = {gemv_vec_kt_le(w->n, GEMV_MAX_KT), 4095, gemv_vec_kt_le(w->n, 1800)};
  unsigned k = 0;
  for (int gi = 0; gi < 12; gi++) {
    const int tma = gi >= 6;
    if (knobs[gi]) t_knob_set("FCO_GEMV_GROUP", knobs[gi]);
    else t_knob_reset("FCO_GEMV_GROUP");
    if (splits[gi]) t_knob_set("FCO_GEMV_SPLIT", splits[gi]);
    else t_knob_reset("FCO_GEMV_SPLIT");
    if (gi == 4 || gi == 8) t_knob_set("FCO_GEMV_GROUP_MMA", "1");
    else t_knob_reset("FCO_GEMV_GROUP_MMA");
    if (gi == 6) t_knob_reset("FCO_GEMV_GROUP_TMA");
    else t_knob_set("FCO_GEMV_GROUP_TMA", gi == 11 ? "4" : tma ? "1" : "0");
    if (gi == 9) t_knob_set("FCO_GEMV_SPLIT_PAIR", "0");
    else t_knob_reset("FCO_GEMV_SPLIT_PAIR");
    if (gi == 7 || gi >= 9) t_knob_set("FCO_GEMV_TMA_STAGES", gi == 7 ? "3" : "2");
    else t_knob_reset("FCO_GEMV_TMA_STAGES");
    for (size_t mi = 0; mi < 4; mi++)
      for (size_t ni = 0; ni < 3; ni++, k++) {
        /* split 2 in pairs (row 7): the split finalise at M 17 / 40, the owner's whole-group
         * finalise (FCO_GEMV_PAIR_FIN=0, the cluster barrier's hand-off) at M 32 / 64 */
        const int fin_off = gi == 7 && mi % 2;
        t_knob_set("FCO_GEMV_PAIR_FIN", fin_off ? "0" : NULL);
        /* a third of the calls push fp32 partials (FCO_GEMV_GROUP_FP32), the rest the dtype's;
         * spread over M, N and the knob rows (not tied to one N) */
        if ((mi + ni + (size_t)gi) % 3 == 2) t_knob_set("FCO_GEMV_GROUP_FP32", "1");
        gemv_one_call(w, b, ms[mi], ns[ni], ks[(k + gi) % 3], k % 2 ? FCO_F16 : FCO_BF16,
                      (int)((k / 2) % 2), 1);
        t_knob_reset("FCO_GEMV_GROUP_FP32");
        /* M 33..64, split unset: these few groups leave most slots free, so K is split (at
         * P <= 4 on one H200; expect_split checks the rule against the plan's slots) */
        if (ms[mi] > 32 && (gi == 0 || gi == 2 || gi == 6))
          expect_split(w, ns[ni], gi == 2 ? 1 : 0);
        /* M 17..32, TMA unset (row 6): the TMA tile too since session 30, split in clusters
         * where split (no split area below M 33) */
        if (ms[mi] <= 32 && gi == 6 && ks[(k + gi) % 3] != 4095) expect_cluster(w);
        /* groups of 8 at M 17..64 (M 17..32 since session 30):
         * TMA on the vector path, the mma.sync tile off it (K 4095) or with
         * FCO_GEMV_GROUP_MMA=1; split 2 (at most 8 groups: pairs fit at P <= 4) in clusters
         * with TMA unless FCO_GEMV_SPLIT_PAIR=0, split 3 where one group a rank (N <= 100:
         * clusters of 3 fit at any P; 32 of them need not, nor 32 of 4 on H200); the split
         * unset in clusters too (the launcher lowers it to a split whose clusters fit). A split
         * without clusters goes through the split area, which M <= 32 does not reserve: none. */
        if (tma) {
          const int vec = ks[(k + gi) % 3] != 4095 && gi != 8;
          const int area = ms[mi] > 32; /* a split without clusters fits */
          expect_tile(w, vec ? "grouped wgmma tma" : "grouped mma.sync");
          if (gi == 7 || gi == 9) expect_split(w, ns[ni], (vec && gi == 7) || area ? 2 : 1);
          if (gi == 7 || gi == 9) expect_plan_has(w, "split=2 pair", vec && gi == 7);
          expect_fin_split(w, fin_off);
          if (gi == 10) expect_split(w, ns[ni], vec || area ? 3 : 1);
          if (vec && (gi == 6 || gi == 7 || gi == 11 || (gi == 10 && ns[ni] <= 100)))
            expect_cluster(w);
          if (gi > 6) expect_plan_has(w, "kG=4", gi == 11);
          if (gi == 6) expect_tma_groups(w);
        }
      }
  }
  t_knob_reset("FCO_GEMV_GROUP_MMA");
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_SPLIT_PAIR");
  t_knob_reset("FCO_GEMV_TMA_STAGES");
  t_knob_reset("FCO_GEMV_PAIR_FIN");
  /* K_r = 8·(r + 1): one slab a rank, so 1..3 of a group's slices are empty; with and without
   * TMA (whose maps then have a K of 8: the box's other columns read as zeros) */
  for (int tma = 1; tma >= 0; tma--) {
    t_knob_set("FCO_GEMV_GROUP_TMA", tma ? "1" : "0");
    gemv_one_call(w, b, 64, 100, gemv_vec_kt_le(w->n, 4 * (size_t)w->n * (w->n + 1)), FCO_BF16, 1,
                  1);
    gemv_one_call(w, b, 48, 1000, gemv_vec_kt_le(w->n, 4 * (size_t)w->n * (w->n + 1)), FCO_F16, 0,
                  1);
    gemv_one_call(w, b, 64, 1000, gemv_vec_kt_le(w->n, GEMV_MAX_KT), FCO_BF16, 1, 1);
    expect_tile(w, tma ? "grouped wgmma tma" : "grouped wgmma");
    if (!tma) expect_plan_has(w, "grouped wgmma tma", 0);
  }
  /* M 1..16 (session 30): impl 1 and 2 on the TMA tile (x's box of M rows) from M 9 by default
   * and at any M with FCO_GEMV_GROUP_TMA set, at P = 1 and with FCO_GEMV_AR_LL=0; with
   * FCO_GEMV_AR_LL=1 (P >= 2) impl 1 runs the LL kernels. K off the vector path (4095): the
   * mma.sync tile in groups of 8; N 8192: more groups than a rank's blocks from P = 3 (rounds).
   * First the default's bound (knobs unset): M 9 on the TMA tile, M 8 not. */
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  t_knob_set("FCO_GEMV_AR_LL", "0");
  gemv_one_call(w, b, 9, 1000, gemv_vec_kt_le(w->n, GEMV_MAX_KT), FCO_BF16, 1, 1);
  expect_tile(w, "grouped wgmma tma");
  gemv_one_call(w, b, 8, 1000, gemv_vec_kt_le(w->n, GEMV_MAX_KT), FCO_F16, 0, 1);
  expect_plan_has(w, "grouped", 0);
  t_knob_set("FCO_GEMV_GROUP_TMA", "8");
  for (int ll = 0; ll < 2; ll++) {
    t_knob_set("FCO_GEMV_AR_LL", ll ? "1" : "0"); /* LL forced: by default not on local from
                                                    * M 9 (test_gemv_allreduce: auto_rule) */
    static const size_t m16[] = {1, 5, 16, 9};
    static const size_t n16[] = {1000, 8192, 15, 100};
    for (int i = 0; i < 4; i++, k++) {
      const size_t N = n16[i];
      const int off_vec = i == 3 && ll;
      const size_t kt = N == 8192 ? gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192)
                        : off_vec ? 4095
                                  : gemv_vec_kt_le(w->n, GEMV_MAX_KT);
      const int impl = i == 2 ? 2 : 1;
      gemv_one_call(w, b, m16[i], N, kt, k % 2 ? FCO_F16 : FCO_BF16, (int)(k % 3 == 0), impl);
      if (ll && w->n > 1 && impl == 1) { /* the LL kernels */
        expect_plan_has(w, "grouped", 0);
        continue;
      }
      expect_tile(w, off_vec ? "grouped mma.sync" : "grouped wgmma tma");
      if (impl == 2) expect_twophase(w, N);
      if (!off_vec && N <= 1000) expect_cluster(w);
    }
  }
  t_knob_reset("FCO_GEMV_AR_LL");
  t_knob_reset("FCO_GEMV_GROUP_TMA");
  /* N 8192, M 64 on one rank a GPU (P = 1 here): groups of 8 in 64 cluster pairs tie unsplit
   * groups of 4 at 128 streaming blocks on H200 — the tie goes to the pairs (", pairs"); the
   * rule, whatever the GPU, checked by expect_tma_groups */
  gemv_one_call(w, b, 64, 8192, gemv_vec_kt_le(w->n, GEMV_MAX_NK / 8192), FCO_BF16, 0, 1);
  expect_tma_groups(w);
  twophase_group_tests(w, b);
  rounds_tests(w, b);
}
#endif

/* chains() with its y2 buffers allocated for the call and freed after. */
static void chains_alloc(const t_world_t* w, gemv_bufs_t* b) {
  void* y2[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    y2[r] = t_alloc(w->transport, t_rank_device(w->transport, r), gemv_y_bytes());
  chains(w, b, y2);
  for (int r = 0; r < w->n; r++) t_free(w->transport, t_rank_device(w->transport, r), y2[r]);
}

/* The parts of a run: all of them, or one alone (FCO_TEST_LL / _GROUP / _PDL = only). */
enum { PART_CHAIN = 1, PART_LL = 2, PART_GROUP = 4, PART_PDL = 8, PART_ALL = 15 };

/* For P = 1..max: the chain (all parts: with FCO_GEMV_PDL as the caller set it; the PDL part
 * alone: on the cpu transport only, where it is that part's semantics), then on GPU transports
 * the LL, grouped-tile and PDL parts; then the silent peer (the LL part: PDL as left — "0" after
 * the PDL part — and the PDL part: PDL on). The LL and grouped-tile parts alone skip (77) on
 * the cpu transport. */
static int run_parts(fco_transport_t t, int max, int quick, int parts) {
  const int gpu = t_is_gpu(t);
  if (!gpu && !(parts & (PART_CHAIN | PART_PDL))) {
    printf("SKIP: FCO_TEST_%s=only: the %s tests run on GPU transports only\n",
           parts == PART_LL ? "LL" : "GROUP", parts == PART_LL ? "LL" : "grouped tiles");
    return 77;
  }
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    gemv_bufs_t b;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    gemv_bufs_alloc(&b, &w);
    if ((parts & PART_CHAIN) || (parts == PART_PDL && !gpu)) chains_alloc(&w, &b);
#ifdef FCO_HAVE_CUDA
    if (gpu) {
      if (parts & PART_LL) ll_tests(&w, &b, quick);
      if (parts & PART_GROUP) group_tests(&w, &b);
      if (parts & PART_PDL) pdl_tests(&w, &b, quick); /* FCO_GEMV_PDL=1, then "0" */
    }
#endif
    gemv_bufs_free(&b);
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
#ifdef FCO_HAVE_CUDA
  if (gpu && max >= 2) {
    if (parts & PART_LL) ll_silent_peer(t);
    if (parts & PART_PDL) { /* the timeout stays bounded with the PDL prologue too */
      pdl_set(1);
      ll_silent_peer(t);
      pdl_set(0);
    }
  }
#endif
  (void)quick;
  return t_pass(t, max, t_test_rank_cap());
}

static int only(const char* name) {
  const char* v = getenv(name);
  return v && !strcmp(v, "only");
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = getenv("FCO_TEST_QUICK") && atoi(getenv("FCO_TEST_QUICK")) > 0;
  int max = t_test_max_ranks(t);
  const int parts = only("FCO_TEST_PDL")     ? PART_PDL
                    : only("FCO_TEST_GROUP") ? PART_GROUP
                    : only("FCO_TEST_LL")    ? PART_LL
                                             : PART_ALL;
  return run_parts(t, max, quick, parts);
}

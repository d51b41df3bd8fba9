/*
 * test_gemv_allreduce_kernels.c — fco_gemv_allreduce's kernel variants and call ordering: the LL
 * one-shot, PDL, and the chain (its semantics: test_gemv_allreduce.c; the grouped / split tiles:
 * test_gemv_allreduce_group.c;
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
 *   The pipelined tile loop forced (FCO_GEMV_PIPE=1: impl 1 plain and LL, narrow and wide
 *   blocks, impl 2; by default it runs only where K_r ≥ 12288, beyond every other test's shapes).
 *   The grouped tiles (M 9..64 by default, and their knobs): test_gemv_allreduce_group.c, a
 *   program of its own (it outgrew one test's time bound in tests/run.sh with the rest).
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

/* ---- the pipelined tile loop (FCO_GEMV_PIPE=1) ---------------------------------------------- */
/* By default the loop runs only where a rank's K ≥ 12288 (kPipeAutoMinK), which no other test's
 * shape reaches: forced here on the one-tile kernels of two m-tiles (M 9..16, bf16 / f16;
 * FCO_GEMV_GROUP_TMA=0, else the TMA tile takes the plain one-shot there) — impl 1 plain and LL,
 * in narrow blocks and wide ones (N small), impl 2 — K wrapping the loop's groups of 4 chunks
 * and not; each call against the float64 reference, ranks bit-identical, guards intact, and every
 * rank's plan naming " pipe"; then FCO_GEMV_PIPE=0 on the same shape names none. */
static void pipe_tests(const t_world_t* w, gemv_bufs_t* b, int quick) {
  static const size_t shapes[][3] = {{9, 1000, 1000}, {16, 999, 4608}, {12, 17, 4608},
                                     {16, 4096, 1000}, {10, 33, 33},    {16, 8, 257}};
  static const int impls[3][2] = {{1, 0}, {1, 1}, {2, 0}}; /* impl, LL */
  t_knob_set("FCO_GEMV_GROUP_TMA", "0");
  const int n = quick ? 6 : 18;
  for (int i = 0; i < n; i++) {
    const size_t M = shapes[i % 6][0], N = shapes[i % 6][1], kt = shapes[i % 6][2];
    const fco_dtype_t dt = i % 2 ? FCO_BF16 : FCO_F16;
    const int impl = impls[i % 3][0];
    ll_set(impls[i % 3][1]);
    for (int on = 1; on >= 0; on--) {
      t_knob_set("FCO_GEMV_PIPE", on ? "1" : "0");
      uint64_t seed = t_next_seed();
      t_context("P=%d FCO_GEMV_PIPE=%d impl %d%s: M=%zu N=%zu K=%zu %s seed=0x%016llx", w->n, on,
                impl, impls[i % 3][1] ? " LL" : "", M, N, kt, fco_dtype_name(dt),
                (unsigned long long)seed);
      gemv_prepare(b, M, N, kt, dt, i % 2, seed);
      ASSERT_OK(gemv_issue(w, b, impl, NULL));
      t_sync(w);
      for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
      ASSERT_EQ(gemv_check(w, b), 0); /* reference, guards, ranks identical */
      for (int r = 0; r < w->n; r++) {
        const char* plan = fco_last_plan(w->comms[r]);
        if ((strstr(plan, " pipe") != NULL) != on)
          t_fail(__FILE__, __LINE__, "rank %d: plan \"%s\" %s \" pipe\"", r, plan,
                 on ? "lacks" : "has");
      }
    }
  }
  ll_set(0);
  t_knob_reset("FCO_GEMV_PIPE");
  t_knob_reset("FCO_GEMV_GROUP_TMA");
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

#endif

/* chains() with its y2 buffers allocated for the call and freed after. */
static void chains_alloc(const t_world_t* w, gemv_bufs_t* b) {
  void* y2[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    y2[r] = t_alloc(w->transport, t_rank_device(w->transport, r), gemv_y_bytes());
  chains(w, b, y2);
  for (int r = 0; r < w->n; r++) t_free(w->transport, t_rank_device(w->transport, r), y2[r]);
}

/* The parts of a run: all of them, or one alone (FCO_TEST_LL / _PDL = only). */
enum {
  PART_CHAIN = 1,
  PART_LL = 2,
  PART_PIPE = 4,
  PART_PDL = 8,
  PART_ALL = PART_CHAIN | PART_LL | PART_PIPE | PART_PDL
};

/* For P = 1..max: the chain (all parts: with FCO_GEMV_PDL as the caller set it; the PDL part
 * alone: on the cpu transport only, where it is that part's semantics), then on GPU transports
 * the LL and PDL parts; then the silent peer (the LL part: PDL as left — "0" after the PDL
 * part — and the PDL part: PDL on). The LL part alone skips (77) on the cpu transport. */
typedef struct {
  int gpu, quick, parts;
} run_t;

static void run_world(const t_world_t* w, gemv_bufs_t* b, void* arg) {
  const run_t* r = (const run_t*)arg;
  if ((r->parts & PART_CHAIN) || (r->parts == PART_PDL && !r->gpu)) chains_alloc(w, b);
#ifdef FCO_HAVE_CUDA
  if (r->gpu) {
    if (r->parts & PART_LL) ll_tests(w, b, r->quick);
    if (r->parts & PART_PIPE) pipe_tests(w, b, r->quick);
    if (r->parts & PART_PDL) pdl_tests(w, b, r->quick); /* FCO_GEMV_PDL=1, then "0" */
  }
#endif
}

static int run_parts(fco_transport_t t, int max, int quick, int parts) {
  const int gpu = t_is_gpu(t);
  if (!gpu && !(parts & (PART_CHAIN | PART_PDL))) {
    printf("SKIP: FCO_TEST_LL=only: the LL tests run on GPU transports only\n");
    return 77;
  }
  run_t r = {gpu, quick, parts};
  gemv_each_world(t, max, run_world, &r);
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
  int quick = t_quick();
  int max = t_test_max_ranks(t);
  if (only("FCO_TEST_GROUP"))
    printf("FCO_TEST_GROUP=only: the grouped tiles' tests are test_gemv_allreduce_group's; "
           "this program runs its other parts\n");
  const int parts = only("FCO_TEST_PDL")     ? PART_PDL
                    : only("FCO_TEST_LL")    ? PART_LL
                                             : PART_ALL;
  return run_parts(t, max, quick, parts);
}

/*
 * test_gemv_allreduce.c — fco_gemv_allreduce: y = Σ_r x_r · W_r^T (+ bias) on every rank; the
 * operator's semantics (its kernel variants: test_gemv_allreduce_kernels.c and, the grouped
 * tiles, test_gemv_allreduce_group.c; the fixture both
 * share: tests/common/gemv_fixture.h).
 *   1..4 ranks; M ∈ {1, 3, 16, 64}, N and K ∈ {1, 7, 33, 1000} (K split unevenly across ranks:
 *   rank r gets about (r+1)/Σ of it); f32 / f16 / bf16; bias and no bias; impls 0..3, AUTO.
 *   Every output is poisoned first, inputs are fresh random values per call (seeded, printed),
 *   the result is compared with a float64 reference of the dtype-rounded inputs by
 *   |y − ref| ≤ tol · (Σ_k |x·w| + |bias|) (+ 2^-24 for f16 subnormals), tol 1e-5 (f32) /
 *   1e-2 (f16, bf16); every rank's y
 *   must be bit-identical to rank 0's and nothing may be written past y's end.
 *   Then back-to-back calls without a sync (epochs), bad arguments with their codes and
 *   messages (nothing written; also tuning knobs set to values no kernel exists for:
 *   FCO_GEMV_GROUP, FCO_GEMV_SPLIT, FCO_GEMV_TMA_STAGES, FCO_GEMV_GROUP_TMA, FCO_GEMV_ROUNDS;
 *   y over any part of x, w or bias; N, K and N·K at their bounds), a mismatch of M, and of
 *   bias given or not, across ranks; first y between x and w in one allocation (touching, not
 *   overlapping: it runs, P = 1); and on
 *   GPU transports AUTO's rule read back through fco_last_plan, a CUDA graph replayed 100 times and FCO_CHECK_ARGS=1
 *   (M 3, and the grouped tiles' impls 1 and 2 at M 48 / 64; on nccl at P = 2 also the device-side
 *   mismatch, at M 4 / 5 and in rounds at M 57 / 64). On GPU transports the calls after bad_args run with
 *   FCO_GEMV_AR_LL=0 and every round after P = 1 with FCO_GEMV_PDL=0, as when the kernel
 *   variants' tests ran between them in this program (see main).
 *   FCO_TEST_LL / FCO_TEST_PDL=only select parts of test_gemv_allreduce_kernels (FCO_TEST_GROUP:
 *   test_gemv_allreduce_group, since session 31); this program says so and runs all of its own.
 *   First, on every transport, AUTO's rule from the shape as a host function on made-up
 *   communicators (auto_rule_host: cpu, nccl and local, P 1..8, each knob of the rule).
 *   make test   or   build/tests/test_gemv_allreduce   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 makes the loops shorter.
 */
#include <stdlib.h>
#include <unistd.h>

#include "gemv_fixture.h"

#include "../src/core/internal.h"

static const size_t kMs[] = {1, 3, 16, 64};
static const size_t kNs[] = {1, 7, 33, 1000};
static const size_t kKs[] = {1, 7, 33, 1000};
static const int kImpls[] = {0, 1, 2, 3, FCO_IMPL_AUTO};

/* Every (M, N, K) with every impl; dtype and bias rotate so each meets every impl. */
static void sweep(const t_world_t* w, gemv_bufs_t* b) {
  unsigned k = 0;
  for (size_t mi = 0; mi < 4; mi++)
    for (size_t ni = 0; ni < 4; ni++)
      for (size_t ki = 0; ki < 4; ki++)
        for (int ii = 0; ii < 5; ii++, k++)
          gemv_one_call(w, b, kMs[mi], kNs[ni], kKs[ki], gemv_dtypes[(k + ni) % 3],
                        (int)((k / 3) % 2), kImpls[ii]);
}

/* Every rank's y is still poison and its guard intact. */
static void assert_untouched(const t_world_t* w, gemv_bufs_t* b, int line) {
  size_t n = b->M * b->N * fco_dtype_size(b->dt);
  for (int r = 0; r < w->n; r++) {
    t_get(b->t, t_rank_device(b->t, r), b->hy, b->y[r], n + T_GUARD);
    for (size_t i = 0; i < n + T_GUARD; i++)
      if (b->hy[i] != (i < n ? T_POISON : T_GUARD_BYTE))
        t_fail(__FILE__, line, "rank %d: a failed call wrote byte %zu of y", r, i);
  }
}

#define BAD(call, code, word)                     \
  do {                                            \
    t_context("%s", #call);                       \
    ASSERT_RES(call, code);                       \
    ASSERT_MSG(NULL, word);                       \
    t_sync(w);                                    \
    assert_untouched(w, b, __LINE__);             \
  } while (0)

/* knob=value (a value no kernel exists for; the op layer refuses it on every transport) on an
 * impl 1 call of M rows: FCO_ERR_INVALID_ARGUMENT, nothing written; the knob is back at the
 * caller's value after (t_knob_reset). */
static void refused_knob(const t_world_t* w, gemv_bufs_t* b, const char* knob, const char* value,
                         size_t M) {
  t_knob_set(knob, value);
  t_context("P=%d %s=%s", w->n, knob, value);
  gemv_prepare(b, M, 100, 1000, FCO_BF16, 0, t_next_seed());
  ASSERT_RES(gemv_issue(w, b, 1, NULL), FCO_ERR_INVALID_ARGUMENT);
  printf("%s=%s: %s\n", knob, value, fco_last_error(w->comms[0]));
  t_sync(w);
  assert_untouched(w, b, __LINE__);
  t_knob_reset(knob);
}

static void bad_args(const t_world_t* w, gemv_bufs_t* b) {
  fco_comm_t c = w->comms[0];
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  gemv_prepare(b, 4, 100, 64, FCO_BF16, 1, t_next_seed());
  void *x = b->x[0], *wt = b->w[0], *bs = b->bias[0], *y = b->y[0];
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 0, 100, 64, FCO_BF16, 1, NULL), E, "M");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 65, 100, 64, FCO_BF16, 1, NULL), FCO_ERR_UNSUPPORTED,
      "GEMM");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 1000, 100, 64, FCO_BF16, 0, NULL), FCO_ERR_UNSUPPORTED,
      "GEMM");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, (size_t)-1, 100, 64, FCO_BF16, 1, NULL), E, "M");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 0, 64, FCO_BF16, 1, NULL), E, "N");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, (size_t)1 << 40, 64, FCO_BF16, 1, NULL), E, "N");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 0, FCO_BF16, 2, NULL), E, "K");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, (size_t)-5, FCO_BF16, 2, NULL), E, "K");
  BAD(fco_gemv_allreduce(c, NULL, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "x");
  BAD(fco_gemv_allreduce(c, x, NULL, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "w");
  BAD(fco_gemv_allreduce(c, x, wt, bs, NULL, 4, 100, 64, FCO_BF16, 1, NULL), E, "y");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 64, (fco_dtype_t)9, 1, NULL), E, "dtype");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 64, FCO_BF16, 4, NULL), E, "impl");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 64, FCO_BF16, -2, NULL), E, "impl");
  BAD(fco_gemv_allreduce(c, (char*)x + 1, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "x");
  BAD(fco_gemv_allreduce(c, x, (char*)wt + 1, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "w");
  BAD(fco_gemv_allreduce(c, x, wt, (char*)bs + 1, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "bias");
  BAD(fco_gemv_allreduce(c, x, wt, bs, (char*)y + 2, 4, 100, 64, FCO_F32, 1, NULL), E, "y");
  BAD(fco_gemv_allreduce(c, x, y, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "overlaps w");
  BAD(fco_gemv_allreduce(c, y, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "overlaps x");
  BAD(fco_gemv_allreduce(c, x, wt, y, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "overlaps bias");
  /* y starting inside x's, w's or bias's last part (x's second row, w's second row, bias's
   * second element): the overlap checks span the whole of each input, not its first row */
  BAD(fco_gemv_allreduce(c, x, wt, bs, (char*)x + 64 * 2, 4, 100, 64, FCO_BF16, 1, NULL), E,
      "overlaps x");
  BAD(fco_gemv_allreduce(c, x, wt, bs, (char*)wt + 64 * 2, 4, 100, 64, FCO_BF16, 1, NULL), E,
      "overlaps w");
  { /* y (4 · 100 elements) at bias's second element runs past bias (100): bias and y in one
     * allocation of their own, so that y overlaps bias and nothing else whatever the allocator
     * put after the fixture's bias */
    const int dev = t_rank_device(w->transport, 0);
    char* both = (char*)t_alloc(w->transport, dev, (100 + 4 * 100) * 2);
    BAD(fco_gemv_allreduce(c, x, wt, both, both + 2, 4, 100, 64, FCO_BF16, 1, NULL), E,
        "overlaps bias");
    t_free(w->transport, dev, both);
  }
  BAD(fco_gemv_allreduce(NULL, x, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "comm");
  t_context("%s", "workspace / impl names");
  size_t bytes = 0;
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 4, 100, 64, FCO_BF16, 1, NULL), E);
  ASSERT_MSG(c, "bytes");
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 65, 100, 64, FCO_BF16, 1, &bytes), FCO_ERR_UNSUPPORTED);
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 4, 100, 64, FCO_BF16, 7, &bytes), E);
  ASSERT_MSG(c, "impl");
  for (int i = 1; i <= 2; i++) {
    ASSERT_OK(fco_gemv_allreduce_workspace(c, 4, 100, 64, FCO_BF16, i, &bytes));
    ASSERT_GT(bytes, 0);
  }
  /* the bounds at their edges, asked of the workspace query (no buffers that big): N below
   * 2^31 - 2^16 (the kernels' int tile columns run up to 128 past N: session 56), K below 2^31,
   * N·K at most 2^40 */
  const size_t k31 = (size_t)1 << 31, k20 = (size_t)1 << 20, nmax = k31 - ((size_t)1 << 16);
  ASSERT_OK(fco_gemv_allreduce_workspace(c, 1, nmax - 1, 1, FCO_BF16, 1, &bytes));
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 1, nmax, 1, FCO_BF16, 1, &bytes), E);
  ASSERT_MSG(c, "N");
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 1, k31 - 4, 1, FCO_BF16, 1, &bytes), E);
  ASSERT_OK(fco_gemv_allreduce_workspace(c, 1, 1, k31 - 1, FCO_BF16, 1, &bytes));
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 1, 1, k31, FCO_BF16, 1, &bytes), E);
  ASSERT_MSG(c, "K");
  ASSERT_OK(fco_gemv_allreduce_workspace(c, 1, k20, k20, FCO_BF16, 1, &bytes));
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 1, k20 + 1, k20, FCO_BF16, 1, &bytes), E);
  ASSERT_MSG(c, "W");
  ASSERT_NULL(fco_gemv_allreduce_impl_name(c, FCO_GEMV_ALLREDUCE_NUM_IMPLS));
  ASSERT_NULL(fco_gemv_allreduce_impl_name(NULL, 0));
  ASSERT_STR_EQ(fco_gemv_allreduce_impl_name(c, FCO_IMPL_AUTO), "auto");
  for (int i = 0; i < FCO_GEMV_ALLREDUCE_NUM_IMPLS; i++)
    ASSERT_NOT_NULL(fco_gemv_allreduce_impl_name(c, i));
  /* each by name: impl 0 the transport's baseline (cpu: the reference), 1..3 the fused ones */
  ASSERT_STR_EQ(fco_gemv_allreduce_impl_name(c, 0),
                w->transport == FCO_TRANSPORT_NCCL    ? "cublas_nccl"
                : w->transport == FCO_TRANSPORT_LOCAL ? "cublas_copy"
                                                      : "cpu_ref");
  ASSERT_STR_EQ(fco_gemv_allreduce_impl_name(c, 1), "oneshot");
  ASSERT_STR_EQ(fco_gemv_allreduce_impl_name(c, 2), "twophase");
  ASSERT_STR_EQ(fco_gemv_allreduce_impl_name(c, 3), "cublas_oneshot");

  /* M differs across ranks: the group's ranks are compared on the host (every transport). */
  if (w->n >= 2) {
    t_context("M differs across ranks");
    gemv_prepare(b, 4, 100, 64, FCO_BF16, 0, t_next_seed());
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++)
      (void)fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r], NULL, b->y[r], r == 1 ? 3 : 4, 100,
                               b->K[r], FCO_BF16, 1, NULL);
    ASSERT_RES(fco_group_end(), E);
    ASSERT_MSG(c, "M");
    t_sync(w);
    assert_untouched(w, b, __LINE__);
    /* bias given on every rank but rank 1 (fco.h: NULL or not must be the same on every rank) */
    t_context("bias NULL on rank 1 only");
    gemv_prepare(b, 4, 100, 64, FCO_BF16, 1, t_next_seed());
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++)
      (void)fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r], r == 1 ? NULL : b->bias[r], b->y[r],
                               4, 100, b->K[r], FCO_BF16, 1, NULL);
    ASSERT_RES(fco_group_end(), E);
    ASSERT_MSG(c, "bias");
    t_sync(w);
    assert_untouched(w, b, __LINE__);
  }
  /* Not sticky: the communicator still works. */
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  gemv_one_call(w, b, 2, 77, 95, FCO_F16, 1, FCO_IMPL_AUTO);
  /* tuning knobs with values no kernel exists for: refused on every transport, any M */
  refused_knob(w, b, "FCO_GEMV_GROUP", "3", 33);
  refused_knob(w, b, "FCO_GEMV_GROUP", "1", 1);
  refused_knob(w, b, "FCO_GEMV_SPLIT", "5", 64);
  refused_knob(w, b, "FCO_GEMV_SPLIT", "0", 4);
  refused_knob(w, b, "FCO_GEMV_TMA_STAGES", "5", 64);
  refused_knob(w, b, "FCO_GEMV_TMA_STAGES", "1", 48);
  refused_knob(w, b, "FCO_GEMV_GROUP_TMA", "2", 64);
  refused_knob(w, b, "FCO_GEMV_GROUP_TMA", "16", 8);
  refused_knob(w, b, "FCO_GEMV_ROUNDS", "0", 64);
  refused_knob(w, b, "FCO_GEMV_ROUNDS", "9", 3);
  /* negative values other than -1 (automatic, as unset) are strays too */
  refused_knob(w, b, "FCO_GEMV_GROUP", "-2", 33);
  refused_knob(w, b, "FCO_GEMV_GROUP_TMA", "-4", 64);
  refused_knob(w, b, "FCO_GEMV_SPLIT", "-3", 64);
  refused_knob(w, b, "FCO_GEMV_TMA_STAGES", "-1", 48);
  refused_knob(w, b, "FCO_GEMV_PIPE", "-2", 16);
  refused_knob(w, b, "FCO_GEMV_PIPE", "2", 16);
}

#ifdef FCO_HAVE_CUDA
/* Every rank's fco_last_plan names impl `impl` (-1: 0 or 3, the unfused impls) and, when ll
 * is 0 or 1, the LL one-shot kernel or not. */
static void expect_plan(const t_world_t* w, int impl, int ll) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "gemv_allreduce impl ");
    const int got = at ? atoi(at + 20) : -1;
    const int has_ll = strstr(plan, "kernel LL ") != NULL;
    if (impl >= 0 ? got != impl : (got != 0 && got != 3))
      t_fail(__FILE__, __LINE__, "rank %d: AUTO ran \"%s\", expected impl %s", r, plan,
             impl >= 0 ? (impl == 1 ? "1" : impl == 2 ? "2" : "0") : "0 or 3");
    if (ll >= 0 && has_ll != ll)
      t_fail(__FILE__, __LINE__, "rank %d: AUTO ran \"%s\", expected %s LL one-shot", r, plan,
             ll ? "the" : "not the");
  }
}

/* AUTO's rule (src/ops/gemv_allreduce.c, resolve_impl / use_ll), read back through the plans,
 * every call also checked against the reference: one rank → impl 0; bf16 M 4, N 1000 → the
 * fused one-shot, with LL words except on local above P = 4; M 40 → unfused (on local the
 * grouped tiles, one-shot or two-phase by all ranks' pushes, and impl 0 off their vector path;
 * M 24 likewise (since session 30); f32 impl 0);
 * N above FCO_GEMV_AR_FUSED_MAX_N → unfused; FCO_GEMV_AR_ONESHOT_MAX between one rank's pushes
 * and all ranks' → one-shot on nccl, two-phase on local (its ranks share one GPU's HBM);
 * M 12 / 16 → impl 1, on local the TMA tile's plain pushes (no LL; LL at P = 2 with N ≤
 * 4096), on nccl LL;
 * FCO_GEMV_AR_LOCAL_MAX_W at N·ΣK_r (the layer's whole W, which only the batch of every
 * rank's call knows) → impl 0 on local at M 16 off the tile's vector path (or with the tile
 * off), still fused on it, at M 4 and with the bound one element above N·ΣK_r; nccl ignores
 * it (fused). */
static void auto_rule(const t_world_t* w, gemv_bufs_t* b) {
  const int P = w->n, local = w->transport == FCO_TRANSPORT_LOCAL;
  const int ll_set = getenv("FCO_GEMV_AR_LL") != NULL; /* the caller's choice: not checked */
  static const char* const rule_knobs[] = {"FCO_GEMV_AR_AUTO_MAX_M", "FCO_GEMV_AR_FUSED_MAX_N",
                                           "FCO_GEMV_AR_ONESHOT_MAX", "FCO_GEMV_AR_LOCAL_MAX_W"};
  for (int i = 0; i < 4; i++)
    if (getenv(rule_knobs[i])) { /* the caller moved the rule: nothing here to compare with */
      printf("P=%d: auto_rule not checked (%s set)\n", P, rule_knobs[i]);
      return;
    }
  const size_t kt = gemv_vec_kt_le(P, 512);
  gemv_one_call(w, b, 4, 1000, kt, FCO_BF16, 1, FCO_IMPL_AUTO);
  expect_plan(w, P == 1 ? 0 : 1, P == 1 || ll_set ? -1 : !(local && P > 4));
  if (P == 1) return;
  gemv_one_call(w, b, 40, 1000, kt, FCO_BF16, 0, FCO_IMPL_AUTO);
  /* local, M 17..64: the grouped tiles, one-shot while all ranks' pushes P·(P−1)·M·N·4 stay
   * ≤ 4 MiB, else two-phase; off the tiles' vector path (K_r·2 not a multiple of 16) impl 0 */
  const int local_m40 = (long long)P * (P - 1) * 40 * 1000 * 4 <= (4 << 20) ? 1 : 2;
  expect_plan(w, local ? local_m40 : -1, -1);
  gemv_one_call(w, b, 40, 1000, kt + 1, FCO_BF16, 0, FCO_IMPL_AUTO);
  expect_plan(w, local ? 0 : -1, -1);
  gemv_one_call(w, b, 24, 1000, kt, FCO_F16, 1, FCO_IMPL_AUTO);
  const int local_m24 = (long long)P * (P - 1) * 24 * 1000 * 4 <= (4 << 20) ? 1 : 2;
  expect_plan(w, local ? local_m24 : -1, -1);
  gemv_one_call(w, b, 24, 1000, kt + 1, FCO_BF16, 0, FCO_IMPL_AUTO);
  expect_plan(w, local ? 0 : -1, -1);
  gemv_one_call(w, b, 40, 1000, kt, FCO_F32, 1, FCO_IMPL_AUTO);
  expect_plan(w, local ? 0 : -1, -1);
  t_knob_set("FCO_GEMV_AR_FUSED_MAX_N", "512");
  gemv_one_call(w, b, 4, 1000, kt, FCO_F16, 1, FCO_IMPL_AUTO);
  expect_plan(w, local ? 0 : -1, -1);
  t_knob_reset("FCO_GEMV_AR_FUSED_MAX_N");
  /* a rank pushes (P − 1)·16·1000·4 bytes; the bound sits between that and P times it */
  char bound[32];
  snprintf(bound, sizeof bound, "%lld", (long long)(P - 1) * 16 * 1000 * 4 * 3 / 2);
  t_knob_set("FCO_GEMV_AR_ONESHOT_MAX", bound);
  gemv_one_call(w, b, 16, 1000, kt, FCO_BF16, 0, FCO_IMPL_AUTO);
  expect_plan(w, local ? 2 : 1, -1);
  t_knob_reset("FCO_GEMV_AR_ONESHOT_MAX");
  /* M 9..16, bf16 / f16: on local the TMA tile's plain pushes (no LL), except at P = 2 with
   * N ≤ 4096 (LL); the LL kernels on nccl — unless the caller turned the tile off
   * (FCO_GEMV_GROUP_TMA=0 or FCO_GEMV_GROUP set: the one-tile kernels, LL as at M 4) */
  const char* tma_knob = getenv("FCO_GEMV_GROUP_TMA");
  const int tile = !(tma_knob && atoi(tma_knob) == 0) && !getenv("FCO_GEMV_GROUP");
  const int ll16 = ll_set ? -1 : local ? P <= 4 && (!tile || P == 2) : 1;
  /* LL at M 16, N 1000 on local (the caller's FCO_GEMV_AR_LL, else the rule above) */
  const int ll16_local = ll_set ? atoi(getenv("FCO_GEMV_AR_LL")) > 0 && P > 1
                                : P <= 4 && (!tile || P == 2);
  gemv_one_call(w, b, 12, 1000, kt, FCO_BF16, 1, FCO_IMPL_AUTO);
  expect_plan(w, 1, ll16);
  gemv_one_call(w, b, 16, 1000, kt, FCO_F16, 0, FCO_IMPL_AUTO);
  expect_plan(w, 1, ll16);
  if (local) { /* N 8192: the tile at P = 2 too (one-shot at P ≤ 3, two-phase above: all
                * ranks' pushes, P·(P−1)·16·8192·4 bytes, against 4 MiB); with the tile off,
                * LL while a rank's LL words, (P−1)·16·8192·8 bytes, stay ≤ 2 MiB */
    gemv_one_call(w, b, 16, 8192, gemv_vec_kt_le(P, GEMV_MAX_NK / 8192), FCO_BF16, 1,
                  FCO_IMPL_AUTO);
    expect_plan(w, (long long)P * (P - 1) * 16 * 8192 * 4 <= (4 << 20) ? 1 : 2,
                ll_set ? -1 : !tile && (long long)(P - 1) * 16 * 8192 * 8 <= (2 << 20));
  }
  /* the W-size revision (FCO_GEMV_AR_LOCAL_MAX_W at N·ΣK_r): on local at M 9..16 only for the
   * one-tile kernels — LL, off the tiles' vector path (K_r·2 not a multiple of 16) or with the
   * tile turned off — never at M ≤ 8, never on nccl */
  for (int off_vec = 0; off_vec <= 1; off_vec++) {
    const size_t k = kt + (size_t)off_vec;
    snprintf(bound, sizeof bound, "%lld", (long long)(1000 * k)); /* N · Σ K_r */
    t_knob_set("FCO_GEMV_AR_LOCAL_MAX_W", bound);
    gemv_one_call(w, b, 16, 1000, k, FCO_BF16, 1, FCO_IMPL_AUTO);
    expect_plan(w, local && (off_vec || !tile || ll16_local) ? 0 : 1, -1);
    gemv_one_call(w, b, 4, 1000, k, FCO_F16, 0, FCO_IMPL_AUTO); /* M ≤ 8: not revised */
    expect_plan(w, 1, -1);
    snprintf(bound, sizeof bound, "%lld", (long long)(1000 * k + 1));
    t_knob_set("FCO_GEMV_AR_LOCAL_MAX_W", bound);
    gemv_one_call(w, b, 16, 1000, k, FCO_BF16, 0, FCO_IMPL_AUTO);
    expect_plan(w, 1, -1);
  }
  t_knob_reset("FCO_GEMV_AR_LOCAL_MAX_W");
}

/* nccl: ranks issued one at a time (no group, so no host comparison): with FCO_CHECK_ARGS=1
 * the kernels must find that M differs, write nothing, and report it on both ranks. */
static void device_mismatch(t_world_t* w, gemv_bufs_t* b) {
  t_context("FCO_CHECK_ARGS=1, M differs, ranks issued separately (nccl)");
  t_knob_set("FCO_CHECK_ARGS", "1");
  /* Growth would synchronise a device whose kernel waits for the other rank: reserve first. */
  size_t need = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 5, 100, 64, FCO_BF16, 1, &need));
  ASSERT_OK(fco_comm_reserve(w->comms[0], need));
  gemv_prepare(b, 4, 100, 64, FCO_BF16, 0, t_next_seed());
  for (int r = 0; r < w->n; r++)
    ASSERT_OK(fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r], NULL, b->y[r], r == 1 ? 5 : 4,
                                 100, b->K[r], FCO_BF16, 1, NULL));
  t_sync(w);
  for (int r = 0; r < 2; r++) {
    ASSERT_RES(fco_comm_get_async_error(w->comms[r]), FCO_ERR_INVALID_ARGUMENT);
    printf("rank %d reports: %s\n", r, fco_last_error(w->comms[r]));
  }
  t_knob_reset("FCO_CHECK_ARGS");
  assert_untouched(w, b, __LINE__);
}

/* nccl, P = 2: the same in rounds (FCO_GEMV_ROUNDS=2, the TMA tile at M 57 / 64, K split in
 * cluster pairs): with the pairs' split finalise (`fin`, the default) owner and helper both
 * check, find the mismatch and leave through every round's exchange (rounds_bail); without it
 * (FCO_GEMV_PAIR_FIN=0) the owners leave, taking their helpers' hand-offs on the way out — so
 * both ranks report instead of hanging. A world of its own: a mismatch leaves the comms
 * unusable. */
static void device_mismatch_rounds(fco_transport_t t, int fin) {
  t_world_t w;
  gemv_bufs_t b;
  t_context("FCO_CHECK_ARGS=1, M 57 / 64 in rounds, %s, ranks issued separately (nccl)",
            fin ? "split finalise" : "FCO_GEMV_PAIR_FIN=0");
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  gemv_bufs_alloc(&b, &w);
  t_knob_set("FCO_CHECK_ARGS", "1");
  t_knob_set("FCO_GEMV_ROUNDS", "2");
  t_knob_set("FCO_GEMV_PAIR_FIN", fin ? NULL : "0");
  for (int r = 0; r < w.n; r++) {
    size_t need = 0;
    ASSERT_OK(fco_gemv_allreduce_workspace(w.comms[r], 64, 1000, 1000, FCO_BF16, 1, &need));
    ASSERT_OK(fco_comm_reserve(w.comms[r], need));
  }
  gemv_prepare(&b, 57, 1000, 1000, FCO_BF16, 0, t_next_seed());
  for (int r = 0; r < w.n; r++)
    ASSERT_OK(fco_gemv_allreduce(w.comms[r], b.x[r], b.w[r], NULL, b.y[r], r == 1 ? 64 : 57,
                                 1000, b.K[r], FCO_BF16, 1, NULL));
  t_sync(&w);
  for (int r = 0; r < 2; r++) {
    ASSERT_RES(fco_comm_get_async_error(w.comms[r]), FCO_ERR_INVALID_ARGUMENT);
    printf("rank %d reports: %s (%s)\n", r, fco_last_error(w.comms[r]),
           fco_last_plan(w.comms[r]));
  }
  t_knob_reset("FCO_GEMV_ROUNDS");
  t_knob_reset("FCO_GEMV_PAIR_FIN");
  t_knob_reset("FCO_CHECK_ARGS");
  assert_untouched(&w, &b, __LINE__);
  gemv_bufs_free(&b);
  for (int r = 0; r < w.n; r++) (void)fco_comm_destroy(w.comms[r]);
}

/* FCO_CHECK_ARGS=1 in rounds without the split finalise, the ranks agreeing but rank 1 issued
 * 2 s after rank 0: rank 0's helpers wait for the peer's hash as their owners do (session 56).
 * Before, a helper's hand-off wait sat behind its owner's check and trapped after ~2^26 mbarrier
 * polls (~1 s): the context was lost instead of the call waiting (FCO_TIMEOUT_MS). */
static void late_peer_rounds(fco_transport_t t) {
  t_world_t w;
  gemv_bufs_t b;
  t_context("%s", "FCO_CHECK_ARGS=1, M 57 in rounds, FCO_GEMV_PAIR_FIN=0, rank 1 issued 2 s late");
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  gemv_bufs_alloc(&b, &w);
  t_knob_set("FCO_CHECK_ARGS", "1");
  t_knob_set("FCO_GEMV_ROUNDS", "2");
  t_knob_set("FCO_GEMV_PAIR_FIN", "0");
  t_knob_set("FCO_GEMV_SPLIT", "2"); /* owners with helpers in cluster pairs: the path at stake */
  for (int r = 0; r < w.n; r++) {
    size_t need = 0;
    ASSERT_OK(fco_gemv_allreduce_workspace(w.comms[r], 57, 1000, 1000, FCO_BF16, 1, &need));
    ASSERT_OK(fco_comm_reserve(w.comms[r], need));
  }
  gemv_prepare(&b, 57, 1000, 1000, FCO_BF16, 0, t_next_seed());
  ASSERT_OK(gemv_issue_rank(&w, &b, 0, 1, NULL));
  usleep(2000 * 1000);
  ASSERT_OK(gemv_issue_rank(&w, &b, 1, 1, NULL));
  t_sync(&w);
  for (int r = 0; r < 2; r++) {
    ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
    const char* plan = fco_last_plan(w.comms[r]);
    if (!strstr(plan, "split=2 pair") || !strstr(plan, "rounds=2") || strstr(plan, "fin-split"))
      t_fail(__FILE__, __LINE__, "not the rounds of pairs without fin-split: %s", plan);
  }
  ASSERT_EQ(gemv_check(&w, &b), 0);
  t_knob_reset("FCO_GEMV_SPLIT");
  t_knob_reset("FCO_GEMV_ROUNDS");
  t_knob_reset("FCO_GEMV_PAIR_FIN");
  t_knob_reset("FCO_CHECK_ARGS");
  gemv_bufs_free(&b);
  t_world_destroy(&w, 0);
}
#endif

/* One rank, y between x and w in one allocation ([x][y][w][bias], each touching the next): no
 * overlap, so the call runs: y = x · W^T + bias exactly (small integers in f32), inputs kept. */
static void adjacent_buffers(fco_transport_t t) {
  enum { kM = 2, kN = 8, kK = 4, kAll = kM * kK + kM * kN + kN * kK + kN };
  t_world_t w;
  float host[kAll], back[kAll];
  t_context("gemv_allreduce with x, y, w and bias side by side");
  ASSERT_OK(t_world_init(&w, t, 1, NULL));
  const int dev = t_rank_device(t, 0);
  float* p = (float*)t_alloc(t, dev, sizeof host);
  float *x = p, *y = p + kM * kK, *wt = y + kM * kN, *bs = wt + kN * kK;
  for (int i = 0; i < kAll; i++) host[i] = (float)(i % 7) - 3.0f;
  memset(host + kM * kK, T_POISON, kM * kN * sizeof(float)); /* y */
  t_put(t, dev, p, host, sizeof host);
  ASSERT_OK(fco_gemv_allreduce(w.comms[0], x, wt, bs, y, kM, kN, kK, FCO_F32, FCO_IMPL_AUTO,
                               NULL));
  t_sync(&w);
  t_get(t, dev, back, p, sizeof back);
  const float *hx = host, *hw = host + kM * kK + kM * kN, *hb = hw + kN * kK;
  for (int m = 0; m < kM; m++)
    for (int n = 0; n < kN; n++) {
      float want = hb[n];
      for (int k = 0; k < kK; k++) want += hx[m * kK + k] * hw[n * kK + k];
      ASSERT_EQ(back[kM * kK + m * kN + n], want);
    }
  for (int i = 0; i < kAll; i++)
    if (i < kM * kK || i >= kM * kK + kM * kN) ASSERT_EQ(back[i], host[i]);
  t_free(t, dev, p);
  t_world_destroy(&w, 0);
  t_context("%s", "");
}

/* AUTO's choice from the shape (fco_gemv_ar_auto_impl, src/ops/gemv_allreduce.c: a host
 * function, exported by libfco, not in fco.h) on made-up communicators, so the rule runs in CI
 * without a GPU (auto_rule above reads the plans on a GPU): cpu always 1; one rank impl 0; nccl
 * fused (1 while a rank pushes (P−1)·M·N·4 ≤ FCO_GEMV_AR_ONESHOT_MAX, else 2) at M ≤ 16 (f32:
 * never) and N ≤ 16384, else 3 where fco_allreduce's AUTO takes its one-shot for y, else 0;
 * local fused at N ≤ 8192 for M ≤ 16 and, in bf16 / f16, M 17..64 (all ranks' pushes P·(P−1)·
 * M·N·4 against the bound), else 0; each knob of the rule moving it. */
static void auto_rule_host(void) {
  static const char* const knobs[] = {"FCO_GEMV_AR_AUTO_MAX_M", "FCO_GEMV_AR_FUSED_MAX_N",
                                      "FCO_GEMV_AR_ONESHOT_MAX", "FCO_ALLREDUCE_ONESHOT_MAX"};
  static const struct {
    fco_transport_t t;
    int p, m, n;
    fco_dtype_t dt;
    const char* knob; /* one of knobs[] set to value for this case, or NULL */
    const char* value;
    int want;
  } cases[] = {
      {FCO_TRANSPORT_CPU, 1, 4, 8192, FCO_BF16, NULL, NULL, 1},
      {FCO_TRANSPORT_CPU, 4, 64, 100000, FCO_F32, NULL, NULL, 1},
      {FCO_TRANSPORT_NCCL, 1, 4, 8192, FCO_BF16, NULL, NULL, 0},
      {FCO_TRANSPORT_LOCAL, 1, 4, 8192, FCO_BF16, NULL, NULL, 0},
      {FCO_TRANSPORT_NCCL, 2, 4, 8192, FCO_BF16, NULL, NULL, 1},
      {FCO_TRANSPORT_NCCL, 2, 16, 16384, FCO_F16, NULL, NULL, 1},   /* pushes 1 MiB */
      {FCO_TRANSPORT_NCCL, 8, 16, 16384, FCO_BF16, NULL, NULL, 2},  /* 7 MiB > 4 MiB */
      {FCO_TRANSPORT_NCCL, 2, 16, 16385, FCO_BF16, NULL, NULL, 3},  /* N over: y 0.5 MiB */
      {FCO_TRANSPORT_NCCL, 2, 17, 8192, FCO_BF16, NULL, NULL, 3},   /* M over */
      {FCO_TRANSPORT_NCCL, 2, 1, 4096, FCO_F32, NULL, NULL, 3},     /* f32: never fused */
      {FCO_TRANSPORT_NCCL, 8, 64, 16384, FCO_BF16, NULL, NULL, 0},  /* y 2 MiB > 1 MiB at P 8 */
      {FCO_TRANSPORT_NCCL, 2, 64, 8192, FCO_BF16, "FCO_ALLREDUCE_ONESHOT_MAX", "1k", 0},
      {FCO_TRANSPORT_NCCL, 2, 64, 8192, FCO_BF16, "FCO_GEMV_AR_AUTO_MAX_M", "64", 1},
      {FCO_TRANSPORT_NCCL, 2, 4, 8192, FCO_BF16, "FCO_GEMV_AR_ONESHOT_MAX", "64k", 2},
      {FCO_TRANSPORT_NCCL, 2, 4, 8192, FCO_BF16, "FCO_GEMV_AR_FUSED_MAX_N", "4096", 3},
      {FCO_TRANSPORT_LOCAL, 2, 4, 8192, FCO_BF16, NULL, NULL, 1},
      {FCO_TRANSPORT_LOCAL, 2, 4, 8193, FCO_BF16, NULL, NULL, 0},   /* N over on local */
      {FCO_TRANSPORT_LOCAL, 2, 64, 8192, FCO_BF16, NULL, NULL, 1},  /* grouped, 4 MiB in all */
      {FCO_TRANSPORT_LOCAL, 4, 64, 8192, FCO_F16, NULL, NULL, 2},   /* 24 MiB in all */
      {FCO_TRANSPORT_LOCAL, 2, 64, 8192, FCO_F32, NULL, NULL, 0},
      {FCO_TRANSPORT_LOCAL, 2, 4, 16384, FCO_BF16, "FCO_GEMV_AR_FUSED_MAX_N", "16384", 1},
      {FCO_TRANSPORT_LOCAL, 2, 16, 8192, FCO_BF16, "FCO_GEMV_AR_ONESHOT_MAX", "1M", 1}, /* 1 MiB */
      {FCO_TRANSPORT_LOCAL, 2, 16, 8192, FCO_BF16, "FCO_GEMV_AR_ONESHOT_MAX", "1023k", 2},
  };
  for (int k = 0; k < 4; k++) t_knob_set(knobs[k], NULL);
  struct fco_comm c;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(&c, 0, sizeof c);
    c.transport = cases[i].t;
    c.nranks = cases[i].p;
    t_context("gemv AUTO rule: %s P=%d M=%d N=%d %s%s%s%s%s", fco_transport_name(c.transport),
              c.nranks, cases[i].m, cases[i].n, fco_dtype_name(cases[i].dt),
              cases[i].knob ? ", " : "", cases[i].knob ? cases[i].knob : "",
              cases[i].knob ? "=" : "", cases[i].value ? cases[i].value : "");
    if (cases[i].knob) t_knob_set(cases[i].knob, cases[i].value);
    ASSERT_EQ(fco_gemv_ar_auto_impl(&c, (size_t)cases[i].m, (size_t)cases[i].n, cases[i].dt),
              cases[i].want);
    if (cases[i].knob) t_knob_set(cases[i].knob, NULL);
  }
  for (int k = 0; k < 4; k++) t_knob_reset(knobs[k]);
}

int main(void) {
  t_seed_init();
  auto_rule_host();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = t_quick();
  int max = t_test_max_ranks(t);
  adjacent_buffers(t);
  static const char* const parts[] = {"FCO_TEST_LL", "FCO_TEST_PDL"};
  for (int i = 0; i < 2; i++)
    if (getenv(parts[i]) && !strcmp(getenv(parts[i]), "only"))
      printf("%s=only selects a part of test_gemv_allreduce_kernels; this program runs all of "
             "its own\n", parts[i]);
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    gemv_bufs_t b;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    gemv_bufs_alloc(&b, &w);
    sweep(&w, &b); /* impl 1 with the LL one-shot where it applies (the default) */
    t_knob_set("FCO_GEMV_AR_LL", "0"); /* and the plain one-shot */
    gemv_back_to_back(&w, &b, quick ? 100 : 1000);
    t_knob_reset("FCO_GEMV_AR_LL");
    bad_args(&w, &b);
#ifdef FCO_HAVE_CUDA
    if (t_is_gpu(t)) {
      /* auto_rule with the knobs as the caller set them (by default unset, so its LL choice is
       * checked too); then FCO_GEMV_AR_LL=0 here and FCO_GEMV_PDL=0 below, as
       * test_gemv_allreduce_kernels' ll_tests and pdl_tests
       * left them when both were one program: the graphs and FCO_CHECK_ARGS calls take the
       * plain one-shot (the LL kernels' graphs are the kernels program's), and the device-side
       * mismatch and the rounds after P = 1 run with PDL off (P = 1: on, the default). */
      auto_rule(&w, &b);
      t_knob_set("FCO_GEMV_AR_LL", "0");
      for (int i = 0; i < FCO_GEMV_ALLREDUCE_NUM_IMPLS; i++) gemv_graph(&w, &b, i);
      t_knob_set("FCO_CHECK_ARGS", "1");
      for (int i = 1; i <= 2; i++) gemv_one_call(&w, &b, 3, 1000, 1000, FCO_BF16, 1, i);
      /* and the grouped tiles (M 33..64: impl 1's one-shot, impl 2's two-phase) */
      for (int i = 1; i <= 2; i++)
        gemv_one_call(&w, &b, i == 1 ? 48 : 64, 1000, 1000, FCO_F16, 1, i);
      t_knob_reset("FCO_CHECK_ARGS");
      t_knob_reset("FCO_GEMV_AR_LL");
      t_knob_set("FCO_GEMV_PDL", "0");
      if (t == FCO_TRANSPORT_NCCL && p == 2) {
        device_mismatch_rounds(t, 1);
        device_mismatch_rounds(t, 0);
        late_peer_rounds(t);
        device_mismatch(&w, &b); /* leaves the comms unusable: last */
        gemv_bufs_free(&b);
        for (int r = 0; r < w.n; r++) (void)fco_comm_destroy(w.comms[r]);
        printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
        continue;
      }
    }
#endif
    gemv_bufs_free(&b);
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
  return t_pass(t, max, t_test_rank_cap());
}

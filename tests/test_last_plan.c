/*
 * test_last_plan.c — fco_last_plan(comm) names what the last successful call on comm ran:
 * "" on a fresh communicator (and for NULL); "allreduce impl <n>" after fco_allreduce, with
 * FCO_IMPL_AUTO resolved to a valid impl (on cpu / local the rule's 1, and one whose workspace
 * is AUTO's) and an explicit impl named as given; inside fco_group_start/end the plan changes
 * only when fco_group_end issues the ops; a call that fails with a bad argument (on one rank, or
 * a group whose ranks disagree) leaves ""; the next good call sets it again; fco_gemv_allreduce,
 * fco_embedding_alltoall and fco_gemm_alltoall name their operator. GPU launchers may append
 * detail after "<op> impl <n>", so plans are matched up to the first space after the number.
 *   make test   or   build/tests/test_last_plan   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define P 2

/* The impl of a plan "<op> impl <n>[ detail]", or -1 when it is not of that form. */
static int plan_impl(const char* plan, const char* op) {
  size_t n = strlen(op);
  if (!plan || strncmp(plan, op, n) || strncmp(plan + n, " impl ", 6)) return -1;
  const char* s = plan + n + 6;
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || (*end != '\0' && *end != ' ') || v < 0) return -1;
  return (int)v;
}

/* Every rank's plan names `op`; returns the impl, the same on every rank. */
static int assert_plans(const t_world_t* w, const char* op, int line) {
  int impl = -1;
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    int i = plan_impl(plan, op);
    if (i < 0)
      t_fail(__FILE__, line, "rank %d: fco_last_plan is \"%s\", not \"%s impl <n>...\"", r,
             plan ? plan : "(null)", op);
    if (r > 0 && i != impl)
      t_fail(__FILE__, line, "rank %d's plan \"%s\" names impl %d, rank 0's impl %d", r, plan, i,
             impl);
    impl = i;
  }
  printf("rank 0 ran \"%s\"\n", fco_last_plan(w->comms[0]));
  return impl;
}
#define ASSERT_PLANS(w, op) assert_plans((w), (op), __LINE__)

static void assert_empty(const t_world_t* w, int r, int line) {
  const char* plan = fco_last_plan(w->comms[r]);
  if (!plan || plan[0])
    t_fail(__FILE__, line, "rank %d: fco_last_plan is \"%s\", want \"\"", r,
           plan ? plan : "(null)");
}
#define ASSERT_EMPTY(w, r) assert_empty((w), (r), __LINE__)

static void fresh(const t_world_t* w) {
  t_context("fresh communicator");
  ASSERT_NOT_NULL(fco_last_plan(NULL));
  ASSERT_STR_EQ(fco_last_plan(NULL), "");
  for (int r = 0; r < w->n; r++) ASSERT_EMPTY(w, r);
}

static void allreduce(const t_world_t* w) {
  t_ar_bufs_t b;
  t_ar_alloc(w, &b, 4096);
  uint64_t seed = t_next_seed();

  t_context("allreduce impl AUTO");
  t_ar_prepare(w, &b, 4096, FCO_F32, 0, seed);
  ASSERT_OK(t_ar_run(w, &b, FCO_IMPL_AUTO));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  int impl = ASSERT_PLANS(w, "allreduce");
  ASSERT_LT(impl, FCO_ALLREDUCE_NUM_IMPLS);
  if (w->transport != FCO_TRANSPORT_NCCL) ASSERT_EQ(impl, 1); /* src/ops/allreduce.c's rule */
  size_t ws_auto = 0, ws_impl = 0;
  ASSERT_OK(fco_allreduce_workspace(w->comms[0], 4096, FCO_F32, FCO_IMPL_AUTO, &ws_auto));
  ASSERT_OK(fco_allreduce_workspace(w->comms[0], 4096, FCO_F32, impl, &ws_impl));
  ASSERT_EQ(ws_auto, ws_impl);

  for (int i = 0; i < FCO_ALLREDUCE_NUM_IMPLS; i++) {
    t_context("allreduce impl %d", i);
    t_ar_prepare(w, &b, 1000, FCO_BF16, i & 1, seed);
    ASSERT_OK(t_ar_run(w, &b, i));
    t_sync(w);
    ASSERT_EQ(t_ar_check(w, &b, seed), 0);
    ASSERT_EQ(ASSERT_PLANS(w, "allreduce"), i);
  }

  /* The plan changes when fco_group_end issues the ops, not when they are queued. */
  t_context("allreduce impl 0 inside a group");
  t_ar_prepare(w, &b, 1000, FCO_F32, 0, seed);
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    ASSERT_OK(fco_allreduce(w->comms[r], b.in[r], b.out[r], b.count, b.dtype, 0, NULL));
    ASSERT_EQ(plan_impl(fco_last_plan(w->comms[r]), "allreduce"), FCO_ALLREDUCE_NUM_IMPLS - 1);
  }
  ASSERT_OK(fco_group_end());
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  ASSERT_EQ(ASSERT_PLANS(w, "allreduce"), 0);

  /* A bad argument on rank 0: its plan is cleared, rank 1 (no call) keeps its own. */
  t_context("allreduce with count 0 on rank 0");
  ASSERT_RES(fco_allreduce(w->comms[0], b.in[0], b.out[0], 0, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  ASSERT_EQ(plan_impl(fco_last_plan(w->comms[1]), "allreduce"), 0);
  t_context("allreduce with impl 99 on rank 1");
  ASSERT_RES(fco_allreduce(w->comms[1], b.in[1], b.out[1], 1000, FCO_F32, 99, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 1);

  t_context("allreduce impl 1 after the failures");
  t_ar_prepare(w, &b, 1000, FCO_F16, 1, seed);
  ASSERT_OK(t_ar_run(w, &b, 1));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  ASSERT_EQ(ASSERT_PLANS(w, "allreduce"), 1);

  /* Ranks that disagree: the group fails on every rank, and no rank keeps a plan (not on nccl,
   * as test_bad_args's mismatches). */
  if (w->transport != FCO_TRANSPORT_NCCL) {
    t_context("allreduce whose ranks disagree on count");
    t_ar_prepare(w, &b, 1000, FCO_F32, 0, seed);
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++)
      ASSERT_OK(fco_allreduce(w->comms[r], b.in[r], b.out[r], 1000 - (size_t)r, FCO_F32, 0, NULL));
    ASSERT_RES(fco_group_end(), FCO_ERR_INVALID_ARGUMENT);
    for (int r = 0; r < w->n; r++) ASSERT_EMPTY(w, r);
  }
  t_ar_free(w, &b);
}

static void gemv_allreduce(const t_world_t* w) {
  enum { M = 2, N = 32, K = 16 };
  void *x[P], *wt[P], *y[P];
  float hx[M * K], hw[N * K];
  for (int i = 0; i < M * K; i++) hx[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < N * K; i++) hw[i] = (float)(i % 3) - 1.0f;
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    x[r] = t_alloc(w->transport, dev, sizeof hx);
    wt[r] = t_alloc(w->transport, dev, sizeof hw);
    y[r] = t_alloc(w->transport, dev, M * N * sizeof(float));
    t_put(w->transport, dev, x[r], hx, sizeof hx);
    t_put(w->transport, dev, wt[r], hw, sizeof hw);
  }
  const int impls[2] = {FCO_IMPL_AUTO, 0};
  for (int k = 0; k < 2; k++) {
    t_context("gemv_allreduce impl %d", impls[k]);
    fco_result_t first = FCO_OK;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++) {
      fco_result_t e = fco_gemv_allreduce(w->comms[r], x[r], wt[r], NULL, y[r], M, N, K,
                                          FCO_F32, impls[k], NULL);
      if (e != FCO_OK && first == FCO_OK) first = e;
    }
    fco_result_t e = fco_group_end();
    ASSERT_OK(first);
    ASSERT_OK(e);
    t_sync(w);
    int impl = ASSERT_PLANS(w, "gemv_allreduce");
    ASSERT_LT(impl, FCO_GEMV_ALLREDUCE_NUM_IMPLS);
    if (impls[k] != FCO_IMPL_AUTO) ASSERT_EQ(impl, impls[k]);
  }
  t_context("gemv_allreduce with M 0 on rank 0");
  ASSERT_RES(fco_gemv_allreduce(w->comms[0], x[0], wt[0], NULL, y[0], 0, N, K, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    t_free(w->transport, dev, x[r]);
    t_free(w->transport, dev, wt[r]);
    t_free(w->transport, dev, y[r]);
  }
}

/* Rank r owns table r (4 rows of D floats); every rank owns one sample of the batch of P; each
 * bag holds one index. */
static void embedding_alltoall(const t_world_t* w) {
  enum { D = 8, ROWS = 4 };
  int32_t tpr[P];
  int64_t bpr[P], rows[1] = {ROWS};
  int32_t offsets[P + 1], indices[P];
  for (int r = 0; r < P; r++) {
    tpr[r] = 1;
    bpr[r] = 1;
    offsets[r] = r;
    indices[r] = r % ROWS;
  }
  offsets[P] = P;
  float hw[ROWS * D];
  for (int i = 0; i < ROWS * D; i++) hw[i] = (float)(i % 7);
  void *wt[P], *of[P], *ix[P], *out[P];
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    wt[r] = t_alloc(w->transport, dev, sizeof hw);
    of[r] = t_alloc(w->transport, dev, sizeof offsets);
    ix[r] = t_alloc(w->transport, dev, sizeof indices);
    out[r] = t_alloc(w->transport, dev, P * D * sizeof(float));
    t_put(w->transport, dev, wt[r], hw, sizeof hw);
    t_put(w->transport, dev, of[r], offsets, sizeof offsets);
    t_put(w->transport, dev, ix[r], indices, sizeof indices);
  }
  const int impls[2] = {FCO_IMPL_AUTO, 0};
  for (int k = 0; k < 2; k++) {
    t_context("embedding_alltoall impl %d", impls[k]);
    fco_result_t first = FCO_OK;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++) {
      fco_result_t e = fco_embedding_alltoall(w->comms[r], wt[r], rows, tpr, bpr, D, FCO_F32,
                                              of[r], ix[r], P, FCO_EMB_INDEX_I32, NULL,
                                              FCO_EMB_POOL_SUM, out[r], impls[k], NULL);
      if (e != FCO_OK && first == FCO_OK) first = e;
    }
    fco_result_t e = fco_group_end();
    ASSERT_OK(first);
    ASSERT_OK(e);
    t_sync(w);
    int impl = ASSERT_PLANS(w, "embedding_alltoall");
    ASSERT_LT(impl, FCO_EMBEDDING_ALLTOALL_NUM_IMPLS);
    if (impls[k] != FCO_IMPL_AUTO) ASSERT_EQ(impl, impls[k]);
  }
  t_context("embedding_alltoall with dim 0 on rank 0");
  ASSERT_RES(fco_embedding_alltoall(w->comms[0], wt[0], rows, tpr, bpr, 0, FCO_F32, of[0], ix[0],
                                    P, FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, out[0], 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    t_free(w->transport, dev, wt[r]);
    t_free(w->transport, dev, of[r]);
    t_free(w->transport, dev, ix[r]);
    t_free(w->transport, dev, out[r]);
  }
}

/* One expert per rank, one row from every source rank; the host hints are given. */
static void gemm_alltoall(const t_world_t* w) {
  enum { K = 16, N = 16 };
  int32_t counts[P], recv[P];
  for (int s = 0; s < P; s++) counts[s] = recv[s] = 1;
  float ha[P * K], hw[K * N];
  for (int i = 0; i < P * K; i++) ha[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < K * N; i++) hw[i] = (float)(i % 3) - 1.0f;
  void *a[P], *wt[P], *cnt[P], *out[P];
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    a[r] = t_alloc(w->transport, dev, sizeof ha);
    wt[r] = t_alloc(w->transport, dev, sizeof hw);
    cnt[r] = t_alloc(w->transport, dev, sizeof counts);
    out[r] = t_alloc(w->transport, dev, P * N * sizeof(float));
    t_put(w->transport, dev, a[r], ha, sizeof ha);
    t_put(w->transport, dev, wt[r], hw, sizeof hw);
    t_put(w->transport, dev, cnt[r], counts, sizeof counts);
  }
  const int impls[2] = {FCO_IMPL_AUTO, 0};
  for (int k = 0; k < 2; k++) {
    t_context("gemm_alltoall impl %d", impls[k]);
    fco_result_t first = FCO_OK;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++) {
      fco_result_t e = fco_gemm_alltoall(w->comms[r], a[r], P, wt[r], FCO_W_KN, 1,
                                         (const int32_t*)cnt[r], counts, recv, out[r], P, K, N,
                                         FCO_F32, impls[k], NULL);
      if (e != FCO_OK && first == FCO_OK) first = e;
    }
    fco_result_t e = fco_group_end();
    ASSERT_OK(first);
    ASSERT_OK(e);
    t_sync(w);
    int impl = ASSERT_PLANS(w, "gemm_alltoall");
    ASSERT_LT(impl, FCO_GEMM_ALLTOALL_NUM_IMPLS);
    if (impls[k] != FCO_IMPL_AUTO) ASSERT_EQ(impl, impls[k]);
  }
  t_context("gemm_alltoall with w_layout 2 on rank 0");
  ASSERT_RES(fco_gemm_alltoall(w->comms[0], a[0], P, wt[0], 2, 1, (const int32_t*)cnt[0], counts,
                               recv, out[0], P, K, N, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    t_free(w->transport, dev, a[r]);
    t_free(w->transport, dev, wt[r]);
    t_free(w->transport, dev, cnt[r]);
    t_free(w->transport, dev, out[r]);
  }
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, P);
  t_world_t w;
  ASSERT_OK(t_world_init(&w, t, P, NULL));
  fresh(&w);
  allreduce(&w);
  gemv_allreduce(&w);
  embedding_alltoall(&w);
  gemm_alltoall(&w);
  t_world_destroy(&w, 0);
  printf("PASS\n");
  return 0;
}

/*
 * test_last_plan.c — fco_last_plan(comm) names what the last successful call on comm ran:
 * "" on a fresh communicator (and for NULL); "allreduce impl <n>" after fco_allreduce, with
 * FCO_IMPL_AUTO resolved to a valid impl (on cpu / local the rule's 1, and one whose workspace
 * is AUTO's) and an explicit impl named as given; inside fco_group_start/end the plan changes
 * only when fco_group_end issues the ops; a call that fails with a bad argument (on one rank, or
 * a group whose ranks disagree) leaves ""; the next good call sets it again; fco_gemv_allreduce,
 * fco_embedding_alltoall and fco_gemm_alltoall name their operator (on cpu AUTO's impl is 1 for
 * each: every impl is the reference there). GPU launchers may append
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

/* fco_allreduce_workspace of count f32 elements on comm with impl. */
static size_t ar_ws(fco_comm_t comm, size_t count, int impl) {
  size_t bytes = 0;
  ASSERT_OK(fco_allreduce_workspace(comm, count, FCO_F32, impl, &bytes));
  return bytes;
}

/* AUTO's one-shot edge at `edge` f32 elements, read through the workspace it sizes (one-shot
 * 2 · P · S; impl 0: S on local, 0 on nccl) without running a call: the one-shot at the edge,
 * impl 0 64 elements above it and at `above`, and the one-shot at `above` again with
 * FCO_ALLREDUCE_ONESHOT_MAX=64M. */
static void expect_oneshot_edge(fco_comm_t comm, size_t edge, size_t above) {
  ASSERT_NE(ar_ws(comm, above, 0), ar_ws(comm, above, 1)); /* the workspace tells them apart */
  ASSERT_EQ(ar_ws(comm, edge, FCO_IMPL_AUTO), ar_ws(comm, edge, 1));
  ASSERT_EQ(ar_ws(comm, edge + 64, FCO_IMPL_AUTO), ar_ws(comm, edge + 64, 0));
  ASSERT_EQ(ar_ws(comm, above, FCO_IMPL_AUTO), ar_ws(comm, above, 0));
  t_knob_set("FCO_ALLREDUCE_ONESHOT_MAX", "64M");
  ASSERT_EQ(ar_ws(comm, above, FCO_IMPL_AUTO), ar_ws(comm, above, 1));
  t_knob_reset("FCO_ALLREDUCE_ONESHOT_MAX");
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
  ASSERT_EQ(ar_ws(w->comms[0], 4096, FCO_IMPL_AUTO), ar_ws(w->comms[0], 4096, impl));
  /* local: impl 0 (copies, one reduction) above 8 MB / P (16 MB: 0.8x one-shot, one H200 and
   * one H100), one-shot up to it or up to FCO_ALLREDUCE_ONESHOT_MAX */
  if (w->transport == FCO_TRANSPORT_LOCAL && w->n > 1)
    expect_oneshot_edge(w->comms[0], ((size_t)8 << 20) / (size_t)w->n / 4, (size_t)4 << 20);
  /* nccl, one rank: one-shot up to 4 MB, ncclAllReduce (one copy) above — the one-shot was
   * 0.83-0.88x at 16 MB on one H200 and one H100 */
  if (w->transport == FCO_TRANSPORT_NCCL && w->n == 1)
    expect_oneshot_edge(w->comms[0], ((size_t)4 << 20) / 4, ((size_t)4 << 20) / 4 + 64);

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

/* Per-rank device buffers of one op's calls: buf[k][r], freed by bufs_free. */
enum { MAX_BUFS = 4 };
typedef struct {
  void* buf[MAX_BUFS][P];
  int n;
} bufs_t;

/* A new buffer of `bytes` on every rank (filled from `src` when not NULL); returns its index. */
static int bufs_add(const t_world_t* w, bufs_t* b, const void* src, size_t bytes) {
  ASSERT_LT(b->n, MAX_BUFS);
  for (int r = 0; r < w->n; r++) {
    int dev = t_rank_device(w->transport, r);
    b->buf[b->n][r] = t_alloc(w->transport, dev, bytes);
    if (src) t_put(w->transport, dev, b->buf[b->n][r], src, bytes);
  }
  return b->n++;
}

static void bufs_free(const t_world_t* w, bufs_t* b) {
  for (int k = 0; k < b->n; k++)
    for (int r = 0; r < w->n; r++)
      t_free(w->transport, t_rank_device(w->transport, r), b->buf[k][r]);
  b->n = 0;
}

/* Rank r's call of the op under test with `impl`. */
typedef fco_result_t (*rank_call_t)(const t_world_t* w, const bufs_t* b, int r, int impl);

/* The op on every rank in one group, with FCO_IMPL_AUTO and then impl 0: every call succeeds
 * and every rank's plan names `op` with a valid impl (impl 0 when asked for). */
static void auto_then_impl0(const t_world_t* w, const bufs_t* b, const char* op, int num_impls,
                            rank_call_t call) {
  const int impls[2] = {FCO_IMPL_AUTO, 0};
  for (int k = 0; k < 2; k++) {
    t_context("%s impl %d", op, impls[k]);
    fco_result_t first = FCO_OK;
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++) {
      fco_result_t e = call(w, b, r, impls[k]);
      if (e != FCO_OK && first == FCO_OK) first = e;
    }
    fco_result_t e = fco_group_end();
    ASSERT_OK(first);
    ASSERT_OK(e);
    t_sync(w);
    int impl = ASSERT_PLANS(w, op);
    ASSERT_LT(impl, num_impls);
    if (impls[k] != FCO_IMPL_AUTO) ASSERT_EQ(impl, impls[k]);
    /* cpu: every impl is the one reference, and AUTO's rule names 1 for every operator */
    else if (w->transport == FCO_TRANSPORT_CPU) ASSERT_EQ(impl, 1);
  }
}

enum { GV_M = 2, GV_N = 32, GV_K = 16 };
enum { GV_X, GV_W, GV_Y };
static fco_result_t gemv_call(const t_world_t* w, const bufs_t* b, int r, int impl) {
  return fco_gemv_allreduce(w->comms[r], b->buf[GV_X][r], b->buf[GV_W][r], NULL,
                            b->buf[GV_Y][r], GV_M, GV_N, GV_K, FCO_F32, impl, NULL);
}

static void gemv_allreduce(const t_world_t* w) {
  float hx[GV_M * GV_K], hw[GV_N * GV_K];
  for (int i = 0; i < GV_M * GV_K; i++) hx[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < GV_N * GV_K; i++) hw[i] = (float)(i % 3) - 1.0f;
  bufs_t b = {.n = 0};
  bufs_add(w, &b, hx, sizeof hx);
  bufs_add(w, &b, hw, sizeof hw);
  bufs_add(w, &b, NULL, GV_M * GV_N * sizeof(float));
  auto_then_impl0(w, &b, "gemv_allreduce", FCO_GEMV_ALLREDUCE_NUM_IMPLS, gemv_call);
  t_context("gemv_allreduce with M 0 on rank 0");
  ASSERT_RES(fco_gemv_allreduce(w->comms[0], b.buf[GV_X][0], b.buf[GV_W][0], NULL,
                                b.buf[GV_Y][0], 0, GV_N, GV_K, FCO_F32, 1, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  bufs_free(w, &b);
}

/* Rank r owns table r (4 rows of D floats); every rank owns one sample of the batch of P; each
 * bag holds one index. */
enum { EA_D = 8, EA_ROWS = 4 };
enum { EA_W, EA_OFF, EA_IDX, EA_OUT };
static int32_t ea_tpr[P];
static int64_t ea_bpr[P], ea_rows[1] = {EA_ROWS};
static fco_result_t ea_call_dim(const t_world_t* w, const bufs_t* b, int r, int impl, int64_t d) {
  return fco_embedding_alltoall(w->comms[r], b->buf[EA_W][r], ea_rows, ea_tpr, ea_bpr, d,
                                FCO_F32, b->buf[EA_OFF][r], b->buf[EA_IDX][r], P,
                                FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, b->buf[EA_OUT][r],
                                impl, NULL);
}
static fco_result_t ea_call(const t_world_t* w, const bufs_t* b, int r, int impl) {
  return ea_call_dim(w, b, r, impl, EA_D);
}

static void embedding_alltoall(const t_world_t* w) {
  int32_t offsets[P + 1], indices[P];
  for (int r = 0; r < P; r++) {
    ea_tpr[r] = 1;
    ea_bpr[r] = 1;
    offsets[r] = r;
    indices[r] = r % EA_ROWS;
  }
  offsets[P] = P;
  float hw[EA_ROWS * EA_D];
  for (int i = 0; i < EA_ROWS * EA_D; i++) hw[i] = (float)(i % 7);
  bufs_t b = {.n = 0};
  bufs_add(w, &b, hw, sizeof hw);
  bufs_add(w, &b, offsets, sizeof offsets);
  bufs_add(w, &b, indices, sizeof indices);
  bufs_add(w, &b, NULL, P * EA_D * sizeof(float));
  auto_then_impl0(w, &b, "embedding_alltoall", FCO_EMBEDDING_ALLTOALL_NUM_IMPLS, ea_call);
  t_context("embedding_alltoall with dim 0 on rank 0");
  ASSERT_RES(ea_call_dim(w, &b, 0, 1, 0), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  bufs_free(w, &b);
}

/* One expert per rank, one row from every source rank; the host hints are given. */
enum { GA_K = 16, GA_N = 16 };
enum { GA_A, GA_W, GA_CNT, GA_OUT };
static int32_t ga_counts[P], ga_recv[P];
static fco_result_t ga_call_layout(const t_world_t* w, const bufs_t* b, int r, int impl,
                                   int layout) {
  return fco_gemm_alltoall(w->comms[r], b->buf[GA_A][r], P, b->buf[GA_W][r], layout, 1,
                           (const int32_t*)b->buf[GA_CNT][r], ga_counts, ga_recv,
                           b->buf[GA_OUT][r], P, GA_K, GA_N, FCO_F32, impl, NULL);
}
static fco_result_t ga_call(const t_world_t* w, const bufs_t* b, int r, int impl) {
  return ga_call_layout(w, b, r, impl, FCO_W_KN);
}

static void gemm_alltoall(const t_world_t* w) {
  for (int s = 0; s < P; s++) ga_counts[s] = ga_recv[s] = 1;
  float ha[P * GA_K], hw[GA_K * GA_N];
  for (int i = 0; i < P * GA_K; i++) ha[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < GA_K * GA_N; i++) hw[i] = (float)(i % 3) - 1.0f;
  bufs_t b = {.n = 0};
  bufs_add(w, &b, ha, sizeof ha);
  bufs_add(w, &b, hw, sizeof hw);
  bufs_add(w, &b, ga_counts, sizeof ga_counts);
  bufs_add(w, &b, NULL, P * GA_N * sizeof(float));
  auto_then_impl0(w, &b, "gemm_alltoall", FCO_GEMM_ALLTOALL_NUM_IMPLS, ga_call);
  t_context("gemm_alltoall with w_layout 2 on rank 0");
  ASSERT_RES(ga_call_layout(w, &b, 0, 1, 2), FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EMPTY(w, 0);
  bufs_free(w, &b);
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

/*
 * test_mixed_ops.c — every operator after every other, back to back. Each round draws a random
 * sequence of calls of the four operators (fco_allreduce, fco_gemv_allreduce,
 * fco_embedding_alltoall, fco_gemm_alltoall), each with its own fresh inputs, poisoned output,
 * random shape, dtype and impl (every impl and FCO_IMPL_AUTO), and issues them for every rank
 * with no synchronisation between them — on GPU transports they queue on the stream, so a fused
 * call may start while a peer still runs the call before it, of another operator and another
 * size. The workspace is reserved first (no growth, which would synchronise, separates them).
 * Then one sync, no asynchronous error on any rank, and every call's output equal to its
 * reference (the operators' own fixtures: exact for allreduce and the integer-valued embedding
 * tables, float64 by relative error for the GEMV and the GEMM; guards after every output
 * intact). This is the workspace rule of src/core/internal.h across operators: the P = 4 bug of
 * run 39ee289 (embedding impl 0 followed by a fused call) was of this kind. One test for a pair
 * of operators already exists (test_gemm_alltoall's back_to_back, with allreduces between);
 * this one covers every pair, in both orders, at random. On GPU transports where the ranks share
 * one stream (local, or P = 1) some rounds are also captured into one CUDA graph and replayed 3
 * times (fresh allreduce / GEMV inputs, every output poisoned, then checked, before each), as a
 * decoder layer's graph would hold several of these operators; and three rounds that together
 * hold every (operator, impl) pair are captured, then replayed after the workspace grew twice,
 * with eager calls on the new workspace between and back to back after (growth_round: a graph
 * captured before a growth stays valid, fco.h). On cpu and nccl some rounds are
 * also issued from a thread per rank, each issuing its own rank's calls outside any group (the
 * other way fco_comm_init_all's communicators may be driven, fco.h; not on local, which needs
 * every virtual rank's call in one group); the outputs are checked after the threads are joined.
 *   make test   or   build/tests/test_mixed_ops   (FCO_TRANSPORT=cpu|local|nccl)
 * Worlds of P = 1..FCO_TEST_MAX_RANKS; FCO_TEST_SEED reproduces a run (the sequences and every
 * input); FCO_TEST_QUICK=1 runs 4 eager rounds a world instead of 12, 1 graph round instead of
 * 3, and 2 thread-per-rank rounds instead of 4.
 */
#include <pthread.h>
#include <stdlib.h>

#include "ea_fixture.h"
#include "ga_fixture.h"
#include "gemv_fixture.h"

enum { kAllreduce, kGemv, kEmbedding, kGemm, kNumOps };
static const char* const kOpName[kNumOps] = {"allreduce", "gemv_allreduce", "embedding_alltoall",
                                             "gemm_alltoall"};
static const int kNumImpls[kNumOps] = {FCO_ALLREDUCE_NUM_IMPLS, FCO_GEMV_ALLREDUCE_NUM_IMPLS,
                                       FCO_EMBEDDING_ALLTOALL_NUM_IMPLS,
                                       FCO_GEMM_ALLTOALL_NUM_IMPLS};
#define MAX_CALLS 10
#define MAX_GEMV 2 /* gemv buffers a round (each rank's W has room for N 1000 × K 4608) */
#define AR_MAX_COUNT 70000

static const fco_dtype_t kDtypes[3] = {FCO_F32, FCO_F16, FCO_BF16};

typedef struct {
  int op, impl, hints;
  uint64_t seed;
  size_t kt; /* gemv: K before the split (a refresh keeps the shape) */
  char what[200]; /* the call, for t_context */
  /* one of these, by op */
  t_ar_bufs_t ar;
  gemv_bufs_t* gv;
  ea_prob_t ea;
  ga_case_t gc;
  ga_bufs_t gb;
} call_t;

static uint64_t g_rng;
static uint64_t rnd(void) { return g_rng = t_mix(g_rng + 0x9e3779b97f4a7c15ull); }
static int rnd_in(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

/* Shape, inputs and poisoned output of one call of `impl` (kRandomImpl: any, AUTO included);
 * its workspace need into *need. */
#define kRandomImpl (-2)
static void make_call(const t_world_t* w, call_t* c, int op, int impl, size_t* need) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->impl = impl == kRandomImpl ? rnd_in(-1, kNumImpls[op] - 1) : impl; /* -1: FCO_IMPL_AUTO */
  c->seed = t_next_seed();
  c->hints = (int)(c->seed >> 63);
  const fco_dtype_t dt = kDtypes[rnd_in(0, 2)];
  const char* impl_s = c->impl == FCO_IMPL_AUTO ? "auto" : "";
  size_t x = 0;
  switch (op) {
    case kAllreduce: {
      const size_t count = (size_t)rnd_in(1, AR_MAX_COUNT);
      const int inplace = rnd_in(0, 1);
      t_ar_alloc(w, &c->ar, count);
      t_ar_prepare(w, &c->ar, count, dt, inplace, c->seed);
      ASSERT_OK(fco_allreduce_workspace(w->comms[0], count, dt, c->impl, &x));
      snprintf(c->what, sizeof c->what, "allreduce count %zu %s%s impl %d%s", count,
               fco_dtype_name(dt), inplace ? " in place" : "", c->impl, impl_s);
      break;
    }
    case kGemv: {
      static const size_t kM[] = {1, 3, 4, 8, 9, 16, 17, 24, 33, 48, 64};
      const size_t M = kM[rnd_in(0, (int)(sizeof kM / sizeof kM[0]) - 1)];
      const size_t N = (size_t)(rnd_in(0, 1) ? 16 * rnd_in(1, 64) : rnd_in(1, 1000));
      /* the vector path (every K_r a multiple of 8) or odd K_r */
      const size_t kt = rnd_in(0, 2) ? gemv_vec_kt_le(w->n, (size_t)rnd_in(288, 1000))
                                     : (size_t)rnd_in(w->n, 1000);
      const int bias = rnd_in(0, 1);
      c->gv = (gemv_bufs_t*)calloc(1, sizeof *c->gv);
      ASSERT_NOT_NULL(c->gv);
      gemv_bufs_alloc(c->gv, w);
      gemv_prepare(c->gv, M, N, kt, dt, bias, c->seed);
      c->kt = kt;
      for (int r = 0; r < w->n; r++) {
        size_t y = 0;
        ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[r], M, N, c->gv->K[r], dt, c->impl, &y));
        if (y > x) x = y;
      }
      snprintf(c->what, sizeof c->what, "gemv_allreduce M %zu N %zu K %zu %s%s impl %d%s", M, N,
               kt, fco_dtype_name(dt), bias ? " bias" : "", c->impl, impl_s);
      break;
    }
    case kEmbedding: {
      static const int64_t kD[] = {1, 7, 16, 64, 130};
      const int64_t D = kD[rnd_in(0, 4)];
      const fco_emb_index_t it = rnd_in(0, 1) ? FCO_EMB_INDEX_I64 : FCO_EMB_INDEX_I32;
      const int weighted = rnd_in(0, 1);
      const fco_emb_pooling_t pool = rnd_in(0, 1) ? FCO_EMB_POOL_MEAN : FCO_EMB_POOL_SUM;
      /* integer-valued tables: the check is exact */
      ea_prob_make(&c->ea, w->n, D, dt, it, weighted, pool, 0, c->seed);
      ea_prob_upload(w, &c->ea);
      ASSERT_OK(fco_embedding_alltoall_workspace(w->comms[0], c->ea.tpr, c->ea.bpr, D, dt,
                                                 c->impl, &x));
      snprintf(c->what, sizeof c->what,
               "embedding_alltoall D %lld T %lld B %lld %s %s%s%s impl %d%s",
               (long long)D, (long long)c->ea.T, (long long)c->ea.B, fco_dtype_name(dt),
               it == FCO_EMB_INDEX_I64 ? "i64" : "i32", weighted ? " weighted" : "",
               pool == FCO_EMB_POOL_MEAN ? " mean" : " sum", c->impl, impl_s);
      break;
    }
    default: {
      const int K = rnd_in(0, 1) ? 8 * rnd_in(1, 24) : rnd_in(1, 200);
      const int N = rnd_in(0, 1) ? 8 * rnd_in(1, 24) : rnd_in(1, 200);
      const int layout = rnd_in(0, 1), big = rnd_in(0, 3) == 0;
      ga_make_case(&c->gc, w->n, K, N, layout, dt, c->seed, big, rnd_in(0, 2));
      ga_upload(w, &c->gc, &c->gb);
      ASSERT_OK(fco_gemm_alltoall_workspace(w->comms[0], c->gc.a_rows, c->gc.out_rows, K, N, dt,
                                            c->impl, &x));
      snprintf(c->what, sizeof c->what, "gemm_alltoall K %d N %d %s %s big %d impl %d%s", K, N,
               layout ? "W[N,K]" : "W[K,N]", fco_dtype_name(dt), big, c->impl, impl_s);
      break;
    }
  }
  if (x > *need) *need = x;
}

/* Every rank's call in one group; sp: per-rank streams (the capture's), or NULL. The embedding
 * and GEMM fixtures take one stream for all ranks: callers pass per-rank streams only where
 * every rank shares one (local, or P = 1). */
static fco_result_t issue(const t_world_t* w, const call_t* c, void* const* sp) {
  switch (c->op) {
    case kAllreduce: return t_ar_run_on(w, &c->ar, c->impl, sp);
    case kGemv: return gemv_issue(w, c->gv, c->impl, sp);
    case kEmbedding: return ea_prob_run(w, &c->ea, c->impl, sp ? sp[0] : NULL);
    default: return ga_issue(w, &c->gc, &c->gb, c->impl, c->hints, sp ? sp[0] : NULL);
  }
}

/* Rank r's part of the call alone, outside any group, on the default stream (a thread per
 * rank). */
static fco_result_t issue_rank(const t_world_t* w, const call_t* c, int r) {
  switch (c->op) {
    case kAllreduce: return t_ar_run_rank(w, &c->ar, r, c->impl, NULL);
    case kGemv: return gemv_issue_rank(w, c->gv, r, c->impl, NULL);
    case kEmbedding: return ea_prob_run_rank(w, &c->ea, r, c->impl, NULL);
    default: return ga_issue_rank(w, &c->gc, &c->gb, r, c->impl, c->hints, NULL);
  }
}

/* Wrong elements of the call's output(s). */
static size_t check(const t_world_t* w, call_t* c) {
  switch (c->op) {
    case kAllreduce: return t_ar_check(w, &c->ar, c->seed);
    case kGemv: return gemv_check(w, c->gv);
    case kEmbedding: return ea_prob_check(w, &c->ea);
    default: return ga_check(w, &c->gc, &c->gb);
  }
}

static void free_call(const t_world_t* w, call_t* c) {
  switch (c->op) {
    case kAllreduce: t_ar_free(w, &c->ar); break;
    case kGemv:
      gemv_bufs_free(c->gv);
      free(c->gv);
      break;
    case kEmbedding: ea_prob_free(w, &c->ea); break;
    default:
      ga_free_bufs(w, &c->gc, &c->gb);
      ga_free_case(&c->gc);
      break;
  }
}

/* n random calls (at most MAX_GEMV of them GEMVs), prepared, and the workspace reserved for
 * all of them. */
static int make_round(const t_world_t* w, int round, call_t* calls) {
  const int n = rnd_in(4, MAX_CALLS);
  int gemvs = 0;
  size_t need = 0;
  for (int i = 0; i < n; i++) {
    int op = rnd_in(0, kNumOps - 1);
    if (op == kGemv && gemvs == MAX_GEMV) op = kGemm;
    gemvs += op == kGemv;
    t_context("P=%d round %d call %d: preparing %s", w->n, round, i, kOpName[op]);
    make_call(w, &calls[i], op, kRandomImpl, &need);
  }
  t_context("P=%d round %d: fco_comm_reserve(%zu)", w->n, round, need);
  if (need) ASSERT_OK(fco_comm_reserve(w->comms[0], need)); /* a world reserves for all ranks */
  return n;
}

/* After one sync: no async error, every output right. */
static void check_round(const t_world_t* w, int round, call_t* calls, int n) {
  t_context("P=%d round %d: sync after %d calls", w->n, round, n);
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int i = 0; i < n; i++) {
    t_context("P=%d round %d call %d (check): %s seed 0x%016llx", w->n, round, i, calls[i].what,
              (unsigned long long)calls[i].seed);
    ASSERT_EQ(check(w, &calls[i]), (size_t)0);
  }
}

/* Issue the round (sp as for issue()), then check_round. */
static void run_round(const t_world_t* w, int round, call_t* calls, int n, void* const* sp,
                      int seen[kNumOps][kNumOps]) {
  for (int i = 0; i < n; i++) {
    t_context("P=%d round %d call %d (after %s): %s%s seed 0x%016llx", w->n, round, i,
              i ? kOpName[calls[i - 1].op] : "none", calls[i].what,
              calls[i].op == kGemm && calls[i].hints ? " hints" : "",
              (unsigned long long)calls[i].seed);
    ASSERT_OK(issue(w, &calls[i], sp));
    if (i) seen[calls[i - 1].op][calls[i].op]++;
  }
  check_round(w, round, calls, n);
}

static call_t g_calls[MAX_CALLS];

static void eager_round(const t_world_t* w, int round, int seen[kNumOps][kNumOps]) {
  const int n = make_round(w, round, g_calls);
  run_round(w, round, g_calls, n, NULL, seen);
  for (int i = 0; i < n; i++) free_call(w, &g_calls[i]);
}

/* A thread per rank: each issues its own rank's part of every call of the round, in order,
 * outside any group, and stops at its first failure. */
typedef struct {
  const t_world_t* w;
  const call_t* calls;
  int n, r;
  int failed; /* the call that failed, -1 none */
  fco_result_t res;
} rank_job_t;

static void* rank_thread(void* arg) {
  rank_job_t* j = (rank_job_t*)arg;
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(j->w->transport)) (void)cudaSetDevice(t_rank_device(j->w->transport, j->r));
#endif
  for (int i = 0; i < j->n; i++)
    if ((j->res = issue_rank(j->w, &j->calls[i], j->r)) != FCO_OK) {
      j->failed = i;
      break;
    }
  return NULL;
}

static void threads_round(const t_world_t* w, int round, int seen[kNumOps][kNumOps]) {
  const int n = make_round(w, round, g_calls);
  pthread_t th[T_MAX_RANKS];
  rank_job_t jobs[T_MAX_RANKS];
  t_context("P=%d round %d: %d calls from a thread per rank", w->n, round, n);
  for (int r = 0; r < w->n; r++) {
    jobs[r] = (rank_job_t){w, g_calls, n, r, -1, FCO_OK};
    ASSERT_EQ(pthread_create(&th[r], NULL, rank_thread, &jobs[r]), 0);
  }
  for (int r = 0; r < w->n; r++) ASSERT_EQ(pthread_join(th[r], NULL), 0);
  for (int r = 0; r < w->n; r++)
    if (jobs[r].failed >= 0)
      t_fail(__FILE__, __LINE__, "P=%d round %d, rank %d's thread, call %d (%s%s): %s: %s", w->n,
             round, r, jobs[r].failed, g_calls[jobs[r].failed].what,
             g_calls[jobs[r].failed].op == kGemm && g_calls[jobs[r].failed].hints ? " hints" : "",
             fco_result_string(jobs[r].res), fco_last_error(w->comms[r]));
  for (int i = 1; i < n; i++) seen[g_calls[i - 1].op][g_calls[i].op]++;
  check_round(w, round, g_calls, n);
  for (int i = 0; i < n; i++) free_call(w, &g_calls[i]);
}

#ifdef FCO_HAVE_CUDA
/* Fresh inputs where the captured shape allows (allreduce, GEMV: new values into the same
 * buffers), every output poisoned again (embedding and GEMM keep their inputs: their indices and
 * counts are baked into the call). */
static void refresh(const t_world_t* w, call_t* c) {
  switch (c->op) {
    case kAllreduce:
      c->seed = t_next_seed();
      t_ar_prepare(w, &c->ar, c->ar.count, c->ar.dtype, c->ar.inplace, c->seed);
      break;
    case kGemv:
      c->seed = t_next_seed();
      gemv_prepare(c->gv, c->gv->M, c->gv->N, c->kt, c->gv->dt, c->gv->has_bias, c->seed);
      break;
    case kEmbedding:
      for (int r = 0; r < w->n; r++) ea_poison_out(w, &c->ea, r);
      break;
    default: ga_poison(w, &c->gc, &c->gb); break;
  }
}

/* Fresh inputs / poisoned outputs, one replay of the graph, every output of its calls checked. */
static void replay_check(const t_world_t* w, gemv_capture_t* cap, call_t* calls, int n,
                         const char* when) {
  for (int i = 0; i < n; i++) refresh(w, &calls[i]);
  t_context("P=%d: graph replay %s", w->n, when);
  gemv_capture_replay(cap, 1);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  for (int i = 0; i < n; i++) {
    t_context("P=%d: graph replay %s, call %d: %s seed 0x%016llx", w->n, when, i, calls[i].what,
              (unsigned long long)calls[i].seed);
    ASSERT_EQ(check(w, &calls[i]), (size_t)0);
  }
}

/* The calls of a round (GPU transports where every rank shares one stream: local, or P = 1)
 * issued once eagerly on the capture's streams and checked (cuBLAS handles made, kernels
 * loaded), then captured into one CUDA graph. GEMM calls pass the host hints (without
 * counts_host impls 0 and 2 synchronise, which a capture refuses). */
static void capture_round(const t_world_t* w, int round, call_t* calls, int n, gemv_capture_t* cap,
                          int seen[kNumOps][kNumOps]) {
  for (int i = 0; i < n; i++) calls[i].hints = 1;
  gemv_capture_init(cap, w);
  run_round(w, round, calls, n, cap->sp, seen);
  gemv_capture_sync(cap);
  t_context("P=%d round %d: capturing %d calls", w->n, round, n);
  gemv_capture_begin(cap);
  for (int i = 0; i < n; i++) {
    t_context("P=%d round %d call %d (capture): %s", w->n, round, i, calls[i].what);
    ASSERT_OK(issue(w, &calls[i], cap->sp));
  }
  gemv_capture_end(cap);
}

/* A random round captured (capture_round), then replayed `replays` times (replay_check). */
static void graph_round(const t_world_t* w, int round, int replays, int seen[kNumOps][kNumOps]) {
  const int n = make_round(w, round, g_calls);
  gemv_capture_t cap;
  capture_round(w, round, g_calls, n, &cap, seen);
  for (int k = 0; k < replays; k++) {
    char when[64];
    snprintf(when, sizeof when, "%d of round %d", k, round);
    replay_check(w, &cap, g_calls, n, when);
  }
  gemv_capture_free(&cap);
  for (int i = 0; i < n; i++) free_call(w, &g_calls[i]);
}

/* Every (operator, impl) pair, AUTO (-1) included, in three rounds of at most MAX_CALLS calls
 * and MAX_GEMV GEMVs (growth_round). */
static const int kPairs[][2] = {
    {kAllreduce, 0}, {kAllreduce, 1}, {kAllreduce, -1}, {kGemv, 0},      {kGemv, 1},
    {kEmbedding, 0}, {kEmbedding, 1}, {kEmbedding, -1}, /* round 0 */
    {kGemv, 2},      {kGemv, 3},      {kGemm, 0},       {kGemm, 1},      {kGemm, 2},
    {kGemm, -1}, /* round 1 */
    {kGemv, -1},     {kEmbedding, 1}, {kGemm, 1},       {kAllreduce, 1}, /* round 2 */
};
static const int kPairRound[] = {0, 8, 14, 18};
#define NUM_PAIR_ROUNDS 3

static int make_pair_round(const t_world_t* w, int round, int part, call_t* calls) {
  const int n = kPairRound[part + 1] - kPairRound[part];
  size_t need = 0;
  for (int i = 0; i < n; i++) {
    const int* pr = kPairs[kPairRound[part] + i];
    t_context("P=%d round %d call %d: preparing %s impl %d", w->n, round, i, kOpName[pr[0]],
              pr[1]);
    make_call(w, &calls[i], pr[0], pr[1], &need);
  }
  t_context("P=%d round %d: fco_comm_reserve(%zu)", w->n, round, need);
  if (need) ASSERT_OK(fco_comm_reserve(w->comms[0], need));
  return n;
}


static call_t g_graph_calls[MAX_CALLS];

/* A graph replayed after the workspace grew (fco.h, fco_comm_reserve; the transports keep a
 * captured call's workspace, src/transport/gpu_common.h): round `part` of kPairs (every
 * operator and impl over the three) issued eagerly and checked, captured, replayed and checked;
 * then twice: the workspace grows (fco_comm_reserve of one byte more than it holds: a new
 * allocation), a round of random calls runs eagerly on the new one and is checked, the graph is
 * replayed and checked; last, the graph and a random round back to back on the capture's stream
 * (its fused calls and the round's share the new workspace's halves), one sync, both checked.
 * Before the fix a replay after a growth staged in freed memory, and gemm's fused kernels kept
 * their plan in the old workspace while their peers wrote the new one. */
static void growth_round(const t_world_t* w, int round, int part, int seen[kNumOps][kNumOps]) {
  call_t* calls = g_graph_calls;
  const int n = make_pair_round(w, round, part, calls);
  gemv_capture_t cap;
  capture_round(w, round, calls, n, &cap, seen);
  replay_check(w, &cap, calls, n, "before any growth");
  for (int k = 1; k <= 2; k++) {
    size_t ws = 0, grown = 0;
    ASSERT_OK(fco_comm_workspace_bytes(w->comms[0], &ws));
    t_context("P=%d round %d: growth %d from %zu bytes", w->n, round, k, ws);
    ASSERT_OK(fco_comm_reserve(w->comms[0], ws + 1));
    ASSERT_OK(fco_comm_workspace_bytes(w->comms[0], &grown));
    ASSERT_TRUE(grown > ws);
    eager_round(w, round * 10 + k, seen);
    char when[64];
    snprintf(when, sizeof when, "after growth %d (%zu -> %zu bytes)", k, ws, grown);
    replay_check(w, &cap, calls, n, when);
  }
  /* Back to back: the replay, then a random round, on one stream, one sync. */
  const int m = make_round(w, round * 10 + 3, g_calls);
  for (int i = 0; i < n; i++) refresh(w, &calls[i]);
  t_context("P=%d round %d: graph replay then %d eager calls back to back", w->n, round, m);
  ASSERT_EQ(cudaSetDevice(t_rank_device(w->transport, 0)), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(cap.ge, cap.st[0]), cudaSuccess);
  for (int i = 0; i < m; i++) ASSERT_OK(issue(w, &g_calls[i], cap.sp));
  check_round(w, round * 10 + 3, g_calls, m);
  gemv_capture_sync(&cap);
  for (int i = 0; i < n; i++) {
    t_context("P=%d round %d call %d (graph replay back to back): %s seed 0x%016llx", w->n,
              round, i, calls[i].what, (unsigned long long)calls[i].seed);
    ASSERT_EQ(check(w, &calls[i]), (size_t)0);
  }
  for (int i = 0; i < m; i++) free_call(w, &g_calls[i]);
  gemv_capture_free(&cap);
  for (int i = 0; i < n; i++) free_call(w, &calls[i]);
}
#endif

int main(void) {
  g_rng = t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  const int quick = t_quick();
  const int rounds = quick ? 4 : 12;
  int max = t_test_max_ranks(t);
  if (max > GA_MAXP) max = GA_MAXP;
  if (max > EA_MAX_P) max = EA_MAX_P;
  int seen[kNumOps][kNumOps];
  memset(seen, 0, sizeof seen);
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    for (int round = 0; round < rounds; round++) eager_round(&w, round, seen);
    int graphs = 0, threads = 0;
#ifdef FCO_HAVE_CUDA
    if (t == FCO_TRANSPORT_LOCAL || (t == FCO_TRANSPORT_NCCL && p == 1)) {
      for (; graphs < (quick ? 1 : 3); graphs++) graph_round(&w, rounds + graphs, 3, seen);
      for (int part = 0; part < NUM_PAIR_ROUNDS; part++, graphs++)
        growth_round(&w, rounds + graphs, part, seen);
    }
#endif
    if (t != FCO_TRANSPORT_LOCAL)
      for (; threads < (quick ? 2 : 4); threads++)
        threads_round(&w, rounds + graphs + threads, seen);
    t_world_destroy(&w, 0);
    printf("P=%d: %d rounds, %d in CUDA graphs, %d from a thread per rank, ok (%.0f ms)\n", p,
           rounds + graphs + threads, graphs, threads, t_now_ms() - t0);
    fflush(stdout);
  }
  /* Which operator followed which (the random sequences' coverage, for the log). */
  printf("calls back to back (row: before, column: after; a, g, e, m = allreduce, gemv, "
         "embedding, gemm):\n     a    g    e    m\n");
  for (int i = 0; i < kNumOps; i++)
    printf("%c %4d %4d %4d %4d\n", "agem"[i], seen[i][0], seen[i][1], seen[i][2], seen[i][3]);
  return t_pass(t, max, t_test_rank_cap());
}

/*
 * test_timeout.c — a rank that never calls turns into FCO_ERR_TIMEOUT on the others within
 * the bound (cfg.timeout_ms = 300; on cpu not before it), never a hang; the error is sticky
 * (every later call on that communicator returns it, fco_comm_reserve and fco_mem_alloc too;
 * a world's reserve through a healthy rank is refused at once, naming the broken one)
 * and its message names the silent peer, as do the refusals of later calls (also after an
 * unrelated bad call in between; cpu: every operator's, before its own pointer checks).
 * Afterwards the communicator can still be destroyed and a new world works. On cpu also a rank
 * whose peers never join (fco_comm_init: the message counts who joined, lists who did not).
 * How rank 1 stays silent: cpu and nccl: only rank 0's op is issued (outside a group); local:
 * the transport's test hook FCO_FAULT_SKIP_RANK=1 leaves rank 1 out of the launch.
 * On cpu also a peer that agrees to the call and then stops (the cpu transport's hook
 * FCO_FAULT_SKIP_RANK=1: rank 1 skips the op after its record): rank 0 times out inside the
 * operator, in its wait for rank 1's signal, for every operator and impl (silent_in_op).
 *   make test   or   build/tests/test_timeout   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <string.h>

#include "ea_fixture.h"
#include "ga_fixture.h"
#include "gemv_fixture.h"

#define TIMEOUT_MS 300
#define BOUND_MS (20 * TIMEOUT_MS) /* generous: scheduling noise, CUDA lazy loading */

static void good_allreduce(const t_world_t* w) {
  t_ar_bufs_t b;
  uint64_t seed = t_next_seed();
  t_ar_alloc(w, &b, 5000);
  t_ar_prepare(w, &b, 5000, FCO_BF16, 0, seed);
  ASSERT_OK(t_ar_run(w, &b, 1));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  t_ar_free(w, &b);
}

static void silent_peer(fco_transport_t t, int impl, int warm) {
  fco_config_t cfg;
  t_world_t w;
  double ms = 0;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = TIMEOUT_MS;
  t_context("impl %d, %s", impl, warm ? "after a good call" : "first call");
  ASSERT_OK(t_world_init(&w, t, 2, &cfg));
  if (warm) good_allreduce(&w); /* epochs past 0: the wait is for a later value */

  fco_result_t r = t_lone_rank0_allreduce(&w, impl, 4097, &ms);
  printf("impl %d%s: rank 0 got %s after %.0f ms: %s\n", impl, warm ? " (warm)" : "",
         fco_result_string(r), ms, fco_last_error(w.comms[0]));
  ASSERT_RES(r, FCO_ERR_TIMEOUT);
  ASSERT_LT(ms, BOUND_MS);
  /* and not before the bound (cpu: the host clock that the wait reads; a wait 10 times shorter
   * than cfg.timeout_ms passed the upper bound alone) */
  if (t == FCO_TRANSPORT_CPU) ASSERT_GE(ms, TIMEOUT_MS);
  const char* msg = fco_last_error(w.comms[0]);
  if (!t_contains_word(msg, "rank 1") && !t_contains_word(msg, "peer 1"))
    t_fail(__FILE__, __LINE__, "the timeout message does not name rank 1: \"%s\"", msg);

  /* Sticky: the async error stays, and every later call returns it without running. */
  ASSERT_RES(fco_comm_get_async_error(w.comms[0]), FCO_ERR_TIMEOUT);
  ASSERT_RES(fco_comm_get_async_error(w.comms[0]), FCO_ERR_TIMEOUT);
  t_ar_bufs_t b;
  t_ar_alloc(&w, &b, 100);
  t_ar_prepare(&w, &b, 100, FCO_F32, 0, 1);
  /* A refused bad call in between: the refusals after it still name the timeout, not its
   * message (they once repeated whatever fco_last_error held, e.g. "impl 5 ..."). */
  ASSERT_RES(fco_allreduce(w.comms[0], b.in[0], b.out[0], 100, FCO_F32, 5, NULL),
             FCO_ERR_INVALID_ARGUMENT);
  ASSERT_RES(fco_allreduce(w.comms[0], b.in[0], b.out[0], 100, FCO_F32, impl, NULL),
             FCO_ERR_TIMEOUT);
  msg = fco_last_error(w.comms[0]);
  if (!strstr(msg, "fco_allreduce: refused") || strstr(msg, "impl 5") ||
      (!t_contains_word(msg, "rank 1") && !t_contains_word(msg, "peer 1")))
    t_fail(__FILE__, __LINE__, "the refusal does not name the earlier timeout: \"%s\"", msg);
  ASSERT_RES(fco_comm_reserve(w.comms[0], (size_t)1 << 24), FCO_ERR_TIMEOUT);
  ASSERT_MSG(w.comms[0], "fco_comm_reserve: refused");
  if (fco_comm_get_async_error(w.comms[1]) == FCO_OK) {
    /* reserved through the healthy rank: refused at once, naming rank 0, and rank 1 stays
     * healthy (the growth used to wait for rank 0 until the timeout, which then broke rank 1) */
    ASSERT_RES(fco_comm_reserve(w.comms[1], (size_t)1 << 24), FCO_ERR_TIMEOUT);
    ASSERT_MSG(w.comms[1], "rank 0 of this fco_comm_init_all group holds an earlier error");
    ASSERT_OK(fco_comm_get_async_error(w.comms[1]));
  }
  void* sym = (void*)1; /* a symmetric buffer too: refused, nothing allocated */
  ASSERT_RES(fco_mem_alloc(w.comms[0], 4096, &sym), FCO_ERR_TIMEOUT);
  ASSERT_NULL(sym);
  ASSERT_MSG(w.comms[0], "fco_mem_alloc: refused");
  t_sync(&w);
  ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);

  /* Nothing left behind: a new world works. */
  ASSERT_OK(t_world_init(&w, t, 2, &cfg));
  good_allreduce(&w);
  t_world_destroy(&w, 1);
}

/* cpu: rank 1 agrees to the call (its record matches), then skips it (FCO_FAULT_SKIP_RANK=1):
 * rank 0 passes the record exchange and waits inside the operator for rank 1's signal — the
 * timeout there (fco_cpu_wait) must end the call with FCO_ERR_TIMEOUT within the bound, not
 * before it, naming the operator and rank 1, sticky on rank 0; rank 1 sees no error. */
enum { kAllreduce, kGemv, kEmbedding, kGemm, kNumOps };
static const char* const kOpName[kNumOps] = {"fco_allreduce", "fco_gemv_allreduce",
                                             "fco_embedding_alltoall", "fco_gemm_alltoall"};
static const int kNumImpls[kNumOps] = {FCO_ALLREDUCE_NUM_IMPLS, FCO_GEMV_ALLREDUCE_NUM_IMPLS,
                                       FCO_EMBEDDING_ALLTOALL_NUM_IMPLS,
                                       FCO_GEMM_ALLTOALL_NUM_IMPLS};

/* After a timeout, every operator refuses a call on that rank with the sticky error before its
 * own pointer checks (each call below passes a NULL output, INVALID_ARGUMENT otherwise), and the
 * refusal names the operator. */
static void refused_by_every_op(fco_comm_t c) {
  float f[64] = {0};
  int32_t tpr[2] = {1, 1}, counts[2] = {0, 0}, offsets[4] = {0, 0, 0, 0};
  int64_t bpr[2] = {1, 1}, rows[1] = {4};
  fco_result_t r[kNumOps];
  r[kAllreduce] = fco_allreduce(c, f, NULL, 16, FCO_F32, 1, NULL);
  r[kGemv] = fco_gemv_allreduce(c, f, f + 16, NULL, NULL, 1, 4, 4, FCO_F32, 1, NULL);
  r[kEmbedding] = fco_embedding_alltoall(c, f, rows, tpr, bpr, 4, FCO_F32, offsets, NULL, 0,
                                         FCO_EMB_INDEX_I32, NULL, FCO_EMB_POOL_SUM, NULL, 1, NULL);
  r[kGemm] = fco_gemm_alltoall(c, f, 1, f + 16, FCO_W_KN, 1, counts, NULL, NULL, NULL, 1, 4, 4,
                               FCO_F32, 1, NULL);
  for (int op = 0; op < kNumOps; op++) {
    t_context("%s after the timeout", kOpName[op]);
    ASSERT_RES(r[op], FCO_ERR_TIMEOUT);
  }
  /* the last refusal's message (each call overwrote the one before) */
  ASSERT_MSG(c, "fco_gemm_alltoall: refused");
}

static void silent_in_op(int op, int impl) {
  const fco_transport_t t = FCO_TRANSPORT_CPU;
  fco_config_t cfg;
  t_world_t w;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = TIMEOUT_MS;
  t_context("%s impl %d, rank 1 skips the op", kOpName[op], impl);
  ASSERT_OK(t_world_init(&w, t, 2, &cfg));
  const uint64_t seed = t_next_seed();
  t_ar_bufs_t ar;
  gemv_bufs_t gv;
  ea_prob_t ea;
  ga_case_t gc;
  ga_bufs_t gb;
  switch (op) {
    case kAllreduce:
      t_ar_alloc(&w, &ar, 3000);
      t_ar_prepare(&w, &ar, 3000, FCO_F32, 0, seed);
      break;
    case kGemv:
      gemv_bufs_alloc(&gv, &w);
      gemv_prepare(&gv, 4, 96, gemv_vec_kt(2), FCO_BF16, 1, seed);
      break;
    case kEmbedding:
      ea_prob_make(&ea, 2, 16, FCO_F32, FCO_EMB_INDEX_I64, 0, FCO_EMB_POOL_SUM, 0, seed);
      ea_prob_upload(&w, &ea);
      break;
    default:
      ga_make_case(&gc, 2, 40, 24, 0, FCO_F32, seed, 0, 0);
      ga_upload(&w, &gc, &gb);
      break;
  }
  good_allreduce(&w); /* a call before: the wait is for a later epoch */
  t_knob_set("FCO_FAULT_SKIP_RANK", "1");
  const double t0 = t_now_ms();
  fco_result_t r;
  switch (op) {
    case kAllreduce: r = t_ar_run(&w, &ar, impl); break;
    case kGemv: r = gemv_issue(&w, &gv, impl, NULL); break;
    case kEmbedding: r = ea_prob_run(&w, &ea, impl, NULL); break;
    default: r = ga_issue(&w, &gc, &gb, impl, 1, NULL); break;
  }
  const double ms = t_now_ms() - t0;
  t_knob_reset("FCO_FAULT_SKIP_RANK");
  const char* msg = fco_last_error(w.comms[0]);
  printf("%s impl %d, rank 1 skipping it: %s after %.0f ms: %s\n", kOpName[op], impl,
         fco_result_string(r), ms, msg);
  ASSERT_RES(r, FCO_ERR_TIMEOUT);
  ASSERT_GE(ms, TIMEOUT_MS);
  ASSERT_LT(ms, BOUND_MS);
  /* the operator's own wait, not the record exchange ("did not make the matching call") */
  if (!strstr(msg, kOpName[op]) || !strstr(msg, "did not signal") ||
      !t_contains_word(msg, "rank 1"))
    t_fail(__FILE__, __LINE__, "the timeout message does not name %s's wait for rank 1: \"%s\"",
           kOpName[op], msg);
  ASSERT_RES(fco_comm_get_async_error(w.comms[0]), FCO_ERR_TIMEOUT);
  ASSERT_RES(fco_comm_get_async_error(w.comms[1]), FCO_OK);
  refused_by_every_op(w.comms[0]);
  switch (op) {
    case kAllreduce: t_ar_free(&w, &ar); break;
    case kGemv: gemv_bufs_free(&gv); break;
    case kEmbedding: ea_prob_free(&w, &ea); break;
    default:
      ga_free_bufs(&w, &gc, &gb);
      ga_free_case(&gc);
      break;
  }
  t_world_destroy(&w, 0);
}

/* cpu: rank 1 of n calls fco_comm_init and no other rank ever joins: FCO_ERR_TIMEOUT within the
 * bound (not before it), no communicator, and a message that counts who joined and lists who
 * did not — all of them at n = 3, the first ones and "..." at n = 64 (the most ranks there are:
 * a valid nranks, so the call waits). */
static void silent_joiners(void) {
  for (int n = 3; n <= 64; n += 61) {
    fco_unique_id_t id;
    fco_config_t cfg;
    fco_comm_t c = NULL;
    char want[32];
    t_context("rank 1 of %d joins alone", n);
    ASSERT_OK(fco_get_unique_id(&id));
    ASSERT_OK(fco_config_init(&cfg));
    cfg.transport = FCO_TRANSPORT_CPU;
    cfg.timeout_ms = TIMEOUT_MS;
    const double t0 = t_now_ms();
    ASSERT_RES(fco_comm_init(&c, n, 1, &id, &cfg), FCO_ERR_TIMEOUT);
    const double ms = t_now_ms() - t0;
    printf("rank 1 of %d alone: %s after %.0f ms: %s\n", n, fco_result_string(FCO_ERR_TIMEOUT),
           ms, fco_last_error(NULL));
    ASSERT_NULL(c);
    ASSERT_GE(ms, TIMEOUT_MS);
    ASSERT_LT(ms, BOUND_MS);
    snprintf(want, sizeof want, "only 1 of %d ranks joined", n);
    ASSERT_MSG(NULL, want);
    ASSERT_MSG(NULL, n == 3 ? "(missing ranks: 0 2)" : "(missing ranks: 0 2 3 4 5");
    if (n > 3) ASSERT_MSG(NULL, "...)");
  }
  t_context("%s", "");
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 2);
  /* impl 0 on nccl is ncclAllReduce (its waits are NCCL's, unbounded) and on local a copy with
   * no waits: only the peer-table impl has fco's bounded waits there. */
  int impls = t == FCO_TRANSPORT_CPU ? 2 : 1;
  for (int i = 0; i < impls; i++) {
    int impl = t == FCO_TRANSPORT_CPU ? i : 1;
    silent_peer(t, impl, 0);
    silent_peer(t, impl, 1);
  }
  if (t == FCO_TRANSPORT_CPU) silent_joiners();
  if (t == FCO_TRANSPORT_CPU)
    for (int op = 0; op < kNumOps; op++)
      for (int impl = 0; impl < kNumImpls[op]; impl++) silent_in_op(op, impl);
  printf("PASS\n");
  return 0;
}

/*
 * test_timeout.c — a rank that never calls turns into FCO_ERR_TIMEOUT on the others within
 * the bound (cfg.timeout_ms = 300; on cpu not before it), never a hang; the error is sticky
 * (every later call on that communicator returns it, fco_comm_reserve and fco_mem_alloc too)
 * and its message names the silent peer, as do the refusals of later calls (also after an
 * unrelated bad call in between). Afterwards the communicator can still be destroyed and a new
 * world works.
 * How rank 1 stays silent: cpu and nccl: only rank 0's op is issued (outside a group); local:
 * the transport's test hook FCO_FAULT_SKIP_RANK=1 leaves rank 1 out of the launch.
 *   make test   or   build/tests/test_timeout   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <string.h>

#include "test.h"

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
  printf("PASS\n");
  return 0;
}

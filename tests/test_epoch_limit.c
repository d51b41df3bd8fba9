/*
 * test_epoch_limit.c — the 2^32-call limit of a communicator (src/cuda/dev.h: the signal values
 * hold the epoch in 32 bits). With every rank's device epoch moved to FCO_EPOCH_LIMIT − 1, the
 * call that starts below the limit and the one that starts at it both compute exactly; the
 * second records FCO_ERR_INVALID_USAGE on every rank, which fco_comm_get_async_error and every
 * later call then return (that call runs nothing: its outputs stay poison), with a message that
 * says what to do; a new world works. GPU transports (local, nccl); the cpu transport has no
 * device epoch (its waits compare 64-bit counters): exit 77 there.
 *   make test   or   build/tests/test_epoch_limit   (FCO_TRANSPORT=local|nccl)
 */

#include "../src/cuda/dev.h"
#include "test.h"

#define COUNT 6007

/* One allreduce (impl 1, the fused one-shot: its kernel reads and advances the epoch) on fresh
 * inputs, checked exactly. */
static void good_call(const t_world_t* w, t_ar_bufs_t* b) {
  uint64_t seed = t_next_seed();
  t_ar_prepare(w, b, COUNT, FCO_BF16, 0, seed);
  ASSERT_OK(t_ar_run(w, b, 1));
  t_sync(w);
  ASSERT_EQ(t_ar_check(w, b, seed), 0);
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  if (!t_is_gpu(t)) t_skip("no device epoch on the cpu transport (GPU transports only)");
  t_require_ranks(t, 2);
  t_world_t w;
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  t_ar_bufs_t b;
  t_ar_alloc(&w, &b, COUNT);
  good_call(&w, &b); /* the workspace exists, epochs at 1 */

  t_world_set_epoch(&w, FCO_EPOCH_LIMIT - 1);
  t_context("epoch limit − 1");
  good_call(&w, &b); /* starts below the limit: no error */
  for (int r = 0; r < w.n; r++) ASSERT_OK(fco_comm_get_async_error(w.comms[r]));

  t_context("epoch at the limit");
  good_call(&w, &b); /* starts at the limit: still exact, the error recorded */
  for (int r = 0; r < w.n; r++) {
    ASSERT_RES(fco_comm_get_async_error(w.comms[r]), FCO_ERR_INVALID_USAGE);
    const char* msg = fco_last_error(w.comms[r]);
    printf("rank %d: %s\n", r, msg);
    if (!t_contains(msg, "destroy the communicator") || !t_contains(msg, "4278190079"))
      t_fail(__FILE__, __LINE__, "message does not say what happened and what to do: \"%s\"", msg);
  }

  t_context("after the limit");
  t_ar_prepare(&w, &b, COUNT, FCO_BF16, 0, t_next_seed());
  ASSERT_RES(t_ar_run(&w, &b, 1), FCO_ERR_INVALID_USAGE); /* refused before anything runs */
  t_sync(&w);
  ASSERT_EQ(t_ar_check_untouched(&w, &b), 0);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 0);

  t_context("a new world");
  ASSERT_OK(t_world_init(&w, t, 2, NULL));
  t_ar_alloc(&w, &b, COUNT);
  good_call(&w, &b);
  t_ar_free(&w, &b);
  t_world_destroy(&w, 1);
  printf("PASS\n");
  return 0;
}

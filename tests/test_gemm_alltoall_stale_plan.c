/*
 * test_gemm_alltoall_stale_plan.c — impl 2 (chunks) when its exchange kernel refuses (audit56
 * F5): the push and finish kernels of the call must not use the plan that call e − 2 left in
 * the same half. Two good impl 2 calls (checked against the float64 reference), one more if
 * needed so that the next call's half is the one of a good call of this shape; then rank 1's
 * device table claims a workspace too small for impl 2 (only a corrupted table gets there: the
 * launcher checks the real one) and the call runs: rank 1 must record FCO_ERR_INTERNAL and no
 * out may change (rank 1's push kernels used to store its own rows at the stale plan's places).
 * Rank 0 then times out waiting for rank 1's header (1 s). GPU transports, two ranks (local:
 * one GPU); exit 77 on cpu.
 *   FCO_TRANSPORT=local build/tests/test_gemm_alltoall_stale_plan
 */
#include <stddef.h>

#include "../src/cuda/dev.h"
#include "../src/ops/gemm_alltoall.h"
#include "ga_fixture.h"

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  if (!t_is_gpu(t)) t_skip("impl 2 runs on the GPU transports only");
  t_require_ranks(t, 2);
  enum { P = 2 };
  fco_config_t cfg;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 1000; /* rank 0 waits for rank 1's header that never comes */
  t_world_t w;
  ASSERT_OK(t_world_init(&w, t, P, &cfg));
  ga_case_t c;
  ga_two_expert_case(&c, P, 40, 24, FCO_W_KN, FCO_BF16);
  for (int r = 0; r < P; r++) /* every segment non-empty: rank 1 sends itself rows */
    for (int e = 0; e < 2; e++)
      for (int s = 0; s < P; s++) c.counts[r][e * P + s] = 5 + r + 3 * e + 2 * s;
  ga_finish_case(&c, t_next_seed(), 3);
  ga_bufs_t b;
  ga_upload(&w, &c, &b);
  size_t need = 0;
  ASSERT_OK(fco_gemm_alltoall_workspace(w.comms[0], c.a_rows, c.out_rows, c.K, c.N, c.dtype, 2,
                                        &need));
  ASSERT_OK(fco_comm_reserve(w.comms[0], need));
  /* Good calls until the next one (epoch e = done + 1) is even: its half is call e − 2's. */
  uint64_t epoch = 0;
  for (int i = 0; i < 2 || (epoch + 1) % 2; i++) {
    t_context("good impl 2 call %d", i);
    ga_refill_a(&w, &c, &b, t_next_seed());
    ga_poison(&w, &c, &b);
    ASSERT_OK(ga_issue(&w, &c, &b, 2, 1, NULL));
    t_sync(&w);
    for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_get_async_error(w.comms[r]));
    ASSERT_EQ(ga_check(&w, &c, &b), 0);
    t_dev_state_get(&w, 1, offsetof(fco_dev_rank_t, epoch), &epoch, sizeof epoch);
  }
  /* Rank 1's table: half of it holds less than impl 2 needs, the plan area (half 0) still
   * inside: the exchange refuses, and the plan of call e − 2 is where this call reads it. */
  const size_t half_need = fco_ga_half_need(2, 0, P, c.a_rows, c.out_rows, c.N, 2);
  const size_t plan_end = fco_ga_peer_bytes(P, c.out_rows, c.N, 2) + 4096;
  ASSERT_LT(fco_ws_half_bytes(half_need), half_need);
  ASSERT_GE(half_need, plan_end);
  const uint64_t ws = half_need;
  t_dev_state_put(&w, 1, offsetof(fco_dev_rank_t, ws_bytes), &ws, sizeof ws);
  t_context("impl 2 call with rank 1's table corrupted");
  ga_poison(&w, &c, &b);
  ASSERT_OK(ga_issue(&w, &c, &b, 2, 1, NULL));
  t_sync(&w);
  ASSERT_RES(fco_comm_get_async_error(w.comms[1]), FCO_ERR_INTERNAL);
  printf("rank 1: %s\nrank 0: %s\n", fco_last_error(w.comms[1]),
         fco_result_string(fco_comm_get_async_error(w.comms[0])));
  ASSERT_EQ(ga_untouched(&w, &c, &b), 0);
  ga_free_bufs(&w, &c, &b);
  ga_free_case(&c);
  for (int r = 0; r < P; r++) ASSERT_OK(fco_comm_destroy(w.comms[r]));
  printf("PASS\n");
  return 0;
}

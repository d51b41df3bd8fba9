/*
 * test_sim_util.h — helpers shared by the fco-sim tests (tests/test_sim_*.c): a floating-point
 * ASSERT in the style of tests/common/test.h, default parameters with round numbers so expected
 * times can be computed by hand, and the source-tree path (FCO_SRC_DIR, set by the Makefile).
 */
#ifndef FCO_TEST_SIM_UTIL_H_
#define FCO_TEST_SIM_UTIL_H_

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "test.h"

#ifndef FCO_SRC_DIR
#define FCO_SRC_DIR "."
#endif

#define ASSERT_NEAR(a, b, tol)                                                          \
  do {                                                                                  \
    double t_x_ = (double)(a), t_y_ = (double)(b), t_t_ = (double)(tol);                \
    if (!(fabs(t_x_ - t_y_) <= t_t_))                                                   \
      t_fail(__FILE__, __LINE__, "ASSERT_NEAR(%s, %s, %g): %.9g vs %.9g", #a, #b, t_t_, \
             t_x_, t_y_);                                                               \
  } while (0)

/* Parameters for hand-computed cases: NVLink 100 GB/s 1 us, NIC 50 GB/s (400 Gb/s x 1) 3 us,
 * HBM 1000 GB/s; NCCL: Simple only (LL/LL128 priced out), base 10 us, hop x5, full efficiency;
 * no peer costs, no fused launch/penalty/interference/signal stalls/landing copy/switch drain,
 * fused GEMV x re-reads free (gemv_x_gbs 1e9), no jitter. Tests of those terms switch them on
 * one by one. */
static inline void sim_test_params(sim_params_t* p) {
  sim_params_default(p);
  p->nvl_gbs = 100, p->nvl_lat_us = 1, p->nic_gbps = 400, p->nic_eff = 1, p->nic_lat_us = 3;
  p->hbm_gbs = 1000;
  p->nccl_ll_us = p->nccl_ll128_us = 1e9, p->nccl_simple_us = 10, p->simple_hop_x = 5;
  p->nvl_simple_eff = p->net_simple_eff = 1, p->tree_eff = 1;
  p->nccl_peer_us = 0, p->fco_peer_us = 0, p->fco_launch_us = 0, p->fused_penalty = 0;
  p->fused_interf = 0, p->fused_interf_net = 0, p->fco_sig_us = 0, p->fco_land = 0;
  p->ea_drain = 0;
  p->gemv_x_gbs = 1e9;
  p->jitter = 0;
}

static inline const char* sim_src_path(char* buf, size_t len, const char* rel) {
  snprintf(buf, len, "%s/%s", FCO_SRC_DIR, rel);
  return buf;
}

#endif /* FCO_TEST_SIM_UTIL_H_ */

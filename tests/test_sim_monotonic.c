/*
 * test_sim_monotonic.c — sanity of fco-sim's models over parameter sweeps: more bandwidth or
 * less latency is never slower (collectives, fused ops, whole DLRM / decode / MoE runs); more
 * nodes never mean less inter-node traffic per GPU for an all-to-all of fixed size per GPU;
 * remote-first is never slower than local-first; more jitter never makes an iteration faster;
 * the exposed-communication shares stay in [0, 100] and the compute-only time is a lower bound.
 *   make test   or   build/tests/test_sim_monotonic
 */
#include <stdlib.h>

#include "model.h"
#include "test_sim_util.h"

static sim_config_t* load(const char* rel) {
  char path[1024], err[512];
  sim_config_t* c = calloc(1, sizeof *c);
  ASSERT_NOT_NULL(c);
  if (sim_config_load(sim_src_path(path, sizeof path, rel), c, err, sizeof err))
    t_fail(__FILE__, __LINE__, "%s", err);
  return c;
}

typedef int (*run_fn)(const sim_env_t*, const sim_config_t*, sim_topo_t, double, sim_row_t*,
                      char*, size_t);

static sim_row_t run(run_fn fn, const sim_params_t* p, const sim_config_t* c, sim_topo_t t,
                     double batch) {
  sim_env_t env = {*p, NULL, NULL};
  sim_row_t row;
  char err[256];
  if (fn(&env, c, t, batch, &row, err, sizeof err)) t_fail(__FILE__, __LINE__, "%s", err);
  ASSERT_TRUE(!row.skipped);
  ASSERT_TRUE(row.compute_us <= row.base_us + 1e-9);
  ASSERT_TRUE(row.exp_base_pct >= 0 && row.exp_base_pct <= 100);
  ASSERT_TRUE(row.exp_fused_pct >= 0 && row.exp_fused_pct <= 100);
  ASSERT_TRUE(row.base_us > 0 && row.fused_us > 0 && isfinite(row.base_us) && isfinite(row.fused_us));
  return row;
}

/* Bandwidth and latency knobs, with the direction in which the model must not get slower. */
typedef struct {
  const char* name;
  double lo, hi; /* the value at `hi` must not be slower ... */
  int faster_high; /* ... when 1 (bandwidth); when 0, `lo` must not be slower (latency) */
} knob_t;

static const knob_t kKnobs[] = {
    {"nvl_gbs", 150, 900, 1},  {"nic_gbps", 100, 1600, 1}, {"nic_eff", 0.5, 1, 1},
    {"hbm_gbs", 2000, 8000, 1}, {"tflops", 300, 2000, 1},  {"nvl_lat_us", 0.1, 5, 0},
    {"nic_lat_us", 0.5, 10, 0}, {"nccl_peer_us", 0, 2, 0}, {"fco_launch_us", 1, 10, 0},
};

static void sweep(const char* what, run_fn fn, const sim_config_t* c, const sim_topo_t* topos,
                  int ntopo, double batch) {
  for (size_t k = 0; k < sizeof kKnobs / sizeof kKnobs[0]; k++) {
    int idx = sim_param_find(kKnobs[k].name);
    ASSERT_GE(idx, 0);
    for (int ti = 0; ti < ntopo; ti++) {
      double prev_base = 0, prev_fused = 0;
      for (int s = 0; s <= 4; s++) {
        double x = kKnobs[k].lo + (kKnobs[k].hi - kKnobs[k].lo) * s / 4.0;
        if (!kKnobs[k].faster_high) x = kKnobs[k].hi - (kKnobs[k].hi - kKnobs[k].lo) * s / 4.0;
        /* s increasing = the knob getting better: times must not grow */
        sim_params_t p;
        sim_params_default(&p);
        *sim_param_ptr(&p, idx) = x;
        t_context("%s: %s = %g, %d x %d GPUs", what, kKnobs[k].name, x, topos[ti].nodes,
                  topos[ti].gpn);
        sim_row_t r = run(fn, &p, c, topos[ti], batch);
        if (s > 0) {
          ASSERT_TRUE(r.base_us <= prev_base * (1 + 1e-12));
          ASSERT_TRUE(r.fused_us <= prev_fused * (1 + 1e-12));
        }
        prev_base = r.base_us, prev_fused = r.fused_us;
      }
    }
  }
}

static void collectives(void) {
  sim_params_t p;
  sim_params_default(&p);
  t_context("collectives vs bandwidth, nodes");
  /* allreduce: more bandwidth never slower, at every size and scale */
  for (double bytes = 1024; bytes <= 1 << 28; bytes *= 4)
    for (int n = 1; n <= 128; n *= 2) {
      sim_topo_t t = {n, 8};
      double prev = INFINITY;
      for (double bw = 100; bw <= 1000; bw += 100) {
        p.nvl_gbs = bw, p.nic_gbps = bw * 4;
        double us = sim_nccl_allreduce(&p, t, bytes).us;
        ASSERT_TRUE(us <= prev * (1 + 1e-12));
        prev = us;
      }
    }
  sim_params_default(&p);
  /* all-to-all with 64 MB per GPU spread evenly: more nodes, never less NIC traffic per GPU
   * and never a shorter all-to-all */
  double prev_net = -1, prev_us = 0;
  for (int n = 1; n <= 128; n *= 2) {
    sim_topo_t t = {n, 8};
    int P = sim_topo_ranks(t);
    double* u = malloc(P * sizeof(double));
    double* v = malloc(P * sizeof(double));
    ASSERT_NOT_NULL(u);
    ASSERT_NOT_NULL(v);
    for (int r = 0; r < P; r++) u[r] = 64e6, v[r] = 1.0 / P;
    sim_vol_t vol;
    sim_direct_volume(t, u, v, 0, &vol);
    double nvl, net;
    sim_a2a_phase_bytes(t, u, v, &nvl, &net);
    ASSERT_NEAR(net, vol.send[SIM_LINK_NET], 1e-3 * (net + 1)); /* even traffic: same NIC load */
    ASSERT_TRUE(vol.send[SIM_LINK_NET] >= prev_net);
    double us = sim_nccl_alltoall(&p, t, u, v).us;
    ASSERT_TRUE(us >= prev_us);
    prev_net = vol.send[SIM_LINK_NET], prev_us = us;
    free(u);
    free(v);
  }
}

static void schedule_knobs(const sim_config_t* dlrm) {
  sim_topo_t topos[] = {{1, 8}, {4, 8}, {32, 8}};
  for (int i = 0; i < 3; i++) {
    sim_params_t p;
    sim_params_default(&p);
    t_context("remote-first vs local-first, %d nodes", topos[i].nodes);
    sim_row_t rf = run(sim_run_dlrm, &p, dlrm, topos[i], 0);
    p.remote_first = 0;
    sim_row_t lf = run(sim_run_dlrm, &p, dlrm, topos[i], 0);
    ASSERT_TRUE(rf.fused_us <= lf.fused_us * (1 + 1e-12));
    ASSERT_NEAR(rf.base_us, lf.base_us, 1e-9); /* the baseline has no tiles */
    t_context("jitter, %d nodes", topos[i].nodes);
    double prev = 0;
    for (double j = 0; j <= 0.2; j += 0.05) {
      sim_params_default(&p);
      p.jitter = j;
      sim_row_t r = run(sim_run_dlrm, &p, dlrm, topos[i], 0);
      ASSERT_TRUE(r.base_us >= prev * (1 - 1e-12));
      prev = r.base_us;
    }
  }
}

int main(void) {
  sim_config_t* dlrm = load("tools/fco-sim/configs/dlrm-dcnv2.cfg");
  sim_config_t* kaggle = load("tools/fco-sim/configs/dlrm-kaggle.cfg");
  sim_config_t* dec = load("tools/fco-sim/configs/llama3-70b-decode.cfg");
  sim_config_t* moe = load("tools/fco-sim/configs/moe-deepseek-v3.cfg");
  collectives();
  sim_topo_t dl[] = {{1, 8}, {2, 8}, {16, 8}, {128, 8}};
  sweep("dlrm-dcnv2", sim_run_dlrm, dlrm, dl, 4, 0);
  sweep("dlrm-kaggle", sim_run_dlrm, kaggle, dl, 2, 0);
  sim_topo_t de[] = {{1, 2}, {1, 8}};
  sweep("decode", sim_run_decode, dec, de, 2, 8);
  sim_topo_t mo[] = {{1, 8}, {4, 8}};
  sweep("moe", sim_run_moe, moe, mo, 2, 0);
  schedule_knobs(dlrm);
  free(dlrm);
  free(kaggle);
  free(dec);
  free(moe);
  printf("test_sim_monotonic: ok\n");
  return 0;
}

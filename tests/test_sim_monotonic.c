/*
 * test_sim_monotonic.c — sanity of fco-sim's models over parameter sweeps: more bandwidth or
 * less latency is never slower (collectives, fused ops, whole DLRM / decode / MoE runs); more
 * nodes never mean less inter-node traffic per GPU for an all-to-all of fixed size per GPU;
 * remote-first is never slower than local-first; more jitter never makes an iteration faster;
 * the exposed-communication shares stay in [0, 100] and the compute-only time is a lower bound.
 * Also the models' edges: where decode's AUTO stops fusing, KV heads replicated below one per
 * GPU, rows that do not apply, narrow embedding rows, the jitter draws.
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

/* Jitter draws: deterministic in (seed, kernel, rank), 1 + jitter x z with z ~ N(0, 1) over
 * many ranks, never below half the kernel's time (docs/fco-sim.md). */
static void jitter_draws(void) {
  sim_params_t p;
  sim_params_default(&p);
  t_context("jitter draws");
  enum { kN = 20000 };
  double s = 0, s2 = 0;
  for (int r = 0; r < kN; r++) {
    double m = sim_jitter(&p, 3, r);
    ASSERT_NEAR(m, sim_jitter(&p, 3, r), 0);
    s += m, s2 += m * m;
  }
  double mean = s / kN, sd = sqrt(s2 / kN - mean * mean);
  ASSERT_NEAR(mean, 1, 0.001);
  ASSERT_NEAR(sd, 0.03, 0.001);
  ASSERT_TRUE(sim_jitter(&p, 3, 0) != sim_jitter(&p, 4, 0));
  double first = sim_jitter(&p, 3, 0);
  p.seed = 2;
  ASSERT_TRUE(sim_jitter(&p, 3, 0) != first);
  p.seed = 1;
  p.jitter = 0.9; /* 1 + 0.9 z < 0.5 for a third of the draws: held at 0.5 */
  double lo = INFINITY;
  for (int r = 0; r < kN; r++) lo = fmin(lo, sim_jitter(&p, 3, r));
  ASSERT_NEAR(lo, 0.5, 0);
}

/* The fused time of a row's part, -1 when the row has no such part. */
static double part_fused(const sim_row_t* row, const char* name) {
  for (int i = 0; i < row->num_parts; i++)
    if (!strcmp(row->part[i].name, name)) return row->part[i].fused_us;
  return -1;
}

static void parse(const char* text, sim_config_t* c) {
  char err[512];
  if (sim_config_parse(text, "test.cfg", c, err, sizeof err)) t_fail(__FILE__, __LINE__, "%s", err);
}

/* Where the decode and MoE models switch: fco's AUTO fuses GEMV + AllReduce up to M =
 * gemv_auto_max_m and N = gemv_auto_max_n inclusive (docs/fco-sim.md), else runs the GEMV, then
 * the faster of fco's one-shot and NCCL; KV heads are replicated below one per GPU; rows that
 * cannot be split print '-'. Test parameters (tests/test_sim_util.h). */
static void decode_and_moe_edges(void) {
  sim_params_t p;
  sim_test_params(&p);
  sim_config_t* c = calloc(1, sizeof *c);
  ASSERT_NOT_NULL(c);
  sim_env_t env = {p, NULL, NULL};
  sim_row_t row;
  char err[256];
  t_context("decode: M 8, N 4096 is fused");
  parse("[decode]\nhidden = 4096\nffn = 4096\nlayers = 1\nheads = 32\nkv_heads = 8\n"
        "batch = 8\ncontext = 0\n", c);
  row = run(sim_run_decode, &p, c, (sim_topo_t){1, 2}, 0);
  ASSERT_NEAR(part_fused(&row, "gemv, then fco_allreduce"), -1, 0);
  /* both projections (K 2048 a rank): 2 waves of 128 tiles, 8.43776 us each (weights 2 x
   * (4096 x 2048 + 8 x 2048 + 8 x 4096) B at 1000 GB/s); each wave's fp32 partials, 65536 B,
   * cross NVLink in 0.65536 us (+ 1): 18.53088. Then the sum reads 2 x 131072 B of partials
   * and writes y, 65536 B: 0.32768 */
  ASSERT_NEAR(part_fused(&row, "fused gemv+allreduce"), 2 * (18.53088 + 0.32768), 1e-9);
  t_context("decode: M 9 is above gemv_auto_max_m");
  row = run(sim_run_decode, &p, c, (sim_topo_t){1, 2}, 9);
  ASSERT_NEAR(part_fused(&row, "fused gemv+allreduce"), -1, 0);
  ASSERT_TRUE(part_fused(&row, "gemv, then fco_allreduce") > 0);
  t_context("decode: N 4096 above gemv_auto_max_n 2048");
  p.gemv_auto_max_n = 2048;
  row = run(sim_run_decode, &p, c, (sim_topo_t){1, 2}, 8);
  ASSERT_NEAR(part_fused(&row, "fused gemv+allreduce"), -1, 0);
  p.gemv_auto_max_n = 4096;
  /* 8192 tokens: 64 MiB allreduces, where NCCL's ring beats the one-shot: the fused schedule
   * then runs exactly the baseline */
  t_context("decode: the faster of fco's one-shot and NCCL");
  row = run(sim_run_decode, &p, c, (sim_topo_t){1, 8}, 8192);
  ASSERT_TRUE(sim_nccl_allreduce(&p, (sim_topo_t){1, 8}, 8192 * 4096 * 2.0).us <
              sim_fco_oneshot_allreduce(&p, (sim_topo_t){1, 8}, 8192 * 4096 * 2.0));
  ASSERT_NEAR(row.fused_us, row.base_us, 1e-9 * row.base_us);
  t_context("decode: 8 KV heads on 16 GPUs are replicated, as 16 are");
  sim_row_t r8 = run(sim_run_decode, &p, c, (sim_topo_t){2, 8}, 0);
  c->kv_heads = 16;
  sim_row_t r16 = run(sim_run_decode, &p, c, (sim_topo_t){2, 8}, 0);
  ASSERT_NEAR(r8.base_us, r16.base_us, 0);
  t_context("decode: 12 heads on 8 GPUs");
  parse("[decode]\nhidden = 96\nffn = 64\nlayers = 1\nheads = 12\nkv_heads = 4\nbatch = 1\n"
        "context = 0\n", c);
  ASSERT_EQ(sim_run_decode(&env, c, (sim_topo_t){1, 8}, 0, &row, err, sizeof err), 0);
  ASSERT_TRUE(row.skipped);
  ASSERT_STR_HAS(row.note, "8 GPUs do not divide 12 attention heads");
  t_context("dlrm: embedding rows narrower than access_bytes cost access_bytes");
  parse("[dlrm]\nembedding_dim = 16\nrows = 1000, 1000\npooling = 10, 10\ndense_features = 13\n"
        "bottom_mlp = 64, 16\ntop_mlp = 64, 1\ninteraction = dot\nbatch_per_gpu = 4096\n", c);
  p.access_bytes = 16; /* below the 32-byte bf16 rows: no effect */
  sim_row_t a16 = run(sim_run_dlrm, &p, c, (sim_topo_t){1, 2}, 0);
  p.access_bytes = 32;
  sim_row_t a32 = run(sim_run_dlrm, &p, c, (sim_topo_t){1, 2}, 0);
  p.access_bytes = 64; /* each 32-byte row costs 64 */
  sim_row_t a64 = run(sim_run_dlrm, &p, c, (sim_topo_t){1, 2}, 0);
  ASSERT_NEAR(a16.base_us, a32.base_us, 0);
  ASSERT_TRUE(a64.base_us > a32.base_us + 1);
  p.access_bytes = 64;
  t_context("moe: 8 experts on 8 GPUs, not on 16");
  parse("[moe]\nhidden = 64\nexpert_ffn = 64\nexperts = 8\ntop_k = 2\ntokens_per_gpu = 64\n", c);
  row = run(sim_run_moe, &p, c, (sim_topo_t){1, 8}, 0);
  ASSERT_EQ(sim_run_moe(&env, c, (sim_topo_t){2, 8}, 0, &row, err, sizeof err), 0);
  ASSERT_TRUE(row.skipped);
  ASSERT_STR_HAS(row.note, "8 experts < 16 GPUs");
  t_context("moe: one GPU has nothing to fuse");
  row = run(sim_run_moe, &p, c, (sim_topo_t){1, 1}, 0);
  ASSERT_NEAR(row.fused_us, row.base_us, 0);
  ASSERT_NEAR(row.speedup, 1, 0);
  free(c);
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
  decode_and_moe_edges();
  jitter_draws();
  free(dlrm);
  free(kaggle);
  free(dec);
  free(moe);
  printf("test_sim_monotonic: ok\n");
  return 0;
}

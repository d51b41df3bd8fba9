/*
 * model_moe.c — one Mixture-of-Experts layer (forward) with expert parallelism over P GPUs:
 * router GEMM + top-k, All-to-All dispatch of each token's hidden state to the GPUs of its k
 * experts, grouped expert GEMMs (gate/up, then down), All-to-All combine back to the token's
 * GPU, weighted sum.
 *
 * Skew: expert e (by popularity rank) receives a share proportional to 1 / (e + 1)^zipf of the
 * routed tokens (zipf = 0: uniform); experts are placed round-robin (e on GPU e mod P), so GPU
 * 0 holds the hottest. The hot GPU computes more and receives more: it is the straggler, in
 * both schedules.
 *
 * Fused schedule: the down projection and the combine are fco's GEMM + All-to-All: each
 * output tile (gemm_tile x gemm_tile; its rows belong to one source GPU) is put back as soon
 * as it is computed, remote destinations first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

enum { PH_ROUTER = 1, PH_UP, PH_DOWN, PH_UNPERMUTE };

typedef struct {
  int P;
  double router, unpermute;         /* us, with kernel_us                     */
  double *up, *down, *tiles;        /* per GPU; down without kernel_us        */
  double *u_d, *v_d, *u_c, *v_c;    /* dispatch and combine traffic (rank-1)  */
  double max_share;
} moe_t;

static double moe_step(const sim_env_t* env, sim_topo_t t, const moe_t* m, int fused,
                       sim_row_t* row, int record) {
  const sim_params_t* p = &env->p;
  int P = m->P;
  double *clk = calloc((size_t)P, sizeof(double)), *c = calloc((size_t)P, sizeof(double));
  if (!clk || !c) {
    free(clk), free(c);
    return INFINITY;
  }
  for (int r = 0; r < P; r++) clk[r] = m->router * sim_jitter(p, PH_ROUTER, r);
  sim_coll_t disp = sim_nccl_alltoall(p, t, m->u_d, m->v_d);
  double T = sim_max(clk, P) + disp.us;
  for (int r = 0; r < P; r++) clk[r] = T + m->up[r] * sim_jitter(p, PH_UP, r);
  if (!fused) {
    for (int r = 0; r < P; r++) clk[r] += (m->down[r] + p->kernel_us) * sim_jitter(p, PH_DOWN, r);
    sim_coll_t comb = sim_nccl_alltoall(p, t, m->u_c, m->v_c);
    T = sim_max(clk, P) + comb.us;
    if (record) {
      sim_row_part(row, "all-to-all dispatch", disp.us, disp.us);
      sim_row_part(row, "all-to-all combine", comb.us, 0);
      sim_row_algo(row, "A2A", comb);
    }
  } else {
    for (int r = 0; r < P; r++) c[r] = m->down[r] * sim_jitter(p, PH_DOWN, r);
    double longest;
    T = sim_fused_all(p, SIM_FUSED_GEMM_A2A, t, m->u_c, m->v_c, clk, c, m->tiles, NULL, &longest);
    if (record) sim_row_part(row, "fused gemm+a2a combine", 0, longest);
  }
  for (int r = 0; r < P; r++) clk[r] = T + m->unpermute * sim_jitter(p, PH_UNPERMUTE, r);
  double end = sim_max(clk, P);
  free(clk);
  free(c);
  return end;
}

int sim_run_moe(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double batch,
                sim_row_t* row, char* err, size_t err_len) {
  memset(row, 0, sizeof *row);
  const sim_params_t* p = &env->p;
  int P = sim_topo_ranks(t), E = (int)c->experts;
  row->nodes = t.nodes;
  row->gpn = t.gpn;
  row->ranks = P;
  double Tk = batch > 0 ? batch : c->tokens_per_gpu;
  row->batch = Tk;
  if (E < P) {
    row->skipped = 1;
    snprintf(row->note, sizeof row->note, "%d experts < %d GPUs (expert parallelism needs >= 1 "
             "expert per GPU)", E, P);
    return 0;
  }
  moe_t m;
  memset(&m, 0, sizeof m);
  m.P = P;
  double* a[9];
  for (int i = 0; i < 9; i++) a[i] = calloc((size_t)(i == 8 ? E : P), sizeof(double));
  for (int i = 0; i < 9; i++)
    if (!a[i]) {
      for (int k = 0; k < 9; k++) free(a[k]);
      snprintf(err, err_len, "out of memory (%d GPUs, %d experts)", P, E);
      return -1;
    }
  m.up = a[0], m.down = a[1], m.tiles = a[2], m.u_d = a[3], m.v_d = a[4], m.u_c = a[5];
  m.v_c = a[6];
  double *share = a[7], *w = a[8];
  double wsum = 0;
  for (int e = 0; e < E; e++) wsum += w[e] = pow(e + 1.0, -c->zipf);
  double eb = c->dtype_bytes, H = c->hidden, Fe = c->expert_ffn, k = c->top_k;
  double g = c->gated ? 2 : 1;
  char src[200];
  snprintf(src, sizeof src, "roofline, not measured (%g TFLOP/s, HBM %g GB/s, +%g us per kernel)",
           p->tflops, p->hbm_gbs, p->kernel_us);
  sim_sources_add(env->sources, "GEMM", src);
  for (int e = 0; e < E; e++) {
    int q = e % P;
    double tok = P * Tk * k * w[e] / wsum;
    share[q] += w[e] / wsum;
    /* a grouped GEMM streams every local expert's weights once */
    m.up[q] += sim_roofline_us(p, 2 * tok * H * Fe * g, (H * Fe * g + tok * (H + Fe * g)) * eb);
    m.down[q] += sim_roofline_us(p, 2 * tok * Fe * H, (Fe * H + tok * (Fe + H)) * eb);
    m.tiles[q] += ceil(tok / p->gemm_tile) * ceil(H / p->gemm_tile);
  }
  for (int q = 0; q < P; q++) {
    m.up[q] += p->kernel_us;
    m.u_d[q] = Tk * k * H * eb;
    m.v_d[q] = share[q];
    m.u_c[q] = P * Tk * k * H * eb * share[q];
    m.v_c[q] = 1.0 / P;
    if (share[q] > m.max_share) m.max_share = share[q];
  }
  m.router = sim_gemm_us(env, Tk, c->experts, H, eb) + sim_roofline_us(p, 0, 2 * Tk * k * H * eb) +
             p->kernel_us;
  m.unpermute = sim_roofline_us(p, 0, (Tk * k + Tk) * H * eb) + p->kernel_us;
  row->base_us = moe_step(env, t, &m, 0, row, 1);
  row->fused_us = P > 1 ? moe_step(env, t, &m, 1, row, 1) : row->base_us; /* see model_dlrm.c */
  sim_env_t ref = *env;
  ref.p.comm_off = 1;
  ref.sources = NULL;
  row->compute_us = moe_step(&ref, t, &m, 0, row, 0);
  snprintf(row->note, sizeof row->note, "hottest GPU gets %.2fx the mean load (zipf %g)",
           m.max_share * P, c->zipf);
  sim_row_finish(row);
  for (int i = 0; i < 9; i++) free(a[i]);
  return 0;
}

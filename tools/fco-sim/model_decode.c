/*
 * model_decode.c — one tensor-parallel decode step of a Transformer (Megatron layout) on P
 * GPUs: per layer, column-parallel QKV GEMV, attention over the KV cache, row-parallel output
 * projection + AllReduce, column-parallel gate/up GEMV, row-parallel down projection +
 * AllReduce; then the LM head (column-parallel, its gather not modelled).
 *
 * Fused schedule: both row-parallel GEMVs become fco's GEMV + AllReduce (impl 1, one-shot):
 * each tile of gemv_tile_cols output columns, once computed, is put as an fp32 partial
 * (M x cols x 4 bytes) to every peer (NVLink inside a node, the NIC beyond) and flagged, and
 * each rank sums the P partial tiles when they have all arrived (P fp32 slots read, y written).
 * Its tile loop re-reads x per tile (sim_fused_gemv_us): slower than a GEMV alone at large M,
 * so fco's AUTO (src/ops/gemv_allreduce.c) fuses only up to M = gemv_auto_max_m and
 * N = gemv_auto_max_n (one tile per block of its grid), and above them
 * runs the GEMV, then fco_allreduce (its one-shot, or NCCL's where that is faster): so does
 * the fused schedule here. With few tiles there is little to overlap: the gain is then NCCL's
 * latency against fco's (measured on 2 GPUs; see docs/fco-sim.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* GEMV [M x K] x [K x N]: bandwidth-bound for M <= 64 (weights dominate); calibration rows of
 * gemv_allreduce (compute_us) when the file has them. No kernel_us. */
static double gemv_us(const sim_env_t* env, double M, double N, double K, double eb) {
  double bytes = (N * K + M * K + M * N) * eb;
  double us = sim_mem_kernel_us(env, "GEMV", "gemv_allreduce", NULL, N * K * eb, bytes, eb,
                                "weights streamed once");
  double flops_us = 2.0 * M * N * K / (env->p.tflops * 1e6);
  return us > flops_us ? us : flops_us;
}

typedef struct {
  double qkv, attn, o, gate_up, down, norm, lm; /* us, without kernel_us */
  double M, H, eb;        /* tokens, hidden size (the row-parallel GEMVs' N), element bytes */
  double k_o, k_down;     /* this rank's K of the two row-parallel GEMVs */
  double ar_bytes, tiles; /* AllReduce bytes; GEMV tiles of output columns */
} decode_t;

enum { K_QKV, K_ATTN, K_O, K_NORM1, K_UP, K_DOWN, K_NORM2, K_PER_LAYER };

/* Row-parallel GEMV then AllReduce: baseline (GEMV kernel, NCCL) or fused (fco one-shot). */
static void row_parallel(const sim_env_t* env, sim_topo_t t, const decode_t* d, double gemv,
                         double K, int fused, int phase, double* clk, sim_row_t* row,
                         int record) {
  const sim_params_t* p = &env->p;
  int P = sim_topo_ranks(t);
  double bytes = d->ar_bytes;
  /* AUTO: GEMV, then fco_allreduce */
  int unfused_fco = fused && (d->M > p->gemv_auto_max_m || d->H > p->gemv_auto_max_n);
  if (!fused || P == 1 || unfused_fco) {
    for (int r = 0; r < P; r++) clk[r] += (gemv + p->kernel_us) * sim_jitter(p, phase, r);
    sim_coll_t ar = sim_baseline_allreduce(env, t, bytes, d->eb);
    double us = ar.us;
    if (unfused_fco && P > 1) us = fmin(us, sim_fco_oneshot_allreduce(p, t, bytes));
    double T = sim_max(clk, P) + us;
    for (int r = 0; r < P; r++) clk[r] = T;
    if (record && !fused) {
      sim_row_part(row, "allreduce", ar.us, 0);
      if (!row->algo[0]) sim_row_algo(row, "AR", ar);
    }
    if (record && unfused_fco) sim_row_part(row, "gemv, then fco_allreduce", 0, us);
    return;
  }
  sim_fused_op_t op;
  memset(&op, 0, sizeof op);
  double partial = d->M * d->H * 4.0; /* fp32 partials of y, to each peer */
  op.tiles = d->tiles;
  op.broadcast = 1;
  op.bytes[SIM_DEST_NODE] = (t.gpn - 1) * partial;
  op.bytes[SIM_DEST_REMOTE] = (double)(P - t.gpn) * partial;
  op.peers[SIM_DEST_NODE] = t.gpn - 1;
  op.peers[SIM_DEST_REMOTE] = P - t.gpn;
  double loop = sim_fused_gemv_us(p, gemv, d->M, d->H, K, d->eb);
  double arrive = 0, longest = 0;
  for (int r = 0; r < P; r++) {
    op.compute_us = loop * sim_jitter(p, phase, r);
    double k = sim_fused_time(p, &op, NULL);
    if (clk[r] + k > arrive) arrive = clk[r] + k;
    if (k > longest) longest = k;
  }
  /* sum of P fp32 partial tiles and write y, in the same kernel once the last has arrived */
  double reduce = sim_roofline_us(p, 0, P * partial + bytes);
  for (int r = 0; r < P; r++) clk[r] = arrive + reduce;
  if (record) sim_row_part(row, "fused gemv+allreduce", 0, longest + reduce);
}

static double decode_step(const sim_env_t* env, const sim_config_t* c, sim_topo_t t,
                          const decode_t* d, int fused, sim_row_t* row, int record) {
  const sim_params_t* p = &env->p;
  int P = sim_topo_ranks(t);
  double* clk = calloc((size_t)P, sizeof(double));
  if (!clk) return INFINITY;
  for (int l = 0; l < (int)c->layers; l++) {
    int ph = l * K_PER_LAYER;
    int rec = record && l == 0; /* parts: one layer */
    for (int r = 0; r < P; r++) {
      clk[r] += (d->qkv + p->kernel_us) * sim_jitter(p, ph + K_QKV, r);
      clk[r] += (d->attn + p->kernel_us) * sim_jitter(p, ph + K_ATTN, r);
    }
    row_parallel(env, t, d, d->o, d->k_o, fused, ph + K_O, clk, row, rec);
    for (int r = 0; r < P; r++) {
      clk[r] += (d->norm + p->kernel_us) * sim_jitter(p, ph + K_NORM1, r);
      clk[r] += (d->gate_up + p->kernel_us) * sim_jitter(p, ph + K_UP, r);
    }
    row_parallel(env, t, d, d->down, d->k_down, fused, ph + K_DOWN, clk, row, rec);
    for (int r = 0; r < P; r++) clk[r] += (d->norm + p->kernel_us) * sim_jitter(p, ph + K_NORM2, r);
  }
  if (d->lm > 0)
    for (int r = 0; r < P; r++)
      clk[r] += (d->lm + p->kernel_us) * sim_jitter(p, (int)c->layers * K_PER_LAYER, r);
  double end = sim_max(clk, P);
  free(clk);
  return end;
}

int sim_run_decode(const sim_env_t* env, const sim_config_t* c, sim_topo_t t, double batch,
                   sim_row_t* row, char* err, size_t err_len) {
  (void)err, (void)err_len;
  memset(row, 0, sizeof *row);
  int P = sim_topo_ranks(t);
  row->nodes = t.nodes;
  row->gpn = t.gpn;
  row->ranks = P;
  double M = batch > 0 ? batch : c->batch;
  row->batch = M;
  if (P > c->heads || fmod(c->heads, P) != 0) {
    row->skipped = 1;
    snprintf(row->note, sizeof row->note, "%d GPUs do not divide %g attention heads", P, c->heads);
    return 0;
  }
  double eb = c->dtype_bytes, hd = c->head_dim, H = c->hidden;
  double q_cols = c->heads * hd / P;
  double kv_per = c->kv_heads / P < 1 ? 1 : c->kv_heads / P; /* replicated below one head */
  decode_t d;
  d.qkv = gemv_us(env, M, q_cols + 2 * kv_per * hd, H, eb);
  double kv_bytes = M * c->context * 2 * kv_per * hd * eb;
  d.attn = sim_mem_kernel_us(env, "attention (KV cache)", NULL, NULL, 0, kv_bytes, eb,
                             "KV cache read once");
  d.o = gemv_us(env, M, H, q_cols, eb);
  d.gate_up = gemv_us(env, M, (c->gated ? 2 : 1) * c->ffn / P, H, eb);
  d.down = gemv_us(env, M, H, c->ffn / P, eb);
  d.norm = sim_roofline_us(&env->p, 0, 3 * M * H * eb);
  d.lm = c->vocab > 0 ? gemv_us(env, M, c->vocab / P, H, eb) : 0;
  d.M = M, d.H = H, d.eb = eb;
  d.k_o = q_cols, d.k_down = c->ffn / P;
  d.ar_bytes = M * H * eb;
  d.tiles = ceil(H / env->p.gemv_tile_cols);
  row->base_us = decode_step(env, c, t, &d, 0, row, 1);
  row->fused_us = decode_step(env, c, t, &d, 1, row, 1);
  sim_env_t ref = *env;
  ref.p.comm_off = 1;
  ref.sources = NULL;
  row->compute_us = decode_step(&ref, c, t, &d, 0, row, 0);
  snprintf(row->note, sizeof row->note, "allreduce %.0f KB x %d per step, %g GEMV tiles%s",
           d.ar_bytes / 1024, 2 * (int)c->layers, d.tiles,
           P > 1 && (M > env->p.gemv_auto_max_m || H > env->p.gemv_auto_max_n)
               ? "; fused: M or N above gemv_auto_max_m/n, so fco's AUTO runs the GEMV, then "
                 "fco_allreduce"
               : "");
  sim_row_finish(row);
  return 0;
}

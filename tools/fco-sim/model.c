/*
 * model.c — what the models share (see model.h).
 */
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_sources_add(sim_sources_t* s, const char* kernel, const char* source) {
  if (!s) return;
  for (int i = 0; i < s->num; i++)
    if (!strcmp(s->s[i].kernel, kernel) && !strcmp(s->s[i].source, source)) return;
  if (s->num >= SIM_MAX_SOURCES) return;
  snprintf(s->s[s->num].kernel, sizeof s->s[0].kernel, "%s", kernel);
  snprintf(s->s[s->num].source, sizeof s->s[0].source, "%s", source);
  s->num++;
}

double sim_roofline_us(const sim_params_t* p, double flops, double bytes) {
  double c = flops / (p->tflops * 1e6), m = bytes / (p->hbm_gbs * 1e3);
  return c > m ? c : m;
}

double sim_gemm_us(const sim_env_t* env, double M, double N, double K, double eb) {
  const sim_params_t* p = &env->p;
  char src[200];
  snprintf(src, sizeof src, "roofline, not measured (%g TFLOP/s, HBM %g GB/s, +%g us per kernel)",
           p->tflops, p->hbm_gbs, p->kernel_us);
  sim_sources_add(env->sources, "GEMM", src);
  return sim_roofline_us(p, 2.0 * M * N * K, (M * K + K * N + M * N) * eb) + p->kernel_us;
}

double sim_mem_kernel_us(const sim_env_t* env, const char* kernel, const char* calib_op,
                         const sim_calib_shape_t* want, double calib_bytes, double bytes,
                         double eb, const char* how) {
  char note[200];
  double us;
  if (calib_op && sim_calib_compute(env->calib, calib_op, (int)eb, want, calib_bytes, &us, note,
                                    sizeof note)) {
    sim_sources_add(env->sources, kernel, note);
    return us;
  }
  snprintf(note, sizeof note, "roofline, not measured (HBM %g GB/s%s%s)", env->p.hbm_gbs,
           how && *how ? "; " : "", how ? how : "");
  sim_sources_add(env->sources, kernel, note);
  return bytes / (env->p.hbm_gbs * 1e3);
}

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double sim_jitter(const sim_params_t* p, int phase, int rank) {
  if (p->jitter <= 0) return 1.0;
  uint64_t h = mix64(mix64((uint64_t)p->seed) ^ mix64(((uint64_t)(uint32_t)phase << 32) |
                                                      (uint32_t)rank));
  uint64_t h2 = mix64(h);
  double u1 = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
  double u2 = ((double)(h2 >> 11) + 0.5) / 9007199254740992.0;
  double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  double m = 1.0 + p->jitter * z;
  return m < 0.5 ? 0.5 : m;
}

sim_coll_t sim_baseline_allreduce(const sim_env_t* env, sim_topo_t t, double bytes, double eb) {
  const sim_params_t* p = &env->p;
  sim_coll_t c = {0, SIM_ALGO_NONE, -1};
  if (sim_topo_ranks(t) <= 1 || bytes <= 0 || p->comm_off) return c;
  char note[200];
  if (env->calib && t.nodes == 1 && t.gpn == env->calib->gpus &&
      sim_calib_collective(env->calib, "allreduce", 0, (int)eb, bytes, &c.us, note, sizeof note)) {
    c.algo = SIM_ALGO_MEASURED;
    sim_sources_add(env->sources, "allreduce (NCCL)", note);
    return c;
  }
  sim_sources_add(env->sources, "allreduce (NCCL)",
                  "model: ring/tree x LL/LL128/Simple, fastest (NCCL tuner)");
  return sim_nccl_allreduce(p, t, bytes);
}

double sim_fused_all(const sim_params_t* p, int kind, sim_topo_t t, const double* u,
                     const double* v, const double* start, const double* compute,
                     const double* tiles, double* kend, double* longest) {
  int P = sim_topo_ranks(t);
  double arrive = 0, min_start = INFINITY, lk = 0, Un = 0;
  int pxn = p->fco_pxn && t.nodes > 1 && t.gpn > 1;
  sim_traffic_t sums; /* every rank's volumes from sums taken once: O(P), not O(P^2) */
  if (sim_traffic_init(t, u, v, &sums)) {
    sim_traffic_free(&sums);
    if (longest) *longest = INFINITY;
    return INFINITY; /* out of memory: never a silent 0 */
  }
  for (int r = 0; r < P; r++) {
    sim_fused_op_t op;
    sim_fused_from_traffic(t, &sums, u, v, r, compute[r], tiles[r], &op);
    sim_fused_kernel(p, kind, &op);
    if (pxn) {
      /* relaying lends rank r the node's NICs in proportion to its share of the node's sends */
      if (r % t.gpn == 0) {
        Un = 0;
        for (int q = r; q < r + t.gpn; q++) Un += u[q];
      }
      op.net_x = Un > 0 ? fmax(1.0, fmin((double)t.gpn, t.gpn * u[r] / Un)) : 1.0;
      op.relay_frac = (t.gpn - 1.0) / t.gpn;
    }
    double k = sim_fused_time(p, &op, NULL);
    double end = start[r] + k;
    if (kend) kend[r] = end;
    if (end > arrive) arrive = end;
    if (k > lk) lk = k;
    if (start[r] < min_start) min_start = start[r];
  }
  if (!p->comm_off && P > 1) {
    /* a receiver cannot finish before its incoming bytes have crossed its own links and
     * been landed into its output (as they arrive, for a kernel that lands alongside) */
    sim_fused_op_t kop;
    memset(&kop, 0, sizeof kop);
    sim_fused_kernel(p, kind, &kop);
    for (int d = 0; d < P; d++) {
      sim_vol_t vol;
      sim_direct_volume_at(t, &sums, u, v, d, &vol);
      double rb = 0;
      for (int l = 0; l < SIM_NUM_LINKS; l++)
        if (vol.recv[l] > 0) {
          double x = sim_xfer_us(vol.recv[l], sim_link_gbs(p, l)) + sim_link_lat_us(p, l);
          if (x > rb) rb = x;
        }
      double in = vol.recv[SIM_LINK_NVL] + vol.recv[SIM_LINK_NET];
      double land = p->fco_land ? 2 * sim_xfer_us(in, p->hbm_gbs) : 0;
      double bound = min_start + p->fco_launch_us +
                     (kop.land_overlap && p->remote_first ? fmax(rb, land) : rb + land);
      if (bound > arrive) arrive = bound;
    }
  }
  sim_traffic_free(&sums);
  if (longest) *longest = lk;
  return arrive;
}

double sim_max(const double* x, int n) {
  double m = -INFINITY;
  for (int i = 0; i < n; i++)
    if (x[i] > m) m = x[i];
  return m;
}

void sim_row_part(sim_row_t* row, const char* name, double base_us, double fused_us) {
  for (int i = 0; i < row->num_parts; i++)
    if (!strcmp(row->part[i].name, name)) {
      row->part[i].base_us += base_us;
      row->part[i].fused_us += fused_us;
      return;
    }
  if (row->num_parts >= SIM_MAX_PARTS) return;
  row->part[row->num_parts].name = name;
  row->part[row->num_parts].base_us = base_us;
  row->part[row->num_parts].fused_us = fused_us;
  row->num_parts++;
}

void sim_row_algo(sim_row_t* row, const char* what, sim_coll_t c) {
  if (c.algo == SIM_ALGO_NONE) return;
  size_t n = strlen(row->algo);
  snprintf(row->algo + n, sizeof row->algo - n, "%s%s %s%s%s", n ? ", " : "", what,
           sim_algo_name(c.algo), c.proto >= 0 ? "/" : "", sim_proto_name(c.proto));
}

void sim_row_finish(sim_row_t* row) {
  row->speedup = row->fused_us > 0 ? row->base_us / row->fused_us : 1.0;
  row->saved_pct = row->base_us > 0 ? 100.0 * (1.0 - row->fused_us / row->base_us) : 0.0;
  double eb = row->base_us - row->compute_us, ef = row->fused_us - row->compute_us;
  row->exp_base_pct = row->base_us > 0 && eb > 0 ? 100.0 * eb / row->base_us : 0.0;
  row->exp_fused_pct = row->fused_us > 0 && ef > 0 ? 100.0 * ef / row->fused_us : 0.0;
}

void sim_ea_tile(const sim_params_t* p, double dim, double eb, double tables, double* nt,
                 double* ns) {
  if (p->tile_rows > 0) {
    *nt = 1, *ns = p->tile_rows;
    return;
  }
  double vec = ceil(dim * eb / 16.0); /* 16-byte vectors of a row */
  double lanes = 1;
  while (lanes < vec && lanes < 32) lanes *= 2;
  double per_warp = 32 / lanes, bags = 8 * per_warp * 4;
  *nt = tables < 1 ? 1 : tables < per_warp ? floor(tables) : per_warp;
  *ns = floor(bags / *nt);
}

double sim_ea_tiles(const sim_params_t* p, double dim, double eb, double tables, double samples) {
  if (!(tables > 0 && samples > 0)) return 0;
  double nt, ns;
  sim_ea_tile(p, dim, eb, tables, &nt, &ns);
  return ceil(tables / nt - 1e-9) * ceil(samples / ns - 1e-9);
}

double sim_fused_gemv_us(const sim_params_t* p, double gemv_us, double M, double N, double K,
                         double eb) {
  double x = ceil(N / p->gemv_tile_cols) * M * K * eb;
  double xs = sim_xfer_us(x, p->gemv_x_gbs);
  return gemv_us > xs ? gemv_us : xs;
}

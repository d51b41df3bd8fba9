/*
 * validate.c — the simulator's communication and overlap models against fco-bench's measured
 * rows, at the scale they were measured (1 node x the calibration's GPUs, nccl transport), and
 * the fit of the fused-operator constants. See sim_validate in report.h for what each op's
 * rows test.
 *
 * Every row is one of three kinds:
 *   fit      the model's constants were chosen on these rows: the NCCL allreduce rows (its
 *            protocol constants, calib/README.md) and the fused rows of the FIT SET below
 *            (fused_interf, fco_sig_us, gemv_x_gbs: `fco-sim fit`);
 *   holdout  fused rows outside the fit set: predictions of the fitted model;
 *   pred     rows whose model has no constant fitted on fused or NCCL rows of this kind
 *            (the one-shot allreduce alone, the unfused baselines, NCCL's all-to-all alone).
 *
 * The fused models take, from the calibration row, only what was measured without the fused
 * kernel: compute_us (the lookup / cuBLAS GEMV alone) and the shape; the rest is the link
 * model (NVLink 364 GB/s, 0.6 us), HBM 4300 GB/s, tile counts and design of the kernels
 * (the embedding kernel's signal batches, overlapped landing and the drain of its last signal
 * batch before its local tiles: overlap.h), fco_launch_us
 * (from the one-shot allreduce rows) and the fitted constants. gemv_allreduce impl 3 (cuBLAS,
 * then fco's one-shot allreduce: what AUTO and the decode model run above M 8 or N 4096) is a
 * pred row: compute_us + the one-shot allreduce model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* ---- the fit set ----------------------------------------------------------------------------
 * embedding_alltoall: the three workloads (uniform indices), 2-byte dtypes;
 * gemv_allreduce: the two N = 8192 shapes (K 8192 and 28672), every M, 2-byte dtypes.
 * Hold-out: the Zipf, L = 1, D = 32 and D = 16 workloads, every f32 embedding row, and the
 * N = 4096 and N = 16384 GEMV shapes (an extrapolation in N both ways). */
static const double kFitEmbedding[][4] = {
    {16384, 8, 128, 32}, {65536, 8, 64, 8}, {4096, 16, 128, 64}};
static const double kFitGemvN = 8192;

static int in_fit_set(const sim_calib_entry_t* e) {
  if (sim_dtype_bytes(e->dtype) != 2 || e->impl_id < 1) return 0;
  if (!strcmp(e->op, "embedding_alltoall")) {
    if (e->shape_tag[0] && strcmp(e->shape_tag, "uniform")) return 0;
    for (size_t i = 0; i < sizeof kFitEmbedding / sizeof kFitEmbedding[0]; i++)
      if (sim_calib_shape(e, "B", 0) == kFitEmbedding[i][0] &&
          sim_calib_shape(e, "tables_per_gpu", 0) == kFitEmbedding[i][1] &&
          sim_calib_shape(e, "D", 0) == kFitEmbedding[i][2] &&
          sim_calib_shape(e, "L", 0) == kFitEmbedding[i][3])
        return 1;
    return 0;
  }
  if (!strcmp(e->op, "gemv_allreduce"))
    return !strcmp(e->impl, "oneshot") && sim_calib_shape(e, "N", 0) == kFitGemvN;
  return 0;
}

const char* sim_val_kind_name(int kind) {
  return kind == SIM_VAL_FIT ? "fit" : kind == SIM_VAL_HOLDOUT ? "holdout" : "pred";
}

static void add_row(sim_val_t* v, const sim_calib_entry_t* e, const char* impl, double measured,
                    double model, int fused, int kind, const char* shape) {
  sim_val_row_t* r = &v->row[v->num++];
  snprintf(r->op, sizeof r->op, "%s", e->op);
  snprintf(r->impl, sizeof r->impl, "%s", impl);
  snprintf(r->dtype, sizeof r->dtype, "%s", e->dtype);
  snprintf(r->shape, sizeof r->shape, "%s", shape);
  r->measured_us = measured;
  r->model_us = model;
  r->error_pct = 100.0 * (model / measured - 1.0);
  r->fused = fused;
  r->kind = kind;
  double a = fabs(r->error_pct);
  if (fused && a > v->max_err_fco) v->max_err_fco = a;
  if (!fused && a > v->max_err_nccl) v->max_err_nccl = a;
  if (fused && kind == SIM_VAL_FIT && a > v->max_err_fit) v->max_err_fit = a;
  if (fused && kind == SIM_VAL_HOLDOUT && a > v->max_err_holdout) v->max_err_holdout = a;
}

static int fused_kind(const sim_calib_entry_t* e) {
  return in_fit_set(e) ? SIM_VAL_FIT : SIM_VAL_HOLDOUT;
}

/* embedding_alltoall row: shape B (global batch), tables_per_gpu, D, L. */
static int val_embedding(const sim_params_t* p, sim_topo_t t, const sim_calib_entry_t* e,
                         sim_val_t* v) {
  int P = sim_topo_ranks(t);
  double B = sim_calib_shape(e, "B", 0), T = sim_calib_shape(e, "tables_per_gpu", 0);
  double D = sim_calib_shape(e, "D", 0), es = sim_dtype_bytes(e->dtype);
  if (!(B > 0 && T > 0 && D > 0 && es > 0) || e->compute_us < 0) return 0;
  double *u = calloc((size_t)P, sizeof(double)), *w = calloc((size_t)P, sizeof(double));
  if (!u || !w) {
    free(u), free(w);
    return -1;
  }
  for (int r = 0; r < P; r++) u[r] = B * T * D * es, w[r] = 1.0 / P;
  char shape[96];
  const char* tag = e->shape_tag[0] && strcmp(e->shape_tag, "uniform") ? e->shape_tag : "";
  snprintf(shape, sizeof shape, "B%g T%g D%g L%g%s%.12s", B, T, D, sim_calib_shape(e, "L", 0),
           *tag ? " " : "", tag);
  double b = B / P;
  int done = 0;
  if (e->impl_id == 0) {
    double a2a = sim_nccl_alltoall(p, t, u, w).us;
    if (e->comm_us > 0) add_row(v, e, "a2a alone", e->comm_us, a2a, 0, SIM_VAL_PRED, shape);
    double permute = sim_roofline_us(p, 0, 2 * b * T * P * D * es) + p->kernel_us;
    add_row(v, e, e->impl, e->time_us, e->compute_us + a2a + permute, 0, SIM_VAL_PRED, shape);
    done = 1;
  } else if (e->impl_id >= 1) {
    /* the lookup alone, less its own launch: the fused kernel pays fco_launch_us instead */
    double compute = fmax(0, e->compute_us - p->kernel_us);
    double tiles = P * sim_ea_tiles(p, D, es, T, b);
    sim_fused_op_t op;
    sim_fused_from_rank1(t, u, w, 0, compute, tiles, &op);
    sim_fused_kernel(p, SIM_FUSED_EMBEDDING, &op);
    add_row(v, e, e->impl, e->time_us, sim_fused_time(p, &op, NULL), 1, fused_kind(e), shape);
    done = 1;
  }
  free(u);
  free(w);
  return done;
}

/* gemv_allreduce row: shape M, N, K_r (output y is M x N on every rank). */
static int val_gemv(const sim_params_t* p, sim_topo_t t, const sim_calib_entry_t* e,
                    sim_val_t* v, int* unmodelled_f32) {
  int P = sim_topo_ranks(t);
  double M = sim_calib_shape(e, "M", 0), N = sim_calib_shape(e, "N", 0);
  double K = sim_calib_shape(e, "K", 0), Kr = sim_calib_shape(e, "K_r", K / P);
  double es = sim_dtype_bytes(e->dtype);
  if (!(M > 0 && N > 0 && es > 0) || e->compute_us < 0) return 0;
  double S = M * N * es;
  char shape[64];
  snprintf(shape, sizeof shape, "M%g N%g K%g", M, N, K);
  if (e->impl_id == 0) {
    add_row(v, e, e->impl, e->time_us, e->compute_us + sim_nccl_allreduce(p, t, S).us, 0,
            SIM_VAL_PRED, shape);
    return 1;
  }
  if (e->impl_id == 3) { /* cuBLAS, then fco's one-shot allreduce of y (AUTO's unfused path) */
    add_row(v, e, e->impl, e->time_us, e->compute_us + sim_fco_oneshot_allreduce(p, t, S), 1,
            SIM_VAL_PRED, shape);
    return 1;
  }
  if (strcmp(e->impl, "oneshot")) return 0;
  if (es != 2) { /* f32 runs on CUDA cores, one row per warp: a different loop, not modelled */
    (*unmodelled_f32)++;
    return 0;
  }
  sim_fused_op_t op;
  memset(&op, 0, sizeof op);
  op.compute_us = sim_fused_gemv_us(p, fmax(0, e->compute_us - p->kernel_us), M, N, Kr, es);
  op.tiles = ceil(N / p->gemv_tile_cols);
  op.broadcast = 1;
  op.bytes[SIM_DEST_NODE] = (P - 1) * M * N * 4.0; /* fp32 partials */
  op.peers[SIM_DEST_NODE] = P - 1;
  /* then each rank sums the P fp32 partial slots and writes y */
  double us = sim_fused_time(p, &op, NULL) + sim_roofline_us(p, 0, P * M * N * 4.0 + S);
  add_row(v, e, e->impl, e->time_us, us, 1, fused_kind(e), shape);
  return 1;
}

/* Model one calibration row (its rows appended to v); 1 modelled, 0 not, -1 out of memory. */
static int val_entry(const sim_params_t* p, sim_topo_t t, const sim_calib_entry_t* e,
                     sim_val_t* v, int* unmodelled_f32) {
  if (e->impl_id < 0) return 0; /* auto: whichever impl it picked, measured already */
  if (!strcmp(e->op, "allreduce")) {
    char shape[64];
    snprintf(shape, sizeof shape, "%.0f", e->bytes);
    if (e->impl_id == 0) {
      add_row(v, e, e->impl, e->time_us, sim_nccl_allreduce(p, t, e->bytes).us, 0, SIM_VAL_FIT,
              shape);
      return 1;
    }
    if (!strcmp(e->impl, "oneshot")) {
      add_row(v, e, e->impl, e->time_us, sim_fco_oneshot_allreduce(p, t, e->bytes), 1,
              SIM_VAL_PRED, shape);
      return 1;
    }
    return 0;
  }
  if (!strcmp(e->op, "embedding_alltoall")) return val_embedding(p, t, e, v);
  if (!strcmp(e->op, "gemv_allreduce")) return val_gemv(p, t, e, v, unmodelled_f32);
  return 0;
}

int sim_validate(const sim_params_t* p, const sim_calib_t* c, sim_val_t* v) {
  memset(v, 0, sizeof *v);
  v->row = calloc(2 * (size_t)c->num + 1, sizeof *v->row);
  if (!v->row) return -1;
  if (strcmp(c->transport, "nccl")) {
    snprintf(v->note, sizeof v->note, "transport %s: the models are of GPUs on NVLink (nccl)",
             c->transport);
    v->skipped = c->num;
    return 0;
  }
  sim_topo_t t = {1, c->gpus};
  for (int i = 0; i < c->num; i++) {
    int done = val_entry(p, t, &c->e[i], v, &v->unmodelled_f32);
    if (done < 0) return -1;
    if (!done) v->skipped++;
  }
  return 0;
}

void sim_val_free(sim_val_t* v) {
  free(v->row);
  memset(v, 0, sizeof *v);
}

static const char* base_name(const char* path) {
  const char* s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void print_fused_model(FILE* f, const sim_params_t* p) {
  fprintf(f, "# fused rows: fco_launch %g us + the tile pipeline on compute_us - kernel_us %g "
             "(measured alone), NVLink %g GB/s + %g us, HBM %g GB/s; fitted (fco-sim fit): "
             "fused_interf %g, fco_sig_us %g us per signalling wave, gemv_x_gbs %g GB/s\n",
          p->fco_launch_us, p->kernel_us, p->nvl_gbs, p->nvl_lat_us, p->hbm_gbs, p->fused_interf,
          p->fco_sig_us, p->gemv_x_gbs);
  fprintf(f, "# embedding kernel (since ed0108a): one signal per %g remote tiles (ea_sig_every), "
             "landing %s (ea_land_overlap %g); tiles of min(T, 32/G) tables x C/nt samples\n",
          p->ea_sig_every, p->ea_land_overlap ? "alongside its local tiles" : "after its tiles",
          p->ea_land_overlap);
  fprintf(f, "# embedding kernel switch drain (ea_drain %g): before its local tiles every block "
             "waits for the NVLink puts of its last signal batch, (ea_sig_every + 1)/2 tiles x "
             "%g blocks/SM x %g SMs of them (not fitted)\n",
          p->ea_drain, p->ea_blocks_per_sm, p->sms);
  fprintf(f, "# fit set: embedding_alltoall 2-byte (B,T,D,L) = (16384,8,128,32) (65536,8,64,8) "
             "(4096,16,128,64) uniform; gemv_allreduce 2-byte N = 8192; every other fused row is "
             "a hold-out\n");
}

void sim_print_validation(FILE* f, const sim_params_t* p, const sim_calib_t* c,
                          const sim_val_t* v) {
  fprintf(f, "# fco-sim %s validate: models against measured rows, at their scale (1 node x %d "
             "GPUs)\n",
          FCO_SIM_VERSION, c->gpus);
  fprintf(f, "# calib %s: fco-bench commit %s, %s, %d GPUs, %s transport, %s\n",
          base_name(c->path), c->commit, c->machine, c->gpus, c->transport, c->date);
  fprintf(f, "# allreduce impl 0: NCCL model (its LL/LL128/Simple constants were FITTED to these "
             "rows)\n");
  fprintf(f, "# allreduce oneshot: fco_launch %g us (set from the smallest rows) + NVLink %g us + "
             "(P-1)*size/%g GB/s + (P+1)*size/%g GB/s (HBM; both DESIGN.md probes): predicted\n",
          p->fco_launch_us, p->nvl_lat_us, p->nvl_gbs, p->hbm_gbs);
  print_fused_model(f, p);
  fprintf(f, "# set: fit = constants chosen on these rows; holdout = fused rows outside the fit "
             "set; pred = nothing fitted on rows of this kind\n");
  if (v->note[0]) fprintf(f, "# %s\n", v->note);
  fprintf(f, "#\n# %-18s %-11s %-5s %-24s %10s %10s %8s %s\n", "op", "impl", "dtype", "shape",
          "measured", "model", "error", "set");
  fprintf(f, "# %-18s %-11s %-5s %-24s %10s %10s %8s\n", "", "", "", "(B, or dims)", "(us)",
          "(us)", "(%)");
  for (int i = 0; i < v->num; i++) {
    const sim_val_row_t* r = &v->row[i];
    fprintf(f, "  %-18s %-11s %-5s %-24s %10.2f %10.2f %8.1f %s\n", r->op, r->impl, r->dtype,
            r->shape, r->measured_us, r->model_us, r->error_pct, sim_val_kind_name(r->kind));
  }
  /* max |error| per (op, impl, set) */
  for (int i = 0; i < v->num; i++) {
    const sim_val_row_t* a = &v->row[i];
    int first = 1;
    for (int k = 0; k < i && first; k++)
      if (!strcmp(v->row[k].op, a->op) && !strcmp(v->row[k].impl, a->impl) &&
          v->row[k].kind == a->kind)
        first = 0;
    if (!first) continue;
    double m = 0;
    int n = 0, within = 0;
    for (int k = i; k < v->num; k++) {
      const sim_val_row_t* b = &v->row[k];
      if (strcmp(b->op, a->op) || strcmp(b->impl, a->impl) || b->kind != a->kind) continue;
      m = fmax(m, fabs(b->error_pct));
      n++;
      within += fabs(b->error_pct) <= 10.0;
    }
    fprintf(f, "# max |error| %s %s, %s rows: %.1f%% over %d rows, %d within 10%%\n", a->op,
            a->impl, sim_val_kind_name(a->kind), m, n, within);
  }
  if (v->unmodelled_f32)
    fprintf(f, "# %d gemv_allreduce f32 oneshot rows not modelled (the f32 tile loop runs on "
               "CUDA cores, one row per warp; docs/fco-sim.md)\n",
            v->unmodelled_f32);
  fprintf(f, "# %d rows without a model (impl auto, other impls or ops)\n", v->skipped);
}

/* ---- fco-sim fit ------------------------------------------------------------------------- */

/* Errors (%) of the fit-set rows of the calibrations under p; returns their number. */
static int fit_errors(const sim_params_t* p, const sim_calib_t* const* c, int nc, double* err,
                      int cap, sim_val_t* scratch) {
  int n = 0, f32 = 0;
  for (int k = 0; k < nc; k++) {
    if (strcmp(c[k]->transport, "nccl")) continue;
    sim_topo_t t = {1, c[k]->gpus};
    for (int i = 0; i < c[k]->num; i++) {
      if (!in_fit_set(&c[k]->e[i])) continue;
      scratch->num = 0;
      if (val_entry(p, t, &c[k]->e[i], scratch, &f32) == 1 && scratch->num > 0 && n < cap &&
          scratch->row[scratch->num - 1].kind == SIM_VAL_FIT)
        err[n++] = scratch->row[scratch->num - 1].error_pct;
    }
  }
  return n;
}

int sim_fit_fused(const sim_params_t* p0, const sim_calib_t* const* c, int nc, sim_fit_t* out) {
  memset(out, 0, sizeof *out);
  int cap = 0;
  for (int k = 0; k < nc; k++) cap += c[k]->num;
  sim_val_t scratch;
  memset(&scratch, 0, sizeof scratch);
  scratch.row = calloc(4, sizeof *scratch.row);
  double* err = calloc((size_t)cap + 1, sizeof(double));
  if (!scratch.row || !err) {
    free(scratch.row);
    free(err);
    return -1;
  }
  sim_params_t p = *p0;
  out->rms_pct = INFINITY;
  for (int i = 0; i <= SIM_FIT_INTERF_STEPS; i++)
    for (int j = 0; j <= SIM_FIT_SIG_STEPS; j++)
      for (int k = 0; k <= SIM_FIT_X_STEPS; k++) {
        p.fused_interf = i * SIM_FIT_INTERF_STEP;
        p.fco_sig_us = j * SIM_FIT_SIG_STEP;
        p.gemv_x_gbs = SIM_FIT_X_MIN + k * SIM_FIT_X_STEP;
        int n = fit_errors(&p, c, nc, err, cap, &scratch);
        if (!n) continue;
        double s = 0;
        for (int r = 0; r < n; r++) s += err[r] * err[r];
        double rms = sqrt(s / n);
        if (rms < out->rms_pct - 1e-12) {
          out->rms_pct = rms;
          out->rows = n;
          out->interf = p.fused_interf;
          out->sig_us = p.fco_sig_us;
          out->x_gbs = p.gemv_x_gbs;
        }
      }
  free(scratch.row);
  free(err);
  return 0;
}

void sim_print_fit(FILE* f, const sim_params_t* p, const sim_calib_t* const* c, int nc,
                   const sim_fit_t* fit) {
  fprintf(f, "# fco-sim %s fit: the fused-operator constants, chosen on the fit set only\n",
          FCO_SIM_VERSION);
  for (int k = 0; k < nc; k++)
    fprintf(f, "# calib %s: fco-bench commit %s, %s, %d GPUs, %s transport, %s\n",
            base_name(c[k]->path), c[k]->commit, c[k]->machine, c[k]->gpus, c[k]->transport,
            c[k]->date);
  print_fused_model(f, p);
  fprintf(f, "# grid: fused_interf 0..%g step %g, fco_sig_us 0..%g step %g, gemv_x_gbs %g..%g "
             "step %g; objective: RMS of the %% errors of the fit rows\n",
          SIM_FIT_INTERF_STEPS * SIM_FIT_INTERF_STEP, SIM_FIT_INTERF_STEP,
          SIM_FIT_SIG_STEPS * SIM_FIT_SIG_STEP, SIM_FIT_SIG_STEP, SIM_FIT_X_MIN,
          SIM_FIT_X_MIN + SIM_FIT_X_STEPS * SIM_FIT_X_STEP, SIM_FIT_X_STEP);
  if (!fit->rows) {
    fprintf(f, "# no fit rows in these calibrations\n");
    return;
  }
  fprintf(f, "  %-14s %8.2f\n", "fused_interf", fit->interf);
  fprintf(f, "  %-14s %8.2f us\n", "fco_sig_us", fit->sig_us);
  fprintf(f, "  %-14s %8.0f GB/s\n", "gemv_x_gbs", fit->x_gbs);
  fprintf(f, "# RMS error over the %d fit rows: %.2f%%\n", fit->rows, fit->rms_pct);
  int same = fabs(fit->interf - p->fused_interf) < 1e-9 &&
             fabs(fit->sig_us - p->fco_sig_us) < 1e-9 && fabs(fit->x_gbs - p->gemv_x_gbs) < 1e-9;
  fprintf(f, "# %s\n", same ? "= the parameters in effect (params.h defaults unless flags)"
                            : "DIFFERS from the parameters in effect: update params.h, or pass "
                              "these as flags");
}

/*
 * validate.c — the simulator's communication and overlap models against fco-bench's measured
 * rows, at the scale they were measured (1 node x the calibration's GPUs, nccl transport). See
 * sim_validate in report.h for what each op's rows test. The NCCL allreduce constants were
 * fitted to the shipped calibration (calib/README.md): agreement on those rows is a fit, marked
 * as such; every other row is a prediction.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static void add_row(sim_val_t* v, const sim_calib_entry_t* e, const char* impl, double measured,
                    double model, int fused, int fitted, const char* shape) {
  sim_val_row_t* r = &v->row[v->num++];
  snprintf(r->op, sizeof r->op, "%s", e->op);
  snprintf(r->impl, sizeof r->impl, "%s", impl);
  snprintf(r->dtype, sizeof r->dtype, "%s", e->dtype);
  snprintf(r->shape, sizeof r->shape, "%s", shape);
  r->measured_us = measured;
  r->model_us = model;
  r->error_pct = 100.0 * (model / measured - 1.0);
  r->fused = fused;
  r->fitted = fitted;
  double a = fabs(r->error_pct);
  if (fused && a > v->max_err_fco) v->max_err_fco = a;
  if (!fused && a > v->max_err_nccl) v->max_err_nccl = a;
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
  char shape[64];
  snprintf(shape, sizeof shape, "B%g T%g D%g L%g", B, T, D, sim_calib_shape(e, "L", 0));
  double a2a = sim_nccl_alltoall(p, t, u, w).us;
  double b = B / P;
  int done = 0;
  if (e->impl_id == 0) {
    if (e->comm_us > 0) add_row(v, e, "a2a alone", e->comm_us, a2a, 0, 0, shape);
    double permute = sim_roofline_us(p, 0, 2 * b * T * P * D * es) + p->kernel_us;
    add_row(v, e, e->impl, e->time_us, e->compute_us + a2a + permute, 0, 0, shape);
    done = 1;
  } else if (e->impl_id >= 1) {
    double compute = fmax(0, e->compute_us - p->kernel_us);
    sim_fused_op_t op;
    sim_fused_from_rank1(t, u, w, 0, compute, T * P * ceil(b / p->tile_rows), &op);
    add_row(v, e, e->impl, e->time_us, sim_fused_time(p, &op, NULL), 1, 0, shape);
    done = 1;
  }
  free(u);
  free(w);
  return done;
}

/* gemv_allreduce row: shape M, N (output y is M x N on every rank). */
static int val_gemv(const sim_params_t* p, sim_topo_t t, const sim_calib_entry_t* e,
                    sim_val_t* v) {
  int P = sim_topo_ranks(t);
  double M = sim_calib_shape(e, "M", 0), N = sim_calib_shape(e, "N", 0);
  double es = sim_dtype_bytes(e->dtype);
  if (!(M > 0 && N > 0 && es > 0) || e->compute_us < 0) return 0;
  double S = M * N * es;
  char shape[64];
  snprintf(shape, sizeof shape, "M%g N%g K%g", M, N, sim_calib_shape(e, "K", 0));
  if (e->impl_id == 0) {
    add_row(v, e, e->impl, e->time_us, e->compute_us + sim_nccl_allreduce(p, t, S).us, 0, 0, shape);
    return 1;
  }
  if (strcmp(e->impl, "oneshot")) return 0;
  sim_fused_op_t op;
  memset(&op, 0, sizeof op);
  op.compute_us = fmax(0, e->compute_us - p->kernel_us);
  op.tiles = ceil(N / p->gemv_tile_cols);
  op.broadcast = 1;
  op.bytes[SIM_DEST_NODE] = (P - 1) * S;
  op.peers[SIM_DEST_NODE] = P - 1;
  double us = sim_fused_time(p, &op, NULL) + sim_roofline_us(p, 0, (P + 1) * S);
  add_row(v, e, e->impl, e->time_us, us, 1, 0, shape);
  return 1;
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
    const sim_calib_entry_t* e = &c->e[i];
    int done = 0;
    if (e->impl_id < 0) {
      /* auto: whichever impl it picked, measured already */
    } else if (!strcmp(e->op, "allreduce")) {
      char shape[64];
      snprintf(shape, sizeof shape, "%.0f", e->bytes);
      if (e->impl_id == 0) {
        add_row(v, e, e->impl, e->time_us, sim_nccl_allreduce(p, t, e->bytes).us, 0, 1, shape);
        done = 1;
      } else if (!strcmp(e->impl, "oneshot")) {
        add_row(v, e, e->impl, e->time_us, sim_fco_oneshot_allreduce(p, t, e->bytes), 1, 0, shape);
        done = 1;
      }
    } else if (!strcmp(e->op, "embedding_alltoall")) {
      if ((done = val_embedding(p, t, e, v)) < 0) return -1;
    } else if (!strcmp(e->op, "gemv_allreduce")) {
      done = val_gemv(p, t, e, v);
    }
    if (!done) v->skipped++;
  }
  return 0;
}

void sim_val_free(sim_val_t* v) {
  free(v->row);
  memset(v, 0, sizeof *v);
}

void sim_print_validation(FILE* f, const sim_params_t* p, const sim_calib_t* c,
                          const sim_val_t* v) {
  const char* base = strrchr(c->path, '/');
  fprintf(f, "# fco-sim %s validate: models against measured rows, at their scale (1 node x %d "
             "GPUs)\n",
          FCO_SIM_VERSION, c->gpus);
  fprintf(f, "# calib %s: fco-bench commit %s, %s, %d GPUs, %s transport, %s\n",
          base ? base + 1 : c->path, c->commit, c->machine, c->gpus, c->transport, c->date);
  fprintf(f, "# allreduce impl 0: NCCL model (its LL/LL128/Simple constants were FITTED to these "
             "rows)\n");
  fprintf(f, "# allreduce oneshot: fco_launch %g us (set from the smallest rows) + NVLink %g us + "
             "(P-1)*size/%g GB/s + (P+1)*size/%g GB/s (HBM; both DESIGN.md probes): predicted\n",
          p->fco_launch_us, p->nvl_lat_us, p->nvl_gbs, p->hbm_gbs);
  fprintf(f, "# embedding_alltoall, gemv_allreduce: measured compute (compute_us) + modelled "
             "communication and overlap: predicted\n");
  if (v->note[0]) fprintf(f, "# %s\n", v->note);
  fprintf(f, "#\n# %-18s %-10s %-5s %-22s %10s %10s %8s\n", "op", "impl", "dtype", "shape",
          "measured", "model", "error");
  fprintf(f, "# %-18s %-10s %-5s %-22s %10s %10s %8s\n", "", "", "", "(B, or dims)", "(us)", "(us)",
          "(%)");
  for (int i = 0; i < v->num; i++) {
    const sim_val_row_t* r = &v->row[i];
    fprintf(f, "  %-18s %-10s %-5s %-22s %10.2f %10.2f %8.1f\n", r->op, r->impl, r->dtype,
            r->shape, r->measured_us, r->model_us, r->error_pct);
  }
  /* max |error| per (op, impl) */
  for (int i = 0; i < v->num; i++) {
    int first = 1;
    for (int k = 0; k < i; k++)
      if (!strcmp(v->row[k].op, v->row[i].op) && !strcmp(v->row[k].impl, v->row[i].impl)) first = 0;
    if (!first) continue;
    double m = 0;
    int n = 0;
    for (int k = i; k < v->num; k++)
      if (!strcmp(v->row[k].op, v->row[i].op) && !strcmp(v->row[k].impl, v->row[i].impl)) {
        m = fmax(m, fabs(v->row[k].error_pct));
        n++;
      }
    fprintf(f, "# max |error| %s %s: %.1f%% over %d rows (%s)\n", v->row[i].op, v->row[i].impl, m,
            n, v->row[i].fitted ? "fitted" : "predicted");
  }
  fprintf(f, "# %d rows without a model (impl auto, other impls or ops)\n", v->skipped);
}

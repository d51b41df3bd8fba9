/*
 * calib.c — reading fco-bench JSON into calibration tables, and the lookups (see calib.h).
 */
#include "calib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int sim_dtype_bytes(const char* d) {
  if (!d) return 0;
  if (!strcmp(d, "f32") || !strcmp(d, "fp32") || !strcmp(d, "float32") || !strcmp(d, "i32"))
    return 4;
  if (!strcmp(d, "f16") || !strcmp(d, "bf16") || !strcmp(d, "fp16") || !strcmp(d, "half"))
    return 2;
  if (!strcmp(d, "f64") || !strcmp(d, "i64")) return 8;
  if (!strcmp(d, "fp8") || !strcmp(d, "e4m3") || !strcmp(d, "e5m2") || !strcmp(d, "i8")) return 1;
  return 0;
}

static int errf(char* err, size_t len, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

/* A number as written: integers whole (4294967298, not 4.29497e+09), others %g (inf). */
static const char* num_str(double x, char* buf, size_t len) {
  if (isfinite(x) && x == floor(x) && fabs(x) < 1e17) snprintf(buf, len, "%.0f", x);
  else snprintf(buf, len, "%g", x);
  return buf;
}

/* Integer fields are bounded before they are used as counts or cast to int ("gpus":
 * 4294967298 or 1e400 read as -2147483648 GPUs): an integer in [lo, hi]. */
static int int_in(double x, double lo, double hi) { return x >= lo && x <= hi && x == floor(x); }

/* The shape members the models read (calib.c, validate.c), all counts of elements, rows or
 * bytes: a positive integer, at most SIM_CALIB_MAX_DIM. */
static const char* const kShapeInts[] = {"count", "bytes", "B", "tables_per_gpu", "D", "L",
                                         "M",     "N",     "K", "K_r"};

static void copy_str(char* dst, size_t cap, const char* src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

int sim_calib_parse(const char* text, const char* name, sim_calib_t* c, char* err,
                    size_t err_len) {
  memset(c, 0, sizeof *c);
  char jerr[200];
  sim_json_t* root = sim_json_parse(text, jerr, sizeof jerr);
  if (!root) return errf(err, err_len, "%s: not valid JSON: %s", name, jerr);
  int rc = -1;
  if (root->type != SIM_JSON_OBJECT) {
    errf(err, err_len, "%s:%d: the top level must be an object (fco-bench -J output)", name,
         root->line);
    goto done;
  }
  const char* tool = sim_json_str(root, "tool");
  if (!tool || strcmp(tool, "fco-bench")) {
    errf(err, err_len, "%s:%d: \"tool\" is %s%s%s, want \"fco-bench\"", name, root->line,
         tool ? "\"" : "", tool ? tool : "missing", tool ? "\"" : "");
    goto done;
  }
  double gpus = 0;
  char num[40];
  if (!sim_json_num(root, "gpus", &gpus)) {
    errf(err, err_len, "%s:%d: \"gpus\" must be a positive integer", name, root->line);
    goto done;
  }
  if (gpus == 0) { /* fco-bench writes 0 for its cpu transport: no GPU was measured */
    errf(err, err_len, "%s:%d: \"gpus\" is 0: a cpu-transport run of fco-bench, which measured "
         "no GPU and cannot calibrate fco-sim (give the -J output of a GPU run)", name,
         root->line);
    goto done;
  }
  if (!int_in(gpus, 1, SIM_CALIB_MAX_GPUS)) {
    errf(err, err_len, "%s:%d: \"gpus\" is %s: must be a positive integer, at most %d (the "
         "GPUs of one fco-bench run)", name, root->line, num_str(gpus, num, sizeof num),
         SIM_CALIB_MAX_GPUS);
    goto done;
  }
  const sim_json_t* res = sim_json_get(root, "results");
  if (!res || res->type != SIM_JSON_ARRAY) {
    errf(err, err_len, "%s:%d: \"results\" must be an array", name, res ? res->line : root->line);
    goto done;
  }
  copy_str(c->path, sizeof c->path, name);
  copy_str(c->commit, sizeof c->commit, sim_json_str(root, "commit"));
  copy_str(c->machine, sizeof c->machine, sim_json_str(root, "machine"));
  copy_str(c->transport, sizeof c->transport, sim_json_str(root, "transport"));
  copy_str(c->date, sizeof c->date, sim_json_str(root, "date"));
  c->gpus = (int)gpus;
  c->e = calloc((size_t)sim_json_len(res) + 1, sizeof *c->e);
  if (!c->e) {
    errf(err, err_len, "%s: out of memory", name);
    goto done;
  }
  int idx = 0;
  for (const sim_json_t* r = res->child; r; r = r->next, idx++) {
    if (r->type != SIM_JSON_OBJECT) {
      errf(err, err_len, "%s:%d: results[%d] is not an object", name, r->line, idx);
      goto fail;
    }
    const char* op = sim_json_str(r, "op");
    const char* dtype = sim_json_str(r, "dtype");
    const char* impl = sim_json_str(r, "impl");
    const sim_json_t* shape = sim_json_get(r, "shape");
    double impl_id, time_us, bytes = -1, wrong = 0, cu;
    const sim_json_t* tj = sim_json_get(r, "time_us");
    const char* missing = !op ? "op (a string)"
                          : !dtype ? "dtype (a string)"
                          : !impl ? "impl (a string)"
                          : !sim_json_num(r, "impl_id", &impl_id) ? "impl_id (a number)"
                          : !tj || (tj->type != SIM_JSON_NUMBER && tj->type != SIM_JSON_NULL)
                              ? "time_us (a number, or null)"
                          : !shape || shape->type != SIM_JSON_OBJECT ? "shape (an object)"
                                                                     : NULL;
    if (missing) {
      errf(err, err_len, "%s:%d: results[%d] lacks %s", name, r->line, idx, missing);
      goto fail;
    }
    if (!int_in(impl_id, -1, SIM_CALIB_MAX_IMPL)) {
      errf(err, err_len, "%s:%d: results[%d].impl_id is %s: must be an integer in [-1, %d]",
           name, r->line, idx, num_str(impl_id, num, sizeof num), SIM_CALIB_MAX_IMPL);
      goto fail;
    }
    for (size_t k = 0; k < sizeof kShapeInts / sizeof kShapeInts[0]; k++) {
      const sim_json_t* m = sim_json_get(shape, kShapeInts[k]);
      if (m && m->type == SIM_JSON_NUMBER && !int_in(m->number, 1, SIM_CALIB_MAX_DIM)) {
        errf(err, err_len, "%s:%d: results[%d].shape.%s is %s: must be a positive integer, at "
             "most %g", name, m->line, idx, kShapeInts[k], num_str(m->number, num, sizeof num),
             SIM_CALIB_MAX_DIM);
        goto fail;
      }
    }
    if (!sim_json_num(shape, "bytes", &bytes)) {
      double count;
      int eb = sim_dtype_bytes(dtype);
      if (sim_json_num(shape, "count", &count) && eb) bytes = count * eb;
    }
    /* collectives are looked up by bytes; operator rows carry their dimensions instead */
    if (!(bytes >= 0) && !strcmp(op, "allreduce")) {
      errf(err, err_len, "%s:%d: results[%d].shape has neither \"bytes\" nor \"count\"", name,
           shape->line, idx);
      goto fail;
    }
    if (tj->type == SIM_JSON_NULL) { /* impl not supported for this shape: nothing measured */
      c->dropped++;
      continue;
    }
    time_us = tj->number;
    if (!(time_us > 0)) {
      errf(err, err_len, "%s:%d: results[%d].time_us is %g, must be > 0", name, r->line, idx,
           time_us);
      goto fail;
    }
    if (sim_json_num(r, "wrong", &wrong) && wrong != 0) { /* null: not checked, kept */
      c->dropped++;
      continue;
    }
    sim_calib_entry_t* e = &c->e[c->num++];
    copy_str(e->op, sizeof e->op, op);
    copy_str(e->dtype, sizeof e->dtype, dtype);
    copy_str(e->impl, sizeof e->impl, impl);
    e->impl_id = (int)impl_id;
    e->bytes = bytes;
    e->time_us = time_us;
    e->compute_us = sim_json_num(r, "compute_us", &cu) && cu >= 0 ? cu : -1;
    e->comm_us = sim_json_num(r, "comm_us", &cu) && cu >= 0 ? cu : -1;
    e->line = r->line;
    for (const sim_json_t* m = shape->child; m && e->num_shape < SIM_CALIB_SHAPE_KEYS; m = m->next)
      if (m->type == SIM_JSON_NUMBER && strlen(m->key) < sizeof e->shape_key[0]) {
        snprintf(e->shape_key[e->num_shape], sizeof e->shape_key[0], "%s", m->key);
        e->shape_val[e->num_shape++] = m->number;
      }
    for (const sim_json_t* m = shape->child; m; m = m->next)
      if (m->type == SIM_JSON_STRING && m->string) {
        size_t n = strlen(e->shape_tag);
        snprintf(e->shape_tag + n, sizeof e->shape_tag - n, "%s%s", n ? "," : "", m->string);
      }
  }
  rc = 0;
  goto done;
fail:
  free(c->e);
  memset(c, 0, sizeof *c);
done:
  sim_json_free(root);
  return rc;
}

int sim_calib_load(const char* path, sim_calib_t* c, char* err, size_t err_len) {
  memset(c, 0, sizeof *c);
  char* text = NULL;
  size_t len = 0;
  int rd = sim_read_file(path, &text, &len);
  if (rd == 1) return errf(err, err_len, "%s: cannot open calibration file", path);
  if (rd == 2) return errf(err, err_len, "%s: out of memory", path);
  int rc = sim_calib_parse(text, path, c, err, err_len);
  free(text);
  return rc;
}

double sim_calib_shape(const sim_calib_entry_t* e, const char* key, double def) {
  for (int i = 0; i < e->num_shape; i++)
    if (!strcmp(e->shape_key[i], key)) return e->shape_val[i];
  return def;
}

void sim_calib_free(sim_calib_t* c) {
  free(c->e);
  memset(c, 0, sizeof *c);
}

/* The dtype to use for elem_bytes: bf16 first among 2-byte types, else the first row's of that
 * size, else (none of that size) the first row's dtype. NULL when op has no usable rows. */
static const char* pick_dtype(const sim_calib_t* c, const char* op, int elem_bytes, int compute) {
  const char* first = NULL;
  const char* same = NULL;
  for (int i = 0; i < c->num; i++) {
    const sim_calib_entry_t* e = &c->e[i];
    if (strcmp(e->op, op) || e->impl_id < 0 || (compute && e->compute_us < 0)) continue;
    if (!first) first = e->dtype;
    if (sim_dtype_bytes(e->dtype) == elem_bytes) {
      if (elem_bytes == 2 && !strcmp(e->dtype, "bf16")) return e->dtype;
      if (!same) same = e->dtype;
    }
  }
  return same ? same : first;
}

static int cmp_pts(const void* a, const void* b) {
  double x = ((const double*)a)[0], y = ((const double*)b)[0];
  return (x > y) - (x < y);
}

static void human_bytes(double b, char* out, size_t len) {
  if (b >= 1 << 30) snprintf(out, len, "%g GB", b / (1 << 30));
  else if (b >= 1 << 20) snprintf(out, len, "%g MB", b / (1 << 20));
  else if (b >= 1 << 10) snprintf(out, len, "%g KB", b / (1 << 10));
  else snprintf(out, len, "%g B", b);
}

static const char* base_name(const char* path) {
  const char* s = strrchr(path, '/');
  return s ? s + 1 : path;
}

int sim_calib_collective(const sim_calib_t* c, const char* op, int fused, int elem_bytes,
                         double bytes, double* us, char* note, size_t note_len) {
  if (!c || !c->num) return 0;
  const char* dtype = pick_dtype(c, op, elem_bytes, 0);
  if (!dtype) return 0;
  /* (bytes, time) points: impl 0, or the min over fused impls per size */
  double(*pts)[2] = calloc((size_t)c->num, sizeof *pts);
  if (!pts) return 0;
  int n = 0;
  for (int i = 0; i < c->num; i++) {
    const sim_calib_entry_t* e = &c->e[i];
    if (strcmp(e->op, op) || strcmp(e->dtype, dtype)) continue;
    if (fused ? e->impl_id < 1 : e->impl_id != 0) continue;
    int k = 0;
    while (k < n && pts[k][0] != e->bytes) k++;
    if (k == n) {
      pts[n][0] = e->bytes;
      pts[n][1] = e->time_us;
      n++;
    } else if (e->time_us < pts[k][1]) {
      pts[k][1] = e->time_us;
    }
  }
  if (!n) {
    free(pts);
    return 0;
  }
  qsort(pts, (size_t)n, sizeof *pts, cmp_pts);
  char a[32], b[32], how[128];
  int lo;
  if (n == 1 || bytes <= pts[0][0]) {
    *us = pts[0][1];
    human_bytes(pts[0][0], a, sizeof a);
    snprintf(how, sizeof how, bytes < pts[0][0] ? "time of the smallest size %s" : "at %s", a);
  } else {
    lo = n - 2;
    for (int k = 0; k + 1 < n; k++)
      if (bytes <= pts[k + 1][0]) {
        lo = k;
        break;
      }
    double x0 = pts[lo][0], x1 = pts[lo + 1][0], y0 = pts[lo][1], y1 = pts[lo + 1][1];
    *us = y0 + (y1 - y0) * (bytes - x0) / (x1 - x0);
    human_bytes(x0, a, sizeof a);
    human_bytes(x1, b, sizeof b);
    snprintf(how, sizeof how, "%s %s and %s",
             bytes > x1 ? "extrapolated from" : "interpolated between", a, b);
    /* times falling towards the largest size would extrapolate below every measurement (or
     * below zero): hold at the smallest measured time (calib.h). Interpolation and the
     * below-range case (the smallest size's time) never go below it. */
    double floor_us = pts[0][1];
    for (int k = 1; k < n; k++)
      if (pts[k][1] < floor_us) floor_us = pts[k][1];
    if (*us < floor_us) {
      *us = floor_us;
      size_t hl = strlen(how);
      snprintf(how + hl, sizeof how - hl, ", held at the smallest measured time");
    }
  }
  if (note)
    snprintf(note, note_len, "measured (%s %s %s, %s, %d GPUs): %s", base_name(c->path), op,
             fused ? "best fused impl" : "impl 0", dtype, c->gpus, how);
  free(pts);
  return 1;
}

/* The work measure of a row for compute lookups: shape.bytes when given, else from the
 * operator's dimensions as fco-bench defines its bytes column: embedding_alltoall B x
 * tables_per_gpu x L x D x esize (gathered per rank), gemv_allreduce N x K_r x esize (W_r). */
static double work_bytes_of(const sim_calib_entry_t* e) {
  if (e->bytes >= 0) return e->bytes;
  double es = sim_dtype_bytes(e->dtype);
  if (!strcmp(e->op, "embedding_alltoall"))
    return sim_calib_shape(e, "B", 0) * sim_calib_shape(e, "tables_per_gpu", 0) *
           sim_calib_shape(e, "L", 0) * sim_calib_shape(e, "D", 0) * es;
  if (!strcmp(e->op, "gemv_allreduce"))
    return sim_calib_shape(e, "N", 0) * sim_calib_shape(e, "K_r", 0) * es;
  return -1;
}

/* Distance in log of a row's value from the query's; INFINITY when either is unknown, so
 * rows without the member rank after those with it (and tie among themselves). */
static double log_dist(double row, double want) {
  return row > 0 && want > 0 ? fabs(log(row / want)) : INFINITY;
}

/* The keys of sim_calib_compute's order (calib.h), most significant first. */
#define SIM_COMPUTE_KEYS 4
static void compute_keys(const sim_calib_entry_t* e, const sim_calib_shape_t* want,
                         double work_bytes, double k[SIM_COMPUTE_KEYS]) {
  double es = sim_dtype_bytes(e->dtype);
  /* a skewed distribution (zipf) re-reads hot rows from cache: faster than hashed lookups */
  k[0] = want && e->shape_tag[0] && !strstr(e->shape_tag, "uniform");
  k[1] = want ? log_dist(sim_calib_shape(e, "D", 0) * es, want->row_bytes) : 0;
  k[2] = want ? log_dist(sim_calib_shape(e, "L", 0), want->bag) : 0;
  k[3] = log_dist(work_bytes_of(e), work_bytes);
}

int sim_calib_compute(const sim_calib_t* c, const char* op, int elem_bytes,
                      const sim_calib_shape_t* want, double work_bytes, double* us, char* note,
                      size_t note_len) {
  if (!c || !c->num || !(work_bytes > 0)) return 0;
  const char* dtype = pick_dtype(c, op, elem_bytes, 1);
  if (!dtype) return 0;
  const sim_calib_entry_t* best = NULL;
  double best_k[SIM_COMPUTE_KEYS];
  for (int i = 0; i < c->num; i++) {
    const sim_calib_entry_t* e = &c->e[i];
    double wb = work_bytes_of(e);
    if (strcmp(e->op, op) || strcmp(e->dtype, dtype) || e->compute_us < 0 || !(wb > 0)) continue;
    double k[SIM_COMPUTE_KEYS];
    compute_keys(e, want, work_bytes, k);
    int j = 0;
    while (best && j < SIM_COMPUTE_KEYS && k[j] == best_k[j]) j++;
    if (!best || (j < SIM_COMPUTE_KEYS && k[j] < best_k[j])) { /* strictly nearer */
      best = e;
      memcpy(best_k, k, sizeof k);
    }
  }
  if (!best) return 0;
  *us = best->compute_us * work_bytes / work_bytes_of(best);
  if (note) {
    char a[32], shape[64] = "";
    human_bytes(work_bytes_of(best), a, sizeof a);
    double D = sim_calib_shape(best, "D", 0), L = sim_calib_shape(best, "L", 0);
    if (D > 0 && L > 0) snprintf(shape, sizeof shape, " of D %g, L %g", D, L);
    snprintf(note, note_len, "measured (%s %s %s compute_us%s at %s, scaled by bytes)",
             base_name(c->path), op, dtype, shape, a);
  }
  return 1;
}

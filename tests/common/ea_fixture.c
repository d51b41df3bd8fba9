/*
 * ea_fixture.c — the fco_embedding_alltoall tests' fixture (ea_fixture.h): random problems, their
 * rank buffers (the layout state: symmetric outs, pointers off alignment), every rank's call in
 * one group, the reference check. Used by test_embedding_alltoall.c and
 * test_embedding_alltoall_bad.c; linked into every test program.
 */
#include "ea_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

unsigned ea_sym_mask;
size_t ea_shift_bytes;
int ea_shift_rank = -1;
int64_t ea_long_bags;
int64_t ea_even_len = -1;

uint64_t ea_rng;
uint64_t ea_rnd(void) { return ea_rng = t_mix(ea_rng); }
int64_t ea_rnd_in(int64_t lo, int64_t hi) {
  return lo + (int64_t)(ea_rnd() % (uint64_t)(hi - lo + 1));
}
static float rnd_real(void) {
  return (float)((double)(ea_rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

float ea_round_to(fco_dtype_t dt, float v) {
  char b[4];
  t_set_elem(dt, b, 0, v);
  return t_get_elem(dt, b, 0);
}

int64_t ea_toff(const ea_prob_t* p, int r) {
  int64_t s = 0;
  for (int q = 0; q < r; q++) s += p->tpr[q];
  return s;
}
static int64_t boff(const ea_prob_t* p, int r) {
  int64_t s = 0;
  for (int q = 0; q < r; q++) s += p->bpr[q];
  return s;
}

/* A random problem: T_r ∈ [0, 3] (T ≥ 1), b_s ∈ [0, 6] (B ≥ 1), rows ∈ [1, 40], bags of 0..6.
 * With bmax > 0, a big one: T_r ∈ [2, 3], b_s ∈ [bmax/2, bmax]; tpr / bpr not NULL: the given
 * T_r and b_s (T ≥ 1, B ≥ 1). */
void ea_prob_make_shape(ea_prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                        int weighted, fco_emb_pooling_t pool, int real, uint64_t seed,
                        int64_t bmax, const int32_t* tpr, const int64_t* bpr) {
  memset(p, 0, sizeof *p);
  ea_rng = seed;
  p->P = P;
  p->D = D;
  p->dt = dt;
  p->it = it;
  p->weighted = weighted;
  p->pool = pool;
  p->real = real;
  do {
    p->T = p->B = 0;
    for (int r = 0; r < P; r++) {
      p->tpr[r] = tpr ? tpr[r] : (int32_t)ea_rnd_in(bmax ? 2 : 0, 3);
      p->bpr[r] = bpr ? bpr[r] : bmax ? ea_rnd_in(bmax / 2, bmax) : ea_rnd_in(0, 6);
      p->T += p->tpr[r];
      p->B += p->bpr[r];
    }
  } while (p->T < 1 || p->B < 1);
  for (int r = 0; r < P; r++) {
    int Tr = p->tpr[r];
    p->rows[r] = (int64_t*)calloc((size_t)Tr + 1, sizeof(int64_t));
    for (int t = 0; t < Tr; t++) p->total_rows[r] += p->rows[r][t] = ea_rnd_in(1, 40);
    size_t nw = (size_t)p->total_rows[r] * (size_t)D;
    p->weight[r] = (float*)malloc((nw + 1) * sizeof(float));
    for (size_t i = 0; i < nw; i++)
      p->weight[r][i] = ea_round_to(dt, real ? rnd_real() : (float)ea_rnd_in(-4, 4));
    size_t nb = (size_t)Tr * (size_t)p->B;
    p->offsets[r] = (int64_t*)malloc((nb + 1) * sizeof(int64_t));
    int64_t* len = (int64_t*)malloc((nb + 1) * sizeof(int64_t));
    int64_t nnz = 0;
    for (size_t k = 0; k < nb; k++) {
      len[k] = ea_rnd() % 4 == 0 ? 0 : ea_rnd_in(1, 6); /* a quarter of the bags are empty */
      if (ea_long_bags > 0 && ea_rnd() % 8 == 0) len[k] = ea_rnd_in(ea_long_bags / 4, ea_long_bags);
      if (ea_even_len >= 0 && (k / (size_t)p->B) % 2 == 0) len[k] = ea_even_len;
      p->offsets[r][k] = nnz;
      nnz += len[k];
    }
    p->offsets[r][nb] = nnz;
    p->nnz[r] = nnz;
    p->indices[r] = (int64_t*)malloc(((size_t)nnz + 1) * sizeof(int64_t));
    p->psw[r] = (float*)malloc(((size_t)nnz + 1) * sizeof(float));
    for (size_t k = 0; k < nb; k++) {
      int t = (int)(k / (size_t)p->B);
      for (int64_t j = p->offsets[r][k]; j < p->offsets[r][k + 1]; j++) {
        p->indices[r][j] = ea_rnd_in(0, p->rows[r][t] - 1);
        p->psw[r][j] = real ? rnd_real() : (float)ea_rnd_in(-4, 4) * 0.5f;
      }
    }
    free(len);
  }
}
void ea_prob_make(ea_prob_t* p, int P, int64_t D, fco_dtype_t dt, fco_emb_index_t it,
                  int weighted, fco_emb_pooling_t pool, int real, uint64_t seed) {
  ea_prob_make_shape(p, P, D, dt, it, weighted, pool, real, seed, 0, NULL, NULL);
}

void ea_prob_free(const t_world_t* w, ea_prob_t* p) {
  for (int r = 0; r < p->P; r++) {
    int d = t_rank_device(w->transport, r);
    free(p->rows[r]);
    free(p->weight[r]);
    free(p->offsets[r]);
    free(p->indices[r]);
    free(p->psw[r]);
    t_free(w->transport, d, p->d_weight[r] ? (char*)p->d_weight[r] - p->shift[r] : NULL);
    t_free(w->transport, d, p->d_offsets[r]);
    t_free(w->transport, d, p->d_indices[r]);
    t_free(w->transport, d, p->d_psw[r]);
    if (!p->d_sym[r] || (ea_sym_mask >> r & 1) == 0)
      t_free(w->transport, d, p->d_out[r] ? (char*)p->d_out[r] - p->shift[r] : NULL);
  }
  for (int r = 0; r < p->P; r++)
    if (p->d_sym[r]) ASSERT_OK(fco_mem_free(w->comms[r], p->d_sym[r]));
  memset(p, 0, sizeof *p);
}

/* Upload rank r's inputs (converted to dt / index type); ea_poison_out: poison its out + guard. */
void ea_upload_inputs(const t_world_t* w, ea_prob_t* p, int r) {
  int d = t_rank_device(w->transport, r);
  size_t es = fco_dtype_size(p->dt), is = p->it == FCO_EMB_INDEX_I64 ? 8 : 4;
  size_t nw = (size_t)p->total_rows[r] * (size_t)p->D;
  char* h = (char*)malloc(nw * es + 16);
  for (size_t i = 0; i < nw; i++) t_set_elem(p->dt, h, i, p->weight[r][i]);
  if (nw) t_put(w->transport, d, p->d_weight[r], h, nw * es);
  free(h);
  size_t no = (size_t)p->tpr[r] * (size_t)p->B + 1;
  size_t ni = (size_t)p->nnz[r];
  char* hi = (char*)malloc((no > ni ? no : ni) * is + 16);
  for (size_t i = 0; i < no; i++) {
    if (is == 8) ((int64_t*)hi)[i] = p->offsets[r][i];
    else ((int32_t*)hi)[i] = (int32_t)p->offsets[r][i];
  }
  if (p->tpr[r]) t_put(w->transport, d, p->d_offsets[r], hi, no * is);
  for (size_t i = 0; i < ni; i++) {
    if (is == 8) ((int64_t*)hi)[i] = p->indices[r][i];
    else ((int32_t*)hi)[i] = (int32_t)p->indices[r][i];
  }
  if (ni) t_put(w->transport, d, p->d_indices[r], hi, ni * is);
  free(hi);
  if (ni && p->d_psw[r]) t_put(w->transport, d, p->d_psw[r], p->psw[r], ni * sizeof(float));
}

void ea_poison_out(const t_world_t* w, ea_prob_t* p, int r) {
  int d = t_rank_device(w->transport, r);
  unsigned char* h = (unsigned char*)malloc(p->out_bytes[r] + T_GUARD);
  memset(h, T_POISON, p->out_bytes[r]);
  memset(h + p->out_bytes[r], T_GUARD_BYTE, T_GUARD);
  t_put(w->transport, d, p->d_out[r], h, p->out_bytes[r] + T_GUARD);
  free(h);
}

void ea_prob_upload(const t_world_t* w, ea_prob_t* p) {
  size_t es = fco_dtype_size(p->dt), is = p->it == FCO_EMB_INDEX_I64 ? 8 : 4;
  memset(p->d_sym, 0, sizeof p->d_sym);
  if (ea_sym_mask) {
    size_t most = 0;
    for (int r = 0; r < p->P; r++) {
      size_t ob = (size_t)p->bpr[r] * (size_t)p->T * (size_t)p->D * es;
      if (ob > most) most = ob;
    }
    for (int r = 0; r < p->P; r++) /* every rank, in rank order: collective */
      ASSERT_OK(fco_mem_alloc(w->comms[r], most + T_GUARD + 256 * (EA_MAX_P + 1) + 64,
                              &p->d_sym[r]));
  }
  for (int r = 0; r < p->P; r++) {
    int d = t_rank_device(w->transport, r);
    size_t nw = (size_t)p->total_rows[r] * (size_t)p->D;
    size_t no = (size_t)p->tpr[r] * (size_t)p->B + 1;
    size_t ni = (size_t)p->nnz[r];
    p->shift[r] = ea_shift_rank < 0 || ea_shift_rank == r ? ea_shift_bytes : 0;
    p->d_weight[r] = nw ? (char*)t_alloc(w->transport, d, nw * es + p->shift[r]) + p->shift[r] : NULL;
    p->d_offsets[r] = p->tpr[r] ? t_alloc(w->transport, d, no * is) : NULL;
    p->d_indices[r] = ni ? t_alloc(w->transport, d, ni * is) : NULL;
    p->d_psw[r] = ni && p->weighted ? t_alloc(w->transport, d, ni * sizeof(float)) : NULL;
    p->out_bytes[r] = (size_t)p->bpr[r] * (size_t)p->T * (size_t)p->D * es;
    p->d_out[r] = (ea_sym_mask >> r & 1
                       ? (char*)p->d_sym[r] + 256 * (r + 1)
                       : (char*)t_alloc(w->transport, d, p->out_bytes[r] + T_GUARD + p->shift[r])) +
                  p->shift[r];
    ea_upload_inputs(w, p, r);
    ea_poison_out(w, p, r);
  }
}

fco_result_t ea_prob_run_rank(const t_world_t* w, const ea_prob_t* p, int r, int impl,
                             void* stream) {
  return fco_embedding_alltoall(w->comms[r], p->d_weight[r], p->rows[r], p->tpr, p->bpr, p->D,
                                p->dt, p->d_offsets[r], p->d_indices[r], p->nnz[r], p->it,
                                p->weighted ? (const float*)p->d_psw[r] : NULL, p->pool,
                                p->bpr[r] ? p->d_out[r] : NULL, impl, stream);
}

fco_result_t ea_prob_run(const t_world_t* w, const ea_prob_t* p, int impl, void* stream) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < p->P; r++) {
    fco_result_t e = ea_prob_run_rank(w, p, r, impl, stream);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* Expected out element (sample i of rank s, global table tg, column d): exact mode gives the
 * fp32 value the library must produce; *ref / *mag the float64 sum and Σ|terms| (real mode). */
static float expect(const ea_prob_t* p, int s, int64_t i, int64_t tg, int64_t d, double* ref,
                    double* mag) {
  int r = 0;
  while (tg >= ea_toff(p, r) + p->tpr[r]) r++;
  int t = (int)(tg - ea_toff(p, r));
  int64_t k = (int64_t)t * p->B + boff(p, s) + i, base = 0;
  for (int q = 0; q < t; q++) base += p->rows[r][q];
  int64_t lo = p->offsets[r][k], hi = p->offsets[r][k + 1];
  float acc = 0.0f;
  *ref = *mag = 0.0;
  if (lo < 0 || hi < lo || hi > p->nnz[r]) return ea_round_to(p->dt, 0.0f); /* bad bag: empty */
  for (int64_t j = lo; j < hi; j++) {
    int64_t idx = p->indices[r][j];
    if (idx < 0 || idx >= p->rows[r][t]) continue; /* bad index: skipped */
    float x = p->weight[r][(size_t)(base + idx) * (size_t)p->D + (size_t)d];
    if (p->weighted) {
      acc = fmaf(p->psw[r][j], x, acc);
      *ref += (double)p->psw[r][j] * x;
      *mag += fabs((double)p->psw[r][j] * x);
    } else {
      acc += x;
      *ref += x;
      *mag += fabs((double)x);
    }
  }
  if (p->pool == FCO_EMB_POOL_MEAN && hi > lo) {
    acc = acc / (float)(hi - lo);
    *ref /= (double)(hi - lo);
    *mag /= (double)(hi - lo);
  }
  return ea_round_to(p->dt, acc);
}

/* Compare every rank's out (and its guard) with the reference (expect); returns wrong elements. */
size_t ea_prob_check(const t_world_t* w, const ea_prob_t* p) {
  size_t wrong = 0;
  double tol = p->dt == FCO_F32 ? 1e-5 : p->dt == FCO_F16 ? 2e-3 : 1e-2;
  /* cpu: the reference semantics bit for bit, real values too (fp32 in bag order, fmaf, one
   * division; a mutant with an unfused multiply-add passed the float64 bound). GPU kernels may
   * split a bag across lanes: real values by relative error there. */
  const int exact = !p->real || w->transport == FCO_TRANSPORT_CPU;
  for (int s = 0; s < p->P; s++) {
    int dv = t_rank_device(w->transport, s);
    unsigned char* h = (unsigned char*)malloc(p->out_bytes[s] + T_GUARD);
    t_get(w->transport, dv, h, p->d_out[s], p->out_bytes[s] + T_GUARD);
    size_t bad = 0;
    for (int64_t i = 0; i < p->bpr[s]; i++)
      for (int64_t tg = 0; tg < p->T; tg++)
        for (int64_t d = 0; d < p->D; d++) {
          size_t e = ((size_t)i * (size_t)p->T + (size_t)tg) * (size_t)p->D + (size_t)d;
          double ref, mag;
          float want = expect(p, s, i, tg, d, &ref, &mag), got = t_get_elem(p->dt, h, e);
          int ok = exact ? got == want : fabs((double)got - ref) <= tol * mag + 1e-6;
          if (ok) continue;
          if (bad++ < 5)
            fprintf(stderr, "  rank %d out[%lld][%lld][%lld] = %.9g, want %.9g (float64 %.9g)\n", s,
                    (long long)i, (long long)tg, (long long)d, (double)got, (double)want, ref);
        }
    for (size_t g = 0; g < T_GUARD; g++)
      if (h[p->out_bytes[s] + g] != T_GUARD_BYTE && bad++ < 5)
        fprintf(stderr, "  rank %d wrote 0x%02x %zu bytes past out\n", s, h[p->out_bytes[s] + g], g);
    if (bad) fprintf(stderr, "  rank %d: %zu wrong\n", s, bad);
    wrong += bad;
    free(h);
  }
  return wrong;
}

void ea_describe(const ea_prob_t* p, int impl, uint64_t seed, const char* what) {
  char splits[256];
  size_t n = 0;
  for (int r = 0; r < p->P && n < sizeof splits - 32; r++)
    n += (size_t)snprintf(splits + n, sizeof splits - n, "%s%d/%lld", r ? "," : "", p->tpr[r],
                          (long long)p->bpr[r]);
  t_context("%s P=%d T_r/b_s=%s D=%lld %s %s %s %s %s impl=%d seed=0x%016llx", what, p->P, splits,
            (long long)p->D, fco_dtype_name(p->dt), p->it == FCO_EMB_INDEX_I64 ? "i64" : "i32",
            p->weighted ? "weighted" : "unweighted", p->pool == FCO_EMB_POOL_MEAN ? "mean" : "sum",
            p->real ? "real" : "integer", impl, (unsigned long long)seed);
}

void ea_run_checked(const t_world_t* w, ea_prob_t* p, int impl) {
  ea_prob_upload(w, p);
  ASSERT_OK(ea_prob_run(w, p, impl, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ea_prob_check(w, p), 0);
}

/*
 * ga_fixture.c — the fco_gemm_alltoall tests' fixture (ga_fixture.h): cases, per-rank buffers,
 * one call issued for every rank, the float64 reference check, a refused call's check. Used by
 * test_gemm_alltoall.c and test_gemm_alltoall_checks.c; linked into every test program.
 */
#include "ga_fixture.h"

#include <math.h>
#include <stdlib.h>

unsigned ga_sym_mask;
#define SYM_PAD (256 * (GA_MAXP + 1))

int ga_dev_of(const t_world_t* w, int r) { return t_rank_device(w->transport, r); }

static double urand(uint64_t* s) {
  *s = t_mix(*s);
  return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

void ga_case_init(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt) {
  memset(c, 0, sizeof *c);
  c->P = P;
  c->K = K;
  c->N = N;
  c->layout = layout;
  c->dtype = dt;
}

/* Counts: ragged, with zero segments; `big` makes some segments span several 128-row tiles. */
void ga_make_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt, uint64_t seed,
                  int big, int slack) {
  ga_case_init(c, P, K, N, layout, dt);
  uint64_t s = seed;
  int zero_src = P > 1 ? (int)(urand(&s) * P) : -1; /* a source nobody gets rows from, at times */
  if (urand(&s) < 0.5) zero_src = -1;
  for (int r = 0; r < P; r++) {
    c->E[r] = 1 + (int)((seed >> (8 * r)) % GA_MAXE);
    c->counts[r] = (int32_t*)calloc((size_t)c->E[r] * P, sizeof(int32_t));
    for (int e = 0; e < c->E[r]; e++)
      for (int q = 0; q < P; q++) {
        double u = urand(&s);
        int v = u < 0.25 ? 0 : (int)(urand(&s) * (big ? 300 : 9));
        if (q == zero_src) v = 0;
        c->counts[r][e * P + q] = v;
      }
  }
  ga_finish_case(c, s, slack);
}

/* recv and the capacities from c->counts (+ slack), then the inputs (values from seed s). */
void ga_finish_case(ga_case_t* c, uint64_t s, int slack) {
  const int P = c->P, K = c->K, N = c->N;
  const fco_dtype_t dt = c->dtype;
  int64_t max_a = 0, max_out = 0;
  memset(c->recv, 0, sizeof c->recv);
  for (int r = 0; r < P; r++) {
    int64_t sum = 0;
    for (int i = 0; i < c->E[r] * P; i++) {
      sum += c->counts[r][i];
      c->recv[i % P][r] += c->counts[r][i];
    }
    if (sum > max_a) max_a = sum;
  }
  for (int q = 0; q < P; q++) {
    int64_t t = 0;
    for (int r = 0; r < P; r++) t += c->recv[q][r];
    if (t > max_out) max_out = t;
  }
  c->a_rows = max_a + slack;
  c->out_rows = max_out + slack;
  for (int r = 0; r < P; r++) {
    size_t na = (size_t)c->a_rows * K, nw = (size_t)c->E[r] * K * N;
    c->a[r] = (float*)malloc((na + 1) * sizeof(float));
    c->w[r] = (float*)malloc((nw + 1) * sizeof(float));
    char tmp[4];
    for (size_t i = 0; i < na; i++) {
      t_set_elem(dt, tmp, 0, (float)(2 * urand(&s) - 1));
      c->a[r][i] = t_get_elem(dt, tmp, 0);
    }
    for (size_t i = 0; i < nw; i++) {
      t_set_elem(dt, tmp, 0, (float)(2 * urand(&s) - 1));
      c->w[r][i] = t_get_elem(dt, tmp, 0);
    }
  }
}

/* A case with 2 experts per rank and zeroed counts [2][P] for the caller to fill (then
 * ga_finish_case). */
void ga_two_expert_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt) {
  ga_case_init(c, P, K, N, layout, dt);
  for (int r = 0; r < P; r++) {
    c->E[r] = 2;
    c->counts[r] = (int32_t*)calloc((size_t)2 * P, sizeof(int32_t));
  }
}

void ga_free_case(ga_case_t* c) {
  for (int r = 0; r < c->P; r++) {
    free(c->counts[r]);
    free(c->a[r]);
    free(c->w[r]);
  }
}

/* Rows the case moves in all (ga_finish_case's recv table summed). */
static int64_t case_rows(const ga_case_t* c) {
  int64_t n = 0;
  for (int q = 0; q < c->P; q++)
    for (int r = 0; r < c->P; r++) n += c->recv[q][r];
  return n;
}

void ga_make_moving_case(ga_case_t* c, int P, int K, int N, int layout, fco_dtype_t dt,
                         uint64_t seed, int big, int slack) {
  for (;;) {
    ga_make_case(c, P, K, N, layout, dt, seed, big, slack);
    if (case_rows(c) > 0) return;
    ga_free_case(c);
    seed = t_mix(seed);
  }
}

void ga_upload(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b) {
  size_t es = fco_dtype_size(c->dtype);
  memset(b->sym, 0, sizeof b->sym);
  for (int r = 0; r < c->P && ga_sym_mask; r++) /* every rank, in rank order: collective */
    ASSERT_OK(fco_mem_alloc(w->comms[r], (size_t)c->out_rows * c->N * es + T_GUARD + SYM_PAD,
                            &b->sym[r]));
  for (int r = 0; r < c->P; r++) {
    int d = ga_dev_of(w, r);
    size_t na = (size_t)c->a_rows * c->K, nw = (size_t)c->E[r] * c->K * c->N;
    b->a[r] = t_alloc(w->transport, d, na * es + T_GUARD);
    b->w[r] = t_alloc(w->transport, d, nw * es + T_GUARD);
    b->out_bytes[r] = (size_t)c->out_rows * c->N * es;
    b->out[r] = (ga_sym_mask >> r) & 1 ? (char*)b->sym[r] + 256 * (r + 1)
                                       : t_alloc(w->transport, d, b->out_bytes[r] + T_GUARD);
    b->counts[r] = (int32_t*)t_alloc(w->transport, d, (size_t)c->E[r] * c->P * 4 + 16);
    void* h = malloc((na > nw ? na : nw) * es + 1);
    for (size_t i = 0; i < na; i++) t_set_elem(c->dtype, h, i, c->a[r][i]);
    t_put(w->transport, d, b->a[r], h, na * es);
    for (size_t i = 0; i < nw; i++) t_set_elem(c->dtype, h, i, c->w[r][i]);
    t_put(w->transport, d, b->w[r], h, nw * es);
    free(h);
    t_put(w->transport, d, b->counts[r], c->counts[r], (size_t)c->E[r] * c->P * 4);
  }
  ga_poison(w, c, b);
}

void ga_poison(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b) {
  for (int r = 0; r < c->P; r++) {
    t_memset(w->transport, ga_dev_of(w, r), b->out[r], T_POISON, b->out_bytes[r]);
    t_memset(w->transport, ga_dev_of(w, r), (char*)b->out[r] + b->out_bytes[r], T_GUARD_BYTE,
             T_GUARD);
  }
}

void ga_free_bufs(const t_world_t* w, const ga_case_t* c, ga_bufs_t* b) {
  for (int r = 0; r < c->P; r++) {
    int d = ga_dev_of(w, r);
    t_free(w->transport, d, b->a[r]);
    t_free(w->transport, d, b->w[r]);
    if (!b->sym[r] || (ga_sym_mask >> r & 1) == 0) t_free(w->transport, d, b->out[r]);
    t_free(w->transport, d, b->counts[r]);
  }
  for (int r = 0; r < c->P; r++)
    if (b->sym[r]) ASSERT_OK(fco_mem_free(w->comms[r], b->sym[r]));
}

fco_result_t ga_issue_rank(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int r,
                           int impl, int hints, void* stream) {
  return fco_gemm_alltoall(w->comms[r], b->a[r], c->a_rows, b->w[r], c->layout, c->E[r],
                           b->counts[r], hints ? c->counts[r] : NULL, hints ? c->recv[r] : NULL,
                           b->out[r], c->out_rows, c->K, c->N, c->dtype, impl, stream);
}

fco_result_t ga_issue_hints(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int impl,
                            const ga_hints_t* h, void* stream) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < c->P; r++) {
    fco_result_t e = fco_gemm_alltoall(w->comms[r], b->a[r], c->a_rows, b->w[r], c->layout,
                                       c->E[r], b->counts[r], h ? h->counts[r] : NULL,
                                       h ? h->recv[r] : NULL, b->out[r], c->out_rows, c->K,
                                       c->N, c->dtype, impl, stream);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  if (h && h->before_end) h->before_end(h->arg);
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* hints: 0 none, 1 counts_host + recv_rows_host (the case's own, right). */
fco_result_t ga_issue(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b, int impl,
                      int hints, void* stream) {
  ga_hints_t h;
  memset(&h, 0, sizeof h);
  for (int r = 0; r < c->P; r++) {
    h.counts[r] = c->counts[r];
    h.recv[r] = c->recv[r];
  }
  return ga_issue_hints(w, c, b, impl, hints ? &h : NULL, stream);
}

/* floor: half the smallest subnormal step of the dtype (f16 results below 2^-14 are subnormal,
 * where the relative bound alone is too tight). */
static void tolerances(fco_dtype_t dt, double* rtol, double* atol, double* floor_) {
  switch (dt) {
    case FCO_F32: *rtol = 1e-5; *atol = 1e-5; *floor_ = 1e-40; break;
    case FCO_F16: *rtol = 2e-3; *atol = 1e-3; *floor_ = 3.0e-8; break;
    default: *rtol = 1e-2; *atol = 4e-3; *floor_ = 1e-40; break;
  }
}

/* Wrong elements (printed, first few) across every rank; rows past the total must be poison
 * and the guard intact. */
size_t ga_check(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b) {
  size_t es = fco_dtype_size(c->dtype), N = (size_t)c->N, K = (size_t)c->K, bad = 0;
  double rtol, atol, floor_;
  tolerances(c->dtype, &rtol, &atol, &floor_);
  for (int s = 0; s < c->P; s++) {
    unsigned char* h = (unsigned char*)malloc(b->out_bytes[s] + T_GUARD);
    t_get(w->transport, ga_dev_of(w, s), h, b->out[s], b->out_bytes[s] + T_GUARD);
    size_t row = 0;
    for (int r = 0; r < c->P; r++) {
      int64_t arow = 0; /* row of r's A */
      for (int e = 0; e < c->E[r]; e++)
        for (int q = 0; q < c->P; q++) {
          int cnt = c->counts[r][e * c->P + q];
          if (q != s) {
            arow += cnt;
            continue;
          }
          const float* we = c->w[r] + (size_t)e * K * N;
          for (int i = 0; i < cnt; i++, arow++, row++) {
            const float* ar = c->a[r] + (size_t)arow * K;
            for (size_t n = 0; n < N; n++) {
              double ref = 0, mag = 0;
              for (size_t k = 0; k < K; k++) {
                double x = (double)ar[k] * (c->layout == FCO_W_NK ? we[n * K + k] : we[k * N + n]);
                ref += x;
                mag += fabs(x);
              }
              double got = t_get_elem(c->dtype, h, row * N + n);
              if (w->transport == FCO_TRANSPORT_CPU) {
                /* cpu: bit for bit src/cpu/gemm_alltoall.c's double sum (k ascending), rounded
                 * once to f32, then to the dtype (a float accumulator passed the tolerance:
                 * session 55's mutation audit) */
                unsigned char want[4];
                t_set_elem(c->dtype, want, 0, (float)ref);
                if (!memcmp(want, h + (row * N + n) * es, es)) continue;
                if (bad++ < 5)
                  printf("  cpu: rank %d out[%zu][%zu] = %.9g, the double sum rounds to %.9g\n",
                         s, row, n, got, t_get_elem(c->dtype, want, 0));
                continue;
              }
              if (fabs(got - ref) <= rtol * fabs(ref) + atol * mag + floor_) continue;
              if (bad++ < 5)
                printf("  rank %d out[%zu][%zu] (from rank %d expert %d row %d) = %.6g, want "
                       "%.6g\n", s, row, n, r, e, i, got, ref);
            }
          }
        }
    }
    for (size_t i = row * N * es; i < b->out_bytes[s]; i++)
      if (h[i] != T_POISON) {
        if (bad++ < 5) printf("  rank %d: byte %zu past the %zu received rows was written\n", s, i, row);
        break;
      }
    for (size_t i = 0; i < T_GUARD; i++)
      if (h[b->out_bytes[s] + i] != T_GUARD_BYTE) {
        if (bad++ < 5) printf("  rank %d: guard byte %zu after out was written\n", s, i);
        break;
      }
    free(h);
  }
  return bad;
}

/* Every output byte still poison, every guard intact. */
size_t ga_untouched(const t_world_t* w, const ga_case_t* c, const ga_bufs_t* b) {
  size_t bad = 0;
  for (int s = 0; s < c->P; s++) {
    unsigned char* h = (unsigned char*)malloc(b->out_bytes[s] + T_GUARD);
    t_get(w->transport, ga_dev_of(w, s), h, b->out[s], b->out_bytes[s] + T_GUARD);
    for (size_t i = 0; i < b->out_bytes[s]; i++) bad += h[i] != T_POISON;
    for (size_t i = 0; i < T_GUARD; i++) bad += h[b->out_bytes[s] + i] != T_GUARD_BYTE;
    free(h);
  }
  return bad;
}

/* Upload, poison, one call (impl, with or without the hints), sync: no error anywhere and every
 * rank's out equal to the reference; frees the case. */
void ga_run_checked(const t_world_t* w, ga_case_t* c, int impl, int hints) {
  ga_bufs_t b;
  ga_upload(w, c, &b);
  ASSERT_OK(ga_issue(w, c, &b, impl, hints, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(ga_check(w, c, &b), 0);
  ga_free_bufs(w, c, &b);
  ga_free_case(c);
}

/* A call that must be refused (r: what it returned): FCO_ERR_INVALID_ARGUMENT from the call or,
 * for device-side checks, from some rank's async error, and no byte of any out written. Frees the
 * case and destroys the world's communicators (unusable after a device-side error; destroy must
 * still work). */
void ga_expect_rejected(t_world_t* w, ga_case_t* c, ga_bufs_t* b, fco_result_t r) {
  t_sync(w);
  for (int q = 0; q < w->n && r == FCO_OK; q++) r = fco_comm_get_async_error(w->comms[q]);
  ASSERT_EQ(r, FCO_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(ga_untouched(w, c, b), 0);
  ga_free_bufs(w, c, b);
  ga_free_case(c);
  for (int q = 0; q < w->n; q++) ASSERT_OK(fco_comm_destroy(w->comms[q]));
}

void ga_refill_a(const t_world_t* w, ga_case_t* c, ga_bufs_t* b, uint64_t seed) {
  size_t es = fco_dtype_size(c->dtype);
  for (int r = 0; r < c->P; r++) {
    size_t na = (size_t)c->a_rows * c->K;
    void* h = malloc(na * es + 1);
    char tmp[4];
    for (size_t i = 0; i < na; i++) {
      seed = t_mix(seed);
      t_set_elem(c->dtype, tmp, 0, (float)((double)(seed >> 11) * (2.0 / 9007199254740992.0) - 1));
      c->a[r][i] = t_get_elem(c->dtype, tmp, 0);
      t_set_elem(c->dtype, h, i, c->a[r][i]);
    }
    t_put(w->transport, ga_dev_of(w, r), b->a[r], h, na * es);
    free(h);
  }
}

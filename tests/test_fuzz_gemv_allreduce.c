/*
 * test_fuzz_gemv_allreduce.c — fco_gemv_allreduce on random small problems, some of them
 * refused, against an oracle written from include/fco.h's contract: worlds of 1..3 ranks (cpu
 * transport), M 1..66 (above 64: FCO_ERR_UNSUPPORTED), N 1..40, each rank's K 1..8, bias or
 * not, every dtype, impls 0..3 and AUTO; in one problem in eight a rank that disagrees on M, N,
 * the dtype or whether a bias is given (FCO_ERR_INVALID_ARGUMENT on every rank).
 * Contract checked: a valid call → FCO_OK and y = Σ_r x_r · W_r^T (+ bias) on every rank, bit for
 * bit (small integer inputs: exact in every dtype); a refused one → the code, and no y written;
 * nothing written past a y (guard bytes) nor read outside an input (exact-size allocations).
 * Two builds (tests/common/fuzz.h): the suite's (FCO_FUZZ_ITERS problems, default 5000) and
 * libFuzzer's (`make fuzz`). cpu transport only (77 elsewhere).
 */
#include <math.h>

#include "fuzz.h"

#define MAXP T_FUZZ_MAX_RANKS
#define MAXN 40
#define MAXK 8

typedef struct {
  int M, N, K, bias;
  fco_dtype_t dt;
  void *x, *w, *b, *y; /* y: [M, N] + T_GUARD guard bytes */
} rank_t;

static int fuzz_one(const uint8_t* data, size_t size) {
  t_rd_t r = {data, size, 0};
  static const fco_dtype_t kDt[3] = {FCO_F32, FCO_F16, FCO_BF16};
  const int P = 1 + t_rd(&r, MAXP), M = 1 + t_rd(&r, 66), N = 1 + t_rd(&r, MAXN);
  const fco_dtype_t dt = kDt[t_rd(&r, 3)];
  const int bias = t_rd(&r, 2), impl = t_rd(&r, 5) - 1;
  rank_t rk[MAXP];
  for (int q = 0; q < P; q++)
    rk[q] = (rank_t){.M = M, .N = N, .K = 1 + t_rd(&r, MAXK), .bias = bias, .dt = dt};
  int odd = -1; /* the rank that disagrees */
  if (P > 1 && M <= 63 && t_rd(&r, 8) == 0) {
    rank_t* k = &rk[odd = t_rd(&r, P)];
    switch (t_rd(&r, 4)) {
      case 0: k->M++; break;
      case 1: k->N++; break;
      case 2: k->dt = dt == FCO_F32 ? FCO_BF16 : FCO_F32; break;
      default: k->bias = !k->bias; break;
    }
  }
  const fco_result_t expect = odd >= 0 ? FCO_ERR_INVALID_ARGUMENT
                              : M > FCO_GEMV_ALLREDUCE_MAX_M ? FCO_ERR_UNSUPPORTED
                                                            : FCO_OK;
  t_context("P=%d M=%d N=%d %s%s impl=%d, rank %d disagrees", P, M, N, fco_dtype_name(dt),
            bias ? " bias" : "", impl, odd);
  for (int q = 0; q < P; q++) {
    rank_t* k = &rk[q];
    const size_t es = fco_dtype_size(k->dt);
    k->x = t_fuzz_alloc((size_t)k->M * k->K * es);
    k->w = t_fuzz_alloc((size_t)k->N * k->K * es);
    k->b = k->bias ? t_fuzz_alloc((size_t)k->N * es) : NULL;
    for (int i = 0; i < k->M * k->K; i++) t_set_elem(k->dt, k->x, i, (float)(t_rd(&r, 5) - 2));
    for (int i = 0; i < k->N * k->K; i++) t_set_elem(k->dt, k->w, i, (float)(t_rd(&r, 5) - 2));
    for (int i = 0; k->b && i < k->N; i++) /* replicated: the same values on every rank (fco.h) */
      t_set_elem(k->dt, k->b, i, q && rk[0].b && i < rk[0].N ? t_get_elem(rk[0].dt, rk[0].b, i)
                                                          : (float)(t_rd(&r, 5) - 2));
    k->y = t_fuzz_out((size_t)k->M * k->N * es);
  }
  t_world_t* w = t_fuzz_world(P);
  fco_result_t res = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int q = 0; q < P; q++) {
    const rank_t* k = &rk[q];
    const fco_result_t rq = fco_gemv_allreduce(w->comms[q], k->x, k->w, k->b, k->y, k->M, k->N,
                                               k->K, k->dt, impl, NULL);
    if (res == FCO_OK) res = rq;
  }
  const fco_result_t end = fco_group_end();
  if (res == FCO_OK) res = end;
  ASSERT_RES(res, expect);
  float* want = (float*)t_fuzz_alloc((size_t)(M + 1) * (N + 1) * sizeof(float));
  for (int q = 0; q < P; q++) {
    const rank_t* k = &rk[q];
    const size_t n = (size_t)k->M * k->N;
    for (size_t i = 0; i < n; i++) {
      want[i] = NAN; /* refused: y untouched (poison) */
      if (expect != FCO_OK) continue;
      const size_t m = i / N, c = i % N;
      want[i] = bias ? t_get_elem(dt, rk[0].b, c) : 0.0f;
      for (int p = 0; p < P; p++)
        for (int kk = 0; kk < rk[p].K; kk++)
          want[i] += t_get_elem(dt, rk[p].x, m * rk[p].K + kk) *
                     t_get_elem(dt, rk[p].w, c * rk[p].K + kk);
    }
    t_fuzz_check_out(q, k->dt, k->y, want, n, (size_t)k->N);
  }
  free(want);
  for (int q = 0; q < P; q++) {
    free(rk[q].x);
    free(rk[q].w);
    free(rk[q].b);
    free(rk[q].y);
  }
  return expect != FCO_OK;
}

FCO_FUZZ_MAIN(fuzz_one, "gemv_allreduce")

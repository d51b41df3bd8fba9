/*
 * test_fuzz_gemm_alltoall.c — fco_gemm_alltoall on random small problems with random bad counts,
 * against an oracle written from include/fco.h's contract alone (not from src/cpu): worlds of
 * 1..3 ranks (cpu transport), 1..3 experts a rank (E_r differs), K and N 1..4, every dtype, both
 * weight layouts, impls 0, 1, 2 and AUTO, the host hints (counts_host, recv_rows_host) given or
 * not; counts 0..3 rows, and on a rank in six a negative count or a sum 1 or 2 past a_rows,
 * out_rows one short of what a rank receives in one problem in eight.
 * Contract checked: valid counts → FCO_OK, every out's rows (by source rank, then its experts,
 * row order kept) bit for bit (values are small integers: exact sums in every dtype) and its rows
 * past what it receives untouched; bad counts anywhere → FCO_ERR_INVALID_ARGUMENT and no out
 * written at all; nothing written past an out (guard bytes) nor read outside an input (exact-size
 * allocations: CI's sanitizer builds see it).
 * Two builds (tests/common/fuzz.h): the suite's, FCO_FUZZ_ITERS problems from the run's seed
 * (default 5000), and libFuzzer's (`make fuzz`; e.g. build/fuzz/fuzz_gemm_alltoall
 * -max_total_time=600). cpu transport only (77 elsewhere): on GPU transports bad counts are
 * found on the device and reported asynchronously.
 */
#include <math.h>

#include "fuzz.h"

#define MAXP T_FUZZ_MAX_RANKS
#define MAXE 3
#define MAXKN 4
#define MAXC 3 /* rows of one (expert, source) pair */

typedef struct {
  int E;
  int32_t counts[MAXE * MAXP]; /* [E][P] */
  int32_t recv[MAXP];          /* recv_rows_host of this rank: rows it receives from each s */
  void *a, *w, *out;           /* out: [out_rows, N] + T_GUARD guard bytes */
  int32_t* counts_buf;         /* the counts as the op reads them ("device" = host on cpu) */
  float* want;                 /* [out_rows, N]: the oracle, NaN where out must stay poison */
} rank_t;

static int fuzz_one(const uint8_t* data, size_t size) {
  t_rd_t r = {data, size, 0};
  static const fco_dtype_t kDt[3] = {FCO_F32, FCO_F16, FCO_BF16};
  const int P = 1 + t_rd(&r, MAXP), K = 1 + t_rd(&r, MAXKN), N = 1 + t_rd(&r, MAXKN);
  const fco_dtype_t dt = kDt[t_rd(&r, 3)];
  const int nk = t_rd(&r, 2), impl = t_rd(&r, 4) - 1, hint_c = t_rd(&r, 2), hint_r = t_rd(&r, 2);
  const size_t es = fco_dtype_size(dt);
  rank_t rk[MAXP];
  memset(rk, 0, sizeof rk);
  int bad = 0;
  int64_t a_rows = 0, need_out = 0;
  int64_t sum[MAXP];
  for (int q = 0; q < P; q++) {
    rank_t* k = &rk[q];
    k->E = 1 + t_rd(&r, MAXE);
    sum[q] = 0;
    for (int i = 0; i < k->E * P; i++) sum[q] += k->counts[i] = t_rd(&r, MAXC + 1);
    if (sum[q] > a_rows) a_rows = sum[q];
  }
  a_rows += t_rd(&r, 3); /* the capacity, the same on every rank */
  for (int q = 0; q < P; q++)
    if (t_rd(&r, 6) == 0) { /* a negative count, or one that takes the sum 1 or 2 past a_rows */
      int32_t* c = &rk[q].counts[t_rd(&r, rk[q].E * P)];
      *c = t_rd(&r, 2) ? -1 - t_rd(&r, 3) : *c + (int32_t)(a_rows - sum[q]) + 1 + t_rd(&r, 2);
      bad = 1;
    }
  for (int s = 0; s < P; s++) {
    int64_t got = 0;
    for (int q = 0; q < P; q++)
      for (int e = 0; e < rk[q].E; e++) got += rk[q].counts[e * P + s];
    for (int q = 0; q < P; q++) {
      int64_t from = 0;
      for (int e = 0; e < rk[q].E; e++) from += rk[q].counts[e * P + s];
      rk[s].recv[q] = (int32_t)from;
    }
    if (got > need_out) need_out = got;
  }
  int64_t out_rows = need_out + t_rd(&r, 3);
  if (!bad && need_out > 0 && t_rd(&r, 8) == 0) { /* one row short for the rank that gets most */
    out_rows = need_out - 1;
    bad = 1;
  }
  if (out_rows < 0) out_rows = 0;
  t_context("P=%d K=%d N=%d %s %s impl=%d hints %d/%d a_rows=%lld out_rows=%lld bad=%d", P, K,
            N, fco_dtype_name(dt), nk ? "nk" : "kn", impl, hint_c, hint_r, (long long)a_rows,
            (long long)out_rows, bad);
  for (int q = 0; q < P; q++) {
    rank_t* k = &rk[q];
    k->a = t_fuzz_alloc((size_t)a_rows * K * es);
    for (int64_t i = 0; i < a_rows * K; i++)
      t_set_elem(dt, k->a, (size_t)i, (float)(t_rd(&r, 5) - 2));
    k->w = t_fuzz_alloc((size_t)k->E * K * N * es);
    for (int64_t i = 0; i < (int64_t)k->E * K * N; i++)
      t_set_elem(dt, k->w, (size_t)i, (float)(t_rd(&r, 5) - 2));
    k->counts_buf = (int32_t*)t_fuzz_alloc((size_t)k->E * P * sizeof(int32_t));
    memcpy(k->counts_buf, k->counts, (size_t)k->E * P * sizeof(int32_t));
    k->out = t_fuzz_out((size_t)out_rows * N * es);
    k->want = (float*)t_fuzz_alloc((size_t)(out_rows ? out_rows : 1) * N * sizeof(float));
    for (int64_t i = 0; i < out_rows * N; i++) k->want[i] = NAN;
  }
  if (!bad) /* out_s: rank q's expert-e rows from s, for q = 0.., then e = 0.., order kept */
    for (int s = 0; s < P; s++) {
      int64_t row = 0;
      for (int q = 0; q < P; q++) {
        int64_t a_row = 0; /* rank q's first row of (expert e, source s) */
        for (int e = 0; e < rk[q].E; e++) {
          for (int x = 0; x < s; x++) a_row += rk[q].counts[e * P + x];
          const int c = rk[q].counts[e * P + s];
          for (int i = 0; i < c; i++, row++)
            for (int n = 0; n < N; n++) {
              float acc = 0;
              for (int kk = 0; kk < K; kk++) {
                const size_t wi = nk ? ((size_t)e * N + n) * K + kk : ((size_t)e * K + kk) * N + n;
                acc += t_get_elem(dt, rk[q].a, (size_t)(a_row + i) * K + kk) *
                       t_get_elem(dt, rk[q].w, wi);
              }
              rk[s].want[row * N + n] = acc;
            }
          for (int x = s; x < P; x++) a_row += rk[q].counts[e * P + x];
        }
      }
    }
  t_world_t* w = t_fuzz_world(P);
  /* with hints a rank may refuse its call at once (fco.h: then no op of the group is issued) */
  fco_result_t res = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int q = 0; q < P; q++) {
    const fco_result_t rq =
        fco_gemm_alltoall(w->comms[q], rk[q].a, a_rows, rk[q].w, nk ? FCO_W_NK : FCO_W_KN, rk[q].E,
                          rk[q].counts_buf, hint_c ? rk[q].counts : NULL,
                          hint_r ? rk[q].recv : NULL, rk[q].out, out_rows, K, N, dt, impl, NULL);
    if (res == FCO_OK) res = rq;
  }
  const fco_result_t end = fco_group_end();
  if (res == FCO_OK) res = end;
  ASSERT_RES(res, bad ? FCO_ERR_INVALID_ARGUMENT : FCO_OK);
  for (int q = 0; q < P; q++) {
    t_fuzz_check_out(q, dt, rk[q].out, rk[q].want, (size_t)out_rows * N, (size_t)N);
    free(rk[q].a);
    free(rk[q].w);
    free(rk[q].counts_buf);
    free(rk[q].out);
    free(rk[q].want);
  }
  return bad;
}

FCO_FUZZ_MAIN(fuzz_one, "gemm_alltoall")

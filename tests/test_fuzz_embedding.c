/*
 * test_fuzz_embedding.c — fco_embedding_alltoall on random small problems with random bad data,
 * against an oracle written from include/fco.h's contract alone (not from src/cpu): worlds of
 * 1..3 ranks (cpu transport), 0..2 tables a rank with 0..3 rows each, 0..3 samples a rank,
 * D 1..5, every dtype, both index types and poolings, weights or none, impls 0, 1 and AUTO;
 * offsets made as a CSR and then, on a rank in four, corrupted (negative, past num_indices,
 * decreasing), indices outside their table one time in sixteen.
 * Contract checked: the call returns FCO_ERR_INVALID_ARGUMENT (naming the rank and the op) exactly
 * when some rank's data is bad, else FCO_OK; either way every out is complete — a bad index is
 * skipped, a bag with bad offsets is empty (zeros), mean divides by the bag's length — bit for bit
 * (table values are small integers, weights halves: the sums are exact, and the one rounding to
 * the dtype is done by the oracle too); nothing is written past an out (guard bytes), nothing read
 * outside the inputs (each is its own exact-size allocation: the sanitizer builds of CI see it).
 *
 * Two builds (tests/common/fuzz.h): the suite's, FCO_FUZZ_ITERS problems from the run's seed
 * (default 5000), and libFuzzer's (`make fuzz`: clang, ASan + UBSan, the library's CPU-only
 * sources; e.g. `build/fuzz/fuzz_embedding -max_total_time=600`).
 * GPU transports report bad data asynchronously and the communicator must then be destroyed
 * (fco.h), a different contract: this test runs on the cpu transport only (77 elsewhere).
 */
#include <math.h>
#include <stdlib.h>

#include "fuzz.h"

#define MAXP T_FUZZ_MAX_RANKS
#define MAXT 2    /* tables a rank */
#define MAXB 3    /* samples a rank */
#define MAXROWS 3 /* rows a table */
#define MAXD 5
#define MAXBAG 3

typedef struct {
  int64_t rows[MAXT], nidx;
  void* weight;  /* [Σ rows, D] dtype */
  void* offsets; /* [T_r·B + 1] index type */
  void* indices; /* [nidx] */
  float* psw;    /* [nidx] or NULL */
  void* out;     /* [b_s, T, D] dtype + T_GUARD guard bytes */
  float* want;   /* [b_s, T, D] the oracle, already rounded to the dtype */
  int bad;       /* this rank's data has bad offsets or a bad index in a well-formed bag */
} rank_t;


static int64_t ld(const void* p, int i64, int64_t i) {
  return i64 ? ((const int64_t*)p)[i] : (int64_t)((const int32_t*)p)[i];
}
static void st(void* p, int i64, int64_t i, int64_t v) {
  if (i64) ((int64_t*)p)[i] = v;
  else ((int32_t*)p)[i] = (int32_t)v;
}

/* A float after one rounding to dtype (the library rounds fp32 once, to nearest even). */
static float rounded(fco_dtype_t dt, float v) {
  return dt == FCO_F16 ? t_half_to_f32(t_f32_to_half(v))
         : dt == FCO_BF16 ? t_bf16_to_f32(t_f32_to_bf16(v))
                          : v;
}

/* One problem from the bytes, run and checked; returns whether it had bad data. */
static int fuzz_one(const uint8_t* data, size_t size) {
  t_rd_t r = {data, size, 0};
  const int P = 1 + t_rd(&r, MAXP);
  int32_t tpr[MAXP];
  int64_t bpr[MAXP];
  int T = 0, B = 0;
  for (int q = 0; q < P; q++) T += tpr[q] = t_rd(&r, MAXT + 1);
  if (T == 0) T = tpr[0] = 1;
  for (int q = 0; q < P; q++) B += (int)(bpr[q] = t_rd(&r, MAXB + 1));
  if (B == 0) B = (int)(bpr[0] = 1);
  static const fco_dtype_t kDt[3] = {FCO_F32, FCO_F16, FCO_BF16};
  const int D = 1 + t_rd(&r, MAXD);
  const fco_dtype_t dt = kDt[t_rd(&r, 3)];
  const int i64 = t_rd(&r, 2), mean = t_rd(&r, 2), weighted = t_rd(&r, 2), impl = t_rd(&r, 3) - 1;
  const size_t es = fco_dtype_size(dt), isz = i64 ? 8 : 4;
  t_context("P=%d T=%d B=%d D=%d %s i%d %s%s impl=%d", P, T, B, D, fco_dtype_name(dt),
            i64 ? 64 : 32, mean ? "mean" : "sum", weighted ? " weighted" : "", impl);
  int toff[MAXP + 1] = {0}, bstart[MAXP + 1] = {0};
  for (int q = 0; q < P; q++) {
    toff[q + 1] = toff[q] + tpr[q];
    bstart[q + 1] = bstart[q] + (int)bpr[q];
  }
  rank_t rk[MAXP];
  memset(rk, 0, sizeof rk);
  for (int q = 0; q < P; q++) { /* outs, poisoned, and their oracle (zeros until pooled) */
    const size_t n = (size_t)bpr[q] * T * D;
    if (n) rk[q].out = t_fuzz_out(n * es);
    rk[q].want = (float*)calloc(n ? n : 1, sizeof(float));
  }
  int any_bad = 0;
  for (int q = 0; q < P; q++) {
    rank_t* k = &rk[q];
    const int Tr = tpr[q];
    int64_t nrows = 0, row0[MAXT + 1] = {0};
    for (int t = 0; t < Tr; t++) {
      nrows += k->rows[t] = t_rd(&r, MAXROWS + 1);
      row0[t + 1] = nrows;
    }
    k->weight = t_fuzz_alloc((size_t)nrows * D * es);
    for (int64_t i = 0; i < nrows * D; i++)
      t_set_elem(dt, k->weight, (size_t)i, (float)(t_rd(&r, 9) - 4));
    /* a CSR of bag lengths 0..MAXBAG, each index in its table (one in eight outside it) */
    const int64_t nbags = (int64_t)Tr * B;
    int64_t len[MAXT * MAXP * MAXB], owner[MAXT * MAXP * MAXB * MAXBAG];
    k->nidx = 0;
    for (int64_t g = 0; g < nbags; g++) {
      len[g] = t_rd(&r, MAXBAG + 1);
      for (int64_t j = 0; j < len[g]; j++) owner[k->nidx + j] = g / B;
      k->nidx += len[g];
    }
    k->offsets = Tr ? t_fuzz_alloc((size_t)(nbags + 1) * isz) : NULL;
    if (Tr) {
      int64_t o = 0;
      for (int64_t g = 0; g <= nbags; g++) {
        st(k->offsets, i64, g, o);
        if (g < nbags) o += len[g];
      }
      for (int m = t_rd(&r, 4) == 0 ? t_rd(&r, 3) + 1 : 0; m > 0; m--) { /* corruptions */
        const int64_t g = t_rd(&r, (int)nbags + 1);
        const int64_t v = ld(k->offsets, i64, g);
        switch (t_rd(&r, 4)) {
          case 0: st(k->offsets, i64, g, -1 - t_rd(&r, 3)); break;
          case 1: st(k->offsets, i64, g, k->nidx + 1 + t_rd(&r, 3)); break;
          case 2: st(k->offsets, i64, g, t_rd(&r, (int)k->nidx + 1)); break;
          default: st(k->offsets, i64, g, v - 1 - t_rd(&r, 2)); break;
        }
      }
    }
    k->indices = t_fuzz_alloc((size_t)k->nidx * isz);
    k->psw = weighted ? (float*)t_fuzz_alloc((size_t)k->nidx * sizeof(float)) : NULL;
    for (int64_t j = 0; j < k->nidx; j++) {
      const int64_t rows = k->rows[owner[j]];
      const int64_t v = t_rd(&r, 16) == 0 ? (t_rd(&r, 2) ? rows + t_rd(&r, 2) : -1 - t_rd(&r, 2))
                        : rows > 0     ? t_rd(&r, (int)rows)
                                       : 0; /* no rows: every index is outside */
      st(k->indices, i64, j, v);
      if (k->psw) k->psw[j] = 0.5f * (float)(t_rd(&r, 5) - 2);
    }
    /* the oracle: fco.h's pooling of every bag of rank q into its destination's out */
    for (int t = 0; t < Tr; t++)
      for (int b = 0; b < B; b++) {
        const int64_t g = (int64_t)t * B + b;
        const int64_t lo = ld(k->offsets, i64, g), hi = ld(k->offsets, i64, g + 1);
        int s = 0;
        while (b >= bstart[s + 1]) s++;
        float* acc = rk[s].want + ((size_t)(b - bstart[s]) * T + toff[q] + t) * D;
        if (lo < 0 || hi < lo || hi > k->nidx) {
          k->bad = 1;
          continue;
        }
        for (int64_t j = lo; j < hi; j++) {
          const int64_t idx = ld(k->indices, i64, j);
          if (idx < 0 || idx >= k->rows[t]) {
            k->bad = 1;
            continue;
          }
          for (int d = 0; d < D; d++) {
            const float v = t_get_elem(dt, k->weight, (size_t)((row0[t] + idx) * D + d));
            acc[d] = k->psw ? fmaf(k->psw[j], v, acc[d]) : acc[d] + v;
          }
        }
        if (mean && hi > lo)
          for (int d = 0; d < D; d++) acc[d] = acc[d] / (float)(hi - lo);
      }
    any_bad |= k->bad;
  }
  t_world_t* w = t_fuzz_world(P);
  ASSERT_OK(fco_group_start());
  for (int q = 0; q < P; q++)
    ASSERT_OK(fco_embedding_alltoall(w->comms[q], rk[q].weight, tpr[q] ? rk[q].rows : NULL, tpr,
                                     bpr, D, dt, rk[q].offsets, rk[q].indices, rk[q].nidx,
                                     i64 ? FCO_EMB_INDEX_I64 : FCO_EMB_INDEX_I32, rk[q].psw,
                                     mean ? FCO_EMB_POOL_MEAN : FCO_EMB_POOL_SUM, rk[q].out, impl,
                                     NULL));
  const fco_result_t res = fco_group_end();
  if (any_bad) {
    ASSERT_RES(res, FCO_ERR_INVALID_ARGUMENT);
    ASSERT_MSG(w->comms[0], "fco_embedding_alltoall");
    ASSERT_MSG(w->comms[0], "rank");
  } else {
    ASSERT_RES(res, FCO_OK);
  }
  for (int q = 0; q < P; q++) {
    const size_t n = (size_t)bpr[q] * T * D;
    for (size_t i = 0; i < n; i++) rk[q].want[i] = rounded(dt, rk[q].want[i]);
    if (n) t_fuzz_check_out(q, dt, rk[q].out, rk[q].want, n, (size_t)T * D);
    free(rk[q].weight);
    free(rk[q].offsets);
    free(rk[q].indices);
    free(rk[q].psw);
    free(rk[q].out);
    free(rk[q].want);
  }
  return any_bad;
}

FCO_FUZZ_MAIN(fuzz_one, "embedding_alltoall")

/*
 * test_random_shapes.c — every operator on random valid shapes, every impl, against the
 * fixtures' references: the operator tests sweep fixed grids (gemv: M ∈ {1, 3, 16, 64}, N and
 * K ∈ {1, 7, 33, 1000}; gemm and embedding: ragged counts on a few chosen K, N and D; allreduce:
 * nine counts), the fuzz tests (test_fuzz_*.c) random problems of a few elements on the cpu
 * transport only; this one draws whole shapes at random on every transport, so the GPU kernels
 * meet sizes no grid names (tile remainders, row lengths off the vector width, per-rank K of any
 * residue, M in every kernel range).
 *   P = 1..FCO_TEST_MAX_RANKS (default 4); per world and operator FCO_RANDOM_SHAPES problems
 *   (default 16, 6 with FCO_TEST_QUICK=1), each with a fresh seed (printed in the context:
 *   FCO_TEST_SEED reproduces the run):
 *   - fco_allreduce: count 1..2^21 log-uniform, a dtype, impl 0, 1 or AUTO, in place or not:
 *     t_ar_check (exact sums of small integers, bit-identical on every rank, guards, inputs);
 *   - fco_gemv_allreduce: M 1..64, N 1..8192 and K 1..4608 log-uniform (K split unevenly over
 *     the ranks), a dtype, bias or not, impl 0..3 or AUTO: gemv_check (float64 reference, every
 *     rank's y bit-identical to rank 0's, guard bytes);
 *   - fco_gemm_alltoall: E_r 1..3, counts ragged with zero segments up to a random bound (1..600
 *     rows), K and N 1..2048 log-uniform, either weight layout, a dtype, impl 0..2 or AUTO, host
 *     hints or not (nccl impl 0: always), at times symmetric outs: ga_check (float64 reference,
 *     rows past the total still poison, guards);
 *   - fco_embedding_alltoall: D 1..512 log-uniform, a batch bound 0..2048, long bags at times,
 *     index type, weights, pooling, exact integers or real values, impl 0, 1 or AUTO, at times
 *     symmetric outs or every weight and out off 16-byte alignment by one element: ea_prob_check
 *     (bit for bit on exact values, else float64 by relative error).
 *   Each problem's work is bounded (GPU transports M·N·K ≤ 2·10^7, cpu 2·10^6) so the host
 *   references stay short; the draws keep their shape and shrink the largest dimension.
 *   make test   or   build/tests/test_random_shapes   (FCO_TRANSPORT=cpu|local|nccl)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ea_fixture.h"
#include "ga_fixture.h"
#include "gemv_fixture.h"

static uint64_t rs_state;
static uint64_t rs_next(void) { return rs_state = t_mix(rs_state + 0x9E3779B97F4A7C15ull); }
/* uniform in [lo, hi] */
static int64_t rs_in(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rs_next() % (uint64_t)(hi - lo + 1));
}
/* log-uniform in [1, hi]: small and large sizes alike */
static int64_t rs_log(int64_t hi) {
  const double u = (double)(rs_next() >> 11) / 9007199254740992.0;
  int64_t v = (int64_t)floor(exp(u * log((double)hi + 1)));
  return v < 1 ? 1 : v > hi ? hi : v;
}

/* The work bound of one problem (multiply-adds of the host reference). */
static double work_cap(fco_transport_t t) { return t_is_gpu(t) ? 2e7 : 2e6; }

#define AR_MAX_COUNT ((size_t)1 << 21)

static void allreduce_random(const t_world_t* w, int n) {
  static const int kImpls[] = {0, 1, FCO_IMPL_AUTO};
  t_ar_bufs_t b;
  t_ar_alloc(w, &b, AR_MAX_COUNT);
  for (int i = 0; i < n; i++) {
    const uint64_t seed = t_next_seed();
    rs_state = seed;
    const size_t count = (size_t)rs_log((int64_t)AR_MAX_COUNT);
    const fco_dtype_t dt = gemv_dtypes[rs_in(0, 2)];
    const int impl = kImpls[rs_in(0, 2)], inplace = (int)rs_in(0, 1);
    t_context("P=%d allreduce count=%zu %s impl=%d %s seed=0x%016llx", w->n, count,
              fco_dtype_name(dt), impl, inplace ? "in place" : "out of place",
              (unsigned long long)seed);
    t_ar_prepare(w, &b, count, dt, inplace, seed);
    ASSERT_OK(t_ar_run(w, &b, impl));
    t_sync(w);
    ASSERT_EQ(t_ar_check(w, &b, seed), 0);
  }
  t_ar_free(w, &b);
}

static void gemv_random(const t_world_t* w, gemv_bufs_t* b, int n) {
  static const int kImpls[] = {0, 1, 2, 3, FCO_IMPL_AUTO};
  for (int i = 0; i < n; i++) {
    const uint64_t seed = t_next_seed();
    rs_state = seed;
    size_t M = (size_t)rs_in(1, GEMV_MAX_M), N = (size_t)rs_log(GEMV_MAX_N);
    size_t kt = (size_t)rs_log(GEMV_MAX_KT);
    /* every rank's K_r · N within the fixture's room (K_r ≤ kt), the work within the cap */
    while (N * kt > GEMV_MAX_NK || (double)M * N * kt > work_cap(w->transport)) {
      if (kt >= N && kt > 1) kt = kt * 3 / 4;
      else if (N > 1) N = N * 3 / 4;
      else M = M > 1 ? M / 2 : 1;
    }
    const fco_dtype_t dt = gemv_dtypes[rs_in(0, 2)];
    const int bias = (int)rs_in(0, 1), impl = kImpls[rs_in(0, 4)];
    t_context("P=%d gemv_allreduce M=%zu N=%zu K=%zu %s%s impl=%d seed=0x%016llx", w->n, M, N,
              kt, fco_dtype_name(dt), bias ? " bias" : "", impl, (unsigned long long)seed);
    gemv_one_call(w, b, M, N, kt, dt, bias, impl);
  }
}

static void gemm_random(const t_world_t* w, int n) {
  static const int kImpls[] = {0, 1, 2, FCO_IMPL_AUTO};
  const int P = w->n;
  for (int i = 0; i < n; i++) {
    const uint64_t seed = t_next_seed();
    rs_state = seed;
    ga_case_t c;
    memset(&c, 0, sizeof c);
    c.P = P;
    c.K = (int)rs_log(2048);
    c.N = (int)rs_log(2048);
    c.layout = (int)rs_in(0, 1);
    c.dtype = gemv_dtypes[rs_in(0, 2)];
    const int64_t most = rs_log(600); /* the largest count of this problem */
    const int zeros = (int)rs_in(0, 50); /* percent of zero segments */
    int64_t rows = 0;
    for (int r = 0; r < P; r++) {
      c.E[r] = (int)rs_in(1, GA_MAXE);
      c.counts[r] = (int32_t*)calloc((size_t)c.E[r] * P, sizeof(int32_t));
      ASSERT_NOT_NULL(c.counts[r]);
      for (int k = 0; k < c.E[r] * P; k++) {
        c.counts[r][k] = rs_in(0, 99) < zeros ? 0 : (int32_t)rs_in(0, most);
        rows += c.counts[r][k];
      }
    }
    while ((double)rows * c.K * c.N > work_cap(w->transport) * P) {
      if (c.K >= c.N) c.K = c.K > 1 ? c.K * 3 / 4 : 1;
      else c.N = c.N > 1 ? c.N * 3 / 4 : 1;
      if (c.K == 1 && c.N == 1) break;
    }
    const int slack = (int)rs_in(0, 3), impl = kImpls[rs_in(0, 3)];
    int hints = (int)rs_in(0, 1);
    if (w->transport == FCO_TRANSPORT_NCCL && impl == 0) hints = 1; /* fco.h: or a thread a rank */
    ga_sym_mask = rs_in(0, 3) == 0 ? (unsigned)rs_in(1, (1 << P) - 1) : 0u;
    ga_finish_case(&c, rs_next(), slack);
    t_context("P=%d gemm_alltoall K=%d N=%d %s %s rows %lld (counts <= %lld, %d%% zero) impl=%d "
              "hints=%d sym=0x%x seed=0x%016llx",
              P, c.K, c.N, c.layout ? "W[N,K]" : "W[K,N]", fco_dtype_name(c.dtype),
              (long long)rows, (long long)most, zeros, impl, hints, ga_sym_mask,
              (unsigned long long)seed);
    ga_run_checked(w, &c, impl, hints);
    ga_sym_mask = 0;
  }
}

static void embedding_random(const t_world_t* w, int n) {
  static const int kImpls[] = {0, 1, FCO_IMPL_AUTO};
  static const fco_emb_index_t kIdx[] = {FCO_EMB_INDEX_I32, FCO_EMB_INDEX_I64};
  static const fco_emb_pooling_t kPool[] = {FCO_EMB_POOL_SUM, FCO_EMB_POOL_MEAN};
  const int P = w->n;
  for (int i = 0; i < n; i++) {
    const uint64_t seed = t_next_seed();
    rs_state = seed;
    const fco_dtype_t dt = gemv_dtypes[rs_in(0, 2)];
    int64_t D = rs_log(512), bmax = rs_in(0, 3) ? rs_log(2048) : 0;
    ea_long_bags = rs_in(0, 3) == 0 ? rs_log(400) : 0;
    /* rows pooled ≈ P · T_r ≤ 3 · b_s · bag (≤ 6, long ones 1 in 8), each D elements */
    const double bag = 3.0 + (double)ea_long_bags / 8.0;
    while (D > 1 && (double)P * 3 * (bmax ? bmax : 6) * P * bag * D > work_cap(w->transport))
      D = D * 3 / 4;
    while (bmax > 1 && (double)P * 3 * bmax * P * bag * D > work_cap(w->transport))
      bmax = bmax * 3 / 4;
    const fco_emb_index_t it = kIdx[rs_in(0, 1)];
    const int weighted = (int)rs_in(0, 1), real = rs_in(0, 3) == 0, impl = kImpls[rs_in(0, 2)];
    const fco_emb_pooling_t pool = kPool[rs_in(0, 1)];
    const int layout = (int)rs_in(0, 5); /* 0: symmetric outs, 1: off alignment, else plain */
    ea_sym_mask = layout == 0 ? (unsigned)rs_in(1, (1 << P) - 1) : 0u;
    ea_shift_rank = -1;
    ea_shift_bytes = layout == 1 ? fco_dtype_size(dt) : 0;
    ea_prob_t p;
    const uint64_t pseed = rs_next();
    ea_prob_make_shape(&p, P, D, dt, it, weighted, pool, real, pseed, bmax, NULL, NULL);
    char what[160];
    snprintf(what, sizeof what,
             "random shape (b_s <= %lld, long bags %lld, sym 0x%x, shift %zu; draw seed "
             "0x%016llx)",
             (long long)bmax, (long long)ea_long_bags, ea_sym_mask, ea_shift_bytes,
             (unsigned long long)seed);
    ea_describe(&p, impl, pseed, what);
    ea_run_checked(w, &p, impl);
    ea_prob_free(w, &p);
    ea_sym_mask = 0;
    ea_shift_bytes = 0;
    ea_long_bags = 0;
  }
}

static void body(const t_world_t* w, gemv_bufs_t* b, void* arg) {
  const int n = *(const int*)arg;
  allreduce_random(w, n);
  gemv_random(w, b, n);
  gemm_random(w, n);
  embedding_random(w, n);
}

int main(void) {
  t_seed_init();
  const fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int n = (int)fco_env_int("FCO_RANDOM_SHAPES", t_quick() ? 6 : 16);
  if (n < 0) n = 0;
  const int max = t_test_max_ranks(t);
  gemv_each_world(t, max, body, &n);
  return t_pass(t, max, t_test_rank_cap());
}

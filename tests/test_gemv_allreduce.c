/*
 * test_gemv_allreduce.c — fco_gemv_allreduce: y = Σ_r x_r · W_r^T (+ bias) on every rank.
 *   1..4 ranks; M ∈ {1, 3, 16, 64}, N and K ∈ {1, 7, 33, 1000} (K split unevenly across ranks:
 *   rank r gets about (r+1)/Σ of it); f32 / f16 / bf16; bias and no bias; impls 0..3, AUTO.
 *   Every output is poisoned first, inputs are fresh random values per call (seeded, printed),
 *   the result is compared with a float64 reference of the dtype-rounded inputs by
 *   |y − ref| ≤ tol · (Σ_k |x·w| + |bias|) (+ 2^-24 for f16 subnormals), tol 1e-5 (f32) /
 *   1e-2 (f16, bf16); every rank's y
 *   must be bit-identical to rank 0's and nothing may be written past y's end.
 *   Then back-to-back calls without a sync (epochs), bad arguments with their codes and
 *   messages (nothing written; also tuning knobs set to values no kernel exists for:
 *   FCO_GEMV_GROUP, FCO_GEMV_SPLIT), a mismatch of M across ranks, and on GPU transports a CUDA
 *   graph replayed 100 times and FCO_CHECK_ARGS=1 (on nccl also the device-side mismatch).
 *   GPU transports also run the LL one-shot (FCO_GEMV_AR_LL=1, impl 1 and AUTO): a sweep of
 *   M (up to 17: the fallback), N, K; y bit-identical to the plain one-shot's with fp32 LL
 *   words (FCO_GEMV_LL_FP32=1; by default bf16 / f16 partials travel rounded to the dtype,
 *   checked against the reference and across ranks); calls whose LL half holds stale words of
 *   earlier LL calls of other shapes / inputs, with other ops (gemv impl 0/1/2/3,
 *   fco_allreduce) issued in between without a sync; back-to-back LL calls of
 *   changing shapes; a CUDA graph; FCO_CHECK_ARGS; a silent peer (timeout, not a hang).
 *   FCO_TEST_LL=only runs just that part (GPU transports; 77 = skip elsewhere).
 *   GPU transports also run the grouped tiles of M 17..64 (group_tests: every FCO_GEMV_GROUP
 *   value, K_r up to ~4600 so the cp.async ring wraps, K off the vector path, partial groups,
 *   split groups (FCO_GEMV_SPLIT auto, 1, 2, 3; slices left empty by a short K));
 *   FCO_TEST_GROUP=only runs just that part.
 *   Every transport runs the chain: a call that reads the previous call's y (not yet synced)
 *   as its x and W. GPU transports then repeat much of the above with FCO_GEMV_PDL=1
 *   (programmatic dependent launch + W prefetch, pdl_tests): every fused kernel family, the
 *   prefetch knob's edges, back-to-back calls with PDL switched per call and among other ops,
 *   the chain eagerly and captured in CUDA graphs (a programmatic edge into a data dependency),
 *   graphs of single calls, FCO_CHECK_ARGS. FCO_TEST_PDL=only runs just that part (the chain
 *   alone on cpu).
 *   make test   or   build/tests/test_gemv_allreduce   (FCO_TRANSPORT=cpu|local|nccl)
 * FCO_TEST_SEED reproduces a run; FCO_TEST_QUICK=1 makes the loops shorter.
 */
#include <math.h>
#include <stdlib.h>

#include "test.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_M 64
#define MAX_N 1000
#define MAX_KT 4608 /* K before the split (the grouped tiles' tests; the sweeps stay ≤ 1000) */

static const size_t kMs[] = {1, 3, 16, 64};
static const size_t kNs[] = {1, 7, 33, 1000};
static const size_t kKs[] = {1, 7, 33, 1000};
static const int kImpls[] = {0, 1, 2, 3, FCO_IMPL_AUTO};
static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};

typedef struct {
  fco_transport_t t;
  int P;
  void *x[T_MAX_RANKS], *w[T_MAX_RANKS], *bias[T_MAX_RANKS], *y[T_MAX_RANKS];
  /* host copies of the inputs, as floats rounded to the dtype */
  float *hx[T_MAX_RANKS], *hw[T_MAX_RANKS], *hb;
  unsigned char* hy; /* one rank's y + guard */
  unsigned char* hy0;
  size_t M, N, K[T_MAX_RANKS];
  fco_dtype_t dt;
  int has_bias;
} bufs_t;

static size_t x_bytes(void) { return (size_t)MAX_M * MAX_KT * 4 + T_GUARD; }
static size_t w_bytes(void) { return (size_t)MAX_N * MAX_KT * 4 + T_GUARD; }
static size_t y_bytes(void) { return (size_t)MAX_M * MAX_N * 4 + T_GUARD; }

static void bufs_alloc(bufs_t* b, const t_world_t* w) {
  memset(b, 0, sizeof *b);
  b->t = w->transport;
  b->P = w->n;
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(b->t, r);
    b->x[r] = t_alloc(b->t, d, x_bytes());
    b->w[r] = t_alloc(b->t, d, w_bytes());
    b->bias[r] = t_alloc(b->t, d, (size_t)MAX_N * 4 + T_GUARD);
    b->y[r] = t_alloc(b->t, d, y_bytes());
    b->hx[r] = (float*)malloc((size_t)MAX_M * MAX_KT * 4);
    b->hw[r] = (float*)malloc((size_t)MAX_N * MAX_KT * 4);
    ASSERT_NOT_NULL(b->hx[r]);
    ASSERT_NOT_NULL(b->hw[r]);
  }
  b->hb = (float*)malloc((size_t)MAX_N * 4);
  b->hy = (unsigned char*)malloc(y_bytes());
  b->hy0 = (unsigned char*)malloc(y_bytes());
  ASSERT_NOT_NULL(b->hb);
  ASSERT_NOT_NULL(b->hy);
  ASSERT_NOT_NULL(b->hy0);
}

static void bufs_free(bufs_t* b) {
  for (int r = 0; r < b->P; r++) {
    int d = t_rank_device(b->t, r);
    t_free(b->t, d, b->x[r]);
    t_free(b->t, d, b->w[r]);
    t_free(b->t, d, b->bias[r]);
    t_free(b->t, d, b->y[r]);
    free(b->hx[r]);
    free(b->hw[r]);
  }
  free(b->hb);
  free(b->hy);
  free(b->hy0);
}

/* Uniform in [-1, 1), rounded to the dtype (the reference uses the rounded value). */
static float rnd(uint64_t* s, fco_dtype_t dt) {
  *s = t_mix(*s);
  float v = (float)((double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
  if (dt == FCO_F16) return t_half_to_f32(t_f32_to_half(v));
  if (dt == FCO_BF16) return t_bf16_to_f32(t_f32_to_bf16(v));
  return v;
}

/* Upload n floats as dtype, followed by the guard pattern. */
static void upload(const bufs_t* b, int r, void* dst, const float* src, size_t n) {
  size_t es = fco_dtype_size(b->dt);
  unsigned char* tmp = (unsigned char*)malloc(n * es + T_GUARD);
  ASSERT_NOT_NULL(tmp);
  for (size_t i = 0; i < n; i++) t_set_elem(b->dt, tmp, i, src[i]);
  memset(tmp + n * es, T_IN_GUARD_BYTE, T_GUARD);
  t_put(b->t, t_rank_device(b->t, r), dst, tmp, n * es + T_GUARD);
  free(tmp);
}

/* K split unevenly: rank r gets about (r+1)/Σ of kt, at least 1. */
static void split_k(size_t kt, int P, size_t* K) {
  size_t wsum = (size_t)P * (P + 1) / 2, used = 0;
  if (kt < (size_t)P) kt = (size_t)P;
  for (int r = 0; r < P; r++) {
    K[r] = r == P - 1 ? kt - used : kt * (size_t)(r + 1) / wsum;
    if (K[r] < 1) K[r] = 1;
    if (r < P - 1 && used + K[r] > kt - (size_t)(P - 1 - r)) K[r] = 1;
    used += K[r];
  }
}

/* The largest K ≤ limit (vec_kt: 1000) whose split (split_k) gives every rank a multiple of 8: K_r · esize
 * % 16 == 0 in every dtype, so every rank takes the vector path (and the PDL prefetch). */
static size_t vec_kt_le(int P, size_t limit) {
  size_t unit = 8 * (size_t)P * (P + 1) / 2;
  return unit * (limit / unit);
}
static size_t vec_kt(int P) { return vec_kt_le(P, 1000); }

/* Fresh inputs, poisoned outputs (and their guards). */
static void prepare(bufs_t* b, size_t M, size_t N, size_t kt, fco_dtype_t dt, int has_bias,
                    uint64_t seed) {
  b->M = M;
  b->N = N;
  b->dt = dt;
  b->has_bias = has_bias;
  split_k(kt, b->P, b->K);
  uint64_t s = seed;
  for (int r = 0; r < b->P; r++) {
    for (size_t i = 0; i < M * b->K[r]; i++) b->hx[r][i] = rnd(&s, dt);
    for (size_t i = 0; i < N * b->K[r]; i++) b->hw[r][i] = rnd(&s, dt);
  }
  for (size_t n = 0; n < N; n++) b->hb[n] = has_bias ? rnd(&s, dt) : 0.f;
  size_t es = fco_dtype_size(dt);
  for (int r = 0; r < b->P; r++) {
    int d = t_rank_device(b->t, r);
    upload(b, r, b->x[r], b->hx[r], M * b->K[r]);
    upload(b, r, b->w[r], b->hw[r], N * b->K[r]);
    upload(b, r, b->bias[r], b->hb, N);
    t_memset(b->t, d, b->y[r], T_POISON, M * N * es);
    t_memset(b->t, d, (char*)b->y[r] + M * N * es, T_GUARD_BYTE, T_GUARD);
  }
}

static fco_result_t issue(const t_world_t* w, const bufs_t* b, int impl, void* const* streams) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    fco_result_t e = fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r],
                                        b->has_bias ? b->bias[r] : NULL, b->y[r], b->M, b->N,
                                        b->K[r], b->dt, impl, streams ? streams[r] : NULL);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* Compare every rank's y with the float64 reference; returns wrong elements (prints a few). */
static size_t check(const t_world_t* w, bufs_t* b) {
  size_t M = b->M, N = b->N, es = fco_dtype_size(b->dt), wrong = 0;
  double tol = b->dt == FCO_F32 ? 1e-5 : 1e-2;
  /* f16 results below 2^-14 are subnormal: spacing 2^-24, whatever their magnitude. */
  double abs_tol = b->dt == FCO_F16 ? 0x1p-24 : 1e-30;
  for (int r = 0; r < w->n; r++) {
    t_get(b->t, t_rank_device(b->t, r), b->hy, b->y[r], M * N * es + T_GUARD);
    for (size_t i = 0; i < T_GUARD; i++)
      if (b->hy[M * N * es + i] != T_GUARD_BYTE) {
        printf("rank %d: guard byte %zu after y changed to 0x%02x\n", r, i, b->hy[M * N * es + i]);
        wrong++;
        break;
      }
    if (r == 0) {
      memcpy(b->hy0, b->hy, M * N * es);
    } else if (memcmp(b->hy0, b->hy, M * N * es)) {
      for (size_t i = 0; i < M * N; i++)
        if (memcmp(b->hy0 + i * es, b->hy + i * es, es)) {
          printf("rank %d: y[%zu] = %g differs from rank 0's %g (must be bit-identical)\n", r, i,
                 t_get_elem(b->dt, b->hy, i), t_get_elem(b->dt, b->hy0, i));
          break;
        }
      wrong++;
    }
  }
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      double ref = b->hb[n], mag = fabs(b->hb[n]);
      for (int r = 0; r < w->n; r++) {
        const float* xr = b->hx[r] + m * b->K[r];
        const float* wr = b->hw[r] + n * b->K[r];
        for (size_t k = 0; k < b->K[r]; k++) {
          double p = (double)xr[k] * (double)wr[k];
          ref += p;
          mag += fabs(p);
        }
      }
      double got = t_get_elem(b->dt, b->hy0, m * N + n);
      if (fabs(got - ref) <= tol * mag + abs_tol) continue;
      if (wrong++ < 5)
        printf("y[%zu][%zu] = %.8g, want %.8g (|err| %.3g > %.1g x %.4g)\n", m, n, got, ref,
               fabs(got - ref), tol, mag);
    }
  return wrong;
}

static void one_call(const t_world_t* w, bufs_t* b, size_t M, size_t N, size_t kt, fco_dtype_t dt,
                     int has_bias, int impl) {
  uint64_t seed = t_next_seed();
  const char* ll = getenv("FCO_GEMV_AR_LL");
  const char* pdl = getenv("FCO_GEMV_PDL");
  const char* pf = getenv("FCO_GEMV_PDL_PREFETCH");
  t_context("P=%d M=%zu N=%zu K=%zu %s %s impl=%d%s%s%s%s seed=0x%016llx", w->n, M, N, kt,
            fco_dtype_name(dt), has_bias ? "bias" : "no bias", impl,
            ll && atoi(ll) > 0 ? " LL" : "", pdl && atoi(pdl) <= 0 ? " PDL off" : " PDL (GPUs)",
            pf ? " prefetch=" : "", pf ? pf : "", (unsigned long long)seed);
  prepare(b, M, N, kt, dt, has_bias, seed);
  ASSERT_OK(issue(w, b, impl, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0);
}

/* Every (M, N, K) with every impl; dtype and bias rotate so each meets every impl. */
static void sweep(const t_world_t* w, bufs_t* b) {
  unsigned k = 0;
  for (size_t mi = 0; mi < 4; mi++)
    for (size_t ni = 0; ni < 4; ni++)
      for (size_t ki = 0; ki < 4; ki++)
        for (int ii = 0; ii < 5; ii++, k++)
          one_call(w, b, kMs[mi], kNs[ni], kKs[ki], kDtypes[(k + ni) % 3], (int)((k / 3) % 2),
                   kImpls[ii]);
}

/* Back-to-back calls, no sync between, impls alternating; inputs fixed, so the last y must
 * be right (a stale epoch or an overwritten half shows as a wrong value or a timeout). */
static void back_to_back(const t_world_t* w, bufs_t* b, int calls) {
  uint64_t seed = t_next_seed();
  t_context("P=%d %d back-to-back calls seed=0x%016llx", w->n, calls, (unsigned long long)seed);
  prepare(b, 5, 333, 517, FCO_BF16, 1, seed);
  for (int i = 0; i < calls; i++)
    ASSERT_OK(issue(w, b, i % 7 == 3 ? 0 : i % 11 == 5 ? 3 : 1 + i % 2, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0);
}

/* ---- PDL chain (FCO_GEMV_PDL=1 on GPU transports; the same semantics everywhere) ---------- */
/* Call 1 (b's inputs, M1 = 16, N1 = 1000) writes y; call 2 reads that y, viewed as W2
 * [N2][K2] (N2 · K2 = 16 000: K2 = 128, the vector path for both calls, or 125, the scalar
 * one), and its
 * first M2 · K2 elements as x2 [M2][K2], on every rank, and writes y2; issued back to back
 * without a sync. With PDL, call 2's blocks are scheduled (and prefetch W2 = y into L2) while
 * call 1 still writes y: a read of x or W before griddepcontrol.wait, or a stale prefetched
 * line, shows as a wrong y2. y2 = Σ_r x2 · W2^T (every rank's y is the same), checked by the
 * same reference as any call, from the y that call 1 left (itself checked first). */
typedef struct {
  int impl1, impl2;
  fco_dtype_t dt;
  size_t M2, K2;
  int bias1;
} chain_t;

static fco_result_t issue_chain2(const t_world_t* w, const bufs_t* b, void* const* y2,
                                 const chain_t* c, void* const* streams) {
  const size_t N2 = 16 * 1000 / c->K2;
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    fco_result_t e = fco_gemv_allreduce(w->comms[r], b->y[r], b->y[r], NULL, y2[r], c->M2, N2,
                                        c->K2, c->dt, c->impl2, streams ? streams[r] : NULL);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* Before the calls: call 1's inputs, y and y2 poisoned (with their guards). */
static void chain_prepare(const t_world_t* w, bufs_t* b, void* const* y2, const chain_t* c,
                          uint64_t seed) {
  prepare(b, 16, 1000, c->K2 == 128 ? vec_kt(w->n) : 777, c->dt, c->bias1, seed);
  const size_t n2 = c->M2 * (16 * 1000 / c->K2) * fco_dtype_size(c->dt);
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(w->transport, r);
    t_memset(w->transport, d, y2[r], T_POISON, n2);
    t_memset(w->transport, d, (char*)y2[r] + n2, T_GUARD_BYTE, T_GUARD);
  }
}

/* After the sync: check call 1 (b), then call 2 against y as its inputs (b's host copies are
 * overwritten: b describes call 2 afterwards, with y = y2). */
static void chain_check(const t_world_t* w, bufs_t* b, void* const* y2, const chain_t* c) {
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0); /* call 1; rank 0's y now in hy0 (every rank's is the same) */
  const size_t N2 = 16 * 1000 / c->K2;
  for (int r = 0; r < w->n; r++) {
    for (size_t i = 0; i < c->M2 * c->K2; i++) b->hx[r][i] = t_get_elem(c->dt, b->hy0, i);
    for (size_t i = 0; i < N2 * c->K2; i++) b->hw[r][i] = t_get_elem(c->dt, b->hy0, i);
    b->K[r] = c->K2;
    b->y[r] = y2[r];
  }
  for (size_t n = 0; n < N2; n++) b->hb[n] = 0.f;
  b->M = c->M2;
  b->N = N2;
  b->has_bias = 0;
  ASSERT_EQ(check(w, b), 0);
}

static void chain(const t_world_t* w, bufs_t* b, void* const* y2, const chain_t* c) {
  void* y1[T_MAX_RANKS];
  memcpy(y1, b->y, sizeof y1);
  uint64_t seed = t_next_seed();
  const char* pdl = getenv("FCO_GEMV_PDL");
  t_context("P=%d chain: impl %d then impl %d reading its y as x and W, %s M2=%zu K2=%zu%s%s "
            "seed=0x%016llx", w->n, c->impl1, c->impl2, fco_dtype_name(c->dt), c->M2, c->K2,
            c->bias1 ? " bias" : "", pdl && atoi(pdl) > 0 ? " PDL" : "",
            (unsigned long long)seed);
  chain_prepare(w, b, y2, c, seed);
  ASSERT_OK(issue(w, b, c->impl1, NULL));
  ASSERT_OK(issue_chain2(w, b, y2, c, NULL));
  t_sync(w);
  chain_check(w, b, y2, c);
  memcpy(b->y, y1, sizeof y1);
}

static void chains(const t_world_t* w, bufs_t* b, void* const* y2) {
  static const int impls[][2] = {{1, 1}, {1, 2}, {2, 1}, {FCO_IMPL_AUTO, FCO_IMPL_AUTO},
                                 {0, 1}, {1, 0}, {3, 2}, {2, 3}};
  static const size_t m2s[] = {1, 16, 5, 64};
  for (int i = 0; i < 8; i++) {
    /* No f16 in the chain: y2 sums P·K2 products of call 1's outputs, which can pass f16's
     * 65504 (a correct inf against a finite reference: run 63585a1, P = 4). The ordering the
     * chain checks does not depend on the dtype; f16's PDL kernels run in pdl_tests. */
    static const fco_dtype_t dts[] = {FCO_F32, FCO_BF16};
    chain_t c = {impls[i][0], impls[i][1], dts[(i / 2) % 2], m2s[i % 4], i % 3 == 1 ? 125 : 128,
                 i % 2};
    chain(w, b, y2, &c);
  }
}

/* Every rank's y is still poison and its guard intact. */
static void assert_untouched(const t_world_t* w, bufs_t* b, int line) {
  size_t n = b->M * b->N * fco_dtype_size(b->dt);
  for (int r = 0; r < w->n; r++) {
    t_get(b->t, t_rank_device(b->t, r), b->hy, b->y[r], n + T_GUARD);
    for (size_t i = 0; i < n + T_GUARD; i++)
      if (b->hy[i] != (i < n ? T_POISON : T_GUARD_BYTE))
        t_fail(__FILE__, line, "rank %d: a failed call wrote byte %zu of y", r, i);
  }
}

#define BAD(call, code, word)                     \
  do {                                            \
    t_context("%s", #call);                       \
    ASSERT_RES(call, code);                       \
    ASSERT_MSG(NULL, word);                       \
    t_sync(w);                                    \
    assert_untouched(w, b, __LINE__);             \
  } while (0)

/* knob=value (a value no kernel exists for; the op layer refuses it on every transport) on an
 * impl 1 call of M rows: FCO_ERR_INVALID_ARGUMENT, nothing written; the knob is unset again
 * after. */
static void refused_knob(const t_world_t* w, bufs_t* b, const char* knob, const char* value,
                         size_t M) {
  setenv(knob, value, 1);
  t_context("P=%d %s=%s", w->n, knob, value);
  prepare(b, M, 100, 1000, FCO_BF16, 0, t_next_seed());
  ASSERT_RES(issue(w, b, 1, NULL), FCO_ERR_INVALID_ARGUMENT);
  printf("%s=%s: %s\n", knob, value, fco_last_error(w->comms[0]));
  t_sync(w);
  assert_untouched(w, b, __LINE__);
  unsetenv(knob);
}

static void bad_args(const t_world_t* w, bufs_t* b) {
  fco_comm_t c = w->comms[0];
  const fco_result_t E = FCO_ERR_INVALID_ARGUMENT;
  prepare(b, 4, 100, 64, FCO_BF16, 1, t_next_seed());
  void *x = b->x[0], *wt = b->w[0], *bs = b->bias[0], *y = b->y[0];
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 0, 100, 64, FCO_BF16, 1, NULL), E, "M");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 65, 100, 64, FCO_BF16, 1, NULL), FCO_ERR_UNSUPPORTED,
      "GEMM");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 1000, 100, 64, FCO_BF16, 0, NULL), FCO_ERR_UNSUPPORTED,
      "GEMM");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, (size_t)-1, 100, 64, FCO_BF16, 1, NULL), E, "M");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 0, 64, FCO_BF16, 1, NULL), E, "N");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, (size_t)1 << 40, 64, FCO_BF16, 1, NULL), E, "N");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 0, FCO_BF16, 2, NULL), E, "K");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, (size_t)-5, FCO_BF16, 2, NULL), E, "K");
  BAD(fco_gemv_allreduce(c, NULL, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "x");
  BAD(fco_gemv_allreduce(c, x, NULL, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "w");
  BAD(fco_gemv_allreduce(c, x, wt, bs, NULL, 4, 100, 64, FCO_BF16, 1, NULL), E, "y");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 64, (fco_dtype_t)9, 1, NULL), E, "dtype");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 64, FCO_BF16, 4, NULL), E, "impl");
  BAD(fco_gemv_allreduce(c, x, wt, bs, y, 4, 100, 64, FCO_BF16, -2, NULL), E, "impl");
  BAD(fco_gemv_allreduce(c, (char*)x + 1, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "x");
  BAD(fco_gemv_allreduce(c, x, (char*)wt + 1, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "w");
  BAD(fco_gemv_allreduce(c, x, wt, (char*)bs + 1, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "bias");
  BAD(fco_gemv_allreduce(c, x, wt, bs, (char*)y + 2, 4, 100, 64, FCO_F32, 1, NULL), E, "y");
  BAD(fco_gemv_allreduce(c, x, y, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "overlaps");
  BAD(fco_gemv_allreduce(c, y, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "overlaps");
  BAD(fco_gemv_allreduce(NULL, x, wt, bs, y, 4, 100, 64, FCO_BF16, 1, NULL), E, "comm");
  t_context("%s", "workspace / impl names");
  size_t bytes = 0;
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 4, 100, 64, FCO_BF16, 1, NULL), E);
  ASSERT_MSG(c, "bytes");
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 65, 100, 64, FCO_BF16, 1, &bytes), FCO_ERR_UNSUPPORTED);
  ASSERT_RES(fco_gemv_allreduce_workspace(c, 4, 100, 64, FCO_BF16, 7, &bytes), E);
  ASSERT_MSG(c, "impl");
  for (int i = 1; i <= 2; i++) {
    ASSERT_OK(fco_gemv_allreduce_workspace(c, 4, 100, 64, FCO_BF16, i, &bytes));
    ASSERT_GT(bytes, 0);
  }
  ASSERT_NULL(fco_gemv_allreduce_impl_name(c, FCO_GEMV_ALLREDUCE_NUM_IMPLS));
  ASSERT_NULL(fco_gemv_allreduce_impl_name(NULL, 0));
  ASSERT_STR_EQ(fco_gemv_allreduce_impl_name(c, FCO_IMPL_AUTO), "auto");
  for (int i = 0; i < FCO_GEMV_ALLREDUCE_NUM_IMPLS; i++)
    ASSERT_NOT_NULL(fco_gemv_allreduce_impl_name(c, i));

  /* M differs across ranks: the group's ranks are compared on the host (every transport). */
  if (w->n >= 2) {
    t_context("M differs across ranks");
    prepare(b, 4, 100, 64, FCO_BF16, 0, t_next_seed());
    ASSERT_OK(fco_group_start());
    for (int r = 0; r < w->n; r++)
      (void)fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r], NULL, b->y[r], r == 1 ? 3 : 4, 100,
                               b->K[r], FCO_BF16, 1, NULL);
    ASSERT_RES(fco_group_end(), E);
    ASSERT_MSG(c, "M");
    t_sync(w);
    assert_untouched(w, b, __LINE__);
  }
  /* Not sticky: the communicator still works. */
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  one_call(w, b, 2, 77, 95, FCO_F16, 1, FCO_IMPL_AUTO);
  /* tuning knobs with values no kernel exists for: refused on every transport, any M */
  refused_knob(w, b, "FCO_GEMV_GROUP", "3", 33);
  refused_knob(w, b, "FCO_GEMV_GROUP", "1", 1);
  refused_knob(w, b, "FCO_GEMV_SPLIT", "5", 64);
  refused_knob(w, b, "FCO_GEMV_SPLIT", "0", 4);
}

#ifdef FCO_HAVE_CUDA
#define CK(call)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) t_fail(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

/* Streams for a capture: one per rank (nccl) or one (local), every rank's stream forked from
 * rank 0's inside the capture and joined back at its end. */
typedef struct {
  int n, nstreams;
  fco_transport_t t;
  cudaStream_t st[T_MAX_RANKS];
  void* sp[T_MAX_RANKS]; /* per rank, for issue() */
  cudaEvent_t fork, join[T_MAX_RANKS];
  cudaGraph_t g;
  cudaGraphExec_t ge;
} capture_t;

static void capture_init(capture_t* c, const t_world_t* w) {
  memset(c, 0, sizeof *c);
  c->n = w->n;
  c->t = w->transport;
  c->nstreams = w->transport == FCO_TRANSPORT_LOCAL ? 1 : w->n;
  for (int s = 0; s < c->nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(c->t, s)));
    CK(cudaStreamCreateWithFlags(&c->st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&c->join[s], cudaEventDisableTiming));
  }
  for (int r = 0; r < c->n; r++) c->sp[r] = c->st[c->nstreams == 1 ? 0 : r];
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  CK(cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming));
}

static void capture_sync(const capture_t* c) {
  for (int s = 0; s < c->nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(c->t, s)));
    CK(cudaStreamSynchronize(c->st[s]));
  }
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
}

static void capture_begin(capture_t* c) {
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  CK(cudaStreamBeginCapture(c->st[0], cudaStreamCaptureModeThreadLocal));
  CK(cudaEventRecord(c->fork, c->st[0]));
  for (int s = 1; s < c->nstreams; s++) CK(cudaStreamWaitEvent(c->st[s], c->fork, 0));
}

static void capture_end(capture_t* c) {
  for (int s = 1; s < c->nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(c->t, s)));
    CK(cudaEventRecord(c->join[s], c->st[s]));
    CK(cudaStreamWaitEvent(c->st[0], c->join[s], 0));
  }
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  CK(cudaStreamEndCapture(c->st[0], &c->g));
  CK(cudaGraphInstantiate(&c->ge, c->g, 0));
}

static void capture_replay(capture_t* c, int times) {
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  for (int i = 0; i < times; i++) CK(cudaGraphLaunch(c->ge, c->st[0]));
  CK(cudaStreamSynchronize(c->st[0]));
}

static void capture_free(capture_t* c) {
  CK(cudaGraphExecDestroy(c->ge));
  CK(cudaGraphDestroy(c->g));
  for (int s = 0; s < c->nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(c->t, s)));
    CK(cudaStreamDestroy(c->st[s]));
    CK(cudaEventDestroy(c->join[s]));
  }
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  CK(cudaEventDestroy(c->fork));
}

/* Capture one call per impl into a CUDA graph (every rank's stream forked from rank 0's),
 * replay 100 times; poison y before the last replay, then check. */
static void graph(const t_world_t* w, bufs_t* b, int impl) {
  capture_t c;
  capture_init(&c, w);
  uint64_t seed = t_next_seed();
  t_context("P=%d CUDA graph impl=%d seed=0x%016llx", w->n, impl, (unsigned long long)seed);
  prepare(b, 16, 1000, 1000, FCO_BF16, 1, seed);
  ASSERT_OK(issue(w, b, impl, c.sp)); /* eager: workspace growth, cuBLAS handle */
  capture_sync(&c);
  capture_begin(&c);
  ASSERT_OK(issue(w, b, impl, c.sp));
  capture_end(&c);
  capture_replay(&c, 99);
  size_t es = fco_dtype_size(b->dt);
  for (int r = 0; r < w->n; r++)
    t_memset(w->transport, t_rank_device(w->transport, r), b->y[r], T_POISON, b->M * b->N * es);
  capture_replay(&c, 1);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0);
  capture_free(&c);
}

/* The chain (above) captured into one CUDA graph, on the capture's streams: with
 * FCO_GEMV_PDL=1 call 2 hangs off call 1 by a programmatic edge. Replayed 50 times; y and y2
 * poisoned before the last replay, then both checked. */
static void graph_chain(const t_world_t* w, bufs_t* b, void* const* y2, const chain_t* ch) {
  capture_t c;
  void* y1[T_MAX_RANKS];
  memcpy(y1, b->y, sizeof y1);
  capture_init(&c, w);
  uint64_t seed = t_next_seed();
  t_context("P=%d CUDA graph of the chain: impl %d then impl %d, %s M2=%zu K2=%zu seed=0x%016llx",
            w->n, ch->impl1, ch->impl2, fco_dtype_name(ch->dt), ch->M2, ch->K2,
            (unsigned long long)seed);
  chain_prepare(w, b, y2, ch, seed);
  ASSERT_OK(issue(w, b, ch->impl1, c.sp)); /* eager: workspace growth, cuBLAS handle */
  ASSERT_OK(issue_chain2(w, b, y2, ch, c.sp));
  capture_sync(&c);
  capture_begin(&c);
  ASSERT_OK(issue(w, b, ch->impl1, c.sp));
  ASSERT_OK(issue_chain2(w, b, y2, ch, c.sp));
  capture_end(&c);
  capture_replay(&c, 49);
  chain_prepare(w, b, y2, ch, seed); /* the same inputs, y and y2 poisoned again */
  capture_replay(&c, 1);
  chain_check(w, b, y2, ch);
  memcpy(b->y, y1, sizeof y1);
  capture_free(&c);
}

/* ---- LL one-shot (FCO_GEMV_AR_LL=1) --------------------------------------------------- */
static void ll_set(int on) { setenv("FCO_GEMV_AR_LL", on ? "1" : "0", 1); }

/* Every M of both LL kernels and the first past them (17: the plain one-shot), N, K; bf16 / f16
 * with the default half-width LL words, and every 4th call with fp32 ones (FCO_GEMV_LL_FP32). */
static void ll_sweep(const t_world_t* w, bufs_t* b) {
  static const size_t ms[] = {1, 2, 3, 8, 9, 16, 17};
  static const size_t ns[] = {1, 7, 33, 1000};
  static const size_t ks[] = {1, 33, 1000};
  unsigned k = 0;
  ll_set(1);
  for (size_t mi = 0; mi < 7; mi++)
    for (size_t ni = 0; ni < 4; ni++)
      for (size_t ki = 0; ki < 3; ki++, k++) {
        if (k % 4 == 3) setenv("FCO_GEMV_LL_FP32", "1", 1);
        one_call(w, b, ms[mi], ns[ni], ks[ki], kDtypes[(k + ni) % 3], (int)((k / 3) % 2),
                 k % 5 == 4 ? FCO_IMPL_AUTO : 1);
        unsetenv("FCO_GEMV_LL_FP32");
      }
  ll_set(0);
}

/* Exact: with fp32 LL words (FCO_GEMV_LL_FP32=1; by default bf16 / f16 partials travel rounded
 * to the dtype, which ll_sweep and the rest check against the reference and across ranks) the
 * LL one-shot sums the same fp32 partials in the same rank order as the plain one, so every
 * rank's y must equal the plain one-shot's bit for bit (same inputs, y poisoned) — with the
 * same block shape: the wide blocks (FCO_GEMV_WIDE, where N is small; LL only until e9c20d3,
 * both since) split K over 8 warps instead of 4, another fp32 order (run a70f468 caught it when
 * only LL had them), so this runs with FCO_GEMV_WIDE=0;
 * the wide kernels are checked against the reference everywhere else. */
static void ll_vs_plain(const t_world_t* w, bufs_t* b) {
  setenv("FCO_GEMV_WIDE", "0", 1);
  setenv("FCO_GEMV_LL_FP32", "1", 1);
  static const size_t shapes[][3] = {{1, 1000, 1000}, {4, 999, 517}, {16, 1000, 33}, {9, 17, 1000}};
  unsigned char* plain = (unsigned char*)malloc(y_bytes());
  ASSERT_NOT_NULL(plain);
  for (int i = 0; i < 4 * 3; i++) {
    const size_t M = shapes[i % 4][0], N = shapes[i % 4][1], kt = shapes[i % 4][2];
    const fco_dtype_t dt = kDtypes[i % 3];
    const size_t n = M * N * fco_dtype_size(dt);
    uint64_t seed = t_next_seed();
    t_context("P=%d LL vs plain one-shot, bit for bit: M=%zu N=%zu K=%zu %s seed=0x%016llx", w->n,
              M, N, kt, fco_dtype_name(dt), (unsigned long long)seed);
    prepare(b, M, N, kt, dt, i % 2, seed);
    ASSERT_OK(issue(w, b, 1, NULL)); /* FCO_GEMV_AR_LL unset: plain */
    t_sync(w);
    t_get(b->t, t_rank_device(b->t, 0), plain, b->y[0], n);
    for (int r = 0; r < w->n; r++)
      t_memset(b->t, t_rank_device(b->t, r), b->y[r], T_POISON, n);
    ll_set(1);
    ASSERT_OK(issue(w, b, 1, NULL));
    ll_set(0);
    t_sync(w);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(check(w, b), 0); /* reference, guards, ranks identical */
    if (memcmp(b->hy0, plain, n))
      t_fail(__FILE__, __LINE__, "the LL one-shot's y differs from the plain one-shot's");
  }
  free(plain);
  unsetenv("FCO_GEMV_WIDE");
  unsetenv("FCO_GEMV_LL_FP32");
}

/* Another op on ranks' y2 (not y), issued without a sync: a gemv of another shape and impl
 * (workspace halves, and impl 0/3's all-reduce) or an in-place fco_allreduce. None may touch
 * the LL area; the next LL call must not be fooled by whatever they leave. */
static void other_op(const t_world_t* w, bufs_t* b, void* const* y2, int k) {
  void* y[T_MAX_RANKS];
  size_t M = b->M, N = b->N;
  fco_dtype_t dt = b->dt;
  int has_bias = b->has_bias;
  memcpy(y, b->y, sizeof y);
  memcpy(b->y, y2, sizeof y);
  b->has_bias = 0;
  switch (k % 5) {
    case 0: b->M = 8, b->N = 500; ASSERT_OK(issue(w, b, 2, NULL)); break;
    case 1: b->M = 3, b->N = 1000; ASSERT_OK(issue(w, b, 3, NULL)); break;
    case 2: b->M = 16, b->N = 999; ASSERT_OK(issue(w, b, 0, NULL)); break;
    case 3: b->M = 2, b->N = 640; ASSERT_OK(issue(w, b, 1, NULL)); break; /* LL as well */
    default: {
      fco_result_t first = FCO_OK;
      ASSERT_OK(fco_group_start());
      for (int r = 0; r < w->n; r++) {
        fco_result_t e = fco_allreduce(w->comms[r], y2[r], y2[r], 16 * 1000, FCO_BF16,
                                       FCO_IMPL_AUTO, NULL);
        if (e != FCO_OK && first == FCO_OK) first = e;
      }
      fco_result_t e = fco_group_end();
      ASSERT_OK(first != FCO_OK ? first : e);
    }
  }
  memcpy(b->y, y, sizeof y);
  b->M = M, b->N = N, b->dt = dt, b->has_bias = has_bias;
}

/* Fresh inputs per LL call (so an earlier call's words differ from this call's), shapes that
 * repeat (same addresses, stale words of the same layout) and vary (other layouts), 0-3 other
 * ops before and one after each LL call, no sync until the check: a stale word taken for this
 * call's would show as a wrong y, a lost word as a timeout. */
static void ll_stale(const t_world_t* w, bufs_t* b, void* const* y2, int calls) {
  static const size_t shapes[][2] = {{16, 1000}, {1, 1000}, {3, 33}, {16, 1000}, {9, 7},
                                     {1, 1}, {5, 1000}, {16, 999}};
  ll_set(1);
  for (int i = 0; i < calls; i++) {
    const size_t M = shapes[i % 8][0], N = shapes[i % 8][1];
    const fco_dtype_t dt = kDtypes[i % 3];
    uint64_t seed = t_next_seed();
    t_context("P=%d LL call %d among other ops: M=%zu N=%zu %s seed=0x%016llx", w->n, i, M, N,
              fco_dtype_name(dt), (unsigned long long)seed);
    prepare(b, M, N, 1000, dt, i % 2, seed);
    for (int j = 0; j < i % 4; j++) other_op(w, b, y2, i + j);
    ASSERT_OK(issue(w, b, i % 3 == 2 ? FCO_IMPL_AUTO : 1, NULL));
    other_op(w, b, y2, i * 7 + 1);
    t_sync(w);
    for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
    ASSERT_EQ(check(w, b), 0);
  }
  ll_set(0);
}

/* Back to back without any sync: LL calls of changing shapes (each LL half keeps the words of
 * other layouts) and other ops; only the last call, (16, 1000), is checked, and the LL call
 * before it of the same parity has another shape. */
static void ll_back_to_back(const t_world_t* w, bufs_t* b, void* const* y2, int calls) {
  static const size_t shapes[][2] = {{1, 1000}, {16, 333}, {4, 1000}, {15, 1000}, {7, 999}};
  uint64_t seed = t_next_seed();
  t_context("P=%d LL %d back-to-back calls seed=0x%016llx", w->n, calls, (unsigned long long)seed);
  ll_set(1);
  prepare(b, 16, 1000, 517, FCO_BF16, 1, seed); /* inputs for every shape below */
  for (int i = 0; i < calls; i++) {
    b->M = shapes[i % 5][0];
    b->N = shapes[i % 5][1];
    if (i % 6 == 5) other_op(w, b, y2, i);
    ASSERT_OK(issue(w, b, i % 4 == 3 ? FCO_IMPL_AUTO : 1, NULL));
  }
  b->M = 15, b->N = 1000; /* same parity as the last call: another layout */
  ASSERT_OK(issue(w, b, 1, NULL));
  b->M = 7, b->N = 999;
  ASSERT_OK(issue(w, b, 1, NULL));
  b->M = 16, b->N = 1000;
  ASSERT_OK(issue(w, b, 1, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0);
  ll_set(0);
}

/* A peer that never calls: the LL wait ends in FCO_ERR_TIMEOUT naming peer 1, within the
 * bound, y untouched; the communicator is then destroyed. nccl: only rank 0's op is issued;
 * local: the transport's hook FCO_FAULT_SKIP_RANK=1 leaves rank 1 out of the launch. */
static void ll_silent_peer(fco_transport_t t) {
  fco_config_t cfg;
  t_world_t w;
  bufs_t b;
  ASSERT_OK(fco_config_init(&cfg));
  cfg.timeout_ms = 300;
  t_context("LL, silent peer (%s)", fco_transport_name(t));
  ASSERT_OK(t_world_init(&w, t, 2, &cfg));
  bufs_alloc(&b, &w);
  one_call(&w, &b, 4, 1000, 1000, FCO_BF16, 1, 1); /* epochs past 0, workspace grown */
  t_context("LL, silent peer (%s)", fco_transport_name(t));
  ll_set(1);
  prepare(&b, 4, 1000, 1000, FCO_BF16, 1, t_next_seed());
  size_t need = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w.comms[0], 4, 1000, b.K[0], FCO_BF16, 1, &need));
  ASSERT_OK(fco_comm_reserve(w.comms[0], need)); /* growth would wait for the silent peer */
  double t0 = t_now_ms();
  if (t == FCO_TRANSPORT_LOCAL) {
    setenv("FCO_FAULT_SKIP_RANK", "1", 1);
    ASSERT_OK(issue(&w, &b, 1, NULL));
    unsetenv("FCO_FAULT_SKIP_RANK");
  } else {
    ASSERT_OK(fco_gemv_allreduce(w.comms[0], b.x[0], b.w[0], b.bias[0], b.y[0], 4, 1000, b.K[0],
                                 FCO_BF16, 1, NULL));
  }
  t_sync_device(t, t_rank_device(t, 0));
  double ms = t_now_ms() - t0;
  fco_result_t r = fco_comm_get_async_error(w.comms[0]);
  printf("LL silent peer: rank 0 got %s after %.0f ms: %s\n", fco_result_string(r), ms,
         fco_last_error(w.comms[0]));
  ASSERT_RES(r, FCO_ERR_TIMEOUT);
  ASSERT_LT(ms, 6000.0);
  if (!t_contains_word(fco_last_error(w.comms[0]), "peer 1"))
    t_fail(__FILE__, __LINE__, "the timeout message does not name peer 1");
  ll_set(0);
  t_sync(&w);
  {
    size_t n = b.M * b.N * fco_dtype_size(b.dt);
    t_get(t, t_rank_device(t, 0), b.hy, b.y[0], n + T_GUARD);
    for (size_t i = 0; i < n + T_GUARD; i++)
      if (b.hy[i] != (i < n ? T_POISON : T_GUARD_BYTE))
        t_fail(__FILE__, __LINE__, "rank 0: the timed-out LL call wrote byte %zu of y", i);
  }
  bufs_free(&b);
  t_world_destroy(&w, 0);
}

static void ll_tests(const t_world_t* w, bufs_t* b, int quick) {
  t_context("P=%d LL workspace", w->n);
  size_t plain = 0, ll = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 16, 1000, 1000, FCO_BF16, 1, &plain));
  ll_set(1);
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 16, 1000, 1000, FCO_BF16, 1, &ll));
  ll_set(0);
  /* 2·P·SL, SL = roundup(T·16·M·8, 256) with T = 63 (internal layout, docs/gemv_allreduce.md) */
  if (w->n > 1) ASSERT_EQ(ll, 2 * (size_t)w->n * ((63 * 16 * 16 * 8 + 255) / 256 * 256));
  else ASSERT_EQ(ll, plain);
  void* y2[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    y2[r] = t_alloc(w->transport, t_rank_device(w->transport, r), y_bytes());
  ll_sweep(w, b);
  ll_vs_plain(w, b);
  ll_stale(w, b, y2, quick ? 16 : 48);
  ll_back_to_back(w, b, y2, quick ? 100 : 1000);
  ll_set(1);
  graph(w, b, 1);
  graph(w, b, FCO_IMPL_AUTO);
  setenv("FCO_CHECK_ARGS", "1", 1);
  one_call(w, b, 3, 1000, 1000, FCO_BF16, 1, 1);
  one_call(w, b, 16, 7, 33, FCO_F32, 0, 1);
  unsetenv("FCO_CHECK_ARGS");
  ll_set(0);
  /* The plain one-shot right after LL calls (its flags were not raised by them). */
  one_call(w, b, 3, 1000, 1000, FCO_F16, 1, 1);
  for (int r = 0; r < w->n; r++) t_free(w->transport, t_rank_device(w->transport, r), y2[r]);
}

/* ---- PDL (FCO_GEMV_PDL=1) ------------------------------------------------------------------ */
/* PDL is on by default (unset): the parts before pdl_tests run with it; off is "0", which
 * the parts after pdl_tests keep, so both kernel families run the whole suite's other cases. */
static void pdl_set(int on) { setenv("FCO_GEMV_PDL", on ? "1" : "0", 1); }

/* Back to back without a sync, FCO_GEMV_PDL switched from call to call (kernels with and
 * without the PDL prologue, cuBLAS and NCCL / the all-reduce kernels follow each other), impls
 * 0..3 and AUTO, LL as by default; inputs fixed, only the last y is checked. */
static void pdl_back_to_back(const t_world_t* w, bufs_t* b, int calls) {
  static const int impls[] = {1, 2, FCO_IMPL_AUTO, 0, 1, 3, 2};
  uint64_t seed = t_next_seed();
  t_context("P=%d %d back-to-back calls, PDL on and off, seed=0x%016llx", w->n, calls,
            (unsigned long long)seed);
  prepare(b, 5, 333, vec_kt(w->n), FCO_BF16, 1, seed);
  for (int i = 0; i < calls; i++) {
    pdl_set(i % 3 != 1);
    ASSERT_OK(issue(w, b, impls[i % 7], NULL));
  }
  pdl_set(1);
  ASSERT_OK(issue(w, b, 1, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0);
}

/* Everything with FCO_GEMV_PDL=1: every fused kernel family (kMT 1, 2, 4, 8; LL, plain
 * one-shot, two-phase; every dtype; N < 16 and K off the vector path), the prefetch knob's
 * edges, back-to-back calls (among other ops, PDL switched per call, LL), the chain (a call
 * reading the previous call's y as x and W) eagerly and in CUDA graphs, graphs of single
 * calls, FCO_CHECK_ARGS. Exact checks as everywhere else. */
static void pdl_tests(const t_world_t* w, bufs_t* b, int quick) {
  static const size_t ms[] = {1, 9, 17, 64};
  static const size_t ns[] = {7, 1000};
  const size_t ks[] = {33, vec_kt(w->n)}; /* K_r off and on the vector path */
  static const int impls[] = {1, 2, FCO_IMPL_AUTO};
  static const char* const prefetch[] = {"0", "1", "4096", "262144", "1073741824", "-5"};
  void* y2[T_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    y2[r] = t_alloc(w->transport, t_rank_device(w->transport, r), y_bytes());
  unsetenv("FCO_GEMV_AR_LL");
  pdl_set(1);
  unsigned k = 0;
  for (size_t mi = 0; mi < 4; mi++)
    for (size_t ni = 0; ni < 2; ni++)
      for (size_t ki = 0; ki < 2; ki++)
        for (int ii = 0; ii < 3; ii++, k++) {
          if (k % 4 == 3) ll_set(0); /* the plain one-shot too */
          one_call(w, b, ms[mi], ns[ni], ks[ki], kDtypes[(k + ni) % 3], (int)(k % 2), impls[ii]);
          unsetenv("FCO_GEMV_AR_LL");
        }
  for (int i = 0; i < 6; i++) {
    setenv("FCO_GEMV_PDL_PREFETCH", prefetch[i], 1);
    one_call(w, b, 3, 1000, vec_kt(w->n), FCO_BF16, 1, 1);
    one_call(w, b, 16, 999, vec_kt(w->n), FCO_F32, 0, 2);
  }
  unsetenv("FCO_GEMV_PDL_PREFETCH");
  back_to_back(w, b, quick ? 100 : 1000);
  pdl_back_to_back(w, b, quick ? 100 : 1000);
  ll_back_to_back(w, b, y2, quick ? 50 : 300);
  ll_stale(w, b, y2, quick ? 8 : 24);
  unsetenv("FCO_GEMV_AR_LL");
  pdl_set(1);
  chains(w, b, y2);
  {
    const chain_t g[] = {{1, 1, FCO_BF16, 16, 128, 1},
                         {2, FCO_IMPL_AUTO, FCO_BF16, 3, 128, 0}, /* no f16: chains() */
                         {FCO_IMPL_AUTO, 2, FCO_F32, 1, 125, 1}};
    for (int i = 0; i < 3; i++) graph_chain(w, b, y2, &g[i]);
  }
  graph(w, b, 1);
  graph(w, b, 2);
  graph(w, b, FCO_IMPL_AUTO);
  setenv("FCO_CHECK_ARGS", "1", 1);
  for (int i = 1; i <= 2; i++) one_call(w, b, 3, 1000, 1000, FCO_BF16, 1, i);
  unsetenv("FCO_CHECK_ARGS");
  pdl_set(0);
  for (int r = 0; r < w->n; r++) t_free(w->transport, t_rank_device(w->transport, r), y2[r]);
}

/* Grouped tiles (FCO_GEMV_GROUP: impl 1 at M 17..64 in bf16 / f16): every knob value (unset,
 * 2, 4, 0 = the one-tile kernels; 4 again with FCO_GEMV_GROUP_MMA=1, the mma.sync tile instead
 * of wgmma on the vector path) on M of 3..8 m-tiles, N with a partial last group (1000, 100) or
 * a single partial tile (15), K_r up to ~4600 (both tiles' rings wrap: wgmma 12 slabs of 64,
 * mma.sync 6 chunks of 128; then K's tail), a shorter vector-path K and K off the vector path
 * (4095: every rank's chunks through the guarded loads); bf16 and f16, bias on and off, each
 * call checked against the float64 reference (check()). PDL as the caller set it.
 * Split groups (FCO_GEMV_SPLIT, M 33..64): these N leave most blocks without a group, so unset
 * splits each group's K in 2..4 slices (4 at P = 1, 2 at P = 4 on one H200); the runs set it
 * to 1 (off) with groups of 4, 3 with the mma.sync tile, and 2 once more, and a K of one slab
 * a rank (helpers with empty slices) runs split, and one more call after. (Refused knob values:
 * bad_args.) */
/* Every rank's fco_last_plan names grouped tiles with K in `split` slices (0: the automatic rule
 * for N columns — at least 2 slices where the groups fill at most half of the co-resident slots
 * the plan reports, else 1: with P = 5..8 virtual ranks on one GPU the slots per rank shrink). */
static void expect_split(const t_world_t* w, size_t N, int split) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "split=");
    const char* kg = strstr(plan, "kG=");
    const char* of = strstr(plan, "blocks/rank of ");
    int got = at ? atoi(at + 6) : -1, want = split;
    if (!split && kg && of) {
      const size_t cols = 16 * (size_t)atoi(kg + 3); /* a group's columns */
      if (2 * (long)((N + cols - 1) / cols) > atol(of + 15)) want = 1; /* too many to split */
    }
    if (!strstr(plan, "grouped") || !of || (want ? got != want : got < 2))
      t_fail(__FILE__, __LINE__, "rank %d ran \"%s\", expected grouped tiles with split %s%d", r,
             plan, want ? "" : ">= ", want ? want : 2);
  }
}

/* Every rank's fco_last_plan names impl `impl` (-1: 0 or 3, the unfused impls) and, when ll
 * is 0 or 1, the LL one-shot kernel or not. */
static void expect_plan(const t_world_t* w, int impl, int ll) {
  for (int r = 0; r < w->n; r++) {
    const char* plan = fco_last_plan(w->comms[r]);
    const char* at = strstr(plan, "gemv_allreduce impl ");
    const int got = at ? atoi(at + 20) : -1;
    const int has_ll = strstr(plan, "kernel LL ") != NULL;
    if (impl >= 0 ? got != impl : (got != 0 && got != 3))
      t_fail(__FILE__, __LINE__, "rank %d: AUTO ran \"%s\", expected impl %s", r, plan,
             impl >= 0 ? (impl == 1 ? "1" : impl == 2 ? "2" : "0") : "0 or 3");
    if (ll >= 0 && has_ll != ll)
      t_fail(__FILE__, __LINE__, "rank %d: AUTO ran \"%s\", expected %s LL one-shot", r, plan,
             ll ? "the" : "not the");
  }
}

/* AUTO's rule (src/ops/gemv_allreduce.c, resolve_impl / use_ll), read back through the plans,
 * every call also checked against the reference: one rank → impl 0; bf16 M 4, N 1000 → the
 * fused one-shot, with LL words except on local above P = 4; M 40 → unfused (on local impl 0);
 * N above FCO_GEMV_AR_FUSED_MAX_N → unfused; FCO_GEMV_AR_ONESHOT_MAX between one rank's pushes
 * and all ranks' → one-shot on nccl, two-phase on local (its ranks share one GPU's HBM). */
static void auto_rule(const t_world_t* w, bufs_t* b) {
  const int P = w->n, local = w->transport == FCO_TRANSPORT_LOCAL;
  const int ll_set = getenv("FCO_GEMV_AR_LL") != NULL; /* the caller's choice: not checked */
  static const char* const rule_knobs[] = {"FCO_GEMV_AR_AUTO_MAX_M", "FCO_GEMV_AR_FUSED_MAX_N",
                                           "FCO_GEMV_AR_ONESHOT_MAX"};
  for (int i = 0; i < 3; i++)
    if (getenv(rule_knobs[i])) { /* the caller moved the rule: nothing here to compare with */
      printf("P=%d: auto_rule not checked (%s set)\n", P, rule_knobs[i]);
      return;
    }
  const size_t kt = vec_kt_le(P, 512);
  one_call(w, b, 4, 1000, kt, FCO_BF16, 1, FCO_IMPL_AUTO);
  expect_plan(w, P == 1 ? 0 : 1, P == 1 || ll_set ? -1 : !(local && P > 4));
  if (P == 1) return;
  one_call(w, b, 40, 1000, kt, FCO_BF16, 0, FCO_IMPL_AUTO);
  expect_plan(w, local ? 0 : -1, -1);
  setenv("FCO_GEMV_AR_FUSED_MAX_N", "512", 1);
  one_call(w, b, 4, 1000, kt, FCO_F16, 1, FCO_IMPL_AUTO);
  expect_plan(w, local ? 0 : -1, -1);
  unsetenv("FCO_GEMV_AR_FUSED_MAX_N");
  /* a rank pushes (P − 1)·16·1000·4 bytes; the bound sits between that and P times it */
  char bound[32];
  snprintf(bound, sizeof bound, "%lld", (long long)(P - 1) * 16 * 1000 * 4 * 3 / 2);
  setenv("FCO_GEMV_AR_ONESHOT_MAX", bound, 1);
  one_call(w, b, 16, 1000, kt, FCO_BF16, 0, FCO_IMPL_AUTO);
  expect_plan(w, local ? 2 : 1, -1);
  unsetenv("FCO_GEMV_AR_ONESHOT_MAX");
}

static void group_tests(const t_world_t* w, bufs_t* b) {
  /* the fifth: the mma.sync tile; the sixth: groups as unset, split in 2 */
  static const char* const knobs[] = {NULL, "2", "4", "0", "4", NULL};
  static const char* const splits[] = {NULL, NULL, "1", NULL, "3", "2"};
  static const size_t ms[] = {17, 32, 40, 64};
  static const size_t ns[] = {1000, 100, 15};
  const size_t ks[] = {vec_kt_le(w->n, MAX_KT), 4095, vec_kt_le(w->n, 1800)};
  unsigned k = 0;
  for (int gi = 0; gi < 6; gi++) {
    if (knobs[gi]) setenv("FCO_GEMV_GROUP", knobs[gi], 1);
    else unsetenv("FCO_GEMV_GROUP");
    if (splits[gi]) setenv("FCO_GEMV_SPLIT", splits[gi], 1);
    else unsetenv("FCO_GEMV_SPLIT");
    if (gi == 4) setenv("FCO_GEMV_GROUP_MMA", "1", 1);
    else unsetenv("FCO_GEMV_GROUP_MMA");
    for (size_t mi = 0; mi < 4; mi++)
      for (size_t ni = 0; ni < 3; ni++, k++) {
        one_call(w, b, ms[mi], ns[ni], ks[(k + gi) % 3], k % 2 ? FCO_F16 : FCO_BF16,
                 (int)((k / 2) % 2), 1);
        /* M 33..64, split unset: these few groups leave most slots free, so K is split (at
         * P <= 4 on one H200; expect_split checks the rule against the plan's slots) */
        if (ms[mi] > 32 && (gi == 0 || gi == 2)) expect_split(w, ns[ni], gi == 0 ? 0 : 1);
      }
  }
  unsetenv("FCO_GEMV_GROUP_MMA");
  unsetenv("FCO_GEMV_SPLIT");
  /* K_r = 8·(r + 1): one slab a rank, so 1..3 of a group's slices are empty */
  one_call(w, b, 64, 100, vec_kt_le(w->n, 4 * (size_t)w->n * (w->n + 1)), FCO_BF16, 1, 1);
  one_call(w, b, 48, 1000, vec_kt_le(w->n, 4 * (size_t)w->n * (w->n + 1)), FCO_F16, 0, 1);
  one_call(w, b, 64, 1000, vec_kt_le(w->n, MAX_KT), FCO_BF16, 1, 1);
}

/* nccl: ranks issued one at a time (no group, so no host comparison): with FCO_CHECK_ARGS=1
 * the kernels must find that M differs, write nothing, and report it on both ranks. */
static void device_mismatch(t_world_t* w, bufs_t* b) {
  t_context("FCO_CHECK_ARGS=1, M differs, ranks issued separately (nccl)");
  setenv("FCO_CHECK_ARGS", "1", 1);
  /* Growth would synchronise a device whose kernel waits for the other rank: reserve first. */
  size_t need = 0;
  ASSERT_OK(fco_gemv_allreduce_workspace(w->comms[0], 5, 100, 64, FCO_BF16, 1, &need));
  ASSERT_OK(fco_comm_reserve(w->comms[0], need));
  prepare(b, 4, 100, 64, FCO_BF16, 0, t_next_seed());
  for (int r = 0; r < w->n; r++)
    ASSERT_OK(fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r], NULL, b->y[r], r == 1 ? 5 : 4,
                                 100, b->K[r], FCO_BF16, 1, NULL));
  t_sync(w);
  for (int r = 0; r < 2; r++) {
    ASSERT_RES(fco_comm_get_async_error(w->comms[r]), FCO_ERR_INVALID_ARGUMENT);
    printf("rank %d reports: %s\n", r, fco_last_error(w->comms[r]));
  }
  unsetenv("FCO_CHECK_ARGS");
  assert_untouched(w, b, __LINE__);
}
#endif

/* FCO_TEST_LL=only / FCO_TEST_GROUP=only: one GPU-only part for P = 1..max, then PASS (0), or
 * 77 (skip) on the cpu transport. */
enum { PART_LL, PART_GROUP };
static int gpu_part(fco_transport_t t, int max, int quick, int part) {
  const char* what = part == PART_LL ? "LL" : "grouped tiles";
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t)) {
    for (int p = 1; p <= max; p++) {
      t_world_t w;
      bufs_t b;
      t_context("P=%d: fco_comm_init_all", p);
      ASSERT_OK(t_world_init(&w, t, p, NULL));
      bufs_alloc(&b, &w);
      if (part == PART_LL) ll_tests(&w, &b, quick);
      else group_tests(&w, &b);
      bufs_free(&b);
      t_world_destroy(&w, 0);
      printf("P=%d: %s ok\n", p, what);
    }
    if (part == PART_LL && max >= 2) ll_silent_peer(t);
    printf("PASS\n");
    return 0;
  }
#endif
  (void)max, (void)quick;
  printf("FCO_TEST_%s=only: the %s tests run on GPU transports only\n",
         part == PART_LL ? "LL" : "GROUP", what);
  return 77;
}

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = getenv("FCO_TEST_QUICK") && atoi(getenv("FCO_TEST_QUICK")) > 0;
  int max = t_test_max_ranks(t);
  const char* pdl_only = getenv("FCO_TEST_PDL");
  if (pdl_only && !strcmp(pdl_only, "only")) {
    for (int p = 1; p <= max; p++) {
      t_world_t w;
      bufs_t b;
      t_context("P=%d: fco_comm_init_all", p);
      ASSERT_OK(t_world_init(&w, t, p, NULL));
      bufs_alloc(&b, &w);
#ifdef FCO_HAVE_CUDA
      if (t_is_gpu(t)) pdl_tests(&w, &b, quick);
#endif
      if (!t_is_gpu(t)) { /* no PDL here: the chain's semantics alone */
        void* y2[T_MAX_RANKS];
        for (int r = 0; r < w.n; r++) y2[r] = t_alloc(t, t_rank_device(t, r), y_bytes());
        chains(&w, &b, y2);
        for (int r = 0; r < w.n; r++) t_free(t, t_rank_device(t, r), y2[r]);
      }
      bufs_free(&b);
      t_world_destroy(&w, 0);
      printf("P=%d: PDL part ok\n", p);
    }
#ifdef FCO_HAVE_CUDA
    if (t_is_gpu(t) && max >= 2) {
      pdl_set(1);
      ll_silent_peer(t);
      pdl_set(0);
    }
#endif
    printf("PASS\n");
    return 0;
  }
  const char* group_only = getenv("FCO_TEST_GROUP");
  if (group_only && !strcmp(group_only, "only")) return gpu_part(t, max, quick, PART_GROUP);
  const char* ll_only = getenv("FCO_TEST_LL");
  if (ll_only && !strcmp(ll_only, "only")) return gpu_part(t, max, quick, PART_LL);
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    bufs_t b;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    bufs_alloc(&b, &w);
    sweep(&w, &b); /* impl 1 with the LL one-shot where it applies (the default) */
    setenv("FCO_GEMV_AR_LL", "0", 1); /* and the plain one-shot */
    back_to_back(&w, &b, quick ? 100 : 1000);
    unsetenv("FCO_GEMV_AR_LL");
    bad_args(&w, &b);
    {
      void* y2[T_MAX_RANKS];
      for (int r = 0; r < w.n; r++) y2[r] = t_alloc(t, t_rank_device(t, r), y_bytes());
      chains(&w, &b, y2); /* FCO_GEMV_PDL as the caller set it (unset: off) */
      for (int r = 0; r < w.n; r++) t_free(t, t_rank_device(t, r), y2[r]);
    }
#ifdef FCO_HAVE_CUDA
    if (t_is_gpu(t)) {
      ll_tests(&w, &b, quick);
      group_tests(&w, &b);
      auto_rule(&w, &b);
      for (int i = 0; i < FCO_GEMV_ALLREDUCE_NUM_IMPLS; i++) graph(&w, &b, i);
      setenv("FCO_CHECK_ARGS", "1", 1);
      for (int i = 1; i <= 2; i++) one_call(&w, &b, 3, 1000, 1000, FCO_BF16, 1, i);
      unsetenv("FCO_CHECK_ARGS");
      pdl_tests(&w, &b, quick); /* FCO_GEMV_PDL=1, then unset */
      if (t == FCO_TRANSPORT_NCCL && p == 2) {
        device_mismatch(&w, &b); /* leaves the comms unusable: last */
        bufs_free(&b);
        for (int r = 0; r < w.n; r++) (void)fco_comm_destroy(w.comms[r]);
        printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
        continue;
      }
    }
#endif
    bufs_free(&b);
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
#ifdef FCO_HAVE_CUDA
  if (t_is_gpu(t) && max >= 2) {
    ll_silent_peer(t);
    pdl_set(1); /* the timeout stays bounded with the PDL prologue too */
    ll_silent_peer(t);
    pdl_set(0);
  }
#endif
  if (max < t_test_rank_cap())
    printf("ranks %d..%d not run: transport %s has %d here\n", max + 1, t_test_rank_cap(),
           fco_transport_name(t), max);
  printf("PASS\n");
  return 0;
}

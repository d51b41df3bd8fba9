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
 *   messages (nothing written), a mismatch of M across ranks, and on GPU transports a CUDA
 *   graph replayed 100 times and FCO_CHECK_ARGS=1 (on nccl also the device-side mismatch).
 *   GPU transports also run the LL one-shot (FCO_GEMV_AR_LL=1, impl 1 and AUTO): a sweep of
 *   M (up to 17: the fallback), N, K; y bit-identical to the plain one-shot's; calls whose LL
 *   half holds stale words of earlier LL calls of other shapes / inputs, with other ops (gemv
 *   impl 0/1/2/3, fco_allreduce) issued in between without a sync; back-to-back LL calls of
 *   changing shapes; a CUDA graph; FCO_CHECK_ARGS; a silent peer (timeout, not a hang).
 *   FCO_TEST_LL=only runs just that part (GPU transports; 77 = skip elsewhere).
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
#define MAX_KT 1000 /* K before the split */

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
  t_context("P=%d M=%zu N=%zu K=%zu %s %s impl=%d%s seed=0x%016llx", w->n, M, N, kt,
            fco_dtype_name(dt), has_bias ? "bias" : "no bias", impl,
            ll && atoi(ll) > 0 ? " LL" : "", (unsigned long long)seed);
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
}

#ifdef FCO_HAVE_CUDA
#define CK(call)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) t_fail(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

/* Capture one call per impl into a CUDA graph (every rank's stream forked from rank 0's),
 * replay 100 times; poison y before the last replay, then check. */
static void graph(const t_world_t* w, bufs_t* b, int impl) {
  int n = w->n, nstreams = w->transport == FCO_TRANSPORT_LOCAL ? 1 : n;
  cudaStream_t st[T_MAX_RANKS];
  void* sp[T_MAX_RANKS];
  cudaEvent_t fork, join[T_MAX_RANKS];
  for (int s = 0; s < nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(w->transport, s)));
    CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&join[s], cudaEventDisableTiming));
  }
  for (int r = 0; r < n; r++) sp[r] = st[nstreams == 1 ? 0 : r];
  CK(cudaSetDevice(t_rank_device(w->transport, 0)));
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  uint64_t seed = t_next_seed();
  t_context("P=%d CUDA graph impl=%d seed=0x%016llx", n, impl, (unsigned long long)seed);
  prepare(b, 16, 1000, 1000, FCO_BF16, 1, seed);
  ASSERT_OK(issue(w, b, impl, sp)); /* eager: workspace growth, cuBLAS handle */
  for (int s = 0; s < nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(w->transport, s)));
    CK(cudaStreamSynchronize(st[s]));
  }
  CK(cudaSetDevice(t_rank_device(w->transport, 0)));
  CK(cudaStreamBeginCapture(st[0], cudaStreamCaptureModeThreadLocal));
  CK(cudaEventRecord(fork, st[0]));
  for (int s = 1; s < nstreams; s++) CK(cudaStreamWaitEvent(st[s], fork, 0));
  ASSERT_OK(issue(w, b, impl, sp));
  for (int s = 1; s < nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(w->transport, s)));
    CK(cudaEventRecord(join[s], st[s]));
    CK(cudaStreamWaitEvent(st[0], join[s], 0));
  }
  CK(cudaSetDevice(t_rank_device(w->transport, 0)));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamEndCapture(st[0], &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 99; i++) CK(cudaGraphLaunch(ge, st[0]));
  CK(cudaStreamSynchronize(st[0]));
  size_t es = fco_dtype_size(b->dt);
  for (int r = 0; r < n; r++)
    t_memset(w->transport, t_rank_device(w->transport, r), b->y[r], T_POISON, b->M * b->N * es);
  CK(cudaSetDevice(t_rank_device(w->transport, 0)));
  CK(cudaGraphLaunch(ge, st[0]));
  CK(cudaStreamSynchronize(st[0]));
  for (int r = 0; r < n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(check(w, b), 0);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  for (int s = 0; s < nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(w->transport, s)));
    CK(cudaStreamDestroy(st[s]));
    CK(cudaEventDestroy(join[s]));
  }
  CK(cudaSetDevice(t_rank_device(w->transport, 0)));
  CK(cudaEventDestroy(fork));
}

/* ---- LL one-shot (FCO_GEMV_AR_LL=1) --------------------------------------------------- */
static void ll_set(int on) { setenv("FCO_GEMV_AR_LL", on ? "1" : "0", 1); }

/* Every M of both LL kernels and the first past them (17: the plain one-shot), N, K. */
static void ll_sweep(const t_world_t* w, bufs_t* b) {
  static const size_t ms[] = {1, 2, 3, 8, 9, 16, 17};
  static const size_t ns[] = {1, 7, 33, 1000};
  static const size_t ks[] = {1, 33, 1000};
  unsigned k = 0;
  ll_set(1);
  for (size_t mi = 0; mi < 7; mi++)
    for (size_t ni = 0; ni < 4; ni++)
      for (size_t ki = 0; ki < 3; ki++, k++)
        one_call(w, b, ms[mi], ns[ni], ks[ki], kDtypes[(k + ni) % 3], (int)((k / 3) % 2),
                 k % 5 == 4 ? FCO_IMPL_AUTO : 1);
  ll_set(0);
}

/* Exact: the LL one-shot sums the same fp32 partials in the same rank order as the plain one,
 * so every rank's y must equal the plain one-shot's bit for bit (same inputs, y poisoned). */
static void ll_vs_plain(const t_world_t* w, bufs_t* b) {
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

int main(void) {
  t_seed_init();
  fco_transport_t t = t_transport();
  t_require_ranks(t, 1);
  int quick = getenv("FCO_TEST_QUICK") && atoi(getenv("FCO_TEST_QUICK")) > 0;
  int max = t_max_ranks(t) < 4 ? t_max_ranks(t) : 4;
  const char* ll_only = getenv("FCO_TEST_LL");
  if (ll_only && !strcmp(ll_only, "only")) {
#ifdef FCO_HAVE_CUDA
    if (t_is_gpu(t)) {
      for (int p = 1; p <= max; p++) {
        t_world_t w;
        bufs_t b;
        t_context("P=%d: fco_comm_init_all", p);
        ASSERT_OK(t_world_init(&w, t, p, NULL));
        bufs_alloc(&b, &w);
        ll_tests(&w, &b, quick);
        bufs_free(&b);
        t_world_destroy(&w, 0);
        printf("P=%d: LL ok\n", p);
      }
      if (max >= 2) ll_silent_peer(t);
      printf("PASS\n");
      return 0;
    }
#endif
    printf("FCO_TEST_LL=only: the LL one-shot runs on GPU transports only\n");
    return 77;
  }
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
#ifdef FCO_HAVE_CUDA
    if (t_is_gpu(t)) {
      ll_tests(&w, &b, quick);
      for (int i = 0; i < FCO_GEMV_ALLREDUCE_NUM_IMPLS; i++) graph(&w, &b, i);
      setenv("FCO_CHECK_ARGS", "1", 1);
      for (int i = 1; i <= 2; i++) one_call(&w, &b, 3, 1000, 1000, FCO_BF16, 1, i);
      unsetenv("FCO_CHECK_ARGS");
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
  if (t_is_gpu(t) && max >= 2) ll_silent_peer(t);
#endif
  if (max < 4)
    printf("ranks %d..4 not run: transport %s has %d here\n", max + 1, fco_transport_name(t), max);
  printf("PASS\n");
  return 0;
}

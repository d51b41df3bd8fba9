/*
 * gemv_fixture.c — the fco_gemv_allreduce tests' fixture (gemv_fixture.h): buffers, inputs, the
 * float64 reference check, one call, back-to-back calls, CUDA-graph capture. Used by
 * test_gemv_allreduce.c, test_gemv_allreduce_kernels.c and test_gemv_allreduce_group.c; linked
 * into every test program.
 */
#include "gemv_fixture.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

const fco_dtype_t gemv_dtypes[3] = {FCO_F32, FCO_F16, FCO_BF16};

static size_t x_bytes(void) { return (size_t)GEMV_MAX_M * GEMV_MAX_KT * 4 + T_GUARD; }
static size_t w_bytes(void) { return GEMV_MAX_NK * 4 + T_GUARD; }
size_t gemv_y_bytes(void) { return (size_t)GEMV_MAX_M * GEMV_MAX_N * 4 + T_GUARD; }

void gemv_bufs_alloc(gemv_bufs_t* b, const t_world_t* w) {
  memset(b, 0, sizeof *b);
  b->t = w->transport;
  b->P = w->n;
  for (int r = 0; r < w->n; r++) {
    int d = t_rank_device(b->t, r);
    b->x[r] = t_alloc(b->t, d, x_bytes());
    b->w[r] = t_alloc(b->t, d, w_bytes());
    b->bias[r] = t_alloc(b->t, d, (size_t)GEMV_MAX_N * 4 + T_GUARD);
    b->y[r] = t_alloc(b->t, d, gemv_y_bytes());
    b->hx[r] = (float*)malloc((size_t)GEMV_MAX_M * GEMV_MAX_KT * 4);
    b->hw[r] = (float*)malloc(GEMV_MAX_NK * 4);
    ASSERT_NOT_NULL(b->hx[r]);
    ASSERT_NOT_NULL(b->hw[r]);
  }
  b->hb = (float*)malloc((size_t)GEMV_MAX_N * 4);
  b->hy = (unsigned char*)malloc(gemv_y_bytes());
  b->hy0 = (unsigned char*)malloc(gemv_y_bytes());
  ASSERT_NOT_NULL(b->hb);
  ASSERT_NOT_NULL(b->hy);
  ASSERT_NOT_NULL(b->hy0);
}

void gemv_each_world(fco_transport_t t, int max,
                     void (*body)(const t_world_t* w, gemv_bufs_t* b, void* arg), void* arg) {
  for (int p = 1; p <= max; p++) {
    t_world_t w;
    gemv_bufs_t b;
    double t0 = t_now_ms();
    t_context("P=%d: fco_comm_init_all", p);
    ASSERT_OK(t_world_init(&w, t, p, NULL));
    gemv_bufs_alloc(&b, &w);
    body(&w, &b, arg);
    gemv_bufs_free(&b);
    t_world_destroy(&w, 0);
    printf("P=%d: ok (%.0f ms)\n", p, t_now_ms() - t0);
    fflush(stdout);
  }
}

void gemv_bufs_free(gemv_bufs_t* b) {
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
static void upload(const gemv_bufs_t* b, int r, void* dst, const float* src, size_t n) {
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

/* The largest K ≤ limit (gemv_vec_kt: 1000) whose split (split_k) gives every rank a multiple
 * of 8: K_r · esize % 16 == 0 in every dtype, so every rank takes the vector path (and the PDL
 * prefetch). */
size_t gemv_vec_kt_le(int P, size_t limit) {
  size_t unit = 8 * (size_t)P * (P + 1) / 2;
  return unit * (limit / unit);
}
size_t gemv_vec_kt(int P) { return gemv_vec_kt_le(P, 1000); }

/* Fresh inputs, poisoned outputs (and their guards). */
void gemv_prepare(gemv_bufs_t* b, size_t M, size_t N, size_t kt, fco_dtype_t dt, int has_bias,
                  uint64_t seed) {
  b->M = M;
  b->N = N;
  b->dt = dt;
  b->has_bias = has_bias;
  split_k(kt, b->P, b->K);
  ASSERT_LE(M, (size_t)GEMV_MAX_M); /* the buffers' room (gemv_bufs_alloc) */
  ASSERT_LE(N, (size_t)GEMV_MAX_N);
  for (int r = 0; r < b->P; r++) {
    ASSERT_LE(b->K[r], (size_t)GEMV_MAX_KT);
    ASSERT_LE(N * b->K[r], GEMV_MAX_NK);
  }
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

fco_result_t gemv_issue_rank(const t_world_t* w, const gemv_bufs_t* b, int r, int impl,
                             void* stream) {
  return fco_gemv_allreduce(w->comms[r], b->x[r], b->w[r], b->has_bias ? b->bias[r] : NULL,
                            b->y[r], b->M, b->N, b->K[r], b->dt, impl, stream);
}

fco_result_t gemv_issue(const t_world_t* w, const gemv_bufs_t* b, int impl,
                        void* const* streams) {
  fco_result_t first = FCO_OK;
  ASSERT_OK(fco_group_start());
  for (int r = 0; r < w->n; r++) {
    fco_result_t e = gemv_issue_rank(w, b, r, impl, streams ? streams[r] : NULL);
    if (e != FCO_OK && first == FCO_OK) first = e;
  }
  fco_result_t e = fco_group_end();
  return first != FCO_OK ? first : e;
}

/* Compare every rank's y with the float64 reference; returns wrong elements (prints a few). */
/* The float64 reference and the magnitude it is judged by (Σ|x·w| + |bias|), {ref, mag} per
 * element of y, columns split over threads (the grouped tiles' shapes, M 64 × N 1000 × K 4608
 * a rank, take ~0.3 s a rank on one core: most of those tests' time). */
typedef struct {
  const t_world_t* w;
  const gemv_bufs_t* b;
  double* out;
  size_t n0, n1;
} ref_job_t;

static void* ref_cols(void* arg) {
  const ref_job_t* j = (const ref_job_t*)arg;
  const gemv_bufs_t* b = j->b;
  for (size_t m = 0; m < b->M; m++)
    for (size_t n = j->n0; n < j->n1; n++) {
      double ref = b->hb[n], mag = fabs(b->hb[n]);
      for (int r = 0; r < j->w->n; r++) {
        const float* xr = b->hx[r] + m * b->K[r];
        const float* wr = b->hw[r] + n * b->K[r];
        for (size_t k = 0; k < b->K[r]; k++) {
          double p = (double)xr[k] * (double)wr[k];
          ref += p;
          mag += fabs(p);
        }
      }
      j->out[2 * (m * b->N + n)] = ref;
      j->out[2 * (m * b->N + n) + 1] = mag;
    }
  return NULL;
}

static void ref_all(const t_world_t* w, const gemv_bufs_t* b, double* out) {
  enum { kMaxThreads = 16 };
  double macs = 0;
  for (int r = 0; r < w->n; r++) macs += (double)b->M * (double)b->N * (double)b->K[r];
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = macs < 4e6 ? 1 : cpus < 1 ? 1 : cpus > kMaxThreads ? kMaxThreads : (int)cpus;
  if ((size_t)nt > b->N) nt = (int)b->N;
  ref_job_t jobs[kMaxThreads];
  pthread_t th[kMaxThreads];
  int started = 0;
  for (int i = 0; i < nt; i++) {
    jobs[i] = (ref_job_t){w, b, out, b->N * (size_t)i / (size_t)nt,
                          b->N * (size_t)(i + 1) / (size_t)nt};
    if (i > 0 && pthread_create(&th[i], NULL, ref_cols, &jobs[i]) == 0) {
      started |= 1 << i;
      continue;
    }
    if (i > 0) ref_cols(&jobs[i]); /* no thread: this one inline */
  }
  ref_cols(&jobs[0]);
  for (int i = 1; i < nt; i++)
    if (started & (1 << i)) pthread_join(th[i], NULL);
}

size_t gemv_check(const t_world_t* w, gemv_bufs_t* b) {
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
  double* ref = (double*)malloc(2 * M * N * sizeof(double));
  ASSERT_NOT_NULL(ref);
  ref_all(w, b, ref);
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      const double want = ref[2 * (m * N + n)], mag = ref[2 * (m * N + n) + 1];
      double got = t_get_elem(b->dt, b->hy0, m * N + n);
      if (fabs(got - want) <= tol * mag + abs_tol) continue;
      if (wrong++ < 5)
        printf("y[%zu][%zu] = %.8g, want %.8g (|err| %.3g > %.1g x %.4g)\n", m, n, got, want,
               fabs(got - want), tol, mag);
    }
  free(ref);
  /* cpu: bit for bit the order src/cpu/gemv_allreduce.c documents — each rank's partial in
   * fp32, k ascending; the partials summed in fp32 in rank order; the bias added once, after;
   * rounded to the dtype (the tolerance above passed a reference summing in double, or adding
   * the bias first: session 55's mutation audit). */
  if (b->t == FCO_TRANSPORT_CPU) {
    unsigned char want[4];
    size_t bad = 0;
    for (size_t m = 0; m < M; m++)
      for (size_t n = 0; n < N; n++) {
        float sum = 0.0f;
        for (int r = 0; r < w->n; r++) {
          const float* xr = b->hx[r] + m * b->K[r];
          const float* wr = b->hw[r] + n * b->K[r];
          float part = 0.0f;
          for (size_t k = 0; k < b->K[r]; k++) part += xr[k] * wr[k];
          sum = r == 0 ? part : sum + part;
        }
        if (b->has_bias) sum += b->hb[n];
        t_set_elem(b->dt, want, 0, sum);
        if (!memcmp(want, b->hy0 + (m * N + n) * es, es)) continue;
        if (bad++ < 5)
          printf("cpu: y[%zu][%zu] = %.9g, the documented fp32 order gives %.9g\n", m, n,
                 t_get_elem(b->dt, b->hy0, m * N + n), t_get_elem(b->dt, want, 0));
      }
    wrong += bad;
  }
  return wrong;
}

void gemv_one_call(const t_world_t* w, gemv_bufs_t* b, size_t M, size_t N, size_t kt,
                   fco_dtype_t dt, int has_bias, int impl) {
  uint64_t seed = t_next_seed();
  /* the knobs as the library reads them (its parsers: a value it ignores is not described) */
  const char* pf = getenv("FCO_GEMV_PDL_PREFETCH");
  const char* grp = getenv("FCO_GEMV_GROUP");
  const char* spl = getenv("FCO_GEMV_SPLIT");
  t_context("P=%d M=%zu N=%zu K=%zu %s %s impl=%d%s%s%s%s%s%s%s%s%s%s%s seed=0x%016llx", w->n, M, N,
            kt, fco_dtype_name(dt), has_bias ? "bias" : "no bias", impl,
            fco_env_int("FCO_GEMV_AR_LL", -1) > 0 ? " LL" : "",
            fco_env_flag("FCO_GEMV_PDL", 1) ? " PDL (GPUs)" : " PDL off",
            pf ? " prefetch=" : "", pf ? pf : "", grp ? " group=" : "", grp ? grp : "",
            spl ? " split=" : "", spl ? spl : "",
            fco_env_flag("FCO_GEMV_GROUP_FP32", 0) ? " group-fp32" : "",
            fco_env_int("FCO_GEMV_GROUP_TMA", -1) == 0 ? " group-tma=0" : "",
            fco_env_flag("FCO_GEMV_SPLIT_PAIR", 1) ? "" : " no-pair", (unsigned long long)seed);
  gemv_prepare(b, M, N, kt, dt, has_bias, seed);
  ASSERT_OK(gemv_issue(w, b, impl, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
}

/* Back-to-back calls, no sync between, impls alternating; inputs fixed, so the last y must
 * be right (a stale epoch or an overwritten half shows as a wrong value or a timeout). */
void gemv_back_to_back(const t_world_t* w, gemv_bufs_t* b, int calls) {
  uint64_t seed = t_next_seed();
  t_context("P=%d %d back-to-back calls seed=0x%016llx", w->n, calls, (unsigned long long)seed);
  gemv_prepare(b, 5, 333, 517, FCO_BF16, 1, seed);
  for (int i = 0; i < calls; i++)
    ASSERT_OK(gemv_issue(w, b, i % 7 == 3 ? 0 : i % 11 == 5 ? 3 : 1 + i % 2, NULL));
  t_sync(w);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
}

#ifdef FCO_HAVE_CUDA
#define CK(call)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) t_fail(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

void gemv_capture_init(gemv_capture_t* c, const t_world_t* w) {
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

void gemv_capture_sync(const gemv_capture_t* c) {
  for (int s = 0; s < c->nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(c->t, s)));
    CK(cudaStreamSynchronize(c->st[s]));
  }
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
}

void gemv_capture_begin(gemv_capture_t* c) {
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  CK(cudaStreamBeginCapture(c->st[0], cudaStreamCaptureModeThreadLocal));
  CK(cudaEventRecord(c->fork, c->st[0]));
  for (int s = 1; s < c->nstreams; s++) CK(cudaStreamWaitEvent(c->st[s], c->fork, 0));
}

void gemv_capture_end(gemv_capture_t* c) {
  for (int s = 1; s < c->nstreams; s++) {
    CK(cudaSetDevice(t_rank_device(c->t, s)));
    CK(cudaEventRecord(c->join[s], c->st[s]));
    CK(cudaStreamWaitEvent(c->st[0], c->join[s], 0));
  }
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  CK(cudaStreamEndCapture(c->st[0], &c->g));
  CK(cudaGraphInstantiate(&c->ge, c->g, 0));
}

void gemv_capture_replay(gemv_capture_t* c, int times) {
  CK(cudaSetDevice(t_rank_device(c->t, 0)));
  for (int i = 0; i < times; i++) CK(cudaGraphLaunch(c->ge, c->st[0]));
  CK(cudaStreamSynchronize(c->st[0]));
}

void gemv_capture_free(gemv_capture_t* c) {
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
void gemv_graph(const t_world_t* w, gemv_bufs_t* b, int impl) {
  gemv_graph_shape(w, b, impl, 16, 1000, 1000, FCO_BF16);
}

void gemv_graph_shape(const t_world_t* w, gemv_bufs_t* b, int impl, size_t M, size_t N, size_t kt,
                      fco_dtype_t dt) {
  gemv_capture_t c;
  gemv_capture_init(&c, w);
  uint64_t seed = t_next_seed();
  t_context("P=%d CUDA graph impl=%d M=%zu N=%zu K=%zu %s seed=0x%016llx", w->n, impl, M, N, kt,
            fco_dtype_name(dt), (unsigned long long)seed);
  gemv_prepare(b, M, N, kt, dt, 1, seed);
  ASSERT_OK(gemv_issue(w, b, impl, c.sp)); /* eager: workspace growth, cuBLAS handle */
  gemv_capture_sync(&c);
  gemv_capture_begin(&c);
  ASSERT_OK(gemv_issue(w, b, impl, c.sp));
  gemv_capture_end(&c);
  gemv_capture_replay(&c, 99);
  size_t es = fco_dtype_size(b->dt);
  for (int r = 0; r < w->n; r++)
    t_memset(w->transport, t_rank_device(w->transport, r), b->y[r], T_POISON, b->M * b->N * es);
  gemv_capture_replay(&c, 1);
  for (int r = 0; r < w->n; r++) ASSERT_OK(fco_comm_get_async_error(w->comms[r]));
  ASSERT_EQ(gemv_check(w, b), 0);
  gemv_capture_free(&c);
}
#endif

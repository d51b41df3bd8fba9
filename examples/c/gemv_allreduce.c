/*
 * gemv_allreduce.c — fco from C: the row-parallel linear of tensor-parallel decode,
 * y = Σ_r x_r · W_r^T (+ bias), on P ranks driven by one thread (fco_comm_init_all and one
 * group per call), checked on every rank against a float64 loop (error relative to the sum of
 * the terms' magnitudes: 1e-5 in f32, 1e-2 in bf16, as tests/ do), then FCO_IMPL_AUTO timed
 * against the unfused baseline (impl 0: cuBLAS + NCCL on GPUs) in the same run: calls issued
 * eagerly, and on GPUs also one call of every rank captured into a CUDA graph and replayed, as
 * decode loops run (the workspace reserved first: growth cannot happen while capturing).
 *
 *   make && build/examples/gemv_allreduce [M N K P [f32|bf16]]
 *       defaults: M 4, N 8192, K 8192 (before the split over ranks), P 2, bf16 on GPUs;
 *       M 3, N 1000, K 600, f32 on the cpu transport (its reference kernels are slow)
 *   FCO_TRANSPORT=local build/examples/gemv_allreduce      P virtual ranks on one GPU
 *   FCO_TRANSPORT=cpu   build/examples/gemv_allreduce      no GPU: ranks are threads
 *   (FCO_TRANSPORT unset: nccl with a GPU, else cpu — cpu when built without FCO_HAVE_CUDA)
 * Against an installed fco (make install):
 *   cc gemv_allreduce.c $(pkg-config --cflags --libs fco) -lm
 *   and for GPU buffers add -DFCO_HAVE_CUDA -I$CUDA_HOME/include -L$CUDA_HOME/lib64 -lcudart.
 * FCO_TEST_SEED=<seed> repeats the inputs of a run (the seed is printed).
 * Exit 0: correct on every rank; 1: wrong or an error; 77: this machine cannot run P ranks on
 * the transport (e.g. nccl with one GPU). `make test` runs it on the cpu transport
 * (build/tests/test_example_gemv_allreduce, the same source).
 */
#include <fco.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#ifdef FCO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define MAX_P 8
#define CHECK(call)                                                                       \
  do {                                                                                    \
    fco_result_t r_ = (call);                                                             \
    if (r_ != FCO_OK) {                                                                   \
      fprintf(stderr, "%s: %s (%s)\n", #call, fco_result_string(r_), fco_last_error(comm_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static fco_comm_t comm_; /* the communicator whose last error CHECK prints (NULL: thread's) */
static int g_gpu;         /* buffers in device memory (GPU transports) */

/* ---- buffers: device memory on GPU transports, host memory on the cpu transport ---------- */
static void* buf_alloc(int dev, size_t bytes) {
#ifdef FCO_HAVE_CUDA
  if (g_gpu) {
    void* p = NULL;
    if (cudaSetDevice(dev) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
      fprintf(stderr, "cudaMalloc(%zu) on device %d failed\n", bytes, dev);
      exit(1);
    }
    return p;
  }
#endif
  (void)dev;
  void* p = malloc(bytes);
  if (!p) exit(1);
  return p;
}
static void buf_free(int dev, void* p) {
#ifdef FCO_HAVE_CUDA
  if (g_gpu) {
    cudaSetDevice(dev);
    cudaFree(p);
    return;
  }
#endif
  (void)dev;
  free(p);
}
static void buf_copy(int dev, void* dst, const void* src, size_t bytes, int to_dev) {
#ifdef FCO_HAVE_CUDA
  if (g_gpu) {
    cudaSetDevice(dev);
    if (cudaMemcpy(dst, src, bytes, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost) !=
        cudaSuccess)
      exit(1);
    return;
  }
#endif
  (void)dev, (void)to_dev;
  memcpy(dst, src, bytes);
}
static void sync_all(int P, const int* dev) {
#ifdef FCO_HAVE_CUDA
  for (int r = 0; g_gpu && r < P; r++) {
    cudaSetDevice(dev[r]);
    cudaDeviceSynchronize();
  }
#endif
  (void)P, (void)dev;
}

/* ---- bf16: round to nearest even, and back -------------------------------------------------- */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* Can this machine run P ranks on the transport fco will pick? Else why not (exit 77). */
static const char* cannot_run(int P) {
  const char* t = getenv("FCO_TRANSPORT");
  const int unset = !t || !*t || !strcasecmp(t, "auto"); /* as the library: any case */
#if defined(FCO_EXAMPLE_AS_TEST) || !defined(FCO_HAVE_CUDA)
  /* the suite's convention, and a build without GPU buffers: unset FCO_TRANSPORT means cpu */
  if (unset) {
    setenv("FCO_TRANSPORT", "cpu", 1);
    return NULL;
  }
#endif
  int gpus = 0;
#ifdef FCO_HAVE_CUDA
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
#else
  /* a GPU transport named; any other name reaches fco_comm_init_all, which refuses it */
  if (!strcasecmp(t, "nccl") || !strcasecmp(t, "local"))
    return "built without -DFCO_HAVE_CUDA (no GPU buffers): FCO_TRANSPORT=cpu, or rebuild";
#endif
  const int nccl = (t && !strcasecmp(t, "nccl")) || (unset && gpus > 0);
  const int local = t && !strcasecmp(t, "local");
  if ((nccl || local) && gpus == 0)
    return "the GPU transports need a GPU (FCO_TRANSPORT=cpu runs without)";
  if (nccl && gpus < P)
    return "the nccl transport needs one GPU per rank (FCO_TRANSPORT=local runs virtual ranks "
           "on one)";
  return NULL;
}

/* ---- one call on every rank -------------------------------------------------------------- */
typedef struct {
  int P, M, N, Kr[MAX_P], dev[MAX_P], nstreams;
  fco_dtype_t dt;
  size_t es;  /* bytes of an element */
  void* tmp;  /* host staging, at least M·N elements */
  fco_comm_t comms[MAX_P];
  void *x[MAX_P], *w[MAX_P], *y[MAX_P], *bias[MAX_P];
  void* stream[MAX_P]; /* rank r's stream; on the local transport all ranks share one */
} world_t;

/* Every rank's op inside one group (one thread drives all ranks). */
static void call(const world_t* W, int impl) {
  CHECK(fco_group_start());
  for (int r = 0; r < W->P; r++) {
    comm_ = W->comms[r];
    CHECK(fco_gemv_allreduce(W->comms[r], W->x[r], W->w[r], W->bias[r], W->y[r], W->M, W->N,
                             W->Kr[r], W->dt, impl, W->stream[r]));
  }
  comm_ = NULL;
  CHECK(fco_group_end());
}

/* Every rank's y set to NaN (all-ones bytes) before a call that is checked. */
static void poison_y(const world_t* W) {
  memset(W->tmp, 0xFF, (size_t)W->M * W->N * W->es);
  for (int r = 0; r < W->P; r++) buf_copy(W->dev[r], W->y[r], W->tmp, (size_t)W->M * W->N * W->es, 1);
}

/* Every rank's y against the float64 reference: |got − ref| ≤ tol · Σ|terms| (bf16 / f16 round
 * each rank's partial and y to the dtype, so an element whose terms cancel is judged against
 * the terms' size). Returns the wrong elements (prints a few); *worst = the largest error. */
static int check_y(const world_t* W, const double* ref, const double* mag, double tol,
                   double* worst) {
  int wrong = 0;
  *worst = 0;
  for (int r = 0; r < W->P; r++) {
    buf_copy(W->dev[r], W->tmp, W->y[r], (size_t)W->M * W->N * W->es, 0);
    for (size_t i = 0; i < (size_t)W->M * W->N; i++) {
      double got = W->es == 2 ? from_bf16(((uint16_t*)W->tmp)[i]) : ((float*)W->tmp)[i];
      double err = fabs(got - ref[i]) / mag[i];
      if (!(err <= tol)) { /* NaN (poison left) fails too */
        if (wrong++ < 5)
          fprintf(stderr, "rank %d y[%zu][%zu] = %g, expected %g\n", r, i / W->N, i % W->N, got,
                  ref[i]);
      } else if (err > *worst) {
        *worst = err;
      }
    }
  }
  return wrong;
}

#ifdef FCO_HAVE_CUDA
#define CU(x)                                                                     \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                    \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

/* One call of every rank captured into a graph: rank 0's stream forks the other streams (an
 * event) and joins them at the end, so the graph holds every rank's kernels. */
static cudaGraphExec_t capture(const world_t* W, int impl) {
  cudaStream_t s0 = (cudaStream_t)W->stream[0];
  cudaEvent_t fork, join[MAX_P];
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CU(cudaSetDevice(W->dev[0]));
  CU(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CU(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
  CU(cudaEventRecord(fork, s0));
  for (int s = 1; s < W->nstreams; s++) CU(cudaStreamWaitEvent((cudaStream_t)W->stream[s], fork, 0));
  call(W, impl);
  for (int s = 1; s < W->nstreams; s++) {
    CU(cudaSetDevice(W->dev[s]));
    CU(cudaEventCreateWithFlags(&join[s], cudaEventDisableTiming));
    CU(cudaEventRecord(join[s], (cudaStream_t)W->stream[s]));
    CU(cudaStreamWaitEvent(s0, join[s], 0));
  }
  CU(cudaSetDevice(W->dev[0]));
  CU(cudaStreamEndCapture(s0, &g));
  CU(cudaGraphInstantiate(&ge, g, 0));
  CU(cudaGraphDestroy(g));
  CU(cudaEventDestroy(fork));
  for (int s = 1; s < W->nstreams; s++) CU(cudaEventDestroy(join[s]));
  return ge;
}
#endif

/* Median over 5 rounds of µs per call for impl 0 and AUTO, the two alternating round by round
 * (a column timed first would carry the GPU's clock ramp); graph: replays of one captured call
 * each, then y poisoned and AUTO's graph replayed once (the caller checks it). us[0] impl 0,
 * us[1] AUTO. */
enum { ROUNDS = 5 };
static void time_both(const world_t* W, int graph, int iters, double us[2]) {
  double r_us[2][ROUNDS];
#ifdef FCO_HAVE_CUDA
  cudaGraphExec_t ge[2] = {0, 0};
  if (graph)
    for (int k = 0; k < 2; k++) ge[k] = capture(W, k == 0 ? 0 : FCO_IMPL_AUTO);
#endif
  for (int round = -1; round < ROUNDS; round++) /* round -1: warm-up, not timed */
    for (int k = 0; k < 2; k++) {
      const int impl = k == 0 ? 0 : FCO_IMPL_AUTO, n = round < 0 ? 10 : iters;
      sync_all(W->P, W->dev);
      double t0 = now_us();
      for (int i = 0; i < n; i++) {
#ifdef FCO_HAVE_CUDA
        if (graph) {
          CU(cudaGraphLaunch(ge[k], (cudaStream_t)W->stream[0]));
          continue;
        }
#endif
        call(W, impl);
      }
      sync_all(W->P, W->dev);
      if (round >= 0) r_us[k][round] = (now_us() - t0) / n;
    }
#ifdef FCO_HAVE_CUDA
  if (graph) { /* y poisoned, AUTO's graph replayed once more: the caller checks y */
    sync_all(W->P, W->dev);
    poison_y(W);
    CU(cudaGraphLaunch(ge[1], (cudaStream_t)W->stream[0]));
    sync_all(W->P, W->dev);
  }
  for (int k = 0; graph && k < 2; k++) CU(cudaGraphExecDestroy(ge[k]));
#endif
  for (int k = 0; k < 2; k++) { /* median: sort the few values */
    for (int i = 1; i < ROUNDS; i++)
      for (int j = i; j > 0 && r_us[k][j] < r_us[k][j - 1]; j--) {
        double v = r_us[k][j];
        r_us[k][j] = r_us[k][j - 1];
        r_us[k][j - 1] = v;
      }
    us[k] = r_us[k][ROUNDS / 2];
  }
  (void)graph;
}

/* argv[i] as a whole decimal int (atoi took "3x" as 3), else usage and exit 1. */
static int arg_int(char** argv, int i) {
  char* end = NULL;
  const long v = strtol(argv[i], &end, 10);
  if (end == argv[i] || *end || v < 0 || v > (1L << 30)) {
    fprintf(stderr, "argument %d '%s': want a whole number 0..2^30\n"
            "usage: %s [M N K P [f32|bf16]]\n", i, argv[i], argv[0]);
    exit(1);
  }
  return (int)v;
}

int main(int argc, char** argv) {
  world_t W;
  memset(&W, 0, sizeof W);
  if (argc > 6 || (argc > 5 && strcmp(argv[5], "f32") && strcmp(argv[5], "bf16"))) {
    fprintf(stderr, "usage: %s [M N K P [f32|bf16]]%s\n", argv[0],
            argc > 6 ? "" : " (dtype: f32 or bf16)");
    return 1;
  }
  for (int i = 1; i < argc && i <= 4; i++) (void)arg_int(argv, i);
  const int P = W.P = argc > 4 ? arg_int(argv, 4) : 2;
  if (P < 1 || P > MAX_P) {
    fprintf(stderr, "P %d: want 1..%d\n", P, MAX_P);
    return 1;
  }
  const char* why = cannot_run(P);
  if (why) {
    printf("SKIP: %d ranks: %s\n", P, why);
    return 77;
  }
  CHECK(fco_comm_init_all(W.comms, P, NULL, NULL)); /* transport: FCO_TRANSPORT, else by hardware */
  fco_transport_t t;
  CHECK(fco_comm_transport(W.comms[0], &t));
  g_gpu = t != FCO_TRANSPORT_CPU;
  const int M = W.M = argc > 1 ? arg_int(argv, 1) : g_gpu ? 4 : 3;
  const int N = W.N = argc > 2 ? arg_int(argv, 2) : g_gpu ? 8192 : 1000;
  const int K = argc > 3 ? arg_int(argv, 3) : g_gpu ? 8192 : 600;
  const int bf16 = argc > 5 ? !strcmp(argv[5], "bf16") : g_gpu;
  W.dt = bf16 ? FCO_BF16 : FCO_F32;
  const size_t es = W.es = bf16 ? 2 : 4;
  if (M < 1 || N < 1 || K < P) {
    fprintf(stderr, "M %d, N %d, K %d: want M, N >= 1 and K >= P\n", M, N, K);
    return 1;
  }
  int version = 0; /* the loaded library's, which must be the one fco.h describes */
  CHECK(fco_get_version(&version));
  if (version != FCO_VERSION_CODE) {
    fprintf(stderr, "the loaded libfco is version code %d, fco.h (this program's) says %d\n",
            version, FCO_VERSION_CODE);
    return 1;
  }
  printf("fco %d.%d.%d, transport %s, P %d: y[%d, %d] = sum over ranks of x_r[%d, K_r] "
         "W_r[%d, K_r]^T + bias, K %d split over the ranks, %s\n",
         version / 10000, version / 100 % 100, version % 100, fco_transport_name(t), P, M, N, M,
         N, K, fco_dtype_name(W.dt));

  /* Rank r's slice of the reduction dimension: K / P, the last rank takes the remainder. */
  float *hx[MAX_P], *hw[MAX_P], *hb = malloc(sizeof(float) * N); /* values as the ranks hold them */
  const size_t kmax = (size_t)K / P + P, rows = (size_t)(M > N ? M : N);
  void* tmp = malloc(rows * (kmax > (size_t)N ? kmax : (size_t)N) * 4); /* staging of one buffer */
  /* float64 reference and its magnitude Σ|x·w| + |bias|: bf16 / f16 round each rank's partial
   * and y to the dtype, so an element whose terms cancel is judged against the terms' size */
  double *ref = malloc(sizeof(double) * M * N), *mag = malloc(sizeof(double) * M * N);
  if (!hb || !tmp || !ref || !mag) return 1;
  W.tmp = tmp;
  /* inputs: FCO_TEST_SEED=<seed> (the suite's variable) repeats a run's values */
  const char* seed_env = getenv("FCO_TEST_SEED");
  const unsigned seed0 = seed_env ? (unsigned)strtoul(seed_env, NULL, 0) : (unsigned)time(NULL);
  unsigned seed = seed0;
  for (int n = 0; n < N; n++) hb[n] = (float)(rand_r(&seed) % 2001 - 1000) / 1000.0f;
  W.nstreams = t == FCO_TRANSPORT_LOCAL ? 1 : P;
  for (int r = 0; r < P; r++) {
    const int* Kr = W.Kr;
    W.Kr[r] = K / P + (r == P - 1 ? K % P : 0);
    W.dev[r] = t == FCO_TRANSPORT_NCCL ? r : 0;
    hx[r] = malloc(sizeof(float) * M * Kr[r]);
    hw[r] = malloc(sizeof(float) * N * Kr[r]);
    if (!hx[r] || !hw[r]) return 1;
    W.x[r] = buf_alloc(W.dev[r], (size_t)M * Kr[r] * es);
    W.w[r] = buf_alloc(W.dev[r], (size_t)N * Kr[r] * es);
    W.y[r] = buf_alloc(W.dev[r], (size_t)M * N * es);
    W.bias[r] = buf_alloc(W.dev[r], (size_t)N * es); /* the same bias on every rank; added once */
#ifdef FCO_HAVE_CUDA
    if (g_gpu && r < W.nstreams) {
      CU(cudaSetDevice(W.dev[r]));
      CU(cudaStreamCreateWithFlags((cudaStream_t*)&W.stream[r], cudaStreamNonBlocking));
    }
#endif
    if (r >= W.nstreams) W.stream[r] = W.stream[0];
    struct { float* h; void* d; size_t n; } ins[3] = {
        {hx[r], W.x[r], (size_t)M * Kr[r]}, {hw[r], W.w[r], (size_t)N * Kr[r]}, {hb, W.bias[r], (size_t)N}};
    for (int i = 0; i < 3; i++) {
      for (size_t j = 0; j < ins[i].n; j++) {
        float v = i == 2 ? ins[i].h[j] : (float)(rand_r(&seed) % 2001 - 1000) / 1000.0f;
        if (bf16) {
          ((uint16_t*)tmp)[j] = to_bf16(v);
          v = from_bf16(((uint16_t*)tmp)[j]);
        } else {
          ((float*)tmp)[j] = v;
        }
        ins[i].h[j] = v;
      }
      buf_copy(W.dev[r], ins[i].d, tmp, ins[i].n * es, 1);
    }
  }

  /* Correctness: y poisoned (NaN), AUTO and impl 0, every rank against the float64 loop. */
  const double tol = bf16 ? 1e-2 : 1e-5;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double v = hb[n], a = fabs(hb[n]);
      for (int q = 0; q < P; q++)
        for (int k = 0; k < W.Kr[q]; k++) {
          const double prod = (double)hx[q][(size_t)m * W.Kr[q] + k] * hw[q][(size_t)n * W.Kr[q] + k];
          v += prod;
          a += fabs(prod);
        }
      ref[(size_t)m * N + n] = v;
      mag[(size_t)m * N + n] = a + 1e-30;
    }
  int wrong = 0;
  for (int pass = 0; pass < 2; pass++) {
    const int impl = pass == 0 ? FCO_IMPL_AUTO : 0;
    poison_y(&W);
    call(&W, impl);
    sync_all(P, W.dev);
    for (int r = 0; r < P; r++) CHECK(fco_comm_get_async_error(W.comms[r]));
    double worst;
    const int bad = check_y(&W, ref, mag, tol, &worst);
    wrong += bad;
    printf("%-6s ran \"%s\": every rank's y %s (largest error / sum of |terms| %.1e, bound "
           "%.0e; seed %u)\n",
           impl == 0 ? "impl 0" : "AUTO", fco_last_plan(W.comms[0]), bad ? "WRONG" : "correct",
           worst, tol, seed0);
  }
  if (wrong) {
    fprintf(stderr, "%d wrong elements\n", wrong);
    return 1;
  }

  /* Timing, same run. The graphs are captured after the calls above grew the workspace; a
   * program that captures first reserves it: fco_gemv_allreduce_workspace, fco_comm_reserve. */
  const char* note = t == FCO_TRANSPORT_LOCAL ? " (virtual ranks share one GPU: not a multi-GPU result)" : "";
  for (int graph = 0; graph <= g_gpu; graph++) {
    if (graph) {
      size_t need = 0, b = 0;
      for (int r = 0; r < P; r++)
        for (int k = 0; k < 2; k++) {
          CHECK(fco_gemv_allreduce_workspace(W.comms[r], M, N, W.Kr[r], W.dt,
                                             k == 0 ? 0 : FCO_IMPL_AUTO, &b));
          if (b > need) need = b;
        }
      CHECK(fco_comm_reserve(W.comms[0], need)); /* collective: every rank of the world at once */
    }
    double us[2];
    const int iters = g_gpu ? 200 : 5;
    time_both(&W, graph, iters, us);
    printf("time per call (%s, median of %d rounds of %d): impl 0 %.2f us, AUTO %.2f us: %.2fx%s\n",
           !g_gpu ? "cpu transport, CPU times" : graph ? "CUDA graph replays" : "eager calls",
           ROUNDS, iters, us[0], us[1], us[0] / us[1], note);
    if (graph) { /* the last replay (AUTO's graph, y poisoned before it) */
      for (int r = 0; r < P; r++) CHECK(fco_comm_get_async_error(W.comms[r]));
      double worst;
      if (check_y(&W, ref, mag, tol, &worst)) {
        fprintf(stderr, "AUTO's CUDA graph replay: y wrong\n");
        return 1;
      }
      printf("AUTO's CUDA graph replay: every rank's y correct (largest error %.1e)\n", worst);
    }
  }

  for (int r = 0; r < P; r++) {
    buf_free(W.dev[r], W.x[r]);
    buf_free(W.dev[r], W.w[r]);
    buf_free(W.dev[r], W.y[r]);
    buf_free(W.dev[r], W.bias[r]);
#ifdef FCO_HAVE_CUDA
    if (g_gpu && r < W.nstreams) {
      CU(cudaSetDevice(W.dev[r]));
      CU(cudaStreamDestroy((cudaStream_t)W.stream[r]));
    }
#endif
    CHECK(fco_comm_destroy(W.comms[r]));
    free(hx[r]);
    free(hw[r]);
  }
  free(hb);
  free(tmp);
  free(ref);
  free(mag);
  printf("PASS\n");
  return 0;
}

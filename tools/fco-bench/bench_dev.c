/*
 * bench_dev.c — fco-bench's device layer: streams, timing events, per-rank buffer pools,
 * uploads/downloads, and bench_time (CUDA events per iteration, CUDA graph replays, or
 * clock_gettime on the cpu transport). On the cpu transport "device" buffers are host memory.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#ifdef FCO_HAVE_CUDA
#include <cuda_runtime_api.h>

/* CUDA failures are the bench's own: record the message, return FCO_ERR_CUDA upward. */
#define BENCH_CUDA(ctx, call)                                                              \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      (void)cudaGetLastError();                                                            \
      return bench_fail((ctx), FCO_ERR_CUDA, "%s:%d %s: %s", __FILE__, __LINE__, #call,    \
                        cudaGetErrorString(e_));                                           \
    }                                                                                      \
  } while (0)

static int stream_dev(const bench_ctx_t* ctx, int s) { return ctx->devs[s]; }
#endif

int bench_gpu_count(void) {
#ifdef FCO_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver / no device: a CPU machine */
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

void bench_gpu_name(int dev, char* buf, size_t n) {
  buf[0] = 0;
#ifdef FCO_HAVE_CUDA
  struct cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, dev) == cudaSuccess) snprintf(buf, n, "%s", p.name);
  else (void)cudaGetLastError();
#else
  (void)dev;
  (void)n;
#endif
}

void* bench_stream(bench_ctx_t* ctx, int rank) {
  if (!ctx->on_gpu) return NULL;
  const int s = ctx->nstreams == 1 ? 0 : rank;
  return ctx->on_side ? ctx->side[s] : ctx->streams[s];
}

#ifdef FCO_HAVE_CUDA
/* The HBM rate of device dev: the median of 9 device-to-device copies of max(256 MiB, 4 × L2)
 * after 2 warm-ups, bytes read and written over the time (as DESIGN.md's 4.3 TB/s on an H200).
 * 0 where it cannot be measured (no memory for the two buffers). The current device is kept. */
static double measure_hbm(int dev, size_t l2) {
  int was = -1;
  if (cudaGetDevice(&was) != cudaSuccess) was = -1;
  size_t bytes = (size_t)256 << 20;
  if (bytes < 4 * l2) bytes = 4 * l2;
  void *a = NULL, *b = NULL;
  cudaStream_t st = NULL;
  cudaEvent_t e[2] = {NULL, NULL};
  double gbps = 0, t[9];
  int ok = cudaSetDevice(dev) == cudaSuccess && cudaMalloc(&a, bytes) == cudaSuccess &&
           cudaMalloc(&b, bytes) == cudaSuccess &&
           cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess &&
           cudaEventCreate(&e[0]) == cudaSuccess && cudaEventCreate(&e[1]) == cudaSuccess &&
           cudaMemsetAsync(a, 0, bytes, st) == cudaSuccess;
  for (int i = -2; ok && i < 9; i++) {
    float ms = 0;
    ok = cudaEventRecord(e[0], st) == cudaSuccess &&
         cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st) == cudaSuccess &&
         cudaEventRecord(e[1], st) == cudaSuccess && cudaEventSynchronize(e[1]) == cudaSuccess &&
         cudaEventElapsedTime(&ms, e[0], e[1]) == cudaSuccess && ms > 0;
    if (ok && i >= 0) t[i] = ms;
  }
  if (ok) gbps = 2.0 * (double)bytes / (bench_median(t, 9) * 1e-3) / 1e9;
  (void)cudaGetLastError();
  if (e[0]) cudaEventDestroy(e[0]);
  if (e[1]) cudaEventDestroy(e[1]);
  if (st) cudaStreamDestroy(st);
  cudaFree(a);
  cudaFree(b);
  if (was >= 0) cudaSetDevice(was);
  (void)cudaGetLastError();
  return gbps;
}
#endif

static size_t cpu_cache_bytes(void) {
  long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
  l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  /* Capped: a server's whole L3 (hundreds of MB) would make every size use 64 sets. */
  size_t cap = (size_t)64 << 20;
  return l3 > 0 && (size_t)l3 < cap ? (size_t)l3 : cap;
}

fco_result_t bench_dev_init(bench_ctx_t* ctx) {
  ctx->cache_bytes = cpu_cache_bytes();
  ctx->hbm_gbps = BENCH_HBM_GBPS;
  ctx->hbm_measured = 0;
  if (!ctx->on_gpu) return FCO_OK;
#ifdef FCO_HAVE_CUDA
  /* local: every virtual rank on one GPU, launched as one grid, so one stream. */
  ctx->nstreams = ctx->transport == FCO_TRANSPORT_LOCAL ? 1 : ctx->nranks;
  int nev = ctx->opt.iters + 1;
  for (int s = 0; s < ctx->nstreams; s++) {
    BENCH_CUDA(ctx, cudaSetDevice(stream_dev(ctx, s)));
    cudaStream_t st;
    BENCH_CUDA(ctx, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    ctx->streams[s] = st;
    ctx->events[s] = (void**)calloc((size_t)nev, sizeof(void*));
    if (!ctx->events[s]) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
    for (int i = 0; i < nev; i++) {
      cudaEvent_t ev;
      BENCH_CUDA(ctx, cudaEventCreate(&ev));
      ctx->events[s][i] = ev;
    }
    cudaEvent_t j;
    BENCH_CUDA(ctx, cudaEventCreateWithFlags(&j, cudaEventDisableTiming));
    ctx->join_events[s] = j;
    if (s == 0) {
      cudaEvent_t f;
      BENCH_CUDA(ctx, cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
      ctx->fork_event = f;
    }
  }
  int l2 = 0;
  if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx->devs[0]) != cudaSuccess) {
    (void)cudaGetLastError();
    l2 = 0;
  }
  ctx->cache_bytes = l2 > 0 ? (size_t)l2 : (size_t)60 << 20; /* H200: 60 MB */
  /* FCO_BENCH_HBM_GBPS = x > 0: the floors' HBM rate given (e.g. 4300 to compare with tables
   * from before session 49, which all used the H200's); else measured */
  const char* env = getenv("FCO_BENCH_HBM_GBPS");
  char* end = NULL;
  const double given = env && *env ? strtod(env, &end) : 0;
  if (env && *env && (given <= 0 || *end != 0))
    fprintf(stderr, "fco-bench: FCO_BENCH_HBM_GBPS=\"%s\" is not a positive number of GB/s: "
            "measuring the HBM rate instead\n", env);
  if (given > 0 && *end == 0) {
    ctx->hbm_gbps = given;
    ctx->hbm_measured = 2;
  } else {
    const double m = measure_hbm(ctx->devs[0], ctx->cache_bytes);
    if (m > 0) {
      ctx->hbm_gbps = m;
      ctx->hbm_measured = 1;
    }
  }
  return FCO_OK;
#else
  return bench_fail(ctx, FCO_ERR_UNSUPPORTED, "GPU transport in a build without CUDA");
#endif
}

static void pool_free(bench_ctx_t* ctx) {
  for (int r = 0; r < ctx->nranks; r++) {
    if (!ctx->pool[r]) continue;
#ifdef FCO_HAVE_CUDA
    if (ctx->on_gpu) {
      cudaSetDevice(ctx->devs[r]);
      cudaFree(ctx->pool[r]);
    } else
#endif
      free(ctx->pool[r]);
    ctx->pool[r] = NULL;
  }
  ctx->pool_bytes = 0;
}

void bench_dev_fini(bench_ctx_t* ctx) {
  pool_free(ctx);
#ifdef FCO_HAVE_CUDA
  for (int s = 0; s < ctx->nstreams; s++) {
    cudaSetDevice(stream_dev(ctx, s));
    if (ctx->events[s])
      for (int i = 0; i < ctx->opt.iters + 1; i++)
        if (ctx->events[s][i]) cudaEventDestroy((cudaEvent_t)ctx->events[s][i]);
    free(ctx->events[s]);
    ctx->events[s] = NULL;
    if (ctx->join_events[s]) cudaEventDestroy((cudaEvent_t)ctx->join_events[s]);
    if (s == 0 && ctx->fork_event) cudaEventDestroy((cudaEvent_t)ctx->fork_event);
    if (ctx->side_fork[s]) cudaEventDestroy((cudaEvent_t)ctx->side_fork[s]);
    if (ctx->side_join[s]) cudaEventDestroy((cudaEvent_t)ctx->side_join[s]);
    if (ctx->side[s]) cudaStreamDestroy((cudaStream_t)ctx->side[s]);
    ctx->side[s] = ctx->side_fork[s] = ctx->side_join[s] = NULL;
    if (ctx->streams[s]) cudaStreamDestroy((cudaStream_t)ctx->streams[s]);
    ctx->streams[s] = NULL;
  }
  (void)cudaGetLastError();
#endif
}

int bench_num_sets(const bench_ctx_t* ctx, size_t set_bytes) {
  /* Ranks sharing one device (local) or the host (cpu) share its cache. */
  size_t per_dev = set_bytes * (ctx->transport == FCO_TRANSPORT_NCCL ? 1 : (size_t)ctx->nranks);
  if (per_dev == 0) return 1;
  size_t n = (2 * ctx->cache_bytes + per_dev - 1) / per_dev;
  if (n < 1) n = 1;
  if (n > BENCH_MAX_SETS) n = BENCH_MAX_SETS;
  return (int)n;
}

fco_result_t bench_pool_reserve(bench_ctx_t* ctx, size_t bytes) {
  if (bytes <= ctx->pool_bytes) return FCO_OK;
  fco_result_t r = bench_sync(ctx);
  if (r != FCO_OK) return r;
  pool_free(ctx);
  for (int rk = 0; rk < ctx->nranks; rk++) {
#ifdef FCO_HAVE_CUDA
    if (ctx->on_gpu) {
      BENCH_CUDA(ctx, cudaSetDevice(ctx->devs[rk]));
      BENCH_CUDA(ctx, cudaMalloc(&ctx->pool[rk], bytes));
      continue;
    }
#endif
    ctx->pool[rk] = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!ctx->pool[rk])
      return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of buffers", bytes);
  }
  ctx->pool_bytes = bytes;
  return FCO_OK;
}

fco_result_t bench_upload(bench_ctx_t* ctx, int rank, void* dst, const void* src, size_t bytes) {
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu) {
    /* cudaMemcpy runs on the legacy stream, unordered with the rank's non-blocking stream
     * (a poison may still be pending there); and from pageable memory its DMA may still run
     * after return: sync on both sides. */
    BENCH_CUDA(ctx, cudaStreamSynchronize((cudaStream_t)bench_stream(ctx, rank)));
    BENCH_CUDA(ctx, cudaSetDevice(ctx->devs[rank]));
    BENCH_CUDA(ctx, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    BENCH_CUDA(ctx, cudaDeviceSynchronize());
    return FCO_OK;
  }
#endif
  (void)ctx;
  (void)rank;
  memcpy(dst, src, bytes);
  return FCO_OK;
}

fco_result_t bench_download(bench_ctx_t* ctx, int rank, void* dst, const void* src, size_t bytes) {
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu) {
    /* cudaMemcpy runs on the legacy stream, which does not wait for non-blocking streams. */
    BENCH_CUDA(ctx, cudaStreamSynchronize((cudaStream_t)bench_stream(ctx, rank)));
    BENCH_CUDA(ctx, cudaSetDevice(ctx->devs[rank]));
    BENCH_CUDA(ctx, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return FCO_OK;
  }
#endif
  (void)ctx;
  (void)rank;
  memcpy(dst, src, bytes);
  return FCO_OK;
}

fco_result_t bench_copy(bench_ctx_t* ctx, int rank, void* dst, const void* src, size_t bytes) {
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu) {
    cudaStream_t s = (cudaStream_t)bench_stream(ctx, rank);
    BENCH_CUDA(ctx, cudaSetDevice(ctx->devs[rank]));
    BENCH_CUDA(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    BENCH_CUDA(ctx, cudaStreamSynchronize(s));
    return FCO_OK;
  }
#endif
  (void)ctx;
  (void)rank;
  memmove(dst, src, bytes);
  return FCO_OK;
}

fco_result_t bench_poison(bench_ctx_t* ctx, int rank, void* dst, size_t bytes) {
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu) {
    BENCH_CUDA(ctx, cudaSetDevice(ctx->devs[rank]));
    BENCH_CUDA(ctx, cudaMemsetAsync(dst, 0xff, bytes, (cudaStream_t)bench_stream(ctx, rank)));
    return FCO_OK;
  }
#endif
  (void)ctx;
  (void)rank;
  memset(dst, 0xff, bytes);
  return FCO_OK;
}

fco_result_t bench_sync(bench_ctx_t* ctx) {
#ifdef FCO_HAVE_CUDA
  for (int s = 0; s < ctx->nstreams; s++) {
    BENCH_CUDA(ctx, cudaSetDevice(stream_dev(ctx, s)));
    BENCH_CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->streams[s]));
  }
#else
  (void)ctx;
#endif
  return FCO_OK;
}

fco_result_t bench_reserve(bench_ctx_t* ctx, size_t bytes) {
  for (int r = 0; r < ctx->nranks; r++) {
    fco_result_t e = fco_comm_reserve(ctx->comms[r], bytes);
    if (e != FCO_OK) {
      ctx->err_rank = r;
      return e;
    }
  }
  return FCO_OK;
}

fco_result_t bench_poll(bench_ctx_t* ctx) {
  for (int r = 0; r < ctx->nranks; r++) {
    fco_result_t e = fco_comm_get_async_error(ctx->comms[r]);
    if (e != FCO_OK) {
      ctx->err_rank = r;
      return e;
    }
  }
  return FCO_OK;
}

static fco_result_t time_cpu(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, double* t) {
  int w = ctx->opt.warmup, n = ctx->opt.iters;
  for (int i = 0; i < w; i++) {
    fco_result_t r = fn(ctx, arg, i);
    if (r != FCO_OK) return r;
  }
  for (int i = 0; i < n; i++) {
    double t0 = bench_now_s();
    fco_result_t r = fn(ctx, arg, w + i);
    if (r != FCO_OK) return r;
    t[i] = (bench_now_s() - t0) * 1e6;
  }
  return FCO_OK;
}

#ifdef FCO_HAVE_CUDA
static fco_result_t record_all(bench_ctx_t* ctx, int idx) {
  for (int s = 0; s < ctx->nstreams; s++) {
    if (ctx->nstreams > 1) BENCH_CUDA(ctx, cudaSetDevice(stream_dev(ctx, s)));
    BENCH_CUDA(ctx, cudaEventRecord((cudaEvent_t)ctx->events[s][idx],
                                    (cudaStream_t)ctx->streams[s]));
  }
  return FCO_OK;
}

static fco_result_t warm(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, int w) {
  for (int i = 0; i < w; i++) {
    fco_result_t r = fn(ctx, arg, i);
    if (r != FCO_OK) return r;
  }
  return bench_sync(ctx);
}

/* Per iteration: events on every rank's stream; an iteration's time is the slowest rank's. */
static fco_result_t time_events(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, double* t) {
  int w = ctx->opt.warmup, n = ctx->opt.iters;
  fco_result_t r = warm(ctx, fn, arg, w);
  if (r != FCO_OK) return r;
  if ((r = record_all(ctx, 0)) != FCO_OK) return r;
  for (int i = 0; i < n; i++) {
    if ((r = fn(ctx, arg, w + i)) != FCO_OK) return r;
    if ((r = record_all(ctx, i + 1)) != FCO_OK) return r;
  }
  if ((r = bench_sync(ctx)) != FCO_OK) return r;
  for (int i = 0; i < n; i++) {
    t[i] = 0;
    for (int s = 0; s < ctx->nstreams; s++) {
      float ms = 0;
      BENCH_CUDA(ctx, cudaEventElapsedTime(&ms, (cudaEvent_t)ctx->events[s][i],
                                           (cudaEvent_t)ctx->events[s][i + 1]));
      if (ms * 1e3 > t[i]) t[i] = ms * 1e3;
    }
  }
  return FCO_OK;
}

/* Capture k iterations on stream 0, the other ranks' streams forked in and joined back with
 * events, so one graph covers every device; run it after the workspace was reserved. */
static fco_result_t capture(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, int k,
                            cudaGraphExec_t* exec) {
  cudaStream_t s0 = (cudaStream_t)ctx->streams[0];
  BENCH_CUDA(ctx, cudaSetDevice(stream_dev(ctx, 0)));
  BENCH_CUDA(ctx, cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
  fco_result_t r = FCO_OK;
  cudaError_t ce = cudaSuccess;
  if (ctx->nstreams > 1) ce = cudaEventRecord((cudaEvent_t)ctx->fork_event, s0);
  for (int s = 1; s < ctx->nstreams && ce == cudaSuccess; s++)
    ce = cudaStreamWaitEvent((cudaStream_t)ctx->streams[s], (cudaEvent_t)ctx->fork_event, 0);
  for (int i = 0; i < k && ce == cudaSuccess && r == FCO_OK; i++) r = fn(ctx, arg, i);
  for (int s = 1; s < ctx->nstreams && ce == cudaSuccess; s++) {
    cudaSetDevice(stream_dev(ctx, s));
    ce = cudaEventRecord((cudaEvent_t)ctx->join_events[s], (cudaStream_t)ctx->streams[s]);
    if (ce == cudaSuccess) ce = cudaStreamWaitEvent(s0, (cudaEvent_t)ctx->join_events[s], 0);
  }
  cudaSetDevice(stream_dev(ctx, 0));
  cudaGraph_t graph = NULL;
  cudaError_t ee = cudaStreamEndCapture(s0, &graph); /* always end, even after a failure */
  if (r != FCO_OK || ce != cudaSuccess || ee != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    if (r != FCO_OK) return r;
    return bench_fail(ctx, FCO_ERR_CUDA, "CUDA graph capture failed: %s",
                      cudaGetErrorString(ce != cudaSuccess ? ce : ee));
  }
  cudaError_t ie = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (ie != cudaSuccess) {
    (void)cudaGetLastError();
    return bench_fail(ctx, FCO_ERR_CUDA, "cudaGraphInstantiate: %s", cudaGetErrorString(ie));
  }
  return FCO_OK;
}

static fco_result_t time_graph(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, int nsets,
                               double* t) {
  int n = ctx->opt.iters;
  int k = nsets > BENCH_MIN_GRAPH_OPS ? nsets : BENCH_MIN_GRAPH_OPS;
  /* Eager warm-up first: lazy connection set-up and workspace growth cannot be captured. */
  fco_result_t r = warm(ctx, fn, arg, ctx->opt.warmup > 0 ? ctx->opt.warmup : 1);
  if (r != FCO_OK) return r;
  cudaGraphExec_t exec = NULL;
  if ((r = capture(ctx, fn, arg, k, &exec)) != FCO_OK) return r;
  cudaStream_t s0 = (cudaStream_t)ctx->streams[0];
  cudaEvent_t* ev = (cudaEvent_t*)ctx->events[0];
  cudaError_t e = cudaGraphLaunch(exec, s0); /* one untimed replay */
  if (e == cudaSuccess) e = cudaStreamSynchronize(s0);
  if (e == cudaSuccess) e = cudaEventRecord(ev[0], s0);
  for (int i = 0; i < n && e == cudaSuccess; i++) {
    e = cudaGraphLaunch(exec, s0);
    if (e == cudaSuccess) e = cudaEventRecord(ev[i + 1], s0);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(s0);
  for (int i = 0; i < n && e == cudaSuccess; i++) {
    float ms = 0;
    e = cudaEventElapsedTime(&ms, ev[i], ev[i + 1]);
    t[i] = ms * 1e3 / k;
  }
  cudaGraphExecDestroy(exec);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return bench_fail(ctx, FCO_ERR_CUDA, "CUDA graph replay: %s", cudaGetErrorString(e));
  }
  return FCO_OK;
}
#endif

/* bench_time_both's iteration: fork, `second` on the side streams, `first` on the streams,
 * join (always, so a capture ends with every stream joined). */
static struct {
  bench_issue_fn first, second;
  void* arg;
} g_both;

static fco_result_t both_issue(bench_ctx_t* ctx, void* unused, int iter) {
  (void)unused;
#ifdef FCO_HAVE_CUDA
  for (int s = 0; s < ctx->nstreams; s++) {
    BENCH_CUDA(ctx, cudaSetDevice(stream_dev(ctx, s)));
    if (!ctx->side[s]) {
      cudaStream_t st;
      cudaEvent_t f, j;
      BENCH_CUDA(ctx, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      ctx->side[s] = st;
      BENCH_CUDA(ctx, cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
      ctx->side_fork[s] = f;
      BENCH_CUDA(ctx, cudaEventCreateWithFlags(&j, cudaEventDisableTiming));
      ctx->side_join[s] = j;
    }
    BENCH_CUDA(ctx, cudaEventRecord((cudaEvent_t)ctx->side_fork[s],
                                    (cudaStream_t)ctx->streams[s]));
    BENCH_CUDA(ctx, cudaStreamWaitEvent((cudaStream_t)ctx->side[s],
                                        (cudaEvent_t)ctx->side_fork[s], 0));
  }
  ctx->on_side = 1;
  fco_result_t r = g_both.second(ctx, g_both.arg, iter);
  ctx->on_side = 0;
  if (r == FCO_OK) r = g_both.first(ctx, g_both.arg, iter);
  for (int s = 0; s < ctx->nstreams; s++) {
    cudaSetDevice(stream_dev(ctx, s));
    cudaError_t e = cudaEventRecord((cudaEvent_t)ctx->side_join[s], (cudaStream_t)ctx->side[s]);
    if (e == cudaSuccess)
      e = cudaStreamWaitEvent((cudaStream_t)ctx->streams[s], (cudaEvent_t)ctx->side_join[s], 0);
    if (e != cudaSuccess && r == FCO_OK)
      r = bench_fail(ctx, FCO_ERR_CUDA, "both column: join: %s", cudaGetErrorString(e));
  }
  return r;
#else
  (void)ctx;
  (void)iter;
  return FCO_ERR_UNSUPPORTED;
#endif
}

fco_result_t bench_time_both(bench_ctx_t* ctx, bench_issue_fn first, bench_issue_fn second,
                             void* arg, int nsets, double* us) {
  *us = -1;
  if (!ctx->on_gpu) return FCO_OK;
  g_both.first = first;
  g_both.second = second;
  g_both.arg = arg;
  return bench_time(ctx, both_issue, NULL, nsets, us);
}

fco_result_t bench_time(bench_ctx_t* ctx, bench_issue_fn fn, void* arg, int nsets, double* us) {
  int n = ctx->opt.iters;
  double* t = (double*)calloc((size_t)n, sizeof *t);
  if (!t) return bench_fail(ctx, FCO_ERR_OUT_OF_MEMORY, "out of host memory");
  fco_result_t r;
#ifdef FCO_HAVE_CUDA
  if (ctx->on_gpu)
    r = ctx->opt.graph ? time_graph(ctx, fn, arg, nsets, t) : time_events(ctx, fn, arg, t);
  else
#endif
    r = time_cpu(ctx, fn, arg, t);
  (void)nsets;
  if (r == FCO_OK) r = bench_poll(ctx);
  if (r == FCO_OK) *us = bench_median(t, n);
  free(t);
  return r;
}

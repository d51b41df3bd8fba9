/*
 * ar_kernel_check.cu — standalone check of the allreduce kernels (src/cuda/allreduce.cu) on ONE
 * GPU, below the library: it builds the peer tables (fco_dev_rank_t) of P virtual ranks itself,
 * as the local transport would, and calls fco_cuda_allreduce_oneshot / fco_cuda_allreduce_copy.
 *
 * Build and run from the repository root:
 *   nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -o /tmp/ar_kernel_check \
 *     tests/gpu/ar_kernel_check.cu -Lbuild/lib -lfco -Xlinker -rpath=$PWD/build/lib && /tmp/ar_kernel_check
 * Exit 0 pass, 1 fail, 77 skip (no GPU). The argument checks run without a GPU too.
 *
 * What it checks:
 *   - launch-argument errors give their result code and a message, with nothing launched;
 *   - P = 1..8 virtual ranks, counts 1, 7, 4096, 1000003, f32/f16/bf16, out of place and in
 *     place, 16-byte aligned and misaligned by one element, both impls, 50 calls each (every
 *     call a new epoch and new inputs): exact sums (inputs ((seed·31 + rank·7 + i) % 9) - 4
 *     are small integers, so fp32 sums are exact in every dtype), outputs poisoned before each
 *     call, guard bytes around each output untouched; after each block of calls the epoch
 *     advanced once per one-shot call, arrive is back to 0 and no async error was recorded;
 *   - a CUDA graph holding a one-shot call, replayed with new inputs each time, stays exact;
 *   - a peer that never signals (rank 1 of 2 launched alone, timeout 200 ms) gives
 *     FCO_ERR_TIMEOUT with the peer, op and wanted value, and the kernel ends; an error already
 *     set makes waiting blocks give up without waiting out their own bound; a peer table with a
 *     too-small workspace gives FCO_ERR_INTERNAL instead of writing past it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../../src/cuda/cuda_ops.h"
#include "check.cuh"

static const size_t kCounts[] = {1, 7, 4096, 1000003};
static const size_t kMaxCount = 1000003;
static const size_t kGuard = 64;      /* poisoned bytes checked after each output   */
static const int kReps = 50;
static const fco_dtype_t kDtypes[] = {FCO_F32, FCO_F16, FCO_BF16};
static const char* kDtypeNames[] = {"f32", "f16", "bf16"};
static size_t esize_of(fco_dtype_t t) { return t == FCO_F32 ? 4 : 2; }

/* ---- device helpers ------------------------------------------------------------------- */
struct RankPtrs {
  char* p[FCO_MAX_GPU_RANKS];
};

__device__ __forceinline__ int input_value(long long seed, int rank, size_t i) {
  return (int)((seed * 31 + rank * 7 + (long long)i) % 9) - 4;
}

template <typename T>
__device__ T from_float(float x);
template <>
__device__ float from_float<float>(float x) { return x; }
template <>
__device__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
__device__ float to_float(float x) { return x; }
__device__ float to_float(__half x) { return __half2float(x); }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__global__ void set_seed_kernel(long long* seed, long long v) { *seed = v; }

/* blockIdx.y = rank */
template <typename T>
__global__ void fill_kernel(RankPtrs in, size_t n, const long long* seed) {
  const int r = blockIdx.y;
  T* p = (T*)in.p[r];
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = from_float<T>((float)input_value(*seed, r, i));
}

struct CheckResult {
  unsigned long long bad;     /* wrong elements */
  unsigned long long guard;   /* modified guard bytes */
  unsigned long long first;   /* rank << 40 | index of the first wrong element seen, ~0 if none */
  float got, want;
};

/* Checks out_r[0..n) and the poisoned bytes [base_r, out_r) and [out_r + n, + kGuard). */
template <typename T>
__global__ void check_kernel(RankPtrs out, RankPtrs base, size_t n, int nranks,
                             const long long* seed, CheckResult* res) {
  const int r = blockIdx.y;
  const T* p = (const T*)out.p[r];
  const long long s = *seed;
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = tid; i < n; i += stride) {
    int want = 0;
    for (int q = 0; q < nranks; ++q) want += input_value(s, q, i);
    const float got = to_float(p[i]);
    if (!(got == (float)want)) {
      atomicAdd(&res->bad, 1ull);
      const unsigned long long key = ((unsigned long long)r << 40) | i;
      if (atomicCAS(&res->first, ~0ull, key) == ~0ull) {
        res->got = got;
        res->want = (float)want;
      }
    }
  }
  const unsigned char* lo = (const unsigned char*)base.p[r];
  const unsigned char* hi = (const unsigned char*)(p + n);
  const size_t nlo = (const unsigned char*)p - lo;
  for (size_t i = tid; i < nlo + kGuard; i += stride) {
    const unsigned char b = i < nlo ? lo[i] : hi[i - nlo];
    if (b != 0xFF) atomicAdd(&res->guard, 1ull);
  }
}

/* ---- a world of P virtual ranks on one GPU -------------------------------------------- */
struct World {
  int P;
  size_t ws_bytes;
  char* ws[FCO_MAX_GPU_RANKS];
  uint64_t* sig[FCO_MAX_GPU_RANKS];
  fco_dev_rank_t* dev[FCO_MAX_GPU_RANKS];
  fco_async_err_t* err_h; /* [P], host-mapped */
  fco_async_err_t* err_d;
  char* buf_in[FCO_MAX_GPU_RANKS];
  char* buf_out[FCO_MAX_GPU_RANKS];
  size_t buf_bytes;
};

static void world_set_tables(World* w, uint64_t timeout_ns, uint64_t ws_bytes) {
  for (int r = 0; r < w->P; ++r) {
    fco_dev_rank_t h;
    memset(&h, 0, sizeof h);
    for (int p = 0; p < w->P; ++p) {
      h.peer_data[p] = w->ws[p];
      h.peer_sig[p] = w->sig[p];
    }
    h.ws_bytes = ws_bytes;
    h.rank = r;
    h.nranks = w->P;
    h.timeout_ns = timeout_ns;
    h.err = w->err_d + r;
    CUDA_CHECK(cudaMemset(w->dev[r], 0, sizeof(fco_dev_rank_t)));
    CUDA_CHECK(cudaMemcpy(w->dev[r], &h, FCO_DEV_RANK_HOST_BYTES, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(w->sig[r], 0, FCO_SIG_BYTES));
  }
  memset(w->err_h, 0, sizeof(fco_async_err_t) * FCO_MAX_GPU_RANKS);
}

static void world_init(World* w, int P) {
  memset(w, 0, sizeof *w);
  w->P = P;
  w->ws_bytes = 2 * (size_t)P * fco_round_up(kMaxCount * 4, 256);
  w->buf_bytes = kMaxCount * 4 + 16 + kGuard;
  CUDA_CHECK(cudaHostAlloc((void**)&w->err_h, sizeof(fco_async_err_t) * FCO_MAX_GPU_RANKS,
                           cudaHostAllocMapped));
  CUDA_CHECK(cudaHostGetDevicePointer((void**)&w->err_d, w->err_h, 0));
  for (int r = 0; r < P; ++r) {
    CUDA_CHECK(cudaMalloc(&w->ws[r], w->ws_bytes));
    CUDA_CHECK(cudaMalloc(&w->sig[r], FCO_SIG_BYTES));
    CUDA_CHECK(cudaMalloc(&w->dev[r], sizeof(fco_dev_rank_t)));
    CUDA_CHECK(cudaMalloc(&w->buf_in[r], w->buf_bytes));
    CUDA_CHECK(cudaMalloc(&w->buf_out[r], w->buf_bytes));
  }
  world_set_tables(w, 5ull * 1000000000ull, w->ws_bytes); /* a bug shows as a timeout */
}

static void world_free(World* w) {
  for (int r = 0; r < w->P; ++r) {
    cudaFree(w->ws[r]);
    cudaFree(w->sig[r]);
    cudaFree(w->dev[r]);
    cudaFree(w->buf_in[r]);
    cudaFree(w->buf_out[r]);
  }
  cudaFreeHost(w->err_h);
}

static fco_dev_rank_t read_dev(const World* w, int r) {
  fco_dev_rank_t h;
  CUDA_CHECK(cudaMemcpy(&h, w->dev[r], sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

/* ---- one configuration: kReps calls ---------------------------------------------------- */
enum { kOneshot = 0, kCopy = 1 };

struct Case {
  int impl;
  fco_dtype_t dtype;
  size_t count;
  int in_place;
  int misaligned; /* pointers one element past a 256-byte boundary */
};

template <typename T>
static void launch_fill(const RankPtrs& in, size_t n, int P, const long long* seed,
                        cudaStream_t s) {
  dim3 grid((unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), P);
  fill_kernel<T><<<grid, 256, 0, s>>>(in, n, seed);
}
template <typename T>
static void launch_check(const RankPtrs& out, const RankPtrs& base, size_t n, int P,
                         const long long* seed, CheckResult* res, cudaStream_t s) {
  dim3 grid((unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), P);
  check_kernel<T><<<grid, 256, 0, s>>>(out, base, n, P, seed, res);
}

static void dispatch_fill(fco_dtype_t t, const RankPtrs& in, size_t n, int P,
                          const long long* seed, cudaStream_t s) {
  if (t == FCO_F32) launch_fill<float>(in, n, P, seed, s);
  else if (t == FCO_F16) launch_fill<__half>(in, n, P, seed, s);
  else launch_fill<__nv_bfloat16>(in, n, P, seed, s);
}
static void dispatch_check(fco_dtype_t t, const RankPtrs& out, const RankPtrs& base, size_t n,
                           int P, const long long* seed, CheckResult* res, cudaStream_t s) {
  if (t == FCO_F32) launch_check<float>(out, base, n, P, seed, res, s);
  else if (t == FCO_F16) launch_check<__half>(out, base, n, P, seed, res, s);
  else launch_check<__nv_bfloat16>(out, base, n, P, seed, res, s);
}

/* Sets up pointers of a case; returns the launch descriptor. */
static fco_cuda_ar_launch_t make_launch(const World* w, const Case& c, cudaStream_t s,
                                        RankPtrs* in, RankPtrs* out, RankPtrs* base) {
  fco_cuda_ar_launch_t l;
  memset(&l, 0, sizeof l);
  l.num_local = w->P;
  l.nranks = w->P;
  l.count = c.count;
  l.dtype = c.dtype;
  l.stream = s;
  const size_t off = c.misaligned ? esize_of(c.dtype) : 0;
  for (int r = 0; r < w->P; ++r) {
    base->p[r] = w->buf_out[r];
    out->p[r] = w->buf_out[r] + off;
    in->p[r] = c.in_place ? out->p[r] : w->buf_in[r] + off;
    l.r[r].in = in->p[r];
    l.r[r].out = out->p[r];
    l.r[r].dev = w->dev[r];
    l.r[r].ws = w->ws[r];
  }
  return l;
}

static fco_result_t run_impl(int impl, const fco_cuda_ar_launch_t* l, char* msg) {
  return impl == kOneshot ? fco_cuda_allreduce_oneshot(l, msg) : fco_cuda_allreduce_copy(l, msg);
}

static void run_case(World* w, const Case& c, long long* d_seed, CheckResult* res_d,
                     CheckResult* res_h, cudaStream_t s, long long seed0) {
  RankPtrs in, out, base;
  fco_cuda_ar_launch_t l = make_launch(w, c, s, &in, &out, &base);
  const size_t esize = esize_of(c.dtype);
  const size_t off = c.misaligned ? esize : 0;
  memset(res_h, 0, sizeof *res_h);
  res_h->first = ~0ull;
  CUDA_CHECK(cudaMemcpyAsync(res_d, res_h, sizeof *res_h, cudaMemcpyHostToDevice, s));
  char msg[FCO_ERRMSG_LEN] = "";
  for (int rep = 0; rep < kReps; ++rep) {
    set_seed_kernel<<<1, 1, 0, s>>>(d_seed, seed0 + rep);
    for (int r = 0; r < w->P; ++r)
      CUDA_CHECK(cudaMemsetAsync(w->buf_out[r], 0xFF, off + c.count * esize + kGuard, s));
    dispatch_fill(c.dtype, in, c.count, w->P, d_seed, s);
    fco_result_t rc = run_impl(c.impl, &l, msg);
    if (rc != FCO_OK) {
      EXPECT(rc == FCO_OK, "launch returned %d: %s", (int)rc, msg);
      return;
    }
    dispatch_check(c.dtype, out, base, c.count, w->P, d_seed, res_d, s);
  }
  CUDA_CHECK(cudaMemcpyAsync(res_h, res_d, sizeof *res_h, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaGetLastError());
  const char* what = c.impl == kOneshot ? "oneshot" : "copy";
  EXPECT(res_h->bad == 0 && res_h->guard == 0,
         "P=%d %s %s count=%zu %s%s: %llu wrong elements over %d calls (first: rank %llu index "
         "%llu got %g want %g), %llu guard bytes changed",
         w->P, what, kDtypeNames[c.dtype], c.count, c.in_place ? "in-place" : "out-of-place",
         c.misaligned ? " misaligned" : "", res_h->bad, kReps, res_h->first >> 40,
         res_h->first & ((1ull << 40) - 1), res_h->got, res_h->want, res_h->guard);
}

static void check_world_state(World* w, uint64_t want_epoch, const char* when) {
  for (int r = 0; r < w->P; ++r) {
    fco_dev_rank_t h = read_dev(w, r);
    EXPECT(h.epoch == want_epoch && h.arrive == 0, "P=%d rank %d after %s: epoch %llu (want %llu), "
           "arrive %u (want 0)", w->P, r, when, (unsigned long long)h.epoch,
           (unsigned long long)want_epoch, h.arrive);
    EXPECT(w->err_h[r].code == 0, "P=%d rank %d after %s: async error %d (peer %d slot %d)", w->P,
           r, when, w->err_h[r].code, w->err_h[r].peer, w->err_h[r].slot);
  }
}

/* ---- tests ----------------------------------------------------------------------------- */
static void test_arguments(void) {
  char msg[FCO_ERRMSG_LEN];
  int x = 0;
  fco_cuda_ar_launch_t l;
  memset(&l, 0, sizeof l);
  l.num_local = 1;
  l.nranks = 1;
  l.count = 16;
  l.dtype = FCO_F32;
  l.r[0].in = &x; /* never dereferenced: every case below fails before launching */
  l.r[0].out = &x;
  l.r[0].dev = (fco_dev_rank_t*)&x;
  struct {
    const char* name;
    fco_cuda_ar_launch_t l;
    int impl;
    fco_result_t want;
  } cases[16];
  int n = 0;
  cases[n] = {"nranks 0", l, kOneshot, FCO_ERR_UNSUPPORTED}; cases[n++].l.nranks = 0;
  cases[n] = {"nranks 9", l, kOneshot, FCO_ERR_UNSUPPORTED}; cases[n++].l.nranks = 9;
  cases[n] = {"num_local 0", l, kOneshot, FCO_ERR_UNSUPPORTED}; cases[n++].l.num_local = 0;
  cases[n] = {"num_local > nranks", l, kOneshot, FCO_ERR_UNSUPPORTED}; cases[n++].l.num_local = 2;
  cases[n] = {"dtype 7", l, kOneshot, FCO_ERR_UNSUPPORTED}; cases[n++].l.dtype = (fco_dtype_t)7;
  cases[n] = {"count 0", l, kOneshot, FCO_ERR_INVALID_ARGUMENT}; cases[n++].l.count = 0;
  cases[n] = {"in NULL", l, kOneshot, FCO_ERR_INVALID_ARGUMENT}; cases[n++].l.r[0].in = NULL;
  cases[n] = {"out NULL", l, kCopy, FCO_ERR_INVALID_ARGUMENT}; cases[n++].l.r[0].out = NULL;
  cases[n] = {"dev NULL", l, kOneshot, FCO_ERR_INVALID_ARGUMENT}; cases[n++].l.r[0].dev = NULL;
  cases[n] = {"f32 in at +2 bytes", l, kOneshot, FCO_ERR_INVALID_ARGUMENT};
  cases[n++].l.r[0].in = (char*)&x + 2;
  cases[n] = {"copy: num_local < nranks", l, kCopy, FCO_ERR_UNSUPPORTED};
  cases[n].l.nranks = 2; cases[n].l.r[0].ws = &x; ++n;
  cases[n] = {"copy: ws NULL", l, kCopy, FCO_ERR_INVALID_ARGUMENT};
  cases[n].l.nranks = 2; cases[n].l.num_local = 2; cases[n].l.r[1] = l.r[0]; ++n;
  for (int i = 0; i < n; ++i) {
    msg[0] = 0;
    fco_result_t rc = run_impl(cases[i].impl, &cases[i].l, msg);
    EXPECT(rc == cases[i].want && msg[0] != 0, "%s: result %d (want %d), message \"%s\"",
           cases[i].name, (int)rc, (int)cases[i].want, msg);
  }
  msg[0] = 0;
  EXPECT(fco_cuda_allreduce_oneshot(NULL, msg) == FCO_ERR_INVALID_ARGUMENT && msg[0],
         "NULL launch: message \"%s\"", msg);
  printf("# argument checks: %d cases\n", n + 1);
}

static void test_correctness(cudaStream_t s, long long* d_seed, CheckResult* res_d,
                             CheckResult* res_h) {
  for (int P = 1; P <= FCO_MAX_GPU_RANKS; ++P) {
    World w;
    world_init(&w, P);
    const double t0 = now_s();
    const int before = g_failures;
    uint64_t epochs = 0;
    long long seed = 1;
    for (int impl = 0; impl < 2; ++impl)
      for (fco_dtype_t dt : kDtypes)
        for (size_t count : kCounts)
          for (int mode = 0; mode < 4; ++mode) {
            Case c = {impl, dt, count, mode & 1, mode >> 1};
            run_case(&w, c, d_seed, res_d, res_h, s, seed);
            seed += kReps;
            if (impl == kOneshot) epochs += kReps;
            if (g_failures > before + 20) break; /* enough said */
          }
    check_world_state(&w, epochs, "all calls");
    printf("# P=%d: %s (%.2f s)\n", P, g_failures == before ? "ok" : "FAILED", now_s() - t0);
    world_free(&w);
  }
}

/* A one-shot call captured once, replayed with a new seed each time (set by a kernel launched
 * before the replay): the epoch and the workspace half change on the device at each replay. */
static void test_graph(cudaStream_t s, long long* d_seed, CheckResult* res_d, CheckResult* res_h) {
  const int P = 4;
  World w;
  world_init(&w, P);
  const int before = g_failures;
  int replays = 0;
  for (fco_dtype_t dt : {FCO_F32, FCO_BF16})
    for (size_t count : {(size_t)4096, kMaxCount}) {
      Case c = {kOneshot, dt, count, 0, 0};
      RankPtrs in, out, base;
      fco_cuda_ar_launch_t l = make_launch(&w, c, s, &in, &out, &base);
      char msg[FCO_ERRMSG_LEN] = "";
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int r = 0; r < P; ++r)
        CUDA_CHECK(cudaMemsetAsync(w.buf_out[r], 0xFF, count * esize_of(dt) + kGuard, s));
      dispatch_fill(dt, in, count, P, d_seed, s);
      fco_result_t rc = fco_cuda_allreduce_oneshot(&l, msg);
      CUDA_CHECK(cudaStreamEndCapture(s, &g));
      EXPECT(rc == FCO_OK, "capture: %s", msg);
      CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
      memset(res_h, 0, sizeof *res_h);
      res_h->first = ~0ull;
      CUDA_CHECK(cudaMemcpyAsync(res_d, res_h, sizeof *res_h, cudaMemcpyHostToDevice, s));
      for (int k = 0; k < 20; ++k, ++replays) {
        set_seed_kernel<<<1, 1, 0, s>>>(d_seed, 100000 + 17 * k);
        CUDA_CHECK(cudaGraphLaunch(ge, s));
        dispatch_check(dt, out, base, count, P, d_seed, res_d, s);
      }
      CUDA_CHECK(cudaMemcpyAsync(res_h, res_d, sizeof *res_h, cudaMemcpyDeviceToHost, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      EXPECT(res_h->bad == 0 && res_h->guard == 0,
             "graph %s count=%zu: %llu wrong (got %g want %g), %llu guard bytes", kDtypeNames[dt],
             count, res_h->bad, res_h->got, res_h->want, res_h->guard);
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    }
  check_world_state(&w, replays, "graph replays");
  printf("# graph replays: %s (%d)\n", g_failures == before ? "ok" : "FAILED", replays);
  world_free(&w);
}

/* Rank 1 of 2 launched alone: its wait for rank 0 must end in FCO_ERR_TIMEOUT, not a hang. */
static void test_timeout(cudaStream_t s) {
  World w;
  world_init(&w, 2);
  const uint64_t timeout_ns = 200ull * 1000000ull;
  world_set_tables(&w, timeout_ns, w.ws_bytes);
  const int before = g_failures;
  const size_t count = kMaxCount; /* many blocks, all waiting */
  fco_cuda_ar_launch_t l;
  memset(&l, 0, sizeof l);
  l.num_local = 1;
  l.nranks = 2;
  l.count = count;
  l.dtype = FCO_F32;
  l.stream = s;
  l.r[0].in = w.buf_in[1];
  l.r[0].out = w.buf_out[1];
  l.r[0].dev = w.dev[1];
  l.r[0].ws = w.ws[1];
  char msg[FCO_ERRMSG_LEN] = "";
  double t0 = now_s();
  fco_result_t rc = fco_cuda_allreduce_oneshot(&l, msg);
  EXPECT(rc == FCO_OK, "launch: %s", msg);
  CUDA_CHECK(cudaStreamSynchronize(s));
  double dt = now_s() - t0;
  const fco_async_err_t e = w.err_h[1];
  EXPECT(e.code == FCO_ERR_TIMEOUT, "code %d, want FCO_ERR_TIMEOUT", e.code);
  EXPECT(e.peer == 0 && e.op == FCO_OP_ALLREDUCE, "peer %d (want 0), op %d (want %d)", e.peer,
         e.op, (int)FCO_OP_ALLREDUCE);
  EXPECT(e.want == ((1ull << 32) | 1ull) && e.seen == 0, "want %#llx seen %#llx",
         (unsigned long long)e.want, (unsigned long long)e.seen);
  EXPECT(dt > 0.15 && dt < 10.0, "kernel took %.3f s with a 0.2 s bound", dt);
  fco_dev_rank_t h = read_dev(&w, 1);
  EXPECT(h.epoch == 1 && h.arrive == 0, "after the timeout: epoch %llu arrive %u",
         (unsigned long long)h.epoch, h.arrive);
  printf("# timeout: %s (%.3f s, peer %d slot %d)\n", g_failures == before ? "ok" : "FAILED", dt,
         e.peer, e.slot);

  /* An error already recorded: waiters (30 s bound) must give up after a few thousand spins. */
  const int before2 = g_failures;
  world_set_tables(&w, 30ull * 1000000000ull, w.ws_bytes);
  w.err_h[1].code = FCO_ERR_TIMEOUT;
  t0 = now_s();
  rc = fco_cuda_allreduce_oneshot(&l, msg);
  EXPECT(rc == FCO_OK, "launch: %s", msg);
  CUDA_CHECK(cudaStreamSynchronize(s));
  dt = now_s() - t0;
  EXPECT(dt < 5.0, "blocks waited %.3f s although an error was set", dt);
  printf("# error already set: %s (%.3f s)\n", g_failures == before2 ? "ok" : "FAILED", dt);

  /* Workspace smaller than 2·P·S: the kernel refuses (FCO_ERR_INTERNAL), nothing written. */
  const int before3 = g_failures;
  world_set_tables(&w, timeout_ns, 1024);
  l.num_local = 2;
  l.count = 4096;
  l.r[0].in = w.buf_in[0];
  l.r[0].out = w.buf_out[0];
  l.r[0].dev = w.dev[0];
  l.r[1].in = w.buf_in[1];
  l.r[1].out = w.buf_out[1];
  l.r[1].dev = w.dev[1];
  rc = fco_cuda_allreduce_oneshot(&l, msg);
  EXPECT(rc == FCO_OK, "launch: %s", msg);
  CUDA_CHECK(cudaStreamSynchronize(s));
  EXPECT(w.err_h[0].code == FCO_ERR_INTERNAL && w.err_h[1].code == FCO_ERR_INTERNAL,
         "small workspace: codes %d %d, want FCO_ERR_INTERNAL", w.err_h[0].code, w.err_h[1].code);
  printf("# small workspace: %s\n", g_failures == before3 ? "ok" : "FAILED");
  world_free(&w);
}

int main(void) {
  test_arguments();
  const int ndev = fco_cuda_device_count();
  if (ndev < 1) {
    printf("# no GPU: skipped the device tests (%d failures in argument checks)\n", g_failures);
    return g_failures ? 1 : 77;
  }
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# device 0: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  long long* d_seed;
  CheckResult* res_d;
  CheckResult* res_h;
  CUDA_CHECK(cudaMalloc(&d_seed, sizeof *d_seed));
  CUDA_CHECK(cudaMalloc(&res_d, sizeof *res_d));
  CUDA_CHECK(cudaMallocHost(&res_h, sizeof *res_h));

  test_correctness(s, d_seed, res_d, res_h);
  test_graph(s, d_seed, res_d, res_h);
  test_timeout(s);

  cudaFreeHost(res_h);
  cudaFree(res_d);
  cudaFree(d_seed);
  cudaStreamDestroy(s);
  printf("%s: %d failures\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}

/*
 * gemv_stream_probe.cu — how fast can a GEMV tile stream W on this GPU? (issue 3)
 *
 * One GPU, no communication: times variants of the fused GEMV + AllReduce's tile loop
 * (src/cuda/gemv_tile.cuh, the same tile_mma the operator runs) against a pure streaming read of
 * the same bytes, so a kernel-efficiency change can be chosen by measurement before it goes into
 * the operator. Variants differ in chunks per warp step (kU), warps per block (kW), blocks per
 * SM (launch bounds), the register-pipelined loop (tile_mma's kPipe: the next step's loads
 * issued before this step's mmas), and the fused one-shot kernel's P = 1 schedule (partials
 * through a workspace and flags, with and without the system-scope release). Every variant's y
 * is checked against a naive fp32 kernel (#wrong). W rotates over buffer sets whose footprint
 * exceeds 3× L2.
 *
 * Build and run (tests/gpu/run.sh does, with FCO_GPU_PROBE=1; argument: reps, default 30):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Isrc/cuda -Iinclude bench/probe/gemv_stream_probe.cu \
 *     -o build/probe/gemv_stream_probe
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "gemv_tile.cuh"
#include "probe.h"

using bf16 = __nv_bfloat16;
using fco::gemv::kTileN;

/* Tiles t = blockIdx.x, + gridDim.x, ...: tile math, sum of the warps, y (fp32) written.
 * kMode 0: plain; 1: register-pipelined (tile_mma's kPipe, the operator's FCO_GEMV_PIPE loop);
 * 2 / 3: the fused one-shot kernel's P = 1 schedule without a peer: each tile's partial is
 * stored to a workspace slot and flagged (2: release store at system scope after a block
 * barrier, as prims.cuh's signal_block; 3: relaxed store, no fence), then, after all tiles, per
 * tile the flag is acquired, the partial read back (ld.cg) and y written. 2 - 3 is the cost of
 * the fences, 3 - 0 of the second pass. */
template <int kMT, int kU, int kW, int kMinB, int kMode>
__global__ void __launch_bounds__(kW * 32, kMinB)
    probe_kernel(const bf16* w, const bf16* x, float* y, int M, int N, int64_t K, int T,
                 float* ws, unsigned long long* flags, unsigned long long e) {
  __shared__ __align__(16) float red[kW][kMT * 8][kTileN];
  const int warp = threadIdx.x >> 5, i = threadIdx.x;
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    fco::gemv::tile_mma<bf16, kMT, kU, kW, kMode == 1>(w, x, M, N, K, t * kTileN, true,
                                                       red[warp]);
    __syncthreads();
    if (i < M * kTileN) {
      const int m = i / kTileN, n = t * kTileN + i % kTileN;
      float s = 0.f;
#pragma unroll
      for (int wi = 0; wi < kW; ++wi) s += red[wi][m][i % kTileN];
      if constexpr (kMode >= 2)
        __stcg(ws + (int64_t)t * M * kTileN + i, s);
      else if (n < N)
        y[(int64_t)m * N + n] = s;
    }
    __syncthreads();
    if constexpr (kMode == 2) {
      if (i == 0) asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(flags + t), "l"(e) : "memory");
    } else if constexpr (kMode == 3) {
      if (i == 0) asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(flags + t), "l"(e) : "memory");
    }
  }
  if constexpr (kMode >= 2) {
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
      if (i == 0) {
        unsigned long long v;
        do {
          asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(flags + t) : "memory");
        } while (v < e);
      }
      __syncthreads();
      if (i < M * kTileN) {
        const int m = i / kTileN, n = t * kTileN + i % kTileN;
        if (n < N) y[(int64_t)m * N + n] = __ldcg(ws + (int64_t)t * M * kTileN + i);
      }
    }
  }
}

/* Pure streaming read of n16 16-byte words (the achievable read bandwidth). */
template <int kU>
__global__ void __launch_bounds__(256) read_kernel(const uint4* p, int64_t n16, unsigned* sink) {
  unsigned acc = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kU - 1) * stride < n16; i += kU * stride) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = fco::gemv::ld_stream_v4(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = fco::gemv::ld_stream_v4(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc; /* keeps the loads; practically never stores */
}

__global__ void ref_kernel(const bf16* w, const bf16* x, float* y, int M, int N, int64_t K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int m = 0; m < M; ++m) {
    float s = 0.f;
    for (int64_t k = 0; k < K; ++k)
      s += __bfloat162float(w[(int64_t)n * K + k]) * __bfloat162float(x[(int64_t)m * K + k]);
    y[(int64_t)m * N + n] = s;
  }
}

__global__ void init_kernel(bf16* p, int64_t n, uint32_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(((int)(h & 255) - 128) / 128.0f);
  }
}

struct Ctx {
  int sms, reps;
  bf16 *pool, *x;
  float *y, *yref, *ws;
  unsigned long long* flags;
  unsigned long long epoch;
  unsigned* sink;
  size_t pool_elems;
  cudaEvent_t ev[2];
  cudaStream_t stream;
};

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/* Times launch(set, stream) rotating over nsets W sets; median µs. Event: one launch between
 * two events, c.reps times. Graph (as fco-bench -G 1): kGraphLaunches back-to-back launches
 * captured in a CUDA graph, replayed 7 times, time per launch. */
constexpr int kGraphLaunches = 20;
struct Times {
  float event, graph;
};
template <class F>
static Times time_it(Ctx& c, int nsets, F launch) {
  for (int r = 0; r < 3; ++r) launch(r % nsets, c.stream);
  std::vector<float> t;
  for (int r = 0; r < c.reps; ++r) {
    CK(cudaEventRecord(c.ev[0], c.stream));
    launch(r % nsets, c.stream);
    CK(cudaEventRecord(c.ev[1], c.stream));
    CK(cudaEventSynchronize(c.ev[1]));
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, c.ev[0], c.ev[1]));
    t.push_back(ms * 1000.f);
  }
  CK(cudaGetLastError());
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < kGraphLaunches; ++r) launch(r % nsets, c.stream);
  CK(cudaStreamEndCapture(c.stream, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, c.stream));
  std::vector<float> tg;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(c.ev[0], c.stream));
    CK(cudaGraphLaunch(ge, c.stream));
    CK(cudaEventRecord(c.ev[1], c.stream));
    CK(cudaEventSynchronize(c.ev[1]));
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, c.ev[0], c.ev[1]));
    tg.push_back(ms * 1000.f / kGraphLaunches);
  }
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return {median(t), median(tg)};
}

struct Shape {
  int N;
  int64_t K;
  const char* what;
};

template <int kMT, int kU, int kW, int kMinB, int kMode>
static void variant(Ctx& c, const char* name, const Shape& s, int M, int nsets, Times t_read,
                    bool persistent) {
  auto kern = probe_kernel<kMT, kU, kW, kMinB, kMode>;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kW * 32, 0));
  const int T = (s.N + kTileN - 1) / kTileN;
  int B = persistent ? std::min(per_sm * c.sms, T) : T;
  const int per_block = (T + B - 1) / B;
  B = (T + per_block - 1) / per_block;
  const size_t wel = (size_t)s.N * s.K;
  CK(cudaMemset(c.y, 0xff, (size_t)M * s.N * 4));
  const Times us = time_it(c, nsets, [&](int set, cudaStream_t st) {
    kern<<<B, kW * 32, 0, st>>>(c.pool + set * wel, c.x, c.y, M, s.N, s.K, T, c.ws, c.flags,
                                ++c.epoch);
  });
  CK(cudaDeviceSynchronize());
  /* correctness: the last launch used set (reps - 1) % nsets */
  const int last = (kGraphLaunches - 1) % nsets; /* the graph's last launch */
  ref_kernel<<<(s.N + 127) / 128, 128>>>(c.pool + last * wel, c.x, c.yref, M, s.N, s.K);
  std::vector<float> a((size_t)M * s.N), b((size_t)M * s.N);
  CK(cudaMemcpy(a.data(), c.y, a.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), c.yref, b.size() * 4, cudaMemcpyDeviceToHost));
  int wrong = 0;
  const int nthreads = kW * 32;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((int)(i / s.N) * kTileN >= nthreads) continue; /* rows m ≥ threads/16: not reduced */
    if (!(fabsf(a[i] - b[i]) <= 1e-3f * (1.f + fabsf(b[i])))) ++wrong;
  }
  printf("| %-12s | %5d×%-6lld | %2d | %-18s | %3d | %2d | %8.2f | %5.1f | %8.2f | %7.0f | %5.1f | %d |\n",
         s.what, s.N, (long long)s.K, M, name, B, per_sm, us.event, 100.0 * t_read.event / us.event,
         us.graph, wel * 2.0 / (us.graph * 1e3), 100.0 * t_read.graph / us.graph, wrong);
}

template <int kMT>
static void all_variants(Ctx& c, const Shape& s, int M, int nsets, Times t_read) {
  variant<kMT, 4, 8, 3, 0>(c, "base u4 w8 b3", s, M, nsets, t_read, true);
  variant<kMT, 8, 8, 2, 0>(c, "u8 w8 b2", s, M, nsets, t_read, true);
  variant<kMT, 2, 8, 4, 0>(c, "u2 w8 b4", s, M, nsets, t_read, true);
  variant<kMT, 8, 4, 4, 0>(c, "u8 w4 b4", s, M, nsets, t_read, true);
  variant<kMT, 4, 4, 4, 1>(c, "pipe u4 w4 b4", s, M, nsets, t_read, true);
  variant<kMT, 4, 8, 2, 1>(c, "pipe u4 w8 b2", s, M, nsets, t_read, true);
  variant<kMT, 4, 8, 2, 0>(c, "u4 w8 b2", s, M, nsets, t_read, true);
  variant<kMT, 8, 4, 4, 2>(c, "u8 w4 b4 +ws+release", s, M, nsets, t_read, true);
  variant<kMT, 8, 4, 4, 3>(c, "u8 w4 b4 +ws+relaxed", s, M, nsets, t_read, true);
}

int main(int argc, char** argv) {
  Ctx c;
  c.reps = argc > 1 ? atoi(argv[1]) : 30;
  int dev = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&c.sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  /* FCO_PROBE_SHAPES="NxK,..." (K of one rank) replaces the default list */
  std::vector<Shape> shapes = {{8192, 4096, "8192² P=2"},
                               {8192, 8192, "8192² P=1"},
                               {8192, 14336, "8192×28672/2"},
                               {4096, 7168, "4096×14336/2"},
                               {16384, 8192, "16384²/2"}};
  if (const char* e = getenv("FCO_PROBE_SHAPES")) {
    shapes.clear();
    for (const char* q = e; *q;) {
      int n = 0;
      long long k = 0;
      if (sscanf(q, "%dx%lld", &n, &k) != 2 || n < 1 || n > 16384 || k < 1 || (size_t)n * k > ((size_t)1 << 28)) {
        fprintf(stderr, "FCO_PROBE_SHAPES: '%s' is not NxK,... (N <= 16384, N*K <= 2^28)\n", e);
        return 2;
      }
      shapes.push_back({n, k, "env"});
      while (*q && *q != ',') ++q;
      if (*q == ',') ++q;
    }
  }
  size_t maxw = 0;
  for (const Shape& s : shapes) maxw = std::max(maxw, (size_t)s.N * s.K);
  const size_t foot = 3 * (size_t)l2; /* bytes the rotation must cover */
  c.pool_elems = std::max(2 * maxw, foot / 2 + maxw);
  CK(cudaMalloc(&c.pool, c.pool_elems * 2));
  CK(cudaMalloc(&c.x, (size_t)64 * 16384 * 2));
  CK(cudaMalloc(&c.y, (size_t)64 * 16384 * 4));
  CK(cudaMalloc(&c.yref, (size_t)64 * 16384 * 4));
  CK(cudaMalloc(&c.sink, 4));
  CK(cudaMalloc(&c.ws, (size_t)64 * 16384 * 4));
  CK(cudaMalloc(&c.flags, (size_t)16384 / kTileN * 8));
  CK(cudaMemset(c.flags, 0, (size_t)16384 / kTileN * 8));
  c.epoch = 0;
  init_kernel<<<1024, 256>>>(c.pool, (int64_t)c.pool_elems, 1u);
  init_kernel<<<64, 256>>>(c.x, (int64_t)64 * 16384, 7u);
  CK(cudaEventCreate(&c.ev[0]));
  CK(cudaEventCreate(&c.ev[1]));
  CK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  printf("# gemv_stream_probe: %s, %d SMs, L2 %d MiB, %d reps (median µs), bf16\n", prop.name,
         c.sms, l2 >> 20, c.reps);
  printf("# event: one launch between two events; graph: %d back-to-back launches in a CUDA graph "
         "(as fco-bench -G 1), per launch\n", kGraphLaunches);
  printf("# read%% = pure streaming read of the same bytes (read_kernel, best grid) / variant time; "
         "GB/s of W over the graph time\n\n");
  printf("| shape | N×K | M | variant | grid | b/SM | event µs | read%% | graph µs | GB/s | read%% | #wrong |\n");
  printf("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Shape& s : shapes) {
    const size_t wel = (size_t)s.N * s.K;
    const int nsets = (int)std::max<size_t>(1, std::min(c.pool_elems / wel, (foot + wel * 2 - 1) / (wel * 2)));
    const int64_t n16 = (int64_t)(wel * 2 / 16);
    Times t_read{1e30f, 1e30f};
    for (int mult : {2, 4, 8}) {
      const Times us = time_it(c, nsets, [&](int set, cudaStream_t st) {
        read_kernel<8><<<c.sms * mult, 256, 0, st>>>((const uint4*)(c.pool + set * wel), n16, c.sink);
      });
      t_read.event = std::min(t_read.event, us.event);
      t_read.graph = std::min(t_read.graph, us.graph);
    }
    printf("| %-12s | %5d×%-6lld | -- | %-18s | -- | -- | %8.2f | 100.0 | %8.2f | %7.0f | 100.0 | -- |\n",
           s.what, s.N, (long long)s.K, "read (best grid)", t_read.event, t_read.graph,
           wel * 2.0 / (t_read.graph * 1e3));
    for (int M : {1, 16}) {
      if (M <= 8)
        all_variants<1>(c, s, M, nsets, t_read);
      else
        all_variants<2>(c, s, M, nsets, t_read);
    }
  }
  return 0;
}

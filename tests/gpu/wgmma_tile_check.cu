/*
 * wgmma_tile_check.cu — check and time the tensor-core tiles of the fused GEMM + All-to-All
 * (impl 1 "tiles", src/cuda/gemm_alltoall_fused.cu) below the library: WgmmaTile and
 * WgmmaTileTma (gemm_tile_wgmma.cuh, sm_90a; cp.async vs TMA + mbarrier loads) and MmaTile
 * (gemm_tile.cuh) against a float64 CPU reference and against cuBLAS.
 *
 * Build from the repository root, then run build/wgmma_tile_check on an H100 / H200 (< 60 s):
 *   nvcc -O3 -std=c++17 -arch=sm_90a -Isrc/cuda -Iinclude tests/gpu/wgmma_tile_check.cu -lcublas -o build/wgmma_tile_check
 * Options: -c (correctness only), -t (timing only), -n reps (default 20), -w warm-up (default 3).
 * Exit 0 pass, 1 fail, 77 skip (no compute capability 9.0 device).
 *
 * (a) correctness: bf16 and f16, B [K][N] and [N][K], rows < BM and ragged K / N (K = 200,
 *     N = 72 + 8·k, rows 1, 37, 128, more than one M tile, several experts, K spanning many
 *     pipeline rounds); outputs poisoned (NaN) first, the bytes past the output checked untouched;
 *     |got − ref| ≤ 1e-2 · max(|ref|, rms(ref)) per element. One PASS / FAIL line per case and
 *     tile, the first mismatches printed on failure.
 * (b) timing: the grouped GEMM over E experts with equal rows per expert, computed as
 *     ga_kernel_tiles does (a persistent grid of one block per SM, tiles over the experts in
 *     order, groups of 8 M tiles, M fastest; each tile stored from shared memory to global with
 *     store_tile) for each tile (columns wgmma = WgmmaTile, tma = WgmmaTileTma, tma2 = its cluster
 *     pairs, tmaA = WgmmaTileTma with the asynchronous epilogue (3 stages, C drained by bulk
 *     copies while the next tile computes, as impl 1 with FCO_GA_EPI=async), mma = MmaTile:
 *     µs, TF/s, cuBLAS time / tile time), and by cuBLAS (cublasGemmStridedBatchedEx, fp32
 *     compute). Median of -n reps after -w warm-up; bf16; both B layouts. Each tile's output is
 *     compared with cuBLAS's (wrong = elements off by more than the tolerance above).
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "gemm_tile.cuh"
#include "gemm_tile_wgmma.cuh"
#include "check.cuh"

#define CUBLAS_CHECK(x)                                                                       \
  do {                                                                                        \
    cublasStatus_t s_ = (x);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_);      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

using fco::tile::MmaTile;
using fco::tile::WgmmaTile;
using fco::tile::WgmmaTileTma;

constexpr int kGroupM = 8; /* as gemm_alltoall_fused.cu */
static int g_sms = 0;     /* SMs of the device */
constexpr double kTol = 1e-2;

/* ---- the harness: ga_kernel_tiles' tile loop without the communication ---------------------- */
template <typename T>
struct Problem {
  const T* a; /* [E·rows][K] */
  const T* w; /* [E][K][N] or [E][N][K] */
  T* c;       /* [E·rows][N] */
  int rows, K, N, E;
};

/* Tile t of the grouped order (as ga_kernel_tiles): expert, then groups of kGroupM M tiles × every
 * N tile, M fastest. */
struct TileAt {
  int ex, m0, n0;
};
__device__ __forceinline__ TileAt tile_at(int64_t t, int64_t nM, int64_t nN, int bm, int bn) {
  const int64_t per_expert = nM * nN;
  const int ex = (int)(t / per_expert);
  const int64_t l = t - ex * per_expert, grp = l / (kGroupM * nN);
  const int64_t in = l - grp * kGroupM * nN, gm = min((int64_t)kGroupM, nM - grp * kGroupM);
  return {ex, (int)(grp * kGroupM + in % gm) * bm, (int)(in / gm) * bn};
}
template <class Tile>
__global__ void __launch_bounds__(256, 1) grouped_kernel(const Problem<typename Tile::Elem> p) {
  using T = typename Tile::Elem;
  extern __shared__ __align__(16) char smem[];
  const int64_t nN = (p.N + Tile::BN - 1) / Tile::BN, nM = (p.rows + Tile::BM - 1) / Tile::BM;
  const int64_t total = nM * nN * p.E;
  const size_t rb = (size_t)p.N * sizeof(T);
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const TileAt at = tile_at(t, nM, nN, Tile::BM, Tile::BN);
    const int ex = at.ex, m0 = at.m0, n0 = at.n0;
    const int rows = min(Tile::BM, p.rows - m0), cols = min(Tile::BN, p.N - n0);
    const T* a = p.a + ((size_t)ex * p.rows + m0) * p.K;
    const T* w = p.w + (size_t)ex * p.K * p.N;
    Tile::run(smem, a, rows, w, p.K, p.N, n0);
    char* dst = reinterpret_cast<char*>(p.c) + ((size_t)ex * p.rows + m0) * rb + (size_t)n0 * sizeof(T);
    fco::tile::store_c<Tile>(smem, rows, cols, dst, rb);
  }
}

/* The same loop for WgmmaTileTma: A and W through tensor maps (a kernel parameter). */
template <typename T>
struct TmaProblem {
  CUtensorMap ma, mw;
  T* c;
  int rows, K, N, E;
};
template <class Tile>
__global__ void __launch_bounds__(256, 1)
    grouped_kernel_tma(const __grid_constant__ TmaProblem<typename Tile::Elem> p) {
  using T = typename Tile::Elem;
  extern __shared__ __align__(16) char smem[];
  const int64_t nN = (p.N + Tile::BN - 1) / Tile::BN, nM = (p.rows + Tile::BM - 1) / Tile::BM;
  const int64_t total = nM * nN * p.E;
  const size_t rb = (size_t)p.N * sizeof(T);
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const TileAt at = tile_at(t, nM, nN, Tile::BM, Tile::BN);
    const int ex = at.ex, m0 = at.m0, n0 = at.n0;
    const int rows = min(Tile::BM, p.rows - m0), cols = min(Tile::BN, p.N - n0);
    Tile::run(smem, &p.ma, ex * p.rows + m0, &p.mw, ex, p.K, p.N, n0);
    char* dst = reinterpret_cast<char*>(p.c) + ((size_t)ex * p.rows + m0) * rb + (size_t)n0 * sizeof(T);
    fco::tile::store_c<Tile>(smem, rows, cols, dst, rb); /* as ga_kernel_tiles */
  }
  if constexpr (fco::tile::AsyncC<Tile>::value)
    if (threadIdx.x < 32) fco::bulk_wait_all();
}

/* Pairs of blocks (clusters of 2): cluster c runs the tile pairs (2q, 2q + 1), q = c, c + #clusters,
 * ..., block rank r tile 2q + r; what the pair shares (same expert and n0: W, same rows: A) is
 * multicast. A block whose tile is past the end computes its partner's and stores nothing. */
template <class Tile>
__global__ void __launch_bounds__(256, 1)
    grouped_kernel_tma_pair(const __grid_constant__ TmaProblem<typename Tile::Elem> p) {
  using T = typename Tile::Elem;
  extern __shared__ __align__(16) char smem[];
  const int64_t nN = (p.N + Tile::BN - 1) / Tile::BN, nM = (p.rows + Tile::BM - 1) / Tile::BM;
  const int64_t total = nM * nN * p.E, pairs = (total + 1) / 2;
  const size_t rb = (size_t)p.N * sizeof(T);
  const int rank = (int)(blockIdx.x & 1);
  for (int64_t q = blockIdx.x >> 1; q < pairs; q += gridDim.x >> 1) {
    const TileAt t0 = tile_at(2 * q, nM, nN, Tile::BM, Tile::BN);
    const bool two = 2 * q + 1 < total;
    const TileAt t1 = two ? tile_at(2 * q + 1, nM, nN, Tile::BM, Tile::BN) : t0;
    const int share = !two || t0.ex != t1.ex ? 0 : t0.n0 == t1.n0 ? 1 : t0.m0 == t1.m0 ? 2 : 0;
    const TileAt t = rank ? t1 : t0;
    Tile::run(smem, &p.ma, t.ex * p.rows + t.m0, &p.mw, t.ex, p.K, p.N, t.n0, share);
    if (rank == 0 || two) {
      const int rows = min(Tile::BM, p.rows - t.m0), cols = min(Tile::BN, p.N - t.n0);
      char* dst = reinterpret_cast<char*>(p.c) + ((size_t)t.ex * p.rows + t.m0) * rb +
                  (size_t)t.n0 * sizeof(T);
      fco::tile::store_tile<T, Tile::kCPitch>(reinterpret_cast<const T*>(smem), rows, cols, dst,
                                              rb);
    }
    __syncthreads();
  }
}

template <class Tile>
void launch_grouped(const Problem<typename Tile::Elem>& p, int grid, cudaStream_t st);

/* The kernel arguments of a TMA tile for problem p: its tensor maps over the experts' A rows and
 * weights (exits when the driver refuses to encode them). */
template <class Tile>
TmaProblem<typename Tile::Elem> tma_problem(const Problem<typename Tile::Elem>& p) {
  TmaProblem<typename Tile::Elem> q;
  memset(&q, 0, sizeof q);
  const char* why = Tile::encode(&q.ma, &q.mw, p.a, (long long)p.E * p.rows, p.w, p.K, p.N, p.E);
  if (why) {
    fprintf(stderr, "tensor maps: %s\n", why);
    exit(1);
  }
  q.c = p.c;
  q.rows = p.rows;
  q.K = p.K;
  q.N = p.N;
  q.E = p.E;
  return q;
}
template <class Tile>
struct TmaLaunch {
  static void launch(const Problem<typename Tile::Elem>& p, int grid, cudaStream_t st) {
    static bool attr = false;
    if (!attr) {
      CUDA_CHECK(cudaFuncSetAttribute(grouped_kernel_tma<Tile>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Tile::kSmemBytes));
      attr = true;
    }
    const TmaProblem<typename Tile::Elem> q = tma_problem<Tile>(p);
    grouped_kernel_tma<Tile><<<grid, Tile::kThreads, Tile::kSmemBytes, st>>>(q);
    CUDA_CHECK(cudaGetLastError());
  }
};
template <class Tile>
struct TmaPairLaunch {
  static void launch(const Problem<typename Tile::Elem>& p, int grid, cudaStream_t st) {
    static int max_pairs = 0;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(Tile::kThreads);
    cfg.dynamicSmemBytes = Tile::kSmemBytes;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    if (!max_pairs) {
      CUDA_CHECK(cudaFuncSetAttribute(grouped_kernel_tma_pair<Tile>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Tile::kSmemBytes));
      cfg.gridDim = dim3(2 * g_sms);
      CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_pairs, grouped_kernel_tma_pair<Tile>, &cfg));
      if (max_pairs < 1) {
        fprintf(stderr, "no cluster of 2 blocks fits\n");
        exit(1);
      }
    }
    int pairs = grid / 2;
    if (pairs < 1) pairs = 1;
    if (pairs > max_pairs) pairs = max_pairs;
    cfg.gridDim = dim3(2 * pairs);
    const TmaProblem<typename Tile::Elem> q = tma_problem<Tile>(p);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, grouped_kernel_tma_pair<Tile>, q));
  }
};
template <typename T, bool kBT>
void launch_grouped_tma(const Problem<T>& p, int grid, cudaStream_t st) {
  TmaLaunch<WgmmaTileTma<T, kBT>>::launch(p, grid, st);
}
template <typename T, bool kBT>
void launch_grouped_tma_async(const Problem<T>& p, int grid, cudaStream_t st) {
  TmaLaunch<WgmmaTileTma<T, kBT, 1, true>>::launch(p, grid, st);
}
template <typename T, bool kBT>
void launch_grouped_tma2(const Problem<T>& p, int grid, cudaStream_t st) {
  TmaPairLaunch<WgmmaTileTma<T, kBT, 2>>::launch(p, grid, st);
}

template <class Tile>
void launch_grouped(const Problem<typename Tile::Elem>& p, int grid, cudaStream_t st) {
  static bool attr = false;
  if (!attr) {
    CUDA_CHECK(cudaFuncSetAttribute(grouped_kernel<Tile>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
    attr = true;
  }
  grouped_kernel<Tile><<<grid, 256, Tile::kSmemBytes, st>>>(p);
  CUDA_CHECK(cudaGetLastError());
}

/* ---- element helpers ------------------------------------------------------------------------- */
template <typename T>
float to_f(T x);
template <>
float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
float to_f(__half x) { return __half2float(x); }
template <typename T>
T from_f(float x);
template <>
__nv_bfloat16 from_f(float x) { return __float2bfloat16(x); }
template <>
__half from_f(float x) { return __float2half(x); }
template <typename T>
const char* tname();
template <>
const char* tname<__nv_bfloat16>() { return "bf16"; }
template <>
const char* tname<__half>() { return "f16"; }

static uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}
__device__ __forceinline__ uint32_t dhash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}
template <typename T>
__global__ void fill_kernel(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float u = (float)(dhash32(seed * 0x9E3779B97F4A7C15ull + i) >> 8) * (1.f / 16777216.f);
    p[i] = (T)(2.f * u - 1.f);
  }
}

/* Elements of got off from ref by more than kTol · max(|ref|, rms) (rms over ref, fp32 sums). */
template <typename T>
__global__ void compare_kernel(const T* got, const T* ref, size_t n, float rms,
                               unsigned long long* wrong, float* max_rel) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float g = (float)got[i], r = (float)ref[i];
    const float rel = fabsf(g - r) / fmaxf(fabsf(r), rms);
    if (!(rel <= (float)kTol)) atomicAdd(wrong, 1ull);
    if (rel == rel) atomicMax(reinterpret_cast<int*>(max_rel), __float_as_int(rel));
    else atomicMax(reinterpret_cast<int*>(max_rel), 0x7f7fffff);
  }
}
template <typename T>
__global__ void sumsq_kernel(const T* p, size_t n, double* out) {
  double s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const double x = (double)(float)p[i];
    s += x * x;
  }
  atomicAdd(out, s);
}

/* ---- (a) correctness ------------------------------------------------------------------------- */
/* Run Tile on the case (output poisoned first) and compare with ref; one PASS / FAIL line. */
template <typename T>
using LaunchFn = void (*)(const Problem<T>&, int, cudaStream_t);

template <typename T, bool kBT>
static bool run_case(const char* tile_name, LaunchFn<T> launch, const T* da, const T* dw, int rows, int K, int N,
                     int E, const std::vector<double>& ref, double rms) {
  const size_t nc = (size_t)E * rows * N, guard = 4096; /* guard: past the end, untouched */
  std::vector<T> hc(nc + guard);
  T* dc;
  CUDA_CHECK(cudaMalloc(&dc, (nc + guard) * sizeof(T)));
  CUDA_CHECK(cudaMemset(dc, 0xFF, (nc + guard) * sizeof(T))); /* NaN in bf16 and f16 */
  Problem<T> p{da, dw, dc, rows, K, N, E};
  launch(p, 3, 0); /* few blocks: several tiles each, smem reused */
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(hc.data(), dc, (nc + guard) * sizeof(T), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dc));
  size_t wrong = 0, guard_bad = 0;
  double max_rel = 0;
  for (size_t i = 0; i < nc; ++i) {
    const double g = to_f(hc[i]), rel = fabs(g - ref[i]) / std::max(fabs(ref[i]), rms);
    if (!(rel <= kTol)) {
      if (wrong < 5) {
        const size_t row = i / N;
        fprintf(stderr, "   mismatch %s: expert %zu row %zu col %zu: got %g want %g\n", tile_name,
                row / rows, row % rows, i % N, g, ref[i]);
      }
      ++wrong;
    }
    if (rel == rel) max_rel = std::max(max_rel, rel);
  }
  for (size_t i = nc; i < nc + guard; ++i) {
    uint16_t bits;
    memcpy(&bits, &hc[i], 2);
    if (bits != 0xFFFF) ++guard_bad;
  }
  const bool ok = wrong == 0 && guard_bad == 0;
  printf("%-4s %-13s %-6s rows %4d K %5d N %4d E %d  max_rel %.2e  wrong %zu  past-end %zu  %s\n",
         ok ? "PASS" : "FAIL", tile_name, tname<T>(), rows, K, N, E, max_rel, wrong, guard_bad,
         kBT ? "[N][K]" : "[K][N]");
  fflush(stdout);
  return ok;
}

/* Fresh inputs and the float64 reference; MmaTile (the control) and WgmmaTile on them. Returns
 * the number of failing tiles. */
template <typename T, bool kBT>
static int check_case(int rows, int K, int N, int E, uint64_t seed) {
  const size_t na = (size_t)E * rows * K, nw = (size_t)E * K * N, nc = (size_t)E * rows * N;
  std::vector<T> ha(na), hw(nw);
  std::vector<float> fa(na), fw(nw);
  for (size_t i = 0; i < na; ++i) {
    ha[i] = from_f<T>(2.f * (hash32(seed * 3 + i) >> 8) / 16777216.f - 1.f);
    fa[i] = to_f(ha[i]);
  }
  for (size_t i = 0; i < nw; ++i) {
    hw[i] = from_f<T>(2.f * (hash32(seed * 3 + 1 + (i << 20)) >> 8) / 16777216.f - 1.f);
    fw[i] = to_f(hw[i]);
  }
  T *da, *dw;
  CUDA_CHECK(cudaMalloc(&da, na * sizeof(T)));
  CUDA_CHECK(cudaMalloc(&dw, nw * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(da, ha.data(), na * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dw, hw.data(), nw * sizeof(T), cudaMemcpyHostToDevice));

  std::vector<double> ref(nc);
  double ss = 0;
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < rows; ++r)
      for (int n = 0; n < N; ++n) {
        double s = 0;
        const float* ar = &fa[((size_t)e * rows + r) * K];
        const float* we = &fw[(size_t)e * K * N];
        if (kBT)
          for (int k = 0; k < K; ++k) s += (double)ar[k] * we[(size_t)n * K + k];
        else
          for (int k = 0; k < K; ++k) s += (double)ar[k] * we[(size_t)k * N + n];
        ref[((size_t)e * rows + r) * N + n] = s;
        ss += s * s;
      }
  const double rms = sqrt(ss / (double)nc);
  int fails = 0;
  fails += !run_case<T, kBT>("MmaTile", launch_grouped<MmaTile<T, kBT, true>>, da, dw, rows, K,
                             N, E, ref, rms);
  fails += !run_case<T, kBT>("WgmmaTile", launch_grouped<WgmmaTile<T, kBT>>, da, dw, rows, K, N,
                             E, ref, rms);
  fails += !run_case<T, kBT>("WgmmaTileTma", launch_grouped_tma<T, kBT>, da, dw, rows, K, N, E,
                             ref, rms);
  fails += !run_case<T, kBT>("WgmmaTileTma2", launch_grouped_tma2<T, kBT>, da, dw, rows, K, N, E,
                             ref, rms);
  fails += !run_case<T, kBT>("WgmmaTileTmaA", launch_grouped_tma_async<T, kBT>, da, dw, rows, K,
                             N, E, ref, rms);
  CUDA_CHECK(cudaFree(da));
  CUDA_CHECK(cudaFree(dw));
  return fails;
}

template <typename T, bool kBT>
static int check_all() {
  struct C { int rows, K, N, E; };
  const C cases[] = {
      {1, 200, 72, 1},    {37, 200, 80, 1},   {128, 200, 88, 1},  {37, 200, 264, 2},
      {128, 64, 256, 1},  {77, 1000, 136, 1}, {300, 1032, 520, 2}, {129, 4104, 328, 1},
  };
  int fails = 0;
  uint64_t seed = 1;
  for (const C& c : cases) fails += check_case<T, kBT>(c.rows, c.K, c.N, c.E, seed++);
  return fails;
}

/* ---- (b) timing -------------------------------------------------------------------------------- */
static float time_median(int reps, int warm, cudaStream_t st, const std::function<void()>& fn) {
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < warm; ++i) fn();
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(ev[2 * i], st));
    fn();
    CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], st));
  }
  CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) CUDA_CHECK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

struct CmpResult {
  unsigned long long wrong;
  float max_rel;
};
template <typename T>
static CmpResult compare_dev(const T* got, const T* ref, size_t n, float rms) {
  unsigned long long* dw;
  float* dm;
  CUDA_CHECK(cudaMalloc(&dw, sizeof *dw));
  CUDA_CHECK(cudaMalloc(&dm, sizeof *dm));
  CUDA_CHECK(cudaMemset(dw, 0, sizeof *dw));
  CUDA_CHECK(cudaMemset(dm, 0, sizeof *dm));
  compare_kernel<<<4 * g_sms, 256>>>(got, ref, n, rms, dw, dm);
  CUDA_CHECK(cudaGetLastError());
  CmpResult r;
  CUDA_CHECK(cudaMemcpy(&r.wrong, dw, sizeof *dw, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&r.max_rel, dm, sizeof *dm, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dw));
  CUDA_CHECK(cudaFree(dm));
  return r;
}

/* The tiles timed, in table order (MmaTile last: the slow control). */
template <typename T, bool kBT>
struct Timed {
  const char* name;
  LaunchFn<T> launch;
};
template <typename T, bool kBT>
static std::vector<Timed<T, kBT>> timed_tiles() {
  return {{"wgmma", launch_grouped<WgmmaTile<T, kBT>>},
          {"tma", launch_grouped_tma<T, kBT>},
          {"tma2", launch_grouped_tma2<T, kBT>},
          {"tmaA", launch_grouped_tma_async<T, kBT>},
          {"mma", launch_grouped<MmaTile<T, kBT, true>>}};
}
static const char* const kTimedNames[] = {"wgmma", "tma", "tma2", "tmaA", "mma"};
constexpr int kNumTimed = 5;

template <bool kBT>
static int time_shape(cublasHandle_t h, int rows, int K, int N, int E, int reps, int warm) {
  using T = __nv_bfloat16;
  const size_t na = (size_t)E * rows * K, nw = (size_t)E * K * N, nc = (size_t)E * rows * N;
  const auto tiles = timed_tiles<T, kBT>();
  T *a, *w, *c_ref, *c_t;
  CUDA_CHECK(cudaMalloc(&a, na * sizeof(T)));
  CUDA_CHECK(cudaMalloc(&w, nw * sizeof(T)));
  CUDA_CHECK(cudaMalloc(&c_ref, nc * sizeof(T)));
  CUDA_CHECK(cudaMalloc(&c_t, nc * sizeof(T)));
  fill_kernel<<<4 * g_sms, 256>>>(a, na, 11);
  fill_kernel<<<4 * g_sms, 256>>>(w, nw, 12);
  CUDA_CHECK(cudaGetLastError());
  cudaStream_t st = 0;

  /* Row-major C[rows][N] = A[rows][K]·W is column-major Cᵀ (N × rows) = Wᵀ-view · Aᵀ-view:
   * W [K][N] row-major is column-major N × K (ld N, no transpose); [N][K] is K × N (ld K, T). */
  const float alpha = 1.f, beta = 0.f;
  auto cublas = [&] {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h, kBT ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, rows, K, &alpha, w, CUDA_R_16BF,
        kBT ? K : N, (long long)K * N, a, CUDA_R_16BF, K, (long long)rows * K, &beta, c_ref,
        CUDA_R_16BF, N, (long long)rows * N, E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  const float t_cub = time_median(reps, warm, st, cublas);
  CUDA_CHECK(cudaDeviceSynchronize());
  double* dss;
  double ss = 0;
  CUDA_CHECK(cudaMalloc(&dss, sizeof *dss));
  CUDA_CHECK(cudaMemset(dss, 0, sizeof *dss));
  sumsq_kernel<<<4 * g_sms, 256>>>(c_ref, nc, dss);
  CUDA_CHECK(cudaMemcpy(&ss, dss, sizeof ss, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(dss));
  const float rms = (float)sqrt(ss / (double)nc);

  const double flop = 2.0 * E * rows * (double)K * N;
  auto tf = [&](float ms) { return flop / (ms * 1e-3) / 1e12; };
  printf("%6d %6d %6d %4d %-6s %9.1f %6.1f", rows, K, N, E, kBT ? "[N][K]" : "[K][N]", t_cub * 1e3,
         tf(t_cub));
  int fails = 0;
  std::vector<unsigned long long> wrong;
  for (const auto& tl : tiles) {
    CUDA_CHECK(cudaMemset(c_t, 0xFF, nc * sizeof(T)));
    Problem<T> p{a, w, c_t, rows, K, N, E};
    const float t = time_median(reps, warm, st, [&] { tl.launch(p, g_sms, st); });
    CUDA_CHECK(cudaDeviceSynchronize());
    const CmpResult r = compare_dev(c_t, c_ref, nc, rms);
    printf(" %9.1f %6.1f %6.2f", t * 1e3, tf(t), t_cub / t);
    wrong.push_back(r.wrong);
    fails += r.wrong != 0;
  }
  for (unsigned long long x : wrong) printf(" %6llu", x);
  printf("\n");
  fflush(stdout);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(w));
  CUDA_CHECK(cudaFree(c_ref));
  CUDA_CHECK(cudaFree(c_t));
  return fails;
}

int main(int argc, char** argv) {
  bool do_check = true, do_time = true;
  int reps = 20, warm = 3;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-c")) do_time = false;
    else if (!strcmp(argv[i], "-t")) do_check = false;
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-w") && i + 1 < argc) warm = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-c | -t] [-n reps] [-w warmup]\n", argv[0]);
      return 1;
    }
  }
  if (reps < 1) reps = 1;
  int dev = 0, ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("# SKIP: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  g_sms = prop.multiProcessorCount;
  printf("# wgmma_tile_check: %s, cc %d.%d, %d SMs, smem opt-in %zu B; WgmmaTile smem %d B, "
         "WgmmaTileTma %d B, MmaTile %d B\n",
         prop.name, prop.major, prop.minor, g_sms, prop.sharedMemPerBlockOptin,
         WgmmaTile<__nv_bfloat16, false>::kSmemBytes,
         WgmmaTileTma<__nv_bfloat16, false>::kSmemBytes,
         MmaTile<__nv_bfloat16, false, true>::kSmemBytes);
  if (prop.major != 9 || prop.minor != 0) {
    printf("# SKIP: sm_90a code needs compute capability 9.0\n");
    return 77;
  }
  int fails = 0;
  if (do_check) {
    printf("# (a) correctness vs float64 CPU reference, tolerance %.0e · max(|ref|, rms)\n", kTol);
    fails += check_all<__nv_bfloat16, false>();
    fails += check_all<__nv_bfloat16, true>();
    fails += check_all<__half, false>();
    fails += check_all<__half, true>();
  }
  if (do_time) {
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    printf("# (b) grouped GEMM, bf16, persistent grid of %d blocks (one per SM), median of %d "
           "after %d warm-up; cuBLAS = cublasGemmStridedBatchedEx\n",
           g_sms, reps, warm);
    printf("# %4s %6s %6s %4s %-6s %9s %6s", "rows", "K", "N", "E", "B", "cublas", "cublas");
    for (const char* n : kTimedNames) printf(" %9s %6s %6s", n, n, n);
    for (const char* n : kTimedNames) printf(" %6s", n);
    printf("\n# %4s %6s %6s %4s %-6s %9s %6s", "", "", "", "", "", "(us)", "(TF/s)");
    for (int i = 0; i < kNumTimed; ++i) printf(" %9s %6s %6s", "(us)", "(TF/s)", "/cub");
    for (int i = 0; i < kNumTimed; ++i) printf(" %6s", "wrong");
    printf("\n");
    struct S { int rows, K, N, E; };
    const S shapes[] = {{2048, 14336, 4096, 4}, {512, 14336, 4096, 4}, {128, 2048, 7168, 32},
                        {32, 2048, 7168, 32}};
    for (const S& s : shapes) {
      fails += time_shape<false>(h, s.rows, s.K, s.N, s.E, reps, warm);
      fails += time_shape<true>(h, s.rows, s.K, s.N, s.E, reps, warm);
    }
    CUBLAS_CHECK(cublasDestroy(h));
  }
  printf("# %s (%d failure%s)\n", fails ? "FAIL" : "PASS", fails, fails == 1 ? "" : "s");
  return fails ? 1 : 0;
}

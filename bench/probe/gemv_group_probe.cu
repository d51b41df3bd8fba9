/*
 * gemv_group_probe.cu — can a grouped GEMV tile at M = 64 stream W as fast as cuBLAS? (issue 3)
 *
 * One GPU, no communication. At M 33..64 the fused GEMV + AllReduce runs grouped tiles
 * (src/cuda/gemv_group_wgmma.cuh, GroupWgmma: wgmma m64n32k16 per warpgroup fed by a 12-stage
 * cp.async ring that all 256 threads fill, two block barriers per 64-k slab). At P = 1 it read
 * W at ~2.6 TB/s where cuBLAS's GEMM reached ~3.5 (48.6 vs 37.0 µs at 64×8192×8192, run
 * c616e61), which is why AUTO runs cuBLAS + fco's one-shot at M > 16. This probe times, on the
 * same data, before anything goes into the operator:
 *   lib    the library's GroupWgmma<4> (one 64-column group per block at a time, persistent)
 *   tmaws  the same math fed the Hopper way: TMA box loads of x [64 rows × 64 k] and W [kGr·16
 *          rows × 64 k] (128-byte swizzle, the layout GroupWgmma's descriptors read) into an
 *          S-stage ring, issued by a ninth, producer-only warp; "full" mbarriers complete on the
 *          bytes, the 8 consumer warps release a stage through an "empty" mbarrier once their
 *          wgmma on it retired; the slab counter runs on across a block's groups. No block-wide
 *          barrier in the loop. tmaws4: groups of 4 tiles (64 columns); tmaws2: groups of 2
 *          (two blocks per SM). "clN": clusters of N blocks, each loading 64/N rows of x
 *          multicast to the cluster. (Session 12's "tma" kernel, in commit 82a87ad and before,
 *          had thread 0 — a lane of consumer warp 0 — produce, which coupled the two warpgroups
 *          every slab: 1.5–2.5× lib's time.)
 *   cublas cublasGemmEx with fp32 y, the reference of the results; "cublas bf16" the operator's
 *          impl 0 / 3 call (bf16 y, 32 MiB workspace), added after run 7bf1d5b
 *   read   W alone streamed with 16-byte loads (the ceiling)
 * Shapes M = 64 (and 48) × N × K: 8192 × 8192, 8192 × 4096 (a P = 2 rank's slice), 4096 × 7168,
 * 16384 × 8192; bf16, fp32 accumulation. Every kernel's y is compared with cuBLAS's
 * (max |diff| / max |ref| ≤ 1e-2, else counted wrong). W rotates over buffer sets whose
 * footprint exceeds 3 × L2. Columns: µs (median of reps), TB/s of W bytes, × cuBLAS.
 *
 * Build and run (tests/gpu/run.sh does, with FCO_GPU_PROBE=1; argument: reps, default 30):
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda -Iinclude \
 *     bench/probe/gemv_group_probe.cu -lcublas -o build/probe/gemv_group_probe
 *
 * Run 7bf1d5b (session 12, bench/results/2026-12-01_nvidia-h200_7bf1d5b): the TMA tiles 1.5–2.5×
 * slower than lib at every shape; lib faster than the fp32-y cuBLAS call at N = 8192. Session 13
 * (runs 8728f2c, d5f5cf2-probe, 82a87ad-probe): "cublas bf16" within 0–4 % of "cublas"; tmaws
 * 1.1–1.3× lib's time; the cluster variants 3–8× slower (correct; cause not found).
 */
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "gemv_group_wgmma.cuh"
#include "probe.h"

using bf16 = __nv_bfloat16;
using fco::smem_u32;

constexpr int kG = 4, kBN = kG * 16; /* a group: 4 tiles of 16 columns */

/* ---- lib: GroupWgmma<4>, groups g = blockIdx.x, + gridDim.x, ... ---------------------------- */
__global__ void __launch_bounds__(256, 1)
    lib_kernel(const bf16* w, const bf16* x, float* y, int M, int N, int K, int groups) {
  extern __shared__ __align__(1024) unsigned char smem[];
  using Tile = fco::gemv::GroupWgmma<kG>;
  for (int g = blockIdx.x; g < groups; g += gridDim.x) {
    Tile::template run<bf16>(w, x, M, N, K, g * kBN, smem);
    const float* out = reinterpret_cast<const float*>(smem); /* [kG][64][16] */
    for (int i = threadIdx.x; i < kG * 64 * 16; i += blockDim.x) {
      const int t = i / (64 * 16), m = (i / 16) % 64, c = i % 16, n = g * kBN + t * 16 + c;
      if (m < M && n < N) y[(size_t)m * N + n] = out[i];
    }
    __syncthreads();
  }
}

/* ---- the TMA ring's layout ---------------------------------------------------------------- */
/* kGr tiles of 16 columns a group (4 as the library's default; 2: twice the groups, so two
 * blocks per SM have work at N = 8192 when the ring is small enough). */
template <int kS, int kGr>
struct TmaRing {
  static constexpr int kCols = kGr * 16;
  static constexpr int kXBytes = 64 * 128, kWBytes = kCols * 128, kStageBytes = kXBytes + kWBytes;
  static constexpr int kBarOff = kS * kStageBytes;
  static constexpr int kOutBytes = kGr * 64 * 16 * 4;
  static constexpr int kSmem = 1024 + kBarOff + 2 * kS * 8 + kOutBytes;
};

/* ---- tmaws: the TMA tile with a producer warp (session 13) ----------------------------------
 * Run 7bf1d5b's tma kernel let thread 0, a lane of consumer warp 0, wait on a stage's "empty"
 * barrier before refilling it: warpgroup 0 (whose wgmmas are warpgroup-wide) then waited every
 * slab for warpgroup 1 to release the previous one — a block barrier per slab by another name.
 * Here a ninth warp only produces (lane 0: wait empty, expect bytes, two TMA loads), the eight
 * consumer warps only wait "full", run the wgmmas and release; the output goes through shared
 * memory under a named barrier of the 256 consumer threads (cuBLAS's nvjet kernel at this shape
 * runs 384 threads: a producer warpgroup and two consumer warpgroups, ncu run 0b0b1f7). */
constexpr int kWsThreads = 288;
/* kCl > 1: a cluster of kCl blocks (consecutive blockIdx.x, different groups, the same k slabs at
 * the same time) shares x: block r loads x rows [r·64/kCl, (r+1)·64/kCl) of a slab (mx's box has
 * 64/kCl rows) multicast to every block of the cluster, as cuBLAS's kernel here (cluster 4x1);
 * a stage is refilled only when the consumers of all kCl blocks released it (empty barriers
 * count 8·kCl warps, each warp arrives at every block's). Every block runs the same number of
 * groups (a block past the last group computes the last one again and stores nothing). */
template <int kS, int kGr, int kCl = 1>
__global__ void __launch_bounds__(kWsThreads, 1)
    tma_ws_kernel(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                  float* y, int M, int N, int K, int groups) {
#if FCO_WGMMA_COMPILED
  using R = TmaRing<kS, kGr>;
  constexpr int kC = R::kCols;
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
  const uint32_t pipe = (smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t full = pipe + R::kBarOff, empty = full + kS * 8;
  float* out = reinterpret_cast<float*>(smem + (pipe - smem_u32(smem)) + R::kBarOff + 2 * kS * 8);
  const int num_k = (K + 63) / 64;
  const int my_groups = kCl > 1 ? (groups + gridDim.x - 1) / gridDim.x
                      : groups > (int)blockIdx.x ? (groups - 1 - (int)blockIdx.x) / gridDim.x + 1 : 0;
  const long long total = (long long)my_groups * num_k; /* slabs of this block, all groups */
  const uint32_t crank = kCl > 1 ? fco::tile::cluster_ctarank() : 0;
  if (tid == 0) {
    for (int s = 0; s < kS; ++s) {
      fco::tile::mbar_init(full + 8 * s, 1);
      fco::tile::mbar_init(empty + 8 * s, 8 * kCl); /* the consumer warps of the cluster */
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (kCl > 1) fco::tile::cluster_sync(); else __syncthreads();
  if (tid >= 256) { /* the producer warp */
    if (tid == 256)
      for (long long q = 0; q < total; ++q) {
        const int s = (int)(q % kS);
        if (q >= kS) fco::tile::mbar_wait(empty + 8 * s, (uint32_t)(q / kS - 1) & 1u);
        const int g = min((int)blockIdx.x + (int)(q / num_k) * (int)gridDim.x, groups - 1);
        const int k0 = (int)(q % num_k) * 64;
        const uint32_t st = pipe + s * R::kStageBytes;
        fco::tile::mbar_arrive_expect_tx(full + 8 * s, R::kStageBytes);
        if constexpr (kCl > 1)
          fco::tile::tma_load_2d_mc(st + crank * (R::kXBytes / kCl), &mx, full + 8 * s, k0,
                                    (int)crank * (64 / kCl), (uint16_t)((1u << kCl) - 1));
        else
          fco::tile::tma_load_2d(st, &mx, full + 8 * s, k0, 0);
        fco::tile::tma_load_2d(st + R::kXBytes, &mw, full + 8 * s, k0, g * kC);
      }
  } else {
    auto release = [&](uint32_t bar) {
      if constexpr (kCl > 1) {
#pragma unroll
        for (int c = 0; c < kCl; ++c) fco::tile::mbar_arrive_cluster(bar, (uint32_t)c);
      } else {
        fco::tile::mbar_arrive(bar);
      }
    };
    float d[kC / 4];
    long long q = 0;
    for (int gi = 0; gi < my_groups; ++gi) {
      const int g = (int)blockIdx.x + gi * (int)gridDim.x;
#pragma unroll
      for (int i = 0; i < kC / 4; ++i) d[i] = 0.f;
      for (int kt = 0; kt < num_k; ++kt, ++q) {
        const int s = (int)(q % kS);
        fco::tile::mbar_wait(full + 8 * s, (uint32_t)(q / kS) & 1u);
        const uint32_t st = pipe + s * R::kStageBytes;
        const uint32_t b_off = R::kXBytes + (uint32_t)wg * (kC / 2) * 128;
        fco::tile::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          fco::gemv::WgmmaN<bf16, kC / 2>::run(
              d, fco::tile::wgmma_desc(st + kk * 32, 16, 1024),
              fco::tile::wgmma_desc(st + b_off + kk * 32, 16, 1024));
        fco::tile::wgmma_commit();
        fco::tile::wgmma_wait<1>(); /* my slab q − 1 retired: release its stage */
        if (q > 0) {
          __syncwarp();
          if (lane == 0) release(empty + 8 * (int)((q - 1) % kS));
        }
      }
      fco::tile::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < kC / 4; ++i) asm volatile("" : "+f"(d[i])::"memory");
      const int row0 = ((tid >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
      for (int j = 0; j < kC / 16; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int col = wg * (kC / 2) + 8 * j + 2 * (lane & 3) + (c & 1), row = row0 + 8 * (c >> 1);
          out[((col / 16) * 64 + row) * 16 + col % 16] = d[4 * j + c];
        }
      asm volatile("bar.sync 1, 256;" ::: "memory");
      for (int i = tid; i < kGr * 64 * 16; i += 256) {
        const int t = i / (64 * 16), m = (i / 16) % 64, c = i % 16, n = g * kC + t * 16 + c;
        if (m < M && n < N && g < groups) y[(size_t)m * N + n] = out[i];
      }
      asm volatile("bar.sync 1, 256;" ::: "memory");
    }
    if (q > 0) { /* the last slab's release keeps the barrier phases balanced */
      __syncwarp();
      if (lane == 0) release(empty + 8 * (int)((q - 1) % kS));
    }
  }
  if constexpr (kCl > 1) fco::tile::cluster_sync(); else __syncthreads();
  if (tid == 0)
    for (int s = 0; s < kS; ++s) {
      fco::tile::mbar_inval(full + 8 * s);
      fco::tile::mbar_inval(empty + 8 * s);
    }
#else
  __trap();
#endif
}

/* ---- read: W streamed with 16-byte loads --------------------------------------------------- */
__global__ void read_kernel(const uint4* w, size_t n16, unsigned long long* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(w + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) atomicAdd(sink, 1ull);
}

/* ---- host ---------------------------------------------------------------------------------- */
static bool encode(CUtensorMap* m, const void* base, int inner, int outer, int box_outer) {
  fco::tile::TmaEncodeFn fn = fco::tile::tma_encode_fn();
  if (!fn) return false;
  const cuuint64_t dim[2] = {(cuuint64_t)inner, (cuuint64_t)outer};
  const cuuint64_t stride[1] = {(cuuint64_t)inner * 2};
  const cuuint32_t box[2] = {64, (cuuint32_t)box_outer}, one[2] = {1, 1};
  return fn(m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dim, stride, box, one,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename F>
static float time_us(F&& launch, int reps, int sets) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 3; ++i) launch(i % sets); /* warm-up */
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    launch(i % sets);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

static float max_rel(const std::vector<float>& got, const std::vector<float>& ref) {
  float md = 0, mr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    md = std::max(md, std::fabs(got[i] - ref[i]));
    mr = std::max(mr, std::fabs(ref[i]));
  }
  return mr > 0 ? md / mr : md;
}

__global__ void fill_kernel(bf16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761u) ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16(((int)(h % 17) - 8) / 8.0f);
  }
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 30;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("# gemv_group_probe: %s, %d SMs, L2 %d MB, reps %d (median)\n", prop.name, sms,
         prop.l2CacheSize >> 20, reps);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  const int shapes[][3] = {{64, 8192, 8192}, {64, 8192, 4096}, {64, 4096, 7168},
                           {64, 16384, 8192}, {48, 8192, 4096}};
  printf("# %3s %6s %6s %-10s %9s %7s %8s %6s\n", "M", "N", "K", "kernel", "us", "TB/s", "x cublas",
         "wrong");
  int wrong_all = 0;
  for (const auto& sh : shapes) {
    const int M = sh[0], N = sh[1], K = sh[2];
    const size_t wn = (size_t)N * K, xn = (size_t)64 * K;
    const double wbytes = (double)wn * 2;
    const int sets = std::max(1, (int)(3.0 * prop.l2CacheSize / wbytes) + 1);
    std::vector<bf16*> W(sets);
    for (auto& p : W) {
      CK(cudaMalloc(&p, wn * 2));
      fill_kernel<<<1024, 256>>>(p, wn, (unsigned)(&p - W.data()) * 977u + 1u);
    }
    bf16* x;
    float *y, *yref;
    unsigned long long* sink;
    CK(cudaMalloc(&x, xn * 2));
    fill_kernel<<<256, 256>>>(x, xn, 12345u);
    CK(cudaMalloc(&y, (size_t)M * N * 4));
    CK(cudaMalloc(&yref, (size_t)M * N * 4));
    CK(cudaMalloc(&sink, 8));
    CK(cudaDeviceSynchronize());
    const int groups = (N + kBN - 1) / kBN;
    /* cuBLAS: y^T [N×M] = W [K×N]^T · x^T [K×M] (column-major views), fp32 out */
    const float one = 1.f, zero = 0.f;
    auto blas = [&](int s) {
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W[s], CUDA_R_16BF, K, x,
                   CUDA_R_16BF, K, &zero, yref, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
    };
    const float t_blas = time_us(blas, reps, sets);
    blas(0);
    CK(cudaDeviceSynchronize());
    std::vector<float> ref((size_t)M * N), got((size_t)M * N);
    CK(cudaMemcpy(ref.data(), yref, ref.size() * 4, cudaMemcpyDeviceToHost));
    auto row = [&](const char* name, float us, int wrong) {
      printf("  %3d %6d %6d %-10s %9.2f %7.2f %8.2f %6d\n", M, N, K, name, us,
             wbytes / (us * 1e-6) / 1e12, t_blas / us, wrong);
      wrong_all += wrong;
    };
    row("cublas", t_blas, 0);
    {
      /* the operator's call (impl 0 / 3): y in bf16 with a 32 MiB workspace — run 7bf1d5b's
       * "cublas" row (fp32 y, no workspace) was 1.3–1.4× slower than fco-bench's gemv column */
      void* ws = nullptr;
      bf16* y16 = nullptr;
      CK(cudaMalloc(&ws, (size_t)32 << 20));
      CK(cudaMalloc(&y16, (size_t)M * N * 2));
      cublasSetWorkspace(h, ws, (size_t)32 << 20);
      const float one = 1.f, zero = 0.f;
      auto blas16 = [&](int s) {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W[s], CUDA_R_16BF, K, x,
                     CUDA_R_16BF, K, &zero, y16, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      };
      row("cublas bf16", time_us(blas16, reps, sets), 0);
      cublasSetWorkspace(h, nullptr, 0);
      CK(cudaFree(ws));
      CK(cudaFree(y16));
    }
    auto check = [&](int s_used) -> int {
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
      (void)s_used;
      const float e = max_rel(got, ref);
      if (e > 1e-2f) printf("#   max rel diff %.3g\n", e);
      return e > 1e-2f;
    };
    {
      using Tile = fco::gemv::GroupWgmma<kG>;
      const int smem = (int)Tile::kSmemBytes + 1024;
      CK(cudaFuncSetAttribute(lib_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const int grid = std::min(groups, sms);
      auto lib = [&](int s) { lib_kernel<<<grid, 256, smem>>>(W[s], x, y, M, N, K, groups); };
      const float t = time_us(lib, reps, sets);
      CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
      lib(0);
      row("lib", t, check(0));
    }
    auto tmaws = [&](auto ring, auto gr, auto cl, const char* name) {
      constexpr int kS = decltype(ring)::value, kGr = decltype(gr)::value;
      constexpr int kCl = decltype(cl)::value;
      const int smem = TmaRing<kS, kGr>::kSmem, tgroups = (N + kGr * 16 - 1) / (kGr * 16);
      auto kern = tma_ws_kernel<kS, kGr, kCl>;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (kCl > 1) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      std::vector<CUtensorMap> mw(sets);
      CUtensorMap mx;
      bool ok = encode(&mx, x, K, M, 64 / kCl);
      for (int s = 0; s < sets && ok; ++s) ok = encode(&mw[s], W[s], K, N, kGr * 16);
      if (!ok) {
        printf("#   %s: cuTensorMapEncodeTiled failed\n", name);
        return;
      }
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kWsThreads, smem));
      int grid = std::min(tgroups, std::max(1, per_sm) * sms);
      if (kCl > 1) { /* equal groups a block, whole clusters that fit the SMs' cluster slots */
        const int per = (tgroups + grid - 1) / grid;
        grid = (tgroups + per - 1) / per;
        grid = (grid + kCl - 1) / kCl * kCl;
        while (grid > (sms / kCl) * kCl * std::max(1, per_sm)) grid -= kCl;
      }
      auto run = [&](int s) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(grid);
        cfg.blockDim = dim3(kWsThreads);
        cfg.dynamicSmemBytes = smem;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = kCl;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        CK(cudaLaunchKernelEx(&cfg, kern, mx, mw[s], y, M, N, K, tgroups));
      };
      const float t = time_us(run, reps, sets);
      CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
      run(0);
      row(name, t, check(0));
    };
    using I = std::integral_constant<int, 4>;
    using II = std::integral_constant<int, 2>;
    using C1 = std::integral_constant<int, 1>;
    using C2 = std::integral_constant<int, 2>;
    using C4 = std::integral_constant<int, 4>;
    tmaws(std::integral_constant<int, 12>{}, I{}, C1{}, "tmaws4 S=12");
    tmaws(std::integral_constant<int, 8>{}, I{}, C1{}, "tmaws4 S=8");
    tmaws(std::integral_constant<int, 4>{}, I{}, C1{}, "tmaws4 S=4");
    tmaws(std::integral_constant<int, 8>{}, I{}, C2{}, "tmaws4 S=8 cl2");
    tmaws(std::integral_constant<int, 8>{}, I{}, C4{}, "tmaws4 S=8 cl4");
    tmaws(std::integral_constant<int, 12>{}, I{}, C4{}, "tmaws4 S=12 cl4");
    tmaws(std::integral_constant<int, 4>{}, I{}, C4{}, "tmaws4 S=4 cl4");
    tmaws(std::integral_constant<int, 6>{}, II{}, C1{}, "tmaws2 S=6"); /* 2 blocks/SM */
    tmaws(std::integral_constant<int, 6>{}, II{}, C4{}, "tmaws2 S=6 cl4");
    {
      const size_t n16 = wn * 2 / 16;
      auto rd = [&](int s) {
        read_kernel<<<sms * 8, 512>>>(reinterpret_cast<const uint4*>(W[s]), n16, sink);
      };
      row("read W", time_us(rd, reps, sets), 0);
    }
    for (auto p : W) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(yref));
    CK(cudaFree(sink));
  }
  cublasDestroy(h);
  printf("# wrong: %d\n", wrong_all);
  return wrong_all ? 1 : 0;
}

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
 * The TMA kernels (tmaws, tmawk) are in gemv_tma_tiles.cuh beside this file (since session 22).
 * Build and run (tests/gpu/run.sh does, with FCO_GPU_PROBE=1; argument: reps, default 30):
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda -Iinclude \
 *     bench/probe/gemv_group_probe.cu -lcublas -lcuda -o build/probe/gemv_group_probe
 *
 * Run 7bf1d5b (session 12, bench/results/2026-12-01_nvidia-h200_7bf1d5b): the TMA tiles 1.5–2.5×
 * slower than lib at every shape; lib faster than the fp32-y cuBLAS call at N = 8192. Session 13
 * (runs 8728f2c, d5f5cf2-probe, 82a87ad-probe): "cublas bf16" within 0–4 % of "cublas"; tmaws
 * 1.1–1.3× lib's time; the cluster variants 3–8× slower (correct; cause not found).
 * Session 14 (run 92d7f1b-probe): the cluster variants stay 3–8× slower on a grid of co-resident
 * clusters (cudaOccupancyMaxActiveClusters: 66 of 2, 30 of 4), so not later waves; tmawk
 * (wide groups + split K, below) ran 64×4096×7168 in 25.6–28.3 µs against lib's 40.3 and
 * 64×8192×8192 at lib's time (44.7 vs 45.3); x at a quarter (256-column groups) no better than a
 * half (128). Those rows were timed one launch at a time; probe_time_us (probe.h) times
 * launches back to back (see there): compare the "x cublas" columns of earlier runs with care.
 * Back to back (runs 033b296, 155b90c-probe): 64×8192×8192 cuBLAS 37.2–38.7, lib 40.6–41.5, tmawk8 39.4–40.2;
 * 64×4096×7168 cuBLAS 18.8–19.1, lib 35.4, tmawk8 (K in 4) 21.1; random inputs (FCO_PROBE_RANDOM)
 * time the same. Run 509d6b8 (reverted): lib with slabs rotated per group — a runtime flag and a
 * 64-bit index step in the slab loop — took 53 µs at 8192×8192 even with the flag off, and x per
 * W set (from HBM at each launch) changed nothing: GroupWgmma's barrier-paced slab loop is
 * sensitive to any work added to it; the producer-warp TMA tile (tmawk) is the sturdier base.
 * "tmawkN ... fix" rows (added at the end of session 14, not yet run on a GPU): tmawk with the
 * operator's split-group fixup inside the kernel (helpers store and flag, the owner waits and
 * adds in slice order) instead of the separate splitk_sum kernel of the "+sum" rows.
 * Session 21: "lib nofence" (GroupWgmma without its per-slab fence.proxy.async: 1–11 % faster,
 * run d382d47-nofence); the cluster rows' 3–8× loss was the consumers' remote release
 * (`mbarrier.arrive.release.cluster`, about one memory round trip per arrival): with the
 * default semantics (that run's "cta" rows, now fco::tile::mbar_arrive_cluster itself) cl2
 * takes 52.7 µs at 64×8192×8192 where it took 149.2 (runs 1c4863f-clrel, e9f7aa4-tma2) — as
 * fast as without clusters, so multicasting x buys nothing here. FCO_PROBE_LIB_ONLY=1 /
 * FCO_PROBE_TMAWS_ONLY=1 run only those rows (and cuBLAS, read W).
 * Session 22 (runs 7ce04ef-spin … 38d4cd6-wk; docs/perf-notes.md "Session 22"): the traced
 * tmaws rows ("tr ...") test the waits (spin, spin2), the producer (2prod, nox; i32: 32-bit
 * incremental counters — the old loop's `long long q / num_k` made the producer the pace-setter),
 * wide stages (kN: N 64-k boxes a stage), the k split between warpgroups (ks, m64n64) and x
 * multicast (cl2); trace µs at the SM clock each kernel measured (~1.78 GHz, not the attribute's
 * 1.98). tmawk gained 2-box stages ("k2"): tmawk8 S=4 k2's tile alone ties cuBLAS at M = 64.
 * "lib kN": the library's GroupWgmma with N 64-k slabs a ring stage (its kSub; the operator
 * keeps 1), run cbcba46-libk.
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
template <bool kFence, int kSub = 1>
__global__ void __launch_bounds__(256, 1)
    lib_kernel(const bf16* w, const bf16* x, float* y, int M, int N, int K, int groups) {
  extern __shared__ __align__(1024) unsigned char smem[];
  using Tile = fco::gemv::GroupWgmma<kG, kSub>;
  for (int g = blockIdx.x; g < groups; g += gridDim.x) {
    Tile::template run<bf16, kFence>(w, x, M, N, K, K, g * kBN, smem);
    const float* out = reinterpret_cast<const float*>(smem); /* [kG][64][16] */
    for (int i = threadIdx.x; i < kG * 64 * 16; i += blockDim.x) {
      const int t = i / (64 * 16), m = (i / 16) % 64, c = i % 16, n = g * kBN + t * 16 + c;
      if (m < M && n < N) y[(size_t)m * N + n] = out[i];
    }
    __syncthreads();
  }
}

/* A launch of clusters of cl blocks (1: none) of `threads`, `smem` dynamic bytes; the grid is the
 * caller's. at[0] must outlive the configuration. */
static cudaLaunchConfig_t cluster_cfg(cudaLaunchAttribute* at, int cl, int threads, int smem) {
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cl;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  return cfg;
}

#include "gemv_tma_tiles.cuh"

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

static float max_rel(const std::vector<float>& got, const std::vector<float>& ref) {
  float md = 0, mr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    md = std::max(md, std::fabs(got[i] - ref[i]));
    mr = std::max(mr, std::fabs(ref[i]));
  }
  return mr > 0 ? md / mr : md;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 30;
  const char* rnd_env = getenv("FCO_PROBE_RANDOM");
  const int random = rnd_env && atoi(rnd_env) > 0;
  const char* lib_env = getenv("FCO_PROBE_LIB_ONLY"); /* 1: cublas, lib rows and read W only */
  const int lib_only = lib_env && atoi(lib_env) > 0;
  const char* ws_env = getenv("FCO_PROBE_TMAWS_ONLY"); /* 1: cublas, tmaws rows and read W */
  const int tmaws_only = ws_env && atoi(ws_env) > 0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("# gemv_group_probe: %s, %d SMs, L2 %d MB, reps %d (median), %s inputs\n", prop.name,
         sms, prop.l2CacheSize >> 20, reps, random ? "random" : "17-valued");
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
      probe_fill_bf16<<<1024, 256>>>(p, wn, (unsigned)(&p - W.data()) * 977u + 1u, random);
    }
    bf16* x;
    float *y, *yref;
    unsigned long long* sink;
    CK(cudaMalloc(&x, xn * 2));
    probe_fill_bf16<<<256, 256>>>(x, xn, 12345u, random);
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
    const float t_blas = probe_time_us(blas, reps, sets);
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
      row("cublas bf16", probe_time_us(blas16, reps, sets), 0);
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
    if (!tmaws_only) {
      using Tile = fco::gemv::GroupWgmma<kG>;
      const int smem = (int)Tile::kSmemBytes + 1024;
      CK(cudaFuncSetAttribute(lib_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      CK(cudaFuncSetAttribute(lib_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              smem));
      const int grid = std::min(groups, sms);
      auto lib = [&](int s) { lib_kernel<true><<<grid, 256, smem>>>(W[s], x, y, M, N, K, groups); };
      const float t = probe_time_us(lib, reps, sets);
      CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
      lib(0);
      row("lib", t, check(0));
      /* session 21: the slab loop's fence.proxy.async (MEMBAR.ALL.CTA) left out — timing, and
       * whether y comes out right anyway (the PTX model asks for the fence) */
      auto libnf = [&](int s) {
        lib_kernel<false><<<grid, 256, smem>>>(W[s], x, y, M, N, K, groups);
      };
      const float tnf = probe_time_us(libnf, reps, sets);
      CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
      libnf(0);
      row("lib nofence", tnf, check(0));
      /* session 22: kSub 64-k slabs a stage (the operator's code, fence on) */
      auto libk = [&](auto sub, const char* name) {
        constexpr int kSub = decltype(sub)::value;
        using TileK = fco::gemv::GroupWgmma<kG, kSub>;
        const int smemk = (int)TileK::kSmemBytes + 1024;
        CK(cudaFuncSetAttribute(lib_kernel<true, kSub>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smemk));
        auto run = [&](int s) {
          lib_kernel<true, kSub><<<grid, 256, smemk>>>(W[s], x, y, M, N, K, groups);
        };
        const float tk = probe_time_us(run, reps, sets);
        CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
        run(0);
        row(name, tk, check(0));
      };
      libk(std::integral_constant<int, 2>{}, "lib k2");
      libk(std::integral_constant<int, 3>{}, "lib k3");
      libk(std::integral_constant<int, 4>{}, "lib k4");
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
      cudaLaunchAttribute at[1];
      cudaLaunchConfig_t cfg = cluster_cfg(at, kCl, kWsThreads, smem);
      if (kCl > 1) {
        /* session 14: runs 82a87ad / 4d414c2 sized the grid by SMs / kCl; clusters that do not
         * fit at once (GPCs of uneven SM counts) then run in later waves. The co-resident
         * clusters, as the library's GEMM asks (gemm_alltoall_fused.cu): */
        cfg.gridDim = dim3(grid);
        int nc = 0;
        CK(cudaOccupancyMaxActiveClusters(&nc, kern, &cfg));
        const int cap = std::max(1, nc) * kCl;
        if (grid > cap) {
          const int per = (tgroups + cap - 1) / cap;
          grid = ((tgroups + per - 1) / per + kCl - 1) / kCl * kCl;
          while (grid > cap) grid -= kCl;
        }
        printf("#   %s: %d co-resident clusters of %d, grid %d blocks (%d groups)\n", name, nc,
               kCl, grid, tgroups);
      }
      cfg.gridDim = dim3(grid);
      auto run = [&](int s) { CK(cudaLaunchKernelEx(&cfg, kern, mx, mw[s], y, M, N, K, tgroups)); };
      const float t = probe_time_us(run, reps, sets);
      CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
      run(0);
      row(name, t, check(0));
    };
    using I = std::integral_constant<int, 4>;
    using II = std::integral_constant<int, 2>;
    using C1 = std::integral_constant<int, 1>;
    using C2 = std::integral_constant<int, 2>;
    using C4 = std::integral_constant<int, 4>;
    if (!lib_only) {
    /* Session 21: where a slab's time goes in tmaws (blocks 0 and grid / 2, the third of three
     * launches): medians over the steady slabs q in [kS, total) of the producer's issue ->
     * data-there latency, the consumer's wait for data after finishing the previous slab, its
     * own time per slab, and the slab period; cycles and µs at the SM clock. */
    auto tmaws_trace = [&](auto ring, const char* name, auto spin, auto prod, auto kb, auto ws,
                           auto cl) {
      constexpr int kS = decltype(ring)::value, kKb = decltype(kb)::value;
      constexpr int kWs = decltype(ws)::value, kCl = decltype(cl)::value;
      constexpr int kSpin = decltype(spin)::value, kProd = decltype(prod)::value;
      const int threads = kProd == 1 ? 320 : kWsThreads;
      const int smem = TmaRing<kS, 4, kKb>::kSmem, tgroups = (N + 63) / 64;
      auto kern = tma_ws_kernel<kS, 4, kCl, true, kSpin, kProd, kKb, kWs>;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      CUtensorMap mx, mw0;
      if (!encode(&mx, x, K, M, 64 / kCl) || !encode(&mw0, W[0], K, N, 64)) return;
      long long* tr = nullptr;
      CK(cudaMalloc(&tr, (size_t)12 * kTraceMax * 8));
      CK(cudaMemset(tr, 0, (size_t)12 * kTraceMax * 8));
      CK(cudaMemcpyToSymbol(g_trace, &tr, sizeof tr));
      unsigned long long* gt = nullptr;
      CK(cudaMalloc(&gt, (size_t)2 * sms * 8));
      CK(cudaMemset(gt, 0, (size_t)2 * sms * 8));
      CK(cudaMemcpyToSymbol(g_gt, &gt, sizeof gt));
      int grid = std::min(tgroups, sms);
      cudaLaunchAttribute at[1];
      cudaLaunchConfig_t cfg = cluster_cfg(at, kCl, threads, smem);
      if (kCl > 1) { /* whole clusters, all co-resident (every CTA then has ceil(groups / grid)) */
        grid = grid / kCl * kCl;
        cfg.gridDim = dim3(grid);
        int nc = 0;
        CK(cudaOccupancyMaxActiveClusters(&nc, kern, &cfg));
        grid = std::min(grid, std::max(1, nc) * kCl);
      }
      cfg.gridDim = dim3(grid);
      auto launch = [&](const CUtensorMap& w) {
        CK(cudaLaunchKernelEx(&cfg, kern, mx, w, y, M, N, K, tgroups));
      };
      for (int i = 0; i < 3; ++i) launch(mw0);
      CK(cudaDeviceSynchronize());
      std::vector<long long> h((size_t)12 * kTraceMax);
      CK(cudaMemcpy(h.data(), tr, h.size() * 8, cudaMemcpyDeviceToHost));
      double gt_b0_ns = 0; /* block 0's entry -> exit on %globaltimer */
      {
        /* the third launch's blocks on %globaltimer: how far apart they start and end */
        std::vector<unsigned long long> g2((size_t)2 * grid);
        CK(cudaMemcpy(g2.data(), gt, g2.size() * 8, cudaMemcpyDeviceToHost));
        unsigned long long e0 = ~0ull, e1 = 0, x0 = ~0ull, x1 = 0;
        for (int b = 0; b < grid; ++b) {
          e0 = std::min(e0, g2[2 * b]), e1 = std::max(e1, g2[2 * b]);
          x0 = std::min(x0, g2[2 * b + 1]), x1 = std::max(x1, g2[2 * b + 1]);
        }
        gt_b0_ns = (double)(g2[1] - g2[0]);
        printf("#   %s: %d blocks (globaltimer): entries spread over %.2f us; exits %.2f .. %.2f us "
               "after the first entry\n", name, grid, (e1 - e0) * 1e-3, (x0 - e0) * 1e-3,
               (x1 - e0) * 1e-3);
      }
      {
        /* the traced kernel's own time (W rotating, trace stores included) and its y */
        std::vector<CUtensorMap> mws(sets);
        for (int s2 = 0; s2 < sets; ++s2) encode(&mws[s2], W[s2], K, N, 64);
        auto run = [&](int s2) { launch(mws[s2]); };
        const float t = probe_time_us(run, reps, sets);
        CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
        run(0);
        row(name, t, kProd == 2 || kProd == 4 ? 0 : check(0)); /* kProd 2, 4: no x, timing only */
      }
      CK(cudaFree(tr));
      CK(cudaFree(gt)); /* the timed launches above still wrote both */
      const int per = (tgroups + grid - 1) / grid; /* groups of block 0 (at most; all, clusters) */
      const int total = std::min(per * ((K + 64 * kKb - 1) / (64 * kKb)), kTraceMax);
      int khz = 0;
      CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
      /* session 22: µs at the SM clock block 0 ran at (its clock64 over its %globaltimer, entry ->
       * exit); the attribute (the boost clock) made earlier runs' µs ~10 % short */
      const long long* E0 = h.data() + 5 * kTraceMax;
      const double ghz = E0[0] && E0[1] && gt_b0_ns > 0 ? (E0[1] - E0[0]) / gt_b0_ns : khz * 1e-6;
      printf("#   %s: SM clock %.3f GHz measured (attribute %.3f)\n", name, ghz, khz * 1e-6);
      auto med = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      for (int b = 0; b < 2; ++b) {
        const long long* P = h.data() + (size_t)b * 6 * kTraceMax;
        const long long *F = P + kTraceMax, *D = P + 2 * kTraceMax, *Q = P + 3 * kTraceMax;
        const long long* D1 = P + 4 * kTraceMax;
        std::vector<double> lat, wait, own, period, pissue, pwait, lag1, free1;
        for (int q = kS; q < total; ++q) {
          if (!P[q] || !F[q] || !D[q]) break; /* this block had fewer slabs */
          lat.push_back((double)(F[q] - P[q]));
          wait.push_back((double)(F[q] - D[q - 1]));
          own.push_back((double)(D[q] - F[q]));
          period.push_back((double)(D[q] - D[q - 1]));
          pissue.push_back((double)(P[q] - Q[q])); /* expect_tx + 2 TMA issues (+ clock) */
          pwait.push_back((double)(Q[q] - P[q - 1])); /* waiting for the stage to be free */
          /* session 22: warpgroup 1's release of slab q - 1 after warpgroup 0's, and the
           * producer's stage-free time after the later of the two releases of slab q - kS */
          if (D1[q]) lag1.push_back((double)(D1[q] - D[q]));
          if (D1[q - kS + 1]) free1.push_back((double)(Q[q] - std::max(D[q - kS + 1], D1[q - kS + 1])));
        }
        printf("#   %s trace block %s: %zu steady slabs; medians (cycles / us): issue->data %.0f / "
               "%.2f, consumer waits for data %.0f / %.2f, consumer per slab %.0f / %.2f, period "
               "%.0f / %.2f\n", name, b ? "grid/2" : "0", lat.size(), med(lat),
               med(lat) / ghz / 1e3, med(wait), med(wait) / ghz / 1e3, med(own),
               med(own) / ghz / 1e3, med(period), med(period) / ghz / 1e3);
        /* means (stalls the medians hide) and the span: first issue to the last slab done */
        double sp = 0, sw = 0;
        for (size_t i = 0; i < period.size(); ++i) sp += period[i], sw += wait[i];
        const int last = kS + (int)period.size() - 1;
        if (!period.empty())
          printf("#   %s trace block %s: mean period %.2f us, mean wait %.2f us; slabs 0..%d "
                 "span %.2f us (first issue -> last done), slab 0 issue->data %.2f us\n", name,
                 b ? "grid/2" : "0", sp / period.size() / ghz / 1e3, sw / wait.size() / ghz / 1e3,
                 last, (D[last] - P[0]) / ghz / 1e3, (F[0] - P[0]) / ghz / 1e3);
        if (!period.empty())
          printf("#   %s trace block %s: producer medians (cycles): stage-free wait %.0f, "
                 "expect_tx + 2 TMA issues %.0f; issue runs ahead of use by %.1f slabs\n", name,
                 b ? "grid/2" : "0", med(pwait), med(pissue),
                 med(lat) / std::max(1.0, med(period)));
        const long long* E = P + 5 * kTraceMax; /* entry, exit */
        if (E[0] && E[1] && !period.empty())
          printf("#   %s trace block %s: entry -> first issue %.2f us, last slab done -> exit %.2f us, "
                 "entry -> exit %.2f us\n", name, b ? "grid/2" : "0", (P[0] - E[0]) / ghz / 1e3,
                 (E[1] - D[kS + (int)period.size() - 1]) / ghz / 1e3, (E[1] - E[0]) / ghz / 1e3);
        if (!lag1.empty())
          printf("#   %s trace block %s: warpgroup 1 releases %.0f cycles after warpgroup 0 (median; "
                 "%.1f slabs); producer sees the stage free %.0f cycles after its last release\n",
                 name, b ? "grid/2" : "0", med(lag1), med(lag1) / std::max(1.0, med(period)),
                 med(free1));
      }
    };
    using Z0 = std::integral_constant<int, 0>;
    using Z3 = std::integral_constant<int, 3>;
    using K1 = std::integral_constant<int, 1>;
    using K2 = std::integral_constant<int, 2>;
    using K4 = std::integral_constant<int, 4>;
    using S3 = std::integral_constant<int, 3>;
    using S4 = std::integral_constant<int, 4>;
    using S8 = std::integral_constant<int, 8>;
    using Z4 = std::integral_constant<int, 4>;
    using C2 = std::integral_constant<int, 2>;
    tmaws_trace(S8{}, "tmaws4 S=8 tr", Z0{}, Z0{}, K1{}, Z0{}, K1{});
    tmaws_trace(S8{}, "tmaws4 S=8 tr i32", Z0{}, Z3{}, K1{}, Z0{}, K1{});
    tmaws_trace(S4{}, "tmaws4 S=4 tr i32 k2 ks", Z0{}, Z3{}, K2{}, K1{}, K1{});
    tmaws_trace(S3{}, "tmaws4 S=3 tr i32 k4 ks", Z0{}, Z3{}, K4{}, K1{}, K1{});
    tmaws_trace(S4{}, "tmaws4 S=4 tr i32 k2 ks nox", Z0{}, Z4{}, K2{}, K1{}, K1{});
    tmaws_trace(S3{}, "tmaws4 S=3 tr i32 k4 ks nox", Z0{}, Z4{}, K4{}, K1{}, K1{});
    tmaws_trace(S4{}, "tmaws4 S=4 tr i32 k2 ks cl2", Z0{}, Z3{}, K2{}, K1{}, C2{});
    tmaws_trace(S3{}, "tmaws4 S=3 tr i32 k4 ks cl2", Z0{}, Z3{}, K4{}, K1{}, C2{});
    tmaws(std::integral_constant<int, 12>{}, I{}, C1{}, "tmaws4 S=12");
    tmaws(std::integral_constant<int, 8>{}, I{}, C1{}, "tmaws4 S=8");
    tmaws(std::integral_constant<int, 4>{}, I{}, C1{}, "tmaws4 S=4");
    tmaws(std::integral_constant<int, 8>{}, I{}, C2{}, "tmaws4 S=8 cl2");
    tmaws(std::integral_constant<int, 4>{}, I{}, C4{}, "tmaws4 S=4 cl4");
    (void)II{};
    }
    if (!lib_only && !tmaws_only) {
    /* tmawk: kGr·16-column groups, K split in ks = SMs / groups slices (at least 1, at most the
     * slabs), then splitk_sum; rows "tile" (tma_wk_kernel alone) and "+sum" (both) */
    float* ws = nullptr;
    const size_t ws_floats = (size_t)sms * M * N; /* ks ≤ SMs */
    CK(cudaMalloc(&ws, std::min(ws_floats, (size_t)16 * M * N) * 4));
    unsigned long long* flags = nullptr; /* the fix rows' helper flags, values = launch numbers */
    unsigned long long epoch = 0;
    CK(cudaMalloc(&flags, (size_t)sms * 16 * 8));
    auto tmawk = [&](auto ring, auto gr, const char* name, auto kb) {
      constexpr int kS = decltype(ring)::value, kGr = decltype(gr)::value;
      constexpr int kKb = decltype(kb)::value;
      const int smem = WkRing<kS, kGr, kKb>::kSmem, wgroups = (N + kGr * 16 - 1) / (kGr * 16);
      const int num_k = (K + 64 * kKb - 1) / (64 * kKb);
      auto kern = tma_wk_kernel<kS, kGr, kKb>;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      /* session 21: slots = co-resident blocks (small rings fit 2–3 blocks a SM), not SMs */
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kWsThreads, smem));
      const int slots = sms * std::max(1, per_sm);
      const int ks = std::min(std::min(std::max(1, slots / wgroups), num_k), 16);
      std::vector<CUtensorMap> mw(sets);
      CUtensorMap mx;
      bool ok = encode(&mx, x, K, M, 64);
      for (int s = 0; s < sets && ok; ++s) ok = encode(&mw[s], W[s], K, N, kGr * 16);
      if (!ok) {
        printf("#   %s: cuTensorMapEncodeTiled failed\n", name);
        return;
      }
      const int grid = std::min(wgroups * ks, slots);
      const size_t n4 = (size_t)M * N / 4;
      auto tile = [&](int s) {
        kern<<<grid, kWsThreads, smem>>>(mx, mw[s], ws, M, N, K, wgroups, ks, nullptr, nullptr,
                                          0ull);
      };
      auto both = [&](int s) {
        tile(s);
        splitk_sum<<<sms * 4, 256>>>(reinterpret_cast<const float4*>(ws),
                                     reinterpret_cast<float4*>(y), n4, ks);
      };
      const float t_tile = probe_time_us(tile, reps, sets);
      const float t_both = probe_time_us(both, reps, sets);
      CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
      CK(cudaMemset(ws, 0xff, (size_t)ks * M * N * 4));
      both(0);
      const int bad = check(0);
      char nm[64];
      snprintf(nm, sizeof nm, "%s ks%d b%d", name, ks, grid);
      row(nm, t_tile, bad);
      snprintf(nm, sizeof nm, "%s +sum", name);
      row(nm, t_both, bad);
      if (ks > 1 && wgroups * ks <= grid) { /* the owner-wait fixup, every item its own block */
        CK(cudaMemset(flags, 0, (size_t)wgroups * ks * 8));
        auto fixed = [&](int s) {
          kern<<<grid, kWsThreads, smem>>>(mx, mw[s], ws, M, N, K, wgroups, ks, y, flags,
                                            ++epoch);
        };
        const float t_fix = probe_time_us(fixed, reps, sets);
        CK(cudaMemset(y, 0xff, (size_t)M * N * 4));
        CK(cudaMemset(ws, 0xff, (size_t)ks * M * N * 4));
        fixed(0);
        snprintf(nm, sizeof nm, "%s fix", name);
        row(nm, t_fix, check(0));
      }
    };
    using B1 = std::integral_constant<int, 1>;
    using B2 = std::integral_constant<int, 2>;
    using G8 = std::integral_constant<int, 8>;
    tmawk(std::integral_constant<int, 12>{}, I{}, "tmawk4 S=12", B1{});
    tmawk(std::integral_constant<int, 8>{}, G8{}, "tmawk8 S=8", B1{});
    tmawk(std::integral_constant<int, 5>{}, std::integral_constant<int, 16>{}, "tmawk16 S=5", B1{});
    tmawk(std::integral_constant<int, 4>{}, std::integral_constant<int, 16>{}, "tmawk16 S=4", B1{});
    tmawk(std::integral_constant<int, 4>{}, I{}, "tmawk4 S=4", B1{});
    tmawk(std::integral_constant<int, 4>{}, G8{}, "tmawk8 S=4", B1{});
    /* session 22: two 64-k boxes a stage (256 contiguous bytes of each W row a request) */
    tmawk(std::integral_constant<int, 4>{}, G8{}, "tmawk8 S=4 k2", B2{});
    tmawk(std::integral_constant<int, 3>{}, G8{}, "tmawk8 S=3 k2", B2{});
    tmawk(std::integral_constant<int, 6>{}, I{}, "tmawk4 S=6 k2", B2{});
    CK(cudaFree(ws));
    CK(cudaFree(flags));
    }
    row("read W", probe_read_w_us(W, wn * 2, reps, sms, sink), 0);
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

/*
 * gemv_rs_probe.cu — a GEMV tile at M 33..64 with W as wgmma's register operand (issue 3).
 *
 * One GPU, no communication. The operator's grouped tile (GroupWgmma, gemv_group_wgmma.cuh)
 * brings both x and W through shared memory with cp.async issued by every thread and reads
 * W at ~2.6 TB/s where cuBLAS reaches ~3.5 (48.6 vs 37.0 µs at 64×8192×8192); its TMA
 * variants (gemv_group_probe.cu) were no faster. This probe turns the product around:
 * y^T [N × M] = W [N × K] · x^T, so W is wgmma's A operand (64 of its rows per warpgroup,
 * m64n64k16) and A may come from registers ("RS" wgmma): every thread loads its fragment of W
 * straight from global memory with 16-byte loads (no shared memory, no copies, no swizzle
 * arithmetic for W), x^T is the B operand in shared memory (64 tokens × 64 k a stage, K-major,
 * 128-byte swizzle), shared by the block's warpgroups.
 *
 * The k order: the m64nNk16 A fragment gives thread (g = lane/4, q = lane%4) of each warp the
 * pairs q and q+4 of a k16 step for rows g and g+8. A 16-byte load holds pairs 4q..4q+3 of one
 * row's k32; they serve as pair q (u32 0 / 2) and pair q+4 (u32 1 / 3) of the k32's two steps.
 * Summation order over k does not change the product as long as x is permuted alike: x's
 * logical 16-byte chunk 4j + c (k32 j of the slab, c = 2·step + half) of a token is
 * {Q0[c], Q1[c], Q2[c], Q3[c]}, Qi the token's i-th 16-byte chunk of that k32 — a 4×4 u32
 * transpose in registers, one thread per (token, k32).
 *
 * Per block: kNwg warpgroups, 64 output columns each (x shared), K split in `ks` slices over
 * gridDim.y; out [ks][M][N] fp32 (slices summed on the host for the check: the operator would
 * push them as its split groups do). W: a ring of kDw slabs (64 k) in registers per thread
 * (16 a slab), loads for slab t + kDw issued once slab t's wgmma retired. x: kSx stages; the
 * warpgroup (t mod kNwg) stages slab t's x from registers loaded one round earlier.
 *
 * Rows: cublas (fp32 y), cublas bf16 (the operator's impl 0 / 3 call), rs<Nwg,Dw,Sx>[ mode]
 * ksN, read W (16-byte streaming loads, the ceiling). Shapes: 64×8192×4096 (a P = 2 slice of
 * 8192²) and 64×4096×7168 (run 4790d7f-rs also timed 64 × 8192×8192, 8192×14336, 16384×8192 and
 * 48×8192×4096, with more configurations); bf16, random inputs. µs: median of 5 rounds of `reps`
 * launches back to back (probe_time_us), W rotating over sets > 3 × L2.
 *
 * Result (session 21, runs 2026-12-02_nvidia-h200_4790d7f-rs and ..._1235a98-rsmodes): correct,
 * 0.65–0.71× cuBLAS at best, about one memory round trip per slab whatever kDw — also in the
 * timing-only modes (kMode 1: x staged once, no st.shared / proxy fence in the loop; 2: no block
 * barrier either): the register-A HGMMA waits for the loads in flight into the thread's
 * registers. Not pursued (docs/gemv_history.md, "M = 33..64").
 *
 * Build and run (tests/gpu/run.sh does with FCO_GPU_PROBE=1; argument: reps, default 30):
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda -Iinclude \
 *     bench/probe/gemv_rs_probe.cu -lcublas -o build/probe/gemv_rs_probe
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gemm_tile_wgmma.cuh"
#include "probe.h"

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_l2(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void st_shared4(uint32_t a, uint32_t x, uint32_t y, uint32_t z,
                                           uint32_t w) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(x), "r"(y), "r"(z),
               "r"(w)
               : "memory");
}

/* d[32] += A(registers a0..a3) · B(desc), m64n64k16, bf16, fp32 accumulate, B K-major. */
__device__ __forceinline__ void wgmma_rs64(float* d, uint32_t a0, uint32_t a1, uint32_t a2,
                                           uint32_t a3, uint64_t db) {
#if FCO_WGMMA_COMPILED
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db));
#endif
}

/* One block: kNwg warpgroups × 64 columns from n0 = blockIdx.x · 64 · kNwg, K slice blockIdx.y
 * of gridDim.y (kc = K / gridDim.y elements, a multiple of 64). */
template <int kNwg, int kDw, int kSx, int kMode = 0>
__global__ void __launch_bounds__(128 * kNwg, 1)
    rs_kernel(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ out,
              int M, int N, int K) {
#if FCO_WGMMA_COMPILED
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t xs = (fco::tile::smem_u32(smem_raw) + 1023u) & ~1023u;
  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127, lane = tid & 31;
  const int g = lane >> 2, q = lane & 3, warp4 = (tid >> 5) & 3;
  const int kc = K / gridDim.y;
  const int64_t kbeg = (int64_t)blockIdx.y * kc;
  const int nslab = kc / 64;
  const int n0 = blockIdx.x * 64 * kNwg + wg * 64;
  /* W rows of this thread: r0 = n0 + 16·warp4 + g and r0 + 8 (clamped: rows ≥ N never stored) */
  const int r0 = min(n0 + 16 * warp4 + g, N - 1), r1 = min(n0 + 16 * warp4 + g + 8, N - 1);
  const bf16* w0 = w + (int64_t)r0 * K + kbeg + 8 * q;
  const bf16* w1 = w + (int64_t)r1 * K + kbeg + 8 * q;
  /* x staging: this thread's unit = (token wt / 2, k32 wt % 2) of the slabs t ≡ wg (mod kNwg) */
  const int xtok = wt >> 1, xj = wt & 1;
  const bf16* xp = x + (int64_t)min(xtok, M - 1) * K + kbeg + 32 * xj;
  uint32_t xdst[4];
#pragma unroll
  for (int c = 0; c < 4; ++c)
    xdst[c] = (uint32_t)(xtok * 128 + (((4 * xj + c) ^ (xtok & 7)) << 4));

  uint4 wr[kDw][4]; /* slab ring: [slab][ (r0,j0), (r1,j0), (r0,j1), (r1,j1) ] */
  uint4 xr[4];
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;

  auto load_w = [&](uint4* dst, int t) {
    const int64_t o = (int64_t)t * 64;
    dst[0] = ld_stream(w0 + o);
    dst[1] = ld_stream(w1 + o);
    dst[2] = ld_stream(w0 + o + 32);
    dst[3] = ld_stream(w1 + o + 32);
  };
  auto load_x = [&](int t) {
    const bf16* p = xp + (int64_t)t * 64;
#pragma unroll
    for (int i = 0; i < 4; ++i) xr[i] = ld_l2(p + 8 * i);
  };
  auto store_x = [&](int t) {
    const uint32_t st = xs + (uint32_t)(t % kSx) * 8192u;
    st_shared4(st + xdst[0], xr[0].x, xr[1].x, xr[2].x, xr[3].x);
    st_shared4(st + xdst[1], xr[0].y, xr[1].y, xr[2].y, xr[3].y);
    st_shared4(st + xdst[2], xr[0].z, xr[1].z, xr[2].z, xr[3].z);
    st_shared4(st + xdst[3], xr[0].w, xr[1].w, xr[2].w, xr[3].w);
  };
  /* prologue: W slabs 0..kDw-1; x slabs 0..kSx-2 staged, the next owned slab in registers */
#pragma unroll
  for (int s = 0; s < kDw; ++s)
    if (s < nslab) load_w(wr[s], s);
  for (int t = wg; t < kSx - 1 && t < nslab; t += kNwg) {
    load_x(t);
    store_x(t);
  }
  int xnext = wg;
  while (xnext < kSx - 1) xnext += kNwg; /* the first slab this warpgroup stages in the loop */
  if (xnext < nslab) load_x(xnext);
  fco::fence_proxy_async_smem();
  __syncthreads();

#pragma unroll 1
  for (int t0 = 0; t0 < nslab; t0 += kDw) {
#pragma unroll
    for (int u = 0; u < kDw; ++u) {
      const int t = t0 + u;
      if (t < nslab) {
        /* stage slab t + kSx - 1 (its stage held slab t - 1: every wgmma on it retired before
         * the barrier that ended iteration t - 1) */
        const int ts = t + kSx - 1;
        if (kMode == 0 && ts == xnext) {
          if (ts < nslab) store_x(ts);
          xnext += kNwg;
          if (xnext < nslab) load_x(xnext);
          fco::fence_proxy_async_smem();
        }
        const uint32_t st = xs + (uint32_t)((kMode ? 0 : t) % kSx) * 8192u;
        fco::tile::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const int j = kk >> 1, s2 = (kk & 1) * 2;
          const uint4& a = wr[u][2 * j];
          const uint4& b = wr[u][2 * j + 1];
          const uint32_t a0 = s2 ? a.z : a.x, a2 = s2 ? a.w : a.y;
          const uint32_t a1 = s2 ? b.z : b.x, a3 = s2 ? b.w : b.y;
          wgmma_rs64(d, a0, a1, a2, a3, fco::tile::wgmma_desc(st + kk * 32, 16, 1024));
        }
        fco::tile::wgmma_commit();
        fco::tile::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i])::"memory");
        if (t + kDw < nslab) load_w(wr[u], t + kDw);
        if (kMode < 2) __syncthreads(); /* slab t's stage is free; slab t + 1's is written */
      }
    }
  }
  /* d[4j + e]: W row 16·warp4 + g + 8·(e / 2) of the warpgroup's 64, token 8j + 2q + e % 2 */
  float* o = out + (size_t)blockIdx.y * M * N;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + 16 * warp4 + g + 8 * (e >> 1), m = 8 * j + 2 * q + (e & 1);
      if (n < N && m < M) o[(size_t)m * N + n] = d[4 * j + e];
    }
#else
  __trap();
#endif
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 30;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("# gemv_rs_probe: %s, %d SMs, L2 %d MB, reps %d (median of 5 rounds)\n", prop.name, sms,
         prop.l2CacheSize >> 20, reps);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  const int shapes[][3] = {{64, 8192, 4096}, {64, 4096, 7168}};
  printf("# %3s %6s %6s %-22s %9s %7s %8s %6s\n", "M", "N", "K", "kernel", "us", "TB/s",
         "x cublas", "wrong");
  int wrong_all = 0;
  for (const auto& sh : shapes) {
    const int M = sh[0], N = sh[1], K = sh[2];
    const size_t wn = (size_t)N * K, xn = (size_t)64 * K;
    const double wbytes = (double)wn * 2;
    const int sets = std::max(1, (int)(3.0 * prop.l2CacheSize / wbytes) + 1);
    std::vector<bf16*> W(sets);
    for (int s = 0; s < sets; ++s) {
      CK(cudaMalloc(&W[s], wn * 2));
      probe_fill_bf16<<<1024, 256>>>(W[s], wn, (unsigned)s * 977u + 1u, 1);
    }
    bf16 *x, *y16;
    float *yref, *part;
    void* ws;
    unsigned long long* sink;
    const int max_ks = 8;
    CK(cudaMalloc(&x, xn * 2));
    probe_fill_bf16<<<256, 256>>>(x, xn, 12345u, 1);
    CK(cudaMalloc(&yref, (size_t)M * N * 4));
    CK(cudaMalloc(&y16, (size_t)M * N * 2));
    CK(cudaMalloc(&part, (size_t)max_ks * M * N * 4));
    CK(cudaMalloc(&ws, (size_t)32 << 20));
    CK(cudaMalloc(&sink, 8));
    CK(cudaDeviceSynchronize());
    const float one = 1.f, zero = 0.f;
    auto blas = [&](int s) {
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W[s], CUDA_R_16BF, K, x,
                   CUDA_R_16BF, K, &zero, yref, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
    };
    const float t_blas = probe_time_us(blas, reps, sets);
    blas(0);
    CK(cudaDeviceSynchronize());
    std::vector<float> ref((size_t)M * N), got((size_t)max_ks * M * N);
    CK(cudaMemcpy(ref.data(), yref, ref.size() * 4, cudaMemcpyDeviceToHost));
    auto row = [&](const char* name, float us, int wrong) {
      printf("  %3d %6d %6d %-22s %9.2f %7.2f %8.2f %6d\n", M, N, K, name, us,
             wbytes / (us * 1e-6) / 1e12, t_blas / us, wrong);
      fflush(stdout);
      wrong_all += wrong;
    };
    row("cublas", t_blas, 0);
    cublasSetWorkspace(h, ws, (size_t)32 << 20);
    auto blas16 = [&](int s) {
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W[s], CUDA_R_16BF, K, x,
                   CUDA_R_16BF, K, &zero, y16, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
    };
    const float t_blas16 = probe_time_us(blas16, reps, sets);
    row("cublas bf16", t_blas16, 0);
    cublasSetWorkspace(h, nullptr, 0);

    auto rs = [&](auto nwg_c, auto dw_c, auto sx_c, int ks, auto mode_c) {
      constexpr int kNwg = decltype(nwg_c)::value, kDw = decltype(dw_c)::value,
                    kSx = decltype(sx_c)::value, kMode = decltype(mode_c)::value;
      const int cols = 64 * kNwg;
      if (K % (64 * ks) != 0 || N % cols != 0) return;
      const int smem = kSx * 8192 + 1024;
      auto kern = rs_kernel<kNwg, kDw, kSx, kMode>;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const dim3 grid(N / cols, ks);
      auto run = [&](int s) { kern<<<grid, 128 * kNwg, smem>>>(W[s], x, part, M, N, K); };
      const float t = probe_time_us(run, reps, sets);
      CK(cudaMemset(part, 0xff, (size_t)ks * M * N * 4));
      run(0);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), part, (size_t)ks * M * N * 4, cudaMemcpyDeviceToHost));
      float md = 0, mr = 0;
      for (size_t i = 0; i < (size_t)M * N; ++i) {
        float sum = 0;
        for (int k = 0; k < ks; ++k) sum += got[(size_t)k * M * N + i];
        md = std::max(md, std::fabs(sum - ref[i]));
        if (!(std::fabs(sum - ref[i]) <= md)) md = INFINITY; /* NaN: poison left */
        mr = std::max(mr, std::fabs(ref[i]));
      }
      const float e = mr > 0 ? md / mr : md;
      char nm[64];
      snprintf(nm, sizeof nm, "rs<%d,%d,%d>%s ks%d b%d", kNwg, kDw, kSx,
               kMode == 1 ? " xfix" : kMode == 2 ? " xfix-nobar" : "", ks, (int)(grid.x * ks));
      /* modes 1, 2 (x staged once, no fence / barrier in the loop) are timing-only: wrong y */
      row(nm, t, kMode ? 0 : !(e <= 1e-2f));
      if (!kMode && !(e <= 1e-2f)) printf("#   max rel diff %.3g\n", e);
    };
    using std::integral_constant;
    using I1 = integral_constant<int, 1>;
    using I2 = integral_constant<int, 2>;
    using I4 = integral_constant<int, 4>;
    using M0 = integral_constant<int, 0>;
    for (int ks : {2, 4}) {
      rs(I2{}, I4{}, I4{}, ks, M0{});
      rs(I2{}, I4{}, I4{}, ks, I1{});
      rs(I2{}, I4{}, I4{}, ks, I2{});
      rs(I2{}, I2{}, I4{}, ks, I1{});
      rs(I1{}, I4{}, I4{}, ks, I1{});
      rs(I1{}, I4{}, I4{}, ks, I2{});
    }
    row("read W", probe_read_w_us(W, wn * 2, reps, sms, sink), 0);
    for (auto p : W) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y16));
    CK(cudaFree(yref));
    CK(cudaFree(part));
    CK(cudaFree(ws));
    CK(cudaFree(sink));
  }
  cublasDestroy(h);
  printf("# wrong: %d\n", wrong_all);
  return wrong_all ? 1 : 0;
}

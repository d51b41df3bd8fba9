/*
 * ga_grouped_probe.cu — one cuBLAS GEMM per expert (what fco_gemm_alltoall's impl 0 and impl 2
 * run) against cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx, every expert in one call) and,
 * where every expert has the same rows, the strided batched GEMM (torch.bmm's path), and the
 * per-expert loop spread round-robin over 2 and 4 streams (own handle and workspace each), so
 * GEMMs too small to fill the GPU run side by side. (issue 5)
 *
 * One GPU, no communication, bf16, fp32 compute, row-major A [rows_e, K] per expert and W_e
 * [K, N], Y [rows_e, N], the operator's layout (src/cuda/gemm_alltoall.cu, gemm()). Shapes are a
 * rank's experts at the fco-bench workloads: P = 2 slices (4 or 16 local experts) and P = 1
 * (every expert). Per-expert GEMMs with few rows fill a fraction of the SMs (256 rows × 4096
 * columns are 64 tiles of 128×128 on 132 SMs); one grouped call could fill them across experts.
 * Each variant's Y is compared with the per-expert loop's (max |a-b| / max |b|), and "ideal" is
 * one GEMM over all rows with one W (the same FLOPs, no expert boundaries).
 *
 * Build and run (tests/gpu/run.sh does, with FCO_GPU_PROBE=1; argument: reps, default 20):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude bench/probe/ga_grouped_probe.cu -lcublas \
 *     -o build/probe/ga_grouped_probe
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "probe.h"

using bf16 = __nv_bfloat16;

#define CB(x)                                                                  \
  do {                                                                         \
    cublasStatus_t s_ = (x);                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, \
              (int)s_);                                                        \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

struct Shape {
  const char* name;
  std::vector<int> rows; /* per local expert */
  int K, N;
};

__global__ void fill(bf16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(((int)(h & 255) - 128) / 256.0f);
  }
}

static float max_rel(const bf16* a, const bf16* b, size_t n) {
  std::vector<bf16> ha(n), hb(n);
  CK(cudaMemcpy(ha.data(), a, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  float md = 0, mb = 0;
  for (size_t i = 0; i < n; i++) {
    float x = __bfloat162float(ha[i]), y = __bfloat162float(hb[i]);
    md = std::max(md, fabsf(x - y));
    mb = std::max(mb, fabsf(y));
  }
  return mb > 0 ? md / mb : md;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  std::vector<Shape> shapes = {
      {"P2 4096 tok, K 14336 (4 experts)", {2048, 2048, 2048, 2048}, 14336, 4096},
      {"P2 1024 tok, K 14336 (4 experts)", {512, 512, 512, 512}, 14336, 4096},
      {"P2 1024 tok skew 4, rank 0", {2048, 292, 292, 292}, 14336, 4096},
      {"P2 512 tok, K 2048 (16 experts)", std::vector<int>(16, 256), 2048, 7168},
      {"P2 decode 128 tok (16 experts)", std::vector<int>(16, 64), 2048, 7168},
      {"P1 4096 tok, K 14336 (8 experts)", std::vector<int>(8, 1024), 14336, 4096},
      {"P1 1024 tok, K 14336 (8 experts)", std::vector<int>(8, 256), 14336, 4096},
      {"P1 512 tok, K 2048 (32 experts)", std::vector<int>(32, 128), 2048, 7168},
      {"P1 decode 128 tok (32 experts)", std::vector<int>(32, 32), 2048, 7168},
  };
  cublasHandle_t h;
  CB(cublasCreate(&h));
  void* ws;
  CK(cudaMalloc(&ws, 32 << 20));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CB(cublasSetStream(h, st));
  CB(cublasSetWorkspace(h, ws, 32 << 20));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  /* The loop on kS streams: experts round-robin, each stream with its own handle and cuBLAS
   * workspace (kernels of one workspace must not overlap), forked from and joined to st. */
  constexpr int kS = 4;
  cublasHandle_t hs[kS];
  cudaStream_t ss[kS];
  cudaEvent_t fork_ev, join_ev[kS];
  CK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
  for (int i = 0; i < kS; i++) {
    void* w;
    CK(cudaMalloc(&w, 32 << 20));
    CB(cublasCreate(&hs[i]));
    CK(cudaStreamCreateWithFlags(&ss[i], cudaStreamNonBlocking));
    CB(cublasSetStream(hs[i], ss[i]));
    CB(cublasSetWorkspace(hs[i], w, 32 << 20));
    CK(cudaEventCreateWithFlags(&join_ev[i], cudaEventDisableTiming));
  }
  printf("# ga_grouped_probe: bf16, fp32 compute, median of %d reps (each timed alone), us; "
         "TFLOP/s of the loop / grouped\n", reps);
  printf("%-36s %8s %8s %8s %8s %8s %8s %8s %7s %7s %9s\n", "shape", "loop", "loop x2",
         "loop x4", "grouped", "batched", "ideal", "grp/loop", "TF loop", "TF grp", "maxrel");
  const float one = 1.f, zero = 0.f;
  for (const Shape& s : shapes) {
    const int E = (int)s.rows.size(), K = s.K, N = s.N;
    size_t tot = 0;
    for (int r : s.rows) tot += r;
    bf16 *A, *W, *Y, *Y2;
    CK(cudaMalloc(&A, tot * K * sizeof(bf16)));
    CK(cudaMalloc(&W, (size_t)E * K * N * sizeof(bf16)));
    CK(cudaMalloc(&Y, tot * N * sizeof(bf16)));
    CK(cudaMalloc(&Y2, tot * N * sizeof(bf16)));
    fill<<<1024, 256, 0, st>>>(A, tot * K, 1u);
    fill<<<1024, 256, 0, st>>>(W, (size_t)E * K * N, 2u);
    std::vector<const void*> hA(E), hW(E);
    std::vector<void*> hY(E), hY2(E);
    size_t off = 0;
    for (int e = 0; e < E; e++) {
      hA[e] = A + off * K;
      hW[e] = W + (size_t)e * K * N;
      hY[e] = Y + off * N;
      hY2[e] = Y2 + off * N;
      off += s.rows[e];
    }
    void** dptr;
    CK(cudaMalloc(&dptr, 3 * E * sizeof(void*)));
    /* column-major view: Yᵀ[N, m] = W[N, K] · Aᵀ[K, m] (B operand of cuBLAS = A, A = W) */
    CK(cudaMemcpy(dptr, hW.data(), E * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dptr + E, hA.data(), E * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dptr + 2 * E, hY2.data(), E * sizeof(void*), cudaMemcpyHostToDevice));
    std::vector<cublasOperation_t> opn(E, CUBLAS_OP_N);
    std::vector<int> ms(E, N), ns(s.rows), ks(E, K), lda(E, N), ldb(E, K), ldc(E, N), gs(E, 1);
    std::vector<float> al(E, 1.f), be(E, 0.f);
    auto loop = [&]() {
      for (int e = 0; e < E; e++)
        CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, s.rows[e], K, &one, hW[e], CUDA_R_16BF, N,
                        hA[e], CUDA_R_16BF, K, &zero, hY[e], CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    };
    auto loop_on = [&](int S) {
      CK(cudaEventRecord(fork_ev, st));
      for (int i = 0; i < S; i++) CK(cudaStreamWaitEvent(ss[i], fork_ev, 0));
      for (int e = 0; e < E; e++)
        CB(cublasGemmEx(hs[e % S], CUBLAS_OP_N, CUBLAS_OP_N, N, s.rows[e], K, &one, hW[e],
                        CUDA_R_16BF, N, hA[e], CUDA_R_16BF, K, &zero, hY2[e], CUDA_R_16BF, N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      for (int i = 0; i < S; i++) {
        CK(cudaEventRecord(join_ev[i], ss[i]));
        CK(cudaStreamWaitEvent(st, join_ev[i], 0));
      }
    };
    auto grouped = [&]() {
      CB(cublasGemmGroupedBatchedEx(h, opn.data(), opn.data(), ms.data(), ns.data(), ks.data(),
                                    al.data(), (const void* const*)dptr, CUDA_R_16BF, lda.data(),
                                    (const void* const*)(dptr + E), CUDA_R_16BF, ldb.data(),
                                    be.data(), dptr + 2 * E, CUDA_R_16BF, ldc.data(), E, gs.data(),
                                    CUBLAS_COMPUTE_32F));
    };
    const bool equal = std::all_of(s.rows.begin(), s.rows.end(), [&](int r) { return r == s.rows[0]; });
    auto batched = [&]() {
      CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, s.rows[0], K, &one, W,
                                    CUDA_R_16BF, N, (long long)K * N, A, CUDA_R_16BF, K,
                                    (long long)s.rows[0] * K, &zero, Y2, CUDA_R_16BF, N,
                                    (long long)s.rows[0] * N, E, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    };
    auto ideal = [&]() {
      CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, (int)tot, K, &one, W, CUDA_R_16BF, N, A,
                      CUDA_R_16BF, K, &zero, Y2, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT));
    };
    auto time = [&](auto&& f) {
      for (int i = 0; i < 3; i++) f();
      std::vector<float> t(reps);
      for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(e0, st));
        f();
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[i], e0, e1));
      }
      std::sort(t.begin(), t.end());
      return 1000.0 * t[reps / 2];
    };
    const double tl = time(loop);
    float rel = 0;
    double tx[2];
    for (int v = 0; v < 2; v++) {
      CK(cudaMemset(Y2, 0xff, tot * N * sizeof(bf16)));
      tx[v] = time([&]() { loop_on(v ? 4 : 2); });
      CK(cudaStreamSynchronize(st));
      rel = std::max(rel, max_rel(Y2, Y, tot * N));
    }
    CK(cudaMemset(Y2, 0xff, tot * N * sizeof(bf16)));
    const double tg = time(grouped);
    CK(cudaStreamSynchronize(st));
    rel = std::max(rel, max_rel(Y2, Y, tot * N));
    double tb = -1;
    float relb = 0;
    if (equal) {
      CK(cudaMemset(Y2, 0xff, tot * N * sizeof(bf16)));
      tb = time(batched);
      CK(cudaStreamSynchronize(st));
      relb = max_rel(Y2, Y, tot * N);
    }
    const double ti = time(ideal);
    const double flop = 2.0 * tot * K * N;
    printf("%-36s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.2f %7.0f %7.0f %9.2e%s\n", s.name, tl,
           tx[0], tx[1], tg, tb, ti,
           tg / tl, flop / tl * 1e-6, flop / tg * 1e-6, std::max(rel, relb),
           std::max(rel, relb) > 1e-2f ? "  WRONG" : "");
    CK(cudaFree(A));
    CK(cudaFree(W));
    CK(cudaFree(Y));
    CK(cudaFree(Y2));
    CK(cudaFree(dptr));
  }
  CB(cublasDestroy(h));
  return 0;
}

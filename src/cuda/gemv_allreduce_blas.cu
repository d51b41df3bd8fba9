/*
 * gemv_allreduce_blas.cu — fco_gemv_allreduce's unfused impls on GPUs: impl 0 (cuBLAS GEMM, then
 * ncclAllReduce on nccl or fco_cuda_allreduce_copy on local) and impl 3 (cuBLAS GEMM, then fco's
 * one-shot all-reduce in place). Entry: fco_cuda_gemv_allreduce_baseline (cuda_ops.h), called by
 * fco_cuda_gemv_allreduce_run (gemv_allreduce.cu, whose header describes both impls, the bias and
 * the cuBLAS handle / workspace rule).
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>
#include <string.h>

#include "../ops/gemv_allreduce.h"
#include "blas.cuh"
#include "cuda_ops.h"
#include "launch.cuh"

namespace fco {
namespace {

/* y[m][n] = bias[n] (rank 0, before its GEMM with beta = 1). */
template <typename T>
__global__ void bias_fill_kernel(T* y, const T* bias, int64_t M, int64_t N) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < M * N;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = bias[i % N];
}

/* ---- impl 0: cuBLAS + the best unfused all-reduce ---------------------------------------- */
/* y = x · W^T (+ bias when add_bias) on `stream`, on the current device; *no_ws set when the
 * GEMM ran without a cuBLAS workspace (blas.cuh: captured on a stream with no eager call). */
fco_result_t blas_gemm(const fco_gemv_ar_args_t* a, bool add_bias, cudaStream_t stream,
                       bool* no_ws, char* err) {
  const size_t M = a->M, N = a->N, K = a->K;
  BlasLease lease; /* the handle bound to stream with its workspace (blas.cuh) */
  fco_result_t res = blas_lease(stream, "fco_gemv_allreduce", &lease, err);
  if (res != FCO_OK) return res;
  if (!lease.workspace) *no_ws = true;
  if (add_bias) {
    const int64_t total = (int64_t)(M * N);
    const unsigned blocks = (unsigned)((total + 255) / 256 < 1024 ? (total + 255) / 256 : 1024);
    switch (a->dtype) {
      case FCO_F32: bias_fill_kernel<<<blocks, 256, 0, stream>>>((float*)a->y, (const float*)a->bias, (int64_t)M, (int64_t)N); break;
      case FCO_F16: bias_fill_kernel<<<blocks, 256, 0, stream>>>((__half*)a->y, (const __half*)a->bias, (int64_t)M, (int64_t)N); break;
      default: bias_fill_kernel<<<blocks, 256, 0, stream>>>((__nv_bfloat16*)a->y, (const __nv_bfloat16*)a->bias, (int64_t)M, (int64_t)N); break;
    }
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_gemv_allreduce: bias fill launch");
  }
  const cudaDataType_t t = a->dtype == FCO_F32 ? CUDA_R_32F : a->dtype == FCO_F16 ? CUDA_R_16F
                                                                                  : CUDA_R_16BF;
  const float alpha = 1.f, beta = add_bias ? 1.f : 0.f;
  /* Column-major view: y^T [N×M] = W [K×N]^T · x^T [K×M], all leading dimensions contiguous. */
  cublasStatus_t st =
      cublasGemmEx(lease.h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, a->w, t,
                   (int)K, a->x, t, (int)K, &beta, a->y, t, (int)N, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    return fail(err, FCO_ERR_CUDA, "fco_gemv_allreduce: cublasGemmEx(N=%zu, M=%zu, K=%zu): %s", N,
                M, K, blas_status(st));
  return FCO_OK;
}

/* impl 0 (fco_ar false) / 3 (true: fco's one-shot all-reduce in place of NCCL's): the GEMMs,
 * then the all-reduce of y. */
fco_result_t run_baseline(const fco_gpu_launch_t* g, bool fco_ar, char* err) {
  fco_gemv_ar_args_t a[FCO_MAX_GPU_RANKS];
  bool no_ws = false;
  for (int i = 0; i < g->num_local; ++i) {
    memcpy(&a[i], g->r[i].op->u.raw, sizeof a[i]);
    const bool add_bias = a[i].bias && g->r[i].op->comm->rank == 0;
    fco_result_t r = blas_gemm(&a[i], add_bias, (cudaStream_t)g->stream, &no_ws, err);
    if (r != FCO_OK) return r;
  }
  /* fco_last_plan */
  fco_plan_append(g->plan, " kernel cublasGemmEx%s%s", no_ws ? " (no cuBLAS workspace)" : "",
                  g->nranks == 1                            ? " (one rank: no all-reduce)"
                  : fco_ar                                  ? " + fco one-shot all-reduce"
                  : g->transport == FCO_TRANSPORT_NCCL ? " + ncclAllReduce"
                                                            : " + local copy all-reduce");
  if (g->nranks == 1) return FCO_OK;
  if (!fco_ar && g->transport == FCO_TRANSPORT_NCCL) {
    for (int i = 0; i < g->num_local; ++i) {
      const ncclDataType_t t = a[i].dtype == FCO_F32 ? ncclFloat32
                               : a[i].dtype == FCO_F16 ? ncclFloat16
                                                       : ncclBfloat16;
      ncclResult_t nr = ncclAllReduce(a[i].y, a[i].y, a[i].M * a[i].N, t, ncclSum,
                                      (ncclComm_t)g->r[i].nccl_comm, (cudaStream_t)g->stream);
      if (nr != ncclSuccess && nr != ncclInProgress)
        return fail(err, FCO_ERR_NCCL, "fco_gemv_allreduce: ncclAllReduce: %s (%s)",
                    ncclGetErrorString(nr), ncclGetLastError((ncclComm_t)g->r[i].nccl_comm));
    }
    return FCO_OK;
  }
  /* fco's all-reduce of y in place: the one-shot (impl 3) or the local copy (impl 0 on local). */
  fco_cuda_ar_launch_t l;
  memset(&l, 0, sizeof l);
  l.num_local = g->num_local;
  l.nranks = g->nranks;
  l.count = a[0].M * a[0].N;
  l.dtype = a[0].dtype;
  l.stream = g->stream;
  for (int i = 0; i < g->num_local; ++i) {
    l.r[i].in = a[i].y;
    l.r[i].out = a[i].y;
    l.r[i].dev = g->r[i].dev;
    l.r[i].ws = g->r[i].ws;
  }
  return fco_ar ? fco_cuda_allreduce_oneshot(&l, err) : fco_cuda_allreduce_copy(&l, err);
}

}  // namespace
}  // namespace fco

extern "C" fco_result_t fco_cuda_gemv_allreduce_baseline(const fco_gpu_launch_t* g, int fco_ar,
                                                         char* err) {
  return fco::run_baseline(g, fco_ar != 0, err);
}

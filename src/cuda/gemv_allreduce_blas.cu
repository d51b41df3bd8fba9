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

#include <mutex>

#include "../ops/gemv_allreduce.h"
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
constexpr size_t kBlasWorkspace = (size_t)32 << 20; /* cuBLAS's recommendation for Hopper */
constexpr int kBlasStreams = 16;                    /* workspaces kept per device */

/* One handle per device; one workspace per (device, stream), since GEMMs on two streams may
 * run at once and must not share one. A stream's workspace is made at its first eager call;
 * the oldest is freed (cudaFree synchronises the device) when kBlasStreams are in use. */
struct BlasSlot {
  std::mutex mu;
  cublasHandle_t h = nullptr;
  cudaStream_t stream[kBlasStreams] = {};
  void* ws[kBlasStreams] = {};
  uint64_t used[kBlasStreams] = {};
  uint64_t clock = 0;
};
BlasSlot g_blas[kMaxDevices]; /* live until the process exits (as cuBLAS's own caches) */

const char* blas_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

/* The handle and the stream's workspace (s.mu held). Creation allocates, which a CUDA graph
 * capture does not allow: then FCO_ERR_INVALID_USAGE asks for an eager call first. */
fco_result_t blas_get(BlasSlot& s, int device, cudaStream_t stream, void** ws, char* err) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess) {
    (void)cudaGetLastError();
    cap = cudaStreamCaptureStatusActive; /* legacy stream during a global capture */
  }
  int hit = -1, oldest = 0;
  for (int i = 0; i < kBlasStreams; ++i) {
    if (s.ws[i] && s.stream[i] == stream) hit = i;
    if (s.used[i] < s.used[oldest]) oldest = i;
  }
  if (hit >= 0 && s.h) {
    s.used[hit] = ++s.clock;
    *ws = s.ws[hit];
    return FCO_OK;
  }
  if (cap != cudaStreamCaptureStatusNone)
    return fail(err, FCO_ERR_INVALID_USAGE,
                "fco_gemv_allreduce impl 0: the cuBLAS handle / workspace of device %d for this "
                "stream is made at the first call, which allocates and cannot be captured: make "
                "one eager call on this stream before capturing a CUDA graph", device);
  if (!s.h) {
    cublasStatus_t st = cublasCreate(&s.h);
    if (st != CUBLAS_STATUS_SUCCESS) {
      s.h = nullptr;
      return fail(err, FCO_ERR_CUDA, "fco_gemv_allreduce: cublasCreate on device %d: %s", device,
                  blas_status(st));
    }
  }
  if (s.ws[oldest]) {
    cudaError_t ce = cudaFree(s.ws[oldest]);
    s.ws[oldest] = nullptr;
    if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_gemv_allreduce: cudaFree of a cuBLAS workspace");
  }
  void* p = nullptr;
  cudaError_t ce = cudaMalloc(&p, kBlasWorkspace);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "fco_gemv_allreduce: cudaMalloc of a cuBLAS workspace");
  s.ws[oldest] = p;
  s.stream[oldest] = stream;
  s.used[oldest] = ++s.clock;
  *ws = p;
  return FCO_OK;
}

/* y = x · W^T (+ bias when add_bias) on `stream`, on the current device. */
fco_result_t blas_gemm(const fco_gemv_ar_args_t* a, bool add_bias, cudaStream_t stream, char* err) {
  int device = 0, sms = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  if (device >= kMaxDevices)
    return fail(err, FCO_ERR_UNSUPPORTED, "fco_gemv_allreduce: device %d >= %d", device, kMaxDevices);
  const size_t M = a->M, N = a->N, K = a->K;
  BlasSlot& s = g_blas[device];
  std::lock_guard<std::mutex> lock(s.mu);
  void* ws = nullptr;
  if ((res = blas_get(s, device, stream, &ws, err)) != FCO_OK) return res;
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
  /* cublasSetStream resets the workspace to cuBLAS's pool: set ours after it, every call. */
  cublasStatus_t st = cublasSetStream(s.h, stream);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetWorkspace(s.h, ws, kBlasWorkspace);
  if (st != CUBLAS_STATUS_SUCCESS)
    return fail(err, FCO_ERR_CUDA, "fco_gemv_allreduce: cublasSetStream/Workspace: %s",
                blas_status(st));
  const cudaDataType_t t = a->dtype == FCO_F32 ? CUDA_R_32F : a->dtype == FCO_F16 ? CUDA_R_16F
                                                                                  : CUDA_R_16BF;
  const float alpha = 1.f, beta = add_bias ? 1.f : 0.f;
  /* Column-major view: y^T [N×M] = W [K×N]^T · x^T [K×M], all leading dimensions contiguous. */
  st = cublasGemmEx(s.h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, a->w, t,
                    (int)K, a->x, t, (int)K, &beta, a->y, t, (int)N, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    return fail(err, FCO_ERR_CUDA, "fco_gemv_allreduce: cublasGemmEx(N=%zu, M=%zu, K=%zu): %s", N,
                M, K, blas_status(st));
  return FCO_OK;
}

/* impl 0 (fco_ar false) and impl 3 (fco_ar true: fco's one-shot all-reduce in place of NCCL's). */
/* impl 0 (fco_ar false) / 3 (true): the GEMMs, then the all-reduce of y. */
fco_result_t run_baseline(const fco_gpu_launch_t* g, bool fco_ar, char* err) {
  fco_gemv_ar_args_t a[FCO_MAX_GPU_RANKS];
  for (int i = 0; i < g->num_local; ++i) {
    memcpy(&a[i], g->r[i].op->u.raw, sizeof a[i]);
    const bool add_bias = a[i].bias && g->r[i].op->comm->rank == 0;
    fco_result_t r = blas_gemm(&a[i], add_bias, (cudaStream_t)g->stream, err);
    if (r != FCO_OK) return r;
  }
  /* fco_last_plan */
  fco_plan_append(g->plan, " kernel cublasGemmEx%s",
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

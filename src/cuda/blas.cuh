/*
 * blas.cuh — the cuBLAS handle and workspaces of the unfused paths (gemv_allreduce impls 0 / 3,
 * gemm_alltoall impls 0 / 2; implemented in blas.cu).
 *
 * One handle per device, made at its first use and live until the process exits (as cuBLAS's own
 * caches), guarded by a mutex held for as long as a caller holds a BlasLease (binding the stream
 * and enqueueing GEMMs: no waiting). One 32 MiB workspace per (device, stream) — GEMMs on two
 * streams may run at once and must not share one (cuBLAS picks split-K and other algorithms that
 * write it) — set after every cublasSetStream, which resets it, so a captured GEMM never
 * allocates. A stream's workspace is made at its first eager call; the default stream of each
 * thread (cudaStreamPerThread) counts as a stream of its own. Past kBlasStreams streams a device
 * frees the least recently used workspace (cudaFree synchronises the device) unless a CUDA graph
 * captured it (the graph keeps its address): those are never freed. A GEMM captured on a stream
 * that never ran eagerly gets no workspace (cuBLAS then takes algorithms without one, maybe
 * slower: the lease says so); the handle itself must exist before any capture (one eager call of
 * an unfused impl on the device), else FCO_ERR_INVALID_USAGE. The handle's and workspaces'
 * allocations run in relaxed capture mode: a global-mode capture in another thread (torch's
 * default) neither refuses them nor is broken by them.
 */
#ifndef FCO_CUDA_BLAS_CUH_
#define FCO_CUDA_BLAS_CUH_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <mutex>

#include "launch.cuh"

namespace fco {

constexpr size_t kBlasWorkspaceBytes = (size_t)32 << 20; /* cuBLAS's recommendation for Hopper */
constexpr int kBlasStreams = 16; /* workspaces a device keeps before freeing the oldest */

/* This thread's stream-capture mode relaxed for a scope (and put back after), around what an
 * eager call does outside stream order: cublasCreate, a cuBLAS workspace's cudaMalloc /
 * cudaFree, a push stream and its events, gemm's counts copy to the host and its stream sync.
 * In CUDA's default (global) mode they are refused, and the capture invalidated, while another
 * thread captures any stream of the process in global mode (as torch.cuda.graph does by
 * default); they belong to no capture, so relaxed is right for them. */
struct RelaxedCapture {
  cudaStreamCaptureMode prev = cudaStreamCaptureModeRelaxed;
  bool swapped;
  RelaxedCapture() : swapped(cudaThreadExchangeStreamCaptureMode(&prev) == cudaSuccess) {}
  ~RelaxedCapture() {
    if (swapped) (void)cudaThreadExchangeStreamCaptureMode(&prev);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;
};

struct BlasLease {
  cublasHandle_t h = nullptr;
  bool workspace = false; /* false: captured on a stream without one (no workspace) */
  std::unique_lock<std::mutex> lock;
};

/* The current device's handle bound to `stream` with that stream's workspace, into *out (the
 * device's lock held until *out is destroyed). `who` starts every error message. */
fco_result_t blas_lease(cudaStream_t stream, const char* who, BlasLease* out, char* err);

const char* blas_status(cublasStatus_t s);

}  // namespace fco

#endif /* FCO_CUDA_BLAS_CUH_ */

/*
 * blas.cu — the cuBLAS handle per device and the workspace per (device, stream) of the unfused
 * paths (blas.cuh has the rules).
 */
#include "blas.cuh"

#include "capture.h"

#include <stdint.h>

#include <thread>
#include <vector>

namespace fco {
namespace {

struct WsSlot {
  cudaStream_t stream = nullptr;
  std::thread::id thread; /* for cudaStreamPerThread: each thread's default stream is its own */
  void* ws = nullptr;
  uint64_t used = 0;
  bool captured = false; /* a CUDA graph holds its address: never freed */
};

struct Device {
  std::mutex mu;
  cublasHandle_t h = nullptr;
  std::vector<WsSlot> slots;
  uint64_t clock = 0;
};
Device g_dev[kMaxDevices]; /* live until the process exits */

bool same_stream(const WsSlot& s, cudaStream_t stream) {
  return s.stream == stream &&
         (stream != cudaStreamPerThread || s.thread == std::this_thread::get_id());
}

}  // namespace

const char* blas_status(cublasStatus_t s) { return cublasGetStatusString(s); }

fco_result_t blas_lease(cudaStream_t stream, const char* who, BlasLease* out, char* err) {
  int device = 0, sms = 0;
  fco_result_t res = current_device(err, &device, &sms);
  if (res != FCO_OK) return res;
  if (device < 0 || device >= kMaxDevices)
    return fail(err, FCO_ERR_UNSUPPORTED, "%s: device %d >= %d", who, device, kMaxDevices);
  Device& d = g_dev[device];
  std::unique_lock<std::mutex> lock(d.mu);
  int cap = 0; /* a failed query (a bad stream handle) is said as itself (capture.h) */
  const cudaError_t qe = fco_stream_capture_query(stream, &cap);
  if (qe != cudaSuccess) return cuda_fail(err, qe, "cudaStreamIsCapturing (the call's stream)");
  const bool capturing = cap != 0;
  if (!d.h) {
    if (capturing)
      return fail(err, FCO_ERR_INVALID_USAGE,
                  "%s: the cuBLAS handle of device %d is made at the first call of an unfused "
                  "impl, which allocates and cannot be captured: make one eager call before "
                  "capturing a CUDA graph",
                  who, device);
    RelaxedCapture relaxed;
    cublasStatus_t st = cublasCreate(&d.h);
    if (st != CUBLAS_STATUS_SUCCESS) {
      d.h = nullptr;
      return fail(err, FCO_ERR_CUDA, "%s: cublasCreate on device %d: %s", who, device,
                  blas_status(st));
    }
  }
  WsSlot* slot = nullptr;
  for (WsSlot& s : d.slots)
    if (same_stream(s, stream)) slot = &s;
  if (!slot && !capturing) {
    RelaxedCapture relaxed;
    /* A new stream: past kBlasStreams, free the least recently used workspace no graph holds. */
    if ((int)d.slots.size() >= kBlasStreams) {
      size_t lru = d.slots.size();
      for (size_t i = 0; i < d.slots.size(); ++i)
        if (!d.slots[i].captured && (lru == d.slots.size() || d.slots[i].used < d.slots[lru].used))
          lru = i;
      if (lru < d.slots.size()) {
        /* cudaFree synchronises the device: the GEMMs that used it are done */
        cudaError_t ce = cudaFree(d.slots[lru].ws);
        d.slots.erase(d.slots.begin() + (long)lru);
        if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaFree of a cuBLAS workspace");
      }
    }
    WsSlot s;
    cudaError_t ce = cudaMalloc(&s.ws, kBlasWorkspaceBytes);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaMalloc of a cuBLAS workspace");
    s.stream = stream;
    s.thread = std::this_thread::get_id();
    d.slots.push_back(s);
    slot = &d.slots.back();
  }
  if (slot) {
    slot->used = ++d.clock;
    slot->captured |= capturing;
  }
  /* cublasSetStream resets the workspace to cuBLAS's pool: set ours (or none) after it. */
  cublasStatus_t st = cublasSetStream(d.h, stream);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = slot ? cublasSetWorkspace(d.h, slot->ws, kBlasWorkspaceBytes)
              : cublasSetWorkspace(d.h, nullptr, 0);
  if (st != CUBLAS_STATUS_SUCCESS)
    return fail(err, FCO_ERR_CUDA, "%s: cublasSetStream/Workspace: %s", who, blas_status(st));
  out->h = d.h;
  out->workspace = slot != nullptr;
  out->lock = std::move(lock);
  return FCO_OK;
}

}  // namespace fco

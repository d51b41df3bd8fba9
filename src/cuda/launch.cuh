/*
 * launch.cuh — host-side helpers shared by the launchers of src/cuda (.cu files): error messages into
 * the caller's err buffer, CUDA error mapping (clearing the sticky-less error state), the
 * current device's SM count and cached co-residency limits of a kernel. Implemented in
 * device.cu (except the per-kernel template). Not part of the transport contract.
 */
#ifndef FCO_CUDA_LAUNCH_CUH_
#define FCO_CUDA_LAUNCH_CUH_

#include <cuda_runtime.h>
#include <stdio.h>

#include <atomic>

#include "../core/internal.h"

namespace fco {

constexpr int kMaxDevices = 64;

/* snprintf into err (FCO_ERRMSG_LEN, may be NULL); returns code. */
fco_result_t fail(char* err, fco_result_t code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* FCO_ERR_CUDA with "<what>: <cuda error name>: <string>"; clears the error (cudaGetLastError)
 * so a non-sticky failure does not leak into the next call. */
fco_result_t cuda_fail(char* err, cudaError_t ce, const char* what);

/* Current device and its SM count (cached per device). */
fco_result_t current_device(char* err, int* device, int* num_sms);

/* Let kKernel use smem bytes of dynamic shared memory (beyond the default 48 KB, static +
 * dynamic, a kernel must opt in; the attribute is per device): once per device, for the
 * largest smem it is ever given. */
template <auto kKernel>
fco_result_t opt_in_smem(int device, int smem, char* err) {
  static std::atomic<int> opted[kMaxDevices];
  if (device >= 0 && device < kMaxDevices && opted[device].load()) return FCO_OK;
  cudaError_t ce = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaFuncSetAttribute (max dynamic shared memory)");
  if (device >= 0 && device < kMaxDevices) opted[device].store(1);
  return FCO_OK;
}

/* Load kernels on the current device now (cudaFuncGetAttributes), so none of them is first
 * launched while a kernel of ours spins on a peer: with CUDA_MODULE_LOADING=LAZY that first
 * launch would load the module, which may wait for the spinning kernel (a deadlock until the
 * timeout). No per-device memo: callers keep their own "done" flag. */
inline fco_result_t load_kernels(char* err, const void* const* fns, int n, const char* what) {
  cudaFuncAttributes fa;
  for (int i = 0; i < n; i++) {
    cudaError_t ce = cudaFuncGetAttributes(&fa, fns[i]);
    if (ce != cudaSuccess) return cuda_fail(err, ce, what);
  }
  return FCO_OK;
}

/* Blocks of `kKernel` at `threads` threads and `smem` bytes of dynamic shared memory that fit
 * on the device at once (occupancy × SMs), cached per (kernel, device): a kernel is always
 * launched with the same smem. 0 means it cannot launch at all. */
template <auto kKernel>
fco_result_t max_coresident_blocks(char* err, int device, int num_sms, int threads, int* blocks,
                                   size_t smem = 0) {
  static std::atomic<int> cache[kMaxDevices]; /* 0 = not computed; benign duplicate work */
  int per_sm = device >= 0 && device < kMaxDevices ? cache[device].load() : 0;
  if (per_sm == 0) {
    cudaError_t ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (per_sm > 0 && device >= 0 && device < kMaxDevices) cache[device].store(per_sm);
  }
  *blocks = per_sm * num_sms;
  return FCO_OK;
}

/* Host, fco_last_plan: a value over a launch's local ranks, written "x" or "lo..hi" ("-" when
 * nothing was added). */
struct PlanSpan {
  long long lo = 0, hi = -1;
  bool empty() const { return hi < lo; }
  void add(long long x) {
    if (empty()) lo = hi = x;
    else {
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    }
  }
  const char* str(char* b, size_t n) const {
    if (empty()) snprintf(b, n, "-");
    else if (lo == hi) snprintf(b, n, "%lld", lo);
    else snprintf(b, n, "%lld..%lld", lo, hi);
    return b;
  }
};

}  // namespace fco

#endif /* FCO_CUDA_LAUNCH_CUH_ */

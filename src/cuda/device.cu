/*
 * device.cu — small host helpers of the CUDA backend: the device count that never fails
 * (no driver → 0), and the launch helpers of launch.cuh (error text, SM count cache).
 */
#include <stdarg.h>
#include <stdio.h>

#include <atomic>

#include "cuda_ops.h"
#include "launch.cuh"

extern "C" int fco_cuda_device_count(void) {
  int n = 0;
  cudaError_t ce = cudaGetDeviceCount(&n);
  if (ce != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver / no GPU: not an error for the caller */
    return 0;
  }
  return n;
}

namespace fco {

fco_result_t fail(char* err, fco_result_t code, const char* fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, FCO_ERRMSG_LEN, fmt, ap);
    va_end(ap);
  }
  return code;
}

fco_result_t cuda_fail(char* err, cudaError_t ce, const char* what) {
  (void)cudaGetLastError();
  return fail(err, FCO_ERR_CUDA, "%s: %s: %s", what, cudaGetErrorName(ce), cudaGetErrorString(ce));
}

fco_result_t current_device(char* err, int* device, int* num_sms) {
  static std::atomic<int> sms_cache[kMaxDevices];
  cudaError_t ce = cudaGetDevice(device);
  if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaGetDevice");
  int n = *device < kMaxDevices ? sms_cache[*device].load() : 0;
  if (n == 0) {
    ce = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, *device);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaDeviceGetAttribute(MultiProcessorCount)");
    if (*device < kMaxDevices) sms_cache[*device].store(n);
  }
  *num_sms = n;
  return FCO_OK;
}

}  // namespace fco
